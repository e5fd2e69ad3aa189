/* A service's readiness (between exec and "running") and health (periodic
 * probes while running, or the watchdog's deadline) checks. */
#include "service_priv.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>
#include <ev.h>

#include "check.h"
#include "err.h"
#include "events.h"
#include "hearth.h"
#include "launch.h"
#include "log.h"
#include "svc_config.h"

/* ---- where exec probes run ---- */

static bool has_exec_probe(const struct service *s)
{
    return (s->ready.on && !s->ready.notify_fd && !s->ready.notify &&
            s->ready.spec.kind == CHECK_EXEC) ||
           (s->health.on && !s->health.watchdog_ms && s->health.spec.kind == CHECK_EXEC);
}

void svc_probe_free(struct service *s)
{
    if (!s->probe_plan)
        return;
    launch_free(s->probe_plan);
    free(s->probe_plan);
    s->probe_plan = NULL;
}

/* An exec probe runs as the service's main process started: this run's
 * plan (identity, capabilities, seccomp, no_new_privs, environment) is
 * kept for it, without what belongs to the start alone: the namespace
 * template, and the NOTIFY_SOCKET variables hearth set (a probe is not
 * the service's voice). Takes plan's environment in either case. */
void svc_probe_keep_plan(struct service *s, struct launch_plan *plan)
{
    static const char *const keys[] = {"NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"};

    svc_probe_free(s);
    if (!has_exec_probe(s)) {
        launch_free(plan);
        return;
    }
    s->probe_plan = malloc(sizeof(*s->probe_plan));
    if (!s->probe_plan) {
        log_warn("service %s: no memory to keep its plan: its exec probes cannot run",
                 s->cfg->name);
        launch_free(plan);
        return;
    }
    *s->probe_plan = *plan;
    s->probe_plan->contain.ns_fd = s->probe_plan->contain.snap_fd = -1;
    s->probe_plan->contain.join = false;
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        bool own = false;
        for (size_t j = 0; j < s->cfg->n_env && !own; j++)
            own = strcmp(s->cfg->env[j].key, keys[i]) == 0;
        /* Out of memory here leaves the variable: the sender check
         * still refuses a probe's messages. */
        if (!own && launch_env_set(s->probe_plan, keys[i], NULL) < 0)
            log_warn("service %s: unable to drop %s from its probes' environment", s->cfg->name,
                     keys[i]);
    }
}

/* Any probe; an exec probe where and as what the service runs. */
static struct check *probe_start(struct service *s, const struct check_spec *spec,
                                 check_done_fn done, struct err *err)
{
    struct check_exec how = {s->probe_plan, s->cfg->cwd, s->leaf.path, s->pid};
    return check_start(H.loop, spec, &how, done, s, err);
}

void svc_ready_cancel(struct service *s)
{
    check_cancel(s->ready.probe);
    s->ready.probe = NULL;
    ev_timer_stop(H.loop, &s->ready.timer);
}

void svc_ready_give_up(struct service *s, const char *detail)
{
    s->ready.probe_error = false;
    if (s->ready.extended)
        snprintf(s->error, sizeof(s->error),
                 "not ready after %lld ms (deadline extended by EXTEND_TIMEOUT_USEC): %s",
                 (long long)(mono_ms() - s->since_ms), detail);
    else
        snprintf(s->error, sizeof(s->error), "not ready after %lld ms: %s",
                 (long long)s->ready.timeout_ms, detail);
    log_warn("service %s: %s; killing it", s->cfg->name, s->error);
    svc_signal_group(s, SIGKILL);
    if (s->leaf.path[0])
        svc_leaf_kill(s);
    /* the exit goes on through the reaper into backoff */
}

static void ready_done(void *ctx, bool ok, const char *detail)
{
    struct service *s = ctx;
    s->ready.probe = NULL;
    if (s->state != SVC_STARTING)
        return;
    if (ok) {
        svc_post(s, E_READY);
        return;
    }
    /* Frozen: a failed probe says nothing; service_suspend(false) tries
     * again with the deadline moved by the frozen time. */
    if (svc_suspended)
        return;
    if (s->ready.timeout_ms && mono_ms() >= s->ready.deadline) {
        /* An attempt the deadline shortened mostly says it ran out of
         * time ("timed out after 37 ms"): the last whole attempt's answer
         * says more. */
        if (s->ready.cut && s->ready.why[0]) {
            char why[sizeof(s->ready.why) + 40];
            snprintf(why, sizeof(why), "%s (last whole attempt)", s->ready.why);
            svc_ready_give_up(s, why);
        } else {
            svc_ready_give_up(s, detail);
        }
        return;
    }
    snprintf(s->ready.why, sizeof(s->ready.why), "%s", detail);
    /* Poll again shortly: readiness usually comes within seconds. */
    ev_timer_set(&s->ready.timer, 0.2, 0.);
    ev_timer_start(H.loop, &s->ready.timer);
}

static void ready_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct service *s = w->data;
    if (svc_suspended)
        return; /* held until the thaw */
    if (s->ready.notify_fd) {
        char why[64];
        snprintf(why, sizeof(why), "no line on notify_fd %d", s->ready.notify_fd);
        svc_ready_give_up(s, why);
        return;
    }
    if (s->ready.notify) {
        char why[sizeof(s->n.status) + 64];
        snprintf(why, sizeof(why), "no READY=1 on NOTIFY_SOCKET%s%s%s",
                 s->n.status[0] ? " (last STATUS=" : "", s->n.status, s->n.status[0] ? ")" : "");
        svc_ready_give_up(s, why);
        return;
    }
    svc_ready_attempt(s);
}

/* notify_fd, notify: no probing, only the overall deadline (if any). */
void svc_ready_arm_deadline(struct service *s)
{
    int64_t left = s->ready.deadline - mono_ms();
    ev_timer_stop(H.loop, &s->ready.timer);
    if (!s->ready.timeout_ms)
        return;
    ev_timer_set(&s->ready.timer, (double)(left > 0 ? left : 0) / 1000.0, 0.);
    ev_timer_start(H.loop, &s->ready.timer);
}

void svc_ready_attempt(struct service *s)
{
    struct err err;
    if (s->ready.notify_fd || s->ready.notify) {
        svc_ready_arm_deadline(s);
        return;
    }
    struct check_spec spec = s->ready.spec;
    spec.argv = spec.argv ? s->ready.spec.argv_store : NULL;
    /* One attempt never outlasts the overall deadline (or 1 s; an HTTP
     * answer is the application's work, so it gets the probe default). */
    int64_t cap = spec.kind == CHECK_HTTP ? CHECK_DEFAULT_TIMEOUT_MS : 1000;
    int64_t left = s->ready.timeout_ms ? s->ready.deadline - mono_ms() : cap;
    /* An attempt the deadline would cut to a few milliseconds says only
     * that time ran out: the last whole attempt's answer is the reason. */
    if (s->ready.timeout_ms && left < 50 && s->ready.why[0]) {
        svc_ready_give_up(s, s->ready.why);
        return;
    }
    spec.timeout_ms = left < 1 ? 1 : left > cap ? cap : left;
    s->ready.cut = spec.timeout_ms < cap;
    s->ready.probe = probe_start(s, &spec, ready_done, &err);
    if (!s->ready.probe) {
        snprintf(s->error, sizeof(s->error), "readiness check: %s", err.msg);
        s->ready.probe_error = true;
        log_warn("service %s: %s", s->cfg->name, s->error);
        ev_timer_set(&s->ready.timer, 1.0, 0.);
        ev_timer_start(H.loop, &s->ready.timer);
    }
}

/* ---- health: periodic probes while running ---- */

/* "starting" until the first probe ends, then "healthy" or "failing"
 * (some consecutive failures, fewer than the threshold) and "unhealthy"
 * once it is being restarted for it. */
const char *svc_health_status(const struct service *s)
{
    if (s->unhealthy_stop)
        return "unhealthy";
    if (s->state != SVC_RUNNING)
        return "off";
    if (svc_suspended)
        return "suspended";
    if (!s->health.last_ms)
        return "starting";
    return s->health.fails ? "failing" : "healthy";
}

void svc_health_event(struct service *s, const char *action)
{
    cJSON *p = cJSON_CreateObject();
    if (p) {
        cJSON_AddStringToObject(p, "service", s->cfg->name);
        cJSON_AddStringToObject(p, "status", svc_health_status(s));
        cJSON_AddNumberToObject(p, "failures", s->health.fails);
        cJSON_AddNumberToObject(p, "threshold", s->health.threshold);
        if (s->health.fails && s->health.detail[0])
            cJSON_AddStringToObject(p, "detail", s->health.detail);
        if (s->health.watchdog_ms)
            cJSON_AddStringToObject(p, "cause", "watchdog");
        if (action)
            cJSON_AddStringToObject(p, "action", action);
    }
    events_emit("service.health", p);
}

void svc_health_stop(struct service *s)
{
    check_cancel(s->health.probe);
    s->health.probe = NULL;
    ev_timer_stop(H.loop, &s->health.timer);
}

/* The next probe in ms; nothing while suspended (the resume re-arms it).
 * With health.watchdog_ms the same timer is the ping deadline instead:
 * exactly watchdog_ms from now (not on the grid), whatever ms says. */
void svc_health_arm(struct service *s, int64_t ms)
{
    ev_timer_stop(H.loop, &s->health.timer);
    if (!s->health.on || s->state != SVC_RUNNING || svc_suspended || s->health.probe)
        return;
    ev_timer_set(&s->health.timer,
                 s->health.watchdog_ms ? (double)s->health.watchdog_ms / 1000.0
                                       : hearth_grid_delay(ms),
                 0.);
    ev_timer_start(H.loop, &s->health.timer);
}

static void health_done(void *ctx, bool ok, const char *detail)
{
    struct service *s = ctx;
    s->health.probe = NULL;
    svc_health_result(s, ok, detail);
}

/* One check's outcome, from a probe or from the watchdog (a ping passes,
 * a missed deadline or WATCHDOG=trigger fails): counted, reported, and
 * the next check armed; the threshold stops the service. */
void svc_health_result(struct service *s, bool ok, const char *detail)
{
    if (s->state != SVC_RUNNING || svc_suspended || !s->health.on)
        return;
    s->health.checks++;
    s->health.last_ms = mono_ms();
    if (ok) {
        bool was = s->health.fails > 0 || s->health.checks == 1;
        s->health.fails = 0;
        if (was) {
            log_info("service %s: healthy", s->cfg->name);
            svc_health_event(s, NULL);
        }
    } else {
        s->health.fails++;
        snprintf(s->health.detail, sizeof(s->health.detail), "%s", detail ? detail : "failed");
        log_warn("service %s: health check failed (%u of %u): %s", s->cfg->name, s->health.fails,
                 s->health.threshold, s->health.detail);
        if (s->health.fails >= s->health.threshold) {
            if (s->health.watchdog_ms)
                s->cause = "watchdog";
            svc_post(s, E_UNHEALTHY);
            return;
        }
        svc_health_event(s, NULL);
    }
    svc_health_arm(s, s->health.interval_ms);
}

static void health_attempt(struct service *s)
{
    struct err err;
    struct check_spec spec = s->health.spec;
    spec.argv = spec.argv ? s->health.spec.argv_store : NULL;
    s->health.probe = probe_start(s, &spec, health_done, &err);
    if (!s->health.probe) {
        /* hearth could not even run the probe (no fd, no fork): that says
         * nothing about the service, so it does not count as a failure. */
        log_warn("service %s: unable to start the health check: %s", s->cfg->name, err.msg);
        svc_health_arm(s, s->health.interval_ms);
    }
}

static void health_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct service *s = w->data;
    if (s->health.watchdog_ms) {
        char why[96];
        snprintf(why, sizeof(why), "no WATCHDOG=1 within %lld ms", (long long)s->health.watchdog_ms);
        svc_health_result(s, false, why);
        return;
    }
    if (s->state == SVC_RUNNING && !svc_suspended && !s->health.probe)
        health_attempt(s);
}

/* Probing runs exactly while the service is running: the first probe one
 * interval after it became running (ready), none in any other state. */
void svc_health_on_state(struct service *s, enum svc_state from, enum svc_state to)
{
    if (!s->health.on)
        return;
    if (from == SVC_RUNNING)
        svc_health_stop(s);
    if (to == SVC_RUNNING) {
        s->health.fails = 0;
        s->health.checks = 0;
        s->health.last_ms = 0;
        s->health.detail[0] = 0;
        svc_health_arm(s, s->health.interval_ms);
    }
}

/* The timers, and the ready and health checks from the typed config (a
 * copy of each spec, its argv pointed at the copy's own store). */
void svc_probe_init(struct service *s)
{
    const struct svc_settings *st = s->cfg->settings ? s->cfg->settings : svc_config_defaults();
    const struct svc_check_settings *r = &st->ready, *h = &st->health;

    ev_timer_init(&s->ready.timer, ready_timer_cb, 0., 0.);
    s->ready.timer.data = s;
    if (r->given && r->error[0]) {
        log_warn("service %s: ready: %s", s->cfg->name, r->error);
    } else if (r->given) {
        s->ready.spec = r->spec;
        s->ready.spec.argv = r->spec.argv ? s->ready.spec.argv_store : NULL;
        s->ready.on = true;
        s->ready.timeout_ms = r->spec.timeout_ms;
        s->ready.attempts = r->attempts;
        if (r->listens) {
            s->ready.notify_fd = r->spec.notify_fd;
            s->ready.notify = r->spec.notify;
        }
    }
    ev_timer_init(&s->health.timer, health_timer_cb, 0., 0.);
    s->health.timer.data = s;
    if (h->given && !h->error[0] && (!h->listens || h->spec.watchdog_ms > 0)) {
        s->health.spec = h->spec;
        s->health.spec.argv = h->spec.argv ? s->health.spec.argv_store : NULL;
        s->health.on = true;
        s->health.watchdog_ms = h->spec.watchdog_ms;
        s->health.interval_ms = h->interval_ms;
        s->health.threshold = h->failures;
    } else if (h->given) {
        log_warn("service %s: health: %s", s->cfg->name, h->error);
    }
}
