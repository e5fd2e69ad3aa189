#include "reaper.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include "log.h"

struct watch {
    pid_t pid;
    reaper_fn fn;
    void *ctx;
};

static struct watch watches[REAPER_MAX];
static unsigned long orphans;

unsigned long reaper_orphans(void) { return orphans; }

int reaper_watch(pid_t pid, reaper_fn fn, void *ctx)
{
    for (int i = 0; i < REAPER_MAX; i++) {
        if (watches[i].pid == 0) {
            watches[i] = (struct watch){pid, fn, ctx};
            return 0;
        }
    }
    errno = ENOSPC;
    return -1;
}

void reaper_kill_watched(int sig)
{
    /* A watched pid is hearth's own unreaped child: never reused. */
    for (int i = 0; i < REAPER_MAX; i++)
        if (watches[i].pid > 0)
            kill(watches[i].pid, sig);
}

int reaper_reap(void)
{
    int n = 0, st;
    pid_t pid;

    /* Drain fully: one SIGCHLD can stand for many exits. */
    for (;;) {
        pid = waitpid(-1, &st, WNOHANG);
        if (pid == 0)
            break;
        if (pid < 0) {
            if (errno == EINTR)
                continue;
            if (errno != ECHILD)
                log_warn("reaper: unable to reap children: %s", strerror(errno));
            break;
        }
        n++;
        int found = 0;
        for (int i = 0; i < REAPER_MAX; i++) {
            if (watches[i].pid == pid) {
                struct watch w = watches[i];
                watches[i].pid = 0;
                found = 1;
                w.fn(w.ctx, pid, st);
                break;
            }
        }
        if (!found) {
            orphans++;
            log_debug("reaped orphan %d", (int)pid);
        }
    }
    return n;
}
