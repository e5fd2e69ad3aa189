#include "diskuse.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <cJSON.h>
#include <ev.h>

#include "config.h"
#include "events.h"
#include "hearth.h"
#include "inherit.h"
#include "lifeline.h"
#include "log.h"
#include "mounts.h"
#include "reaper.h"

struct row {
    char target[512];
    char type[32];
    bool ro, mounted;
    bool have;            /* the figures below are from the last probe */
    char error[160];
    uint64_t frsize, blocks, bfree, bavail, files, ffree;
    bool low;             /* disk.low sent, disk.ok not yet */
    pid_t hung_pid;       /* a killed probe child still stuck on this target */
    bool slow;            /* the last probe timed out on it: probed last */
    bool sick;            /* its own probe failed (an error, or no answer) */
    bool sick_told;       /* disk.error sent, disk.recovered not yet */
};

/* What the child writes per target: fixed size, so a partial read at the
 * deadline still yields whole records. */
struct rec {
    uint32_t slot;
    int32_t err;
    uint64_t frsize, blocks, bfree, bavail, files, ffree;
};

static struct {
    struct row rows[MOUNTS_MAX];
    size_t n;
    int low_pct, ok_pct;
    int64_t check_ms;
    pid_t pid;             /* the probe under way, or <= 0 */
    int rfd;
    size_t slots[MOUNTS_MAX]; /* rows probed by it, in order */
    bool got[MOUNTS_MAX];
    size_t nslots;
    ev_timer deadline, tick;
    bool setup;
    struct {
        diskuse_done_fn fn;
        void *ctx;
    } waiters[DISKUSE_WAITERS_MAX];
    size_t nwait;
} D; /* zero-initialised, so it costs no space in the binary (bss) */

static struct row scratch[MOUNTS_MAX];

double diskuse_percent(uint64_t blocks, uint64_t bfree, uint64_t bavail, uint64_t files,
                       uint64_t ffree)
{
    double pct = 0;
    uint64_t used = blocks >= bfree ? blocks - bfree : 0;
    if (used + bavail > 0)
        pct = (double)used * 100.0 / (double)(used + bavail);
    /* A filesystem without an inode limit (files 0) cannot run out. */
    if (files > 0 && files >= ffree) {
        double ip = (double)(files - ffree) * 100.0 / (double)files;
        if (ip > pct)
            pct = ip;
    }
    return pct;
}

/* Rebuilds the rows from the mount list, keeping each target's state. */
static void sync_rows(void)
{
    struct mounts_entry e;
    size_t n = 0;

    for (size_t i = 0; n < MOUNTS_MAX && mounts_entry(i, &e) == 0; i++) {
        struct row *r = &scratch[n++];
        const struct row *old = NULL;
        for (size_t j = 0; j < D.n && !old; j++)
            if (strcmp(D.rows[j].target, e.target) == 0)
                old = &D.rows[j];
        if (old)
            *r = *old;
        else
            memset(r, 0, sizeof(*r));
        snprintf(r->target, sizeof(r->target), "%s", e.target);
        snprintf(r->type, sizeof(r->type), "%s", e.type);
        r->ro = e.read_only;
        r->mounted = e.mounted;
    }
    memcpy(D.rows, scratch, n * sizeof(scratch[0]));
    D.n = n;
}

static bool check_enabled(void) { return D.low_pct > 0; }

static cJSON *event_params(const struct row *r, double pct)
{
    cJSON *p = cJSON_CreateObject();
    if (!p)
        return NULL;
    cJSON_AddStringToObject(p, "target", r->target);
    /* "type" is the event's own member. */
    cJSON_AddStringToObject(p, "fstype", r->type);
    cJSON_AddNumberToObject(p, "used_percent", (double)(int64_t)(pct * 10) / 10);
    cJSON_AddNumberToObject(p, "bytes_avail", (double)(r->bavail * r->frsize));
    cJSON_AddNumberToObject(p, "inodes_free", (double)r->ffree);
    cJSON_AddNumberToObject(p, "low_percent", D.low_pct);
    cJSON_AddNumberToObject(p, "ok_percent", D.ok_pct);
    return p;
}

/* disk.error when a mount's own probe starts failing (statvfs says an
 * error, or does not return: a share whose server fails or hangs), once;
 * disk.recovered when it answers again. A mount left out because another
 * hung is neither. */
static void tell_sick(void)
{
    for (size_t i = 0; i < D.n; i++) {
        struct row *r = &D.rows[i];
        if (r->sick && !r->sick_told) {
            r->sick_told = true;
            log_warn("mount %s: %s", r->target, r->error);
            cJSON *p = cJSON_CreateObject();
            if (p) {
                cJSON_AddStringToObject(p, "target", r->target);
                cJSON_AddStringToObject(p, "fstype", r->type);
                cJSON_AddStringToObject(p, "error", r->error);
            }
            events_emit("disk.error", p);
        } else if (!r->sick && r->sick_told && r->have) {
            r->sick_told = false;
            log_info("mount %s answers again", r->target);
            events_emit("disk.recovered",
                        event_params(r, diskuse_percent(r->blocks, r->bfree, r->bavail, r->files,
                                                        r->ffree)));
        }
    }
}

/* disk.low when a writable mount reaches low_pct, disk.ok once it is
 * below ok_pct again: the gap keeps a mount hovering at the threshold
 * from sending an event per check. */
static void evaluate(void)
{
    tell_sick();
    for (size_t i = 0; check_enabled() && i < D.n; i++) {
        struct row *r = &D.rows[i];
        if (!r->have || r->ro)
            continue;
        double pct = diskuse_percent(r->blocks, r->bfree, r->bavail, r->files, r->ffree);
        if (!r->low && pct >= D.low_pct) {
            r->low = true;
            log_warn("mount %s is %.1f%% full (disk.low at %d%%)", r->target, pct, D.low_pct);
            events_emit("disk.low", event_params(r, pct));
        } else if (r->low && pct < D.ok_pct) {
            r->low = false;
            log_info("mount %s is %.1f%% full again (disk.ok below %d%%)", r->target, pct,
                     D.ok_pct);
            events_emit("disk.ok", event_params(r, pct));
        }
    }
}

static void on_tick(struct ev_loop *loop, ev_timer *w, int revents);

void diskuse_rearm(void)
{
    struct mounts_entry e;
    bool want = false;

    if (!D.setup)
        return;
    for (size_t i = 0; !want && mounts_entry(i, &e) == 0; i++)
        want = e.mounted && !e.read_only;
    want = want && check_enabled() && D.check_ms > 0;
    if (!want) {
        ev_timer_stop(H.loop, &D.tick);
        return;
    }
    if (ev_is_active(&D.tick) || D.pid > 0)
        return; /* the probe's end re-arms it */
    ev_timer_set(&D.tick, hearth_grid_delay(D.check_ms), 0.);
    ev_timer_start(H.loop, &D.tick);
}

static void finish(void)
{
    size_t n = D.nwait;
    struct {
        diskuse_done_fn fn;
        void *ctx;
    } w[DISKUSE_WAITERS_MAX];

    ev_timer_stop(H.loop, &D.deadline);
    evaluate();
    memcpy(w, D.waiters, n * sizeof(w[0]));
    D.nwait = 0;
    diskuse_rearm();
    for (size_t i = 0; i < n; i++)
        w[i].fn(w[i].ctx);
}

/* Reads the records that have arrived (the pipe holds all of them: at
 * most MOUNTS_MAX * 56 bytes, well below its capacity). */
static void collect(void)
{
    static struct rec recs[MOUNTS_MAX];
    size_t have = 0;

    for (;;) {
        ssize_t k = read(D.rfd, (char *)recs + have, sizeof(recs) - have);
        if (k > 0) {
            have += (size_t)k;
            if (have == sizeof(recs))
                break;
            continue;
        }
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && errno != EAGAIN)
            log_warn("diskuse: unable to read the probe's pipe: %s", strerror(errno));
        break;
    }
    close(D.rfd);
    D.rfd = -1;
    for (size_t i = 0; i < have / sizeof(struct rec); i++) {
        const struct rec *c = &recs[i];
        if (c->slot >= D.nslots || D.slots[c->slot] >= D.n)
            continue;
        struct row *r = &D.rows[D.slots[c->slot]];
        D.got[c->slot] = true;
        if (c->err) {
            r->have = false;
            r->sick = true;
            snprintf(r->error, sizeof(r->error), "unable to statvfs: %s", strerror(c->err));
            continue;
        }
        r->have = true;
        r->sick = false;
        r->slow = false;
        r->error[0] = 0;
        r->frsize = c->frsize;
        r->blocks = c->blocks;
        r->bfree = c->bfree;
        r->bavail = c->bavail;
        r->files = c->files;
        r->ffree = c->ffree;
    }
}

static void child_reaped(void *ctx, pid_t pid, int wstatus)
{
    if (pid == D.pid) {
        D.pid = -1;
        collect();
        for (size_t i = 0; i < D.nslots; i++) {
            if (!D.got[i] && D.slots[i] < D.n) {
                struct row *r = &D.rows[D.slots[i]];
                r->have = false;
                snprintf(r->error, sizeof(r->error), "probe ended (status 0x%x) before it", wstatus);
            }
        }
        finish();
        return;
    }
    /* A child killed at its deadline has finally left the kernel: its
     * mount is probed again from now on. */
    for (size_t i = 0; i < D.n; i++) {
        if (D.rows[i].hung_pid == pid) {
            D.rows[i].hung_pid = 0;
            log_info("statvfs of %s returned at last", D.rows[i].target);
        }
    }
}

static void on_deadline(struct ev_loop *loop, ev_timer *w, int revents)
{
    if (D.pid <= 0) { /* fork failed: the rows say why */
        finish();
        return;
    }
    pid_t pid = D.pid;
    kill(pid, SIGKILL);
    D.pid = -1;
    collect();
    const char *stuck = NULL;
    for (size_t i = 0; i < D.nslots; i++) {
        if (D.got[i] || D.slots[i] >= D.n)
            continue;
        struct row *r = &D.rows[D.slots[i]];
        r->have = false;
        if (!stuck) {
            /* The child goes through the targets in order: the first
             * without an answer is the one it is stuck on. */
            stuck = r->target;
            r->hung_pid = pid;
            r->slow = true;
            r->sick = true;
            snprintf(r->error, sizeof(r->error), "statvfs did not return within %d ms",
                     DISKUSE_DEADLINE_MS);
            log_warn("statvfs of %s did not return within %d ms; left out until it does",
                     r->target, DISKUSE_DEADLINE_MS);
        } else {
            snprintf(r->error, sizeof(r->error), "not probed: statvfs of %.100s hung", stuck);
        }
    }
    finish();
}

static void on_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
    if (diskuse_probe(NULL, NULL) == 1)
        diskuse_rearm();
}

static _Noreturn void child_run(int wfd)
{
    inherit_close_all_but(wfd);
    for (size_t i = 0; i < D.nslots; i++) {
        const struct row *r = &D.rows[D.slots[i]];
        struct rec c = {.slot = (uint32_t)i};
        struct statvfs v;
        /* O_PATH without following a link: a link the agent left in place
         * of a target is reported on, never followed elsewhere. */
        int fd = open(r->target, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0 || fstatvfs(fd, &v) < 0) {
            c.err = errno ? errno : EIO;
        } else {
            c.frsize = v.f_frsize ? v.f_frsize : v.f_bsize;
            c.blocks = v.f_blocks;
            c.bfree = v.f_bfree;
            c.bavail = v.f_bavail;
            c.files = v.f_files;
            c.ffree = v.f_ffree;
        }
        if (fd >= 0)
            close(fd);
        if (write(wfd, &c, sizeof(c)) != (ssize_t)sizeof(c))
            _exit(1);
    }
    _exit(0);
}

bool diskuse_can_wait(void) { return D.setup && D.nwait < DISKUSE_WAITERS_MAX; }

int diskuse_probe(diskuse_done_fn fn, void *ctx)
{
    if (!D.setup)
        return -1;
    if (fn && D.nwait >= DISKUSE_WAITERS_MAX)
        return -1;
    if (D.pid > 0 || ev_is_active(&D.deadline)) {
        if (fn) {
            D.waiters[D.nwait].fn = fn;
            D.waiters[D.nwait++].ctx = ctx;
        }
        return fn ? 0 : 1;
    }
    sync_rows();
    D.nslots = 0;
    /* Targets that timed out before go last: if one hangs again, the
     * others have answered by then. */
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < D.n; i++) {
            struct row *r = &D.rows[i];
            if (pass == 0 && !r->mounted) {
                r->have = false;
                snprintf(r->error, sizeof(r->error), "not mounted");
            } else if (r->mounted && r->hung_pid <= 0 && r->slow == (pass == 1)) {
                D.got[D.nslots] = false;
                D.slots[D.nslots++] = i;
            }
        }
    }
    if (D.nslots == 0 && !fn) {
        evaluate();
        return 1;
    }
    if (fn) {
        D.waiters[D.nwait].fn = fn;
        D.waiters[D.nwait++].ctx = ctx;
    }
    if (D.nslots == 0) {
        /* Nothing to statvfs: answered from the loop all the same. */
        ev_timer_set(&D.deadline, 0., 0.);
        ev_timer_start(H.loop, &D.deadline);
        return 0;
    }
    /* Not a childjob: at the deadline this probe keeps the records that
     * did arrive and answers at once, and a child stuck on a hung target
     * must not keep the next probe of the other targets from starting
     * (that target is left out until its child exits). */
    int p[2];
    pid_t pid = -1;
    const char *what = "create the probe's pipe";
    if (pipe2(p, O_CLOEXEC | O_NONBLOCK) == 0) {
        what = "fork the probe";
        pid = fork();
        if (pid == 0) {
            lifeline_hold();
            close(p[0]);
            child_run(p[1]);
        }
        close(p[1]);
        if (pid < 0)
            close(p[0]);
        else
            D.rfd = p[0];
    }
    if (pid < 0) {
        int e = errno;
        log_warn("diskuse: unable to %s: %s", what, strerror(e));
        for (size_t i = 0; i < D.nslots; i++) {
            D.rows[D.slots[i]].have = false;
            snprintf(D.rows[D.slots[i]].error, sizeof(D.rows[0].error), "unable to %s: %s", what,
                     strerror(e));
        }
        /* Answered from the loop, never from inside this call. */
        ev_timer_set(&D.deadline, 0., 0.);
        ev_timer_start(H.loop, &D.deadline);
        return 0;
    }
    D.pid = pid;
    if (reaper_watch(pid, child_reaped, NULL) < 0)
        log_warn("diskuse: unable to watch probe child %d; the deadline ends it", (int)pid);
    ev_timer_stop(H.loop, &D.tick);
    ev_timer_set(&D.deadline, DISKUSE_DEADLINE_MS / 1000.0, 0.);
    ev_timer_start(H.loop, &D.deadline);
    return 0;
}

void diskuse_setup(const struct config *cfg)
{
    struct metrics_cfg m;

    if (cfg)
        m = cfg->metrics;
    else
        sections_metrics_extract(NULL, &m);
    D.low_pct = m.disk_low_percent;
    D.ok_pct = m.disk_ok_percent;
    D.check_ms = m.disk_check_ms;
    D.pid = -1;
    D.rfd = -1;
    ev_timer_init(&D.deadline, on_deadline, 0., 0.);
    ev_timer_init(&D.tick, on_tick, 0., 0.);
    D.setup = true;
    diskuse_rearm();
}

cJSON *diskuse_json(void)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < D.n; i++) {
        const struct row *r = &D.rows[i];
        cJSON *o = cJSON_CreateObject();
        if (!o)
            break;
        cJSON_AddItemToArray(a, o);
        cJSON_AddStringToObject(o, "target", r->target);
        cJSON_AddStringToObject(o, "type", r->type);
        cJSON_AddBoolToObject(o, "read_only", r->ro);
        cJSON_AddBoolToObject(o, "mounted", r->mounted);
        if (!r->have) {
            cJSON_AddStringToObject(o, "error", r->error[0] ? r->error : "not probed yet");
            continue;
        }
        uint64_t used = r->blocks >= r->bfree ? r->blocks - r->bfree : 0;
        cJSON_AddNumberToObject(o, "bytes_total", (double)(r->blocks * r->frsize));
        cJSON_AddNumberToObject(o, "bytes_used", (double)(used * r->frsize));
        cJSON_AddNumberToObject(o, "bytes_free", (double)(r->bfree * r->frsize));
        cJSON_AddNumberToObject(o, "bytes_avail", (double)(r->bavail * r->frsize));
        cJSON_AddNumberToObject(o, "inodes_total", (double)r->files);
        cJSON_AddNumberToObject(o, "inodes_used",
                                (double)(r->files >= r->ffree ? r->files - r->ffree : 0));
        cJSON_AddNumberToObject(o, "inodes_free", (double)r->ffree);
        double pct = diskuse_percent(r->blocks, r->bfree, r->bavail, r->files, r->ffree);
        cJSON_AddNumberToObject(o, "used_percent", (double)(int64_t)(pct * 10) / 10);
        if (!r->ro)
            cJSON_AddBoolToObject(o, "low", r->low);
    }
    return a;
}

cJSON *diskuse_settings_json(void)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddNumberToObject(o, "low_percent", D.low_pct);
    cJSON_AddNumberToObject(o, "ok_percent", D.ok_pct);
    cJSON_AddNumberToObject(o, "check_ms", (double)D.check_ms);
    cJSON_AddBoolToObject(o, "timer", ev_is_active(&D.tick));
    return o;
}
