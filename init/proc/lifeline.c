#include "lifeline.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434 /* the same number on every architecture */
#endif

static pid_t owner = -1;
static int owner_fd = -1;

int lifeline_init(void)
{
    owner = getpid();
    if (owner_fd < 0)
        owner_fd = (int)syscall(SYS_pidfd_open, owner, 0);
    return owner_fd < 0 ? -1 : 0;
}

int lifeline_fd(void)
{
    return owner_fd;
}

/* A pidfd polls readable once its process has exited. */
static int exited(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int n;
    do
        n = poll(&p, 1, 0);
    while (n < 0 && errno == EINTR);
    return n > 0;
}

static void hold(int fd)
{
    int e = errno;
    /* Before the checks: a death after them is then the signal's. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
        _exit(127);
    /* 0: the parent is in an outer pid namespace (this child is the
     * first of its own), where only the pidfd can tell. */
    pid_t pp = getppid();
    if ((pp != 0 && owner > 0 && pp != owner) || (fd >= 0 && exited(fd)))
        _exit(127);
    errno = e;
}

void lifeline_hold(void)
{
    hold(owner_fd);
}

void lifeline_hold_fd(int pidfd)
{
    /* After an exec nothing of hearth's memory is left: the parent is
     * always outside (a reaper is PID 1 of its namespace). */
    owner = -1;
    hold(pidfd);
    if (pidfd >= 0)
        close(pidfd);
}
