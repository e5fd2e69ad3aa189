/* Output capture of services: the stdout and stderr pipes, read a bounded
 * amount per wake-up, cut into redacted lines for the ring, the log file
 * and followers; a pipe left unread while every follower is full. */
#include "service_priv.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>
#include <ev.h>

#include "events.h"
#include "hearth.h"
#include "launch.h"
#include "logring.h"
#include "outcopy.h"
#include "redact.h"
#include "svc_config.h"
#include "termsafe.h"

static void (*log_sink)(const char *service, size_t index, const struct logline *l);
static bool (*log_full)(size_t index);
static unsigned paused_pipes; /* output pipes not being read, over all services */

void service_set_log_sink(void (*fn)(const char *, size_t, const struct logline *)) { log_sink = fn; }
void service_set_log_gate(bool (*full)(size_t index)) { log_full = full; }

static void emit_line(struct service *s, enum log_stream st, const char *text, size_t len)
{
    /* Redacted as captured, so the ring, the log file and every follower
     * see the same text; room for a few markers longer than what they
     * hide, the ring cuts the line at LOGRING_LINE_MAX anyway. */
    static char red[LOGRING_LINE_MAX * 2];
    size_t rlen = redact_text(text, len, red, sizeof(red));
    if (rlen != (size_t)-1) {
        text = red;
        len = rlen;
    }
    outcopy_line(s->cfg->name, st, text, len); /* container mode: the runtime's log */
    const struct logline *l = logring_add(&s->out.ring, st, text, len);
    svc_log_file_news(s);
    if (l && log_sink)
        log_sink(s->cfg->name, (size_t)(s - svcs), l);
}

cJSON *svc_log_file_json(const struct service *s)
{
    const struct logring *r = &s->out.ring;
    if (!r->file)
        return NULL;
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddStringToObject(o, "path", r->file);
    if (r->file_error[0])
        cJSON_AddStringToObject(o, "error", r->file_error);
    cJSON_AddNumberToObject(o, "lines_lost", (double)r->file_lost);
    return o;
}

/* Only the changes: a full disk is one event when lines stop going in
 * and one when they go in again, however much the service writes. */
void svc_log_file_news(struct service *s)
{
    if (!logring_file_news(&s->out.ring))
        return;
    cJSON *p = svc_log_file_json(s);
    if (p)
        cJSON_AddStringToObject(p, "service", s->cfg->name);
    events_emit("service.log_file", p);
}

/* Splits what was read into lines; lines longer than LOGRING_LINE_MAX
 * are cut. */
static void outpipe_feed(struct outpipe *o, const char *buf, size_t n)
{
    if (svc_activity.output)
        svc_activity.output((size_t)(o->s - svcs), n);
    for (size_t i = 0; i < n; i++) {
        char c = buf[i];
        if (c == '\n') {
            emit_line(o->s, o->stream, o->part, o->plen);
            o->plen = 0;
            continue;
        }
        if (o->plen == sizeof(o->part)) {
            /* A registered value across the cut would show as two halves
             * that neither match: the cut moves back so a value (up to
             * a quarter of a line) that begins in the tail goes whole into
             * the next piece. */
            size_t carry = redact_longest();
            carry = carry > sizeof(o->part) / 4 ? sizeof(o->part) / 4 : carry ? carry - 1 : 0;
            emit_line(o->s, o->stream, o->part, o->plen - carry);
            memmove(o->part, o->part + o->plen - carry, carry);
            o->plen = carry;
        }
        o->part[o->plen++] = c;
    }
}

void svc_outpipe_close(struct outpipe *o)
{
    if (o->fd < 0)
        return;
    /* A service's last lines can still be in the pipe when its exit is
     * handled first (a line written on SIGTERM, then hearth exits): read
     * what is there, bounded, before closing. The fd is non-blocking. */
    char buf[4096];
    for (int i = 0; i < 16; i++) {
        ssize_t n = read(o->fd, buf, sizeof(buf));
        if (n <= 0)
            break;
        outpipe_feed(o, buf, (size_t)n);
    }
    if (o->plen) {
        emit_line(o->s, o->stream, o->part, o->plen);
        o->plen = 0;
    }
    if (o->paused) {
        o->paused = false;
        paused_pipes--;
    }
    ev_io_stop(H.loop, &o->io);
    close(o->fd);
    o->fd = -1;
}

void service_output_resume(void)
{
    if (!paused_pipes)
        return;
    for (size_t i = 0; i < nsvcs; i++) {
        for (int k = 0; k < 2; k++) {
            struct outpipe *o = &svcs[i].out.pipe[k];
            if (!o->paused || o->fd < 0 || (log_full && log_full(i)))
                continue;
            o->paused = false;
            paused_pipes--;
            ev_io_start(H.loop, &o->io);
        }
    }
}

/* Reads a bounded amount per wake-up so a flooding service cannot starve
 * the loop; lines longer than LOGRING_LINE_MAX are split. */
static void outpipe_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    struct outpipe *o = w->data;
    char buf[16384];
    ssize_t n;

    do
        n = read(o->fd, buf, sizeof(buf));
    while (n < 0 && errno == EINTR);
    if (n < 0 && errno == EAGAIN)
        return;
    if (n <= 0) {
        /* EOF: every writer (the service and its descendants) is gone. */
        svc_outpipe_close(o);
        return;
    }
    outpipe_feed(o, buf, (size_t)n);
    /* Back-pressure: when everyone following this service has a full
     * queue, the pipe is left unread, so the service blocks in write()
     * instead of hearth buffering its output. The loop and the other
     * services go on; service_output_resume starts reading again. */
    if (log_full && log_full((size_t)(o->s - svcs))) {
        ev_io_stop(loop, &o->io);
        o->paused = true;
        paused_pipes++;
    }
}

/* The pipes closed and the ring made from the service's log settings,
 * its file owned by the service's user. */
void svc_output_init(struct service *s)
{
    for (int k = 0; k < 2; k++) {
        s->out.pipe[k].fd = -1;
        s->out.pipe[k].s = s;
        s->out.pipe[k].stream = (enum log_stream)k;
    }
    const struct svc_log_settings *lg =
        &(s->cfg->settings ? s->cfg->settings : svc_config_defaults())->log;
    uid_t lo_uid;
    gid_t lo_gid;
    launch_owner(s->cfg, &lo_uid, &lo_gid);
    logring_init(&s->out.ring, lg->ring_lines, lg->file, lg->max_bytes, lg->keep, lo_uid, lo_gid);
}

/* rd: the read ends of the stdout and stderr pipes (-1 when there are
 * none: the output then goes to hearth's own). */
void svc_output_attach(struct service *s, const int rd[2])
{
    for (int i = 0; i < 2; i++) {
        struct outpipe *o = &s->out.pipe[i];
        o->fd = rd[i];
        o->plen = 0;
        if (o->fd < 0)
            continue;
        fcntl(o->fd, F_SETFL, O_NONBLOCK);
        ev_io_init(&o->io, outpipe_cb, o->fd, EV_READ);
        o->io.data = o;
        ev_io_start(H.loop, &o->io);
    }
}

static bool blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

/* text[0..len) without leading and trailing blanks, redacted (an
 * unfinished line is not yet), escaped for a terminal (an error is
 * printed by hearthctl and logged) into out, "..." ending it when it was
 * cut; returns its length, 0 when the line is blank. */
static size_t line_for_error(const char *text, size_t len, char *out, size_t n)
{
    static char red[LOGRING_LINE_MAX * 2];
    while (len && blank(*text)) {
        text++;
        len--;
    }
    while (len && blank(text[len - 1]))
        len--;
    if (!len)
        return 0;
    size_t rlen = redact_text(text, len, red, sizeof(red));
    if (rlen != (size_t)-1) {
        text = red;
        len = rlen;
    }
    /* Cut again three bytes shorter (termsafe_copy cuts between
     * characters and escapes, never inside one) to make room for "...". */
    if (termsafe_copy(out, n, text, len, 0) >= n && n > 4) {
        termsafe_copy(out, n - 3, text, len, 0);
        strcat(out, "...");
    }
    return strlen(out);
}

/* The last non-blank line the service wrote in this run (since out_mark):
 * what is waiting in its pipes is read first (bounded; a paused pipe stays
 * unread), and an unfinished line counts, as a program's last words often
 * lack the newline. Redacted and escaped into out (n bytes); returns its
 * length, 0 when there is none. */
size_t svc_output_last_line(struct service *s, char *out, size_t n)
{
    char buf[4096];
    if (!n)
        return 0;
    out[0] = 0;
    for (int k = 0; k < 2; k++) {
        struct outpipe *o = &s->out.pipe[k];
        for (int i = 0; o->fd >= 0 && !o->paused && i < 16; i++) {
            ssize_t r = read(o->fd, buf, sizeof(buf));
            if (r <= 0)
                break;
            outpipe_feed(o, buf, (size_t)r);
        }
    }
    for (int k = STREAM_STDERR; k >= STREAM_STDOUT; k--) {
        const struct outpipe *o = &s->out.pipe[k];
        if (o->plen && line_for_error(o->part, o->plen, out, n))
            return strlen(out);
    }
    uint64_t fresh = s->out.ring.total - s->out_mark;
    for (size_t k = 0; k < fresh; k++) {
        const struct logline *l = logring_back(&s->out.ring, k);
        if (!l)
            break;
        if (l->text && line_for_error(l->text, l->len, out, n))
            return strlen(out);
    }
    return 0;
}

void svc_output_free(struct service *s)
{
    for (int k = 0; k < 2; k++)
        svc_outpipe_close(&s->out.pipe[k]);
    logring_free(&s->out.ring);
}
