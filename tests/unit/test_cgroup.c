/* memory.events parsing for OOM reports. */
#include "unit.h"

#include <stdint.h>

#include "cgroup.h"

TEST(cgroup_oom_kills_parsed)
{
    uint64_t n = 99;
    CHECK_EQ_INT(cgroup_parse_oom_kills("low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\noom_group_kill 0\n", &n), 0);
    CHECK_EQ_INT(n, 2);
    /* oom_kill first, without a trailing newline */
    CHECK_EQ_INT(cgroup_parse_oom_kills("oom_kill 18446744073709551615", &n), 0);
    CHECK(n == UINT64_MAX);
    /* oom_group_kill is not oom_kill */
    n = 7;
    CHECK_EQ_INT(cgroup_parse_oom_kills("oom 1\noom_group_kill 4\n", &n), -1);
    CHECK_EQ_INT(n, 7);
    CHECK_EQ_INT(cgroup_parse_oom_kills("oom_kill x\n", &n), -1);
    CHECK_EQ_INT(cgroup_parse_oom_kills("oom_kill 1x\n", &n), -1);
    CHECK_EQ_INT(cgroup_parse_oom_kills("oom_kill 99999999999999999999\n", &n), -1);
    CHECK_EQ_INT(cgroup_parse_oom_kills("", &n), -1);
}

TEST(cgroup_io_stat_summed_over_devices)
{
    uint64_t r = 9, w = 9;
    CHECK_EQ_INT(cgroup_parse_io_stat("", &r, &w), 0);
    CHECK(r == 0 && w == 0);
    CHECK_EQ_INT(cgroup_parse_io_stat("253:0 rbytes=4096 wbytes=8192 rios=1 wios=2 dbytes=0 "
                                      "dios=0\n8:0 rbytes=100 wbytes=1 rios=1 wios=1\n",
                                      &r, &w), 0);
    CHECK(r == 4196 && w == 8193);
    /* dbytes is not wbytes; a key only counts at the start of a field */
    CHECK_EQ_INT(cgroup_parse_io_stat("8:0 xrbytes=5 dbytes=7 wbytes=3", &r, &w), 0);
    CHECK(r == 0 && w == 3);
    CHECK_EQ_INT(cgroup_parse_io_stat("8:0 rbytes=x wbytes=1\n", &r, &w), -1);
}
