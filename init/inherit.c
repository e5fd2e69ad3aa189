#include "inherit.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"

#ifndef SYS_close_range
#define SYS_close_range 436
#endif

/* Closes [lo, hi]: close_range where the kernel has it (5.9), else one
 * descriptor at a time up to the limit. */
static void close_span(unsigned lo, unsigned hi)
{
    if (lo > hi || syscall(SYS_close_range, lo, hi, 0) == 0)
        return;
    /* The soft descriptor limit, as sysconf(_SC_OPEN_MAX) would read it
     * (sysconf is 1 KiB of tables in a static binary). */
    struct rlimit rl;
    unsigned top = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur > 0 && rl.rlim_cur < 65536
                       ? (unsigned)rl.rlim_cur - 1
                       : 65535;
    for (unsigned fd = lo; fd <= hi && fd <= top; fd++)
        close((int)fd);
}

void inherit_close_all_but(int keep)
{
    int a = keep < 3 ? 2 : keep, b = log_fd();
    if (b < a) {
        int t = a;
        a = b;
        b = t;
    }
    if (a >= 3)
        close_span(3, (unsigned)a - 1);
    close_span((unsigned)a + 1, (unsigned)b - 1);
    close_span((unsigned)b + 1, ~0U);
}
