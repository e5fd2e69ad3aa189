#include "skills.h"
#include "err.h"
#include "pathname.h"
#include "skills_priv.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cJSON.h>
#include <ev.h>

#include "childjob.h"
#include "config.h"
#include "events.h"
#include "gates.h"
#include "hearth.h"
#include "jsonout.h"
#include "log.h"
#include "safepath.h"
#include "skillsyaml.h"
#include "launch.h"
#include "tree.h"

/* ------------------------------------------------------------------ */
/* The runtime: configuration, triggers and the last run. */

static struct {
    bool enabled, started, reached;
    char *pub, *priv;
    char **ignore; /* NULL-terminated */
    /* skills.mode "external_dirs": no links (those of an earlier run are
     * removed), Hermes's config.yaml (yaml) lists public instead. */
    bool ext;
    char *yaml;
    int ystate; /* the last run's skillsyaml state */
    int64_t poll_ms, timeout_ms;
    ev_timer poll, debounce;
    ev_io ino;
    dev_t wdev;
    ino_t wino;
    const char *(*failed_mount)(const char *path);
    /* Why the walk or fork under way was stopped (skills_mount_left). */
    char stopped[256];
    struct skills_cache *cache;
    /* the last run */
    unsigned long runs;
    char trigger[16];
    struct skills_counts last;
    int64_t last_wall_ms, last_us;
    char error[512];
    uint32_t names_digest; /* the shadows and clashes last logged */
} S; /* zero-filled: its buffers take no room in the file */
/* Kept out of S, whose only non-zero start they are. */
static int ino_fd = -1, ino_wd = -1;

bool skills_enabled(void)
{
    return S.enabled;
}

static void watch_public(dev_t dev, ino_t ino);

/* The outcome of one reconcile (run here or in the child): the last
 * run, the log, the skills.sync event, the phase. report: the skills not
 * linked because of their names, one a line (NULL: the run has no
 * result; what was last logged stands). */
static void record_run(const char *trigger, int rc, const char *err,
                       const struct skills_counts *c, int64_t us, dev_t dev, ino_t ino,
                       const char *report)
{
    /* Shadows and clashes are logged when they change, not at every
     * poll that finds them still there. */
    bool names_changed = report && c->names_digest != S.names_digest;
    if (names_changed) {
        if (!report[0])
            log_info("skills (%s): no skill is shadowed or clashes by name any more", trigger);
        for (const char *l = report; *l;) {
            const char *nl = strchr(l, '\n');
            int n = nl ? (int)(nl - l) : (int)strlen(l);
            log_info("skills (%s): %.*s", trigger, n, l);
            l += n + (nl != NULL);
        }
        S.names_digest = c->names_digest;
    }
    S.last = *c;
    S.last_us = us;
    S.last_wall_ms = wall_ms();
    S.runs++;
    snprintf(S.trigger, sizeof(S.trigger), "%s", trigger);
    /* The first good run after a failed one is news too: the host that
     * was told of the error (a share that failed or hung) learns it is
     * over. */
    bool recovered = rc == 0 && S.error[0];
    snprintf(S.error, sizeof(S.error), "%s", rc < 0 ? err : "");
    if (rc < 0)
        log_warn("skills (%s): %s", trigger, err);
    else if (recovered)
        log_info("skills (%s): the overlay runs without error again", trigger);
    bool ychanged = S.ext && (S.ystate == SKILLSYAML_ADDED || S.ystate == SKILLSYAML_CREATED);
    if (ychanged)
        log_info("skills (%s): %s %s in %s's skills.external_dirs", trigger,
                 S.ystate == SKILLSYAML_CREATED ? "created with" : "added", S.pub, S.yaml);
    if (S.last.created || S.last.removed || S.last.cat_created || S.last.cat_converted ||
        S.last.cat_removed || rc < 0 || recovered || names_changed || ychanged) {
        log_info("skills (%s): %u linked, %u new, %u removed, %u shadowed, %u clashes in %lld us",
                 trigger, S.last.linked + S.last.created, S.last.created, S.last.removed,
                 S.last.shadowed, S.last.clashes, (long long)S.last_us);
        /* The event's own time_ms is the run's: not repeated. */
        cJSON *ev = skills_last_json();
        cJSON_DeleteItemFromObjectCaseSensitive(ev, "time_ms");
        events_emit("skills.sync", ev);
    }
    /* Per-entry errors still leave a usable overlay; an unreadable
     * directory does not. */
    bool usable = rc == 0 || S.last.errors > 0;
    if (usable && !S.reached) {
        S.reached = true;
        gate_set("skills", true);
    }
    if (S.started)
        watch_public(dev, ino);
}

/* Whether a reconcile may run now; -1 with err when not. */
static int sync_allowed(struct err *err)
{
    const char *fm;

    if (!S.enabled)
        return err_set(err, "the skills overlay is not configured (skills.public, skills.private)");
    if (!S.started) {
        /* Before mounts and seeding, private may be the image's directory
         * under a share still to come: writing there would be lost. */
        return err_set(err, "the skills overlay starts after mounts and seeding");
    }
    if (S.failed_mount && ((fm = S.failed_mount(S.pub)) || (fm = S.failed_mount(S.priv)))) {
        err_set(err, "%s", fm);
        snprintf(S.error, sizeof(S.error), "%s", fm);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* The walks run in a child process (init/proc/childjob.c): an agent that
 * fills its skill directory with 100,000 entries, or a share that hangs,
 * stalls that child, never the loop. One walk at a time: a reconcile
 * (skills_sync) or a dry run for skills.list. A reconcile asked for while
 * one runs is coalesced into one more run after it, whatever the number
 * of triggers; a skills.sync is answered by the first run that starts
 * after it arrived, a skills.list by the first dry run after it arrived.
 *
 * The child hands back, over its pipe, records of one type byte and a
 * u32 length: 'R' the counts (struct wire_result), 'E' the reconcile's
 * error, 'N' the skills not linked because of their names (log lines),
 * 'K' the links cache it left (skills_cache_encode; not sent when the
 * run changed nothing in it but its run count), 'L' the lists
 * as JSON (dry runs), 'X' why a dry run has no lists, and 'Z' last, so a
 * child killed midway is never read as a whole result. The cache is the
 * one state kept between runs: the child works on its copy and sends it
 * back; the loop takes it only from a whole result (a killed run leaves
 * the cache as it was, which is what an unreadable public does too), and
 * one too large to send is dropped (the next run reads every link). */

/* What one skills.sync or skills.list waits for. */
struct waiter {
    skills_reply reply;
    uint64_t tag;
};

/* WALK_LIST is 0 so that Q below starts with it as the last kind run (a
 * reconcile goes first when both wait at the start) with no initialiser:
 * an initialised Q would be stored whole, 3 KiB of zeros, in the binary. */
enum walk_kind { WALK_LIST, WALK_SYNC };

struct wire_result {
    int32_t rc;
    uint8_t cache; /* 0 not touched, 1 sent ('K'), 2 changed but too large: drop it,
                    * 3 only its run count moved (a no-op pass: nothing to send) */
    struct skills_counts c;
    int64_t us;
    uint64_t dev, ino; /* public, for the inotify watch */
};

static struct {
    struct childjob job;
    enum walk_kind kind, last_kind;
    int64_t t0;
    char trigger[16];
    struct waiter cur[SKILLS_MAX_WAITERS]; /* answered when the running walk ends */
    size_t ncur;
    bool sync_pending;
    char sync_trigger[16];
    struct waiter syncw[SKILLS_MAX_WAITERS], listw[SKILLS_MAX_WAITERS];
    size_t nsync, nlist;
    ev_timer kick;
    bool kick_init;
} Q;

static void put(int fd, char type, const void *p, size_t n)
{
    char hdr[5];
    uint32_t len = (uint32_t)n;
    const char *parts[2] = {hdr, p};
    size_t lens[2] = {5, n};

    hdr[0] = type;
    memcpy(hdr + 1, &len, 4);
    for (int i = 0; i < 2; i++)
        if (childjob_write(fd, parts[i], lens[i]) < 0)
            _exit(1); /* the loop went away: nobody to tell */
}

/* One run of the configured mode, in whatever process calls it. In
 * external_dirs mode the reconcile runs with every public name ignored,
 * which lays nothing and removes the links an earlier run laid (the
 * reconcile's own rule for a name that became ignored); then Hermes's
 * config.yaml gets its entry. A YAML hearth cannot edit is an entry
 * error: reported, and the phase is still reached, as the agent's own
 * file should not hold every service back. *ystate: the YAML's state
 * (SKILLSYAML_ERROR when not that mode). */
static int run_once(bool dry, struct skills_counts *c, struct skills_lists *l, struct err *err, int *ystate)
{
    static const char *const all[] = {"*", NULL};

    *ystate = SKILLSYAML_ERROR;
    if (!S.ext)
        return skills_reconcile(S.pub, S.priv, (const char *const *)S.ignore, dry, c, l,
                                S.cache, err);
    int rc = skills_reconcile(S.pub, S.priv, all, dry, c, l, S.cache, err);
    /* Every public entry counted as ignored is public here. */
    c->public_n = c->ignored;
    c->ignored = 0;
    struct err yerr;
    skills_owner_default();
    *ystate = skillsyaml_ensure(S.yaml, S.pub, skills_owner.uid, skills_owner.gid, dry, &yerr);
    if (*ystate == SKILLSYAML_ERROR) {
        size_t n = strlen(err->msg);
        snprintf(err->msg + n, sizeof(err->msg) - n, "%s%s", n ? "; " : "", yerr.msg);
        /* An entry error, unless the walk already failed whole (public
         * unreadable: that one keeps the phase unreached). */
        if (rc == 0 || c->errors)
            c->errors++;
        rc = -1;
    }
    return rc;
}

/* The child: one walk, its result down wfd. */
static void walk_child(int wfd, void *arg)
{
    bool dry = Q.kind == WALK_LIST;
    struct wire_result w;
    struct skills_lists l = {0};
    struct err err = {0};
    cJSON *o = NULL;
    struct stat st;

    memset(&w, 0, sizeof(w)); /* padding too: it goes down the pipe */
    if (dry && (o = cJSON_CreateObject())) {
        l.public_ = cJSON_AddArrayToObject(o, "public");
        l.private_ = cJSON_AddArrayToObject(o, "private");
        l.linked = cJSON_AddArrayToObject(o, "linked");
        l.shadowed = cJSON_AddArrayToObject(o, "shadowed");
        l.ignored = cJSON_AddArrayToObject(o, "ignored");
        l.categories = cJSON_AddArrayToObject(o, "categories");
        l.clashes = cJSON_AddArrayToObject(o, "clashes");
        l.other = cJSON_AddArrayToObject(o, "other");
    }
    unsigned runs0 = S.cache ? S.cache->runs : 0;
    int64_t t0 = mono_us();
    int32_t ystate;
    w.rc = run_once(dry, &w.c, dry ? &l : NULL, &err, &ystate);
    w.us = mono_us() - t0;
    if (stat(S.pub, &st) == 0) {
        w.dev = (uint64_t)st.st_dev;
        w.ino = (uint64_t)st.st_ino;
    }
    char *cbuf = NULL;
    size_t clen = 0;
    if (!dry && S.cache && S.cache->runs != runs0 && !S.cache->changed)
        w.cache = 3;
    else if (!dry && S.cache && S.cache->runs != runs0)
        w.cache = skills_cache_encode(S.cache, SKILLS_RESULT_MAX / 2, &cbuf, &clen) == 0 ? 1 : 2;
    put(wfd, 'R', &w, sizeof(w));
    if (err.msg[0])
        put(wfd, 'E', err.msg, strlen(err.msg));
    put(wfd, 'N', skills_last_report, strlen(skills_last_report));
    if (cbuf)
        put(wfd, 'K', cbuf, clen);
    if (S.ext)
        put(wfd, 'Y', &ystate, sizeof(ystate));
    if (dry) {
        char *text = NULL;
        if (o) {
            if (w.rc < 0 && w.c.errors == 0)
                cJSON_AddStringToObject(o, "error", err.msg);
            cJSON_AddNumberToObject(o, "pending", w.c.created + w.c.removed + w.c.cat_removed);
            if (S.ext) {
                /* Nothing is linked: what the reconcile called ignored
                 * is public, and Hermes reads it through the YAML. */
                cJSON_DeleteItemFromObjectCaseSensitive(o, "public");
                cJSON *pubs = cJSON_DetachItemFromObjectCaseSensitive(o, "ignored");
                if (pubs)
                    cJSON_AddItemToObject(o, "public", pubs);
                cJSON_AddArrayToObject(o, "ignored");
                cJSON *y = cJSON_AddObjectToObject(o, "external_dirs");
                if (y) {
                    cJSON_AddStringToObject(y, "file", S.yaml);
                    cJSON_AddStringToObject(y, "state", skillsyaml_state_name(ystate));
                    if (ystate == SKILLSYAML_ERROR && err.msg[0])
                        cJSON_AddStringToObject(y, "error", err.msg);
                }
            }
            text = jsonout_print(o);
        }
        if (text && strlen(text) < SKILLS_RESULT_MAX - 4096) {
            put(wfd, 'L', text, strlen(text));
        } else {
            char m[128];
            snprintf(m, sizeof(m), text ? "the lists take more than %d bytes" : "out of memory",
                     SKILLS_RESULT_MAX - 4096);
            put(wfd, 'X', m, strlen(m));
        }
        cJSON_free(text);
    }
    put(wfd, 'Z', "", 0);
    /* Freed, though the process ends now: a leak checker judges the
     * child too. */
    free(cbuf);
    cJSON_Delete(o);
}

/* A child's result, cut into its records (pointers into the buffer). */
struct walk_result {
    bool whole;
    struct wire_result w;
    const char *e, *k, *l, *x, *n;
    size_t elen, klen, llen, xlen, nlen;
    int32_t ystate;
    bool have_y;
};

static bool parse_result(const char *b, size_t len, struct walk_result *r)
{
    bool have_r = false;

    memset(r, 0, sizeof(*r));
    for (size_t off = 0; off < len;) {
        uint32_t n;
        if (len - off < 5)
            return false;
        char t = b[off];
        memcpy(&n, b + off + 1, 4);
        off += 5;
        if (n > len - off)
            return false;
        const char *p = b + off;
        off += n;
        switch (t) {
        case 'R':
            if (n != sizeof(r->w))
                return false;
            memcpy(&r->w, p, n);
            have_r = true;
            break;
        case 'E': r->e = p, r->elen = n; break;
        case 'K': r->k = p, r->klen = n; break;
        case 'L': r->l = p, r->llen = n; break;
        case 'X': r->x = p, r->xlen = n; break;
        case 'N': r->n = p, r->nlen = n; break;
        case 'Y':
            if (n != sizeof(r->ystate))
                return false;
            memcpy(&r->ystate, p, n);
            r->have_y = true;
            break;
        case 'Z': r->whole = have_r && off == len; return r->whole;
        default: return false;
        }
    }
    return false;
}

static void answer(struct waiter *v, size_t n, int rc, const char *msg, cJSON *result)
{
    for (size_t i = 0; i < n; i++) {
        cJSON *r = result ? (i + 1 == n ? result : cJSON_Duplicate(result, 1)) : NULL;
        v[i].reply(v[i].tag, rc, msg, r);
    }
    if (!n)
        cJSON_Delete(result);
}

static void answer_sync(struct waiter *v, size_t n, int rc, const char *msg)
{
    for (size_t i = 0; i < n; i++)
        v[i].reply(v[i].tag, rc, msg, skills_last_json());
}

/* A reconcile ended (fail: why it has no result) */
static void sync_finish(const char *fail, const struct walk_result *r)
{
    char err[512];

    S.ystate = SKILLSYAML_ERROR;
    if (fail) {
        struct skills_counts none = {0};
        record_run(Q.trigger, -1, fail, &none, mono_us() - Q.t0, 0, 0, NULL);
        answer_sync(Q.cur, Q.ncur, -1, fail);
        return;
    }
    snprintf(err, sizeof(err), "%.*s", (int)(r->elen < sizeof(err) ? r->elen : sizeof(err) - 1),
             r->e ? r->e : "");
    if (r->w.cache == 1 && skills_cache_load(S.cache, r->k, r->klen) < 0)
        skills_cache_reset(S.cache);
    else if (r->w.cache == 2)
        skills_cache_reset(S.cache);
    else if (r->w.cache == 3)
        S.cache->runs++; /* as the child's copy did; nothing else changed */
    char report[sizeof(skills_last_report)];
    snprintf(report, sizeof(report), "%.*s",
             (int)(r->nlen < sizeof(report) ? r->nlen : sizeof(report) - 1), r->n ? r->n : "");
    if (r->have_y)
        S.ystate = r->ystate;
    record_run(Q.trigger, r->w.rc, err, &r->w.c, r->w.us, (dev_t)r->w.dev, (ino_t)r->w.ino,
               report);
    answer_sync(Q.cur, Q.ncur, r->w.rc, err);
}

/* A dry run ended: the lists, with what only the loop knows around them. */
static void list_finish(const char *fail, const struct walk_result *r)
{
    char msg[512];
    cJSON *lists = NULL, *o = NULL;

    if (!fail && r->x) {
        snprintf(msg, sizeof(msg), "%.*s", (int)(r->xlen < 256 ? r->xlen : 256), r->x);
        fail = msg;
    }
    if (!fail && !(lists = cJSON_ParseWithLength(r->l, r->llen)))
        fail = "the listing process sent lists that do not parse";
    if (!fail && !(o = cJSON_CreateObject()))
        fail = "out of memory";
    if (fail) {
        cJSON_Delete(lists);
        answer(Q.cur, Q.ncur, -1, fail, NULL);
        return;
    }
    cJSON_AddStringToObject(o, "mode", S.ext ? "external_dirs" : "links");
    cJSON_AddStringToObject(o, "public_dir", S.pub);
    cJSON_AddStringToObject(o, "private_dir", S.priv);
    static const char *const order[] = {"public", "private", "linked", "shadowed", "clashes",
                                        "other", "ignored", "categories", "error", "pending",
                                        "external_dirs", NULL};
    for (const char *const *k = order; *k; k++) {
        cJSON *it = cJSON_DetachItemFromObjectCaseSensitive(lists, *k);
        if (it)
            cJSON_AddItemToObject(o, *k, it);
    }
    cJSON_Delete(lists);
    cJSON_AddStringToObject(o, "marker", skills_layout_marker);
    cJSON_AddNumberToObject(o, "depth", skills_layout_depth);
    cJSON_AddNumberToObject(o, "poll_ms", (double)S.poll_ms);
    cJSON_AddBoolToObject(o, "inotify", ino_wd >= 0);
    cJSON_AddItemToObject(o, "last", skills_last_json());
    answer(Q.cur, Q.ncur, 0, "", o);
}

static void schedule(void);

static void walk_done(struct childjob *j, enum childjob_end end, int status, const char *data,
                      size_t len)
{
    struct walk_result r;
    char why[256];
    const char *fail = NULL;

    if (end == CHILDJOB_CANCELLED) {
        snprintf(why, sizeof(why), "the walk was stopped: %s", S.stopped);
        fail = why;
    } else if (end == CHILDJOB_TIMEOUT) {
        snprintf(why, sizeof(why), "the walk took longer than %lld ms (skills.timeout_ms); stopped",
                 (long long)S.timeout_ms);
        fail = why;
    } else if (end == CHILDJOB_TOO_BIG) {
        snprintf(why, sizeof(why), "the walk's result took more than %d bytes; stopped",
                 SKILLS_RESULT_MAX);
        fail = why;
    } else if (WIFSIGNALED(status)) {
        snprintf(why, sizeof(why), "the walk process was killed by signal %d", WTERMSIG(status));
        fail = why;
    } else if (!parse_result(data, len, &r)) {
        snprintf(why, sizeof(why), "the walk process ended without a whole result (status %d)",
                 WIFEXITED(status) ? WEXITSTATUS(status) : status);
        fail = why;
    }
    if (Q.kind == WALK_SYNC)
        sync_finish(fail, &r);
    else
        list_finish(fail, &r);
    Q.ncur = 0;
    schedule();
}

/* Starts the next walk when none runs: a reconcile or a dry run, taking
 * turns when both wait, so a stream of triggers cannot starve a
 * skills.list. */
static void schedule(void)
{
    char why[320];
    struct err err;

    while (!childjob_running(&Q.job) && (Q.sync_pending || Q.nlist)) {
        enum walk_kind k = Q.sync_pending && Q.nlist
                               ? (Q.last_kind == WALK_SYNC ? WALK_LIST : WALK_SYNC)
                           : Q.sync_pending ? WALK_SYNC
                                            : WALK_LIST;
        if (k == WALK_SYNC) {
            memcpy(Q.cur, Q.syncw, Q.nsync * sizeof(Q.cur[0]));
            Q.ncur = Q.nsync;
            Q.nsync = 0;
            Q.sync_pending = false;
            snprintf(Q.trigger, sizeof(Q.trigger), "%s", Q.sync_trigger);
            if (sync_allowed(&err) < 0) {
                log_warn("skills (%s): %s", Q.trigger, err.msg);
                answer_sync(Q.cur, Q.ncur, -1, err.msg);
                Q.ncur = 0;
                continue;
            }
        } else {
            memcpy(Q.cur, Q.listw, Q.nlist * sizeof(Q.cur[0]));
            Q.ncur = Q.nlist;
            Q.nlist = 0;
        }
        if (!S.cache)
            S.cache = skills_cache_new();
        Q.kind = Q.last_kind = k;
        Q.t0 = mono_us();
        if (childjob_start(&Q.job, S.timeout_ms, SKILLS_RESULT_MAX, walk_child, NULL, walk_done,
                           &err) == 0)
            return;
        /* Not started: an error like any failed run; the next trigger
         * tries again. */
        snprintf(why, sizeof(why), "unable to start the walk: %s", err.msg);
        if (k == WALK_SYNC)
            sync_finish(why, NULL);
        else
            answer(Q.cur, Q.ncur, -1, why, NULL);
        Q.ncur = 0;
    }
}

static void on_kick(struct ev_loop *loop, ev_timer *w, int revents)
{
    schedule();
}

/* Walks start from the loop, never inside the caller: a skills.sync
 * handler must have deferred its reply before any answer can come. */
static void kick(void)
{
    if (!Q.kick_init) {
        ev_timer_init(&Q.kick, on_kick, 0., 0.);
        Q.kick_init = true;
    }
    if (!ev_is_active(&Q.kick)) {
        ev_timer_set(&Q.kick, 0., 0.);
        ev_timer_start(H.loop, &Q.kick);
    }
}

int skills_sync(const char *trigger, struct err *err)
{
    if (sync_allowed(err) < 0)
        return -1;
    if (!H.loop) {
        /* No loop (unit tests): here and now. */
        struct skills_counts c;
        struct stat st;
        if (!S.cache)
            S.cache = skills_cache_new();
        int64_t t0 = mono_us();
        int ys;
        int rc = run_once(false, &c, NULL, err, &ys);
        S.ystate = ys;
        bool ok = stat(S.pub, &st) == 0;
        record_run(trigger, rc, err_msg(err), &c, mono_us() - t0, ok ? st.st_dev : 0, ok ? st.st_ino : 0,
                   skills_last_report);
        return rc;
    }
    Q.sync_pending = true;
    /* A coalesced run is named after the last trigger, or "sync" when a
     * skills.sync waits for it. */
    if (!Q.nsync)
        snprintf(Q.sync_trigger, sizeof(Q.sync_trigger), "%s", trigger);
    if (err)
        err->msg[0] = '\0';
    kick();
    return 0;
}

int skills_sync_request(skills_defer defer, void *dctx, skills_reply reply, struct err *err)
{
    if (sync_allowed(err) < 0)
        return -1;
    if (!H.loop)
        return err_set(err, "no event loop");
    if (Q.nsync >= SKILLS_MAX_WAITERS)
        return err_set(err, "%d skills.sync requests are already waiting", SKILLS_MAX_WAITERS);
    Q.syncw[Q.nsync++] = (struct waiter){reply, defer(dctx)};
    Q.sync_pending = true;
    snprintf(Q.sync_trigger, sizeof(Q.sync_trigger), "sync");
    kick();
    return 0;
}

int skills_list_request(skills_defer defer, void *dctx, skills_reply reply, struct err *err)
{
    if (!S.enabled)
        return err_set(err, "the skills overlay is not configured (skills.public, skills.private)");
    if (!H.loop)
        return err_set(err, "no event loop");
    if (Q.nlist >= SKILLS_MAX_WAITERS)
        return err_set(err, "%d skills.list requests are already waiting", SKILLS_MAX_WAITERS);
    Q.listw[Q.nlist++] = (struct waiter){reply, defer(dctx)};
    kick();
    return 0;
}

/* The poll is re-armed on the shared grid at every firing, never left to
 * repeat on its own: a repeating timer keeps the phase of its first
 * arming on the monotonic clock, and the grid is on the wall clock, so a
 * wall-clock step (a resume), NTP's slew, or one firing late by a period
 * (libev then restarts the repeat from the late moment) moved the poll
 * off the grid for good, and the health checks it shared a wake-up with
 * cost one of their own from then on (make soak found it). */
static void arm_poll(void)
{
    ev_timer_set(&S.poll, hearth_grid_delay(S.poll_ms), 0.);
    ev_timer_start(H.loop, &S.poll);
}

static void on_poll(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct err err;
    arm_poll();
    skills_sync("poll", &err);
}

static void on_debounce(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct err err;
    skills_sync("inotify", &err);
}

static void on_inotify(struct ev_loop *loop, ev_io *w, int revents)
{
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    bool any = false;

    for (;;) {
        ssize_t n = read(ino_fd, buf, sizeof(buf));
        if (n <= 0)
            break;
        any = true;
    }
    /* A burst of changes (a whole skill being copied in) becomes one
     * reconcile a little later. */
    if (any && !ev_is_active(&S.debounce)) {
        ev_timer_set(&S.debounce, 0.2, 0.);
        ev_timer_start(H.loop, &S.debounce);
    }
}

/* (Re)arms the inotify watch on public: after a remount the directory is
 * a different inode and the old watch sees nothing. dev and ino are
 * public's as the walk saw it (0: not seen); the loop itself never
 * stats public, which may be a share that hangs. */
static void watch_public(dev_t dev, ino_t ino)
{
    if (ino_fd < 0 || ino == 0)
        return;
    if (ino_wd >= 0 && dev == S.wdev && ino == S.wino)
        return;
    if (ino_wd >= 0)
        inotify_rm_watch(ino_fd, ino_wd);
    ino_wd = inotify_add_watch(ino_fd, S.pub,
                                 IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO |
                                     IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR);
    if (ino_wd < 0) {
        log_debug("skills: no inotify on %s: %s (polling only)", S.pub, strerror(errno));
        return;
    }
    S.wdev = dev;
    S.wino = ino;
}

static void free_config(void)
{
    free(S.pub);
    free(S.priv);
    free(S.yaml);
    for (char **p = S.ignore; p && *p; p++)
        free(*p);
    free(S.ignore);
    S.pub = S.priv = S.yaml = NULL;
    S.ignore = NULL;
}

void skills_init(const struct config *cfg)
{
    const struct skills_cfg *sk = &cfg->skills;
    size_t n = 0;

    free_config();
    S.enabled = sk->pub && sk->priv;
    if (!S.enabled) {
        /* Nothing to lay: services after "skills" need not wait. */
        gate_set("skills", true);
        return;
    }
    S.pub = strdup(sk->pub);
    S.priv = strdup(sk->priv);
    S.ext = sk->external_dirs && sk->config_yaml;
    S.yaml = S.ext ? strdup(sk->config_yaml) : NULL;
    S.ystate = SKILLSYAML_ERROR;
    for (char **p = sk->ignore; p && *p; p++)
        n++;
    S.ignore = calloc(n + 1, sizeof(char *));
    if (!S.pub || !S.priv || !S.ignore || (S.ext && !S.yaml)) {
        log_error("skills: unable to set up the overlay: out of memory; overlay off");
        free_config();
        S.enabled = false;
        return;
    }
    n = 0;
    for (char **p = sk->ignore; p && *p; p++)
        if ((S.ignore[n] = strdup(*p)))
            n++;
    S.poll_ms = sk->poll_ms;
    S.timeout_ms = sk->timeout_ms;
    skills_layout(sk->marker ? sk->marker : CONFIG_SKILLS_MARKER, sk->depth);
    /* What hearth makes in private belongs to the agent: the first
     * service that waits for the skills phase, so a non-root agent can
     * write its own skills. */
    skills_owner_set = false;
    skills_owner_default();
    for (size_t i = 0; i < cfg->n_services; i++) {
        const struct service_config *sc = &cfg->services[i];
        bool waits = false;
        for (size_t k = 0; k < sc->n_after; k++)
            waits |= strcmp(sc->after[k], "skills") == 0;
        if (waits) {
            launch_owner(sc, &skills_owner.uid, &skills_owner.gid);
            skills_owner_set = true;
            break;
        }
    }
    ev_timer_init(&S.poll, on_poll, 0., 0.);
    ev_timer_init(&S.debounce, on_debounce, 0., 0.);
}

void skills_start(const char *(*failed_mount)(const char *path))
{
    struct err err;

    if (!S.enabled)
        return;
    S.failed_mount = failed_mount;
    if (S.started) {
        skills_sync("mounts", &err); /* a later pass over the mounts */
        return;
    }
    S.started = true;
    ino_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (ino_fd >= 0) {
        ev_io_init(&S.ino, on_inotify, ino_fd, EV_READ);
        ev_io_start(H.loop, &S.ino);
    } else {
        log_debug("skills: no inotify: %s", strerror(errno));
    }
    if (S.poll_ms > 0)
        arm_poll();
    skills_sync("boot", &err);
}

/* skills.fork copies a whole skill: in a child process (init/proc/childjob.c),
 * so a skill of 30,000 files never stalls the loop, bounded by a deadline
 * after which the child is killed (its temporary copy is removed by the
 * next fork). The child reports through the job's pipe: one byte (0 ok,
 * 1 failed), then the message. One fork at a time. */
#define FORK_RESULT_MAX 2048
static struct {
    struct childjob job;
    skills_fork_done done;
    void *ctx;
} F;

static void fork_finish(int rc, const char *msg)
{
    skills_fork_done done = F.done;
    void *ctx = F.ctx;

    F.done = NULL;
    F.ctx = NULL;
    if (rc == 0) {
        struct err err;
        skills_sync("fork", &err);
    }
    if (done)
        done(ctx, rc, msg);
}

static void fork_done(struct childjob *j, enum childjob_end end, int status, const char *data,
                      size_t len)
{
    char msg[1024];
    int rc = -1;

    if (end == CHILDJOB_CANCELLED) {
        snprintf(msg, sizeof(msg), "unable to fork: the copy was stopped: %s", S.stopped);
    } else if (end == CHILDJOB_TIMEOUT) {
        snprintf(msg, sizeof(msg), "unable to fork: the copy took longer than %d ms; stopped",
                 SKILLS_FORK_TIMEOUT_MS);
    } else if (end == CHILDJOB_EXITED && len >= 1 && WIFEXITED(status)) {
        rc = data[0] == 0 ? 0 : -1;
        snprintf(msg, sizeof(msg), "%.*s", (int)(len - 1), data + 1);
    } else if (end == CHILDJOB_EXITED && WIFSIGNALED(status)) {
        snprintf(msg, sizeof(msg), "unable to fork: copy process killed by signal %d",
                 WTERMSIG(status));
    } else {
        snprintf(msg, sizeof(msg), "unable to fork: copy process ended without a result");
    }
    fork_finish(rc, msg);
}

/* In the child: the copy, then its result down the job's pipe. */
static void fork_child(int wfd, void *arg)
{
    const char *name = arg;
    char msg[1024];
    struct err why = {0};

    msg[0] = (char)(skills_fork_at(S.pub, S.priv, name, &why) < 0);
    snprintf(msg + 1, sizeof(msg) - 1, "%s", why.msg);
    _exit(childjob_write(wfd, msg, 1 + strlen(msg + 1)) == 0 ? 0 : 1);
}

int skills_fork(const char *name, skills_fork_done done, void *ctx, struct err *err)
{
    struct err why;

    if (!S.enabled)
        return err_set(err, "the skills overlay is not configured (skills.public, skills.private)");
    if (S.ext)
        return err_set(err, "skills.fork copies a linked skill: skills.mode is \"external_dirs\", "
                              "which lays no links (the agent copies a public skill itself)");
    if (!skills_valid_name(name))
        return err_set(err, "name: expected a skill name or category/skill");
    if (childjob_running(&F.job))
        return err_set(err, "a skills.fork is already in progress");
    /* Not into the image's directory a platform mount hides (or will). */
    const char *fm;
    if (S.failed_mount && ((fm = S.failed_mount(S.pub)) || (fm = S.failed_mount(S.priv))))
        return err_set(err, "unable to fork %s: %s", name, fm);
    if (!H.loop) {
        /* No loop to wait on (unit tests): here and now. */
        if (skills_fork_at(S.pub, S.priv, name, err) < 0)
            return -1;
        if (done)
            done(ctx, 0, "");
        return 0;
    }
    if (childjob_start(&F.job, SKILLS_FORK_TIMEOUT_MS, FORK_RESULT_MAX, fork_child, (void *)name,
                       fork_done, &why) < 0) {
        return err_set(err, "unable to fork %s: %s", name, why.msg);
    }
    F.done = done;
    F.ctx = ctx;
    return 0;
}

void skills_mount_left(const char *target, const char *why)
{
    if (!S.enabled || !(pathname_at_or_under(S.pub, target) || pathname_at_or_under(S.priv, target)))
        return;
    snprintf(S.stopped, sizeof(S.stopped), "%s", why);
    /* What runs now works on the directories as they were: stopped, its
     * answer the error above. The triggers that come meanwhile are
     * refused (failed_mount) until the mount is back and seeded, when
     * skills_start runs the overlay again and marks the phase. */
    if (H.loop) {
        childjob_cancel(&Q.job);
        childjob_cancel(&F.job);
    }
    if (S.reached || gate_reached("skills")) {
        S.reached = false;
        gate_revoke("skills", why);
    }
}

static void add_counts(cJSON *o, const struct skills_counts *c)
{
    cJSON_AddNumberToObject(o, "public", c->public_n);
    cJSON_AddNumberToObject(o, "linked", c->linked + c->created);
    cJSON_AddNumberToObject(o, "created", c->created);
    cJSON_AddNumberToObject(o, "removed", c->removed);
    cJSON_AddNumberToObject(o, "shadowed", c->shadowed);
    cJSON_AddNumberToObject(o, "clashes", c->clashes);
    cJSON_AddNumberToObject(o, "ignored", c->ignored);
    cJSON_AddNumberToObject(o, "errors", c->errors);
    cJSON_AddNumberToObject(o, "categories", c->categories);
    cJSON_AddNumberToObject(o, "categories_created", c->cat_created);
    cJSON_AddNumberToObject(o, "categories_converted", c->cat_converted);
    cJSON_AddNumberToObject(o, "categories_removed", c->cat_removed);
    cJSON_AddBoolToObject(o, "read_dirs", !c->checked);
}

cJSON *skills_last_json(void)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddNumberToObject(o, "runs", (double)S.runs);
    if (S.ext) {
        cJSON_AddStringToObject(o, "mode", "external_dirs");
        cJSON_AddStringToObject(o, "config_yaml", S.yaml);
        if (S.runs)
            cJSON_AddStringToObject(o, "external_dirs", skillsyaml_state_name(S.ystate));
    }
    if (S.runs) {
        cJSON_AddStringToObject(o, "trigger", S.trigger);
        add_counts(o, &S.last);
        cJSON_AddNumberToObject(o, "duration_us", (double)S.last_us);
        cJSON_AddNumberToObject(o, "time_ms", (double)S.last_wall_ms);
    }
    if (S.error[0])
        cJSON_AddStringToObject(o, "error", S.error);
    return o;
}
