#include "seed.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cJSON.h>
#include <ev.h>

#include "config.h"
#include "events.h"
#include "hearth.h"
#include "inherit.h"
#include "log.h"
#include "reaper.h"
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

enum seed_result seed_one(const char *target, const char *from, const char *unless, char *err,
                          size_t errlen)
{
    struct stat s;
    struct tree_stats st;

    err[0] = '\0';
    if (stat(from, &s) < 0) {
        snprintf(err, errlen, "unable to use template %s: %s", from, strerror(errno));
        return SEED_FAILED;
    }
    if (!S_ISDIR(s.st_mode)) {
        snprintf(err, errlen, "unable to use template %s: not a directory", from);
        return SEED_FAILED;
    }
    /* The target is the agent's home: no link on its path is followed,
     * and every file below is opened beneath this one fd. */
    char why[128];
    int fd = safepath_mkdir_p(target, 0755, geteuid(), getegid(), why, sizeof(why));
    if (fd < 0) {
        snprintf(err, errlen, "unable to open %s: %s", target, why);
        return SEED_FAILED;
    }
    bool interrupted = fstatat(fd, SEED_MARKER, &s, AT_SYMLINK_NOFOLLOW) == 0;
    if (!interrupted) {
        bool done = unless ? fstatat(fd, unless, &s, AT_SYMLINK_NOFOLLOW) == 0 : !dir_is_empty(fd);
        if (done) {
            close(fd);
            return SEED_ALREADY;
        }
        int m = safepath_open(fd, SEED_MARKER, O_WRONLY | O_CREAT, 0600, why, sizeof(why));
        if (m < 0) {
            snprintf(err, errlen, "unable to write %s/%s: %s", target, SEED_MARKER, why);
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
        snprintf(err, errlen, "unable to open template %s: %s", from, strerror(errno));
        close(fd);
        return SEED_FAILED;
    }
    int rc = tree_copy_fd(sd, fd, target, unless ? last : NULL, NULL, &st, err, errlen);
    close(sd);
    if (rc < 0) {
        close(fd);
        return SEED_FAILED;
    }
    fsync_dir(fd);
    if (unlinkat(fd, SEED_MARKER, 0) < 0 && errno != ENOENT) {
        snprintf(err, errlen, "unable to remove %s/%s: %s", target, SEED_MARKER, strerror(errno));
        close(fd);
        return SEED_FAILED;
    }
    fsync_dir(fd);
    close(fd);
    log_info("seeded %s from %s: %lu files, %lu dirs, %lu links, %lu kept", target, from, st.files,
             st.dirs, st.links, st.kept);
    return SEED_DONE;
}

/* The entries run one after the other, each copy in a child process so a
 * large template never stalls the loop (the control plane stays up). The
 * child reports its result through a pipe: one byte, then the error. */
static struct {
    const struct config *cfg;
    const char *(*skip)(const char *path);
    void (*done)(void);
    size_t cur;                 /* index into cfg->seed */
    bool running, again;
    cJSON *report;
    int64_t t0;
    int rd;
    int failures;
    pid_t pid;
    bool timed_out;
    ev_timer deadline;
} Q = {.rd = -1};

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

static void on_child(void *ctx, pid_t pid, int status)
{
    char buf[520];
    ssize_t n = Q.rd >= 0 ? read(Q.rd, buf, sizeof(buf) - 1) : -1;
    enum seed_result r = SEED_FAILED;
    char err[512];

    if (Q.rd >= 0)
        close(Q.rd);
    Q.rd = -1;
    Q.pid = 0;
    ev_timer_stop(H.loop, &Q.deadline);
    if (Q.timed_out) {
        Q.timed_out = false;
        snprintf(err, sizeof(err), "the copy took longer than %d ms; stopped (redone at the next pass)",
                 SEED_TIMEOUT_MS);
    } else if (n >= 1 && (unsigned char)buf[0] <= SEED_FAILED && WIFEXITED(status)) {
        buf[n] = '\0';
        r = (enum seed_result)buf[0];
        snprintf(err, sizeof(err), "%s", buf + 1);
    } else if (WIFSIGNALED(status)) {
        snprintf(err, sizeof(err), "seed process killed by signal %d", WTERMSIG(status));
    } else {
        snprintf(err, sizeof(err), "seed process ended without a result (status %d)", status);
    }
    record(&Q.cfg->seed.v[Q.cur], r, err);
    Q.cur++;
    step();
}

/* A copy that never ends (a template on a hung share) must not hold the
 * mounts phase forever: it is killed; its marker makes the next pass
 * complete it. */
static void on_deadline(struct ev_loop *loop, ev_timer *w, int revents)
{
    if (Q.pid > 0) {
        log_warn("seed: copy still running after %d ms; killing it", SEED_TIMEOUT_MS);
        Q.timed_out = true;
        kill(Q.pid, SIGKILL);
    }
}

/* Starts the copy of entry e in a child; false when that is not possible
 * (no loop yet, or fork failed): then it runs here. */
static bool spawn(const char *target, const char *from, const char *unless)
{
    int p[2];

    if (!H.loop || pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
        return false;
    pid_t pid = fork();
    if (pid < 0) {
        close(p[0]);
        close(p[1]);
        return false;
    }
    if (pid == 0) {
        char msg[513];
        inherit_close_all_but(p[1]);
        msg[0] = (char)seed_one(target, from, unless, msg + 1, sizeof(msg) - 1);
        ssize_t w = write(p[1], msg, 1 + strlen(msg + 1));
        _exit(w > 0 ? 0 : 1);
    }
    close(p[1]);
    Q.rd = p[0];
    if (reaper_watch(pid, on_child, NULL) < 0) {
        /* Unwatched, it is reaped as an orphan; its result is lost. */
        log_error("seed %s: unable to watch the copy process", target);
        kill(pid, SIGKILL);
        close(Q.rd);
        Q.rd = -1;
        return false;
    }
    Q.pid = pid;
    Q.timed_out = false;
    ev_timer_init(&Q.deadline, on_deadline, SEED_TIMEOUT_MS / 1000.0, 0.);
    ev_timer_start(H.loop, &Q.deadline);
    return true;
}

static void finish(void)
{
    cJSON_Delete(last_report);
    last_report = Q.report;
    Q.report = NULL;
    Q.running = false;
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
    char err[512];

    while (Q.cur < Q.cfg->seed.n) {
        const struct seed_entry *e = &Q.cfg->seed.v[Q.cur];
        const char *target = e->target, *from = e->from, *unless = e->unless;
        const char *failed_mount = Q.skip ? Q.skip(target) : NULL;

        Q.t0 = mono_ms();
        if (failed_mount) {
            snprintf(err, sizeof(err), "mount %s failed", failed_mount);
            record(e, SEED_SKIPPED, err);
        } else if (spawn(target, from, unless)) {
            return; /* on_child goes on */
        } else {
            enum seed_result r = seed_one(target, from, unless, err, sizeof(err));
            record(e, r, err);
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
