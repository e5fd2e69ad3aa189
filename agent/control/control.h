/* control: the host's way in. Listeners (unix, vsock, serial), one client
 * per connection with bounded input and output, peer checks, in-order
 * replies, and event fan-out to subscribers. Nothing here blocks: a slow
 * or dead client is throttled, then dropped. */
#ifndef HEARTH_CONTROL_H
#define HEARTH_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

#define CONTROL_MAX_CLIENTS 128
/* Links to hearth's own role processes (control_attach) at once. */
#define CONTROL_MAX_INTERNAL 8
#define CLIENT_OUT_SOFT (256 * 1024)     /* stop reading requests above this */
#define CLIENT_OUT_MAX (8 * 1024 * 1024) /* drop the client above this */
#define CLIENT_STALL_MS 10000            /* drop a client that reads nothing this long */
/* Request bytes all clients together may buffer beyond one 64 KiB read
 * each: 128 clients with a 1 MiB line apiece would otherwise hold 136 MiB. */
#define CONTROL_INPUT_BUDGET (8 * 1024 * 1024)
/* Reply and notification bytes all clients together may queue. A 256 MiB
 * guest cannot afford 128 clients x CLIENT_OUT_MAX (1 GiB): past this,
 * followers are dropped (the one furthest behind first) with a "dropped"
 * notification, and followed services are back-pressured through their
 * pipes. Input and output budgets together bound hearth's client
 * buffers to 24 MiB. */
#define CONTROL_OUTPUT_BUDGET (16 * 1024 * 1024)

struct client;

/* What answers one request line of client c: the reply line (*outlen
 * bytes; NULL for a notification), buf when it fits in cap bytes, else
 * malloc'd for the caller to free. main.c hands down methods_handle_line
 * before control_start, so the control plane calls no method by name. */
typedef char *(*control_line_fn)(struct client *c, const char *line, size_t len, size_t *outlen,
                                 char *buf, size_t cap);
void control_set_handler(control_line_fn fn);

/* Opens every configured listener; one that cannot open yet (vsock before
 * its module, a serial port before its device) is retried in the
 * background. Returns the number of listeners open now. */
int control_start(const struct config *cfg);
/* Closes every listener and client (before exit or power-off); unix
 * socket files are removed. */
void control_stop(void);
/* Flushes what can be written without blocking to every client. */
void control_flush(void);
/* SIGIO arrived: a parked virtio-serial port may have a host again. */
void control_serial_kick(void);

size_t control_client_count(void);
/* Starts sending events to c, first replaying those with seq > since. */
void control_subscribe(struct client *c, uint64_t since);
/* The same, but only once the reply to the current request is queued, so
 * the client sees its reply before the replayed events. */
void control_subscribe_after_reply(struct client *c, uint64_t since);
/* Streams the output of service index to c as "log" notifications. */
void control_follow(struct client *c, size_t index);
/* Clients subscribed to events now. */
size_t control_subscriber_count(void);
/* Sends a notification line (with newline) to every subscriber. */
void control_broadcast(const char *line, size_t len);
/* Deferred replies: a handler that has to wait (a freeze waiting for the
 * kernel) calls control_defer(c) and returns 0 without a result. Later
 * requests of that client wait, so replies stay in order. The reply goes
 * out with control_complete(ticket, ...); a client gone by then is
 * skipped. result is consumed; err is used when result is NULL. */
uint64_t control_defer(struct client *c);
bool control_is_deferring(const struct client *c);
/* The line handler hands over the request id (a copy; NULL for a
 * notification, whose reply is then dropped). */
void control_defer_id(struct client *c, struct cJSON *id);
struct rpc_error;
void control_complete(uint64_t ticket, struct cJSON *result, struct rpc_error *err);
/* The same with a result already printed as one JSON value (len bytes),
 * sent as it is. false when out of memory (nothing sent: complete it
 * again with an error). */
bool control_complete_text(uint64_t ticket, const char *json, size_t len);
/* fn(c) runs when any client goes away (besides the stream hooks'
 * closed); c must not be used after the call. At most 4 such hooks;
 * false when full. */
bool control_on_close(void (*fn)(struct client *c));

/* ---- one client's own stream (exec output) ---- */
/* Queues a line (newline included) for c alone. -1 when c is gone or
 * was dropped for it (its queue full, the output budget spent). */
int control_send(struct client *c, const char *line, size_t len);
/* 1 when c's queue is under CLIENT_OUT_SOFT; 0 when not (the room hook
 * then runs once it is); -1 when c is gone or going. */
int control_room(struct client *c);
/* room: c's queue fell under CLIENT_OUT_SOFT after control_room said 0.
 * closed: c is going away; it must not be used after the call. */
void control_set_stream_hooks(void (*room)(struct client *c), void (*closed)(struct client *c));
/* ---- end of the stream API ---- */

/* ---- links of hearth's own ---- */
/* A client on a descriptor hearth made itself: one end of a socket pair
 * whose other end a role process of hearth's holds (the envd endpoint,
 * agent/envd/envd.c). It is not one of the host's CONTROL_MAX_CLIENTS, is
 * never evicted as idle, and may call only the methods listed in
 * methods (NULL-terminated, kept by the caller; any other is answered
 * -32601 as unknown). NULL when out of memory or every slot is taken. */
struct client *control_attach(int fd, const char *peer, const char *const *methods);
/* Whether c may call method (false only for a link's unlisted ones). */
bool control_may_call(const struct client *c, const char *method);
/* Ends c now: its descriptor is closed, its sessions end as for any
 * client that goes. */
void control_detach(struct client *c);
/* ---- end of the links ---- */

/* Describes the client's transport and peer for logs ("unix uid=0 pid=12"). */
const char *control_client_peer(const struct client *c);
/* A JSON array describing the listeners and their state. */
struct cJSON *control_listeners_json(void);

#endif
