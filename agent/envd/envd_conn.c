/* An envd connection's answers, for the routes and the loop alike:
 * whole responses, Connect errors and replies, server streams' envelopes,
 * chunked downloads, the request body taken as it comes, and the close.
 * What this needs of the loop above it (read on once an answer is out,
 * and a connection that went) is handed down as hooks (conn_set_hooks):
 * the routes answer through here and never call the loop. */
#include "envd_role.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cJSON.h>

#include "jsonout.h"

unsigned conn_streams;

static struct conn_hooks hooks;

void conn_set_hooks(const struct conn_hooks *h) { hooks = *h; }

size_t conn_out_pending(const struct conn *c) { return bytebuf_pending(&c->out); }

void conn_set_reading(struct conn *c, bool on)
{
    if (c->dead || c->lingering || on == c->reading)
        return;
    c->reading = on;
    if (on)
        ev_io_start(role_loop, &c->rio);
    else
        ev_io_stop(role_loop, &c->rio);
}

static int out_put(struct conn *c, const void *data, size_t n)
{
    if (c->dead)
        return -1;
    if (bytebuf_pending(&c->out) + n > ROLE_OUT_MAX) {
        /* A client that takes nothing while its stream grows. */
        conn_abort(c);
        return -1;
    }
    if (bytebuf_room(&c->out) < n) {
        bytebuf_compact(&c->out);
        if (bytebuf_room(&c->out) < n &&
            bytebuf_resize(&c->out, bytebuf_grown_cap(c->out.cap, 4096, bytebuf_pending(&c->out) + n,
                                                      ROLE_OUT_MAX + 65536)) < 0) {
            conn_abort(c);
            return -1;
        }
    }
    bytebuf_put(&c->out, data, n);
    return 0;
}

static int out_printf(struct conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int out_printf(struct conn *c, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof(buf))
        return -1;
    return out_put(c, buf, (size_t)n);
}

static const char *reason(int status)
{
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 417: return "Expectation Failed";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 499: return "Client Closed Request";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return status < 500 ? "Bad Request" : "Internal Server Error";
    }
}

/* The request is answered: read on (keep-alive) once its body is in, or
 * close when the client asked to or its body was left unread. */
static void request_done(struct conn *c)
{
    if (c->op_free && c->op)
        c->op_free(c->op);
    c->op = NULL;
    c->op_free = NULL;
    if (c->req.close || !c->body_done) {
        c->state = C_CLOSING;
        conn_set_reading(c, false);
    } else {
        c->state = C_HEAD;
    }
    bytebuf_release(&c->body);
    conn_flush(c);
    if (!c->dead && c->state == C_HEAD)
        hooks.advance(c);
}

void conn_respond(struct conn *c, int status, const char *ctype, const char *body, size_t len)
{
    if (c->dead)
        return;
    bool close = c->req.close || !c->body_done;
    out_printf(c, "HTTP/1.1 %d %s\r\n", status, reason(status));
    if (ctype)
        out_printf(c, "Content-Type: %s\r\n", ctype);
    if (status != 204 && status != 304)
        out_printf(c, "Content-Length: %zu\r\n", len);
    out_printf(c, "%s\r\n", close ? "Connection: close\r\n" : "");
    if (len)
        out_put(c, body, len);
    request_done(c);
}

void conn_http_error(struct conn *c, int status, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "code", status);
    cJSON_AddStringToObject(o, "message", msg);
    char *t = jsonout_print(o);
    cJSON_Delete(o);
    conn_respond(c, status, "application/json", t ? t : "{}", t ? strlen(t) : 2);
    cJSON_free(t);
}

static int connect_status(const char *code)
{
    static const struct { const char *code; int status; } map[] = {
        {"canceled", 499},          {"unknown", 500},          {"invalid_argument", 400},
        {"deadline_exceeded", 504}, {"not_found", 404},        {"already_exists", 409},
        {"permission_denied", 403}, {"resource_exhausted", 429}, {"failed_precondition", 400},
        {"aborted", 409},           {"out_of_range", 400},     {"unimplemented", 501},
        {"internal", 500},          {"unavailable", 503},      {"data_loss", 500},
        {"unauthenticated", 401},
    };
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (strcmp(map[i].code, code) == 0)
            return map[i].status;
    return 500;
}

const char *conn_connect_code(int rpc_code, const char *message)
{
    switch (rpc_code) {
    case -32002: return "not_found";
    case -32602: return "invalid_argument";
    case -32001: return "resource_exhausted";
    case -32003: return "failed_precondition";
    case -32601: return "unimplemented";
    default: break;
    }
    if (message && strstr(message, "No such file or directory"))
        return "not_found";
    if (message && strstr(message, "File exists"))
        return "already_exists";
    if (message && (strstr(message, "Not a directory") || strstr(message, "Is a directory") ||
                    strstr(message, "not a directory")))
        return "invalid_argument";
    if (message && strstr(message, "Permission denied"))
        return "permission_denied";
    return "internal";
}

static void stream_head(struct conn *c)
{
    if (c->stream_open)
        return;
    c->stream_open = true;
    out_printf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/connect+json\r\n"
                  "Transfer-Encoding: chunked\r\n%s\r\n",
               c->req.close ? "Connection: close\r\n" : "");
}

static int envelope(struct conn *c, uint8_t flags, const char *json, size_t len)
{
    uint8_t h[5] = {flags, (uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8),
                    (uint8_t)len};
    if (out_printf(c, "%zx\r\n", len + 5) < 0 || out_put(c, h, 5) < 0 || out_put(c, json, len) < 0 ||
        out_put(c, "\r\n", 2) < 0)
        return -1;
    return 0;
}

int conn_stream_send(struct conn *c, const char *json, size_t len)
{
    if (c->dead)
        return -1;
    stream_head(c);
    if (envelope(c, 0, json, len) < 0)
        return -1;
    conn_flush(c);
    return c->dead ? -1 : 0;
}

void conn_stream_end(struct conn *c, const char *code, const char *message)
{
    if (c->dead)
        return;
    stream_head(c);
    ev_timer_stop(role_loop, &c->keepalive);
    cJSON *o = cJSON_CreateObject();
    if (code) {
        cJSON *e = cJSON_AddObjectToObject(o, "error");
        cJSON_AddStringToObject(e, "code", code);
        cJSON_AddStringToObject(e, "message", message ? message : code);
    }
    char *t = jsonout_print(o);
    cJSON_Delete(o);
    envelope(c, 0x02, t ? t : "{}", t ? strlen(t) : 2);
    cJSON_free(t);
    out_put(c, "0\r\n\r\n", 5);
    c->stream_open = false;
    request_done(c);
}

void conn_connect_error(struct conn *c, const char *code, const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (c->stream_json) {
        conn_stream_end(c, code, msg);
        return;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "code", code);
    cJSON_AddStringToObject(o, "message", msg);
    char *t = jsonout_print(o);
    cJSON_Delete(o);
    conn_respond(c, connect_status(code), "application/json", t ? t : "{}", t ? strlen(t) : 2);
    cJSON_free(t);
}

void conn_connect_reply(struct conn *c, cJSON *msg)
{
    char *t = msg ? jsonout_print(msg) : NULL;
    cJSON_Delete(msg);
    if (!t) {
        conn_connect_error(c, "internal", "out of memory");
        return;
    }
    conn_respond(c, 200, "application/json", t, strlen(t));
    cJSON_free(t);
}

void conn_chunked_head(struct conn *c, int status, const char *ctype)
{
    out_printf(c, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nTransfer-Encoding: chunked\r\n%s\r\n",
               status, reason(status), ctype, c->req.close ? "Connection: close\r\n" : "");
}

void conn_chunk(struct conn *c, const char *data, size_t len)
{
    if (!len)
        return;
    if (out_printf(c, "%zx\r\n", len) < 0 || out_put(c, data, len) < 0 || out_put(c, "\r\n", 2) < 0)
        return;
    conn_flush(c);
}

void conn_chunked_end(struct conn *c)
{
    out_put(c, "0\r\n\r\n", 5);
    request_done(c);
}

void conn_continue(struct conn *c) { out_printf(c, "HTTP/1.1 100 Continue\r\n\r\n"); }

void conn_abort(struct conn *c)
{
    if (c->dead)
        return;
    c->dead = true;
    ev_io_stop(role_loop, &c->rio);
    ev_io_stop(role_loop, &c->wio);
    ev_timer_stop(role_loop, &c->idle);
    ev_timer_stop(role_loop, &c->keepalive);
    close(c->fd);
    link_cancel(c);
    hooks.gone(c);
    if (c->op_free && c->op)
        c->op_free(c->op);
    c->op = NULL;
    bytebuf_release(&c->in);
    bytebuf_release(&c->out);
    bytebuf_release(&c->body);
}

void conn_flush(struct conn *c)
{
    if (c->dead)
        return;
    int r = bytebuf_write(c->fd, &c->out);
    if (r < 0 && errno != EAGAIN) {
        conn_abort(c);
        return;
    }
    if (r == 0) {
        if (!c->writing) {
            c->writing = true;
            ev_io_start(role_loop, &c->wio);
        }
        return;
    }
    if (c->writing) {
        c->writing = false;
        ev_io_stop(role_loop, &c->wio);
    }
    if (c->out.cap > 256 * 1024)
        bytebuf_release(&c->out);
    if (c->state == C_CLOSING && !c->lingering) {
        /* A lingering close: the answer is out, the request's unread
         * body is read and thrown away for a moment, so the client gets
         * the answer rather than a reset from a close with data unread. */
        shutdown(c->fd, SHUT_WR);
        c->lingering = true;
        c->reading = false;
        ev_io_start(role_loop, &c->rio);
        c->reading = true;
        ev_timer_stop(role_loop, &c->idle);
        ev_timer_set(&c->idle, 2., 0.);
        ev_timer_start(role_loop, &c->idle);
    }
}

void conn_read_more(struct conn *c) { hooks.advance(c); }

int conn_body_take(struct conn *c, struct bytebuf *dst, size_t cap)
{
    while (!c->body_done && bytebuf_pending(&c->in)) {
        size_t room = cap > bytebuf_pending(dst) ? cap - bytebuf_pending(dst) : 0;
        if (!room)
            return 0;
        if (bytebuf_room(dst) < room) {
            bytebuf_compact(dst);
            if (bytebuf_room(dst) < room && bytebuf_resize(dst, cap) < 0)
                return -1;
        }
        const char *in = bytebuf_head(&c->in);
        size_t avail = bytebuf_pending(&c->in);
        if (!c->req.chunked) {
            size_t k = avail < (uint64_t)c->body_left ? avail : (size_t)c->body_left;
            if (k > room)
                k = room;
            bytebuf_put(dst, in, k);
            c->in.off += k;
            c->body_left -= (int64_t)k;
            c->body_total += k;
            if (!c->body_left)
                c->body_done = true;
            continue;
        }
        size_t used, off = 0, len = 0;
        size_t lim = avail;
        int r = wire_chunked_next(&c->ck, in, lim, &used, &off, &len);
        if (r == CHUNK_ERROR)
            return -1;
        if (r == CHUNK_DATA && len > room) {
            /* Only what fits: the rest of the chunk stays for later. */
            c->ck.left += len - room;
            used -= len - room;
            len = room;
        }
        if (r == CHUNK_DATA)
            bytebuf_put(dst, in + off, len);
        c->in.off += used;
        c->body_total += r == CHUNK_DATA ? len : 0;
        if (r == CHUNK_DONE)
            c->body_done = true;
        if (r == CHUNK_NEED)
            break;
    }
    if (!c->req.chunked && c->body_left == 0)
        c->body_done = true;
    return 0;
}

void conn_keepalive_start(struct conn *c, double seconds)
{
    ev_timer_set(&c->keepalive, seconds, seconds);
    ev_timer_start(role_loop, &c->keepalive);
}
