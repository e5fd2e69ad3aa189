/* timebase: hearth's clocks and its timer grid. Every timer, timeout and
 * uptime counts on CLOCK_MONOTONIC, read in one place (mono_ns), so a
 * wall-clock step after a resume changes nothing; the wall clock is read
 * for reporting only. Depends on nothing of hearth's. The two clocks'
 * readers, called everywhere, keep short names (mono_ns, wall_ms). */
#ifndef HEARTH_TIMEBASE_H
#define HEARTH_TIMEBASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Monotonic nanoseconds (CLOCK_MONOTONIC), and the same in coarser units. */
int64_t mono_ns(void);
static inline int64_t mono_us(void) { return mono_ns() / 1000; }
static inline int64_t mono_ms(void) { return mono_ns() / 1000000; }
/* Wall-clock milliseconds since the epoch, for reporting only. */
int64_t wall_ms(void);

/* ms (wall-clock milliseconds since the epoch) as RFC 3339 UTC text into
 * buf: "2026-12-04T22:11:45Z", or "2026-12-04T22:11:45.123Z" with millis.
 * Returns the length written (snprintf's: at most len - 1 is stored), or
 * writes "?" and returns 1 for a time outside the years 0-9999. */
int timebase_utc_text(int64_t ms, bool millis, char *buf, size_t len);

/* Seconds since the epoch of a UTC date and time (the proleptic Gregorian
 * calendar, month 1-12), as timegm computes them; fields out of their
 * range are not normalised, the caller checks them. */
int64_t timebase_utc_seconds(int64_t year, int month, int day, int hour, int min, int sec);

/* Seconds until the next multiple of period_ms that lies more than half a
 * period ahead, for background timers (health probes, the skills poll, the
 * clock check). Timers armed this way share a grid, so one whose period
 * divides another's fires in the same wake-up instead of its own: an idle
 * sandbox pays one wake-up per distinct instant, not one per timer. The
 * gap between two firings stays within half and one and a half periods,
 * one period on average. now is the loop's cached wall time (ev_now, in
 * seconds), which libev keeps at a fixed offset from its monotonic time
 * (re-read to within microseconds at each wake-up), so two timers aimed at
 * one grid point come due in the same wake-up; a clock step only shifts
 * the grid until each timer is next armed. */
double timebase_grid_delay(double now, int64_t period_ms);
/* Seconds until the first multiple of period_ms strictly after now +
 * after_s: a one-off deadline that may come late by up to a period, moved
 * onto the same grid (so deadlines a few milliseconds apart become one
 * wake-up, and it may fall on another timer's). after_s when period_ms is
 * not positive. */
double timebase_grid_after(double now, double after_s, int64_t period_ms);

#endif
