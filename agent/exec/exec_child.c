/* The child's side of an exec.start, and the descriptors it gets. */
#include "execproc_priv.h"
#include "lifeline.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>


/* Runs in the child between fork and exec: plain syscalls only. */
void __attribute__((noreturn))
exec_child_run(const struct proc *p, const struct exec_request *r, const struct launch_plan *plan,
               int errfd, int in_r, int out_w, int err_w, int slave, bool placed)
{
    struct child_report rep;

    /* First: a session outlives no hearth (lifeline.h); asked again
     * after its identity changes. */
    lifeline_hold();
    memset(&rep, 0, sizeof(rep));
    launch_reset_signals(plan);
    setsid();
    if (p->leaf[0] && !placed) {
        char path[CGROUP_PATH_MAX + 16];
        snprintf(path, sizeof(path), "%s/cgroup.procs", p->leaf);
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd >= 0) {
            if (write(fd, "0", 1) != 1) {
                /* outside the leaf it still runs; kills fall back to pids */
            }
            close(fd);
        }
    }
    rep.stage = LAUNCH_STEP_SETUP;
    if (slave >= 0) {
        if (ioctl(slave, TIOCSCTTY, 0) < 0)
            goto fail;
        for (int fd = 0; fd < 3; fd++)
            if (dup2(slave, fd) < 0)
                goto fail;
    } else {
        int nul = in_r;
        if (nul < 0 && (nul = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0)
            goto fail;
        if (dup2(nul, 0) < 0 || dup2(out_w, 1) < 0 || dup2(err_w, 2) < 0)
            goto fail;
    }
    struct err what = {0};
    launch_exec(plan, r->cwd, r->argv, errfd, &rep.stage, &what);
    snprintf(rep.what, sizeof(rep.what), "%s", what.msg);
fail:
    rep.err = errno;
    if (write(errfd, &rep, sizeof(rep)) < 0) {
        /* nothing more to do */
    }
    _exit(127);
}

void exec_close_fds(int *fds, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (fds[i] >= 0) {
            close(fds[i]);
            fds[i] = -1;
        }
}

int exec_open_pty(unsigned rows, unsigned cols, int *master, int *slave)
{
    *slave = -1;
    *master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
    if (*master < 0)
        return -1;
    int unlock = 0;
    char name[64];
    struct winsize ws = {.ws_row = (unsigned short)(rows ? rows : 24),
                         .ws_col = (unsigned short)(cols ? cols : 80)};
    if (ioctl(*master, TIOCSPTLCK, &unlock) < 0 || ptsname_r(*master, name, sizeof(name)) != 0 ||
        ioctl(*master, TIOCSWINSZ, &ws) < 0)
        goto fail;
    *slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (*slave < 0)
        goto fail;
    return 0;
fail:;
    int saved = errno;
    close(*master);
    *master = -1;
    errno = saved;
    return -1;
}
