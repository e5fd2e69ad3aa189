#include "seed.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cJSON.h>
#include <ev.h>

#include "accounts.h"
#include "childjob.h"
#include "config.h"
#include "err.h"
#include "events.h"
#include "hearth.h"
#include "log.h"
#include "mounts.h"
#include "pathname.h"
#include "safepath.h"
#include "tree.h"

static cJSON *last_report;

static const char *const result_names[] = {"seeded", "already", "skipped", "failed"};

static bool dir_is_empty(int fd)
{
    int d2 = dup(fd);
    if (d2 < 0)
        return false;
    DIR *d = fdopendir(d2);
    if (!d) {
        close(d2);
        return false;
    }
    struct dirent *de;
    bool empty = true;
    while ((de = readdir(d))) {
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
            strcmp(de->d_name, "lost+found")) {
            empty = false;
            break;
        }
    }
    closedir(d);
    return empty;
}

static int fsync_dir(int fd)
{
    return fsync(fd) < 0 && errno != EINVAL ? -1 : 0;
}

/* The seed's target, open: made without following a link, missing
 * parents as hearth's, the target itself (when made here) as own's. */
static int open_target(const char *target, const struct tree_owner *own, struct err *err)
{
    if (!own)
        return safepath_mkdir_p(target, 0755, geteuid(), getegid(), err);
    char parent[PATH_MAX];
    const char *slash = strrchr(target, '/');
    if (!slash || !slash[1] || (size_t)(slash - target) >= sizeof(parent))
        return safepath_mkdir_p(target, 0755, own->uid, own->gid, err);
    memcpy(parent, target, (size_t)(slash - target));
    parent[slash - target] = '\0';
    int pfd = safepath_mkdir_p(parent[0] ? parent : "/", 0755, geteuid(), getegid(), err);
    if (pfd < 0)
        return -1;
    int fd = safepath_mkdir(pfd, slash + 1, 0755, own->uid, own->gid, NULL, err);
    int e = errno;
    close(pfd);
    errno = e;
    return fd;
}

enum seed_result seed_one(const char *target, const char *from, const char *unless, struct err *err)
{
    return seed_one_as(target, from, unless, NULL, err);
}

enum seed_result seed_one_as(const char *target, const char *from, const char *unless,
                             const struct tree_owner *own, struct err *err)
{
    struct stat s;
    struct tree_stats st;

    if (err)
        err->msg[0] = '\0';
    if (stat(from, &s) < 0) {
        err_unable(err, errno, "use template %s", from);
        return SEED_FAILED;
    }
    if (!S_ISDIR(s.st_mode)) {
        err_set(err, "unable to use template %s: not a directory", from);
        return SEED_FAILED;
    }
    /* The target is the agent's home: no link on its path is followed,
     * and every file below is opened beneath this one fd. */
    struct err why;
    int fd = open_target(target, own, &why);
    if (fd < 0) {
        err_set(err, "unable to open %s: %s", target, why.msg);
        return SEED_FAILED;
    }
    bool interrupted = fstatat(fd, SEED_MARKER, &s, AT_SYMLINK_NOFOLLOW) == 0;
    if (!interrupted) {
        bool done = unless ? fstatat(fd, unless, &s, AT_SYMLINK_NOFOLLOW) == 0 : !dir_is_empty(fd);
        if (done) {
            close(fd);
            return SEED_ALREADY;
        }
        int m = safepath_open(fd, SEED_MARKER, O_WRONLY | O_CREAT, 0600, &why);
        if (m < 0) {
            err_set(err, "unable to write %s/%s: %s", target, SEED_MARKER, why.msg);
            close(fd);
            return SEED_FAILED;
        }
        close(m);
        fsync_dir(fd);
    } else {
        log_warn("seed %s: an earlier seed was interrupted; completing it", target);
    }
    /* unless is the "seeded" flag: copied last, it only exists once the
     * rest of the template is in place. */
    const char *last[] = {unless, NULL};
    int sd = open(from, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (sd < 0) {
        err_unable(err, errno, "open template %s", from);
        close(fd);
        return SEED_FAILED;
    }
    int rc = tree_copy_fd(sd, fd, target, unless ? last : NULL, own, &st, err);
    close(sd);
    if (rc < 0) {
        close(fd);
        return SEED_FAILED;
    }
    fsync_dir(fd);
    if (unlinkat(fd, SEED_MARKER, 0) < 0 && errno != ENOENT) {
        err_unable(err, errno, "remove %s/%s", target, SEED_MARKER);
        close(fd);
        return SEED_FAILED;
    }
    fsync_dir(fd);
    close(fd);
    log_info("seeded %s from %s: %lu files, %lu dirs, %lu links, %lu kept", target, from, st.files,
             st.dirs, st.links, st.kept);
    return SEED_DONE;
}

/* The entries run one after the other, each copy in a child process
 * (init/proc/childjob.c) so a large template never stalls the loop (the
 * control plane stays up). The child reports its result through the
 * job's pipe: one byte, then the error. A copy that never ends (a
 * template on a hung share) must not hold the mounts phase forever: it is
 * killed at SEED_TIMEOUT_MS; its marker makes the next pass complete it. */
#define SEED_RESULT_MAX 1024
static struct {
    const struct config *cfg;
    const char *(*skip)(const char *path);
    void (*done)(void);
    size_t cur;                 /* index into cfg->seed */
    bool running, again;
    cJSON *report;
    int64_t t0;
    int failures;
    struct childjob job;
    char stopped[256];          /* why the copy under way was stopped */
} Q;

static void step(void);

static void record(const struct seed_entry *e, enum seed_result r, const char *err)
{
    const char *target = e->target, *from = e->from;

    if (r == SEED_FAILED) {
        Q.failures++;
        log_error("seed %s: %s", target, err);
    } else if (r == SEED_SKIPPED) {
        log_warn("seed %s skipped: %s", target, err);
    }
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return;
    cJSON_AddStringToObject(o, "target", target);
    cJSON_AddStringToObject(o, "from", from);
    cJSON_AddStringToObject(o, "result", result_names[r]);
    if (err[0])
        cJSON_AddStringToObject(o, "error", err);
    cJSON_AddNumberToObject(o, "ms", (double)(mono_ms() - Q.t0));
    if (r != SEED_ALREADY)
        events_emit(r == SEED_DONE ? "seed.done" : "seed.failed", cJSON_Duplicate(o, 1));
    if (Q.report)
        cJSON_AddItemToArray(Q.report, o);
    else
        cJSON_Delete(o);
}

static void copy_done(struct childjob *j, enum childjob_end end, int status, const char *data,
                      size_t len)
{
    enum seed_result r = SEED_FAILED;
    char err[512];

    if (end == CHILDJOB_CANCELLED) {
        /* Its target went: not a failure of the seed, and redone (its
         * marker completes it) when the mount is back. */
        r = SEED_SKIPPED;
        snprintf(err, sizeof(err), "the copy was stopped: %s (redone when it is back)", Q.stopped);
    } else if (end == CHILDJOB_TIMEOUT) {
        snprintf(err, sizeof(err), "the copy took longer than %d ms; stopped (redone at the next pass)",
                 SEED_TIMEOUT_MS);
    } else if (end == CHILDJOB_EXITED && len >= 1 && (unsigned char)data[0] <= SEED_FAILED &&
               WIFEXITED(status)) {
        r = (enum seed_result)data[0];
        snprintf(err, sizeof(err), "%.*s", (int)(len - 1), data + 1);
    } else if (end == CHILDJOB_EXITED && WIFSIGNALED(status)) {
        snprintf(err, sizeof(err), "seed process killed by signal %d", WTERMSIG(status));
    } else {
        snprintf(err, sizeof(err), "seed process ended without a result (status %d)", status);
    }
    record(&Q.cfg->seed.v[Q.cur], r, err);
    Q.cur++;
    step();
}

struct copy_args {
    const char *target, *from, *unless;
    const struct tree_owner *own;
};

/* In the child: the copy, then its result down the job's pipe. */
static void copy_child(int wfd, void *arg)
{
    const struct copy_args *a = arg;
    char msg[513];
    struct err why = {0};

    msg[0] = (char)seed_one_as(a->target, a->from, a->unless, a->own, &why);
    snprintf(msg + 1, sizeof(msg) - 1, "%s", why.msg);
    _exit(childjob_write(wfd, msg, 1 + strlen(msg + 1)) == 0 ? 0 : 1);
}

/* Starts the copy of e in a child: 1 started, 0 when that is not
 * possible (no loop yet, or fork failed) and it runs here instead, -1
 * (err) when the last copy killed at its deadline is still stuck in the
 * kernel: a copy here would stall hearth on the same share. */
static int spawn(const struct seed_entry *e, const struct tree_owner *own, struct err *err)
{
    struct copy_args a = {e->target, e->from, e->unless, own};
    struct err why;

    if (!H.loop)
        return 0;
    if (childjob_start(&Q.job, SEED_TIMEOUT_MS, SEED_RESULT_MAX, copy_child, &a, copy_done, &why) == 0)
        return 1;
    if (Q.job.killed > 0)
        return err_set(err, "unable to start the copy: %s", why.msg);
    log_error("seed %s: unable to start the copy process: %s; copying in hearth itself", e->target,
              why.msg);
    return 0;
}

/* A pass with a failed entry is run again later: a home that was full
 * (ENOSPC), a share that failed or a copy cut off at its deadline may be
 * fine a little later, and the agent should not wait for the next boot
 * or resume to get its seeded home. The delay doubles from 1 s to 5 min,
 * so an entry that can never succeed (a missing template) costs a
 * wake-up every 5 min; a pass without failures ends the retries. */
#define SEED_RETRY_FIRST_MS 1000
#define SEED_RETRY_MAX_MS 300000
static ev_timer retry;
static int64_t retry_ms;

/* Not while a pass over the mounts is under way (a target may not be
 * mounted yet: the copy would land beneath it); its end seeds anyway. */
static void on_retry(struct ev_loop *loop, ev_timer *w, int revents)
{
    if (!Q.running && mounts_done()) {
        log_info("seed: trying the failed entries again");
        seed_start(Q.cfg, Q.skip, Q.done);
    }
}

static void schedule_retry(void)
{
    if (!H.loop)
        return;
    ev_timer_stop(H.loop, &retry);
    if (Q.failures == 0) {
        retry_ms = 0;
        return;
    }
    retry_ms = retry_ms ? retry_ms * 2 : SEED_RETRY_FIRST_MS;
    if (retry_ms > SEED_RETRY_MAX_MS)
        retry_ms = SEED_RETRY_MAX_MS;
    ev_timer_init(&retry, on_retry, (double)retry_ms / 1000.0, 0.);
    ev_timer_start(H.loop, &retry);
    log_info("seed: %d entr%s failed; trying again in %lld ms", Q.failures,
             Q.failures == 1 ? "y" : "ies", (long long)retry_ms);
}

static void finish(void)
{
    cJSON_Delete(last_report);
    last_report = Q.report;
    Q.report = NULL;
    Q.running = false;
    schedule_retry();
    if (Q.again) {
        Q.again = false;
        seed_start(Q.cfg, Q.skip, Q.done);
        return;
    }
    if (Q.done)
        Q.done();
}

static void step(void)
{
    struct err err;

    while (Q.cur < Q.cfg->seed.n) {
        const struct seed_entry *e = &Q.cfg->seed.v[Q.cur];
        const char *target = e->target, *from = e->from, *unless = e->unless;
        const char *blocked = Q.skip ? Q.skip(target) : NULL;
        struct tree_owner own = {geteuid(), getegid()};
        struct err why;
        int started;

        Q.t0 = mono_ms();
        if (blocked) {
            err_set(&err, "%s", blocked);
            record(e, SEED_SKIPPED, err.msg);
        } else if ((e->user || e->group) &&
                   accounts_user_group(accounts_snapshot(), e->user, e->group, &own.uid, &own.gid,
                                       &why) < 0) {
            /* Copies the agent could not change are worse than none. */
            err_set(&err, "unable to seed as its owner: %s", why.msg);
            record(e, SEED_FAILED, err.msg);
        } else if ((started = spawn(e, e->user || e->group ? &own : NULL, &err)) > 0) {
            return; /* copy_done goes on */
        } else if (started < 0) {
            record(e, SEED_FAILED, err.msg);
        } else {
            enum seed_result r = seed_one_as(target, from, unless, e->user || e->group ? &own : NULL,
                                             &err);
            record(e, r, err.msg);
        }
        Q.cur++;
    }
    finish();
}

void seed_start(const struct config *cfg, const char *(*skip)(const char *path),
                void (*done)(void))
{
    if (Q.running) {
        /* A new pass over the mounts while copying: run again after. */
        Q.again = true;
        Q.cfg = cfg, Q.skip = skip, Q.done = done;
        return;
    }
    Q.cfg = cfg;
    Q.skip = skip;
    Q.done = done;
    Q.failures = 0;
    Q.report = cJSON_CreateArray();
    Q.cur = 0;
    Q.running = true;
    step();
}

void seed_mount_left(const char *target, const char *why)
{
    if (!Q.running || !childjob_running(&Q.job) || Q.cur >= Q.cfg->seed.n)
        return;
    const struct seed_entry *e = &Q.cfg->seed.v[Q.cur];
    if (!pathname_at_or_under(e->target, target) && !pathname_at_or_under(e->from, target))
        return;
    log_warn("seed %s: stopping the copy: %s", e->target, why);
    snprintf(Q.stopped, sizeof(Q.stopped), "%s", why);
    childjob_cancel(&Q.job);
}

bool seed_running(void)
{
    return Q.running;
}

int seed_failures(void)
{
    return Q.failures;
}

cJSON *seed_to_json(void)
{
    return last_report ? cJSON_Duplicate(last_report, 1) : cJSON_CreateArray();
}
