#include "service_priv.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cJSON.h>
#include <ev.h>

#include "contain.h"
#include "err.h"
#include "events.h"
#include "gates.h"
#include "hearth.h"
#include "launch.h"
#include "log.h"

static const char *const event_names[] = {"start", "stop", "exec", "exit", "timer", "deps", "ready", "unhealthy"};

static int main_index;
static void (*main_done_fn)(int);
static void (*stop_all_done)(void);
static int stop_all_next = -1; /* position in order[] being stopped during stop_all */
static int order[CONFIG_MAX_SERVICES]; /* dependency order: each after what it needs */

/* When the suspension (svc_suspended, svc_base.c) began, in mono_ms. */
static int64_t suspended_at;

static const char *const state_names[SVC_NSTATES] = {
    "stopped", "waiting", "starting", "running", "stopping", "backoff", "failed", "exited",
};

const char *service_state_name(enum svc_state s)
{
    return (unsigned)s < SVC_NSTATES ? state_names[s] : "?";
}

static bool exit_is_success(const struct service *s)
{
    if (!WIFEXITED(s->wstatus))
        return false;
    int code = WEXITSTATUS(s->wstatus);
    for (size_t i = 0; i < s->cfg->n_success; i++)
        if (s->cfg->success_exit_codes[i] == code)
            return true;
    return false;
}

static cJSON *exit_json(const struct service *s)
{
    if (!s->has_exit)
        return cJSON_CreateNull();
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    if (WIFEXITED(s->wstatus)) {
        cJSON_AddNumberToObject(o, "code", WEXITSTATUS(s->wstatus));
    } else if (WIFSIGNALED(s->wstatus)) {
        const char *n = names_signal_name(WTERMSIG(s->wstatus));
        if (n)
            cJSON_AddStringToObject(o, "signal", n);
        else
            cJSON_AddNumberToObject(o, "signal", WTERMSIG(s->wstatus));
        if (s->exit_oom)
            cJSON_AddStringToObject(o, "reason", "oom-killed");
    }
    return o;
}

static void set_state(struct service *s, enum svc_state to)
{
    enum svc_state from = s->state;
    if (from == to)
        return;
    s->state = to;
    s->since_ms = mono_ms();
    svc_health_on_state(s, from, to);
    log_info("service %s: %s -> %s%s%s", s->cfg->name, state_names[from], state_names[to],
             s->error[0] && (to == SVC_FAILED || to == SVC_BACKOFF) ? ": " : "",
             s->error[0] && (to == SVC_FAILED || to == SVC_BACKOFF) ? s->error : "");
    cJSON *p = cJSON_CreateObject();
    if (p) {
        cJSON_AddStringToObject(p, "service", s->cfg->name);
        cJSON_AddStringToObject(p, "state", state_names[to]);
        cJSON_AddStringToObject(p, "from", state_names[from]);
        cJSON_AddNumberToObject(p, "pid", s->pid);
        cJSON_AddNumberToObject(p, "restarts", s->restarts);
        /* Every end of a run: from stopping (a graceful restart goes on
         * to starting) as well as into a resting state. */
        if (to == SVC_BACKOFF || to == SVC_FAILED || to == SVC_EXITED || to == SVC_STOPPED ||
            from == SVC_STOPPING)
            cJSON_AddItemToObject(p, "last_exit", exit_json(s));
        if (s->ready.failed_starts && (to == SVC_BACKOFF || to == SVC_FAILED))
            cJSON_AddNumberToObject(p, "failed_starts", s->ready.failed_starts);
        if (s->error[0])
            cJSON_AddStringToObject(p, "error", s->error);
        if (s->cause)
            cJSON_AddStringToObject(p, "cause", s->cause);
    }
    s->cause = NULL;
    events_emit("service.state", p);
}

static void svc_dispatch(struct service *s, enum svc_event ev);

static void timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    svc_dispatch(w->data, E_TIMER);
}

/* ---- actions: each returns the next state ---- */

typedef enum svc_state (*action_fn)(struct service *s);

static enum svc_state a_spawn(struct service *s)
{
    s->held = false;
    s->ready.probe_error = false;
    if (svc_spawn(s) < 0) {
        log_error("service %s: %s", s->cfg->name, s->error);
        return SVC_FAILED;
    }
    return SVC_STARTING;
}

static enum svc_state a_unhealthy(struct service *s)
{
    snprintf(s->error, sizeof(s->error), "unhealthy: %u health checks failed in a row: %s",
             s->health.fails, s->health.detail);
    log_warn("service %s: %s; stopping it", s->cfg->name, s->error);
    s->unhealthy_stop = true;
    svc_health_event(s, s->cfg->restart == RESTART_NEVER ? "stop" : "restart");
    ev_timer_stop(H.loop, &s->timer);
    s->stop_began_ms = mono_ms();
    svc_signal_group(s, s->cfg->stop_signal);
    svc_timer_start(s, s->cfg->stop_timeout_ms);
    return SVC_STOPPING;
}

static enum svc_state a_running(struct service *s)
{
    if (s->ready.on) {
        /* exec worked; "running" waits for the readiness check (after the
         * resume, when suspended). */
        s->ready.deadline = mono_ms() + s->ready.timeout_ms;
        s->ready.extended = false;
        s->ready.why[0] = 0;
        if (!svc_suspended)
            svc_ready_attempt(s);
        return SVC_STARTING;
    }
    s->started_ms = mono_ms();
    return SVC_RUNNING;
}

static enum svc_state a_ready(struct service *s)
{
    svc_ready_cancel(s);
    s->error[0] = 0;
    s->ready.failed_starts = 0;
    s->started_ms = mono_ms();
    return SVC_RUNNING;
}

static enum svc_state a_stop(struct service *s)
{
    /* A graceful restart asks with its own signal (Hermes: SIGUSR1, drain,
     * exit 75); the timeout and the kill after it are the stop's. */
    int sig = s->restart_signal ? s->restart_signal : s->cfg->stop_signal;
    s->restart_signal = 0;
    svc_ready_cancel(s);
    ev_timer_stop(H.loop, &s->timer);
    s->stop_began_ms = mono_ms();
    svc_signal_group(s, sig);
    svc_timer_start(s, s->cfg->stop_timeout_ms);
    return SVC_STOPPING;
}

static enum svc_state a_cancel(struct service *s)
{
    ev_timer_stop(H.loop, &s->timer);
    /* A backoff cut short by a revoked gate waits for the gate again. */
    return s->held ? SVC_WAITING : SVC_STOPPED;
}

static enum svc_state a_kill(struct service *s)
{
    log_warn("service %s: no exit %lld ms after it was asked to stop, killing", s->cfg->name,
             (long long)s->cfg->stop_timeout_ms);
    s->killed = true;
    svc_signal_group(s, SIGKILL);
    if (s->leaf.path[0])
        svc_leaf_kill(s);
    return SVC_STOPPING;
}

/* Capped exponential backoff with +-10% jitter (so a fleet of sandboxes
 * does not restart in lockstep); it starts again from initial_ms once the
 * service has run reset_after_ms without failing. */
static int64_t backoff_delay(struct service *s)
{
    const struct service_config *c = s->cfg;
    if (s->started_ms && mono_ms() - s->started_ms >= c->backoff_reset_ms)
        s->fails = 0;
    int64_t d = c->backoff_initial_ms;
    for (unsigned i = 0; i < s->fails && d < c->backoff_max_ms; i++)
        d *= 2;
    if (d > c->backoff_max_ms)
        d = c->backoff_max_ms;
    s->fails++;
    if (d >= 10) {
        /* ±10%, drawn from the kernel's generator: clones of one snapshot
         * (reseeded by the kernel on restore) do not restart their
         * services in lockstep. Before the generator is seeded, the clock's
         * nanoseconds are as good for spreading restarts. */
        uint32_t r;
        if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r))
            r = (uint32_t)mono_ns();
        int64_t span = d / 5;
        d += (int64_t)(r % (uint64_t)(span + 1)) - span / 2;
    }
    return d < 0 ? 0 : d;
}

/* "exited with code N", "killed by SIGSEGV": the end of the last run. */
static void exit_text(const struct service *s, char *buf, size_t n)
{
    buf[0] = 0;
    if (WIFEXITED(s->wstatus))
        snprintf(buf, n, "exited with code %d", WEXITSTATUS(s->wstatus));
    else if (WIFSIGNALED(s->wstatus))
        snprintf(buf, n, "killed by %s%s", names_signal_name(WTERMSIG(s->wstatus)) ?: "signal",
                 s->exit_oom ? " (out of memory)" : "");
}

/* A start that ended before it was ready: its reason is the error that
 * is already there (the readiness deadline, a failed exec), else how it
 * ended and the last line it wrote, which is usually why (a usage
 * message, a refused flag). */
static void unready_reason(struct service *s)
{
    char how[64], line[160];
    /* hearth failing to run a probe says nothing of why the program ended. */
    if (s->error[0] && !s->ready.probe_error)
        return;
    exit_text(s, how, sizeof(how));
    size_t n = svc_output_last_line(s, line, sizeof(line));
    snprintf(s->error, sizeof(s->error), "%s before ready%s%s", how, n ? ": " : "", n ? line : "");
}

/* What follows the end of the main process: ok forced false when it was
 * stopped for failing its health check, whatever it exited with. code is
 * the exit code of an exit the service chose (-1 otherwise): only those
 * are judged by restart_force_exit_codes and restart_prevent_exit_codes.
 * unready: the run never became ready (counted against ready.attempts). */
static enum svc_state exit_policy(struct service *s, bool ok, int code, bool unready)
{
    svc_ready_cancel(s);
    svc_notify_close(s);
    /* The exit may be seen before the inotify news of why. */
    svc_oom_check(s);
    svc_sweep(s);
    if (unready)
        unready_reason(s);
    else if (s->error[0] == 0 && !ok)
        exit_text(s, s->error, sizeof(s->error));
    if (s->restart_pending) {
        s->restart_pending = false;
        return a_spawn(s);
    }
    if (unready)
        s->ready.failed_starts++;
    if (config_code_in(s->cfg->prevent_exit, code)) {
        /* systemd's RestartPreventExitStatus: the service said a restart
         * cannot help (Hermes: 78, a configuration error). */
        snprintf(s->error, sizeof(s->error),
                 "exited with code %d, listed in restart_prevent_exit_codes: not restarted", code);
        return SVC_FAILED;
    }
    if (unready && s->ready.attempts && s->ready.failed_starts >= s->ready.attempts) {
        /* A service that never becomes ready would otherwise be started
         * for ever, each time for up to ready.timeout_ms: failed says
         * it, with the last start's reason, whatever restart says. */
        char last[sizeof(s->error)];
        snprintf(last, sizeof(last), "%s", s->error);
        snprintf(s->error, sizeof(s->error),
                 "gave up after %u start%s in a row that never became ready (ready.attempts); "
                 "the last: %s",
                 s->ready.failed_starts, s->ready.failed_starts == 1 ? "" : "s", last);
        return SVC_FAILED;
    }
    if (config_code_in(s->cfg->force_exit, code)) {
        /* systemd's RestartForceExitStatus: the service asked to be
         * restarted (Hermes: 75). Whatever restart says, after the first
         * delay, and the backoff does not grow: this is no crash. */
        snprintf(s->error, sizeof(s->error),
                 "exited with code %d, listed in restart_force_exit_codes: restarting", code);
        s->restarts++;
        if (svc_suspended)
            s->suspend_left_ms = s->cfg->backoff_initial_ms;
        else
            svc_timer_start(s, s->cfg->backoff_initial_ms);
        return SVC_BACKOFF;
    }
    if (s->cfg->restart == RESTART_ALWAYS || (s->cfg->restart == RESTART_ON_FAILURE && !ok)) {
        s->restarts++;
        int64_t d = backoff_delay(s);
        if (svc_suspended)
            s->suspend_left_ms = d; /* the resume starts the timer */
        else
            svc_timer_start(s, d);
        return SVC_BACKOFF;
    }
    return ok ? SVC_EXITED : SVC_FAILED;
}

static enum svc_state a_exited(struct service *s)
{
    /* Still starting with a readiness check: it never became ready (or
     * its exec failed). Without one, exec alone makes it running. */
    bool unready = s->state == SVC_STARTING && s->ready.on;
    return exit_policy(s, exit_is_success(s), WIFEXITED(s->wstatus) ? WEXITSTATUS(s->wstatus) : -1,
                       unready);
}

static enum svc_state a_start(struct service *s);

static enum svc_state a_stopped(struct service *s)
{
    ev_timer_stop(H.loop, &s->timer);
    if (s->held) {
        /* Stopped because a gate it runs on was revoked: no failure, and
         * it starts again once the gate is back (at once if it already is). */
        svc_notify_close(s);
        svc_sweep(s);
        s->fails = 0;
        return a_start(s);
    }
    if (s->unhealthy_stop) {
        /* Stopped for its health: restart (or not) as its policy says. */
        s->unhealthy_stop = false;
        return exit_policy(s, false, -1, false);
    }
    svc_notify_close(s);
    svc_sweep(s);
    s->fails = 0;
    if (s->restart_pending) {
        s->restart_pending = false;
        return a_spawn(s);
    }
    return SVC_STOPPED;
}

static struct service *find(const char *name);

/* The first thing s is "after" that is not up yet, or NULL. A service is
 * up when running, or when it exited successfully (a one-shot setup job).
 * A gate is up once its module has marked it reached. */
static const char *unmet_dep(const struct service *s)
{
    for (size_t i = 0; i < s->cfg->n_after; i++) {
        const char *a = s->cfg->after[i];
        if (gate_known(a)) {
            if (!gate_reached(a))
                return a;
            continue;
        }
        const struct service *d = find(a);
        if (d && d->state != SVC_RUNNING && d->state != SVC_EXITED)
            return a;
    }
    return NULL;
}

static enum svc_state a_start(struct service *s)
{
    const char *dep = unmet_dep(s);
    if (dep) {
        log_debug("service %s: waiting for %s", s->cfg->name, dep);
        return SVC_WAITING;
    }
    return a_spawn(s);
}

/* The table: what each event does in each state. NULL = ignored. */
static const action_fn table[SVC_NSTATES][E_NEVENTS] = {
    /*               START     STOP      EXEC_OK    EXIT       TIMER    DEPS     READY    UNHEALTHY */
    [SVC_STOPPED]  = {a_start, NULL,     NULL,      NULL,      NULL,    NULL,    NULL,    NULL},
    [SVC_WAITING]  = {NULL,    a_cancel, NULL,      NULL,      NULL,    a_spawn, NULL,    NULL},
    [SVC_STARTING] = {NULL,    a_stop,   a_running, a_exited,  NULL,    NULL,    a_ready, NULL},
    [SVC_RUNNING]  = {NULL,    a_stop,   NULL,      a_exited,  NULL,    NULL,    NULL,    a_unhealthy},
    [SVC_STOPPING] = {NULL,    NULL,     NULL,      a_stopped, a_kill,  NULL,    NULL,    NULL},
    [SVC_BACKOFF]  = {NULL,    a_cancel, NULL,      NULL,      a_spawn, NULL,    NULL,    NULL},
    [SVC_FAILED]   = {a_start, NULL,     NULL,      NULL,      NULL,    NULL,    NULL,    NULL},
    [SVC_EXITED]   = {a_start, NULL,     NULL,      NULL,      NULL,    NULL,    NULL,    NULL},
};

static void after_transition(struct service *s);
static void release_waiting(void);

static void svc_dispatch(struct service *s, enum svc_event ev)
{
    action_fn fn = table[s->state][ev];
    if (!fn) {
        log_debug("service %s: %s ignored in %s", s->cfg->name, event_names[ev],
                  state_names[s->state]);
        return;
    }
    set_state(s, fn(s));
    s->cause = NULL;
    after_transition(s);
}

static bool is_down(const struct service *s)
{
    return s->pid == 0 && s->state != SVC_STARTING && s->state != SVC_STOPPING;
}

static void stop_next(void);

static void after_transition(struct service *s)
{
    int idx = (int)(s - svcs);

    /* A main service that will not run again ends a container. */
    if (idx == main_index && (s->state == SVC_FAILED || s->state == SVC_EXITED) &&
        main_done_fn && stop_all_next < 0)
        main_done_fn(service_main_status());
    if (stop_all_next >= 0 && idx == order[stop_all_next] && is_down(s))
        stop_next();
    /* Something came up: release those that were waiting for it. */
    if ((s->state == SVC_RUNNING || s->state == SVC_EXITED) && stop_all_next < 0)
        release_waiting();
}

static void release_waiting(void)
{
    for (size_t i = 0; i < nsvcs; i++) {
        struct service *w = &svcs[order[i]];
        if (w->state == SVC_WAITING && !unmet_dep(w))
            svc_dispatch(w, E_DEPS);
    }
}

/* Whether s is after gate, directly or through a service in held[]. */
static bool runs_on(const struct service *s, const char *gate, const bool *held)
{
    for (size_t i = 0; i < s->cfg->n_after; i++) {
        const char *a = s->cfg->after[i];
        if (strcmp(a, gate) == 0)
            return true;
        const struct service *d = find(a);
        if (d && held[d - svcs])
            return true;
    }
    return false;
}

/* A revoked gate (a platform's mount gone from under the agent): every
 * service after it, directly or through another such service, that runs
 * or would run is stopped and waits for the gate again, so nothing keeps
 * writing into what the mount had hidden. Not a failure: no restart is
 * counted and the backoff does not grow. One that had failed waits for
 * the gate too and gets a fresh start once it is back: what it failed on
 * may well have been the files going from under it before hearth saw the
 * mount go. Those stopped on purpose or exited (a one-shot job done) are
 * left as they are. */
static void hold_dependents(const char *gate, const char *why)
{
    bool held[CONFIG_MAX_SERVICES] = {0};

    for (size_t i = 0; i < nsvcs; i++) {
        struct service *s = &svcs[order[i]]; /* each after what it needs */
        if (!runs_on(s, gate, held))
            continue;
        held[order[i]] = true;
        if (s->state == SVC_FAILED) {
            log_warn("service %s: failed; started again once %s is reached again: %s",
                     s->cfg->name, gate, why);
            s->fails = 0;
            s->cause = "revoked";
            svc_dispatch(s, E_START); /* the gate is down: waiting */
            continue;
        }
        if (s->state == SVC_STOPPED || s->state == SVC_EXITED || s->state == SVC_WAITING)
            continue;
        s->held = true;
        s->restart_pending = false;
        s->restart_signal = 0;
        s->unhealthy_stop = false;
        if (s->state == SVC_STOPPING)
            continue; /* its exit finds it held */
        log_warn("service %s: stopped until %s is reached again: %s", s->cfg->name, gate, why);
        s->cause = "revoked";
        svc_dispatch(s, E_STOP);
    }
}

/* A gate reached may release services waiting for it; a revoked one
 * holds those that run on it (neither while every service is being
 * stopped). */
static void gate_changed(const char *name, bool reached, const char *revoked)
{
    if (stop_all_next >= 0)
        return;
    if (revoked)
        hold_dependents(name, revoked);
    else if (reached)
        release_waiting();
}

/* Kahn's algorithm over the service names in "after", stable in config
 * order; config.c has already refused cycles. */
static void compute_order(void)
{
    bool placed[CONFIG_MAX_SERVICES] = {0};
    size_t n = 0;

    while (n < nsvcs) {
        size_t before = n;
        for (size_t i = 0; i < nsvcs; i++) {
            if (placed[i])
                continue;
            bool ready = true;
            for (size_t k = 0; k < svcs[i].cfg->n_after && ready; k++) {
                struct service *d = find(svcs[i].cfg->after[k]);
                if (d && !placed[d - svcs])
                    ready = false;
            }
            if (ready) {
                placed[i] = true;
                order[n++] = (int)i;
            }
        }
        if (n == before) {
            /* Unreachable after validation; keep config order for the rest. */
            for (size_t i = 0; i < nsvcs; i++)
                if (!placed[i])
                    order[n++] = (int)i;
        }
    }
}

int service_init(const struct config *cfg)
{
    gates_on_change(gate_changed);
    /* The parts post their events (exec, exit, ready, unhealthy) here. */
    svc_set_dispatch(svc_dispatch);
    nsvcs = cfg->n_services;
    main_index = nsvcs ? 0 : -1;
    for (size_t i = 0; i < nsvcs; i++) {
        struct service *s = &svcs[i];
        memset(s, 0, sizeof(*s));
        s->cfg = &cfg->services[i];
        s->state = SVC_STOPPED;
        s->exec_fd = -1;
        s->reaper_fd = -1;
        s->ready.notify_rd = -1;
        s->n.fd = -1;
        s->leaf.oom_wd = -1;
        svc_output_init(s);
        {
            /* Said once, loudly, when the config loads: such a service
             * can undo the egress policy, the mounts or hearth itself. */
            struct contain_policy pol;
            contain_policy_of(s->cfg, &pol);
            if (contain_privileged(&pol, s->privileged, sizeof(s->privileged)))
                log_warn("service %s: privileged: %s", s->cfg->name, s->privileged);
        }
        ev_timer_init(&s->timer, timer_cb, 0., 0.);
        s->timer.data = s;
        svc_probe_init(s);
        if (s->cfg->main)
            main_index = (int)i;
        /* Bound now, before any service runs (see notify.c); a failure is
         * tried again, and reported, at each start. */
        if (svc_wants_nsock(s)) {
            struct err err;
            if (svc_nsock_open(s, &err) < 0)
                log_warn("service %s: NOTIFY_SOCKET: %s", s->cfg->name, err.msg);
        }
    }
    compute_order();
    return 0;
}

void service_free(void)
{
    for (size_t i = 0; i < nsvcs; i++) {
        struct service *s = &svcs[i];
        svc_health_stop(s);
        svc_ready_cancel(s);
        ev_timer_stop(H.loop, &s->timer);
        svc_close_exec_pipe(s);
        svc_notify_close(s);
        svc_nsock_close(s);
        svc_output_free(s);
        svc_probe_free(s);
    }
    nsvcs = 0;
    svc_cgroup_free();
}

void service_start_all(void)
{
    for (size_t i = 0; i < nsvcs; i++)
        svc_dispatch(&svcs[order[i]], E_START);
}

static bool in_stop_next;

static void stop_next(void)
{
    /* svc_dispatch() below re-enters through after_transition(). */
    if (in_stop_next)
        return;
    in_stop_next = true;
    while (stop_all_next >= 0) {
        struct service *s = &svcs[order[stop_all_next]];
        if (!is_down(s) && s->state != SVC_STOPPING)
            svc_dispatch(s, E_STOP);
        else if (s->state == SVC_BACKOFF || s->state == SVC_WAITING)
            svc_dispatch(s, E_STOP);
        if (!is_down(s)) {
            in_stop_next = false;
            return; /* wait for its exit */
        }
        stop_all_next--;
    }
    in_stop_next = false;
    void (*done)(void) = stop_all_done;
    stop_all_done = NULL;
    if (done)
        done();
}

void service_stop_all(void (*done)(void))
{
    stop_all_done = done;
    stop_all_next = (int)nsvcs - 1;
    /* Nothing may restart while the stop walks down the list. */
    for (size_t i = 0; i < nsvcs; i++) {
        svcs[i].unhealthy_stop = false;
        svcs[i].held = false;
        svcs[i].restart_pending = false;
        svcs[i].restart_signal = 0;
        if (svcs[i].state == SVC_BACKOFF || svcs[i].state == SVC_WAITING)
            svc_dispatch(&svcs[i], E_STOP);
    }
    stop_next();
}

void service_on_main_done(void (*fn)(int)) { main_done_fn = fn; }

void service_set_activity_hooks(const struct svc_activity_hooks *h) { svc_activity = *h; }

int service_main_status(void)
{
    if (main_index < 0)
        return 0;
    const struct service *s = &svcs[main_index];
    if (!s->has_exit)
        return 0;
    if (WIFEXITED(s->wstatus))
        return WEXITSTATUS(s->wstatus);
    if (WIFSIGNALED(s->wstatus))
        return 128 + WTERMSIG(s->wstatus);
    return 1;
}

cJSON *service_list_json(void)
{
    cJSON *arr = cJSON_CreateArray();
    int64_t now = mono_ms();
    if (!arr)
        return NULL;
    for (size_t i = 0; i < nsvcs; i++) {
        const struct service *s = &svcs[i];
        cJSON *o = cJSON_CreateObject();
        if (!o)
            break;
        cJSON_AddStringToObject(o, "name", s->cfg->name);
        cJSON_AddStringToObject(o, "state", state_names[s->state]);
        cJSON_AddNumberToObject(o, "pid", s->pid);
        cJSON_AddNumberToObject(o, "restarts", s->restarts);
        cJSON_AddBoolToObject(o, "main", (int)i == main_index);
        cJSON_AddBoolToObject(o, "privileged", s->privileged[0] != 0);
        if (s->privileged[0]) {
            cJSON *why = cJSON_AddArrayToObject(o, "privileged_reasons");
            char copy[sizeof(s->privileged)];
            snprintf(copy, sizeof(copy), "%s", s->privileged);
            for (char *r = copy, *next; r && *r; r = next) {
                next = strstr(r, ", ");
                if (next) {
                    *next = 0;
                    next += 2;
                }
                cJSON_AddItemToArray(why, cJSON_CreateString(r));
            }
        }
        {
            /* How it is contained here, and why not fully (security.md). */
            struct contain_policy pol;
            struct err why;
            contain_policy_of(s->cfg, &pol);
            cJSON_AddStringToObject(o, "containment", contain_describe(&pol, &why));
            if (why.msg[0])
                cJSON_AddStringToObject(o, "containment_reason", why.msg);
        }
        cJSON_AddNumberToObject(o, "since_ms", (double)(now - s->since_ms));
        cJSON_AddItemToObject(o, "last_exit", exit_json(s));
        if (s->error[0])
            cJSON_AddStringToObject(o, "error", s->error);
        if (s->ready.failed_starts)
            cJSON_AddNumberToObject(o, "failed_starts", s->ready.failed_starts);
        const struct svc_settings *st = s->cfg->settings;
        if (st && st->n_secrets) {
            /* What this start did about each secret; never the value. */
            cJSON *arr2 = cJSON_AddArrayToObject(o, "secrets");
            for (size_t k = 0; arr2 && k < st->n_secrets; k++) {
                cJSON *x = cJSON_CreateObject();
                if (!x)
                    break;
                cJSON_AddStringToObject(x, "env", st->secrets[k].env);
                cJSON_AddStringToObject(x, "file", st->secrets[k].file);
                cJSON_AddStringToObject(x, "state", svc_secret_state_name(s->secret_state[k]));
                cJSON_AddItemToArray(arr2, x);
            }
        }
        if (s->state == SVC_WAITING && unmet_dep(s))
            cJSON_AddStringToObject(o, "waiting_for", unmet_dep(s));
        if (s->state == SVC_BACKOFF) {
            double left = svc_suspended ? (double)s->suspend_left_ms / 1000.0
                                        : ev_timer_remaining(H.loop, (ev_timer *)&s->timer);
            cJSON_AddNumberToObject(o, "next_start_ms", (double)(int64_t)(left * 1000.0));
        }
        if (s->leaf.path[0])
            cJSON_AddStringToObject(o, "cgroup", s->leaf.path);
        if (s->health.on) {
            cJSON *hc = cJSON_AddObjectToObject(o, "health");
            if (hc) {
                cJSON_AddStringToObject(hc, "status", svc_health_status(s));
                cJSON_AddNumberToObject(hc, "failures", s->health.fails);
                cJSON_AddNumberToObject(hc, "threshold", s->health.threshold);
                cJSON_AddNumberToObject(hc, "checks", (double)s->health.checks);
                if (s->health.last_ms)
                    cJSON_AddNumberToObject(hc, "last_check_ms", (double)(now - s->health.last_ms));
                if (s->health.detail[0])
                    cJSON_AddStringToObject(hc, "last_failure", s->health.detail);
            }
        }
        if (svc_wants_nsock(s))
            cJSON_AddItemToObject(o, "notify", svc_notify_json(s, now));
        if (s->leaf.oom_known)
            cJSON_AddNumberToObject(o, "oom_kills", (double)s->leaf.oom_kills);
        /* Activity, for a host deciding whether the sandbox is idle. */
        if (s->state == SVC_RUNNING && s->started_ms)
            cJSON_AddNumberToObject(o, "uptime_ms", (double)(now - s->started_ms));
        uint64_t cpu;
        if (s->leaf.path[0] && cgroup_cpu_usec(s->leaf.path, &cpu) == 0)
            cJSON_AddNumberToObject(o, "cpu_ms", (double)((s->leaf.cpu_usec_before + cpu) / 1000));
        uint64_t mem;
        if (s->leaf.path[0] && cgroup_memory_bytes(s->leaf.path, &mem) == 0)
            cJSON_AddNumberToObject(o, "memory_bytes", (double)mem);
        cJSON_AddNumberToObject(o, "output_lines", (double)s->out.ring.total);
        cJSON *lf = svc_log_file_json(s);
        if (lf)
            cJSON_AddItemToObject(o, "log_file", lf);
        if (s->out.ring.last_mono_ms)
            cJSON_AddNumberToObject(o, "last_output_ms", (double)(now - s->out.ring.last_mono_ms));
        cJSON_AddItemToArray(arr, o);
    }
    return arr;
}

static struct service *find(const char *name)
{
    for (size_t i = 0; i < nsvcs; i++)
        if (strcmp(svcs[i].cfg->name, name) == 0)
            return &svcs[i];
    return NULL;
}

int service_index(const char *name)
{
    struct service *s = find(name);
    return s ? (int)(s - svcs) : -1;
}

const char *service_state_of(int idx) { return state_names[svcs[idx].state]; }

pid_t service_pid_at(size_t idx, const char **name)
{
    if (idx >= nsvcs)
        return -1;
    *name = svcs[idx].cfg->name;
    return svcs[idx].pid;
}

const char *service_cgroup_at(size_t idx, const char **name, uint64_t *cpu_usec_before)
{
    if (idx >= nsvcs)
        return NULL;
    *name = svcs[idx].cfg->name;
    *cpu_usec_before = svcs[idx].leaf.cpu_usec_before;
    return svcs[idx].leaf.path;
}

int service_start(int idx, struct err *err)
{
    struct service *s = &svcs[idx];
    /* Asked for by the host: ready.attempts counts from here. */
    s->ready.failed_starts = 0;
    if (s->state == SVC_STOPPING) {
        s->restart_pending = true;
        return 0;
    }
    if (s->state == SVC_BACKOFF) {
        /* Start now rather than at the end of the delay. */
        ev_timer_stop(H.loop, &s->timer);
        svc_dispatch(s, E_TIMER);
        return 0;
    }
    if (s->state == SVC_RUNNING || s->state == SVC_STARTING || s->state == SVC_WAITING)
        return 0;
    s->fails = 0;
    svc_dispatch(s, E_START);
    if (s->state == SVC_FAILED && s->error[0])
        return err_set(err, "%s", s->error);
    return 0;
}

int service_stop(int idx, struct err *err)
{
    struct service *s = &svcs[idx];
    s->restart_pending = false;
    /* Already stopping for its health, or held by a revoked gate: stay
     * down once it is. */
    s->unhealthy_stop = false;
    s->held = false;
    svc_dispatch(s, E_STOP);
    return 0;
}

int service_restart(int idx, struct err *err)
{
    return service_restart_signal(idx, 0, err);
}

int service_restart_signal(int idx, int sig, struct err *err)
{
    struct service *s = &svcs[idx];
    s->ready.failed_starts = 0;
    if (s->state == SVC_RUNNING || s->state == SVC_STARTING) {
        s->restart_pending = true;
        s->restart_signal = sig;
        if (sig)
            log_info("service %s: graceful restart: %s, then start again", s->cfg->name,
                     names_signal_name(sig) ?: "signal");
        svc_dispatch(s, E_STOP);
        return 0;
    }
    if (s->state == SVC_STOPPING) {
        s->restart_pending = true;
        return 0;
    }
    return service_start(idx, err);
}

int service_signal(int idx, int sig, struct err *err)
{
    struct service *s = &svcs[idx];
    if (s->pid <= 0)
        return err_set(err, "service %s is not running (%s)", s->cfg->name, state_names[s->state]);
    svc_signal_group(s, sig);
    return 0;
}

cJSON *service_logs_json(int idx, size_t n) { return logring_tail_json(&svcs[idx].out.ring, n); }

/* ---- pause and resume ---- */

/* Suspending stops every clock that judges a service: health probes (one
 * in flight is cancelled and not counted), readiness attempts and their
 * deadline, backoff delays. Resuming re-arms them: the readiness deadline
 * moves by the frozen time, a backoff gets what it had left, and health is
 * probed at once. */
void service_suspend(bool on)
{
    if (svc_suspended == on)
        return;
    svc_suspended = on;
    int64_t now = mono_ms();
    if (on)
        suspended_at = now;
    for (size_t i = 0; i < nsvcs; i++) {
        struct service *s = &svcs[i];
        if (on) {
            svc_health_stop(s);
            if (s->state == SVC_STARTING && s->ready.on)
                svc_ready_cancel(s);
            if (s->state == SVC_BACKOFF && ev_is_active(&s->timer)) {
                s->suspend_left_ms = (int64_t)(ev_timer_remaining(H.loop, &s->timer) * 1000.0);
                ev_timer_stop(H.loop, &s->timer);
            }
            continue;
        }
        if (s->state == SVC_RUNNING)
            svc_health_arm(s, 0);
        else if (s->state == SVC_STARTING && s->ready.on && s->exec_fd < 0) {
            /* exec confirmed: readiness was being probed */
            s->ready.deadline += now - suspended_at;
            svc_ready_attempt(s);
        } else if (s->state == SVC_BACKOFF) {
            svc_timer_start(s, s->suspend_left_ms > 0 ? s->suspend_left_ms : 0);
        }
    }
    log_debug("services %s", on ? "suspended" : "no longer suspended");
}

bool service_suspended(void) { return svc_suspended; }

int service_health_now(void)
{
    int n = 0;
    for (size_t i = 0; i < nsvcs; i++) {
        struct service *s = &svcs[i];
        if (!s->health.on || s->state != SVC_RUNNING)
            continue;
        /* A probe already in flight is as good as a new one. */
        if (!s->health.probe)
            svc_health_arm(s, 0);
        n++;
    }
    return n;
}

int service_resumed(cJSON *report)
{
    int acted = 0;
    for (size_t i = 0; i < nsvcs; i++) {
        struct service *s = &svcs[order[i]];
        const char *how = s->cfg->on_resume;
        if (!how || strcmp(how, "none") == 0)
            continue;
        if (s->state != SVC_RUNNING && s->state != SVC_STARTING)
            continue;
        const char *did;
        if (strcmp(how, "restart") == 0 || strncmp(how, "restart:", 8) == 0) {
            /* config.c accepted "restart:NAME" with a known signal. */
            int sig = how[7] == ':' ? names_signal_number(how + 8) : 0;
            struct err err;
            if (sig < 0 || service_restart_signal((int)(s - svcs), sig, &err) < 0) {
                log_warn("service %s: restart on resume: %s", s->cfg->name,
                         sig < 0 ? "unknown signal" : err.msg);
                continue;
            }
            did = how;
        } else {
            /* config.c accepted "signal:NAME" with a known signal. */
            int sig = names_signal_number(how + strlen("signal:"));
            if (sig <= 0)
                continue;
            svc_signal_group(s, sig);
            did = how + strlen("signal:");
        }
        log_info("service %s: %s on resume", s->cfg->name, did);
        if (report)
            cJSON_AddStringToObject(report, s->cfg->name, did);
        acted++;
    }
    return acted;
}
