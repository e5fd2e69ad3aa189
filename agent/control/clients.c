/* control clients: one per connection. Input is bounded per client and
 * over all clients (CONTROL_INPUT_BUDGET), output likewise
 * (CLIENT_OUT_MAX, CONTROL_OUTPUT_BUDGET); a client that stops reading is
 * throttled, then evicted with a "dropped" notice. Its sessions live
 * here too: the event subscription and the services whose output it
 * follows. */
#include "control_priv.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>

#include "activity.h"
#include "events.h"
#include "hearth.h"
#include "jsonout.h"
#include "log.h"
#include "logring.h"
#include "service.h"

#define READ_CHUNK 65536

struct client *control_clients[CONTROL_SLOTS];
size_t control_nclients;
const struct config *control_cfg;
bool control_stopping;

/* Input buffer bytes beyond the first chunk, over all clients: bounded by
 * CONTROL_INPUT_BUDGET. */
static size_t in_extra;
/* Output queue bytes allocated over all clients: bounded by
 * CONTROL_OUTPUT_BUDGET. */
static size_t out_total;
/* A counter, not a clock: it only has to order the clients by how long
 * their output has waited, and costs no syscall on the reply path. */
static uint64_t out_tick;

static struct client *graveyard;
static ev_prepare reap_prepare;

static void log_sink(const char *service, size_t index, const struct logline *l);
static bool log_full(size_t index);
static void client_evict(struct client *c, const char *reason, const char *why);

struct replay_ctx {
    struct client *c;
};

void client_set_state(struct client *c, enum client_state s)
{
    if (s > c->state)
        c->state = s;
}

size_t control_client_count(void) { return control_nclients; }

const char *control_client_peer(const struct client *c) { return c->peer; }

/* Clients are freed only between loop iterations, so no callback ever
 * touches a freed client while walking lists or handling a request. */
static void reap_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
    while (graveyard) {
        struct client *c = graveyard;
        graveyard = c->next_dead;
        linebuf_free(&c->in);
        free(c);
    }
}

/* Set by control_start before any client exists. */
static struct client_hooks hooks;

void clients_set_hooks(const struct client_hooks *h)
{
    hooks = *h;
}

static void (*stream_room_hook)(struct client *c);
static void (*stream_closed_hook)(struct client *c);
/* Other owners of work on a client's behalf (files.* children). */
static void (*close_hooks[4])(struct client *c);
static size_t close_hooks_n;

static bool is_follower(const struct client *c)
{
    return c->follow || c->subscribed || c->subscribe_pending;
}

/* Replaces c's queue with nb (freeing the old one), keeping out_total in
 * step. */
static void out_replace(struct client *c, struct bytebuf nb)
{
    out_total = out_total - c->out.cap + nb.cap;
    bytebuf_release(&c->out);
    c->out = nb;
}

/* Gives c's queue storage back. */
static void out_release(struct client *c)
{
    out_replace(c, (struct bytebuf){0});
}

/* Grows c's queue to cap bytes, keeping out_total in step; -1 when
 * memory is short (the queue as it was). */
static int out_resize(struct client *c, size_t cap)
{
    size_t old = c->out.cap;
    if (bytebuf_resize(&c->out, cap) < 0)
        return -1;
    out_total = out_total - old + cap;
    return 0;
}

void client_set_reading(struct client *c, bool on)
{
    /* The read watcher's state is the client's "reading". */
    if (client_dead(c) || on == (ev_is_active(&c->rio) != 0))
        return;
    if (on)
        ev_io_start(H.loop, &c->rio);
    else
        ev_io_stop(H.loop, &c->rio);
}

/* Writes what the socket takes now. Returns -1 when the client died. */
int client_flush(struct client *c)
{
    while (out_pending(c) > 0) {
        ssize_t n = write(c->fd, bytebuf_head(&c->out), out_pending(c));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                break;
            client_drop(c, strerror(errno));
            return -1;
        }
        c->out.off += (size_t)n;
        c->out_midline = c->out.data[c->out.off - 1] != '\n';
        c->unread_since = ++out_tick;
        ev_timer_again(H.loop, &c->stall);
    }
    if (c->follow && out_pending(c) < CLIENT_OUT_SOFT)
        service_output_resume(); /* a no-op unless some service waits for room */
    if (out_pending(c) == 0) {
        c->out.off = c->out.len = 0;
        ev_io_stop(H.loop, &c->wio);
        ev_timer_stop(H.loop, &c->stall);
        /* Give back a large buffer once a big reply has gone out. */
        if (c->out.cap > CLIENT_OUT_SOFT)
            out_release(c);
        if (client_closing(c)) {
            client_drop(c, NULL);
            return -1;
        }
    } else {
        ev_io_start(H.loop, &c->wio);
        if (!ev_is_active(&c->stall))
            ev_timer_again(H.loop, &c->stall);
    }
    if (c->want_room && out_pending(c) < CLIENT_OUT_SOFT && stream_room_hook) {
        c->want_room = false;
        stream_room_hook(c);
    }
    return client_dead(c) ? -1 : 0;
}

/* Makes room for need more queue bytes under CONTROL_OUTPUT_BUDGET.
 * First the empty buffers other clients keep for their next reply (up to
 * CLIENT_OUT_SOFT each, so 128 idle clients could otherwise hold the
 * budget). Then followers with output waiting, the one whose output has
 * waited longest first: a stream can be resumed with logs.read or
 * events.subscribe "since", a reply to a plain request cannot be asked
 * for again. Only when no follower holds anything is c itself (whose
 * queue this is) given up. Returns false when c was dropped. */
static bool out_reserve(struct client *c, size_t need)
{
    for (size_t i = 0; i < CONTROL_SLOTS; i++) {
        struct client *f = control_clients[i];
        if (out_total + need <= CONTROL_OUTPUT_BUDGET)
            return true;
        if (f && f != c && !client_dead(f) && f->out.cap && out_pending(f) == 0)
            out_release(f);
    }
    while (out_total + need > CONTROL_OUTPUT_BUDGET) {
        struct client *victim = NULL;
        for (size_t i = 0; i < CONTROL_SLOTS; i++) {
            struct client *f = control_clients[i];
            if (!f || client_dead(f) || client_evicted(f) || !is_follower(f) || out_pending(f) == 0)
                continue;
            if (!victim || f->unread_since < victim->unread_since)
                victim = f;
        }
        if (!victim)
            victim = c;
        char why[128];
        snprintf(why, sizeof(why), "output of all clients over %d bytes%s",
                 CONTROL_OUTPUT_BUDGET, victim == c ? "" : " (furthest behind of the followers)");
        client_evict(victim, "output_budget", why);
        if (victim == c)
            return false;
    }
    return true;
}

/* Queues a line. A client whose queue would pass CLIENT_OUT_MAX is not
 * reading: it is dropped rather than allowed to grow hearth's memory. */
int client_send(struct client *c, const char *data, size_t len)
{
    if (client_dead(c) || client_evicted(c))
        return -1;
    if (out_pending(c) + len > CLIENT_OUT_MAX) {
        client_evict(c, "queue_full", "output queue full (client not reading)");
        return -1;
    }
    if (out_pending(c) == 0)
        c->unread_since = ++out_tick;
    if (bytebuf_room(&c->out) < len) {
        bytebuf_compact(&c->out);
        if (bytebuf_room(&c->out) < len) {
            /* CLIENT_OUT_MAX above bounds it; the budget below bounds all. */
            size_t ncap = bytebuf_grown_cap(c->out.cap, 4096, c->out.len + len, SIZE_MAX);
            if (!out_reserve(c, ncap - c->out.cap))
                return -1;
            if (out_resize(c, ncap) < 0) {
                client_drop(c, "out of memory");
                return -1;
            }
        }
    }
    bytebuf_put(&c->out, data, len);
    /* Write at once when nothing is queued ahead: the common case costs no
     * extra loop iteration. While a read's requests are being answered the
     * write waits for the last of them, so pipelined requests get their
     * replies in one write instead of one each. */
    if (out_pending(c) == len && !c->batch)
        return client_flush(c);
    return 0;
}

/* Brings c's share of in_extra up to date with its buffer; false when
 * that buffer is above one chunk and the total is over the budget. */
bool client_in_account(struct client *c)
{
    size_t extra = c->in.b.cap > LINEBUF_CHUNK ? c->in.b.cap - LINEBUF_CHUNK : 0;
    in_extra = in_extra - c->in_counted + extra;
    c->in_counted = extra;
    return extra == 0 || in_extra <= CONTROL_INPUT_BUDGET;
}

void client_drop(struct client *c, const char *why)
{
    if (client_dead(c))
        return;
    client_set_state(c, CLIENT_DEAD);
    in_extra -= c->in_counted;
    c->in_counted = 0;
    /* Nothing is written to a dead client: its queue is freed now, so
     * the budget it held is free for the clients still here. */
    out_release(c);
    if (why)
        log_info("control client %s dropped: %s", c->peer, why);
    else
        log_debug("control client %s closed", c->peer);
    ev_io_stop(H.loop, &c->rio);
    ev_io_stop(H.loop, &c->wio);
    ev_timer_stop(H.loop, &c->stall);
    if (!c->keep_fd)
        close(c->fd);
    cJSON_Delete(c->deferred_id);
    c->deferred_id = NULL;
    c->deferred = 0;
    for (size_t i = 0; i < CONTROL_SLOTS; i++)
        if (control_clients[i] == c)
            control_clients[i] = NULL;
    if (c->l && c->l->serial == c) {
        c->l->serial = NULL;
        if (c->keep_fd) {
            /* The host hung up: the port stays open for its return. */
        } else {
            /* A read error: the port is reopened. */
            c->l->fd = -1;
            if (!control_stopping)
                hooks.retry(c->l, SERIAL_RETRY_MAX_MS);
        }
    } else if (!c->internal) {
        control_nclients--;
    }
    if (stream_closed_hook)
        stream_closed_hook(c);
    for (size_t i = 0; i < close_hooks_n; i++)
        close_hooks[i](c);
    c->next_dead = graveyard;
    graveyard = c;
    if (c->follow)
        service_output_resume(); /* a service may have waited for c alone */
}

/* Drops a client whose queue cannot grow, telling it why first: the
 * queue is discarded (except the rest of a line the socket has begun, so
 * the notice starts a line of its own) and replaced by one "dropped"
 * notification; the client is closed once that is written, or by the
 * stall timer. Its memory is given back at once. */
static void client_evict(struct client *c, const char *reason, const char *why)
{
    char note[384];
    size_t keep = 0;

    if (client_dead(c) || client_evicted(c))
        return;
    if (c->out_midline && out_pending(c) > 0) {
        const char *nl = memchr(bytebuf_head(&c->out), '\n', out_pending(c));
        keep = nl ? (size_t)(nl - bytebuf_head(&c->out)) + 1 : out_pending(c);
    }
    size_t discarded = out_pending(c) - keep;
    int n = snprintf(note, sizeof(note),
                     "{\"jsonrpc\":\"2.0\",\"method\":\"dropped\",\"params\":{\"reason\":\"%s\","
                     "\"message\":\"%s\",\"discarded_bytes\":%zu}}\n",
                     reason, why, discarded);
    if (n < 0 || (size_t)n >= sizeof(note)) {
        client_drop(c, why);
        return;
    }
    /* The small buffer first, then the big one freed: a failed malloc
     * only means the notice is lost, never that memory stays held. */
    struct bytebuf nb = {0};
    if (bytebuf_resize(&nb, keep + (size_t)n) < 0) {
        client_drop(c, why);
        return;
    }
    if (keep)
        bytebuf_put(&nb, bytebuf_head(&c->out), keep);
    bytebuf_put(&nb, note, (size_t)n);
    out_replace(c, nb);
    client_set_state(c, CLIENT_EVICTED);
    bool followed = c->follow != 0;
    c->follow = 0;
    c->subscribed = c->subscribe_pending = false;
    client_set_reading(c, false);
    log_info("control client %s dropped: %s (%zu bytes discarded)", c->peer, why, discarded);
    client_flush(c);
    if (followed)
        service_output_resume();
}

void client_close_with_error(struct client *c, int code, const char *message)
{
    size_t n;
    char *e = rpc_format_error(NULL, code, message, NULL, &n);

    client_set_state(c, CLIENT_CLOSING);
    client_set_reading(c, false);
    if (e) {
        client_send(c, e, n);
        free(e);
    }
    if (!client_dead(c) && out_pending(c) == 0)
        client_drop(c, NULL);
}

static void stall_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    client_drop(w->data, "reads nothing for 10 s");
}

static void write_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    struct client *c = w->data;
    if (client_flush(c) < 0)
        return;
    if (out_pending(c) < CLIENT_OUT_SOFT && !client_closing(c)) {
        /* Drained below the mark: go on with requests already buffered. */
        hooks.lines(c);
    }
}

static void read_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    struct client *c = w->data;
    size_t space = linebuf_space(&c->in);
    ssize_t n;

    if (space == 0) {
        client_set_reading(c, false);
        return;
    }
    if (!client_in_account(c)) {
        /* Refused rather than paused: clients stuck mid-line could
         * otherwise hold the budget and wait for each other forever. */
        log_warn("control client %s: refused, request data of all clients over %d bytes",
                 c->peer, CONTROL_INPUT_BUDGET);
        client_close_with_error(c, RPC_ERR_BUSY, "too much request data buffered by all clients");
        return;
    }
    if (space > READ_CHUNK)
        space = READ_CHUNK;
    do
        n = read(c->fd, linebuf_tail(&c->in), space);
    while (n < 0 && errno == EINTR);
    if (n < 0) {
        if (errno == EAGAIN)
            return;
        client_drop(c, strerror(errno));
        return;
    }
    if (n == 0) {
        if (c->l && c->l->serial == c) {
            /* virtio-serial: no host on the other end (it hung up, or has
             * not connected yet). This session ends; the port waits. */
            struct listener *l = c->l;
            c->keep_fd = l->sigio;
            client_drop(c, NULL);
            if (l->sigio && !control_stopping)
                hooks.serial_park(l);
            return;
        }
        client_set_state(c, CLIENT_HALF_CLOSED);
        client_set_reading(c, false);
        hooks.lines(c);
        /* A reply still owed to a peer that closed the whole connection
         * (not only its sending side: POLLHUP, both directions shut) can
         * never be read: dropped now, so the work behind it (a files.*
         * child on a share) ends now, not at its deadline. */
        if (!client_dead(c) && c->deferred) {
            struct pollfd pf = {.fd = c->fd, .events = POLLOUT};
            if (poll(&pf, 1, 0) == 1 && (pf.revents & POLLHUP))
                client_drop(c, NULL);
        }
        return;
    }
    linebuf_commit(&c->in, (size_t)n);
    c->last_ms = mono_ms();
    if (c->l && c->l->serial == c)
        c->l->retry_ms = RETRY_MIN_MS;
    hooks.lines(c);
}

struct client *control_attach(int fd, const char *peer, const char *const *methods)
{
    size_t used = 0;
    for (size_t i = 0; i < CONTROL_SLOTS; i++)
        used += control_clients[i] && control_clients[i]->internal;
    if (used >= CONTROL_MAX_INTERNAL)
        return NULL;
    struct client *c = client_new(fd, NULL, peer);
    if (!c)
        return NULL;
    c->internal = true;
    c->allowed = methods;
    bool placed = false;
    for (size_t i = 0; i < CONTROL_SLOTS; i++)
        placed |= control_clients[i] == c;
    if (!placed) {
        c->keep_fd = true; /* the caller still owns fd on failure */
        client_drop(c, NULL);
        return NULL;
    }
    return c;
}

bool control_may_call(const struct client *c, const char *method)
{
    if (!c || !c->allowed)
        return true;
    for (const char *const *m = c->allowed; *m; m++)
        if (strcmp(*m, method) == 0)
            return true;
    return false;
}

void control_detach(struct client *c)
{
    if (c && !client_dead(c))
        client_drop(c, NULL);
}

struct client *client_new(int fd, struct listener *l, const char *peer)
{
    struct client *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->fd = fd;
    c->l = l;
    c->last_ms = mono_ms();
    snprintf(c->peer, sizeof(c->peer), "%s", peer);
    linebuf_init(&c->in, RPC_MAX_LINE);
    ev_io_init(&c->rio, read_cb, fd, EV_READ);
    ev_io_init(&c->wio, write_cb, fd, EV_WRITE);
    ev_init(&c->stall, stall_cb);
    c->stall.repeat = CLIENT_STALL_MS / 1000.0;
    c->rio.data = c->wio.data = c->stall.data = c;
    for (size_t i = 0; i < CONTROL_SLOTS; i++) {
        if (!control_clients[i]) {
            control_clients[i] = c;
            break;
        }
    }
    client_set_reading(c, true);
    return c;
}

/* Frees a slot for a new client when all are taken: a host tool that
 * connected and went quiet (a crashed script, a forgotten shell) must not
 * lock the operator out until the guest reboots. Only a socket client
 * silent for control.idle_evict_ms with nothing in flight qualifies, so
 * subscribers, followers and a burst of fresh connections keep theirs.
 * Returns true when a slot was freed. */
bool clients_evict_idle(void)
{
    struct client *victim = NULL;
    int64_t now = mono_ms();
    if (!control_cfg || control_cfg->idle_evict_ms <= 0)
        return false;
    for (size_t i = 0; i < CONTROL_SLOTS; i++) {
        struct client *c = control_clients[i];
        if (!c || client_dead(c) || client_closing(c) || (c->l && c->l->serial == c) ||
            c->internal)
            continue;
        if (c->subscribed || c->subscribe_pending || c->follow || c->deferred ||
            out_pending(c) > 0)
            continue;
        if (now - c->last_ms < control_cfg->idle_evict_ms)
            continue;
        if (!victim || c->last_ms < victim->last_ms)
            victim = c;
    }
    if (!victim)
        return false;
    char why[64];
    snprintf(why, sizeof(why), "idle %lld s, its slot given to a new client",
             (long long)((now - victim->last_ms) / 1000));
    client_drop(victim, why);
    return true;
}

void control_flush(void)
{
    for (size_t i = 0; i < CONTROL_SLOTS; i++)
        if (control_clients[i] && !client_dead(control_clients[i]))
            client_flush(control_clients[i]);
}

static void replay_one(void *ctx, const char *line, size_t len)
{
    struct replay_ctx *r = ctx;
    if (!client_dead(r->c))
        client_send(r->c, line, len);
}

void control_subscribe(struct client *c, uint64_t since)
{
    struct replay_ctx r = {c};
    c->subscribed = true;
    activity_watch(); /* a listener: activity samples while one is there */
    if (since != UINT64_MAX)
        events_replay(since, replay_one, &r);
}

void control_subscribe_after_reply(struct client *c, uint64_t since)
{
    c->subscribe_pending = true;
    c->subscribe_since = since;
}

void control_follow(struct client *c, size_t index) { c->follow |= 1ull << (index & 63); }

/* The service gate (service_set_log_gate): true when index has followers
 * and none of them has room left under CLIENT_OUT_SOFT. */
static bool log_full(size_t index)
{
    uint64_t bit = 1ull << (index & 63);
    bool any = false;

    for (size_t i = 0; i < CONTROL_SLOTS; i++) {
        const struct client *c = control_clients[i];
        if (!c || client_dead(c) || !(c->follow & bit))
            continue;
        if (out_pending(c) < CLIENT_OUT_SOFT)
            return false;
        any = true;
    }
    return any;
}

static void log_sink(const char *service, size_t index, const struct logline *l)
{
    uint64_t bit = 1ull << (index & 63);
    char *text = NULL;
    size_t len = 0;

    for (size_t i = 0; i < CONTROL_SLOTS; i++) {
        struct client *c = control_clients[i];
        if (!c || client_dead(c) || !(c->follow & bit))
            continue;
        if (!text) {
            /* Serialized once, only when someone follows. */
            cJSON *msg = cJSON_CreateObject();
            if (!msg)
                return;
            cJSON_AddStringToObject(msg, "jsonrpc", "2.0");
            cJSON_AddStringToObject(msg, "method", "log");
            cJSON_AddItemToObject(msg, "params", logline_json(l, service));
            char *t = jsonout_print(msg);
            cJSON_Delete(msg);
            if (!t)
                return;
            /* Copied out: cJSON's text belongs to its allocator. */
            len = strlen(t);
            text = malloc(len + 2);
            if (text)
                memcpy(text, t, len);
            cJSON_free(t);
            if (!text)
                return;
            text[len++] = '\n';
            text[len] = 0;
        }
        client_send(c, text, len);
    }
    free(text);
}

/* ---- one client's own stream (exec output) ---- */
int control_send(struct client *c, const char *line, size_t len)
{
    return client_send(c, line, len) < 0 || client_dead(c) || client_evicted(c) ? -1 : 0;
}

int control_room(struct client *c)
{
    if (client_closing(c))
        return -1;
    if (out_pending(c) < CLIENT_OUT_SOFT)
        return 1;
    c->want_room = true;
    return 0;
}

bool control_on_close(void (*fn)(struct client *c))
{
    if (close_hooks_n == sizeof(close_hooks) / sizeof(close_hooks[0]))
        return false;
    close_hooks[close_hooks_n++] = fn;
    return true;
}

void control_set_stream_hooks(void (*room)(struct client *c), void (*closed)(struct client *c))
{
    stream_room_hook = room;
    stream_closed_hook = closed;
}
/* ---- end of the stream API ---- */

size_t control_subscriber_count(void)
{
    size_t n = 0;
    for (size_t i = 0; i < CONTROL_SLOTS; i++)
        n += control_clients[i] && control_clients[i]->subscribed && !client_dead(control_clients[i]);
    return n;
}

void control_broadcast(const char *line, size_t len)
{
    for (size_t i = 0; i < CONTROL_SLOTS; i++) {
        struct client *c = control_clients[i];
        if (c && c->subscribed && !client_dead(c))
            client_send(c, line, len);
    }
}
void clients_start(void)
{
    ev_prepare_init(&reap_prepare, reap_cb);
    ev_prepare_start(H.loop, &reap_prepare);
    events_set_sink(control_broadcast);
    service_set_log_sink(log_sink);
    service_set_log_gate(log_full);
}

void clients_stop(void)
{
    for (size_t i = 0; i < CONTROL_SLOTS; i++)
        if (control_clients[i])
            client_drop(control_clients[i], NULL);
    reap_cb(H.loop, &reap_prepare, 0);
}
