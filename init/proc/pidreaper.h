/* pidreaper: PID 1 of a service's own pid namespace. A contained service
 * (and an exec.start session) is born with CLONE_NEWPID; that first
 * process sets up the containment, forks the service's program (pid 2 of
 * the namespace) and then becomes the reaper: hearth's own binary exec'd
 * again in a tiny role that carries none of hearth's memory. It reaps
 * every process of the namespace, hands signals on to the main process
 * when it has left the reaper's process group, and when the main process
 * ends writes its wait status to hearth and exits, which ends everything
 * left in the namespace. hearth watches the reaper's pid as the
 * service's, and takes the exit it reports in place of the reaper's own.
 *
 * The reaper's process group is the service's (the main process stays in
 * it): a signal hearth sends the group reaches the main process once,
 * from the kernel, and never again through the reaper. */
#ifndef HEARTH_PIDREAPER_H
#define HEARTH_PIDREAPER_H

#include <stdbool.h>
#include <sys/types.h>

/* argv[0] of the reaper role: the kernel never hands init such a word. */
#define PIDREAPER_ARGV0 "hearth-reaper"

/* Once, at boot: a descriptor of hearth's own binary, for the reaper's
 * exec (a service's namespace may not show hearth's path at all). */
void pidreaper_init(void);
/* That descriptor (O_PATH, close-on-exec), or -1: hearth's other roles
 * (the envd endpoint) are started from it too. */
int pidreaper_exe_fd(void);

/* In the parent: the pipe the reaper reports on (both ends close-on-exec;
 * the child clears it on its own end). Returns 0 or -1 with errno. */
int pidreaper_pipe(int fds[2]);
/* In the parent, once the reaper was reaped with status reaper_status:
 * the main process's status as the reaper wrote it on fd (closed here),
 * or reaper_status when it wrote none (killed before its main process
 * ended, say by SIGKILL). */
int pidreaper_status(int fd, int reaper_status);

/* In the child that is PID 1 of the new namespace, after fork: main is
 * the main process, status_fd the pipe's write end, report_fd the
 * exec-status pipe (closed here so its EOF says the main process
 * exec'd). Never returns. */
void pidreaper_become(pid_t main, int status_fd, int report_fd) __attribute__((noreturn));

/* The reaper role, from main() when argv[0] is PIDREAPER_ARGV0:
 * argv[1] the main process's pid, argv[2] the status descriptor,
 * argv[3] hearth's pidfd (-1: none), for lifeline_hold_fd. */
int pidreaper_main(int argc, char **argv);

#endif
