#include "timebase.h"

#include <stdio.h>
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

/* By hand, not strftime: strftime brings musl's time-zone code (some
 * 6 KiB of a static binary) for text that is always UTC. */
int timebase_utc_text(int64_t ms, bool millis, char *buf, size_t len)
{
    /* Floor division, so a time before the epoch keeps 0-999 millis. */
    int64_t frac = ms % 1000;
    if (frac < 0)
        frac += 1000;
    time_t s = (time_t)((ms - frac) / 1000);
    struct tm tm;
    int n;
    if (!gmtime_r(&s, &tm))
        n = snprintf(buf, len, "?");
    else if (millis)
        n = snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)frac);
    else
        n = snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
    return n;
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
