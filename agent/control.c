#include "control.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <termios.h>
#include <unistd.h>

#include <linux/vm_sockets.h>

#include <cJSON.h>
#include <ev.h>

#include "activity.h"
#include "cgroup.h"
#include "events.h"
#include "hearth.h"
#include "log.h"
#include "logring.h"
#include "methods.h"
#include "peer.h"
#include "service.h"
#include "rpc.h"

#define READ_CHUNK 65536
#define RETRY_MIN_MS 200
#define RETRY_MAX_MS 60000
#define SERIAL_RETRY_MAX_MS 2000

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

struct client {
    int fd;
    struct listener *l;
    ev_io rio, wio;
    ev_timer stall;
    struct linebuf in;
    char *out;
    size_t out_off, out_len, out_cap;
    bool subscribed;
    uint64_t follow;          /* services whose output streams to this client */
    bool subscribe_pending;   /* start the event stream after this reply */
    uint64_t subscribe_since;
    uint64_t deferred;        /* ticket of the request being answered later */
    struct cJSON *deferred_id;
    bool deferred_has_id;
    bool closing;             /* close once the output is flushed */
    bool reading;
    bool eof;                 /* the peer closed its side */
    bool dead;
    bool batch;               /* replies queue up until the read is handled */
    bool keep_fd;             /* the listener keeps the fd (a parked port) */
    char peer[96];
    struct client *next_dead;
    size_t in_counted;        /* its share of in_extra */
    int64_t last_ms;          /* monotonic ms of its connect or last bytes */
    uint64_t unread_since;    /* out_tick when its oldest unwritten output was queued */
    bool out_midline;         /* the socket took part of a line: the rest must follow */
    bool evicted;             /* queue discarded, "dropped" notice queued, closing */
};

/* Input buffer bytes beyond the first chunk, over all clients: bounded by
 * CONTROL_INPUT_BUDGET. */
static size_t in_extra;
/* Output queue bytes allocated over all clients: bounded by
 * CONTROL_OUTPUT_BUDGET. */
static size_t out_total;
/* A counter, not a clock: it only has to order the clients by how long
 * their output has waited, and costs no syscall on the reply path. */
static uint64_t out_tick;

static struct listener listeners[CONFIG_MAX_LISTEN];
static size_t nlisteners;
static struct client *clients[CONTROL_MAX_CLIENTS + CONFIG_MAX_LISTEN];
static size_t nclients; /* socket clients, serial streams not counted */
static struct client *graveyard;
static ev_prepare reap_prepare;
static const struct config *ccfg;

static bool stopping;

static void listener_open(struct listener *l);
static void log_sink(const char *service, size_t index, const struct logline *l);
static bool log_full(size_t index);
static void schedule_retry(struct listener *l, int64_t max_ms);
static void client_drop(struct client *c, const char *why);
static void process_lines(struct client *c);
static void serial_park(struct listener *l);
static void client_evict(struct client *c, const char *reason, const char *why);

size_t control_client_count(void) { return nclients; }
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

static size_t out_pending(const struct client *c) { return c->out_len - c->out_off; }

static bool is_follower(const struct client *c)
{
    return c->follow || c->subscribed || c->subscribe_pending;
}

/* Sets c's queue buffer to buf/cap, keeping out_total in step. */
static void out_set_buffer(struct client *c, char *buf, size_t cap)
{
    out_total = out_total - c->out_cap + cap;
    c->out = buf;
    c->out_cap = cap;
}

static void set_reading(struct client *c, bool on)
{
    if (c->dead || on == c->reading)
        return;
    c->reading = on;
    if (on)
        ev_io_start(H.loop, &c->rio);
    else
        ev_io_stop(H.loop, &c->rio);
}

/* Writes what the socket takes now. Returns -1 when the client died. */
static int client_flush(struct client *c)
{
    while (out_pending(c) > 0) {
        ssize_t n = write(c->fd, c->out + c->out_off, out_pending(c));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                break;
            client_drop(c, strerror(errno));
            return -1;
        }
        c->out_off += (size_t)n;
        c->out_midline = c->out[c->out_off - 1] != '\n';
        c->unread_since = ++out_tick;
        ev_timer_again(H.loop, &c->stall);
    }
    if (c->follow && out_pending(c) < CLIENT_OUT_SOFT)
        services_output_resume(); /* a no-op unless some service waits for room */
    if (out_pending(c) == 0) {
        c->out_off = c->out_len = 0;
        ev_io_stop(H.loop, &c->wio);
        ev_timer_stop(H.loop, &c->stall);
        /* Give back a large buffer once a big reply has gone out. */
        if (c->out_cap > CLIENT_OUT_SOFT) {
            free(c->out);
            out_set_buffer(c, NULL, 0);
        }
        if (c->closing) {
            client_drop(c, NULL);
            return -1;
        }
    } else {
        ev_io_start(H.loop, &c->wio);
        if (!ev_is_active(&c->stall))
            ev_timer_again(H.loop, &c->stall);
    }
    return 0;
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
    for (size_t i = 0; i < sizeof(clients) / sizeof(clients[0]); i++) {
        struct client *f = clients[i];
        if (out_total + need <= CONTROL_OUTPUT_BUDGET)
            return true;
        if (f && f != c && !f->dead && f->out_cap && out_pending(f) == 0) {
            free(f->out);
            out_set_buffer(f, NULL, 0);
            f->out_off = f->out_len = 0;
        }
    }
    while (out_total + need > CONTROL_OUTPUT_BUDGET) {
        struct client *victim = NULL;
        for (size_t i = 0; i < sizeof(clients) / sizeof(clients[0]); i++) {
            struct client *f = clients[i];
            if (!f || f->dead || f->evicted || !is_follower(f) || out_pending(f) == 0)
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
static int client_send(struct client *c, const char *data, size_t len)
{
    if (c->dead || c->evicted)
        return -1;
    if (out_pending(c) + len > CLIENT_OUT_MAX) {
        client_evict(c, "queue_full", "output queue full (client not reading)");
        return -1;
    }
    if (out_pending(c) == 0)
        c->unread_since = ++out_tick;
    if (c->out_len + len > c->out_cap) {
        if (c->out_off > 0) {
            memmove(c->out, c->out + c->out_off, out_pending(c));
            c->out_len -= c->out_off;
            c->out_off = 0;
        }
        if (c->out_len + len > c->out_cap) {
            size_t ncap = c->out_cap ? c->out_cap : 4096;
            while (ncap < c->out_len + len)
                ncap *= 2;
            if (!out_reserve(c, ncap - c->out_cap))
                return -1;
            char *nb = realloc(c->out, ncap);
            if (!nb) {
                client_drop(c, "out of memory");
                return -1;
            }
            out_set_buffer(c, nb, ncap);
        }
    }
    memcpy(c->out + c->out_len, data, len);
    c->out_len += len;
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
static bool in_account(struct client *c)
{
    size_t extra = c->in.cap > LINEBUF_CHUNK ? c->in.cap - LINEBUF_CHUNK : 0;
    in_extra = in_extra - c->in_counted + extra;
    c->in_counted = extra;
    return extra == 0 || in_extra <= CONTROL_INPUT_BUDGET;
}

static void client_drop(struct client *c, const char *why)
{
    if (c->dead)
        return;
    c->dead = true;
    in_extra -= c->in_counted;
    c->in_counted = 0;
    /* Nothing is written to a dead client: its queue is freed now, so
     * the budget it held is free for the clients still here. */
    free(c->out);
    out_set_buffer(c, NULL, 0);
    c->out_off = c->out_len = 0;
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
    for (size_t i = 0; i < sizeof(clients) / sizeof(clients[0]); i++)
        if (clients[i] == c)
            clients[i] = NULL;
    if (c->l && c->l->serial == c) {
        c->l->serial = NULL;
        if (c->keep_fd) {
            /* The host hung up: the port stays open for its return. */
        } else {
            /* A read error: the port is reopened. */
            c->l->fd = -1;
            if (!stopping)
                schedule_retry(c->l, SERIAL_RETRY_MAX_MS);
        }
    } else {
        nclients--;
    }
    c->next_dead = graveyard;
    graveyard = c;
    if (c->follow)
        services_output_resume(); /* a service may have waited for c alone */
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

    if (c->dead || c->evicted)
        return;
    if (c->out_midline && out_pending(c) > 0) {
        const char *nl = memchr(c->out + c->out_off, '\n', out_pending(c));
        keep = nl ? (size_t)(nl - (c->out + c->out_off)) + 1 : out_pending(c);
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
    if (keep)
        memmove(c->out, c->out + c->out_off, keep);
    c->out_off = 0;
    c->out_len = keep;
    /* The small buffer first, then the big one freed: a failed malloc
     * only means the notice is lost, never that memory stays held. */
    char *nb = malloc(keep + (size_t)n);
    if (!nb) {
        client_drop(c, why);
        return;
    }
    if (keep)
        memcpy(nb, c->out, keep);
    memcpy(nb + keep, note, (size_t)n);
    free(c->out);
    out_set_buffer(c, nb, keep + (size_t)n);
    c->out_len = keep + (size_t)n;
    c->evicted = true;
    c->closing = true;
    bool followed = c->follow != 0;
    c->follow = 0;
    c->subscribed = c->subscribe_pending = false;
    set_reading(c, false);
    log_info("control client %s dropped: %s (%zu bytes discarded)", c->peer, why, discarded);
    client_flush(c);
    if (followed)
        services_output_resume();
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
    if (out_pending(c) < CLIENT_OUT_SOFT && !c->closing) {
        /* Drained below the mark: go on with requests already buffered. */
        process_lines(c);
    }
}

static void process_batch(struct client *c);

static void process_lines(struct client *c)
{
    for (;;) {
        c->batch = true;
        process_batch(c);
        c->batch = false;
        if (c->dead || out_pending(c) == 0 || ev_is_active(&c->wio))
            return;
        bool paused = out_pending(c) >= CLIENT_OUT_SOFT;
        if (client_flush(c) < 0)
            return;
        /* A reply over CLIENT_OUT_SOFT (a files.read chunk) paused the
         * batch and stopped reading; when the socket took it all at once
         * no write_cb will come to resume, so resume here. */
        if (!paused || c->closing || out_pending(c) >= CLIENT_OUT_SOFT)
            return;
    }
}

static void process_batch(struct client *c)
{
    const char *line;
    size_t len;
    bool drained = false;

    while (!c->dead && !c->closing && !c->deferred && out_pending(c) < CLIENT_OUT_SOFT) {
        int r = linebuf_next(&c->in, &line, &len);
        if (r == 0) {
            drained = true;
            linebuf_shrink(&c->in);
            in_account(c);
            break;
        }
        if (r < 0) {
            size_t n;
            char *e = rpc_format_error(NULL, RPC_INVALID_REQUEST,
                                       "request longer than 1048576 bytes", NULL, &n);
            log_warn("control client %s: request longer than %d bytes", c->peer, RPC_MAX_LINE);
            c->closing = true;
            set_reading(c, false);
            if (e) {
                client_send(c, e, n);
                free(e);
            }
            if (!c->dead && out_pending(c) == 0)
                client_drop(c, NULL);
            return;
        }
        size_t n = 0;
        char small[512];
        char *reply = methods_handle_line(c, line, len, &n, small, sizeof(small));
        if (reply) {
            int rc = client_send(c, reply, n);
            if (reply != small)
                free(reply);
            if (rc < 0)
                return;
        }
        if (c->subscribe_pending) {
            c->subscribe_pending = false;
            control_subscribe(c, c->subscribe_since);
        }
    }
    if (c->dead || c->closing)
        return;
    if (c->eof) {
        /* Half-closed: every request asked has been answered; close once
         * the replies are out. */
        if (drained) {
            c->closing = true;
            if (out_pending(c) == 0)
                client_drop(c, NULL);
        }
        return;
    }
    set_reading(c, out_pending(c) < CLIENT_OUT_SOFT && linebuf_space(&c->in) > 0);
}

static void read_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    struct client *c = w->data;
    size_t space = linebuf_space(&c->in);
    ssize_t n;

    if (space == 0) {
        set_reading(c, false);
        return;
    }
    if (!in_account(c)) {
        /* Refused rather than paused: clients stuck mid-line could
         * otherwise hold the budget and wait for each other forever. */
        size_t elen;
        char *e = rpc_format_error(NULL, RPC_ERR_BUSY,
                                   "too much request data buffered by all clients", NULL, &elen);
        log_warn("control client %s: refused, request data of all clients over %d bytes",
                 c->peer, CONTROL_INPUT_BUDGET);
        c->closing = true;
        set_reading(c, false);
        if (e) {
            client_send(c, e, elen);
            free(e);
        }
        if (!c->dead && out_pending(c) == 0)
            client_drop(c, NULL);
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
            if (l->sigio && !stopping)
                serial_park(l);
            return;
        }
        c->eof = true;
        set_reading(c, false);
        process_lines(c);
        return;
    }
    linebuf_commit(&c->in, (size_t)n);
    c->last_ms = mono_ms();
    if (c->l && c->l->serial == c)
        c->l->retry_ms = RETRY_MIN_MS;
    process_lines(c);
}

static struct client *client_new(int fd, struct listener *l, const char *peer)
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
    for (size_t i = 0; i < sizeof(clients) / sizeof(clients[0]); i++) {
        if (!clients[i]) {
            clients[i] = c;
            break;
        }
    }
    set_reading(c, true);
    return c;
}

/* Frees a slot for a new client when all are taken: a host tool that
 * connected and went quiet (a crashed script, a forgotten shell) must not
 * lock the operator out until the guest reboots. Only a socket client
 * silent for control.idle_evict_ms with nothing in flight qualifies, so
 * subscribers, followers and a burst of fresh connections keep theirs.
 * Returns true when a slot was freed. */
static bool evict_idle(void)
{
    struct client *victim = NULL;
    int64_t now = mono_ms();
    if (!ccfg || ccfg->idle_evict_ms <= 0)
        return false;
    for (size_t i = 0; i < sizeof(clients) / sizeof(clients[0]); i++) {
        struct client *c = clients[i];
        if (!c || c->dead || c->closing || (c->l && c->l->serial == c))
            continue;
        if (c->subscribed || c->subscribe_pending || c->follow || c->deferred ||
            out_pending(c) > 0)
            continue;
        if (now - c->last_ms < ccfg->idle_evict_ms)
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

/* Returns 0 when the peer may talk to us; fills peer and why otherwise. */
static int check_peer(struct listener *l, int fd, char *peer, size_t plen, char *why, size_t wlen)
{
    if (l->spec.kind == LISTEN_UNIX)
        return peer_check_unix(fd, peer, plen, why, wlen);
    if (l->spec.kind == LISTEN_VSOCK) {
        struct sockaddr_vm vm;
        socklen_t sl = sizeof(vm);
        memset(&vm, 0, sizeof(vm));
        if (getpeername(fd, (struct sockaddr *)&vm, &sl) < 0) {
            snprintf(peer, plen, "vsock ?");
            snprintf(why, wlen, "no peer address: %s", strerror(errno));
            return -1;
        }
        snprintf(peer, plen, "vsock cid=%u port=%u", vm.svm_cid, vm.svm_port);
        for (size_t i = 0; i < ccfg->n_allowed_cids; i++)
            if (ccfg->allowed_cids[i] == vm.svm_cid)
                return 0;
        snprintf(why, wlen, "cid %u is not in control.allowed_cids", vm.svm_cid);
        return -1;
    }
    snprintf(peer, plen, "%s", l->name);
    return 0;
}

static void refuse(int fd, int code, const char *msg)
{
    size_t n;
    char *e = rpc_format_error(NULL, code, msg, NULL, &n);
    if (e) {
        /* Best effort on a fresh non-blocking socket: it has room. */
        ssize_t w = write(fd, e, n);
        (void)w;
        free(e);
    }
    close(fd);
}

static void accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    struct listener *l = w->data;
    char peer[96], why[160];

    /* Bounded per wake-up so one listener cannot starve the loop. */
    for (int i = 0; i < 64; i++) {
        int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EAGAIN)
                return;
            log_warn("unable to accept on %s: %s", l->name, strerror(errno));
            if (errno == EMFILE || errno == ENFILE || errno == ENOMEM || errno == ENOBUFS) {
                /* Level-triggered: pause rather than spin until fds free up. */
                ev_io_stop(loop, &l->io);
                ev_timer_set(&l->retry, 0.1, 0.);
                ev_timer_start(loop, &l->retry);
            }
            return;
        }
        if (check_peer(l, fd, peer, sizeof(peer), why, sizeof(why)) < 0) {
            log_warn("refused control client on %s (%s): %s", l->name, peer, why);
            refuse(fd, RPC_INVALID_REQUEST, "peer refused");
            continue;
        }
        if (nclients >= CONTROL_MAX_CLIENTS && !evict_idle()) {
            log_warn("refused control client on %s (%s): %d clients already", l->name, peer,
                     CONTROL_MAX_CLIENTS);
            refuse(fd, RPC_ERR_BUSY, "too many clients");
            continue;
        }
        if (!client_new(fd, l, peer)) {
            log_warn("refused control client on %s: out of memory", l->name);
            close(fd);
            continue;
        }
        nclients++;
        l->sessions++;
        log_debug("control client %s connected on %s", peer, l->name);
    }
}

static void retry_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct listener *l = w->data;
    if (l->fd >= 0 && l->spec.kind != LISTEN_SERIAL) {
        /* A paused accept (fd exhaustion): resume. */
        ev_io_start(loop, &l->io);
        return;
    }
    listener_open(l);
}

static void schedule_retry(struct listener *l, int64_t max_ms)
{
    ev_timer_set(&l->retry, (double)l->retry_ms / 1000.0, 0.);
    ev_timer_start(H.loop, &l->retry);
    l->retry_ms *= 2;
    if (l->retry_ms > max_ms)
        l->retry_ms = max_ms;
}

static int mkdir_parents(const char *path)
{
    char buf[sizeof(((struct sockaddr_un *)0)->sun_path)];
    snprintf(buf, sizeof(buf), "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(buf, 0755) < 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return 0;
}

static int open_unix(struct listener *l)
{
    struct sockaddr_un sa;
    struct stat st;
    int fd;

    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", l->spec.path);
    if (mkdir_parents(l->spec.path) < 0) {
        snprintf(l->error, sizeof(l->error), "unable to create parent directory: %s",
                 strerror(errno));
        return -1;
    }
    if (lstat(l->spec.path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            snprintf(l->error, sizeof(l->error), "%s exists and is not a socket", l->spec.path);
            errno = EEXIST;
            return -1;
        }
        unlink(l->spec.path); /* a stale socket from an earlier run */
    }
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(l->error, sizeof(l->error), "socket: %s", strerror(errno));
        return -1;
    }
    /* The file is created 0600 by bind itself (umask 0177): no window
     * where others could connect, and no chmod by name afterwards that a
     * link swapped in after bind would redirect onto another file. */
    mode_t old = umask(0177);
    int rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    umask(old);
    if (rc < 0 || listen(fd, 256) < 0) {
        snprintf(l->error, sizeof(l->error), "%s", strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

static int open_vsock(struct listener *l)
{
    struct sockaddr_vm sa;
    int fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    if (fd < 0) {
        snprintf(l->error, sizeof(l->error), "socket: %s", strerror(errno));
        return -1;
    }
    memset(&sa, 0, sizeof(sa));
    sa.svm_family = AF_VSOCK;
    sa.svm_cid = VMADDR_CID_ANY;
    sa.svm_port = l->spec.port;
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 256) < 0) {
        snprintf(l->error, sizeof(l->error), "%s", strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* "serial:NAME" without a slash names a virtio-serial port: its device is
 * found through /sys/class/virtio-ports/<dev>/name (no udev links). */
static int resolve_serial(const char *spec, char *out, size_t outlen)
{
    if (strchr(spec, '/')) {
        snprintf(out, outlen, "%s", spec);
        return 0;
    }
    DIR *d = opendir("/sys/class/virtio-ports");
    struct dirent *e;
    if (!d)
        return -1;
    while ((e = readdir(d))) {
        char path[300], name[128];
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "/sys/class/virtio-ports/%s/name", e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t n = read(fd, name, sizeof(name) - 1);
        close(fd);
        if (n <= 0)
            continue;
        name[n] = 0;
        name[strcspn(name, "\n")] = 0;
        if (strcmp(name, spec) == 0) {
            snprintf(out, outlen, "/dev/%s", e->d_name);
            closedir(d);
            return 0;
        }
    }
    closedir(d);
    errno = ENOENT;
    return -1;
}

static int open_serial(struct listener *l)
{
    char dev[256];
    int fd;

    if (resolve_serial(l->spec.path, dev, sizeof(dev)) < 0) {
        snprintf(l->error, sizeof(l->error), "no virtio-serial port named %s", l->spec.path);
        return -1;
    }
    fd = open(dev, O_RDWR | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(l->error, sizeof(l->error), "%s: %s", dev, strerror(errno));
        return -1;
    }
    if (isatty(fd)) {
        /* A UART: raw bytes, no echo, no line discipline. */
        struct termios t;
        if (tcgetattr(fd, &t) == 0) {
            cfmakeraw(&t);
            tcsetattr(fd, TCSANOW, &t);
        }
    }
    return fd;
}

/* A virtio-serial port reads EOF and polls POLLHUP for as long as no host
 * is connected, so it cannot simply be watched. The kernel's virtio
 * console sends SIGIO to the port's owner when the host side opens: a
 * parked port keeps its fd, arms O_ASYNC and waits for that signal
 * (control_serial_kick) instead of being reopened on a timer, so an
 * unattended sandbox does not wake up. */
static void serial_async(struct listener *l, bool on)
{
    int fl = fcntl(l->fd, F_GETFL);
    if (fl < 0 || fcntl(l->fd, F_SETFL, on ? fl | O_ASYNC : fl & ~O_ASYNC) < 0)
        log_warn("control %s: unable to %s O_ASYNC: %s", l->name, on ? "set" : "clear",
                 strerror(errno));
}

static void serial_unpark(struct listener *l)
{
    l->parked = false;
    serial_async(l, false);
    l->serial = client_new(l->fd, l, l->name);
    l->sessions++;
    if (!l->serial) {
        close(l->fd);
        l->fd = -1;
        schedule_retry(l, SERIAL_RETRY_MAX_MS);
        return;
    }
    log_debug("control %s: host connected", l->name);
}

static void serial_park(struct listener *l)
{
    l->parked = true;
    serial_async(l, true);
    /* The host may have come back between the EOF and O_ASYNC. */
    struct pollfd p = {.fd = l->fd, .events = POLLIN};
    if (poll(&p, 1, 0) == 1 && !(p.revents & POLLHUP))
        serial_unpark(l);
}

void control_serial_kick(void)
{
    for (size_t i = 0; i < nlisteners; i++) {
        struct listener *l = &listeners[i];
        if (l->spec.kind != LISTEN_SERIAL || !l->parked || l->fd < 0 || stopping)
            continue;
        struct pollfd p = {.fd = l->fd, .events = POLLIN};
        if (poll(&p, 1, 0) == 1 && !(p.revents & POLLHUP))
            serial_unpark(l);
    }
}

static void listener_open(struct listener *l)
{
    int fd = -1;

    switch (l->spec.kind) {
    case LISTEN_UNIX: fd = open_unix(l); break;
    case LISTEN_VSOCK: fd = open_vsock(l); break;
    case LISTEN_SERIAL: fd = open_serial(l); break;
    }
    if (fd < 0) {
        if (l->retry_ms == RETRY_MIN_MS)
            log_warn("control %s not open yet: %s; retrying", l->name, l->error);
        schedule_retry(l, l->spec.kind == LISTEN_SERIAL ? SERIAL_RETRY_MAX_MS : RETRY_MAX_MS);
        return;
    }
    l->fd = fd;
    l->error[0] = 0;
    if (l->spec.kind == LISTEN_SERIAL) {
        /* SIGIO to hearth once O_ASYNC is set (only while parked). A UART
         * or a plain file cannot signal: it keeps the reopen timer. */
        l->sigio = !isatty(fd) && fcntl(fd, F_SETOWN, getpid()) == 0;
        l->parked = false;
        l->serial = client_new(fd, l, l->name);
        l->sessions++;
        if (!l->serial) {
            close(fd);
            l->fd = -1;
            schedule_retry(l, SERIAL_RETRY_MAX_MS);
            return;
        }
        log_debug("control %s open", l->name);
        return;
    }
    l->retry_ms = RETRY_MIN_MS;
    ev_io_init(&l->io, accept_cb, fd, EV_READ);
    l->io.data = l;
    ev_io_start(H.loop, &l->io);
    log_info("control listening on %s", l->name);
}

int control_start(const struct config *cfg)
{
    int open_now = 0;

    ccfg = cfg;
    ev_prepare_init(&reap_prepare, reap_cb);
    ev_prepare_start(H.loop, &reap_prepare);
    events_set_sink(control_broadcast);
    services_set_log_sink(log_sink);
    services_set_log_gate(log_full);
    nlisteners = cfg->n_listen;
    for (size_t i = 0; i < nlisteners; i++) {
        struct listener *l = &listeners[i];
        memset(l, 0, sizeof(*l));
        l->spec = cfg->listen[i];
        l->fd = -1;
        l->retry_ms = RETRY_MIN_MS;
        switch (l->spec.kind) {
        case LISTEN_UNIX: snprintf(l->name, sizeof(l->name), "unix:%s", l->spec.path); break;
        case LISTEN_VSOCK: snprintf(l->name, sizeof(l->name), "vsock:%u", l->spec.port); break;
        case LISTEN_SERIAL: snprintf(l->name, sizeof(l->name), "serial:%s", l->spec.path); break;
        }
        ev_init(&l->retry, retry_cb);
        l->retry.data = l;
        listener_open(l);
        if (l->fd >= 0)
            open_now++;
    }
    return open_now;
}

void control_flush(void)
{
    for (size_t i = 0; i < sizeof(clients) / sizeof(clients[0]); i++)
        if (clients[i] && !clients[i]->dead)
            client_flush(clients[i]);
}

void control_stop(void)
{
    stopping = true;
    for (size_t i = 0; i < sizeof(clients) / sizeof(clients[0]); i++)
        if (clients[i])
            client_drop(clients[i], NULL);
    for (size_t i = 0; i < nlisteners; i++) {
        struct listener *l = &listeners[i];
        ev_timer_stop(H.loop, &l->retry);
        if (l->spec.kind != LISTEN_SERIAL && l->fd >= 0) {
            ev_io_stop(H.loop, &l->io);
            close(l->fd);
            if (l->spec.kind == LISTEN_UNIX)
                unlink(l->spec.path);
        } else if (l->spec.kind == LISTEN_SERIAL && l->parked && l->fd >= 0) {
            close(l->fd);
            l->parked = false;
        }
        l->fd = -1;
    }
    reap_cb(H.loop, &reap_prepare, 0);
}

struct replay_ctx {
    struct client *c;
};

static void replay_one(void *ctx, const char *line, size_t len)
{
    struct replay_ctx *r = ctx;
    if (!r->c->dead)
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

static uint64_t next_ticket;

uint64_t control_defer(struct client *c)
{
    c->deferred = ++next_ticket;
    c->deferred_has_id = false;
    return c->deferred;
}

bool control_is_deferring(const struct client *c) { return c && c->deferred && !c->deferred_has_id; }

void control_defer_id(struct client *c, cJSON *id)
{
    c->deferred_id = id;
    c->deferred_has_id = true;
}

void control_complete(uint64_t ticket, cJSON *result, struct rpc_error *err)
{
    struct client *c = NULL;

    for (size_t i = 0; ticket && i < sizeof(clients) / sizeof(clients[0]); i++)
        if (clients[i] && clients[i]->deferred == ticket && !clients[i]->dead)
            c = clients[i];
    if (!c) {
        /* The client went away while it waited: nobody to tell. */
        cJSON_Delete(result);
        if (err) {
            cJSON_Delete(err->data);
            err->data = NULL;
        }
        return;
    }
    size_t n = 0;
    char *reply;
    if (result)
        reply = rpc_format_result(c->deferred_id, result, &n);
    else
        reply = rpc_format_error(c->deferred_id, err ? err->code : RPC_INTERNAL_ERROR,
                                 err ? err->message : "internal error", err ? err->data : NULL, &n);
    if (err)
        err->data = NULL;
    bool notification = !c->deferred_id;
    cJSON_Delete(c->deferred_id);
    c->deferred_id = NULL;
    c->deferred = 0;
    if (reply && !notification && client_send(c, reply, n) < 0) {
        free(reply);
        return;
    }
    free(reply);
    /* Requests that arrived meanwhile are answered now, in order. */
    process_lines(c);
}

void control_follow(struct client *c, size_t index) { c->follow |= 1ull << (index & 63); }

/* The service gate (services_set_log_gate): true when index has followers
 * and none of them has room left under CLIENT_OUT_SOFT. */
static bool log_full(size_t index)
{
    uint64_t bit = 1ull << (index & 63);
    bool any = false;

    for (size_t i = 0; i < sizeof(clients) / sizeof(clients[0]); i++) {
        const struct client *c = clients[i];
        if (!c || c->dead || !(c->follow & bit))
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

    for (size_t i = 0; i < sizeof(clients) / sizeof(clients[0]); i++) {
        struct client *c = clients[i];
        if (!c || c->dead || !(c->follow & bit))
            continue;
        if (!text) {
            /* Serialized once, only when someone follows. */
            cJSON *msg = cJSON_CreateObject();
            if (!msg)
                return;
            cJSON_AddStringToObject(msg, "jsonrpc", "2.0");
            cJSON_AddStringToObject(msg, "method", "log");
            cJSON_AddItemToObject(msg, "params", logline_json(l, service));
            char *t = cJSON_PrintUnformatted(msg);
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

size_t control_subscriber_count(void)
{
    size_t n = 0;
    for (size_t i = 0; i < sizeof(clients) / sizeof(clients[0]); i++)
        n += clients[i] && clients[i]->subscribed && !clients[i]->dead;
    return n;
}

void control_broadcast(const char *line, size_t len)
{
    for (size_t i = 0; i < sizeof(clients) / sizeof(clients[0]); i++) {
        struct client *c = clients[i];
        if (c && c->subscribed && !c->dead)
            client_send(c, line, len);
    }
}

cJSON *control_listeners_json(void)
{
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; arr && i < nlisteners; i++) {
        const struct listener *l = &listeners[i];
        cJSON *o = cJSON_CreateObject();
        if (!o)
            break;
        cJSON_AddStringToObject(o, "listen", l->name);
        cJSON_AddStringToObject(o, "state", l->fd < 0 ? "retrying" : l->parked ? "waiting" : "open");
        cJSON_AddNumberToObject(o, "sessions", (double)l->sessions);
        if (l->error[0] && l->fd < 0)
            cJSON_AddStringToObject(o, "error", l->error);
        cJSON_AddItemToArray(arr, o);
    }
    return arr;
}
