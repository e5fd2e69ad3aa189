#include "activity.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "cgroup.h"
#include "config.h"
#include "err.h"
#include "events.h"
#include "hearth.h"
#include "kfile.h"
#include "log.h"
#include "service.h"
#include "svc_config.h"

/* What hearth knows of one service's activity. */
struct svc_act {
    bool lease_ok;                /* activity.lease */
    struct activity_lease_slot lease;
    /* CPU: the leaf's usage at the last sample, and the last sample at or
     * over the threshold */
    bool cpu_have;
    uint64_t cpu_usec;
    int64_t cpu_ms;               /* 0 = never */
    double cpu_pct;
    /* output: bytes in the current window of sample_ms, and the last
     * window that reached the threshold */
    int64_t out_win_ms;
    uint64_t out_win;
    int64_t out_ms;
    uint64_t out_seen;
};

static struct {
    bool setup, on;
    int64_t idle_ms, sample_ms;
    double cpu_percent;
    uint64_t egress_bytes, output_bytes;
    struct activity_lease_rules rules;
    size_t n;
    bool busy;
    int64_t since_ms;
    int64_t last_sample_ms;       /* 0 = none yet */
    uint64_t samples;
    /* network: total bytes at the last sample, the last sample at or over
     * the threshold */
    bool net_have;
    uint64_t net_total;
    int64_t net_ms;
    uint64_t net_seen;
    int64_t net_span;
    unsigned exec;
    ev_timer sample, lease_timer;
    bool periodic;                /* sample runs every sample_ms (a subscriber listens) */
    size_t (*watchers)(void);
    unsigned long changes;
    /* last, so that a setup clears only the entries in use (see
     * activity_setup) */
    struct svc_act s[CONFIG_MAX_SERVICES];
} A;

/* ---- the lease rules ---- */

/* Copies at most max bytes of src, cut on a UTF-8 character boundary. */
static void copy_cut(char *dst, size_t dstlen, const char *src, size_t max)
{
    size_t n = src ? strlen(src) : 0;
    if (max >= dstlen)
        max = dstlen - 1;
    if (n > max) {
        n = max;
        while (n > 0 && ((unsigned char)src[n] & 0xc0) == 0x80)
            n--;
    }
    if (n)
        memcpy(dst, src, n);
    dst[n] = 0;
}

enum activity_verdict activity_lease_judge(const struct activity_lease_rules *r,
                                           struct activity_lease_slot *slot, uint64_t seconds,
                                           const char *reason, int64_t now)
{
    if (seconds == 0) {
        if (slot->until_ms <= now) {
            slot->until_ms = 0;
            return ACTIVITY_LEASE_NONE;
        }
        slot->until_ms = 0;
        slot->released++;
        return ACTIVITY_LEASE_RELEASED;
    }
    /* A service that renews in a loop gets one lease per interval: it
     * cannot make hearth log or emit at its own pace. */
    if (slot->has_last && now - slot->last_ms < r->interval_ms) {
        slot->refused++;
        return ACTIVITY_LEASE_RATE;
    }
    enum activity_verdict v = ACTIVITY_LEASE_TAKEN;
    int64_t ms;
    if (seconds > (uint64_t)(r->max_ms / 1000) + 1 || (int64_t)seconds * 1000 > r->max_ms) {
        ms = r->max_ms;
        slot->capped++;
        v = ACTIVITY_LEASE_CAPPED;
    } else {
        ms = (int64_t)seconds * 1000;
    }
    slot->until_ms = now + ms;
    slot->last_ms = now;
    slot->has_last = true;
    slot->taken++;
    copy_cut(slot->reason, sizeof(slot->reason), reason, r->reason_max);
    return v;
}

/* ---- sources ---- */

static bool recent(int64_t t, int64_t now) { return t && now - t < A.idle_ms; }

static bool lease_holds(const struct svc_act *s, int64_t now) { return s->lease.until_ms > now; }

/* Bytes received plus bytes sent from one interface's counters in
 * /proc/net/dev (the first and ninth), or 0 for a line cut short. */
static uint64_t dev_bytes(const char *p)
{
    uint64_t rx = 0;
    for (int i = 0; i < 9; i++) {
        char *end;
        unsigned long long v = strtoull(p, &end, 10);
        if (end == p)
            return 0;
        p = end;
        if (i == 0)
            rx = v;
        else if (i == 8)
            return rx + v;
    }
    return 0;
}

/* Bytes received and sent on every interface but loopback, from
 * /proc/net/dev: services share hearth's network namespace, so this is
 * their traffic (an LLM's streamed answer comes in; a request goes out). */
static int net_total(uint64_t *out)
{
    static char buf[8192];
    if (kfile_read("/proc/net/dev", buf, sizeof(buf)) <= 0)
        return -1;
    uint64_t sum = 0;
    char *line = strchr(buf, '\n');
    line = line ? strchr(line + 1, '\n') : NULL; /* two header lines */
    while (line && *++line) {
        char *colon = strchr(line, ':'), *nl = strchr(line, '\n');
        if (!colon || (nl && colon > nl))
            break;
        char *name = line;
        while (*name == ' ')
            name++;
        if (!(colon - name == 2 && strncmp(name, "lo", 2) == 0))
            sum += dev_bytes(colon + 1);
        line = nl;
    }
    *out = sum;
    return 0;
}

static void sample(int64_t now)
{
    int64_t span = A.last_sample_ms ? now - A.last_sample_ms : 0;
    const char *name, *leaf;
    uint64_t before;

    A.last_sample_ms = now;
    A.samples++;
    for (size_t i = 0; i < A.n && (leaf = service_cgroup_at(i, &name, &before)) != NULL; i++) {
        struct svc_act *s = &A.s[i];
        uint64_t v;
        if (!leaf[0] || cgroup_cpu_usec(leaf, &v) < 0) {
            s->cpu_have = false;
            continue;
        }
        v += before;
        if (s->cpu_have && span > 0 && v >= s->cpu_usec) {
            /* usec over span ms, in percent of one CPU */
            double pct = (double)(v - s->cpu_usec) / 10.0 / (double)span;
            if (pct >= A.cpu_percent) {
                s->cpu_ms = now;
                s->cpu_pct = pct;
            }
        }
        s->cpu_usec = v;
        s->cpu_have = true;
    }
    uint64_t b;
    if (net_total(&b) == 0) {
        /* The threshold is per sample period: a look after a long pause
         * (status with the sampler off) needs as many bytes per period. */
        uint64_t periods = span > A.sample_ms ? (uint64_t)(span / A.sample_ms) : 1;
        if (A.net_have && span > 0 && b >= A.net_total && b - A.net_total >= A.egress_bytes * periods) {
            A.net_ms = now;
            A.net_seen = b - A.net_total;
            A.net_span = span;
        }
        A.net_total = b;
        A.net_have = true;
    } else {
        A.net_have = false;
    }
}

/* ---- the state ---- */

static const char *svc_name(size_t i)
{
    const char *name = NULL;
    uint64_t before;
    return service_cgroup_at(i, &name, &before) && name ? name : "?";
}

static bool busy_now(int64_t now)
{
    if (A.exec || recent(A.net_ms, now))
        return true;
    for (size_t i = 0; i < A.n; i++) {
        const struct svc_act *s = &A.s[i];
        if (lease_holds(s, now) || recent(s->cpu_ms, now) || recent(s->out_ms, now))
            return true;
    }
    return false;
}

/* The lease that ends last, or -1. */
static int longest_lease(int64_t now)
{
    int best = -1;
    for (size_t i = 0; i < A.n; i++)
        if (lease_holds(&A.s[i], now) && (best < 0 || A.s[i].lease.until_ms > A.s[best].lease.until_ms))
            best = (int)i;
    return best;
}

static void add_reason(cJSON *arr, const char *source, const char *service, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void add_reason(cJSON *arr, const char *source, const char *service, const char *fmt, ...)
{
    char detail[384];
    va_list ap;
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    cJSON_AddStringToObject(o, "source", source);
    cJSON_AddStringToObject(o, "detail", detail);
    if (service)
        cJSON_AddStringToObject(o, "service", service);
    cJSON_AddItemToArray(arr, o);
}

static cJSON *reasons_json(int64_t now)
{
    cJSON *a = cJSON_CreateArray();
    if (!a)
        return NULL;
    for (size_t i = 0; i < A.n; i++) {
        const struct svc_act *s = &A.s[i];
        const char *name = svc_name(i);
        if (lease_holds(s, now))
            add_reason(a, "lease", name, "%s: %s (%" PRId64 " s left)", name,
                       s->lease.reason[0] ? s->lease.reason : "no reason given",
                       (s->lease.until_ms - now + 999) / 1000);
    }
    if (A.exec)
        add_reason(a, "exec", NULL, "%u exec session%s open", A.exec, A.exec == 1 ? "" : "s");
    for (size_t i = 0; i < A.n; i++) {
        const struct svc_act *s = &A.s[i];
        if (recent(s->cpu_ms, now))
            add_reason(a, "cpu", svc_name(i), "%s: %.0f%% of a CPU %" PRId64 " ms ago", svc_name(i),
                       s->cpu_pct, now - s->cpu_ms);
    }
    if (recent(A.net_ms, now))
        add_reason(a, "egress", NULL, "%" PRIu64 " bytes on the network in %" PRId64 " ms, %" PRId64
                   " ms ago", A.net_seen, A.net_span, now - A.net_ms);
    for (size_t i = 0; i < A.n; i++) {
        const struct svc_act *s = &A.s[i];
        if (recent(s->out_ms, now))
            add_reason(a, "output", svc_name(i), "%s: %" PRIu64 " bytes of output %" PRId64 " ms ago",
                       svc_name(i), s->out_seen, now - s->out_ms);
    }
    return a;
}

static cJSON *lease_json(int i)
{
    if (i < 0)
        return cJSON_CreateNull();
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddStringToObject(o, "service", svc_name((size_t)i));
    cJSON_AddStringToObject(o, "reason", A.s[i].lease.reason);
    cJSON_AddNumberToObject(o, "until_ms", (double)A.s[i].lease.until_ms);
    return o;
}

/* The shape both status.activity and the event carry. */
static cJSON *state_json(int64_t now)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddBoolToObject(o, "busy", A.busy);
    cJSON_AddNumberToObject(o, "since_ms", (double)A.since_ms);
    cJSON_AddItemToObject(o, "reasons", reasons_json(now));
    cJSON_AddItemToObject(o, "lease", lease_json(longest_lease(now)));
    return o;
}

/* The last moment a windowed sign (CPU, network, output) keeps the
 * sandbox busy; 0 when none is recent. */
static int64_t busy_deadline(int64_t now)
{
    int64_t last = recent(A.net_ms, now) ? A.net_ms : 0;
    for (size_t i = 0; i < A.n; i++) {
        const struct svc_act *s = &A.s[i];
        if (recent(s->cpu_ms, now) && s->cpu_ms > last)
            last = s->cpu_ms;
        if (recent(s->out_ms, now) && s->out_ms > last)
            last = s->out_ms;
    }
    return last ? last + A.idle_ms : 0;
}

/* Two ways to sample. While an event subscriber listens, every
 * sample_ms on the shared grid (a sample lands in the wake-up of any
 * other background timer whose period it divides or that divides it), so
 * work that begins is seen within a period. Otherwise, while busy, once
 * at the moment the busy spell would end: that sample spans the whole
 * spell, and CPU or network still at the threshold over it keeps the
 * sandbox busy for another idle_ms. So a busy sandbox nobody watches
 * costs one wake-up per idle_ms, an idle one none. */
static void sampler_rearm(void)
{
    if (!A.setup)
        return;
    int64_t now = mono_ms();
    bool watched = A.on && A.watchers && A.watchers() > 0;
    if (watched) {
        if (!ev_is_active(&A.sample) || !A.periodic) {
            ev_timer_stop(H.loop, &A.sample);
            ev_timer_set(&A.sample, hearth_grid_delay(A.sample_ms), 0.);
            ev_timer_start(H.loop, &A.sample);
            A.periodic = true;
        }
        return;
    }
    A.periodic = false;
    ev_timer_stop(H.loop, &A.sample);
    int64_t end = A.on && A.busy ? busy_deadline(now) : 0;
    if (!end)
        return;
    /* On the sample grid, at its first point after the deadline: output
     * that goes on for a few milliseconds after the timer was armed (it
     * is armed once per spell, not per line) then still ends within the
     * same wake-up instead of a second one, the point may be another
     * timer's, and idle is decided between idle_ms and idle_ms +
     * sample_ms, as when watched. */
    ev_timer_set(&A.sample, hearth_grid_after((double)(end - now) / 1000.0, A.sample_ms), 0.);
    ev_timer_start(H.loop, &A.sample);
}

/* The lease timer exists only while a lease holds. */
static void lease_rearm(int64_t now)
{
    int64_t first = 0;
    for (size_t i = 0; i < A.n; i++)
        if (lease_holds(&A.s[i], now) && (!first || A.s[i].lease.until_ms < first))
            first = A.s[i].lease.until_ms;
    ev_timer_stop(H.loop, &A.lease_timer);
    if (!first)
        return;
    ev_timer_set(&A.lease_timer, (double)(first - now + 1) / 1000.0, 0.);
    ev_timer_start(H.loop, &A.lease_timer);
}

static void evaluate(int64_t now)
{
    bool b = busy_now(now);
    if (b != A.busy) {
        A.busy = b;
        A.since_ms = now;
        A.changes++;
        cJSON *ev = state_json(now);
        if (b) {
            const cJSON *r0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(ev, "reasons"), 0);
            const cJSON *d = cJSON_GetObjectItemCaseSensitive(r0, "detail");
            log_info("activity: busy (%s)", cJSON_IsString(d) ? d->valuestring : "?");
        } else {
            log_info("activity: idle");
        }
        if (ev)
            events_emit("activity", ev);
    }
    sampler_rearm();
}

static void on_sample(struct ev_loop *loop, ev_timer *w, int revents)
{
    int64_t now = mono_ms();
    sample(now);
    evaluate(now);
}

/* A sign that ends by itself (a lease, the last exec session) may have
 * hidden work the sampler was not looking at: one sample over the spell
 * before judging. */
static void sample_unless_periodic(int64_t now)
{
    if (!A.periodic)
        sample(now);
}

static void on_lease(struct ev_loop *loop, ev_timer *w, int revents)
{
    int64_t now = mono_ms();
    sample_unless_periodic(now);
    for (size_t i = 0; i < A.n; i++) {
        struct svc_act *s = &A.s[i];
        if (s->lease.until_ms && s->lease.until_ms <= now) {
            s->lease.until_ms = 0;
            log_info("service %s: lease ended (%s)", svc_name(i),
                     s->lease.reason[0] ? s->lease.reason : "no reason given");
        }
    }
    lease_rearm(now);
    evaluate(now);
}

/* ---- setup and hooks ---- */

bool activity_lease_allowed(const struct service_config *sc)
{
    return sc && sc->settings && sc->settings->activity_lease;
}

void activity_setup(const struct config *cfg)
{
    struct activity_cfg dflt;
    sections_activity_extract(NULL, &dflt);
    const struct activity_cfg *a = cfg ? &cfg->activity : &dflt;

    service_set_activity_hooks(&(struct svc_activity_hooks){
        .output = activity_output, .lease = activity_lease, .down = activity_service_down});

    if (A.setup) {
        ev_timer_stop(H.loop, &A.sample);
        ev_timer_stop(H.loop, &A.lease_timer);
    }
    /* Everything before the per-service array, and of the array only what
     * a previous setup used: the rest is still the zeros it was loaded
     * with, and writing zeros over 25 KiB would make every page of it
     * resident in an idle hearth. */
    memset(A.s, 0, (A.setup ? A.n : 0) * sizeof(A.s[0]));
    memset(&A, 0, offsetof(__typeof__(A), s));
    A.on = a->enabled;
    A.idle_ms = a->idle_ms;
    A.sample_ms = a->sample_ms;
    A.cpu_percent = (double)a->cpu_percent;
    A.egress_bytes = (uint64_t)a->egress_bytes;
    A.output_bytes = (uint64_t)a->output_bytes;
    A.rules.max_ms = a->lease_max_ms;
    A.rules.interval_ms = a->lease_interval_ms;
    A.rules.reason_max = (size_t)a->lease_reason_max;
    A.n = cfg ? cfg->n_services : 0;
    for (size_t i = 0; i < A.n; i++)
        A.s[i].lease_ok = A.on && activity_lease_allowed(&cfg->services[i]);
    A.since_ms = mono_ms();
    ev_timer_init(&A.sample, on_sample, 0., 0.);
    ev_timer_init(&A.lease_timer, on_lease, 0., 0.);
    A.setup = true;
}

/* A burst of refusals is logged once: it ends with an accepted lease or
 * ACTIVITY_BURST_QUIET_MS without a refusal. Returns whether to log. */
#define ACTIVITY_BURST_QUIET_MS 10000
static bool refusal_logged(struct activity_lease_slot *l, int64_t now)
{
    bool first = !l->in_burst || now - l->refused_ms >= ACTIVITY_BURST_QUIET_MS;
    l->in_burst = true;
    l->refused_ms = now;
    return first;
}

void activity_set_watchers(size_t (*count)(void)) { A.watchers = count; }

void activity_watch(void)
{
    if (!A.setup || !A.on)
        return;
    /* The first sample only sets the baselines; judging needs a span. */
    if (!A.last_sample_ms)
        sample(mono_ms());
    sampler_rearm();
}

void activity_output(size_t idx, size_t bytes)
{
    if (!A.setup || !A.on || idx >= A.n)
        return;
    struct svc_act *s = &A.s[idx];
    int64_t now = mono_ms();
    if (now - s->out_win_ms >= A.sample_ms) {
        s->out_win_ms = now;
        s->out_win = 0;
    }
    s->out_win += bytes;
    if (s->out_win >= A.output_bytes) {
        s->out_ms = now;
        s->out_seen = s->out_win;
        if (!A.busy)
            evaluate(now);
    }
}

void activity_exec_count(unsigned n)
{
    if (!A.setup || !A.on || n == A.exec)
        return;
    A.exec = n;
    int64_t now = mono_ms();
    if (!n)
        sample_unless_periodic(now);
    evaluate(now);
}

void activity_lease(size_t idx, uint64_t seconds, const char *reason)
{
    if (!A.setup || idx >= A.n)
        return;
    struct svc_act *s = &A.s[idx];
    const char *name = svc_name(idx);
    int64_t now = mono_ms();

    if (!s->lease_ok) {
        s->lease.refused++;
        if (refusal_logged(&s->lease, now))
            log_warn("service %s: HEARTH_BUSY refused (%lu so far): %s", name, s->lease.refused,
                     A.on ? "activity.lease is not set for it" : "activity tracking is off");
        return;
    }
    bool held = lease_holds(s, now);
    enum activity_verdict v = activity_lease_judge(&A.rules, &s->lease, seconds, reason, now);
    switch (v) {
    case ACTIVITY_LEASE_RATE:
        /* Logged once per burst of refusals: a service that loops cannot
         * flood the log. */
        if (refusal_logged(&s->lease, now))
            log_warn("service %s: lease refused (%lu so far): less than %" PRId64
                     " ms after the last one", name, s->lease.refused, A.rules.interval_ms);
        return;
    case ACTIVITY_LEASE_CAPPED:
        log_info("service %s: lease of %" PRIu64 " s cut to %" PRId64 " s (activity.lease_max_ms): %s",
                 name, seconds, A.rules.max_ms / 1000, s->lease.reason);
        break;
    case ACTIVITY_LEASE_TAKEN:
        /* A renewal is routine: only a new lease is worth an info line. */
        if (held)
            log_debug("service %s: lease renewed for %" PRIu64 " s: %s", name, seconds,
                      s->lease.reason);
        else
            log_info("service %s: busy for %" PRIu64 " s: %s", name, seconds, s->lease.reason);
        break;
    case ACTIVITY_LEASE_RELEASED:
        log_info("service %s: lease released", name);
        sample_unless_periodic(now);
        break;
    case ACTIVITY_LEASE_NONE:
        break;
    }
    s->lease.in_burst = false;
    lease_rearm(now);
    evaluate(now);
}

void activity_service_down(size_t idx)
{
    if (!A.setup || idx >= A.n)
        return;
    struct svc_act *s = &A.s[idx];
    int64_t now = mono_ms();
    if (!lease_holds(s, now))
        return;
    s->lease.until_ms = 0;
    log_info("service %s: lease ended with the service", svc_name(idx));
    sample_unless_periodic(now);
    lease_rearm(now);
    evaluate(now);
}

cJSON *activity_json(void)
{
    int64_t now = mono_ms();
    if (A.setup && A.on && !A.periodic) {
        sample(now);
        evaluate(now);
    }
    cJSON *o = state_json(now);
    if (!o)
        return NULL;
    cJSON_AddBoolToObject(o, "enabled", A.on);
    cJSON_AddStringToObject(o, "sampling", !A.setup || !ev_is_active(&A.sample) ? "off"
                                           : A.periodic ? "periodic" : "at_deadline");
    cJSON_AddNumberToObject(o, "idle_ms", (double)A.idle_ms);
    cJSON_AddNumberToObject(o, "samples", (double)A.samples);
    cJSON_AddNumberToObject(o, "changes", (double)A.changes);
    cJSON_AddNumberToObject(o, "exec_sessions", A.exec);
    cJSON *leases = cJSON_AddArrayToObject(o, "leases");
    for (size_t i = 0; leases && i < A.n; i++) {
        const struct svc_act *s = &A.s[i];
        if (!s->lease_ok && !s->lease.refused)
            continue;
        cJSON *l = cJSON_CreateObject();
        if (!l)
            break;
        cJSON_AddItemToArray(leases, l);
        cJSON_AddStringToObject(l, "service", svc_name(i));
        cJSON_AddBoolToObject(l, "allowed", s->lease_ok);
        cJSON_AddBoolToObject(l, "holds", lease_holds(s, now));
        if (lease_holds(s, now)) {
            cJSON_AddStringToObject(l, "reason", s->lease.reason);
            cJSON_AddNumberToObject(l, "until_ms", (double)s->lease.until_ms);
        }
        cJSON_AddNumberToObject(l, "taken", (double)s->lease.taken);
        cJSON_AddNumberToObject(l, "refused", (double)s->lease.refused);
        cJSON_AddNumberToObject(l, "capped", (double)s->lease.capped);
        cJSON_AddNumberToObject(l, "released", (double)s->lease.released);
    }
    return o;
}

int activity_freeze_check(struct err *err, cJSON **data)
{
    int64_t now = mono_ms();
    int i = A.setup ? longest_lease(now) : -1;
    if (i < 0)
        return 0;
    const struct svc_act *s = &A.s[i];
    int64_t left = s->lease.until_ms - now;
    unsigned others = 0;
    for (size_t j = 0; j < A.n; j++)
        others += (int)j != i && lease_holds(&A.s[j], now);
    char more[48] = "";
    if (others)
        snprintf(more, sizeof(more), " (and %u other lease%s)", others, others == 1 ? "" : "s");
    err_set(err, "service %s holds a lease%s: \"%s\", %" PRId64 " s left; "
            "force: true freezes anyway", svc_name((size_t)i), more,
            s->lease.reason[0] ? s->lease.reason : "no reason given", (left + 999) / 1000);
    if (data) {
        *data = cJSON_CreateObject();
        if (*data) {
            cJSON_AddStringToObject(*data, "service", svc_name((size_t)i));
            cJSON_AddStringToObject(*data, "reason", s->lease.reason);
            cJSON_AddNumberToObject(*data, "until_ms", (double)s->lease.until_ms);
            cJSON_AddNumberToObject(*data, "left_ms", (double)left);
        }
    }
    return -1;
}
