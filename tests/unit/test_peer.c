/* The peer verdicts that need no PID 1: a live process is identified, a
 * process that exited (reaped, or a zombie) is not, and signals from
 * outside the pid namespace (sender 0) are obeyed. */
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "peer.h"
#include "err.h"
#include "unit.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

TEST(peer_a_live_process_is_identified)
{
    struct err why = {0};
    int fd = (int)syscall(SYS_pidfd_open, getpid(), 0);
    CHECK(fd >= 0);
    CHECK_EQ_INT(peer_classify(getpid(), fd, &why), 0);
    close(fd);
    CHECK_EQ_INT(peer_signal_allowed(0, &why), 1);
    CHECK_EQ_INT(peer_signal_allowed(getpid(), &why), 1);
}

TEST(peer_that_exited_is_refused)
{
    struct err why = {0};
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    CHECK(pid > 0);
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    CHECK(fd >= 0);
    /* A zombie: its namespaces are gone already. */
    siginfo_t si;
    CHECK_EQ_INT(waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT), 0);
    CHECK_EQ_INT(peer_classify(pid, fd, &why), -1);
    CHECK_CONTAINS(why.msg, "unable to identify");
    /* Reaped: the pidfd still pins it, the verdict stays a refusal. */
    CHECK_EQ_INT(waitpid(pid, NULL, 0), pid);
    CHECK_EQ_INT(peer_classify(pid, fd, &why), -1);
    close(fd);
    CHECK_EQ_INT(peer_signal_allowed(pid, &why), 0);
}
