/* events: the notification stream. Every event gets a sequence number and
 * is kept in a bounded ring so a client that subscribes late (or
 * reconnects after a resume) can replay what it missed with "since". */
#ifndef HEARTH_EVENTS_H
#define HEARTH_EVENTS_H

#include <stddef.h>
#include <stdint.h>

struct cJSON;

#define EVENTS_RING 256

/* Takes ownership of params (an object); adds "seq", "type", "mono_ms" and
 * "time_ms", keeps it in the ring and hands the serialized notification
 * line (with trailing newline) to the sink. */
void events_emit(const char *type, struct cJSON *params);

typedef void (*events_sink_fn)(const char *line, size_t len);
void events_set_sink(events_sink_fn fn);

/* Calls fn for each kept line with seq > since, oldest first. */
void events_replay(uint64_t since, void (*fn)(void *ctx, const char *line, size_t len), void *ctx);
uint64_t events_last_seq(void);

#endif
