/* Captured output: bounds and the UTF-8 repair of log lines. */
#include "unit.h"

#include <stdlib.h>
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
