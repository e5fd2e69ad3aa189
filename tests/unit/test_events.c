/* The event envelope: seq, type and the stamps are the event's own keys;
 * a caller's field of the same name does not make a second one. */
#include "unit.h"

#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "events.h"

static char last[512];

static void keep_last(void *ctx, const char *line, size_t len)
{
    (void)ctx;
    if (len >= sizeof(last))
        len = sizeof(last) - 1;
    memcpy(last, line, len);
    last[len] = 0;
}

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

TEST(events_envelope_keys_are_not_shadowed)
{
    cJSON *p = cJSON_CreateObject();
    CHECK(p != NULL);
    if (!p)
        return;
    cJSON_AddStringToObject(p, "type", "bind");
    cJSON_AddNumberToObject(p, "seq", 0);
    cJSON_AddStringToObject(p, "target", "/home/agent");
    events_emit("mount.failed", p);
    uint64_t seq = events_last_seq();
    last[0] = 0;
    events_replay(seq - 1, keep_last, NULL);
    cJSON *m = cJSON_Parse(last);
    CHECK(m != NULL);
    if (!m)
        return;
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(m, "params");
    CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(params, "type")), "mount.failed");
    CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(params, "target")), "/home/agent");
    CHECK_EQ_INT((int64_t)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(params, "seq")),
                 (int64_t)seq);
    CHECK_EQ_INT(count(last, "\"type\""), 1);
    CHECK_EQ_INT(count(last, "\"seq\""), 1);
    cJSON_Delete(m);
}
