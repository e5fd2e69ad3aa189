/* The envd role process: hearth's binary started as ENVD_ARGV0 by
 * agent/envd/envd.c, with the listening socket and its links to hearth. One
 * thread, one libev loop; nothing here blocks, and every buffer has a
 * bound (envd.max_header_bytes, the RPC body, each connection's output
 * queue, envd.max_connections). */
#include "envd.h"
#include "envd_role.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cJSON.h>

#include "jsonalloc.h"
#include "jsonout.h"
#include "rpc.h"

#define LINK_LINE_MAX (16 * 1024 * 1024) /* envd.config carries the accounts */
#define READ_CHUNK 65536

struct role_cfg RC;
struct ev_loop *role_loop;

struct call {
    uint64_t id;
    call_fn fn;
    void *ctx;
    struct call *next;
};

struct link {
    int fd;
    ev_io rio, wio;
    struct linebuf in;
    struct bytebuf out;
    struct call *head, *tail;
    unsigned pending;
    bool dead;
};

static struct link links[ENVD_LINKS];
static uint64_t next_id = 1;
static ev_io accept_io;
static int listen_fd = ENVD_LISTEN_FD;
static struct conn *conns;
static size_t n_conns;
static ev_prepare reap_prepare;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    dprintf(2, "hearth-envd: %s\n", buf);
}

/* ---------------- users ---------------- */

int role_user_find(const char *name, struct role_user *u)
{
    const cJSON *alias = cJSON_GetObjectItemCaseSensitive(RC.aliases, name);
    if (cJSON_IsString(alias))
        name = alias->valuestring;
    const cJSON *e;
    cJSON_ArrayForEach(e, RC.passwd) {
        const cJSON *n = cJSON_GetArrayItem(e, 0);
        if (!cJSON_IsString(n) || strcmp(n->valuestring, name) != 0)
            continue;
        snprintf(u->name, sizeof(u->name), "%s", name);
        u->uid = (uid_t)cJSON_GetArrayItem(e, 1)->valuedouble;
        u->gid = (gid_t)cJSON_GetArrayItem(e, 2)->valuedouble;
        snprintf(u->home, sizeof(u->home), "%s", cJSON_GetArrayItem(e, 3)->valuestring);
        return 0;
    }
    return -1;
}

static const char *id_name(const cJSON *table, int pos, unsigned id, char *buf, size_t n)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, table) {
        const cJSON *v = cJSON_GetArrayItem(e, pos);
        if (cJSON_IsNumber(v) && (unsigned)v->valuedouble == id)
            return cJSON_GetArrayItem(e, 0)->valuestring;
    }
    snprintf(buf, n, "%u", id);
    return buf;
}

const char *role_uid_name(uid_t uid, char *buf, size_t n) { return id_name(RC.passwd, 1, uid, buf, n); }
const char *role_gid_name(gid_t gid, char *buf, size_t n) { return id_name(RC.group, 1, gid, buf, n); }

/* ---------------- links to hearth ---------------- */

static void link_flush(struct link *l)
{
    int r = bytebuf_write(l->fd, &l->out);
    if (r < 0 && errno != EAGAIN) {
        say("link to hearth: %s", strerror(errno));
        exit(1);
    }
    if (r == 0)
        ev_io_start(role_loop, &l->wio);
    else
        ev_io_stop(role_loop, &l->wio);
    if (!bytebuf_pending(&l->out) && l->out.cap > 4 * READ_CHUNK)
        bytebuf_release(&l->out);
}

int role_call(const char *method, cJSON *params, call_fn fn, void *ctx)
{
    struct link *best = NULL;
    for (int i = 0; i < ENVD_LINKS; i++)
        if (!links[i].dead && (!best || links[i].pending < best->pending))
            best = &links[i];
    struct call *k = calloc(1, sizeof(*k));
    cJSON *msg = cJSON_CreateObject();
    if (!best || !k || !msg) {
        free(k);
        cJSON_Delete(msg);
        cJSON_Delete(params);
        return -1;
    }
    k->id = next_id++;
    k->fn = fn;
    k->ctx = ctx;
    cJSON_AddStringToObject(msg, "jsonrpc", "2.0");
    cJSON_AddNumberToObject(msg, "id", (double)k->id);
    cJSON_AddStringToObject(msg, "method", method);
    if (params)
        cJSON_AddItemToObject(msg, "params", params);
    char *t = jsonout_print(msg);
    cJSON_Delete(msg);
    if (!t) {
        free(k);
        return -1;
    }
    size_t n = strlen(t);
    size_t need = bytebuf_pending(&best->out) + n + 1;
    if (bytebuf_room(&best->out) < n + 1) {
        bytebuf_compact(&best->out);
        if (bytebuf_room(&best->out) < n + 1 &&
            bytebuf_resize(&best->out, bytebuf_grown_cap(best->out.cap, READ_CHUNK, need,
                                                         SIZE_MAX)) < 0) {
            cJSON_free(t);
            free(k);
            return -1;
        }
    }
    bytebuf_put(&best->out, t, n);
    bytebuf_put(&best->out, "\n", 1);
    cJSON_free(t);
    if (best->tail)
        best->tail->next = k;
    else
        best->head = k;
    best->tail = k;
    best->pending++;
    link_flush(best);
    return 0;
}

void role_cancel(void *ctx)
{
    for (int i = 0; i < ENVD_LINKS; i++)
        for (struct call *k = links[i].head; k; k = k->next)
            if (k->ctx == ctx)
                k->fn = NULL;
}

static void take_config(cJSON *p)
{
    const cJSON *v;
#define STR(field, key)                                                                            \
    if (cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(p, key)))                              \
        snprintf(RC.field, sizeof(RC.field), "%s", v->valuestring);
#define NUM(field, key)                                                                            \
    if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(p, key)))                              \
        RC.field = (int64_t)v->valuedouble;
    STR(user, "user");
    STR(cwd, "cwd");
    STR(token, "access_token");
    NUM(max_header_bytes, "max_header_bytes");
    NUM(max_connections, "max_connections");
    NUM(max_streams, "max_streams");
    NUM(max_upload_bytes, "max_upload_bytes");
    NUM(watcher_idle_ms, "watcher_idle_ms");
#undef STR
#undef NUM
    cJSON_Delete(RC.aliases);
    cJSON_Delete(RC.passwd);
    cJSON_Delete(RC.group);
    cJSON *envs = cJSON_DetachItemFromObjectCaseSensitive(p, "envs");
    if (cJSON_IsObject(envs)) {
        cJSON_Delete(RC.envs);
        RC.envs = envs;
    } else {
        cJSON_Delete(envs);
    }
    RC.aliases = cJSON_DetachItemFromObjectCaseSensitive(p, "users");
    RC.passwd = cJSON_DetachItemFromObjectCaseSensitive(p, "passwd");
    RC.group = cJSON_DetachItemFromObjectCaseSensitive(p, "group");
    RC.have = true;
}

static void link_line(struct link *l, const char *line, size_t len)
{
    cJSON *m = cJSON_ParseWithLength(line, len);
    if (!m) {
        say("link to hearth: a line that is not JSON");
        return;
    }
    const cJSON *method = cJSON_GetObjectItemCaseSensitive(m, "method");
    cJSON *params = cJSON_GetObjectItemCaseSensitive(m, "params");
    if (cJSON_IsString(method)) {
        if (strcmp(method->valuestring, "envd.config") == 0)
            take_config(params);
        else if (strcmp(method->valuestring, "exec.output") == 0)
            ops_exec_output(params);
        else if (strcmp(method->valuestring, "exec.exit") == 0)
            ops_exec_exit(params);
        cJSON_Delete(m);
        return;
    }
    struct call *k = l->head;
    if (!k) {
        cJSON_Delete(m);
        return;
    }
    /* hearth answers each link in request order. */
    l->head = k->next;
    if (!l->head)
        l->tail = NULL;
    l->pending--;
    cJSON *result = cJSON_GetObjectItemCaseSensitive(m, "result");
    const cJSON *error = cJSON_GetObjectItemCaseSensitive(m, "error");
    if (k->fn) {
        if (result)
            k->fn(k->ctx, result, 0, NULL);
        else {
            const cJSON *code = cJSON_GetObjectItemCaseSensitive(error, "code");
            const cJSON *msg = cJSON_GetObjectItemCaseSensitive(error, "message");
            k->fn(k->ctx, NULL, cJSON_IsNumber(code) ? code->valueint : -32603,
                  cJSON_IsString(msg) ? msg->valuestring : "no answer");
        }
    }
    free(k);
    cJSON_Delete(m);
}

static void link_read_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    struct link *l = w->data;
    for (int round = 0; round < 16; round++) {
        size_t space = linebuf_space(&l->in);
        if (space > READ_CHUNK)
            space = READ_CHUNK;
        if (!space) {
            say("link to hearth: a line over %d bytes", LINK_LINE_MAX);
            exit(1);
        }
        ssize_t n = read(l->fd, linebuf_tail(&l->in), space);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            break;
        if (n <= 0) {
            /* hearth went, or dropped the link: nothing is left to serve
             * with; hearth starts a new role process. */
            say("link to hearth closed");
            exit(0);
        }
        linebuf_commit(&l->in, (size_t)n);
        const char *line;
        size_t len;
        int r;
        while ((r = linebuf_next(&l->in, &line, &len)) == 1)
            link_line(l, line, len);
        if (r < 0) {
            say("link to hearth: a line over %d bytes", LINK_LINE_MAX);
            exit(1);
        }
        linebuf_shrink(&l->in);
    }
}

static void link_write_cb(struct ev_loop *loop, ev_io *w, int revents) { link_flush(w->data); }

/* ---------------- HTTP connections ---------------- */

static void conn_close(struct conn *c);
static void conn_advance(struct conn *c);
static void conn_flush(struct conn *c);

size_t conn_out_pending(const struct conn *c) { return bytebuf_pending(&c->out); }

static void set_reading(struct conn *c, bool on)
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
        conn_close(c);
        return -1;
    }
    if (bytebuf_room(&c->out) < n) {
        bytebuf_compact(&c->out);
        if (bytebuf_room(&c->out) < n &&
            bytebuf_resize(&c->out, bytebuf_grown_cap(c->out.cap, 4096, bytebuf_pending(&c->out) + n,
                                                      ROLE_OUT_MAX + 65536)) < 0) {
            conn_close(c);
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
        set_reading(c, false);
    } else {
        c->state = C_HEAD;
    }
    bytebuf_release(&c->body);
    conn_flush(c);
    if (!c->dead && c->state == C_HEAD)
        conn_advance(c);
}

void http_respond(struct conn *c, int status, const char *ctype, const char *body, size_t len)
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

void http_error(struct conn *c, int status, const char *fmt, ...)
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
    http_respond(c, status, "application/json", t ? t : "{}", t ? strlen(t) : 2);
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

const char *connect_code_of(int rpc_code, const char *message)
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

int stream_send(struct conn *c, const char *json, size_t len)
{
    if (c->dead)
        return -1;
    stream_head(c);
    if (envelope(c, 0, json, len) < 0)
        return -1;
    conn_flush(c);
    return c->dead ? -1 : 0;
}

void stream_end(struct conn *c, const char *code, const char *message)
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

void connect_error(struct conn *c, const char *code, const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (c->stream_json) {
        stream_end(c, code, msg);
        return;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "code", code);
    cJSON_AddStringToObject(o, "message", msg);
    char *t = jsonout_print(o);
    cJSON_Delete(o);
    http_respond(c, connect_status(code), "application/json", t ? t : "{}", t ? strlen(t) : 2);
    cJSON_free(t);
}

void connect_reply(struct conn *c, cJSON *msg)
{
    char *t = msg ? jsonout_print(msg) : NULL;
    cJSON_Delete(msg);
    if (!t) {
        connect_error(c, "internal", "out of memory");
        return;
    }
    http_respond(c, 200, "application/json", t, strlen(t));
    cJSON_free(t);
}

void http_chunked_head(struct conn *c, int status, const char *ctype)
{
    out_printf(c, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nTransfer-Encoding: chunked\r\n%s\r\n",
               status, reason(status), ctype, c->req.close ? "Connection: close\r\n" : "");
}

void http_chunk(struct conn *c, const char *data, size_t len)
{
    if (!len)
        return;
    if (out_printf(c, "%zx\r\n", len) < 0 || out_put(c, data, len) < 0 || out_put(c, "\r\n", 2) < 0)
        return;
    conn_flush(c);
}

void http_chunked_end(struct conn *c)
{
    out_put(c, "0\r\n\r\n", 5);
    request_done(c);
}

static void reap_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
    struct conn **pp = &conns;
    while (*pp) {
        struct conn *c = *pp;
        if (c->dead) {
            *pp = c->next;
            free(c);
        } else {
            pp = &c->next;
        }
    }
}

static void conn_close(struct conn *c)
{
    if (c->dead)
        return;
    c->dead = true;
    ev_io_stop(role_loop, &c->rio);
    ev_io_stop(role_loop, &c->wio);
    ev_timer_stop(role_loop, &c->idle);
    ev_timer_stop(role_loop, &c->keepalive);
    close(c->fd);
    role_cancel(c);
    ops_conn_gone(c);
    if (c->op_free && c->op)
        c->op_free(c->op);
    c->op = NULL;
    bytebuf_release(&c->in);
    bytebuf_release(&c->out);
    bytebuf_release(&c->body);
    n_conns--;
}

static void conn_flush(struct conn *c)
{
    if (c->dead)
        return;
    int r = bytebuf_write(c->fd, &c->out);
    if (r < 0 && errno != EAGAIN) {
        conn_close(c);
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

static void write_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    struct conn *c = w->data;
    conn_flush(c);
    if (!c->dead && conn_out_pending(c) < ROLE_OUT_SOFT)
        ops_conn_room(c);
}

int body_take(struct conn *c, struct bytebuf *dst, size_t cap)
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
        int r = chunked_next(&c->ck, in, lim, &used, &off, &len);
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

static bool token_ok(const struct http_req *r)
{
    if (!RC.token[0])
        return true;
    if (!r->has_token)
        return false;
    /* Constant time over the configured token's length. */
    size_t n = strlen(RC.token), m = strlen(r->token);
    unsigned diff = (unsigned)(n ^ m);
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)RC.token[i] ^ (unsigned char)(i < m ? r->token[i] : 0);
    return diff == 0;
}

static int percent_decode(const char *s, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int ch = (unsigned char)s[i];
        if (ch == '%') {
            char hex[3] = {0};
            if (i + 2 >= n)
                return -1;
            hex[0] = s[i + 1];
            hex[1] = s[i + 2];
            char *e;
            long v = strtol(hex, &e, 16);
            if (*e || v == 0)
                return -1;
            ch = (int)v;
            i += 2;
        }
        if (o + 1 >= cap)
            return -1;
        out[o++] = (char)ch;
    }
    out[o] = 0;
    return 0;
}

/* The RPC body is in: unwrap it and run the method. */
static void rpc_ready(struct conn *c)
{
    const char *svc = c->path + 1, *slash = strrchr(c->path, '/');
    char service[64];
    size_t sl = (size_t)(slash - svc);
    if (sl >= sizeof(service)) {
        connect_error(c, "unimplemented", "no procedure %s", c->path);
        return;
    }
    memcpy(service, svc, sl);
    service[sl] = 0;
    const char *body = bytebuf_head(&c->body);
    size_t blen = bytebuf_pending(&c->body);
    if (c->stream_json) {
        uint8_t flags;
        size_t ml;
        long whole = connect_envelope((const uint8_t *)body, blen, ROLE_RPC_BODY_MAX, &flags, &ml);
        if (whole <= 0 || (size_t)whole != blen || (flags & 0x01)) {
            connect_error(c, "invalid_argument", "expected one uncompressed envelope");
            return;
        }
        body += 5;
        blen = ml;
    }
    cJSON *msg = blen ? cJSON_ParseWithLength(body, blen) : cJSON_CreateObject();
    if (!cJSON_IsObject(msg)) {
        cJSON_Delete(msg);
        connect_error(c, "invalid_argument", "the request is not a JSON object");
        return;
    }
    const char *name = c->req.has_basic ? c->req.basic_user : RC.user;
    if (role_user_find(name, &c->user) < 0) {
        cJSON_Delete(msg);
        connect_error(c, "invalid_argument", "no user %.64s in the image (envd.users maps names)",
                      name);
        return;
    }
    c->state = C_WORK;
    ops_rpc(c, service, slash + 1, msg);
}

static void body_progress(struct conn *c)
{
    if (c->op && !c->stream_json && strcmp(c->path, "/files") == 0) {
        ops_files_post_more(c);
        return;
    }
    /* The one client stream: its messages are taken as they come. */
    if (c->stream_json && strcmp(c->path, "/process.Process/StreamInput") == 0) {
        ops_stream_input(c);
        return;
    }
    if (body_take(c, &c->body, ROLE_RPC_BODY_MAX + 1) < 0) {
        c->body_done = false;
        http_error(c, 400, "bad chunked body");
        return;
    }
    if (bytebuf_pending(&c->body) > ROLE_RPC_BODY_MAX) {
        c->body_done = false;
        connect_error(c, "resource_exhausted", "request body over %d bytes", ROLE_RPC_BODY_MAX);
        return;
    }
    if (c->body_done && !strcmp(c->path, "/init")) {
        c->state = C_WORK;
        ops_init(c);
    } else if (c->body_done) {
        rpc_ready(c);
    }
}

static void dispatch_head(struct conn *c)
{
    struct http_req *r = &c->req;
    const char *q = strchr(r->target, '?');
    c->query = q ? q + 1 : "";
    c->body_done = !r->chunked && r->content_length <= 0;
    c->body_left = r->content_length > 0 ? r->content_length : 0;
    memset(&c->ck, 0, sizeof(c->ck));
    c->body_total = 0;
    c->stream_json = false;
    c->stream_open = false;
    if (percent_decode(r->target, q ? (size_t)(q - r->target) : strlen(r->target), c->path,
                       sizeof(c->path)) < 0) {
        http_error(c, 400, "bad path");
        return;
    }
    bool is_get = strcmp(r->method, "GET") == 0, is_post = strcmp(r->method, "POST") == 0;
    if (strcmp(c->path, "/health") == 0) {
        if (!is_get) {
            http_error(c, 405, "use GET");
            return;
        }
        http_respond(c, 204, NULL, NULL, 0);
        return;
    }
    /* /init may carry the token in its body instead (envd's rule):
     * hearth checks it there (envd.init). */
    bool init = strcmp(c->path, "/init") == 0;
    if (!init && !token_ok(r)) {
        http_error(c, 401, "invalid access token");
        return;
    }
    if (!RC.have) {
        http_error(c, 503, "not ready");
        return;
    }
    if (init || !strcmp(c->path, "/envs") || !strcmp(c->path, "/metrics")) {
        if (init ? !is_post : !is_get) {
            http_error(c, 405, "use %s", init ? "POST" : "GET");
            return;
        }
        if (!init && !c->body_done) {
            http_error(c, 400, "a GET with a body");
            return;
        }
        if (r->expect_continue && !c->body_done)
            out_printf(c, "HTTP/1.1 100 Continue\r\n\r\n");
        c->state = init ? C_BODY : C_WORK;
        if (init)
            body_progress(c);
        else if (!strcmp(c->path, "/envs"))
            ops_envs(c);
        else
            ops_metrics(c);
        return;
    }
    if (r->expect_continue && !c->body_done)
        out_printf(c, "HTTP/1.1 100 Continue\r\n\r\n");
    if (strcmp(c->path, "/files") == 0) {
        if (is_get) {
            if (!c->body_done) {
                http_error(c, 400, "a GET with a body");
                return;
            }
            c->state = C_WORK;
            ops_files_get(c);
        } else if (is_post) {
            c->state = C_BODY;
            ops_files_post(c);
        } else {
            http_error(c, 405, "use GET or POST");
        }
        return;
    }
    /* Connect: POST /package.Service/Method */
    const char *slash = strrchr(c->path, '/');
    if (is_post && slash && slash != c->path && strchr(c->path + 1, '.') &&
        strchr(c->path + 1, '/') == slash) {
        if (!strncasecmp(r->content_type, "application/connect+json", 24)) {
            c->stream_json = true;
        } else if (strncasecmp(r->content_type, "application/json", 16) != 0) {
            http_error(c, 415, "expected application/json or application/connect+json");
            return;
        }
        if (r->content_encoding[0] && strcasecmp(r->content_encoding, "identity") != 0) {
            connect_error(c, "unimplemented", "Content-Encoding %s is not supported",
                          r->content_encoding);
            return;
        }
        c->state = C_BODY;
        body_progress(c);
        return;
    }
    http_error(c, 404, "no route %s %s", r->method, c->path);
}

/* Parses what the buffer holds: a head, then its body. */
static void conn_advance(struct conn *c)
{
    while (!c->dead && c->state == C_HEAD && bytebuf_pending(&c->in)) {
        int status = 400;
        char why[160];
        long hl = http_parse_head(bytebuf_head(&c->in), bytebuf_pending(&c->in),
                                  (size_t)RC.max_header_bytes, &c->req, &status, why, sizeof(why));
        if (hl == 0)
            break;
        if (hl < 0) {
            memset(&c->req, 0, sizeof(c->req));
            c->req.close = true;
            c->body_done = false;
            http_error(c, status, "%s", why);
            return;
        }
        c->in.off += (size_t)hl;
        ev_timer_stop(role_loop, &c->idle);
        dispatch_head(c);
    }
    if (!c->dead && c->state == C_BODY)
        body_progress(c);
    if (c->dead)
        return;
    if (c->state == C_HEAD) {
        ev_timer_again(role_loop, &c->idle);
        if (!bytebuf_pending(&c->in) && c->in.cap > 64 * 1024)
            bytebuf_release(&c->in);
    }
    /* Read while a head or a body is wanted, and in a stream (to see the
     * client go); never buffer past a head and a read. */
    bool want = c->state != C_CLOSING && c->state != C_WORK && !c->half_closed &&
                bytebuf_pending(&c->in) < (size_t)RC.max_header_bytes + READ_CHUNK;
    set_reading(c, want);
}

void conn_read_more(struct conn *c) { conn_advance(c); }
void conn_abort(struct conn *c) { conn_close(c); }

static void read_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    struct conn *c = w->data;
    if (bytebuf_room(&c->in) < READ_CHUNK) {
        bytebuf_compact(&c->in);
        if (bytebuf_room(&c->in) < READ_CHUNK &&
            bytebuf_resize(&c->in, c->in.len + READ_CHUNK) < 0) {
            conn_close(c);
            return;
        }
    }
    if (c->lingering) {
        char sink[READ_CHUNK];
        ssize_t k = read(c->fd, sink, sizeof(sink));
        if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR))
            conn_close(c);
        return;
    }
    ssize_t n = read(c->fd, bytebuf_tail(&c->in), READ_CHUNK);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n == 0 && c->state == C_STREAM) {
        /* A client that only shut its sending side still reads the
         * stream; one that is gone fails the next write. */
        c->half_closed = true;
        set_reading(c, false);
        return;
    }
    if (n <= 0) {
        conn_close(c);
        return;
    }
    if (c->state == C_STREAM) {
        /* Nothing more is asked on a stream's connection. */
        return;
    }
    c->in.len += (size_t)n;
    conn_advance(c);
}

static void idle_cb(struct ev_loop *loop, ev_timer *w, int revents) { conn_close(w->data); }
static void keepalive_cb(struct ev_loop *loop, ev_timer *w, int revents) { ops_keepalive(w->data); }

static void accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    for (int i = 0; i < 64; i++) {
        int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        if (n_conns >= (size_t)RC.max_connections) {
            static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: "
                                       "application/json\r\nContent-Length: 52\r\nConnection: "
                                       "close\r\n\r\n{\"code\":503,\"message\":\"too many connections\"}  ";
            ssize_t wr = write(fd, busy, sizeof(busy) - 1);
            (void)wr;
            close(fd);
            continue;
        }
        struct conn *c = calloc(1, sizeof(*c));
        if (!c) {
            close(fd);
            continue;
        }
        c->fd = fd;
        ev_io_init(&c->rio, read_cb, fd, EV_READ);
        ev_io_init(&c->wio, write_cb, fd, EV_WRITE);
        ev_init(&c->idle, idle_cb);
        c->idle.repeat = ROLE_IDLE_MS / 1000.;
        ev_init(&c->keepalive, keepalive_cb);
        c->rio.data = c->wio.data = c->idle.data = c->keepalive.data = c;
        c->next = conns;
        conns = c;
        n_conns++;
        c->state = C_HEAD;
        ev_timer_again(role_loop, &c->idle);
        set_reading(c, true);
    }
}

int envd_role_main(int argc, char **argv)
{
    jsonalloc_install();
    RC.max_header_bytes = 16384;
    RC.max_connections = 64;
    RC.max_streams = 32;
    RC.watcher_idle_ms = 300000;
    role_loop = ev_loop_new(EVBACKEND_EPOLL | EVFLAG_NOENV | EVFLAG_NOSIGMASK);
    if (!role_loop) {
        say("unable to create the loop: %s", strerror(errno));
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    fcntl(listen_fd, F_SETFL, O_NONBLOCK);
    for (int i = 0; i < ENVD_LINKS; i++) {
        struct link *l = &links[i];
        l->fd = ENVD_LINK_FD0 + i;
        fcntl(l->fd, F_SETFD, FD_CLOEXEC);
        fcntl(l->fd, F_SETFL, O_NONBLOCK);
        linebuf_init(&l->in, LINK_LINE_MAX);
        ev_io_init(&l->rio, link_read_cb, l->fd, EV_READ);
        ev_io_init(&l->wio, link_write_cb, l->fd, EV_WRITE);
        l->rio.data = l->wio.data = l;
        ev_io_start(role_loop, &l->rio);
    }
    fcntl(listen_fd, F_SETFD, FD_CLOEXEC);
    ev_io_init(&accept_io, accept_cb, listen_fd, EV_READ);
    ev_io_start(role_loop, &accept_io);
    watch_init();
    api_init();
    ev_prepare_init(&reap_prepare, reap_cb);
    ev_prepare_start(role_loop, &reap_prepare);
    ev_run(role_loop, 0);
    return 0;
}

void role_keepalive_start(struct conn *c, double seconds)
{
    ev_timer_set(&c->keepalive, seconds, seconds);
    ev_timer_start(role_loop, &c->keepalive);
}
