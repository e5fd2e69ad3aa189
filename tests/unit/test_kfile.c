#include "unit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
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

TEST(kfile_write_replaces_whole_and_reports_failures)
{
    char path[] = "/tmp/hearth-kfile-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    CHECK(write(fd, "max 100000\n", 11) == 11);
    close(fd);
    /* Rewritten whole, as ">" does: no tail of the longer old value. */
    CHECK_EQ_INT(kfile_write(path, "1\n"), 0);
    char buf[32];
    CHECK_EQ_INT(kfile_read(path, buf, sizeof(buf)), 2);
    CHECK_STR(buf, "1\n");
    unlink(path);
    /* Missing: -1 with errno. */
    CHECK_EQ_INT(kfile_write("/proc/self/no-such-file", "1"), -1);
    CHECK_EQ_INT(errno, ENOENT);
    /* A write the file refuses: -1 with its errno. */
    CHECK_EQ_INT(kfile_write("/dev/full", "1"), -1);
    CHECK_EQ_INT(errno, ENOSPC);
}
