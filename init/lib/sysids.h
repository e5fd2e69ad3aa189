/* sysids: a process's ids and resource limits set with the system calls
 * themselves. musl makes setgroups, set*id and setrlimit reach every
 * thread of the process (through __synccall: signals to each thread,
 * semaphores, a lock), some 2.5 KiB of a static binary; hearth is
 * single-threaded and so are the children it forks, where these run, and
 * for one thread the system call alone does the same. Each returns 0, or
 * -1 with errno, as the C library's functions do. */
#ifndef HEARTH_SYSIDS_H
#define HEARTH_SYSIDS_H

#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

static inline int sysids_setgroups(size_t n, const gid_t *groups)
{
    return (int)syscall(SYS_setgroups, n, groups);
}

static inline int sysids_setresgid(gid_t r, gid_t e, gid_t s)
{
    return (int)syscall(SYS_setresgid, r, e, s);
}

static inline int sysids_setresuid(uid_t r, uid_t e, uid_t s)
{
    return (int)syscall(SYS_setresuid, r, e, s);
}

/* The calling process's own limit (prlimit's pid 0). */
static inline int sysids_setrlimit(int resource, const struct rlimit *lim)
{
    return (int)syscall(SYS_prlimit64, 0, resource, lim, NULL);
}

#endif
