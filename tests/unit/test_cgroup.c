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
