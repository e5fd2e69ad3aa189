#include "childjob.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "err.h"
#include "hearth.h"
#include "inherit.h"
#include "lifeline.h"
#include "log.h"
#include "reaper.h"

/* How long a killed child gets to be reaped before the job is ended
 * without it: one stuck in the kernel (a hung share) cannot take SIGKILL
 * until the call returns, and the owner must hear back all the same. */
#define KILL_GRACE_S 1.0
/* One read callback takes at most this much, so a child writing fast
 * never holds the loop. */
#define READ_SLICE (256 * 1024)

/* In the child only: its end of the job's eventfd, and whether it has
 * asked the loop to read already. */
static int child_kick = -1;
static bool child_asked;

bool childjob_running(const struct childjob *j)
{
    return j->pid > 0;
}

int childjob_write(int wfd, const void *buf, size_t len)
{
    const char *p = buf;

    while (len) {
        ssize_t w = write(wfd, p, len);
        if (w > 0) {
            p += w;
            len -= (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN) {
            /* The pipe is full: the loop reads it only when asked. */
            if (!child_asked && child_kick >= 0) {
                uint64_t one = 1;
                if (write(child_kick, &one, sizeof(one)) != (ssize_t)sizeof(one))
                    return -1;
                child_asked = true;
            }
            struct pollfd pf = {.fd = wfd, .events = POLLOUT};
            if (poll(&pf, 1, -1) < 0 && errno != EINTR)
                return -1;
            continue;
        }
        if (w == 0)
            errno = EPIPE;
        return -1;
    }
    return 0;
}

static void stop_kick(struct childjob *j)
{
    if (j->kick >= 0) {
        ev_io_stop(H.loop, &j->kick_io);
        close(j->kick);
        j->kick = -1;
    }
}

static void end_job(struct childjob *j, enum childjob_end end, int status)
{
    ev_timer_stop(H.loop, &j->deadline);
    if (j->rd >= 0) {
        ev_io_stop(H.loop, &j->io);
        close(j->rd);
        j->rd = -1;
    }
    stop_kick(j);
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
    stop_kick(j);
    ev_timer_stop(H.loop, &j->deadline);
    ev_timer_set(&j->deadline, KILL_GRACE_S, 0.);
    ev_timer_start(H.loop, &j->deadline);
}

void childjob_cancel(struct childjob *j)
{
    if (j->pid > 0 && !j->killing)
        kill_job(j, CHILDJOB_CANCELLED);
}

/* Reads what is there, without blocking: 1 when a slice was taken and
 * more may wait, 0 when the pipe is empty for now, -1 once it is done
 * (end of file, an error, or the job killed for its size). */
static int drain(struct childjob *j)
{
    size_t taken = 0;

    while (j->rd >= 0 && taken < READ_SLICE) {
        if (bytebuf_room(&j->out) == 0) {
            if (j->out.cap >= j->max) {
                log_warn("child %d wrote more than %zu bytes; killing it", (int)j->pid, j->max);
                kill_job(j, CHILDJOB_TOO_BIG);
                return -1;
            }
            if (bytebuf_resize(&j->out, bytebuf_grown_cap(j->out.cap, 65536, j->out.cap + 1,
                                                          j->max)) < 0) {
                log_warn("child %d: out of memory for its result; killing it", (int)j->pid);
                kill_job(j, CHILDJOB_TOO_BIG);
                return -1;
            }
        }
        ssize_t n = read(j->rd, bytebuf_tail(&j->out), bytebuf_room(&j->out));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return 0;
        if (n <= 0) {
            if (n < 0)
                log_warn("child %d: unable to read its result: %s", (int)j->pid, strerror(errno));
            ev_io_stop(H.loop, &j->io);
            close(j->rd);
            j->rd = -1;
            return -1;
        }
        j->out.len += (size_t)n;
        taken += (size_t)n;
    }
    return j->rd >= 0 ? 1 : -1;
}

static void on_readable(struct ev_loop *loop, ev_io *w, int revents)
{
    drain((struct childjob *)w->data);
}

/* The child's pipe is full: read it as it comes from now on. */
static void on_kick(struct ev_loop *loop, ev_io *w, int revents)
{
    struct childjob *j = w->data;
    uint64_t n;

    if (read(j->kick, &n, sizeof(n)) < 0 && errno != EAGAIN && errno != EINTR)
        log_warn("child %d: unable to read its request: %s", (int)j->pid, strerror(errno));
    stop_kick(j);
    if (j->rd < 0 || j->draining)
        return;
    j->draining = true;
    log_debug("child %d filled its pipe; reading as it writes", (int)j->pid);
    ev_io_start(loop, &j->io);
    drain(j);
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
    /* It has exited: everything it wrote is in the pipe now. An empty
     * pipe still open means a descendant holds its write end: what is
     * there is the result, and the loop does not wait on that process. */
    while (drain(j) > 0)
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

int childjob_start(struct childjob *j, int64_t timeout_ms, size_t max, childjob_fn fn,
                   void *arg, childjob_done done, struct err *err)
{
    int p[2];

    if (!H.loop)
        return err_set(err, "no event loop");
    if (j->pid > 0)
        return err_set(err, "already running (pid %d)", (int)j->pid);
    if (j->killed > 0)
        return err_set(err,
                       "the process killed before (pid %d) has not exited yet (a hung "
                       "filesystem?)",
                       (int)j->killed);
    if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
        return err_set(err, "pipe: %s", strerror(errno));
    int kick = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (kick < 0) {
        err_set(err, "eventfd: %s", strerror(errno));
        close(p[0]);
        close(p[1]);
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        err_set(err, "fork: %s", strerror(errno));
        close(p[0]);
        close(p[1]);
        close(kick);
        return -1;
    }
    if (pid == 0) {
        /* The child: non-blocking writes through childjob_write (which
         * asks the loop to read when the pipe is full), then out without
         * running the parent's exit handlers. */
        lifeline_hold(); /* no root job outlives hearth */
        close(p[0]);
        inherit_close_all_but3(p[1], kick, j->keep >= 3 ? j->keep : -1);
        child_kick = kick;
        child_asked = false;
        fn(p[1], arg);
        _exit(0);
    }
    close(p[1]);
    if (reaper_watch(pid, on_reaped, j) < 0) {
        kill(pid, SIGKILL); /* reaped as an orphan */
        close(p[0]);
        close(kick);
        return err_set(err, "unable to watch the child process");
    }
    j->pid = pid;
    j->rd = p[0];
    j->kick = kick;
    j->draining = false;
    j->max = max;
    j->out = (struct bytebuf){0};
    j->killing = false;
    j->timeout_ms = timeout_ms;
    j->done = done;
    /* The pipe waits for the exit (or the child's request); only the
     * eventfd is watched. */
    ev_io_init(&j->io, on_readable, j->rd, EV_READ);
    j->io.data = j;
    ev_io_init(&j->kick_io, on_kick, j->kick, EV_READ);
    j->kick_io.data = j;
    ev_io_start(H.loop, &j->kick_io);
    ev_timer_init(&j->deadline, on_deadline, (double)timeout_ms / 1000.0, 0.);
    j->deadline.data = j;
    ev_timer_start(H.loop, &j->deadline);
    return 0;
}
