/* reaper: the one place children are reaped. Every SIGCHLD drains
 * waitpid(-1, WNOHANG); a pid someone registered gets its callback, any
 * other (an orphan re-parented to us) is reaped and forgotten. */
#ifndef HEARTH_REAPER_H
#define HEARTH_REAPER_H

#include <sys/types.h>

typedef void (*reaper_fn)(void *ctx, pid_t pid, int wstatus);

/* At most REAPER_MAX watched pids at once (services and their checks). */
#define REAPER_MAX 512

int reaper_watch(pid_t pid, reaper_fn fn, void *ctx);
/* Reaps everything that has exited; returns how many were reaped. */
int reaper_reap(void);
/* Sends sig to every watched child that has not been reaped yet. */
void reaper_kill_watched(int sig);
/* Total orphans (unwatched children) reaped since start. */
unsigned long reaper_orphans(void);

#endif
