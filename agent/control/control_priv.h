/* control's inside, shared by its three files and by nothing else:
 *
 *   listeners.c  the transports: unix and vsock sockets (accept, peer
 *                checks, retries), virtio-serial ports (parked while no
 *                host is connected)
 *   clients.c    one client per connection: bounded input and output,
 *                the budgets over all clients, backpressure, eviction,
 *                and its sessions (event subscription, followed output)
 *   dispatch.c   requests read from a client's buffer and answered in
 *                order, deferred replies
 *
 * control.h is the public surface. */
#ifndef HEARTH_CONTROL_PRIV_H
#define HEARTH_CONTROL_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ev.h>

#include "config.h"
#include "control.h"
#include "linebuf.h"
#include "rpc.h"

#define RETRY_MIN_MS 200
#define SERIAL_RETRY_MAX_MS 2000
/* Socket clients plus the one stream of each serial listener. */
/* Socket clients, the one stream of each serial listener, and the links
 * of hearth's own role processes (control_attach). */
#define CONTROL_SLOTS (CONTROL_MAX_CLIENTS + CONFIG_MAX_LISTEN + CONTROL_MAX_INTERNAL)

struct listener {
    struct listen_spec spec;
    char name[128];           /* "unix:/run/hearth/control.sock" */
    int fd;
    ev_io io;
    ev_timer retry;
    int64_t retry_ms;
    char error[160];
    struct client *serial;    /* the one stream of a serial listener */
    bool parked;              /* serial: port open, no host connected */
    bool sigio;               /* serial: the port signals a host connecting */
    unsigned long sessions;   /* connections accepted / serial sessions begun */
};

/* A client's life, in order; it only ever moves forward. */
enum client_state {
    CLIENT_OPEN,        /* reading requests, answering them */
    CLIENT_HALF_CLOSED, /* the peer closed its side: answer what was asked, then close */
    CLIENT_CLOSING,     /* no more requests; closed once the output is flushed */
    CLIENT_EVICTED,     /* queue discarded, a "dropped" notice queued; closing */
    CLIENT_DEAD,        /* closed; freed between loop iterations */
};

struct client {
    int fd;
    enum client_state state;
    struct listener *l;
    ev_io rio, wio;           /* rio active: reading requests */
    ev_timer stall;
    struct linebuf in;
    struct bytebuf out;       /* the output queue; its cap counts in out_total */
    bool subscribed;
    uint64_t follow;          /* services whose output streams to this client */
    bool subscribe_pending;   /* start the event stream after this reply */
    uint64_t subscribe_since;
    uint64_t deferred;        /* ticket of the request being answered later */
    struct cJSON *deferred_id;
    bool deferred_has_id;
    bool batch;               /* replies queue up until the read is handled */
    bool keep_fd;             /* the listener keeps the fd (a parked port) */
    bool out_midline;         /* the socket took part of a line: the rest must follow */
    char peer[96];
    struct client *next_dead;
    size_t in_counted;        /* its share of in_extra */
    int64_t last_ms;          /* monotonic ms of its connect or last bytes */
    uint64_t unread_since;    /* out_tick when its oldest unwritten output was queued */
    bool want_room;           /* a stream owner waits for room (control_room) */
    bool internal;            /* a link of hearth's own (control_attach) */
    const char *const *allowed; /* the only methods it may call; NULL: all */
};

static inline bool client_dead(const struct client *c) { return c->state == CLIENT_DEAD; }
static inline bool client_closing(const struct client *c) { return c->state >= CLIENT_CLOSING; }
static inline bool client_evicted(const struct client *c) { return c->state >= CLIENT_EVICTED; }
static inline size_t out_pending(const struct client *c) { return bytebuf_pending(&c->out); }

/* Every client, socket or serial; NULL slots are free. */
extern struct client *control_clients[CONTROL_SLOTS];
/* Socket clients only (serial streams are not counted). */
extern size_t control_nclients;
extern const struct config *control_cfg;
/* control_stop has begun: nothing is reopened. */
extern bool control_stopping;

/* ---- clients.c ---- */
void clients_start(void);
/* Drops every client and frees them at once. */
void clients_stop(void);
struct client *client_new(int fd, struct listener *l, const char *peer);
/* Moves c on to state s (never back). */
void client_set_state(struct client *c, enum client_state s);
void client_set_reading(struct client *c, bool on);
/* Writes what the socket takes now. Returns -1 when the client died. */
int client_flush(struct client *c);
/* Queues a line; -1 when the client is gone or was given up. */
int client_send(struct client *c, const char *data, size_t len);
bool client_in_account(struct client *c);
void client_drop(struct client *c, const char *why);
/* Refuses c for good: the error as its last line (id null), then closed
 * once that is written. */
void client_close_with_error(struct client *c, int code, const char *message);
bool clients_evict_idle(void);

/* What the files above hand clients.c (control_start, once), so that
 * no call runs up from it: lines answers the requests buffered in c, as
 * far as its output allows (dispatch.c); retry reopens a listener's
 * port and serial_park waits for a virtio-serial port's host to come
 * back (listeners.c). */
struct client_hooks {
    void (*lines)(struct client *c);
    void (*retry)(struct listener *l, int64_t max_ms);
    void (*serial_park)(struct listener *l);
};
void clients_set_hooks(const struct client_hooks *h);

/* ---- dispatch.c ---- */
void dispatch_lines(struct client *c);

/* ---- listeners.c ---- */
void listener_retry(struct listener *l, int64_t max_ms);
void listener_serial_park(struct listener *l);

#endif
