/* clockstep: a service of tests/vm/test_identity_vm.py that steps the
 * guest's wall clock forward when told, the way a platform's agent puts
 * the clock right after a snapshot restore (the image has no shell and no
 * date). Runs as root with CAP_SYS_TIME and no seccomp filter.
 *   SIGUSR1  one step of argv[1] seconds
 *   SIGUSR2  one step of argv[2] seconds
 *   SIGHUP   two steps of argv[3] seconds, argv[4] milliseconds apart
 * Prints "ready", then "stepped +N" after each step. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t got;

static void on_signal(int sig) { got = sig; }

static void step(long long s)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    now.tv_sec += s;
    if (clock_settime(CLOCK_REALTIME, &now) < 0) {
        perror("clock_settime");
        return;
    }
    printf("stepped %+lld\n", s);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: clockstep USR1_S USR2_S HUP_S HUP_GAP_MS\n");
        return 2;
    }
    sigset_t block, none;
    sigemptyset(&block);
    sigaddset(&block, SIGUSR1);
    sigaddset(&block, SIGUSR2);
    sigaddset(&block, SIGHUP);
    sigprocmask(SIG_BLOCK, &block, &none);
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGUSR2, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    printf("ready\n");
    fflush(stdout);
    for (;;) {
        /* Signals are let in only here: none is lost between checks. */
        sigdelset(&none, SIGUSR1);
        sigdelset(&none, SIGUSR2);
        sigdelset(&none, SIGHUP);
        sigsuspend(&none);
        int sig = got;
        got = 0;
        if (sig == SIGUSR1) {
            step(atoll(argv[1]));
        } else if (sig == SIGUSR2) {
            step(atoll(argv[2]));
        } else if (sig == SIGHUP) {
            step(atoll(argv[3]));
            struct timespec gap = {atol(argv[4]) / 1000, atol(argv[4]) % 1000 * 1000000L};
            nanosleep(&gap, NULL);
            step(atoll(argv[3]));
        }
    }
}
