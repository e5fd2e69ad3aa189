/* The envd role process's inside, shared by its files and nothing
 * else (envd.h is hearth's side). Its calls run one way, from the loop
 * down:
 *
 *   envd_role.c  the loop: accepts, reads heads and bodies (the token,
 *                the user) and runs the routes; hands the files below
 *                the hooks they answer through
 *   envd_ops.c   what each route does: /files both ways, process.*,
 *                filesystem.*, each as steps of hearth calls
 *   envd_api.c   the routes beside those: POST /init, GET /envs,
 *                GET /metrics
 *   envd_watch.c filesystem.Filesystem/WatchDir and the polling watchers
 *                (CreateWatcher, GetWatcherEvents, RemoveWatcher), on the
 *                inotify instance hearth made for the role
 *   envd_entry.c what the routes share: envd's path rule, EntryInfo
 *   envd_conn.c  a connection's answers (responses, Connect framing,
 *                streams, chunks), its body as it comes, its close,
 *                bounds on its output
 *   envd_link.c  hearth's links (calls and their replies in order per
 *                link, notifications), the settings and accounts hearth
 *                sends
 *   envd_wire.c  the wire formats, pure functions over buffered bytes
 *
 * The role holds no privilege: it runs as nobody, and every command or
 * file operation is a call on a link, which hearth checks and runs. */
#ifndef HEARTH_ENVD_ROLE_H
#define HEARTH_ENVD_ROLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <ev.h>

#include "bytebuf.h"
#include "envd_wire.h"

struct cJSON;

/* ---- links and settings (envd_link.c) ---- */

/* A reply from hearth: result (owned by the caller of fn's caller; NULL
 * on an error), or code and message. */
typedef void (*call_fn)(void *ctx, struct cJSON *result, int code, const char *message);
/* A notification from hearth other than envd.config (which the links
 * take themselves): method and its params. */
typedef void (*role_note_fn)(const char *method, struct cJSON *params);

/* The settings hearth sent (envd.config). */
struct role_cfg {
    bool have;
    char user[64], cwd[256], token[256];
    struct cJSON *aliases, *passwd, *group; /* owned */
    struct cJSON *envs;  /* owned: POST /init's variables, for every process */
    int64_t max_header_bytes, max_connections, max_streams, max_upload_bytes, watcher_idle_ms;
};
/* The role process's settings and its loop, as hearth's H: every file of
 * the role reads them (defined in envd_link.c, the lowest). */
extern struct role_cfg RC;
extern struct ev_loop *role_loop;

/* A user resolved from hearth's boot snapshot. */
struct role_user {
    char name[64];
    uid_t uid;
    gid_t gid;
    char home[256];
};
/* name (after envd.users) to an account; -1 when the image has none. */
int link_user_find(const char *name, struct role_user *u);
const char *link_uid_name(uid_t uid, char *buf, size_t n);
const char *link_gid_name(gid_t gid, char *buf, size_t n);

/* Calls method with params (consumed) on the least busy link; fn runs
 * with the reply. -1 when no link takes it (fn is not called). A call
 * whose ctx goes away is cancelled with link_cancel(ctx). */
int link_call(const char *method, struct cJSON *params, call_fn fn, void *ctx);
void link_cancel(void *ctx);
/* Opens the links hearth passed (ENVD_LINK_FD0...) on role_loop;
 * notifications go to note. */
void link_open(role_note_fn note);

enum conn_state { C_HEAD, C_BODY, C_WORK, C_STREAM, C_CLOSING };

struct conn {
    int fd;
    ev_io rio, wio;
    ev_timer idle;
    ev_timer keepalive;
    enum conn_state state;
    bool reading, writing, dead, half_closed, lingering;
    struct bytebuf in, out;
    struct http_req req;
    char path[HTTP_MAX_TARGET];  /* the target's path, percent-decoded */
    const char *query;           /* into req.target, or "" */
    /* the body */
    int64_t body_left;           /* Content-Length still to come */
    struct chunked ck;
    bool body_done;
    struct bytebuf body;         /* a buffered body (RPC requests) */
    uint64_t body_total;
    /* the call's user */
    struct role_user user;
    /* a server stream's state */
    bool stream_json;            /* application/connect+json */
    bool stream_open;            /* its head was sent */
    struct proc *sub;            /* the process whose events it follows */
    struct conn *next_sub;
    /* what the route keeps between its steps (its route file) */
    void *op;
    void (*op_free)(void *op);
    struct conn *next;
};

/* ---- a connection's answers (envd_conn.c) ---- */
/* What the connection code needs of the loop, handed down at its start:
 * advance reads on after an answer (the next request may be in already),
 * gone is told of a connection closed (conn_abort). */
struct conn_hooks {
    void (*advance)(struct conn *c);
    void (*gone)(struct conn *c);
};
void conn_set_hooks(const struct conn_hooks *h);
void conn_set_reading(struct conn *c, bool on);
void conn_flush(struct conn *c);
/* "100 Continue" before a body the client waits to send. */
void conn_continue(struct conn *c);
/* A whole response; the connection goes on with the next request (or
 * closes, when the request asked to or the body was not read). */
void conn_respond(struct conn *c, int status, const char *ctype, const char *body, size_t len);
/* envd's HTTP error body: {"code": status, "message": ...}. */
void conn_http_error(struct conn *c, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A Connect error ("not_found", ...) as the route's protocol wants it:
 * a unary JSON body with the matching status, or a stream's end. */
void conn_connect_error(struct conn *c, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The unary answer (a JSON object, consumed). */
void conn_connect_reply(struct conn *c, struct cJSON *msg);
/* Streams: the head once, then messages (JSON text), then the end. */
int conn_stream_send(struct conn *c, const char *json, size_t len);
void conn_stream_end(struct conn *c, const char *code, const char *message);
/* Raw body bytes of a chunked response (a file download). */
void conn_chunked_head(struct conn *c, int status, const char *ctype);
void conn_chunk(struct conn *c, const char *data, size_t len);
void conn_chunked_end(struct conn *c);
size_t conn_out_pending(const struct conn *c);
/* Connection bytes of the body not yet taken; moves up to cap decoded
 * body bytes into dst (a bytebuf with room). Returns -1 on a framing
 * error. */
int conn_body_take(struct conn *c, struct bytebuf *dst, size_t cap);
void conn_read_more(struct conn *c);
/* Closes c at once (a response cut short). */
void conn_abort(struct conn *c);
/* Keepalive ticks on a stream every seconds (ops_keepalive). */
void conn_keepalive_start(struct conn *c, double seconds);
/* The hearth error code of a failed call as a Connect code. */
const char *conn_connect_code(int rpc_code, const char *message);

/* ---- shared by the routes (envd_entry.c; conn_streams envd_conn.c) ---- */
/* envd's path rule for the call's user: "~" and relative paths beneath
 * the home, "." and ".." folded. -1 when it does not fit. */
int entry_expand_path(const struct conn *c, const char *in, char *out, size_t cap);
/* hearth's files.stat result as envd's EntryInfo. */
struct cJSON *entry_json(const struct cJSON *st, const char *path);
/* The last part of a path ("/" stays "/"). */
const char *entry_base_name(const char *p);
/* Server streams open (Start, Connect, WatchDir), against envd.max_streams. */
extern unsigned conn_streams;

/* ---- routes (envd_ops.c) ---- */
/* A request whose head (and, for RPC, body) is read: run it. */
void ops_files_get(struct conn *c);
void ops_files_post(struct conn *c);     /* runs as the body arrives */
void ops_files_post_more(struct conn *c); /* more body bytes, or room */
void ops_rpc(struct conn *c, const char *service, const char *method, struct cJSON *msg);
/* process.Process/StreamInput: runs as its body arrives (again after
 * each input is taken). */
void ops_stream_input(struct conn *c);
/* hearth's exec notifications. */
void ops_exec_output(struct cJSON *params);
void ops_exec_exit(struct cJSON *params);
/* c goes away: its subscription ends. */
void ops_conn_gone(struct conn *c);
/* The output queue drained below its mark (a download reads on). */
void ops_conn_room(struct conn *c);
/* A keepalive tick on a stream. */
void ops_keepalive(struct conn *c);

/* ---- /init, /envs, /metrics (envd_api.c) ---- */
/* At the role's start: the first CPU sample, the probes' reaping. */
void api_init(void);
void api_post_init(struct conn *c); /* once the body is in */
void api_envs(struct conn *c);
void api_metrics(struct conn *c);

/* ---- WatchDir and the polling watchers (envd_watch.c) ---- */
/* Takes the inotify instance hearth passed (ENVD_WATCH_FD), if any. */
void watch_init(void);
void watch_dir(struct conn *c, const struct cJSON *msg);
/* The polling watchers: unary calls on the same watches. */
void watch_create(struct conn *c, const struct cJSON *msg);
void watch_events(struct conn *c, const struct cJSON *msg);
void watch_remove(struct conn *c, const struct cJSON *msg);
/* Whether c is a WatchDir stream, and its keepalive. */
bool watch_owns(const struct conn *c);
void watch_keepalive(struct conn *c);

#define ROLE_OUT_SOFT (1024 * 1024)      /* stop producing above this */
#define ROLE_OUT_MAX (8 * 1024 * 1024)   /* drop a client above this */
#define ROLE_RPC_BODY_MAX (4 * 1024 * 1024)
#define ROLE_IDLE_MS 60000               /* a connection silent this long between requests goes */

#endif
