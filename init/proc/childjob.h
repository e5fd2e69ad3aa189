/* childjob: file work that may take long (a walk of a tree the agent can
 * fill, a share that may hang) run in a forked child, so PID 1's loop
 * never waits on it. The child writes its result to a pipe; the loop
 * reads it without blocking, bounded in bytes, and a deadline kills the
 * child. One job at a time per struct childjob.
 *
 * A job costs the loop one wake-up, the child's exit: the pipe is not
 * watched while its result fits in the pipe, and is read whole once the
 * reaper has the child (by then everything it wrote is there). A result
 * larger than the pipe holds would stall the child, so a child whose
 * write would block asks for reading through an eventfd the loop watches
 * (held open by the loop too, so the child's exit alone never wakes it),
 * and from then on the loop reads as the result comes. */
#ifndef HEARTH_CHILDJOB_H
#define HEARTH_CHILDJOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <ev.h>

#include "bytebuf.h"
#include "err.h"

enum childjob_end {
    CHILDJOB_EXITED,   /* ended on its own: status is its wait status */
    CHILDJOB_TIMEOUT,  /* past its deadline: killed */
    CHILDJOB_TOO_BIG,  /* wrote more than max bytes: killed */
    CHILDJOB_CANCELLED, /* its owner no longer wanted it: killed (childjob_cancel) */
};

struct childjob;
/* Runs in the child: writes the result to wfd with childjob_write (wfd is
 * non-blocking: a plain write() can fail with EAGAIN), returns; the child
 * then _exits. */
typedef void (*childjob_fn)(int wfd, void *arg);
/* In the loop, once: data/len is what the child wrote (valid during the
 * call only). */
typedef void (*childjob_done)(struct childjob *j, enum childjob_end end, int status,
                              const char *data, size_t len);

struct childjob {
    pid_t pid;    /* the running child, 0 when none */
    pid_t killed; /* a child killed (deadline, size, cancel) and not reaped yet */
    int rd;
    ev_io io;                /* the pipe, watched only once the child asked */
    int kick;                /* eventfd: the child's request to read the pipe */
    ev_io kick_io;
    bool draining;           /* the child asked: the pipe is watched */
    ev_timer deadline;
    struct bytebuf out;      /* what the child wrote so far */
    size_t max;
    bool killing;            /* SIGKILL sent; waiting for the reap */
    enum childjob_end why;   /* what killing reports */
    int64_t timeout_ms;
    childjob_done done;
    void *ctx; /* the owner's */
    /* One more descriptor of the loop's the child keeps (3 and up; 0:
     * none), set before childjob_start: work done on an object the loop
     * holds (envd's inotify instance, agent/envd.c). */
    int keep;
};

/* Forks fn(arg) with a timeout_ms deadline and a max-byte result. 0
 * started, -1 with err (no loop, a killed child still not reaped, pipe,
 * fork or reaper failure). */
int childjob_start(struct childjob *j, int64_t timeout_ms, size_t max, childjob_fn fn,
                   void *arg, childjob_done done, struct err *err);
bool childjob_running(const struct childjob *j);
/* Kills a running job whose work no longer counts (what it works on went
 * away): done follows from the loop, with CHILDJOB_CANCELLED, once the
 * child is reaped or its grace after SIGKILL is over. Nothing when none
 * runs. */
void childjob_cancel(struct childjob *j);
/* In the child only: writes all of buf to wfd. When the pipe is full it
 * asks the loop to read (once) and waits for room. 0, or -1 with errno
 * (the loop went away: EPIPE). */
int childjob_write(int wfd, const void *buf, size_t len);

#endif
