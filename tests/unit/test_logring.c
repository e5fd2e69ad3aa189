/* Captured output: bounds and the UTF-8 repair of log lines. */
#include "unit.h"

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
