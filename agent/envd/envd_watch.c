/* filesystem.Filesystem/WatchDir in the envd role process: a server
 * stream of what changes in a directory (and, recursive, beneath it), as
 * envd sends it: {"start":{}} once the watches are in place, then
 * {"filesystem":{"name","type"}} per change (EVENT_TYPE_CREATE, _WRITE,
 * _REMOVE, _RENAME, _CHMOD; the name relative to the watched directory)
 * and {"keepalive":{}} every Keepalive-Ping-Interval seconds, until the
 * client goes or Connect-Timeout-Ms passes.
 *
 * The events come from one inotify instance hearth made for this role
 * process (ENVD_WATCH_FD). The role, running as nobody, could not watch
 * a directory it cannot read, so hearth adds each watch (envd.watch, as
 * root, like files.stat) and the role reads what the kernel reports.
 * A directory followed by several streams is one watch (the kernel
 * gives the same number for the same directory); it is removed when the
 * last stream that follows it goes.
 *
 * Bounded: WATCH_DIRS_MAX directories over every stream (a recursive
 * watch of a larger tree ends with resource_exhausted), and a stream
 * whose client takes its events slower than they come ends with
 * resource_exhausted once ROLE_OUT_SOFT bytes wait for it (the client
 * learns it missed events rather than getting a silent gap).
 *
 * The polling watchers (CreateWatcher, GetWatcherEvents, RemoveWatcher)
 * are the same watches with a queue in place of a stream: CreateWatcher
 * answers the watcher's id once the watches are in place (where WatchDir
 * sends its start event), events wait in the watcher's queue until
 * GetWatcherEvents takes them. Bounded: WATCHERS_MAX watchers at once,
 * WATCHER_EVENTS_MAX events or WATCHER_BYTES_MAX bytes queued per watcher
 * (past either the watcher stops watching and its next poll gets
 * resource_exhausted, so the caller learns events were lost), and a
 * watcher nobody polls for envd.watcher_idle_ms is removed. */
#include "envd.h"
#include "envd_role.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/random.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cJSON.h>

#include "jsonout.h"
#include "utf8.h"

#define WATCH_DIRS_MAX 8192
#define PATH_CAP 4200
#define WATCHERS_MAX 32
#define WATCHER_EVENTS_MAX 4096
#define WATCHER_BYTES_MAX (1024 * 1024)

/* A polling watcher: its id, the events not yet taken, or why it stopped. */
struct watcher {
    char id[33];
    struct watch *w;     /* NULL once it stopped (an error waits for the poll) */
    bool ready;          /* its id was answered */
    struct bytebuf events; /* FilesystemEvent objects, comma-separated */
    unsigned nev;
    char err_code[32], err_msg[200];
    ev_timer idle;       /* envd.watcher_idle_ms without a poll: removed */
    struct watcher *next;
};

/* A directory the instance watches, and the streams that follow it. */
struct wdir {
    int wd;
    char *path;
    struct watch **subs;
    unsigned nsubs, capsubs;
};

struct watch {
    struct conn *c;      /* the stream, or the CreateWatcher call until it is answered;
                          * NULL once the stream ended or its client went */
    struct watcher *pw;  /* a polling watcher's queue; NULL for a stream */
    bool recursive, started, busy;
    bool with_entry;     /* includeEntry: events wait in queue for their stat */
    bool stat_busy;      /* the stat of the queue's first event is in flight */
    unsigned holds;      /* event delivery in progress: not freed under it */
    struct pev *queue;   /* includeEntry: events in order, not sent yet */
    size_t qhead, qlen, qcap;
    char root[PATH_CAP];
    int *wds;            /* the directories it follows */
    size_t nwd, capwd;
    char **todo;         /* directories still to watch (and list) */
    size_t ntodo, itodo, captodo;
    char cursor[32];     /* the listing of todo[itodo] in progress */
    bool listing;
    ev_timer life;       /* Connect-Timeout-Ms */
};

/* An event waiting for its entry (includeEntry), or behind one that is. */
struct pev {
    const char *type;
    char *name, *full;
    bool entry;          /* create, write and chmod carry one, as in envd */
};

#define QUEUE_MAX 4096   /* events waiting per stream with includeEntry */

static int ifd = -1;
static struct watcher *watchers;
static unsigned n_watchers;

/* Whether w still watches for someone: its stream, or its watcher. */
static bool alive(const struct watch *w) { return w->c || w->pw; }
static ev_io ifd_io;
static struct wdir **dirs; /* sorted by wd */
static size_t ndirs, capdirs;

/* ---------------- the watch table ---------------- */

static size_t dir_pos(int wd)
{
    size_t lo = 0, hi = ndirs;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (dirs[mid]->wd < wd)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static struct wdir *dir_find(int wd)
{
    size_t i = dir_pos(wd);
    return i < ndirs && dirs[i]->wd == wd ? dirs[i] : NULL;
}

static void dir_free(struct wdir *d)
{
    size_t i = dir_pos(d->wd);
    if (i < ndirs && dirs[i] == d) {
        memmove(dirs + i, dirs + i + 1, (ndirs - i - 1) * sizeof(*dirs));
        ndirs--;
    }
    free(d->path);
    free(d->subs);
    free(d);
}

/* w stops following d; the kernel's watch goes with its last stream. */
static void dir_unsub(struct wdir *d, struct watch *w)
{
    for (unsigned i = 0; i < d->nsubs; i++)
        if (d->subs[i] == w) {
            d->subs[i] = d->subs[--d->nsubs];
            break;
        }
    if (!d->nsubs) {
        if (ifd >= 0)
            inotify_rm_watch(ifd, d->wd); /* EINVAL when the kernel dropped it already */
        dir_free(d);
    }
}

static void wds_remove(struct watch *w, int wd)
{
    for (size_t i = 0; i < w->nwd; i++)
        if (w->wds[i] == wd) {
            w->wds[i] = w->wds[--w->nwd];
            return;
        }
}

/* w follows directory wd at path. -1 when a bound or memory says no. */
static int dir_sub(int wd, const char *path, struct watch *w)
{
    struct wdir *d = dir_find(wd);
    if (!d) {
        if (ndirs >= WATCH_DIRS_MAX)
            return -1;
        if (ndirs == capdirs) {
            size_t nc = capdirs ? capdirs * 2 : 64;
            void *n = realloc(dirs, nc * sizeof(*dirs));
            if (!n)
                return -1;
            dirs = n;
            capdirs = nc;
        }
        d = calloc(1, sizeof(*d));
        if (!d || !(d->path = strdup(path))) {
            free(d);
            return -1;
        }
        d->wd = wd;
        size_t i = dir_pos(wd);
        memmove(dirs + i + 1, dirs + i, (ndirs - i) * sizeof(*dirs));
        dirs[i] = d;
        ndirs++;
    }
    for (unsigned i = 0; i < d->nsubs; i++)
        if (d->subs[i] == w)
            return 0; /* the same directory reached twice */
    if (d->nsubs == d->capsubs) {
        unsigned nc = d->capsubs ? d->capsubs * 2 : 2;
        void *n = realloc(d->subs, nc * sizeof(*d->subs));
        if (!n)
            goto undo;
        d->subs = n;
        d->capsubs = nc;
    }
    if (w->nwd == w->capwd) {
        size_t nc = w->capwd ? w->capwd * 2 : 16;
        void *n = realloc(w->wds, nc * sizeof(*w->wds));
        if (!n)
            goto undo;
        w->wds = n;
        w->capwd = nc;
    }
    d->subs[d->nsubs++] = w;
    w->wds[w->nwd++] = wd;
    return 0;
undo:
    if (!d->nsubs) {
        inotify_rm_watch(ifd, wd);
        dir_free(d);
    }
    return -1;
}

/* ---------------- a stream's life ---------------- */

static void todo_clear(struct watch *w)
{
    for (size_t i = w->itodo; i < w->ntodo; i++)
        free(w->todo[i]);
    free(w->todo);
    w->todo = NULL;
    w->ntodo = w->itodo = w->captodo = 0;
}

static void queue_pop(struct watch *w)
{
    struct pev *e = &w->queue[w->qhead];
    free(e->name);
    free(e->full);
    w->qhead++;
    w->qlen--;
    if (!w->qlen)
        w->qhead = 0;
}

static void watch_destroy(struct watch *w)
{
    while (w->qlen)
        queue_pop(w);
    free(w->queue);
    while (w->nwd) {
        int wd = w->wds[--w->nwd];
        struct wdir *d = dir_find(wd);
        if (d)
            dir_unsub(d, w);
    }
    free(w->wds);
    todo_clear(w);
    free(w);
}

/* The watcher leaves the table; its watch (if any) is let go by the
 * caller (watch_gone) once no call is in flight for it. */
static void watcher_drop(struct watcher *pw)
{
    for (struct watcher **pp = &watchers; *pp; pp = &(*pp)->next)
        if (*pp == pw) {
            *pp = pw->next;
            break;
        }
    if (pw->w)
        pw->w->pw = NULL;
    ev_timer_stop(role_loop, &pw->idle);
    bytebuf_release(&pw->events);
    n_watchers--;
    free(pw);
}

/* The connection's op goes: the stream ended or its client left. A
 * call in flight or an event being delivered keeps w until it is done. */
static void watch_release(void *op)
{
    struct watch *w = op;
    if (w->pw) {
        /* A CreateWatcher call whose client went before its answer: the
         * watcher was never known to anyone. */
        watcher_drop(w->pw);
    } else if (w->c) {
        ev_timer_stop(role_loop, &w->life);
        conn_streams--;
    }
    w->c = NULL;
    if (!w->busy && !w->stat_busy && !w->holds)
        watch_destroy(w);
}

/* After a call's reply or a delivery: w goes if its connection did. */
static bool watch_gone(struct watch *w)
{
    if (alive(w))
        return false;
    if (!w->busy && !w->stat_busy && !w->holds)
        watch_destroy(w);
    return true;
}

bool watch_owns(const struct conn *c) { return c->op && c->op_free == watch_release; }

void watch_keepalive(struct conn *c)
{
    static const char ka[] = "{\"keepalive\":{}}";
    conn_stream_send(c, ka, sizeof(ka) - 1);
}

static void life_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
    struct watch *w = t->data;
    if (w->c)
        conn_stream_end(w->c, "deadline_exceeded", "the watch reached its Connect-Timeout-Ms");
}

static int todo_push(struct watch *w, const char *path)
{
    if (w->ntodo - w->itodo + w->nwd >= WATCH_DIRS_MAX)
        return -1;
    if (w->itodo && w->itodo == w->ntodo)
        w->itodo = w->ntodo = 0;
    if (w->ntodo == w->captodo) {
        size_t nc = w->captodo ? w->captodo * 2 : 16;
        void *n = realloc(w->todo, nc * sizeof(*w->todo));
        if (!n)
            return -1;
        w->todo = n;
        w->captodo = nc;
    }
    if (!(w->todo[w->ntodo] = strdup(path)))
        return -1;
    w->ntodo++;
    return 0;
}

static void todo_next(struct watch *w)
{
    free(w->todo[w->itodo]);
    w->todo[w->itodo++] = NULL;
    w->listing = false;
    w->cursor[0] = 0;
}

static void step(struct watch *w);

/* The watch cannot go on: a stream ends with the error, a CreateWatcher
 * call is answered with it, a watcher stops watching and keeps the error
 * for its next poll. */
static void watch_fail(struct watch *w, const char *code, const char *msg)
{
    if (w->c) {
        conn_connect_error(w->c, code, "%s", msg);
        return;
    }
    struct watcher *pw = w->pw;
    if (!pw)
        return;
    snprintf(pw->err_code, sizeof(pw->err_code), "%s", code);
    snprintf(pw->err_msg, sizeof(pw->err_msg), "%s", msg);
    pw->w = NULL;
    w->pw = NULL;
    /* The queued events are worth nothing next to the gap: dropped. */
    bytebuf_release(&pw->events);
    pw->nev = 0;
    watch_gone(w);
}

static void end_exhausted(struct watch *w)
{
    char m[96];
    snprintf(m, sizeof(m), "more than %d directories to watch (hearth's bound over every watch)",
             WATCH_DIRS_MAX);
    watch_fail(w, "resource_exhausted", m);
}

static void listed(void *ctx, cJSON *res, int code, const char *msg)
{
    struct watch *w = ctx;
    w->busy = false;
    if (watch_gone(w))
        return;
    const char *dir = w->todo[w->itodo];
    if (!res) {
        /* A subdirectory gone or unreadable meanwhile is left out. */
        todo_next(w);
        step(w);
        return;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(res, "entries")) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(e, "type");
        if (!cJSON_IsString(name) || !cJSON_IsString(type) || strcmp(type->valuestring, "dir") ||
            cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "lossy")))
            continue;
        char path[PATH_CAP];
        if ((size_t)snprintf(path, sizeof(path), "%s%s%s", dir, strcmp(dir, "/") ? "/" : "",
                             name->valuestring) >= sizeof(path))
            continue;
        if (todo_push(w, path) < 0) {
            end_exhausted(w);
            return;
        }
    }
    const cJSON *next = cJSON_GetObjectItemCaseSensitive(res, "next");
    if (cJSON_IsString(next))
        snprintf(w->cursor, sizeof(w->cursor), "%s", next->valuestring);
    else
        todo_next(w);
    step(w);
}

static void watched(void *ctx, cJSON *res, int code, const char *msg)
{
    struct watch *w = ctx;
    const cJSON *wd = res ? cJSON_GetObjectItemCaseSensitive(res, "wd") : NULL;
    w->busy = false;
    if (!alive(w)) {
        /* Its stream is gone: a watch no stream follows is not kept. */
        if (cJSON_IsNumber(wd) && !dir_find(wd->valueint))
            inotify_rm_watch(ifd, wd->valueint);
        watch_gone(w);
        return;
    }
    const char *dir = w->todo[w->itodo];
    if (!cJSON_IsNumber(wd)) {
        if (!w->started && w->nwd == 0) {
            /* The directory asked for: envd's answers. */
            conn_connect_error(w->c, res ? "internal" : conn_connect_code(code, msg), "%s",
                          res ? "no watch number" : msg);
            return;
        }
        todo_next(w);
        step(w);
        return;
    }
    if (dir_sub(wd->valueint, dir, w) < 0) {
        if (!dir_find(wd->valueint))
            inotify_rm_watch(ifd, wd->valueint);
        end_exhausted(w);
        return;
    }
    if (w->recursive)
        w->listing = true;
    else
        todo_next(w);
    step(w);
}

/* A CreateWatcher call's watches are in place: its answer is the
 * watcher's id, and from now on the watcher lives on its own. */
static void watcher_ready(struct watch *w)
{
    struct conn *c = w->c;
    struct watcher *pw = w->pw;
    c->op = NULL;
    c->op_free = NULL;
    w->c = NULL;
    pw->ready = true;
    ev_timer_again(role_loop, &pw->idle);
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "watcherId", pw->id);
    conn_connect_reply(c, r);
}

/* The next call: watch the next directory, or list the one watched
 * (recursive), or, once every one is watched, the start event. */
static void step(struct watch *w)
{
    if (w->busy || !alive(w))
        return;
    if (w->itodo < w->ntodo) {
        cJSON *p = cJSON_CreateObject();
        cJSON_AddStringToObject(p, "path", w->todo[w->itodo]);
        cJSON_AddBoolToObject(p, "follow", true);
        if (w->listing && w->cursor[0])
            cJSON_AddStringToObject(p, "cursor", w->cursor);
        w->busy = true;
        if (link_call(w->listing ? "files.list" : "envd.watch", p, w->listing ? listed : watched,
                      w) < 0) {
            w->busy = false;
            watch_fail(w, "unavailable", "hearth did not take the call");
        }
        return;
    }
    if (w->started)
        return;
    w->started = true;
    if (w->pw) {
        watcher_ready(w);
        return;
    }
    static const char start[] = "{\"start\":{}}";
    /* A failed write closes the connection, and w with it. */
    w->holds++;
    conn_stream_send(w->c, start, sizeof(start) - 1);
    w->holds--;
    if (watch_gone(w))
        return;
    if (w->c->req.keepalive_s > 0)
        conn_keepalive_start(w->c, (double)w->c->req.keepalive_s);
    if (w->c->req.timeout_ms > 0) {
        ev_timer_set(&w->life, (double)w->c->req.timeout_ms / 1000., 0.);
        ev_timer_start(role_loop, &w->life);
    }
    conn_read_more(w->c);
}

static const cJSON *field(const cJSON *msg, const char *camel, const char *snake)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(msg, camel);
    return v ? v : cJSON_GetObjectItemCaseSensitive(msg, snake);
}

static void idle_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
    struct watcher *pw = t->data;
    struct watch *w = pw->w;
    watcher_drop(pw);
    if (w)
        watch_gone(w);
}

/* WatchDir (a stream) and CreateWatcher (polled): the watch, set up by
 * step() call after call; a watcher gets its table entry at once, so
 * the bound counts those still being set up. */
static void watch_new(struct conn *c, const cJSON *msg, bool polled)
{
    const cJSON *path = cJSON_GetObjectItemCaseSensitive(msg, "path");
    if (!polled && !c->stream_json) {
        conn_connect_error(c, "invalid_argument", "WatchDir is a server stream (application/connect+json)");
        return;
    }
    if (ifd < 0) {
        conn_connect_error(c, "unavailable", "no inotify instance (hearth's log says why)");
        return;
    }
    if (!polled && conn_streams >= (unsigned)RC.max_streams) {
        conn_connect_error(c, "resource_exhausted", "envd.max_streams: %lld streams already open",
                      (long long)RC.max_streams);
        return;
    }
    if (polled && n_watchers >= WATCHERS_MAX) {
        conn_connect_error(c, "resource_exhausted",
                      "%d watchers already (RemoveWatcher ends one; an unpolled one goes after %lld ms)",
                      WATCHERS_MAX, (long long)RC.watcher_idle_ms);
        return;
    }
    struct watch *w = calloc(1, sizeof(*w));
    struct watcher *pw = polled ? calloc(1, sizeof(*pw)) : NULL;
    uint8_t rnd[16];
    if (!w || (polled && (!pw || getrandom(rnd, sizeof(rnd), GRND_NONBLOCK) != sizeof(rnd)))) {
        free(w);
        free(pw);
        conn_connect_error(c, "internal", "out of memory or randomness");
        return;
    }
    if (!cJSON_IsString(path) || entry_expand_path(c, path->valuestring, w->root, sizeof(w->root)) < 0 ||
        todo_push(w, w->root) < 0) {
        todo_clear(w);
        free(w);
        free(pw);
        conn_connect_error(c, "invalid_argument", "path: expected a path");
        return;
    }
    w->c = c;
    w->recursive = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(msg, "recursive"));
    w->with_entry = cJSON_IsTrue(field(msg, "includeEntry", "include_entry"));
    ev_init(&w->life, life_cb);
    w->life.data = w;
    c->op = w;
    c->op_free = watch_release;
    if (pw) {
        /* Unguessable: an id is all a poll or a removal names. */
        for (size_t i = 0; i < sizeof(rnd); i++)
            snprintf(pw->id + 2 * i, 3, "%02x", rnd[i]);
        pw->w = w;
        ev_init(&pw->idle, idle_cb);
        pw->idle.repeat = (double)RC.watcher_idle_ms / 1000.;
        pw->idle.data = pw;
        pw->next = watchers;
        watchers = pw;
        n_watchers++;
        w->pw = pw;
    } else {
        c->state = C_STREAM;
        conn_streams++;
    }
    step(w);
}

void watch_dir(struct conn *c, const cJSON *msg) { watch_new(c, msg, false); }
void watch_create(struct conn *c, const cJSON *msg) { watch_new(c, msg, true); }

static struct watcher *watcher_find(struct conn *c, const cJSON *msg)
{
    const cJSON *id = field(msg, "watcherId", "watcher_id");
    for (struct watcher *pw = watchers; cJSON_IsString(id) && pw; pw = pw->next)
        if (pw->ready && !strcmp(pw->id, id->valuestring))
            return pw;
    conn_connect_error(c, "not_found", "watcher %.40s not found (removed, or not polled for %lld ms)",
                  cJSON_IsString(id) ? id->valuestring : "(none)", (long long)RC.watcher_idle_ms);
    return NULL;
}

void watch_events(struct conn *c, const cJSON *msg)
{
    struct watcher *pw = watcher_find(c, msg);
    if (!pw)
        return;
    if (pw->err_code[0]) {
        /* It stopped: the error once, then it is gone. */
        char code[32], m[200];
        snprintf(code, sizeof(code), "%s", pw->err_code);
        snprintf(m, sizeof(m), "%s", pw->err_msg);
        watcher_drop(pw);
        conn_connect_error(c, code, "%s", m);
        return;
    }
    ev_timer_again(role_loop, &pw->idle);
    size_t n = bytebuf_pending(&pw->events);
    char *body = malloc(n + 16);
    if (!body) {
        conn_connect_error(c, "internal", "out of memory");
        return;
    }
    memcpy(body, "{\"events\":[", 11);
    if (n)
        memcpy(body + 11, bytebuf_head(&pw->events), n);
    memcpy(body + 11 + n, "]}", 2);
    bytebuf_release(&pw->events);
    pw->nev = 0;
    conn_respond(c, 200, "application/json", body, n + 13);
    free(body);
}

void watch_remove(struct conn *c, const cJSON *msg)
{
    struct watcher *pw = watcher_find(c, msg);
    if (!pw)
        return;
    struct watch *w = pw->w;
    watcher_drop(pw);
    if (w)
        watch_gone(w);
    conn_connect_reply(c, cJSON_CreateObject());
}

/* ---------------- the kernel's events ---------------- */

static const char *event_type(uint32_t m)
{
    /* In envd's order of precedence (one inotify event has one kind). */
    if (m & (IN_CREATE | IN_MOVED_TO))
        return "EVENT_TYPE_CREATE";
    if (m & (IN_MOVED_FROM | IN_MOVE_SELF))
        return "EVENT_TYPE_RENAME";
    if (m & IN_ATTRIB)
        return "EVENT_TYPE_CHMOD";
    if (m & IN_MODIFY)
        return "EVENT_TYPE_WRITE";
    if (m & (IN_DELETE | IN_DELETE_SELF))
        return "EVENT_TYPE_REMOVE";
    return NULL;
}

/* name as valid UTF-8 (each bad byte U+FFFD), into out. */
static void lossy(const char *s, char *out, size_t cap)
{
    size_t o = 0, n = strlen(s);
    while (n && o + 4 < cap) {
        long bad = utf8_invalid_at(s, n);
        size_t good = bad < 0 ? n : (size_t)bad;
        if (good > cap - o - 4)
            good = cap - o - 4;
        memcpy(out + o, s, good);
        o += good;
        s += good;
        n -= good;
        if (bad >= 0 && (size_t)bad == good && n) {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            s++;
            n--;
        }
    }
    out[o] = 0;
}

/* An event for a polling watcher: queued for its next poll, within
 * the watcher's bounds. */
static void watcher_queue(struct watch *w, const char *json)
{
    struct watcher *pw = w->pw;
    size_t n = strlen(json), need = bytebuf_pending(&pw->events) + n + 1;
    if (pw->nev >= WATCHER_EVENTS_MAX || need > WATCHER_BYTES_MAX) {
        char m[160];
        snprintf(m, sizeof(m),
                 "more than %d events or %d bytes waited for GetWatcherEvents: some were lost",
                 WATCHER_EVENTS_MAX, WATCHER_BYTES_MAX);
        watch_fail(w, "resource_exhausted", m);
        return;
    }
    if (bytebuf_room(&pw->events) < n + 1) {
        bytebuf_compact(&pw->events);
        if (bytebuf_room(&pw->events) < n + 1 &&
            bytebuf_resize(&pw->events, bytebuf_grown_cap(pw->events.cap, 4096, need,
                                                          WATCHER_BYTES_MAX)) < 0) {
            watch_fail(w, "resource_exhausted", "out of memory for the watcher's events");
            return;
        }
    }
    if (pw->nev)
        bytebuf_put(&pw->events, ",", 1);
    bytebuf_put(&pw->events, json, n);
    pw->nev++;
}

/* One FilesystemEvent to the client, with its entry when there is one. */
static void send_event(struct watch *w, const char *type, const char *name, cJSON *entry)
{
    char safe[PATH_CAP * 3 / 2];
    lossy(name, safe, sizeof(safe));
    /* A stream's message wraps the event; a watcher's queue holds it bare. */
    cJSON *o = cJSON_CreateObject(), *fs = w->pw ? o : cJSON_AddObjectToObject(o, "filesystem");
    cJSON_AddStringToObject(fs, "name", safe);
    cJSON_AddStringToObject(fs, "type", type);
    if (entry)
        cJSON_AddItemToObject(fs, "entry", entry);
    char *t = jsonout_print(o);
    cJSON_Delete(o);
    if (t && w->pw)
        watcher_queue(w, t);
    else if (t)
        conn_stream_send(w->c, t, strlen(t));
    cJSON_free(t);
}

static void pump(struct watch *w);

static void entry_done(void *ctx, cJSON *res, int code, const char *msg)
{
    struct watch *w = ctx;
    w->stat_busy = false;
    if (watch_gone(w))
        return;
    struct pev *e = &w->queue[w->qhead];
    /* Best effort, as envd: an entry gone meanwhile is sent without one. */
    w->holds++;
    send_event(w, e->type, e->name, res ? entry_json(res, e->full) : NULL);
    queue_pop(w);
    pump(w);
    w->holds--;
    watch_gone(w);
}

/* Sends the queue's events in order, each that carries an entry once
 * hearth's files.stat of it is back. */
static void pump(struct watch *w)
{
    while (alive(w) && w->qlen && !w->stat_busy) {
        struct pev *e = &w->queue[w->qhead];
        if (!e->entry) {
            send_event(w, e->type, e->name, NULL);
            queue_pop(w);
            continue;
        }
        cJSON *p = cJSON_CreateObject();
        cJSON_AddStringToObject(p, "path", e->full);
        w->stat_busy = true;
        if (link_call("files.stat", p, entry_done, w) < 0) {
            w->stat_busy = false;
            send_event(w, e->type, e->name, NULL);
            queue_pop(w);
        }
    }
}

static int queue_push(struct watch *w, const char *type, const char *name, const char *full)
{
    if (w->qlen >= QUEUE_MAX)
        return -1;
    if (w->qhead + w->qlen == w->qcap) {
        if (w->qhead) {
            memmove(w->queue, w->queue + w->qhead, w->qlen * sizeof(*w->queue));
            w->qhead = 0;
        } else {
            size_t nc = w->qcap ? w->qcap * 2 : 16;
            void *n = realloc(w->queue, nc * sizeof(*w->queue));
            if (!n)
                return -1;
            w->queue = n;
            w->qcap = nc;
        }
    }
    struct pev *e = &w->queue[w->qhead + w->qlen];
    e->type = type;
    e->entry = !strcmp(type, "EVENT_TYPE_CREATE") || !strcmp(type, "EVENT_TYPE_WRITE") ||
               !strcmp(type, "EVENT_TYPE_CHMOD");
    e->name = strdup(name);
    e->full = strdup(full);
    if (!e->name || !e->full) {
        free(e->name);
        free(e->full);
        return -1;
    }
    w->qlen++;
    return 0;
}

static void deliver(struct watch *w, const char *type, const char *name, const char *full,
                    bool new_dir)
{
    struct conn *c = w->c;
    if (c && conn_out_pending(c) > ROLE_OUT_SOFT) {
        conn_stream_end(c, "resource_exhausted",
                   "the client took the events slower than they came: some were not sent");
        return;
    }
    if (new_dir && w->recursive && todo_push(w, full) < 0) {
        end_exhausted(w);
        return;
    }
    if (w->with_entry) {
        if (queue_push(w, type, name, full) < 0) {
            watch_fail(w, "resource_exhausted",
                       "events came faster than their entries could be read: some were not sent");
            return;
        }
        pump(w);
    } else {
        send_event(w, type, name, NULL);
    }
    if (alive(w) && new_dir && w->recursive)
        step(w);
}

static void on_event(const struct inotify_event *ev)
{
    if (ev->mask & IN_Q_OVERFLOW) {
        /* Events were lost for every stream: each ends saying so. Ending
         * one changes the table, so they are gathered first. */
        struct watch **all = NULL;
        size_t na = 0;
        for (size_t i = 0; i < ndirs; i++)
            for (unsigned k = 0; k < dirs[i]->nsubs; k++) {
                struct watch *w = dirs[i]->subs[k], **grown;
                if (w->holds || !(grown = realloc(all, (na + 1) * sizeof(*all))))
                    continue;
                all = grown;
                all[na++] = w;
                w->holds++;
            }
        for (size_t i = 0; i < na; i++)
            if (alive(all[i]) && all[i]->started)
                watch_fail(all[i], "data_loss",
                           "events were lost: the kernel's inotify queue overflowed");
        for (size_t i = 0; i < na; i++) {
            all[i]->holds--;
            watch_gone(all[i]);
        }
        free(all);
        return;
    }
    struct wdir *d = dir_find(ev->wd);
    if (!d)
        return;
    if (ev->mask & IN_IGNORED) {
        /* The kernel dropped the watch (the directory is gone). */
        for (unsigned k = 0; k < d->nsubs; k++)
            wds_remove(d->subs[k], d->wd);
        dir_free(d);
        return;
    }
    const char *type = event_type(ev->mask);
    if (!type)
        return;
    char full[PATH_CAP];
    if (ev->len)
        snprintf(full, sizeof(full), "%s%s%s", d->path, strcmp(d->path, "/") ? "/" : "", ev->name);
    else
        snprintf(full, sizeof(full), "%s", d->path);
    bool new_dir = ev->len && (ev->mask & IN_ISDIR) && (ev->mask & (IN_CREATE | IN_MOVED_TO));
    /* Delivery may end streams (and with the last one, free d). */
    unsigned n = d->nsubs;
    struct watch **subs = malloc(n * sizeof(*subs));
    if (!subs)
        return;
    memcpy(subs, d->subs, n * sizeof(*subs));
    for (unsigned k = 0; k < n; k++)
        subs[k]->holds++;
    for (unsigned k = 0; k < n; k++) {
        struct watch *w = subs[k];
        if (!alive(w) || !w->started)
            continue;
        /* The directory's own removal or move is its parent's event,
         * except for the watched directory itself ("."). */
        if (!ev->len && strcmp(full, w->root))
            continue;
        size_t rl = strlen(w->root);
        const char *name = !ev->len ? "."
                           : !strncmp(full, w->root, rl) && full[rl] == '/' ? full + rl + 1
                           : !strcmp(w->root, "/") ? full + 1
                                                    : ev->name;
        deliver(w, type, name, full, new_dir);
    }
    for (unsigned k = 0; k < n; k++) {
        subs[k]->holds--;
        watch_gone(subs[k]);
    }
    free(subs);
}

static void ifd_cb(struct ev_loop *loop, ev_io *io, int revents)
{
    char buf[65536] __attribute__((aligned(__alignof__(struct inotify_event))));
    for (int round = 0; round < 8; round++) {
        ssize_t n = read(ifd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        for (ssize_t off = 0; off + (ssize_t)sizeof(struct inotify_event) <= n;) {
            const struct inotify_event *ev = (const struct inotify_event *)(buf + off);
            off += (ssize_t)sizeof(*ev) + ev->len;
            if (off > n)
                break;
            on_event(ev);
        }
    }
}

void watch_init(void)
{
    if (fcntl(ENVD_WATCH_FD, F_GETFD) < 0)
        return;
    ifd = ENVD_WATCH_FD;
    fcntl(ifd, F_SETFD, FD_CLOEXEC);
    fcntl(ifd, F_SETFL, O_NONBLOCK);
    ev_io_init(&ifd_io, ifd_cb, ifd, EV_READ);
    ev_io_start(role_loop, &ifd_io);
}
