/* Captured output: bounds, the UTF-8 repair of log lines, the log file
 * on a full disk. */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
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

/* A full disk: the first failed line is news (one warning, one event),
 * the next ones only count; the first line that goes in again is news
 * too, and the error is gone. */
TEST(logring_full_disk_is_news_once_and_counted)
{
    char dir[] = "/tmp/hearth-logring-XXXXXX", path[64];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof(path), "%s/svc.log", dir);
    struct logring r;
    logring_init(&r, 4, path, 0, 0, getuid(), getgid());
    logring_open_file(&r);
    logring_add(&r, STREAM_STDOUT, "one", 3);
    CHECK(!logring_file_news(&r) && r.file_error[0] == 0);
    int saved = dup(r.fd), full = open("/dev/full", O_WRONLY);
    CHECK(saved >= 0 && full >= 0);
    dup2(full, r.fd);
    logring_add(&r, STREAM_STDOUT, "two", 3);
    CHECK(logring_file_news(&r));
    char want[128];
    snprintf(want, sizeof(want), "unable to write %s: %s", path, strerror(ENOSPC));
    CHECK_STR(r.file_error, want);
    for (int i = 0; i < 100; i++)
        logring_add(&r, STREAM_STDOUT, "more", 4);
    CHECK(!logring_file_news(&r));
    CHECK_EQ_INT(r.file_lost, 101);
    CHECK_EQ_INT(r.total, 102);
    dup2(saved, r.fd);
    logring_add(&r, STREAM_STDOUT, "three", 5);
    CHECK(logring_file_news(&r) && r.file_error[0] == 0);
    CHECK_EQ_INT(r.file_lost, 101);
    logring_free(&r);
    close(saved);
    close(full);
    char text[256] = {0};
    int fd = open(path, O_RDONLY);
    CHECK(fd >= 0 && read(fd, text, sizeof(text) - 1) > 0);
    close(fd);
    CHECK(strstr(text, "Z one\n") != NULL && strstr(text, "Z three\n") != NULL);
    CHECK(strstr(text, "two") == NULL);
    unlink(path);
    rmdir(dir);
}

/* A line the file took only part of is ended by a newline before the
 * next one, never run into it. The file size limit stands in for a full
 * disk: past it the kernel writes what fits, then refuses (EFBIG). */
TEST(logring_torn_line_is_ended_before_the_next)
{
    char dir[] = "/tmp/hearth-logring-XXXXXX", path[64];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof(path), "%s/svc.log", dir);
    struct logring r;
    logring_init(&r, 4, path, 0, 0, getuid(), getgid());
    logring_open_file(&r);
    logring_add(&r, STREAM_STDOUT, "first", 5);
    struct rlimit was, lim;
    CHECK(getrlimit(RLIMIT_FSIZE, &was) == 0);
    void (*old)(int) = signal(SIGXFSZ, SIG_IGN);
    lim = was;
    lim.rlim_cur = (rlim_t)r.file_size + 30; /* the stamp and a few bytes */
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    logring_add(&r, STREAM_STDOUT, "a line far longer than what is left", 35);
    CHECK(r.torn && r.file_error[0] && logring_file_news(&r));
    CHECK_EQ_INT(r.file_lost, 1);
    CHECK(setrlimit(RLIMIT_FSIZE, &was) == 0);
    signal(SIGXFSZ, old);
    logring_add(&r, STREAM_STDOUT, "next", 4);
    CHECK(!r.torn && r.file_error[0] == 0 && logring_file_news(&r));
    logring_free(&r);
    char text[256] = {0};
    int fd = open(path, O_RDONLY);
    CHECK(fd >= 0 && read(fd, text, sizeof(text) - 1) > 0);
    close(fd);
    /* "STAMP first\nSTAMP a line fa\nSTAMP next\n" (STAMP: 20 bytes): 30
     * bytes of the cut line went in, then its end, then the next line. */
    char *l2 = strchr(text, '\n'), *l3 = l2 ? strchr(l2 + 1, '\n') : NULL;
    CHECK(l2 == text + 26 && l3 == text + 26 + 1 + 30);
    if (l2 == text + 26 && l3 == text + 57) {
        CHECK(memcmp(l2 + 1 + 20, " a line fa", 10) == 0);
        CHECK_STR(l3 + 1 + 20, " next\n");
    }
    unlink(path);
    rmdir(dir);
}
