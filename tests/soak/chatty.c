/* The soak's chatty service: writes RATE lines a second to stdout, in a
 * burst every 50 ms, for ever (tests/soak/soak.py counts what hearth
 * captured). Each line is about 100 bytes and numbered. After a pause
 * (a freeze, a blocked pipe) it does not catch up: a month's log volume
 * is spread over the run, not poured out after each thaw.
 *
 *   chatty RATE
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define TICK_NS 50000000L

int main(int argc, char **argv)
{
    long rate = argc > 1 ? atol(argv[1]) : 100;
    if (rate <= 0)
        rate = 1;
    /* Per tick, carrying the remainder so that the rate holds. */
    long owed_milli = 0;
    unsigned long long n = 0;
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    for (;;) {
        owed_milli += rate * 50;
        long k = owed_milli / 1000;
        owed_milli %= 1000;
        for (long i = 0; i < k; i++)
            printf("chatty %012llu the quick brown fox jumps over the lazy dog, "
                   "a month of output in an hour\n", n++);
        fflush(stdout);
        next.tv_nsec += TICK_NS;
        if (next.tv_nsec >= 1000000000L) {
            next.tv_nsec -= 1000000000L;
            next.tv_sec++;
        }
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        /* Behind by more than a second: start the schedule afresh. */
        if (now.tv_sec > next.tv_sec + 1)
            next = now;
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
    }
}
