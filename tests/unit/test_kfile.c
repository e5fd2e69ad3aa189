#include "unit.h"

#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "kfile.h"

TEST(kfile_reads_whole_small_files_and_ends_them)
{
    char buf[64];
    /* /proc/self/stat starts with our pid. */
    CHECK(kfile_read("/proc/self/stat", buf, sizeof(buf)) > 0);
    char want[32];
    snprintf(want, sizeof(want), "%d (", (int)getpid());
    CHECK(strncmp(buf, want, strlen(want)) == 0);
    /* A buffer smaller than the file: cut, still a C string. */
    char small[4];
    CHECK_EQ_INT(kfile_read("/proc/self/stat", small, sizeof(small)), 3);
    CHECK_EQ_INT(strlen(small), 3);
    /* Missing: -1 with errno, and the buffer an empty string. */
    strcpy(buf, "stale");
    CHECK_EQ_INT(kfile_read("/proc/self/no-such-file", buf, sizeof(buf)), -1);
    CHECK_EQ_INT(errno, ENOENT);
    CHECK_STR(buf, "");
    CHECK_EQ_INT(kfile_read("/proc/self/stat", buf, 0), -1);
}
