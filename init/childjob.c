#include "childjob.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hearth.h"
#include "inherit.h"
#include "log.h"
#include "reaper.h"

/* How long a killed child gets to be reaped before the job is ended
 * without it: one stuck in the kernel (a hung share) cannot take SIGKILL
 * until the call returns, and the owner must hear back all the same. */
#define KILL_GRACE_S 1.0
/* One read callback takes at most this much, so a child writing fast
 * never holds the loop. */
#define READ_SLICE (256 * 1024)

bool childjob_running(const struct childjob *j)
{
    return j->pid > 0;
}

static void end_job(struct childjob *j, enum childjob_end end, int status)
{
    ev_timer_stop(H.loop, &j->deadline);
    if (j->rd >= 0) {
        ev_io_stop(H.loop, &j->io);
        close(j->rd);
        j->rd = -1;
    }
    j->pid = 0;
    j->killing = false;
    /* The result leaves the job first: done may start the next one. */
    struct bytebuf out = j->out;
    j->out = (struct bytebuf){0};
    if (j->done)
        j->done(j, end, status, out.data ? out.data : "", out.len);
    bytebuf_release(&out);
}

static void kill_job(struct childjob *j, enum childjob_end why)
{
    if (j->killing)
        return;
    j->killing = true;
    j->why = why;
    kill(j->pid, SIGKILL);
    /* Its result no longer counts: not read (a full pipe then only
     * stalls a process that is going anyway). */
    if (j->rd >= 0) {
        ev_io_stop(H.loop, &j->io);
        close(j->rd);
        j->rd = -1;
    }
    ev_timer_stop(H.loop, &j->deadline);
    ev_timer_set(&j->deadline, KILL_GRACE_S, 0.);
    ev_timer_start(H.loop, &j->deadline);
}

/* Reads what is there, without blocking; false once the pipe is done
 * (end of file, an error, or the job killed for its size). */
static bool drain(struct childjob *j)
{
    size_t taken = 0;

    while (j->rd >= 0 && taken < READ_SLICE) {
        if (bytebuf_room(&j->out) == 0) {
            if (j->out.cap >= j->max) {
                log_warn("child %d wrote more than %zu bytes; killing it", (int)j->pid, j->max);
                kill_job(j, CHILDJOB_TOO_BIG);
                return false;
            }
            if (bytebuf_resize(&j->out, bytebuf_grown_cap(j->out.cap, 65536, j->out.cap + 1,
                                                          j->max)) < 0) {
                log_warn("child %d: out of memory for its result; killing it", (int)j->pid);
                kill_job(j, CHILDJOB_TOO_BIG);
                return false;
            }
        }
        ssize_t n = read(j->rd, bytebuf_tail(&j->out), bytebuf_room(&j->out));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return true;
        if (n <= 0) {
            if (n < 0)
                log_warn("child %d: unable to read its result: %s", (int)j->pid, strerror(errno));
            ev_io_stop(H.loop, &j->io);
            close(j->rd);
            j->rd = -1;
            return false;
        }
        j->out.len += (size_t)n;
        taken += (size_t)n;
    }
    return j->rd >= 0;
}

static void on_readable(struct ev_loop *loop, ev_io *w, int revents)
{
    drain((struct childjob *)w->data);
}

static void on_reaped(void *ctx, pid_t pid, int status)
{
    struct childjob *j = ctx;

    if (pid == j->killed) {
        j->killed = 0; /* the stuck one finally went */
        return;
    }
    if (pid != j->pid)
        return;
    if (j->killing) {
        end_job(j, j->why, status);
        return;
    }
    /* It has exited: everything it wrote is in the pipe now. */
    while (drain(j))
        ;
    if (j->killing) /* too big after all */
        end_job(j, j->why, status);
    else
        end_job(j, CHILDJOB_EXITED, status);
}

static void on_deadline(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct childjob *j = w->data;

    if (!j->killing) {
        log_warn("child %d still running after %lld ms; killing it", (int)j->pid,
                 (long long)j->timeout_ms);
        kill_job(j, CHILDJOB_TIMEOUT);
        return;
    }
    /* Killed but not reaped within the grace: stuck in the kernel. The
     * owner hears now; the reaper takes it whenever it goes. */
    log_warn("child %d not gone %.0f s after SIGKILL; leaving it to the reaper", (int)j->pid,
             KILL_GRACE_S);
    j->killed = j->pid;
    end_job(j, j->why, -1);
}

static int set_blocking(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
}

int childjob_start(struct childjob *j, int64_t timeout_ms, size_t max, childjob_fn fn,
                   void *arg, childjob_done done, char *err, size_t errlen)
{
    int p[2];

    if (!H.loop) {
        snprintf(err, errlen, "no event loop");
        return -1;
    }
    if (j->pid > 0) {
        snprintf(err, errlen, "already running (pid %d)", (int)j->pid);
        return -1;
    }
    if (j->killed > 0) {
        snprintf(err, errlen,
                 "the process killed at its deadline (pid %d) has not exited yet (a hung "
                 "filesystem?)",
                 (int)j->killed);
        return -1;
    }
    if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "fork: %s", strerror(errno));
        close(p[0]);
        close(p[1]);
        return -1;
    }
    if (pid == 0) {
        /* The child: blocking writes (the loop reads as it can), then
         * out without running the parent's exit handlers. */
        close(p[0]);
        inherit_close_all_but(p[1]);
        set_blocking(p[1]);
        fn(p[1], arg);
        _exit(0);
    }
    close(p[1]);
    if (reaper_watch(pid, on_reaped, j) < 0) {
        kill(pid, SIGKILL); /* reaped as an orphan */
        close(p[0]);
        snprintf(err, errlen, "unable to watch the child process");
        return -1;
    }
    j->pid = pid;
    j->rd = p[0];
    j->max = max;
    j->out = (struct bytebuf){0};
    j->killing = false;
    j->timeout_ms = timeout_ms;
    j->done = done;
    ev_io_init(&j->io, on_readable, j->rd, EV_READ);
    j->io.data = j;
    ev_io_start(H.loop, &j->io);
    ev_timer_init(&j->deadline, on_deadline, (double)timeout_ms / 1000.0, 0.);
    j->deadline.data = j;
    ev_timer_start(H.loop, &j->deadline);
    return 0;
}
