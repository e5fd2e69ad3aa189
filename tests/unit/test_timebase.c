/* The wall clock as RFC 3339 UTC text, as the resume file and the
 * rotated service logs write it. */
#include "unit.h"

#include <stdio.h>
#include <time.h>

#include "timebase.h"

TEST(utc_text_formats_seconds_and_millis)
{
    char b[40];
    CHECK_EQ_INT(timebase_utc_text(0, false, b, sizeof(b)), 20);
    CHECK_STR(b, "1970-01-01T00:00:00Z");
    CHECK_EQ_INT(timebase_utc_text(1796429505123LL, true, b, sizeof(b)), 24);
    CHECK_STR(b, "2026-12-05T00:11:45.123Z");
    /* Millis are cut off, not rounded, in the seconds form. */
    timebase_utc_text(1796429505999LL, false, b, sizeof(b));
    CHECK_STR(b, "2026-12-05T00:11:45Z");
    /* A leap day, and millis padded to three digits. */
    timebase_utc_text(951782400007LL, true, b, sizeof(b));
    CHECK_STR(b, "2000-02-29T00:00:00.007Z");
    /* Before the epoch the second rounds down and millis stay 0-999. */
    timebase_utc_text(-1, true, b, sizeof(b));
    CHECK_STR(b, "1969-12-31T23:59:59.999Z");
}

/* hearth's own calendar against the C library's gmtime_r and timegm, a
 * day apart and at odd seconds, across leap years, century years and
 * 400-year eras on both sides of the epoch. */
TEST(utc_calendar_agrees_with_gmtime_and_timegm)
{
    char mine[40], libc[40];
    int checked = 0;
    for (int64_t s = -62135596800LL; s < 253402300800LL; s += 86400LL * 7 + 3607) {
        time_t t = (time_t)s;
        struct tm tm;
        CHECK(gmtime_r(&t, &tm) != NULL);
        snprintf(libc, sizeof(libc), "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900,
                 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
        timebase_utc_text(s * 1000, false, mine, sizeof(mine));
        if (strcmp(mine, libc) != 0) {
            CHECK_STR(mine, libc);
            break;
        }
        if (timebase_utc_seconds(tm.tm_year + 1900LL, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                                 tm.tm_min, tm.tm_sec) != s) {
            CHECK_EQ_INT(timebase_utc_seconds(tm.tm_year + 1900LL, tm.tm_mon + 1, tm.tm_mday,
                                              tm.tm_hour, tm.tm_min, tm.tm_sec) == s, 1);
            break;
        }
        checked++;
    }
    CHECK(checked > 500000);
    /* Outside the years four digits hold: "?". */
    CHECK_EQ_INT(timebase_utc_text(253402300800000LL, false, mine, sizeof(mine)), 1);
    CHECK_STR(mine, "?");
    CHECK_EQ_INT(timebase_utc_text(-62167219201000LL, false, mine, sizeof(mine)), 1);
    CHECK_STR(mine, "?");
    CHECK_EQ_INT(timebase_utc_seconds(2024, 2, 29, 12, 0, 0), 1709208000LL);
}

TEST(utc_text_stays_within_the_buffer)
{
    char b[12];
    memset(b, 'x', sizeof(b));
    /* The length it would have had, and a terminated prefix. */
    CHECK_EQ_INT(timebase_utc_text(0, true, b, 8), 24);
    CHECK_STR(b, "1970-01");
    CHECK(b[8] == 'x');
}
