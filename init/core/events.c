#include "events.h"

#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "jsonout.h"
#include "log.h"
#include "redact.h"
#include "timebase.h"

struct kept {
    uint64_t seq;
    char *line;
    size_t len;
};

static struct kept ring[EVENTS_RING];
static uint64_t next_seq = 1;
static events_sink_fn sink;

void events_set_sink(events_sink_fn fn) { sink = fn; }
uint64_t events_last_seq(void) { return next_seq - 1; }

void events_emit(const char *type, cJSON *params)
{
    cJSON *msg;
    char *text;
    size_t len;
    struct kept *k;
    uint64_t seq;

    if (!params)
        params = cJSON_CreateObject();
    if (!params) {
        log_error("events: unable to emit event %s: out of memory", type);
        return;
    }
    /* Events are kept and replayed: no secret may enter them. */
    redact_json(params);
    seq = next_seq++;
    /* seq and type first, so a human reading the stream sees them first. */
    cJSON *p = cJSON_CreateObject();
    msg = cJSON_CreateObject();
    if (!p || !msg) {
        cJSON_Delete(p);
        cJSON_Delete(msg);
        cJSON_Delete(params);
        log_error("events: unable to emit event %s: out of memory", type);
        return;
    }
    cJSON_AddNumberToObject(p, "seq", (double)seq);
    cJSON_AddStringToObject(p, "type", type);
    cJSON_AddNumberToObject(p, "mono_ms", (double)mono_ms());
    cJSON_AddNumberToObject(p, "time_ms", (double)wall_ms());
    while (params->child) {
        cJSON *c = cJSON_DetachItemViaPointer(params, params->child);
        /* The envelope's keys are the event's own: a caller's field of the
         * same name would make a second key that readers resolve
         * differently, so it is dropped (and named, as it is a bug). */
        if (!c->string || cJSON_GetObjectItemCaseSensitive(p, c->string)) {
            log_error("event %s: field %s dropped, it would shadow the event's own", type,
                      c->string ? c->string : "(unnamed)");
            cJSON_Delete(c);
            continue;
        }
        cJSON_AddItemToObject(p, c->string, c);
    }
    cJSON_Delete(params);
    cJSON_AddStringToObject(msg, "jsonrpc", "2.0");
    cJSON_AddStringToObject(msg, "method", "event");
    cJSON_AddItemToObject(msg, "params", p);
    text = jsonout_print(msg);
    cJSON_Delete(msg);
    if (!text) {
        log_error("events: unable to emit event %s: out of memory", type);
        return;
    }
    /* Copied out: cJSON's text belongs to its allocator (jsonalloc). */
    len = strlen(text);
    char *line = malloc(len + 2);
    if (line)
        memcpy(line, text, len);
    cJSON_free(text);
    if (!line) {
        log_error("events: unable to emit event %s: out of memory", type);
        return;
    }
    line[len++] = '\n';
    line[len] = 0;

    k = &ring[seq % EVENTS_RING];
    free(k->line);
    k->seq = seq;
    k->line = line;
    k->len = len;
    if (sink)
        sink(line, len);
}

void events_replay(uint64_t since, void (*fn)(void *ctx, const char *line, size_t len), void *ctx)
{
    uint64_t first = next_seq > EVENTS_RING ? next_seq - EVENTS_RING : 1;
    if (since + 1 > first)
        first = since + 1;
    for (uint64_t s = first; s < next_seq; s++) {
        struct kept *k = &ring[s % EVENTS_RING];
        if (k->seq == s && k->line)
            fn(ctx, k->line, k->len);
    }
}
