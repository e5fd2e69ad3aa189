/* The envd role process's side of its links to hearth: the calls,
 * spread over the links and answered in order per link, the settings
 * hearth sends (envd.config) and the accounts they carry. Notifications
 * other than envd.config go to the hook the loop hands down
 * (link_open): this file calls nothing of the role's others. */
#include "envd.h"
#include "envd_role.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>

#include "jsonout.h"
#include "linebuf.h"
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
static role_note_fn on_note;

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

int link_user_find(const char *name, struct role_user *u)
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

const char *link_uid_name(uid_t uid, char *buf, size_t n) { return id_name(RC.passwd, 1, uid, buf, n); }
const char *link_gid_name(gid_t gid, char *buf, size_t n) { return id_name(RC.group, 1, gid, buf, n); }

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

int link_call(const char *method, cJSON *params, call_fn fn, void *ctx)
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

void link_cancel(void *ctx)
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
        else
            on_note(method->valuestring, params);
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

void link_open(role_note_fn note)
{
    on_note = note;
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
}
