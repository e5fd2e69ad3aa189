/* The wall clock as RFC 3339 UTC text, as the resume file and the
 * rotated service logs write it. */
#include "unit.h"

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

TEST(utc_text_stays_within_the_buffer)
{
    char b[12];
    memset(b, 'x', sizeof(b));
    /* The length it would have had, and a terminated prefix. */
    CHECK_EQ_INT(timebase_utc_text(0, true, b, 8), 24);
    CHECK_STR(b, "1970-01");
    CHECK(b[8] == 'x');
}
