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

/* The calendar by hand, neither strftime nor gmtime_r/timegm: those bring
 * musl's time-zone code and its tables into a static binary, for dates
 * that are always UTC. Days are counted in 400-year eras of 146,097 days
 * whose years start in March, so that the leap day ends a year. */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;                                  /* [0, 399] */
    int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1; /* [0, 365] */
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;          /* [0, 146096] */
    return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

int64_t timebase_utc_seconds(int64_t year, int month, int day, int hour, int min, int sec)
{
    return days_from_civil(year, month, day) * 86400 + hour * 3600 + min * 60 + sec;
}

int timebase_utc_text(int64_t ms, bool millis, char *buf, size_t len)
{
    /* Floor division, so a time before the epoch keeps 0-999 millis and
     * 0-86399 seconds of its day. */
    int64_t frac = ms % 1000;
    if (frac < 0)
        frac += 1000;
    int64_t s = (ms - frac) / 1000, days = s / 86400, sod = s % 86400;
    if (sod < 0) {
        sod += 86400;
        days--;
    }
    int64_t y;
    int mo, d;
    civil_from_days(days, &y, &mo, &d);
    if (y < 0 || y > 9999)
        return snprintf(buf, len, "?");
    int h = (int)(sod / 3600), mi = (int)(sod / 60 % 60), se = (int)(sod % 60);
    if (millis)
        return snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", (int)y, mo, d, h, mi, se,
                        (int)frac);
    return snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02dZ", (int)y, mo, d, h, mi, se);
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
