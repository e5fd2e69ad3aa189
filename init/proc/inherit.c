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

void inherit_close_all_but3(int keep1, int keep2, int keep3)
{
    /* The descriptors kept, 3 up and sorted; 2 stands for "none". */
    int k[4] = {keep1 < 3 ? 2 : keep1, keep2 < 3 ? 2 : keep2, keep3 < 3 ? 2 : keep3,
                log_fd() < 3 ? 2 : log_fd()};
    for (int i = 0; i < 4; i++)
        for (int m = i + 1; m < 4; m++)
            if (k[m] < k[i]) {
                int t = k[i];
                k[i] = k[m];
                k[m] = t;
            }
    unsigned lo = 3;
    for (int i = 0; i < 4; i++) {
        if (k[i] < (int)lo)
            continue;
        close_span(lo, (unsigned)k[i] - 1);
        lo = (unsigned)k[i] + 1;
    }
    close_span(lo, ~0U);
}

void inherit_close_all_but2(int keep1, int keep2)
{
    inherit_close_all_but3(keep1, keep2, -1);
}

void inherit_close_all_but(int keep)
{
    inherit_close_all_but2(keep, -1);
}
