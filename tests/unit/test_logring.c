/* Captured output: bounds and the UTF-8 repair of log lines. */
#include "unit.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>

#include "logring.h"

TEST(logring_repairs_invalid_utf8)
{
    struct logring r;
    logring_init(&r, 4, NULL, 0, 0, 0, 0);
    const struct logline *l = logring_add(&r, STREAM_STDOUT, "ok\xff\xc0\xaf \xc3\xa9nd", 11);
    CHECK(l != NULL);
    cJSON *o = logline_json(l, "svc");
    cJSON *line = cJSON_GetObjectItemCaseSensitive(o, "line");
    CHECK_STR(line ? line->valuestring : NULL, "ok\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd \xc3\xa9nd");
    CHECK_STR(cJSON_GetObjectItemCaseSensitive(o, "name")->valuestring, "svc");
    cJSON_Delete(o);
    logring_free(&r);
}

TEST(logring_bounded_in_lines_and_bytes)
{
    struct logring r;
    char big[LOGRING_LINE_MAX + 100];
    memset(big, 'x', sizeof(big));
    logring_init(&r, 1000, NULL, 0, 0, 0, 0);
    for (int i = 0; i < 1000; i++)
        logring_add(&r, STREAM_STDERR, big, sizeof(big));
    /* Each line is cut at LOGRING_LINE_MAX; the ring keeps at most 512 KiB. */
    CHECK(r.bytes <= LOGRING_MAX_BYTES);
    CHECK_EQ_INT(r.count, LOGRING_MAX_BYTES / LOGRING_LINE_MAX);
    CHECK_EQ_INT(r.total, 1000);
    cJSON *tail = logring_tail_json(&r, 3);
    CHECK_EQ_INT(cJSON_GetArraySize(tail), 3);
    cJSON_Delete(tail);
    logring_free(&r);
}

/* A line in the service's log file: a UTC stamp to the second, a space,
 * the text, a newline. */
TEST(logring_file_lines_carry_a_utc_stamp)
{
    char dir[] = "/tmp/hearth-logring-XXXXXX", path[64], text[128] = {0};
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof(path), "%s/svc.log", dir);
    struct logring r;
    logring_init(&r, 4, path, 0, 0, getuid(), getgid());
    logring_open_file(&r);
    logring_add(&r, STREAM_STDOUT, "hello", 5);
    logring_free(&r);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    if (f) {
        CHECK(fgets(text, sizeof(text), f) != NULL);
        fclose(f);
    }
    /* 2026-12-05T00:11:45Z hello */
    CHECK_EQ_INT(strlen(text), 27);
    CHECK(text[4] == '-' && text[7] == '-' && text[10] == 'T' && text[13] == ':' && text[16] == ':');
    CHECK_STR(text + 19, "Z hello\n");
    for (int i = 0; i < 19; i++)
        CHECK(i == 4 || i == 7 || i == 10 || i == 13 || i == 16 || (text[i] >= '0' && text[i] <= '9'));
    unlink(path);
    rmdir(dir);
}

/* Lines hearth's own log carries matching needle, in the text of fd. */
static int count_in(int fd, const char *needle)
{
    char buf[65536];
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    int c = 0;
    buf[n > 0 ? n : 0] = 0;
    for (const char *p = buf; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        c++;
    return c;
}

TEST(logring_full_disk_reported_once_per_spell)
{
    /* A file whose every write fails with ENOSPC: /dev/full in place of
     * the log file. A service writing on through a full disk costs one
     * warning for the spell and one line when the file takes lines
     * again, not one line of hearth's log per line of its own. */
    char dir[] = "/tmp/hearth-logring-XXXXXX", path[64], cap[80];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof(path), "%s/svc.log", dir);
    snprintf(cap, sizeof(cap), "%s/hearth.log", dir);
    struct logring r;
    logring_init(&r, 8, path, 0, 0, getuid(), getgid());
    logring_open_file(&r);
    CHECK(r.fd >= 0);
    int full = open("/dev/full", O_WRONLY | O_CLOEXEC);
    CHECK(full >= 0);
    int good = r.fd;
    r.fd = full;
    int logfd = open(cap, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int saved = dup(2);
    CHECK(logfd >= 0 && saved >= 0);
    dup2(logfd, 2);
    for (int i = 0; i < 1000; i++)
        logring_add(&r, STREAM_STDOUT, "a line", 6);
    CHECK(r.unwritten == 1000);
    r.fd = good; /* space again */
    logring_add(&r, STREAM_STDOUT, "back", 4);
    logring_add(&r, STREAM_STDOUT, "on", 2);
    dup2(saved, 2);
    close(saved);
    CHECK_EQ_INT(count_in(logfd, "unable to write"), 1);
    CHECK_EQ_INT(count_in(logfd, "written again; 1000 lines were not written"), 1);
    CHECK(r.unwritten == 0);
    /* The ring kept the newest lines throughout. */
    CHECK_EQ_INT((int)r.count, 8);
    CHECK_EQ_INT((int)r.total, 1002);
    close(logfd);
    close(full);
    logring_free(&r);
    char text[64] = {0};
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    if (f) {
        CHECK(fgets(text, sizeof(text), f) != NULL);
        fclose(f);
    }
    CHECK(strstr(text, "Z back\n") != NULL);
    unlink(path);
    unlink(cap);
    rmdir(dir);
}
