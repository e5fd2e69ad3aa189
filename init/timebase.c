#include "timebase.h"

#include <time.h>

int64_t mono_ns(void)
{
    struct timespec ts;
    /* Cannot fail for CLOCK_MONOTONIC on Linux with a valid pointer. */
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

double timebase_grid_delay(double now, int64_t period_ms)
{
    if (period_ms <= 0)
        return 0.;
    int64_t now_ms = (int64_t)(now * 1000.0);
    int64_t next = ((now_ms + period_ms / 2) / period_ms + 1) * period_ms;
    double d = (double)next / 1000.0 - now;
    return d > 0. ? d : 0.;
}

double timebase_grid_after(double now, double after_s, int64_t period_ms)
{
    if (period_ms <= 0)
        return after_s > 0. ? after_s : 0.;
    int64_t at_ms = (int64_t)((now + after_s) * 1000.0) + 1;
    int64_t next = (at_ms + period_ms - 1) / period_ms * period_ms;
    double d = (double)next / 1000.0 - now;
    return d > 0. ? d : 0.;
}
