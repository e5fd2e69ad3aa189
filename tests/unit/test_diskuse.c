/* The disk.low figure and the resume file's pause estimate. */
#include "unit.h"

#include <stdint.h>

#include "diskuse.h"
#include "resumefile.h"

TEST(diskuse_percent_as_df_and_inodes)
{
    /* 1000 blocks, 600 free, 500 available to users: 400 / 900 used. */
    double p = diskuse_percent(1000, 600, 500, 0, 0);
    CHECK(p > 44.44 && p < 44.45);
    CHECK(diskuse_percent(100, 100, 100, 10, 10) == 0);
    CHECK(diskuse_percent(100, 0, 0, 0, 0) == 100);
    /* An empty filesystem of size 0 (no blocks at all) is 0%, not NaN. */
    CHECK(diskuse_percent(0, 0, 0, 0, 0) == 0);
    /* Inodes run out first: the larger figure counts. */
    CHECK(diskuse_percent(100, 90, 90, 10, 0) == 100);
    CHECK(diskuse_percent(100, 10, 10, 10, 9) == 90);
    /* Inconsistent figures never go negative. */
    CHECK(diskuse_percent(10, 20, 20, 5, 9) == 0);
}

TEST(resumefile_pause_estimate)
{
    /* Frozen by the host: wall time since the freeze. */
    CHECK(resumefile_paused_ms(true, 1000, 5000, 0, 0) == 4000);
    /* Not frozen: how far the wall clock jumped against the monotonic one. */
    CHECK(resumefile_paused_ms(false, 1000, 5000, 100, 3100) == 3000);
    /* Frozen flag without a freeze time: the offset counts. */
    CHECK(resumefile_paused_ms(true, 0, 5000, 100, 600) == 500);
    /* A clock set back is no negative pause. */
    CHECK(resumefile_paused_ms(false, 0, 5000, 3000, 100) == 0);
    CHECK(resumefile_paused_ms(true, 9000, 5000, 0, 0) == 0);
}
