#include "pidreaper.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lifeline.h"
#include "textpages.h"

#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#define CLOSE_RANGE_CLOEXEC_ 4

#ifndef AT_EMPTY_PATH
#define AT_EMPTY_PATH 0x1000
#endif

static int exe_fd = -1;

void pidreaper_init(void)
{
    /* O_PATH: nothing is read through it; execveat only needs it to
     * name the file. Close-on-exec: services never see it. */
    if (exe_fd < 0)
        exe_fd = open("/proc/self/exe", O_PATH | O_CLOEXEC);
}

int pidreaper_exe_fd(void) { return exe_fd; }

int pidreaper_pipe(int fds[2])
{
    return pipe2(fds, O_CLOEXEC | O_NONBLOCK);
}

int pidreaper_status(int fd, int reaper_status)
{
    int st = 0;
    ssize_t n;

    if (fd < 0)
        return reaper_status;
    do
        n = read(fd, &st, sizeof(st));
    while (n < 0 && errno == EINTR);
    close(fd);
    return n == (ssize_t)sizeof(st) ? st : reaper_status;
}

/* The reaper's own exit, for when its report is lost: as close to the
 * main process's as an exit code can say. */
static int __attribute__((noreturn)) finish(int status_fd, int st)
{
    ssize_t n;
    do
        n = write(status_fd, &st, sizeof(st));
    while (n < 0 && errno == EINTR);
    _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0));
}

/* Reaps every child; returns when none has ended. The main process's
 * end ends the reaper. */
static void reap(pid_t main, int status_fd)
{
    for (;;) {
        int st;
        pid_t pid = waitpid(-1, &st, WNOHANG);
        if (pid < 0 && errno == EINTR)
            continue;
        if (pid < 0 && errno == ECHILD)
            finish(status_fd, 0); /* cannot be: the main process is ours */
        if (pid <= 0)
            return;
        if (pid == main)
            finish(status_fd, st);
    }
}

static void __attribute__((noreturn)) run(pid_t main, int status_fd)
{
    sigset_t all;

    /* Nothing of the service's may read or trace the reaper: an exec
     * made it dumpable again. */
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    /* Its name in ps and /proc/1/comm, whichever way it got here. */
    prctl(PR_SET_NAME, (unsigned long)PIDREAPER_ARGV0, 0, 0, 0);
    /* All blocked (inherited through the exec, so nothing was lost in
     * between) and taken one by one: a pid namespace's init drops a
     * signal it neither blocks nor handles, so a blocked one waits here. */
    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, NULL);
    /* The reaper runs a few pages of hearth's code for the service's
     * lifetime; the rest its exec and start faulted in goes
     * (textpages.h). Nowhere to report a failure: it costs only memory. */
    textpages_release(NULL);
    for (;;) {
        reap(main, status_fd);
        siginfo_t si;
        int sig = sigwaitinfo(&all, &si);
        if (sig < 0 || sig == SIGCHLD)
            continue;
        /* A signal to the service's group reached the main process from
         * the kernel already; one it left the group for (setsid, its own
         * group) would not, so it is handed on, to its group first. */
        pid_t g = getpgid(main);
        if (g >= 0 && g != getpgrp() && kill(-g, sig) < 0)
            kill(main, sig);
    }
}

void pidreaper_become(pid_t main, int status_fd, int report_fd)
{
    char mainbuf[16], fdbuf[16], lifebuf[16];
    char *argv[] = {PIDREAPER_ARGV0, mainbuf, fdbuf, lifebuf, NULL};
    char *envp[] = {NULL};

    close(report_fd);
    /* The service's output and terminal are not the reaper's: holding
     * them would only delay their end of file. */
    int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int fd = 0; nul >= 0 && fd < 3; fd++)
        if (fd != status_fd)
            dup2(nul, fd);
    if (nul > 2)
        close(nul);
    /* Whatever else the child holds (the notify_fd pipe's write end)
     * stays behind at the exec. */
    if (syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC_) < 0)
        for (int fd = 3; fd < 1024; fd++)
            fcntl(fd, F_SETFD, FD_CLOEXEC);
    snprintf(mainbuf, sizeof(mainbuf), "%d", (int)main);
    snprintf(fdbuf, sizeof(fdbuf), "%d", status_fd);
    /* The exec may clear the death signal lifeline_hold asked for (a
     * root reaper's permitted set can grow back): hearth's pidfd crosses
     * it so that the reaper asks again and checks (lifeline.h). */
    int life = lifeline_fd();
    if (life >= 0 && fcntl(life, F_SETFD, 0) < 0)
        life = -1;
    snprintf(lifebuf, sizeof(lifebuf), "%d", life);
    /* The status descriptor and that pidfd cross the exec; nothing else does. */
    if (exe_fd >= 0 && fcntl(status_fd, F_SETFD, 0) == 0)
        syscall(SYS_execveat, exe_fd, "", argv, envp, AT_EMPTY_PATH);
    /* Without the exec (no descriptor, refused) the same loop runs here,
     * in a copy of hearth's memory the service still cannot read. */
    run(main, status_fd);
}

int pidreaper_main(int argc, char **argv)
{
    if (argc != 4 || getpid() != 1)
        return 2;
    char *end;
    long main = strtol(argv[1], &end, 10), fd;
    if (*end || main <= 1)
        return 2;
    fd = strtol(argv[2], &end, 10);
    if (*end || fd < 0)
        return 2;
    long life = strtol(argv[3], &end, 10);
    if (*end || life < -1)
        return 2;
    /* First: hearth may be gone already, or go now. */
    lifeline_hold_fd((int)life);
    fcntl((int)fd, F_SETFD, FD_CLOEXEC);
    run((pid_t)main, (int)fd);
}
