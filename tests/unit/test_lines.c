#include "unit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lines.h"

struct got {
    char text[512];
    int calls;
    int stop_at;
};

static int collect(char *line, bool whole, void *ctx)
{
    struct got *g = ctx;
    size_t n = strlen(g->text);
    snprintf(g->text + n, sizeof(g->text) - n, "%s%s|", line, whole ? "" : "~");
    return ++g->calls == g->stop_at ? 7 : 0;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    fputs(text, f);
    fclose(f);
}

TEST(lines_each_splits_cuts_overlong_lines_and_stops)
{
    char path[] = "/tmp/hearth-lines-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    char buf[8];
    struct got g = {0};

    /* Lines, an empty one, a last one without its newline. */
    write_file(path, "a\nbc\n\nlast");
    CHECK_EQ_INT(lines_each(path, buf, sizeof(buf), collect, &g), 0);
    CHECK_STR(g.text, "a|bc||last|");

    /* Longer than the buffer (7 bytes and the NUL): its head once, cut,
     * and its rest never taken for lines; the next line whole. */
    memset(&g, 0, sizeof(g));
    write_file(path, "0123456789abcdefghij\nok\n1234567\n12345678");
    /* (the last: 8 bytes at the end of the file, no newline, cut too) */
    CHECK_EQ_INT(lines_each(path, buf, sizeof(buf), collect, &g), 0);
    CHECK_STR(g.text, "0123456~|ok|1234567|1234567~|");

    /* fn's non-zero return ends the walk and is returned. */
    memset(&g, 0, sizeof(g));
    g.stop_at = 2;
    write_file(path, "x\ny\nz\n");
    CHECK_EQ_INT(lines_each(path, buf, sizeof(buf), collect, &g), 7);
    CHECK_STR(g.text, "x|y|");

    /* An empty file: no call. */
    memset(&g, 0, sizeof(g));
    write_file(path, "");
    CHECK_EQ_INT(lines_each(path, buf, sizeof(buf), collect, &g), 0);
    CHECK_EQ_INT(g.calls, 0);
    unlink(path);

    /* Missing, or a buffer too small to hold a byte: -1 with errno. */
    CHECK_EQ_INT(lines_each("/proc/self/no-such-file", buf, sizeof(buf), collect, &g), -1);
    CHECK_EQ_INT(errno, ENOENT);
    CHECK_EQ_INT(lines_each("/proc/self/mountinfo", buf, 1, collect, &g), -1);
    CHECK_EQ_INT(errno, EINVAL);

    /* A kernel file longer than one read: /proc/self/mountinfo's lines
     * all start with a mount id. */
    char big[256];
    memset(&g, 0, sizeof(g));
    CHECK_EQ_INT(lines_each("/proc/self/mountinfo", big, sizeof(big), collect, &g), 0);
    CHECK(g.calls > 0);
}
