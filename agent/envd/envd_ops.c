/* What each envd route does, as steps of calls to hearth: /files both
 * ways, process.Process and filesystem.Filesystem (docs/envd.md). A
 * connection has at most one call in flight; its steps keep their state
 * in c->op. */
#include "envd_role.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include <cJSON.h>

#include "base64.h"
#include "err.h"
#include "jsonout.h"

#define FILE_CHUNK (256 * 1024)  /* hearth's files.read / files.write per call */
#define RAW_MAX (512 * 1024)     /* upload bytes read ahead of the parser */
#define LIST_MAX 20000           /* entries of one ListDir */

static void dir_of(const char *p, char *out, size_t cap)
{
    snprintf(out, cap, "%s", p);
    char *s = strrchr(out, '/');
    if (s == out)
        out[1] = 0;
    else if (s)
        *s = 0;
}

static cJSON *path_params(const char *path, bool follow)
{
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "path", path);
    if (follow)
        cJSON_AddBoolToObject(p, "follow", true);
    return p;
}

static void call_or_fail(struct conn *c, const char *method, cJSON *params, call_fn fn)
{
    if (link_call(method, params, fn, c) < 0)
        conn_connect_error(c, "unavailable", "hearth did not take the call");
}

/* ================= /files GET ================= */

struct download {
    char path[4200];
    uint64_t off;
    bool busy, started;
};

static void dl_next(struct conn *c);

static void dl_read_done(void *ctx, cJSON *res, int code, const char *msg)
{
    struct conn *c = ctx;
    struct download *d = c->op;
    d->busy = false;
    if (!res) {
        if (!d->started) {
            conn_http_error(c, strcmp(conn_connect_code(code, msg), "not_found") == 0 ? 404 : 400, "%s", msg);
            return;
        }
        /* Mid-body: the client sees a cut transfer, never a false end. */
        conn_abort(c);
        return;
    }
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(res, "data");
    const cJSON *eof = cJSON_GetObjectItemCaseSensitive(res, "eof");
    if (!d->started) {
        d->started = true;
        conn_chunked_head(c, 200, "application/octet-stream");
    }
    if (cJSON_IsString(data) && data->valuestring[0]) {
        size_t l = strlen(data->valuestring);
        uint8_t *buf = malloc(l / 4 * 3 + 3);
        struct err err;
        long n = buf ? base64_decode(data->valuestring, l, buf, l / 4 * 3 + 3, &err) : -1;
        if (n > 0) {
            conn_chunk(c, (const char *)buf, (size_t)n);
            d->off += (uint64_t)n;
        }
        free(buf);
    }
    if (cJSON_IsTrue(eof)) {
        conn_chunked_end(c);
        return;
    }
    dl_next(c);
}

static void dl_next(struct conn *c)
{
    struct download *d = c->op;
    if (c->dead || d->busy || conn_out_pending(c) >= ROLE_OUT_SOFT)
        return;
    cJSON *p = path_params(d->path, true);
    cJSON_AddNumberToObject(p, "offset", (double)d->off);
    cJSON_AddNumberToObject(p, "length", FILE_CHUNK);
    d->busy = true;
    if (link_call("files.read", p, dl_read_done, c) < 0) {
        d->busy = false;
        conn_http_error(c, 503, "hearth did not take the call");
    }
}

static void dl_stat_done(void *ctx, cJSON *res, int code, const char *msg)
{
    struct conn *c = ctx;
    if (!res) {
        const char *k = conn_connect_code(code, msg);
        conn_http_error(c, strcmp(k, "not_found") == 0 ? 404 : 400, "%s", msg);
        return;
    }
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(res, "type");
    if (!cJSON_IsString(type) || strcmp(type->valuestring, "file") != 0) {
        conn_http_error(c, 400, "path '%s' is %s, not a file", ((struct download *)c->op)->path,
                        cJSON_IsString(type) && !strcmp(type->valuestring, "dir") ? "a directory" : "not a regular file");
        return;
    }
    dl_next(c);
}

static bool files_user(struct conn *c)
{
    char name[64];
    int r = wire_query_get(c->query, "username", name, sizeof(name));
    if (r < 0) {
        conn_http_error(c, 400, "bad username");
        return false;
    }
    if (r == 0)
        snprintf(name, sizeof(name), "%s", c->req.has_basic ? c->req.basic_user : RC.user);
    if (link_user_find(name, &c->user) < 0) {
        conn_http_error(c, 400, "no user %s in the image (envd.users maps names)", name);
        return false;
    }
    return true;
}

void ops_files_get(struct conn *c)
{
    char path[4096];
    if (!files_user(c))
        return;
    int r = wire_query_get(c->query, "path", path, sizeof(path));
    if (r <= 0) {
        conn_http_error(c, 400, r < 0 ? "bad path" : "path: required");
        return;
    }
    struct download *d = calloc(1, sizeof(*d));
    if (!d) {
        conn_http_error(c, 503, "out of memory");
        return;
    }
    c->op = d;
    c->op_free = free;
    if (entry_expand_path(c, path, d->path, sizeof(d->path)) < 0) {
        conn_http_error(c, 400, "path too long");
        return;
    }
    if (link_call("files.stat", path_params(d->path, true), dl_stat_done, c) < 0)
        conn_http_error(c, 503, "hearth did not take the call");
}

/* ================= /files POST ================= */

struct upload {
    bool multipart, skip, in_file, started, finishing, busy, responded;
    struct multipart mp;
    struct bytebuf raw, chunk;
    char target[4200], tmp[4300];
    cJSON *results;
};

static void up_free(void *op)
{
    struct upload *u = op;
    bytebuf_release(&u->raw);
    bytebuf_release(&u->chunk);
    cJSON_Delete(u->results);
    free(u);
}

static void up_pump(struct conn *c);

static void up_fail(struct conn *c, int status, const char *msg)
{
    struct upload *u = c->op;
    if (u->in_file && u->started)
        link_call("files.remove", path_params(u->tmp, false), NULL, NULL);
    u->responded = true;
    conn_http_error(c, status, "%s", msg);
}

static void up_call_done(void *ctx, cJSON *res, int code, const char *msg)
{
    struct conn *c = ctx;
    struct upload *u = c->op;
    u->busy = false;
    if (!res) {
        const char *k = conn_connect_code(code, msg);
        up_fail(c, !strcmp(k, "not_found") ? 404 : !strcmp(k, "permission_denied") ? 403 : 400, msg);
        return;
    }
    conn_read_more(c);
}

static int up_begin(struct conn *c, const char *given)
{
    struct upload *u = c->op;
    char dir[4200], rnd[8], hex[17];
    if (!given[0]) {
        up_fail(c, 400, "path: required (a query parameter, or the part's file name)");
        return -1;
    }
    if (entry_expand_path(c, given, u->target, sizeof(u->target)) < 0 || !strcmp(u->target, "/")) {
        up_fail(c, 400, "bad path");
        return -1;
    }
    if (getrandom(rnd, sizeof(rnd), GRND_NONBLOCK) != sizeof(rnd))
        memset(rnd, 0x5a, sizeof(rnd));
    for (int i = 0; i < 8; i++)
        snprintf(hex + 2 * i, 3, "%02x", (unsigned char)rnd[i]);
    dir_of(u->target, dir, sizeof(dir));
    snprintf(u->tmp, sizeof(u->tmp), "%s%s.%.200s.envd-%s", dir, strcmp(dir, "/") ? "/" : "",
             entry_base_name(u->target), hex);
    u->in_file = true;
    u->started = u->finishing = false;
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "path", dir);
    cJSON_AddBoolToObject(p, "parents", true);
    cJSON_AddNumberToObject(p, "uid", c->user.uid);
    cJSON_AddNumberToObject(p, "gid", c->user.gid);
    u->busy = true;
    if (link_call("files.mkdir", p, up_call_done, c) < 0) {
        u->busy = false;
        up_fail(c, 503, "hearth did not take the call");
        return -1;
    }
    return 0;
}

static int up_write(struct conn *c)
{
    struct upload *u = c->op;
    size_t n = bytebuf_pending(&u->chunk);
    char *b64 = malloc(BASE64_ENCODED_SIZE(n));
    if (!b64) {
        up_fail(c, 503, "out of memory");
        return -1;
    }
    base64_encode((const uint8_t *)bytebuf_head(&u->chunk), n, b64);
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "path", u->tmp);
    cJSON_AddStringToObject(p, "data", b64);
    free(b64);
    if (u->started) {
        cJSON_AddBoolToObject(p, "append", true);
    } else {
        cJSON_AddBoolToObject(p, "exclusive", true);
        cJSON_AddStringToObject(p, "mode", "0644");
        cJSON_AddNumberToObject(p, "uid", c->user.uid);
        cJSON_AddNumberToObject(p, "gid", c->user.gid);
    }
    u->chunk.off = u->chunk.len = 0;
    u->started = true;
    u->busy = true;
    if (link_call("files.write", p, up_call_done, c) < 0) {
        u->busy = false;
        up_fail(c, 503, "hearth did not take the call");
        return -1;
    }
    return 0;
}

static void up_renamed(void *ctx, cJSON *res, int code, const char *msg)
{
    struct conn *c = ctx;
    struct upload *u = c->op;
    u->busy = false;
    if (!res) {
        up_fail(c, 400, msg);
        return;
    }
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "name", entry_base_name(u->target));
    cJSON_AddStringToObject(e, "type", "file");
    cJSON_AddStringToObject(e, "path", u->target);
    cJSON_AddItemToArray(u->results, e);
    u->in_file = u->finishing = false;
    conn_read_more(c);
}

/* The file's last bytes are in the chunk: write them (an empty file
 * too), then move the temporary file over the target. */
static int up_finish(struct conn *c)
{
    struct upload *u = c->op;
    u->finishing = true;
    if (!u->started || bytebuf_pending(&u->chunk))
        return up_write(c);
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "from", u->tmp);
    cJSON_AddStringToObject(p, "to", u->target);
    u->busy = true;
    if (link_call("files.rename", p, up_renamed, c) < 0) {
        u->busy = false;
        up_fail(c, 503, "hearth did not take the call");
        return -1;
    }
    return 0;
}

static void up_respond(struct conn *c)
{
    struct upload *u = c->op;
    u->responded = true;
    if (!cJSON_GetArraySize(u->results)) {
        conn_http_error(c, 400, "no part named \"file\" in the body");
        return;
    }
    char *t = jsonout_print(u->results);
    conn_respond(c, 200, "application/json", t ? t : "[]", t ? strlen(t) : 2);
    cJSON_free(t);
}

static void chunk_take(struct upload *u, const char *d, size_t n)
{
    if (bytebuf_room(&u->chunk) < n) {
        bytebuf_compact(&u->chunk);
        if (bytebuf_room(&u->chunk) < n)
            bytebuf_resize(&u->chunk, FILE_CHUNK);
    }
    bytebuf_put(&u->chunk, d, n);
}

static void up_pump(struct conn *c)
{
    struct upload *u = c->op;
    for (int guard = 0; guard < 100000; guard++) {
        if (c->dead || u->busy || u->responded)
            return;
        if (conn_body_take(c, &u->raw, RAW_MAX) < 0) {
            c->body_done = false;
            up_fail(c, 400, "bad chunked body");
            return;
        }
        if (RC.max_upload_bytes && c->body_total > (uint64_t)RC.max_upload_bytes) {
            c->body_done = false;
            char m[96];
            snprintf(m, sizeof(m), "upload over envd.max_upload_bytes (%lld)",
                     (long long)RC.max_upload_bytes);
            up_fail(c, 413, m);
            return;
        }
        if (u->finishing) {
            up_finish(c);
            return;
        }
        if (bytebuf_pending(&u->chunk) >= FILE_CHUNK) {
            up_write(c);
            return;
        }
        if (!u->multipart) {
            if (!u->in_file) {
                if (cJSON_GetArraySize(u->results)) {
                    if (c->body_done)
                        up_respond(c);
                    return;
                }
                char path[4096];
                if (wire_query_get(c->query, "path", path, sizeof(path)) <= 0)
                    path[0] = 0;
                up_begin(c, path);
                return;
            }
            size_t room = FILE_CHUNK - bytebuf_pending(&u->chunk);
            size_t k = bytebuf_pending(&u->raw) < room ? bytebuf_pending(&u->raw) : room;
            chunk_take(u, bytebuf_head(&u->raw), k);
            u->raw.off += k;
            if (!bytebuf_pending(&u->raw) && c->body_done) {
                up_finish(c);
                return;
            }
            if (!k)
                return; /* more body wanted */
            continue;
        }
        size_t used = 0;
        int ev = wire_multipart_next(&u->mp, bytebuf_head(&u->raw), bytebuf_pending(&u->raw),
                                     c->body_done, &used);
        switch (ev) {
        case MP_NEED:
            u->raw.off += used;
            if (used)
                continue;
            return;
        case MP_PART: {
            u->raw.off += used;
            u->skip = strcmp(u->mp.name, "file") != 0;
            if (u->skip)
                continue;
            char path[4096];
            int r = wire_query_get(c->query, "path", path, sizeof(path));
            up_begin(c, r > 0 ? path : u->mp.filename);
            return;
        }
        case MP_DATA: {
            if (u->skip) {
                u->raw.off += used;
                continue;
            }
            size_t room = FILE_CHUNK - bytebuf_pending(&u->chunk);
            size_t k = used < room ? used : room;
            chunk_take(u, bytebuf_head(&u->raw), k);
            u->raw.off += k;
            continue;
        }
        case MP_PART_END:
            u->raw.off += used;
            if (!u->skip) {
                up_finish(c);
                return;
            }
            continue;
        case MP_DONE:
            u->raw.off += used;
            if (c->body_done) {
                up_respond(c);
                return;
            }
            if (!used)
                return;
            continue;
        default:
            c->body_done = false;
            up_fail(c, 400, "bad multipart body");
            return;
        }
    }
}

void ops_files_post(struct conn *c)
{
    struct upload *u = calloc(1, sizeof(*u));
    if (!u || !(u->results = cJSON_CreateArray())) {
        free(u);
        c->body_done = false;
        conn_http_error(c, 503, "out of memory");
        return;
    }
    c->op = u;
    c->op_free = up_free;
    if (!files_user(c))
        return;
    if (c->req.content_encoding[0] && strcasecmp(c->req.content_encoding, "identity") != 0) {
        c->body_done = false;
        up_fail(c, 415, "Content-Encoding is not supported (send the file uncompressed)");
        return;
    }
    if (!strncasecmp(c->req.content_type, "multipart/form-data", 19)) {
        u->multipart = true;
        if (wire_multipart_init(&u->mp, c->req.content_type) < 0) {
            c->body_done = false;
            up_fail(c, 400, "multipart/form-data without a usable boundary");
            return;
        }
    } else if (strncasecmp(c->req.content_type, "application/octet-stream", 24) != 0) {
        c->body_done = false;
        up_fail(c, 415, "expected multipart/form-data or application/octet-stream");
        return;
    }
    up_pump(c);
}

void ops_files_post_more(struct conn *c) { up_pump(c); }

/* ================= process.Process ================= */

struct proc {
    uint64_t id;
    char tag[128];
    bool tty;
    cJSON *config; /* the ProcessConfig as started */
    struct conn *subs;
    struct proc *next;
};

static struct proc *procs;

static struct proc *proc_find(uint64_t id)
{
    for (struct proc *p = procs; p; p = p->next)
        if (p->id == id)
            return p;
    return NULL;
}

static void unsubscribe(struct conn *c)
{
    struct proc *p = c->sub;
    if (!p)
        return;
    for (struct conn **pp = &p->subs; *pp; pp = &(*pp)->next_sub)
        if (*pp == c) {
            *pp = c->next_sub;
            break;
        }
    c->sub = NULL;
    c->next_sub = NULL;
    conn_streams--;
}

void ops_conn_gone(struct conn *c) { unsubscribe(c); }

void ops_conn_room(struct conn *c)
{
    if (c->op && c->state == C_WORK && c->op_free == free)
        dl_next(c);
}

void ops_keepalive(struct conn *c)
{
    static const char ka[] = "{\"event\":{\"keepalive\":{}}}";
    if (watch_owns(c))
        watch_keepalive(c);
    else
        conn_stream_send(c, ka, sizeof(ka) - 1);
}

/* Sends ev (one ProcessEvent member, JSON text) to c as {"event":{...}}. */
static void send_event(struct conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void send_event(struct conn *c, const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (n > 0 && (size_t)n < sizeof(buf))
        conn_stream_send(c, buf, (size_t)n);
}

static void subscribe(struct conn *c, struct proc *p)
{
    c->sub = p;
    c->next_sub = p->subs;
    p->subs = c;
    conn_streams++;
    c->state = C_STREAM;
    send_event(c, "{\"event\":{\"start\":{\"pid\":%llu}}}", (unsigned long long)p->id);
    if (c->req.keepalive_s > 0)
        conn_keepalive_start(c, (double)c->req.keepalive_s);
    conn_read_more(c);
}

void ops_exec_output(cJSON *params)
{
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(params, "id");
    const cJSON *stream = cJSON_GetObjectItemCaseSensitive(params, "stream");
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(params, "data");
    struct proc *p = cJSON_IsNumber(id) ? proc_find((uint64_t)id->valuedouble) : NULL;
    if (!p || !cJSON_IsString(stream) || !cJSON_IsString(data))
        return;
    const char *field = p->tty ? "pty" : strcmp(stream->valuestring, "stderr") == 0 ? "stderr" : "stdout";
    size_t dl = strlen(data->valuestring);
    char *buf = malloc(dl + 64);
    if (!buf)
        return;
    int n = snprintf(buf, dl + 64, "{\"event\":{\"data\":{\"%s\":\"%s\"}}}", field, data->valuestring);
    for (struct conn *c = p->subs, *next; c; c = next) {
        next = c->next_sub;
        conn_stream_send(c, buf, (size_t)n);
    }
    free(buf);
}

static void proc_free(struct proc *p)
{
    for (struct proc **pp = &procs; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    cJSON_Delete(p->config);
    free(p);
}

void ops_exec_exit(cJSON *params)
{
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(params, "id");
    struct proc *p = cJSON_IsNumber(id) ? proc_find((uint64_t)id->valuedouble) : NULL;
    if (!p)
        return;
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(params, "exit_code");
    const cJSON *sig = cJSON_GetObjectItemCaseSensitive(params, "signal_name");
    int exit_code = cJSON_IsNumber(code) ? code->valueint : -1;
    char status[96];
    /* Go's ProcessState.String(), as envd reports it. */
    if (cJSON_IsNumber(code))
        snprintf(status, sizeof(status), "exit status %d", exit_code);
    else if (cJSON_IsString(sig))
        snprintf(status, sizeof(status), "signal: %s",
                 !strcmp(sig->valuestring, "SIGKILL") ? "killed"
                 : !strcmp(sig->valuestring, "SIGTERM") ? "terminated" : sig->valuestring);
    else
        snprintf(status, sizeof(status), "exited");
    cJSON *end = cJSON_CreateObject(), *ev = cJSON_AddObjectToObject(end, "event");
    cJSON *e = cJSON_AddObjectToObject(ev, "end");
    if (exit_code)
        cJSON_AddNumberToObject(e, "exitCode", exit_code);
    cJSON_AddBoolToObject(e, "exited", true);
    cJSON_AddStringToObject(e, "status", status);
    if (exit_code)
        cJSON_AddStringToObject(e, "error", status);
    char *t = jsonout_print(end);
    cJSON_Delete(end);
    while (p->subs) {
        struct conn *c = p->subs;
        unsubscribe(c);
        if (t)
            conn_stream_send(c, t, strlen(t));
        conn_stream_end(c, NULL, NULL);
    }
    cJSON_free(t);
    proc_free(p);
}

static struct proc *select_proc(struct conn *c, const cJSON *msg)
{
    const cJSON *sel = cJSON_GetObjectItemCaseSensitive(msg, "process");
    const cJSON *pid = cJSON_GetObjectItemCaseSensitive(sel, "pid");
    const cJSON *tag = cJSON_GetObjectItemCaseSensitive(sel, "tag");
    struct proc *p = NULL;
    if (cJSON_IsNumber(pid))
        p = proc_find((uint64_t)pid->valuedouble);
    else if (cJSON_IsString(tag))
        for (p = procs; p && strcmp(p->tag, tag->valuestring) != 0; p = p->next)
            ;
    else {
        conn_connect_error(c, "invalid_argument", "process: expected a pid or a tag");
        return NULL;
    }
    if (!p)
        conn_connect_error(c, "not_found", "process not found");
    return p;
}

/* A Start in flight. The exec.start call's context is this, not the
 * connection: a client that goes before the reply leaves a process that
 * runs all the same, and it must still be known (List, Connect, kill). */
struct start_op {
    bool tty, pending;
    struct conn *c; /* NULL once the connection went */
    char tag[128];
    cJSON *config;
};

static void start_op_free(struct start_op *s)
{
    cJSON_Delete(s->config);
    free(s);
}

/* The connection's op goes (its end, or its close): a call in flight
 * keeps the op until its reply. */
static void start_op_release(void *op)
{
    struct start_op *s = op;
    if (s->pending)
        s->c = NULL;
    else
        start_op_free(s);
}

static void start_done(void *ctx, cJSON *res, int code, const char *msg)
{
    struct start_op *s = ctx;
    struct conn *c = s->c;
    s->pending = false;
    if (!res) {
        if (c)
            conn_connect_error(c, !strcmp(conn_connect_code(code, msg), "resource_exhausted") ? "resource_exhausted"
                             : code == -32602 ? "invalid_argument" : "internal",
                          "%s", msg);
        else
            start_op_free(s);
        return;
    }
    struct proc *p = calloc(1, sizeof(*p));
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(res, "id");
    if (!p || !cJSON_IsNumber(id)) {
        free(p);
        if (c)
            conn_connect_error(c, "internal", "out of memory");
        else
            start_op_free(s);
        return;
    }
    p->id = (uint64_t)id->valuedouble;
    p->tty = s->tty;
    snprintf(p->tag, sizeof(p->tag), "%s", s->tag);
    p->config = s->config;
    s->config = NULL;
    p->next = procs;
    procs = p;
    if (!c) {
        start_op_free(s);
        return;
    }
    /* The stream now belongs to the process; the op's work is done. */
    start_op_free(s);
    c->op = NULL;
    c->op_free = NULL;
    subscribe(c, p);
}

static void rpc_start(struct conn *c, cJSON *msg)
{
    const cJSON *pc = cJSON_GetObjectItemCaseSensitive(msg, "process");
    const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(pc, "cmd");
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(pc, "args");
    const cJSON *envs = cJSON_GetObjectItemCaseSensitive(pc, "envs");
    const cJSON *cwd = cJSON_GetObjectItemCaseSensitive(pc, "cwd");
    const cJSON *pty = cJSON_GetObjectItemCaseSensitive(msg, "pty");
    const cJSON *size = cJSON_GetObjectItemCaseSensitive(pty, "size");
    const cJSON *tag = cJSON_GetObjectItemCaseSensitive(msg, "tag");
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(msg, "stdin");
    if (!c->stream_json) {
        conn_connect_error(c, "invalid_argument", "Start is a server stream (application/connect+json)");
        return;
    }
    if (!cJSON_IsString(cmd) || !cmd->valuestring[0]) {
        conn_connect_error(c, "invalid_argument", "process.cmd: required");
        return;
    }
    if (conn_streams >= (unsigned)RC.max_streams) {
        conn_connect_error(c, "resource_exhausted", "envd.max_streams: %lld streams already open",
                           (long long)RC.max_streams);
        return;
    }
    struct start_op *s = calloc(1, sizeof(*s));
    cJSON *p = cJSON_CreateObject(), *argv = cJSON_AddArrayToObject(p, "argv");
    if (!s || !argv) {
        free(s);
        cJSON_Delete(p);
        conn_connect_error(c, "internal", "out of memory");
        return;
    }
    c->op = s;
    c->op_free = start_op_release;
    s->c = c;
    s->tty = pty != NULL;
    if (cJSON_IsString(tag))
        snprintf(s->tag, sizeof(s->tag), "%s", tag->valuestring);
    cJSON_AddItemToArray(argv, cJSON_CreateString(cmd->valuestring));
    const cJSON *a;
    cJSON_ArrayForEach(a, args) {
        if (!cJSON_IsString(a)) {
            cJSON_Delete(p);
            conn_connect_error(c, "invalid_argument", "process.args: expected strings");
            return;
        }
        cJSON_AddItemToArray(argv, cJSON_CreateString(a->valuestring));
    }
    /* POST /init's variables, under the call's own. */
    if ((cJSON_IsObject(envs) && envs->child) || (RC.envs && RC.envs->child)) {
        cJSON *all = RC.envs ? cJSON_Duplicate(RC.envs, 1) : cJSON_CreateObject();
        const cJSON *e, *own = cJSON_IsObject(envs) ? envs : NULL;
        cJSON_ArrayForEach(e, own) {
            cJSON_DeleteItemFromObjectCaseSensitive(all, e->string);
            cJSON_AddItemToObject(all, e->string, cJSON_Duplicate(e, 1));
        }
        cJSON_AddItemToObject(p, "env", all);
    }
    char dir[4200];
    const char *want = cJSON_IsString(cwd) && cwd->valuestring[0] ? cwd->valuestring
                       : RC.cwd[0] ? RC.cwd : c->user.home;
    if (entry_expand_path(c, want, dir, sizeof(dir)) < 0 || strlen(dir) >= 256) {
        cJSON_Delete(p);
        conn_connect_error(c, "invalid_argument", "process.cwd: too long");
        return;
    }
    cJSON_AddStringToObject(p, "cwd", dir);
    cJSON_AddStringToObject(p, "user", c->user.name);
    if (s->tty) {
        cJSON_AddBoolToObject(p, "tty", true);
        const cJSON *rows = cJSON_GetObjectItemCaseSensitive(size, "rows");
        const cJSON *cols = cJSON_GetObjectItemCaseSensitive(size, "cols");
        if (cJSON_IsNumber(rows) && rows->valuedouble >= 1 && rows->valuedouble <= 65535)
            cJSON_AddNumberToObject(p, "rows", rows->valuedouble);
        if (cJSON_IsNumber(cols) && cols->valuedouble >= 1 && cols->valuedouble <= 65535)
            cJSON_AddNumberToObject(p, "cols", cols->valuedouble);
    }
    cJSON_AddBoolToObject(p, "stdin", s->tty || cJSON_IsTrue(in));
    /* Connect-Timeout-Ms is the process's lifetime, as in envd. */
    if (c->req.timeout_ms > 0)
        cJSON_AddNumberToObject(p, "timeout_ms", (double)c->req.timeout_ms);
    /* Nothing the endpoint starts outlives the role process. */
    cJSON_AddBoolToObject(p, "kill_on_disconnect", true);
    s->config = cJSON_CreateObject();
    cJSON_AddStringToObject(s->config, "cmd", cmd->valuestring);
    cJSON_AddItemToObject(s->config, "args", args ? cJSON_Duplicate(args, 1) : cJSON_CreateArray());
    cJSON_AddItemToObject(s->config, "envs",
                          cJSON_IsObject(envs) ? cJSON_Duplicate(envs, 1) : cJSON_CreateObject());
    cJSON_AddStringToObject(s->config, "cwd", dir);
    if (link_call("exec.start", p, start_done, s) < 0) {
        conn_connect_error(c, "unavailable", "hearth did not take the call");
        return;
    }
    s->pending = true;
}

static void rpc_list(struct conn *c)
{
    cJSON *r = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(r, "processes");
    for (struct proc *p = procs; arr && p; p = p->next) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToObject(o, "config", cJSON_Duplicate(p->config, 1));
        cJSON_AddNumberToObject(o, "pid", (double)p->id);
        if (p->tag[0])
            cJSON_AddStringToObject(o, "tag", p->tag);
        cJSON_AddItemToArray(arr, o);
    }
    conn_connect_reply(c, r);
}

static void empty_done(void *ctx, cJSON *res, int code, const char *msg)
{
    struct conn *c = ctx;
    if (!res) {
        conn_connect_error(c, code == -32003 && strstr(msg, "exited") ? "not_found" : conn_connect_code(code, msg),
                           "%s", msg);
        return;
    }
    conn_connect_reply(c, cJSON_CreateObject());
}

static cJSON *id_params(const struct proc *p)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "id", (double)p->id);
    return o;
}

static void rpc_send_input(struct conn *c, cJSON *msg)
{
    struct proc *p = select_proc(c, msg);
    if (!p)
        return;
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(msg, "input");
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(in, "stdin");
    if (!data)
        data = cJSON_GetObjectItemCaseSensitive(in, "pty");
    if (!cJSON_IsString(data)) {
        conn_connect_error(c, "invalid_argument", "input: expected stdin or pty bytes");
        return;
    }
    if (!data->valuestring[0]) {
        conn_connect_reply(c, cJSON_CreateObject());
        return;
    }
    cJSON *o = id_params(p);
    cJSON_AddStringToObject(o, "data", data->valuestring);
    call_or_fail(c, "exec.input", o, empty_done);
}

static void rpc_close_stdin(struct conn *c, cJSON *msg)
{
    struct proc *p = select_proc(c, msg);
    if (!p)
        return;
    cJSON *o = id_params(p);
    cJSON_AddBoolToObject(o, "close", true);
    call_or_fail(c, "exec.input", o, empty_done);
}

static void rpc_signal(struct conn *c, cJSON *msg)
{
    struct proc *p = select_proc(c, msg);
    if (!p)
        return;
    const cJSON *sig = cJSON_GetObjectItemCaseSensitive(msg, "signal");
    int n = 0;
    if (cJSON_IsString(sig))
        n = !strcmp(sig->valuestring, "SIGNAL_SIGKILL") ? 9 : !strcmp(sig->valuestring, "SIGNAL_SIGTERM") ? 15 : 0;
    else if (cJSON_IsNumber(sig))
        n = sig->valueint == 9 || sig->valueint == 15 ? sig->valueint : 0;
    if (!n) {
        conn_connect_error(c, "invalid_argument", "signal: expected SIGNAL_SIGKILL or SIGNAL_SIGTERM");
        return;
    }
    cJSON *o = id_params(p);
    cJSON_AddNumberToObject(o, "signal", n);
    call_or_fail(c, "exec.signal", o, empty_done);
}

static void rpc_update(struct conn *c, cJSON *msg)
{
    struct proc *p = select_proc(c, msg);
    if (!p)
        return;
    const cJSON *size = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(msg, "pty"), "size");
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(size, "rows");
    const cJSON *cols = cJSON_GetObjectItemCaseSensitive(size, "cols");
    if (!cJSON_IsNumber(rows) || !cJSON_IsNumber(cols)) {
        conn_connect_error(c, "invalid_argument", "pty.size: expected rows and cols");
        return;
    }
    cJSON *o = id_params(p);
    cJSON_AddNumberToObject(o, "rows", rows->valuedouble);
    cJSON_AddNumberToObject(o, "cols", cols->valuedouble);
    call_or_fail(c, "exec.resize", o, empty_done);
}

static void rpc_connect(struct conn *c, cJSON *msg)
{
    if (!c->stream_json) {
        conn_connect_error(c, "invalid_argument", "Connect is a server stream (application/connect+json)");
        return;
    }
    struct proc *p = select_proc(c, msg);
    if (!p)
        return;
    if (conn_streams >= (unsigned)RC.max_streams) {
        conn_connect_error(c, "resource_exhausted", "envd.max_streams: %lld streams already open",
                           (long long)RC.max_streams);
        return;
    }
    subscribe(c, p);
}

/* ---- StreamInput: a client stream of input for one process ---- */

/* The request body is a stream of envelopes read as it arrives: first
 * {"start":{"process":{pid|tag}}}, then {"data":{"input":{stdin|pty}}}
 * and {"keepalive":{}} in any number; each input is one exec.input, the
 * next envelope read once it is answered (the body waits in the
 * connection's bounded buffer meanwhile). The end of the body ends the
 * call: {} and the end-stream frame. */
struct stream_in {
    uint64_t id;
    bool have, busy;
};

static void stream_input_done(void *ctx, cJSON *res, int code, const char *msg)
{
    struct conn *c = ctx;
    struct stream_in *si = c->op;
    si->busy = false;
    if (!res) {
        conn_connect_error(c, code == -32003 && strstr(msg, "exited") ? "not_found" : conn_connect_code(code, msg),
                           "%s", msg);
        return;
    }
    ops_stream_input(c);
}

void ops_stream_input(struct conn *c)
{
    struct stream_in *si = c->op;
    if (!si) {
        if (!(si = calloc(1, sizeof(*si)))) {
            conn_connect_error(c, "internal", "out of memory");
            return;
        }
        c->op = si;
        c->op_free = free;
    }
    while (!c->dead && !si->busy) {
        if (conn_body_take(c, &c->body, ROLE_RPC_BODY_MAX + 5) < 0) {
            c->body_done = false;
            conn_connect_error(c, "invalid_argument", "bad chunked body");
            return;
        }
        uint8_t flags = 0;
        size_t ml = 0;
        long whole = wire_connect_envelope((const uint8_t *)bytebuf_head(&c->body),
                                           bytebuf_pending(&c->body), ROLE_RPC_BODY_MAX, &flags, &ml);
        if (whole < 0 || (whole > 0 && (flags & 0x01))) {
            conn_connect_error(c, "invalid_argument", "an envelope over %d bytes, or compressed",
                               ROLE_RPC_BODY_MAX);
            return;
        }
        if (whole == 0) {
            if (!c->body_done)
                return; /* more of the body wanted */
            if (bytebuf_pending(&c->body)) {
                conn_connect_error(c, "invalid_argument", "the body ends inside an envelope");
                return;
            }
            if (!si->have) {
                conn_connect_error(c, "invalid_argument", "no start message: nothing to send input to");
                return;
            }
            conn_stream_send(c, "{}", 2);
            conn_stream_end(c, NULL, NULL);
            return;
        }
        cJSON *m = cJSON_ParseWithLength(bytebuf_head(&c->body) + 5, ml);
        c->body.off += (size_t)whole;
        if (flags & 0x02) {
            /* An end-stream frame from the client: nothing more is sent. */
            cJSON_Delete(m);
            continue;
        }
        const cJSON *start = cJSON_GetObjectItemCaseSensitive(m, "start");
        const cJSON *data = cJSON_GetObjectItemCaseSensitive(m, "data");
        if (!cJSON_IsObject(m)) {
            cJSON_Delete(m);
            conn_connect_error(c, "invalid_argument", "a message that is not a JSON object");
            return;
        }
        if (start) {
            struct proc *p = select_proc(c, start);
            cJSON_Delete(m);
            if (!p)
                return; /* answered: not_found */
            si->id = p->id;
            si->have = true;
            continue;
        }
        if (!data) {
            cJSON_Delete(m); /* a keepalive */
            continue;
        }
        const cJSON *in = cJSON_GetObjectItemCaseSensitive(data, "input");
        const cJSON *bytes = cJSON_GetObjectItemCaseSensitive(in, "stdin");
        if (!bytes)
            bytes = cJSON_GetObjectItemCaseSensitive(in, "pty");
        if (!si->have || !cJSON_IsString(bytes)) {
            cJSON_Delete(m);
            conn_connect_error(c, "invalid_argument", si->have ? "data.input: expected stdin or pty bytes"
                                                          : "the first message must be start");
            return;
        }
        if (!bytes->valuestring[0]) {
            cJSON_Delete(m);
            continue;
        }
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "id", (double)si->id);
        cJSON_AddStringToObject(o, "data", bytes->valuestring);
        cJSON_Delete(m);
        si->busy = true;
        if (link_call("exec.input", o, stream_input_done, c) < 0) {
            si->busy = false;
            conn_connect_error(c, "unavailable", "hearth did not take the call");
            return;
        }
    }
}

/* ================= filesystem.Filesystem ================= */

struct fs_op {
    char path[4200], to[4200];
    int step;
    /* ListDir */
    cJSON *entries;
    unsigned depth;
    struct { char *path; unsigned level; } *queue;
    size_t qn, qi, qcap;
    char cursor[32];
};

static void fs_free(void *op)
{
    struct fs_op *f = op;
    cJSON_Delete(f->entries);
    for (size_t i = 0; i < f->qn; i++)
        free(f->queue[i].path);
    free(f->queue);
    free(f);
}

static void reply_entry(void *ctx, cJSON *res, int code, const char *msg)
{
    struct conn *c = ctx;
    struct fs_op *f = c->op;
    if (!res) {
        conn_connect_error(c, conn_connect_code(code, msg), "%s", msg);
        return;
    }
    cJSON *r = cJSON_CreateObject();
    cJSON_AddItemToObject(r, "entry", entry_json(res, f->step == 9 ? f->to : f->path));
    conn_connect_reply(c, r);
}

static void stat_then_reply(struct conn *c, const char *path)
{
    call_or_fail(c, "files.stat", path_params(path, false), reply_entry);
}

static void mkdir_done(void *ctx, cJSON *res, int code, const char *msg)
{
    struct conn *c = ctx;
    struct fs_op *f = c->op;
    if (!res) {
        conn_connect_error(c, conn_connect_code(code, msg), "%s", msg);
        return;
    }
    stat_then_reply(c, f->path);
}

static void mkdir_stat_done(void *ctx, cJSON *res, int code, const char *msg)
{
    struct conn *c = ctx;
    struct fs_op *f = c->op;
    if (res) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(res, "type");
        bool dir = cJSON_IsString(t) && !strcmp(t->valuestring, "dir");
        conn_connect_error(c, dir ? "already_exists" : "invalid_argument",
                           dir ? "directory %s already exists" : "%s exists and is not a directory", f->path);
        return;
    }
    if (code != -32002) {
        conn_connect_error(c, conn_connect_code(code, msg), "%s", msg);
        return;
    }
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "path", f->path);
    cJSON_AddBoolToObject(p, "parents", true);
    cJSON_AddNumberToObject(p, "uid", c->user.uid);
    cJSON_AddNumberToObject(p, "gid", c->user.gid);
    call_or_fail(c, "files.mkdir", p, mkdir_done);
}

static void move_renamed(void *ctx, cJSON *res, int code, const char *msg)
{
    struct conn *c = ctx;
    struct fs_op *f = c->op;
    if (!res) {
        conn_connect_error(c, conn_connect_code(code, msg), "%s", msg);
        return;
    }
    f->step = 9;
    stat_then_reply(c, f->to);
}

static void move_parent_done(void *ctx, cJSON *res, int code, const char *msg)
{
    struct conn *c = ctx;
    struct fs_op *f = c->op;
    if (!res) {
        conn_connect_error(c, conn_connect_code(code, msg), "%s", msg);
        return;
    }
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "from", f->path);
    cJSON_AddStringToObject(p, "to", f->to);
    call_or_fail(c, "files.rename", p, move_renamed);
}

static void remove_done(void *ctx, cJSON *res, int code, const char *msg)
{
    struct conn *c = ctx;
    struct fs_op *f = c->op;
    if (!res) {
        conn_connect_error(c, conn_connect_code(code, msg), "%s", msg);
        return;
    }
    if (cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(res, "done"))) {
        /* hearth removes at most 2000 entries per call: go on. */
        cJSON *p = path_params(f->path, false);
        cJSON_AddBoolToObject(p, "recursive", true);
        call_or_fail(c, "files.remove", p, remove_done);
        return;
    }
    conn_connect_reply(c, cJSON_CreateObject());
}

static void list_next(struct conn *c);

static void list_page(void *ctx, cJSON *res, int code, const char *msg)
{
    struct conn *c = ctx;
    struct fs_op *f = c->op;
    const char *dir = f->queue[f->qi].path;
    unsigned level = f->queue[f->qi].level;
    if (!res) {
        if (f->qi == 0) {
            conn_connect_error(c, conn_connect_code(code, msg), "%s", msg);
            return;
        }
        /* A subdirectory gone or unreadable meanwhile is left out. */
        f->cursor[0] = 0;
        f->qi++;
        list_next(c);
        return;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(res, "entries")) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
        if (!cJSON_IsString(name) || cJSON_GetObjectItemCaseSensitive(e, "error"))
            continue;
        if (cJSON_GetArraySize(f->entries) >= LIST_MAX) {
            conn_connect_error(c, "resource_exhausted", "more than %d entries", LIST_MAX);
            return;
        }
        char path[4200];
        snprintf(path, sizeof(path), "%s%s%s", dir, strcmp(dir, "/") ? "/" : "", name->valuestring);
        cJSON_AddItemToArray(f->entries, entry_json(e, path));
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(e, "type");
        if (cJSON_IsString(t) && !strcmp(t->valuestring, "dir") && level + 1 < f->depth) {
            if (f->qn == f->qcap) {
                size_t nc = f->qcap ? f->qcap * 2 : 16;
                void *q = realloc(f->queue, nc * sizeof(*f->queue));
                if (!q) {
                    conn_connect_error(c, "internal", "out of memory");
                    return;
                }
                f->queue = q;
                f->qcap = nc;
            }
            f->queue[f->qn].path = strdup(path);
            f->queue[f->qn].level = level + 1;
            f->qn++;
        }
    }
    const cJSON *next = cJSON_GetObjectItemCaseSensitive(res, "next");
    if (cJSON_IsString(next)) {
        snprintf(f->cursor, sizeof(f->cursor), "%s", next->valuestring);
    } else {
        f->cursor[0] = 0;
        f->qi++;
    }
    list_next(c);
}

static void list_next(struct conn *c)
{
    struct fs_op *f = c->op;
    if (f->qi >= f->qn) {
        cJSON *r = cJSON_CreateObject();
        cJSON_AddItemToObject(r, "entries", f->entries);
        f->entries = NULL;
        conn_connect_reply(c, r);
        return;
    }
    cJSON *p = path_params(f->queue[f->qi].path, f->qi == 0);
    if (f->cursor[0])
        cJSON_AddStringToObject(p, "cursor", f->cursor);
    call_or_fail(c, "files.list", p, list_page);
}

static void list_root_done(void *ctx, cJSON *res, int code, const char *msg)
{
    struct conn *c = ctx;
    if (!res) {
        conn_connect_error(c, conn_connect_code(code, msg), "%s", msg);
        return;
    }
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(res, "type");
    if (!cJSON_IsString(t) || strcmp(t->valuestring, "dir") != 0) {
        conn_connect_error(c, "invalid_argument", "path %s is not a directory", ((struct fs_op *)c->op)->path);
        return;
    }
    list_next(c);
}

static void rpc_fs(struct conn *c, const char *method, cJSON *msg)
{
    struct fs_op *f = calloc(1, sizeof(*f));
    if (!f) {
        conn_connect_error(c, "internal", "out of memory");
        return;
    }
    c->op = f;
    c->op_free = fs_free;
    const cJSON *path = cJSON_GetObjectItemCaseSensitive(msg, strcmp(method, "Move") ? "path" : "source");
    if (!cJSON_IsString(path) || entry_expand_path(c, path->valuestring, f->path, sizeof(f->path)) < 0) {
        conn_connect_error(c, "invalid_argument", "%s: expected a path", strcmp(method, "Move") ? "path" : "source");
        return;
    }
    if (!strcmp(method, "Stat")) {
        stat_then_reply(c, f->path);
    } else if (!strcmp(method, "MakeDir")) {
        call_or_fail(c, "files.stat", path_params(f->path, false), mkdir_stat_done);
    } else if (!strcmp(method, "Remove")) {
        cJSON *p = path_params(f->path, false);
        cJSON_AddBoolToObject(p, "recursive", true);
        call_or_fail(c, "files.remove", p, remove_done);
    } else if (!strcmp(method, "Move")) {
        const cJSON *to = cJSON_GetObjectItemCaseSensitive(msg, "destination");
        char dir[4200];
        if (!cJSON_IsString(to) || entry_expand_path(c, to->valuestring, f->to, sizeof(f->to)) < 0) {
            conn_connect_error(c, "invalid_argument", "destination: expected a path");
            return;
        }
        dir_of(f->to, dir, sizeof(dir));
        cJSON *p = cJSON_CreateObject();
        cJSON_AddStringToObject(p, "path", dir);
        cJSON_AddBoolToObject(p, "parents", true);
        cJSON_AddNumberToObject(p, "uid", c->user.uid);
        cJSON_AddNumberToObject(p, "gid", c->user.gid);
        call_or_fail(c, "files.mkdir", p, move_parent_done);
    } else { /* ListDir */
        const cJSON *depth = cJSON_GetObjectItemCaseSensitive(msg, "depth");
        f->depth = cJSON_IsNumber(depth) && depth->valuedouble >= 1 ? (unsigned)depth->valuedouble : 1;
        if (f->depth > 64)
            f->depth = 64;
        f->entries = cJSON_CreateArray();
        f->queue = calloc(16, sizeof(*f->queue));
        if (!f->entries || !f->queue) {
            conn_connect_error(c, "internal", "out of memory");
            return;
        }
        f->qcap = 16;
        f->queue[0].path = strdup(f->path);
        f->queue[0].level = 0;
        f->qn = 1;
        call_or_fail(c, "files.stat", path_params(f->path, true), list_root_done);
    }
}

void ops_rpc(struct conn *c, const char *service, const char *method, cJSON *msg)
{
    bool process = !strcmp(service, "process.Process");
    bool fs = !strcmp(service, "filesystem.Filesystem");
    if (process && !strcmp(method, "Start"))
        rpc_start(c, msg);
    else if (process && !strcmp(method, "Connect"))
        rpc_connect(c, msg);
    else if (process && !strcmp(method, "List"))
        rpc_list(c);
    else if (process && !strcmp(method, "SendInput"))
        rpc_send_input(c, msg);
    else if (process && !strcmp(method, "CloseStdin"))
        rpc_close_stdin(c, msg);
    else if (process && !strcmp(method, "SendSignal"))
        rpc_signal(c, msg);
    else if (process && !strcmp(method, "Update"))
        rpc_update(c, msg);
    else if (fs && !strcmp(method, "WatchDir"))
        watch_dir(c, msg);
    else if (fs && !strcmp(method, "CreateWatcher"))
        watch_create(c, msg);
    else if (fs && !strcmp(method, "GetWatcherEvents"))
        watch_events(c, msg);
    else if (fs && !strcmp(method, "RemoveWatcher"))
        watch_remove(c, msg);
    else if (fs && (!strcmp(method, "Stat") || !strcmp(method, "MakeDir") || !strcmp(method, "Move") ||
                    !strcmp(method, "Remove") || !strcmp(method, "ListDir")))
        rpc_fs(c, method, msg);
    else
        conn_connect_error(c, "unimplemented", "%s/%s is not implemented by hearth's envd endpoint",
                           service, method);
    cJSON_Delete(msg);
}
