/* The envd role process: hearth's binary started as ENVD_ARGV0 by
 * agent/envd/envd.c, with the listening socket and its links to hearth. One
 * thread, one libev loop; nothing here blocks, and every buffer has a
 * bound (envd.max_header_bytes, the RPC body, each connection's output
 * queue, envd.max_connections). This file is the loop: it accepts, reads
 * heads and bodies and runs the routes; the links (envd_link.c) and the
 * connections' answers (envd_conn.c) are below it and reach it only
 * through the hooks it hands them. */
#include "envd.h"
#include "envd_role.h"
#include "err.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cJSON.h>

#include "jsonalloc.h"

#define READ_CHUNK 65536

static ev_io accept_io;
static int listen_fd = ENVD_LISTEN_FD;
static struct conn *conns;
static size_t n_conns;
static ev_prepare reap_prepare;

/* hearth's notifications: the exec sessions' output and ends. */
static void on_note(const char *method, cJSON *params)
{
    if (strcmp(method, "exec.output") == 0)
        ops_exec_output(params);
    else if (strcmp(method, "exec.exit") == 0)
        ops_exec_exit(params);
}

/* ---------------- HTTP connections ---------------- */

static void conn_advance(struct conn *c);

/* A connection closed (conn_abort): its count, and its route's
 * subscription. */
static void conn_gone(struct conn *c)
{
    ops_conn_gone(c);
    n_conns--;
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

static void write_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    struct conn *c = w->data;
    conn_flush(c);
    if (!c->dead && conn_out_pending(c) < ROLE_OUT_SOFT)
        ops_conn_room(c);
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
        conn_connect_error(c, "unimplemented", "no procedure %s", c->path);
        return;
    }
    memcpy(service, svc, sl);
    service[sl] = 0;
    const char *body = bytebuf_head(&c->body);
    size_t blen = bytebuf_pending(&c->body);
    if (c->stream_json) {
        uint8_t flags;
        size_t ml;
        long whole = wire_connect_envelope((const uint8_t *)body, blen, ROLE_RPC_BODY_MAX, &flags, &ml);
        if (whole <= 0 || (size_t)whole != blen || (flags & 0x01)) {
            conn_connect_error(c, "invalid_argument", "expected one uncompressed envelope");
            return;
        }
        body += 5;
        blen = ml;
    }
    cJSON *msg = blen ? cJSON_ParseWithLength(body, blen) : cJSON_CreateObject();
    if (!cJSON_IsObject(msg)) {
        cJSON_Delete(msg);
        conn_connect_error(c, "invalid_argument", "the request is not a JSON object");
        return;
    }
    const char *name = c->req.has_basic ? c->req.basic_user : RC.user;
    if (link_user_find(name, &c->user) < 0) {
        cJSON_Delete(msg);
        conn_connect_error(c, "invalid_argument", "no user %.64s in the image (envd.users maps names)",
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
    if (conn_body_take(c, &c->body, ROLE_RPC_BODY_MAX + 1) < 0) {
        c->body_done = false;
        conn_http_error(c, 400, "bad chunked body");
        return;
    }
    if (bytebuf_pending(&c->body) > ROLE_RPC_BODY_MAX) {
        c->body_done = false;
        conn_connect_error(c, "resource_exhausted", "request body over %d bytes", ROLE_RPC_BODY_MAX);
        return;
    }
    if (c->body_done && !strcmp(c->path, "/init")) {
        c->state = C_WORK;
        api_post_init(c);
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
        conn_http_error(c, 400, "bad path");
        return;
    }
    bool is_get = strcmp(r->method, "GET") == 0, is_post = strcmp(r->method, "POST") == 0;
    if (strcmp(c->path, "/health") == 0) {
        if (!is_get) {
            conn_http_error(c, 405, "use GET");
            return;
        }
        conn_respond(c, 204, NULL, NULL, 0);
        return;
    }
    /* /init may carry the token in its body instead (envd's rule):
     * hearth checks it there (envd.init). */
    bool init = strcmp(c->path, "/init") == 0;
    if (!init && !token_ok(r)) {
        conn_http_error(c, 401, "invalid access token");
        return;
    }
    if (!RC.have) {
        conn_http_error(c, 503, "not ready");
        return;
    }
    if (init || !strcmp(c->path, "/envs") || !strcmp(c->path, "/metrics")) {
        if (init ? !is_post : !is_get) {
            conn_http_error(c, 405, "use %s", init ? "POST" : "GET");
            return;
        }
        if (!init && !c->body_done) {
            conn_http_error(c, 400, "a GET with a body");
            return;
        }
        if (r->expect_continue && !c->body_done)
            conn_continue(c);
        c->state = init ? C_BODY : C_WORK;
        if (init)
            body_progress(c);
        else if (!strcmp(c->path, "/envs"))
            api_envs(c);
        else
            api_metrics(c);
        return;
    }
    if (r->expect_continue && !c->body_done)
        conn_continue(c);
    if (strcmp(c->path, "/files") == 0) {
        if (is_get) {
            if (!c->body_done) {
                conn_http_error(c, 400, "a GET with a body");
                return;
            }
            c->state = C_WORK;
            ops_files_get(c);
        } else if (is_post) {
            c->state = C_BODY;
            ops_files_post(c);
        } else {
            conn_http_error(c, 405, "use GET or POST");
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
            conn_http_error(c, 415, "expected application/json or application/connect+json");
            return;
        }
        if (r->content_encoding[0] && strcasecmp(r->content_encoding, "identity") != 0) {
            conn_connect_error(c, "unimplemented", "Content-Encoding %s is not supported",
                               r->content_encoding);
            return;
        }
        c->state = C_BODY;
        body_progress(c);
        return;
    }
    conn_http_error(c, 404, "no route %s %s", r->method, c->path);
}

/* Parses what the buffer holds: a head, then its body. */
static void conn_advance(struct conn *c)
{
    while (!c->dead && c->state == C_HEAD && bytebuf_pending(&c->in)) {
        int status = 400;
        struct err why;
        long hl = wire_parse_head(bytebuf_head(&c->in), bytebuf_pending(&c->in),
                                  (size_t)RC.max_header_bytes, &c->req, &status, &why);
        if (hl == 0)
            break;
        if (hl < 0) {
            memset(&c->req, 0, sizeof(c->req));
            c->req.close = true;
            c->body_done = false;
            conn_http_error(c, status, "%s", why.msg);
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
    conn_set_reading(c, want);
}

static void read_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    struct conn *c = w->data;
    if (bytebuf_room(&c->in) < READ_CHUNK) {
        bytebuf_compact(&c->in);
        if (bytebuf_room(&c->in) < READ_CHUNK &&
            bytebuf_resize(&c->in, c->in.len + READ_CHUNK) < 0) {
            conn_abort(c);
            return;
        }
    }
    if (c->lingering) {
        char sink[READ_CHUNK];
        ssize_t k = read(c->fd, sink, sizeof(sink));
        if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR))
            conn_abort(c);
        return;
    }
    ssize_t n = read(c->fd, bytebuf_tail(&c->in), READ_CHUNK);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n == 0 && c->state == C_STREAM) {
        /* A client that only shut its sending side still reads the
         * stream; one that is gone fails the next write. */
        c->half_closed = true;
        conn_set_reading(c, false);
        return;
    }
    if (n <= 0) {
        conn_abort(c);
        return;
    }
    if (c->state == C_STREAM) {
        /* Nothing more is asked on a stream's connection. */
        return;
    }
    c->in.len += (size_t)n;
    conn_advance(c);
}

static void idle_cb(struct ev_loop *loop, ev_timer *w, int revents) { conn_abort(w->data); }
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
        conn_set_reading(c, true);
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
        dprintf(2, "hearth-envd: unable to create the loop: %s\n", strerror(errno));
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    fcntl(listen_fd, F_SETFL, O_NONBLOCK);
    static const struct conn_hooks hooks = {.advance = conn_advance, .gone = conn_gone};
    conn_set_hooks(&hooks);
    link_open(on_note);
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
