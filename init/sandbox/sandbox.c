#include "sandbox_priv.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cJSON.h>
#include <ev.h>

#include "cgroup.h"
#include "clock.h"
#include "config.h"
#include "entropy.h"
#include "err.h"
#include "events.h"
#include "hearth.h"
#include "identity.h"
#include "launch.h"
#include "inherit.h"
#include "lifeline.h"
#include "log.h"
#include "machine.h"
#include "mounts.h"
#include "egress.h"
#include "network.h"
#include "gates.h"
#include "reaper.h"
#include "resumefile.h"
#include "redact.h"
#include "service.h"
#include "utf8.h"

/* ---- state ---- */

static enum sandbox_state state = SANDBOX_RUNNING;
static const char *const state_names[] = {"running", "freezing", "frozen", "resuming"};

const char *sandbox_state_name(enum sandbox_state s) { return state_names[s]; }
enum sandbox_state sandbox_state(void) { return state; }

void sandbox_set_state(enum sandbox_state s)
{
    if (s == state)
        return;
    log_info("sandbox %s -> %s", state_names[state], state_names[s]);
    state = s;
    if (s == SANDBOX_FROZEN)
        resumefile_frozen(true);
}

static bool clock_allowed;
static int64_t clock_threshold_ms = CLOCK_DEFAULT_THRESHOLD_MS;
static int64_t clock_check_ms = CONFIG_CLOCK_CHECK_MS;
static int64_t clock_detect_step_ms = CONFIG_CLOCK_DETECT_STEP_MS;
/* Resume's, run after sandbox.init steps the clock (sandbox_on_clock_set). */
static void (*clock_set_hook)(void);

bool sandbox_clock_allowed(void) { return clock_allowed; }
int64_t sandbox_clock_threshold_ms(void) { return clock_threshold_ms; }
int64_t sandbox_clock_check_ms(void) { return clock_check_ms; }
int64_t sandbox_clock_detect_step_ms(void) { return clock_detect_step_ms; }

static int64_t last_freeze_ms = -1;

double sandbox_ms_since(int64_t t0_ns) { return (double)(mono_ns() - t0_ns) / 1e6; }

/* One step's row: {"name","result","ms"[,"detail"]}. */
cJSON *sandbox_step_row(cJSON *steps, const char *name, const char *result, double ms,
                       const char *detail)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddStringToObject(o, "name", name);
    cJSON_AddStringToObject(o, "result", result);
    cJSON_AddNumberToObject(o, "ms", ms);
    if (detail && detail[0])
        cJSON_AddStringToObject(o, "detail", detail);
    cJSON_AddItemToArray(steps, o);
    return o;
}

/* ---- sandbox.init and the init gate ---- */

static struct env_var env[SANDBOX_ENV_MAX];
static size_t n_env;
static bool init_waiting;       /* wait_for_init.enabled and nothing arrived yet */
static bool init_received;
static char init_error[128];
static int64_t init_at_ms = -1;
static bool on_timeout_fail;
static ev_timer init_timer;

bool sandbox_waiting_for_init(void) { return init_waiting; }

/* The lifecycle moves on once the gate opens (main set wait_init). */
static void init_released(void)
{
    gate_set("init", true);
    if (H.phase == PHASE_WAIT_INIT)
        hearth_set_phase(PHASE_RUNNING);
}

static void init_timeout_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    if (!init_waiting)
        return;
    if (on_timeout_fail) {
        snprintf(init_error, sizeof(init_error), "no sandbox.init after %lld ms",
                 (long long)H.cfg->wait_for_init_timeout_ms);
        log_error("%s: services after init stay held (wait_for_init.on_timeout fail)", init_error);
        cJSON *p = cJSON_CreateObject();
        if (p)
            cJSON_AddStringToObject(p, "error", init_error);
        events_emit("sandbox.init_timeout", p);
        return;
    }
    snprintf(init_error, sizeof(init_error), "no sandbox.init after %lld ms: started without it",
             (long long)H.cfg->wait_for_init_timeout_ms);
    log_warn("%s", init_error);
    init_waiting = false;
    cJSON *p = cJSON_CreateObject();
    if (p)
        cJSON_AddStringToObject(p, "error", init_error);
    events_emit("sandbox.init_timeout", p);
    init_released();
}

static bool env_key_ok(const char *k)
{
    size_t n = strlen(k);
    return n <= 128 && names_env_valid(k, n);
}

static bool hostname_ok(const char *h)
{
    cJSON *s = cJSON_CreateString(h);
    int rc = s ? config_check_section("hostname", s, NULL) : -1;
    cJSON_Delete(s);
    return rc == 0;
}

/* Replaces the sandbox env with the union of the old one and obj (new
 * values win). Built aside and swapped so a failure changes nothing. */
static int env_merge(const cJSON *obj, struct err *err)
{
    struct env_var next[SANDBOX_ENV_MAX];
    size_t nn = 0;
    const cJSON *it;

    for (size_t i = 0; i < n_env; i++) {
        if (cJSON_GetObjectItemCaseSensitive(obj, env[i].key))
            continue;
        next[nn++] = env[i];
    }
    cJSON_ArrayForEach(it, obj) {
        /* Whatever its name, a value handed over here is a secret. */
        const char *why = redact_add_value(it->valuestring);
        if (why)
            log_warn("%s", why);
        next[nn].key = strdup(it->string);
        next[nn].value = strdup(it->valuestring);
        if (!next[nn].key || !next[nn].value) {
            free(next[nn].key);
            free(next[nn].value);
            for (size_t i = 0; i < nn; i++)
                if (cJSON_GetObjectItemCaseSensitive(obj, next[i].key)) {
                    free(next[i].key);
                    free(next[i].value);
                }
            return err_set(err, "env: out of memory");
        }
        nn++;
    }
    for (size_t i = 0; i < n_env; i++)
        if (cJSON_GetObjectItemCaseSensitive(obj, env[i].key)) {
            free(env[i].key);
            free(env[i].value);
        }
    memcpy(env, next, nn * sizeof(next[0]));
    n_env = nn;
    launch_set_sandbox_env(env, n_env);
    return 0;
}

/* What sandbox.init carries beyond env and hostname, parsed while it is
 * validated and applied from the parsed form. */
struct init_parsed {
    struct egress_policy egress;
    struct host_mounts_cfg host_mounts;
    struct network_cfg *network;    /* allocated: the typed section is large */
};

static void init_parsed_free(struct init_parsed *p)
{
    sections_egress_policy_free(&p->egress);
    sections_host_mounts_free(&p->host_mounts);
    free(p->network);
    p->network = NULL;
}

static int init_validate(const struct sandbox_init_req *r, struct init_parsed *p, struct err *err)
{
    if (r->env) {
        const cJSON *it;
        size_t total = 0, merged = n_env;
        if (!cJSON_IsObject(r->env))
            return err_set(err, "env: expected an object of strings");
        cJSON_ArrayForEach(it, r->env) {
            if (!env_key_ok(it->string)) {
                /* The name came from the request: cut on a character
                 * boundary so the error reply stays valid UTF-8. */
                return err_set(err, "env: bad variable name \"%.*s\"", utf8_clip(it->string, 64),
                               it->string);
            }
            if (!cJSON_IsString(it))
                return err_set(err, "env.%.64s: expected a string", it->string);
            size_t vl = strlen(it->valuestring);
            if (vl > SANDBOX_ENV_VALUE_MAX)
                return err_set(err, "env.%.64s: longer than %d bytes", it->string,
                               SANDBOX_ENV_VALUE_MAX);
            total += vl + strlen(it->string);
            bool known = false;
            for (size_t i = 0; i < n_env && !known; i++)
                known = strcmp(env[i].key, it->string) == 0;
            if (!known)
                merged++;
        }
        if (merged > SANDBOX_ENV_MAX || total > SANDBOX_ENV_TOTAL_MAX)
            return err_set(err, "env: more than %d variables or %d bytes", SANDBOX_ENV_MAX,
                           SANDBOX_ENV_TOTAL_MAX);
    }
    if (r->egress && sections_egress_parse(r->egress, &p->egress, err) < 0)
        return -1;
    if (r->host_mounts && sections_host_mounts_parse(r->host_mounts, &p->host_mounts, err) < 0)
        return -1;
    if (r->network) {
        if (!(p->network = malloc(sizeof(*p->network))))
            return err_set(err, "network: out of memory");
        if (sections_network_parse(r->network, p->network, err) < 0)
            return -1;
    }
    if (r->hostname && !hostname_ok(r->hostname))
        return err_set(err, "hostname: not a valid host name");
    return 0;
}

int sandbox_init(const struct sandbox_init_req *r, cJSON *report, int *code, struct err *err)
{
    struct init_parsed p;
    struct err detail;
    int rc = 0;

    memset(&p, 0, sizeof(p));
    *code = -32602;
    if (init_validate(r, &p, err) < 0) {
        init_parsed_free(&p);
        return -1;
    }
    *code = -32000;
    if (r->env) {
        if (env_merge(r->env, err) < 0) {
            init_parsed_free(&p);
            return -1;
        }
        /* Names only: values may be secrets. */
        cJSON *keys = cJSON_AddArrayToObject(report, "env");
        const cJSON *it;
        cJSON_ArrayForEach(it, r->env)
            cJSON_AddItemToArray(keys, cJSON_CreateString(it->string));
        log_info("sandbox.init: %d environment variables", cJSON_GetArraySize(r->env));
    }
    if (r->hostname) {
        int h = machine_set_hostname(r->hostname);
        cJSON_AddStringToObject(report, "hostname", h == 0 ? "set" : strerror(errno));
        if (h < 0)
            rc = -1;
    }
    if (r->has_time) {
        struct clock_result cr;
        clock_sync(&r->time, clock_allowed, clock_threshold_ms, &cr);
        /* hearth's own step is no restore. */
        if (clock_set_hook)
            clock_set_hook();
        cJSON_AddItemToObject(report, "time", clock_result_json(&cr));
    }
    if (r->entropy) {
        int e = entropy_add(r->entropy, r->entropy_len, &detail);
        cJSON_AddStringToObject(report, "entropy", e == 0 ? "added" : detail.msg);
        if (e < 0)
            rc = -1;
    }
    if (r->network) {
        /* Before the policy: it always allows the new gateways and name
         * servers. */
        cJSON *net = cJSON_AddObjectToObject(report, "network");
        network_replace(p.network, net);
        if (egress_set_always(p.network, !r->egress, &detail) < 0) {
            cJSON_AddStringToObject(net, "egress", detail.msg);
            rc = -1;
        }
        int v = network_verify(net, &detail);
        cJSON_AddStringToObject(net, "detail", detail.msg);
        if (v == NETWORK_FAILED)
            rc = -1;
    }
    if (r->egress) {
        detail.msg[0] = 0;
        int e = egress_apply(&p.egress, &detail);
        cJSON_AddStringToObject(report, "egress", detail.msg[0] ? detail.msg : (e == 0 ? "applied" : "failed"));
        if (e < 0)
            rc = -1;
    }
    if (r->host_mounts) {
        mounts_apply_host(&p.host_mounts);
        cJSON_AddStringToObject(report, "host_mounts", "applied");
    }
    init_parsed_free(&p);
    init_received = true;
    init_at_ms = wall_ms();
    init_error[0] = 0;
    if (init_waiting) {
        init_waiting = false;
        ev_timer_stop(H.loop, &init_timer);
    }
    /* The gate opens even when one parameter failed to apply: the report
     * says which, and holding every service would not repair it. */
    init_released();
    cJSON *ev = cJSON_Duplicate(report, 1);
    if (ev)
        events_emit("sandbox.init", ev);
    cJSON_AddBoolToObject(report, "ok", rc == 0);
    return 0;
}

/* ---- freeze ---- */

struct freeze_op {
    bool active;
    uint64_t gen;
    int64_t t0_ns, step_ns, deadline_ns;
    int64_t timeout_ms;
    pid_t sync_pid;
    cJSON *steps;
    sandbox_freeze_done done;
    void *ctx;
    ev_timer timer;
    bool syncing;
};
static struct freeze_op fz;

static void freeze_finish(const char *error)
{
    cJSON *r = cJSON_CreateObject();
    ev_timer_stop(H.loop, &fz.timer);
    fz.active = false;
    double total = sandbox_ms_since(fz.t0_ns);
    if (r) {
        cJSON_AddBoolToObject(r, "frozen", error == NULL);
        cJSON_AddNumberToObject(r, "total_ms", total);
        cJSON_AddItemToObject(r, "steps", fz.steps);
    } else {
        cJSON_Delete(fz.steps);
    }
    fz.steps = NULL;
    if (error) {
        log_warn("sandbox: unable to freeze (after %.1f ms): %s", total, error);
        fz.done(fz.ctx, NULL, error, r);
        return;
    }
    last_freeze_ms = wall_ms();
    log_info("sandbox frozen in %.1f ms", total);
    cJSON *ev = r ? cJSON_Duplicate(r, 1) : NULL;
    if (ev)
        events_emit("freeze", ev);
    fz.done(fz.ctx, r, NULL, NULL);
}

static void freeze_poll_cb(struct ev_loop *loop, ev_timer *w, int revents);

/* After the sync: freeze the cgroup and wait (polling cgroup.events)
 * until the kernel says frozen or the deadline passes. */
static void freeze_cgroup_start(void)
{
    ev_timer_stop(H.loop, &fz.timer);
    ev_init(&fz.timer, freeze_poll_cb);
    fz.syncing = false;
    fz.step_ns = mono_ns();
    if (!cgroup_available()) {
        sandbox_step_row(fz.steps, "freeze", "skipped", 0, "no cgroup2: services keep running");
        sandbox_step_row(fz.steps, "suspend", "ok", 0, NULL);
        service_suspend(true);
        sandbox_set_state(SANDBOX_FROZEN);
        freeze_finish(NULL);
        return;
    }
    if (cgroup_services_freeze(true) < 0) {
        char d[160];
        snprintf(d, sizeof(d), "cgroup.freeze: %s", strerror(errno));
        sandbox_step_row(fz.steps, "freeze", "failed", sandbox_ms_since(fz.step_ns), d);
        sandbox_set_state(SANDBOX_RUNNING);
        freeze_finish(d);
        return;
    }
    freeze_poll_cb(H.loop, &fz.timer, 0);
}

static void freeze_poll_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    int f = cgroup_services_frozen();
    if (f == 1) {
        ev_timer_stop(H.loop, &fz.timer);
        sandbox_step_row(fz.steps, "freeze", "ok", sandbox_ms_since(fz.step_ns), NULL);
        service_suspend(true);
        sandbox_step_row(fz.steps, "suspend", "ok", 0, NULL);
        sandbox_set_state(SANDBOX_FROZEN);
        freeze_finish(NULL);
        return;
    }
    if (f < 0 || mono_ns() >= fz.deadline_ns) {
        char d[160];
        if (f < 0)
            snprintf(d, sizeof(d), "cgroup.events: %s", strerror(errno));
        else
            snprintf(d, sizeof(d), "not frozen after %lld ms (a process stuck in the kernel?)",
                     (long long)fz.timeout_ms);
        sandbox_step_row(fz.steps, "freeze", f < 0 ? "failed" : "timeout", sandbox_ms_since(fz.step_ns), d);
        /* A half-frozen sandbox is worse than a running one: thaw back. */
        cgroup_services_freeze(false);
        sandbox_set_state(SANDBOX_RUNNING);
        freeze_finish(d);
        return;
    }
    /* The kernel settles "frozen" asynchronously, usually within a
     * millisecond: a short poll keeps the loop free meanwhile. */
    ev_timer_stop(H.loop, &fz.timer);
    ev_timer_set(&fz.timer, 0.002, 0.);
    ev_timer_start(H.loop, &fz.timer);
}

static void sync_reaped(void *ctx, pid_t pid, int wstatus)
{
    uint64_t gen = (uint64_t)(uintptr_t)ctx;
    if (!fz.active || gen != fz.gen || !fz.syncing) {
        log_debug("late sync child %d reaped", (int)pid);
        return;
    }
    ev_timer_stop(H.loop, &fz.timer);
    fz.sync_pid = -1;
    char d[96];
    int failed = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1;
    if (failed == 0)
        snprintf(d, sizeof(d), "persistent mounts synced");
    else if (failed > 0)
        snprintf(d, sizeof(d), "unable to sync the mounts");
    else
        snprintf(d, sizeof(d), "sync child killed by signal %d", WTERMSIG(wstatus));
    sandbox_step_row(fz.steps, "sync", failed == 0 ? "ok" : "failed", sandbox_ms_since(fz.step_ns), d);
    freeze_cgroup_start();
}

static void sync_timeout_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    char d[128];
    /* The child is stuck in the kernel: it is told to die and reaped
     * whenever the filesystem lets it go; the freeze goes on. */
    if (fz.sync_pid > 0)
        kill(fz.sync_pid, SIGKILL);
    fz.sync_pid = -1;
    snprintf(d, sizeof(d), "syncfs still running after %lld ms", (long long)(fz.timeout_ms / 2));
    sandbox_step_row(fz.steps, "sync", "timeout", sandbox_ms_since(fz.step_ns), d);
    freeze_cgroup_start();
}

int sandbox_freeze(int64_t timeout_ms, sandbox_freeze_done done, void *ctx, struct err *err)
{
    if (fz.active || state == SANDBOX_FREEZING)
        return err_set(err, "a freeze is in progress");
    fz.active = true;
    fz.gen++;
    fz.done = done;
    fz.ctx = ctx;
    fz.timeout_ms = timeout_ms;
    fz.t0_ns = fz.step_ns = mono_ns();
    fz.deadline_ns = fz.t0_ns + timeout_ms * 1000000LL;
    fz.steps = cJSON_CreateArray();
    fz.sync_pid = -1;
    fz.syncing = false;
    ev_timer_init(&fz.timer, freeze_poll_cb, 0., 0.);
    if (!fz.steps) {
        fz.active = false;
        return err_set(err, "out of memory");
    }
    if (state == SANDBOX_FROZEN) {
        sandbox_step_row(fz.steps, "freeze", "ok", 0, "already frozen");
        freeze_finish(NULL);
        return 0;
    }
    sandbox_set_state(SANDBOX_FREEZING);
    /* syncfs can block for as long as the storage wants (a stalled
     * virtio-fs daemon, a frozen backing store): it runs in a child the
     * loop only waits for with a deadline. */
    pid_t pid = fork();
    if (pid < 0) {
        char d[96];
        snprintf(d, sizeof(d), "fork: %s", strerror(errno));
        sandbox_step_row(fz.steps, "sync", "failed", 0, d);
        freeze_cgroup_start();
        return 0;
    }
    if (pid == 0) {
        lifeline_hold();
        inherit_close_all_but(-1);
        _exit(mounts_sync() < 0 ? 1 : 0);
    }
    fz.sync_pid = pid;
    fz.syncing = true;
    if (reaper_watch(pid, sync_reaped, (void *)(uintptr_t)fz.gen) < 0)
        log_warn("sandbox: unable to watch the sync child %d", (int)pid);
    ev_timer_init(&fz.timer, sync_timeout_cb, (double)timeout_ms / 2000.0, 0.);
    ev_timer_start(H.loop, &fz.timer);
    return 0;
}

void sandbox_thaw_for_shutdown(void)
{
    if (fz.active) {
        /* A freeze finishing now would freeze services mid-stop. */
        if (fz.sync_pid > 0)
            kill(fz.sync_pid, SIGKILL);
        fz.sync_pid = -1;
        fz.syncing = false;
        sandbox_step_row(fz.steps, "freeze", "cancelled", sandbox_ms_since(fz.step_ns), "shutting down");
        freeze_finish("cancelled: shutting down");
    }
    if (state != SANDBOX_FROZEN && state != SANDBOX_FREEZING)
        return;
    if (cgroup_available() && cgroup_services_freeze(false) < 0)
        log_warn("sandbox: unable to thaw the services before stopping: %s", strerror(errno));
    service_suspend(false);
    sandbox_set_state(SANDBOX_RUNNING);
}

/* ---- setup and status ---- */

void sandbox_setup(const struct config *cfg)
{
    clock_allowed = cfg->clock_set >= 0 ? cfg->clock_set == 1 : H.mode == MODE_VM;
    clock_threshold_ms = cfg->clock_step_threshold_ms;
    clock_check_ms = cfg->clock_check_ms;
    clock_detect_step_ms = cfg->clock_detect_step_ms;
    on_timeout_fail = cfg->wait_for_init_fail;
    init_waiting = cfg->wait_for_init;
    gate_set("init", !init_waiting);
    if (init_waiting) {
        log_info("waiting for sandbox.init%s", cfg->wait_for_init_timeout_ms ? "" : " (no timeout)");
        if (cfg->wait_for_init_timeout_ms > 0) {
            ev_timer_init(&init_timer, init_timeout_cb,
                          (double)cfg->wait_for_init_timeout_ms / 1000.0, 0.);
            ev_timer_start(H.loop, &init_timer);
        }
    }
}

void sandbox_on_clock_set(void (*fn)(void))
{
    clock_set_hook = fn;
}

void sandbox_status_json(cJSON *status)
{
    cJSON *s = cJSON_AddObjectToObject(status, "sandbox");
    if (s) {
        cJSON_AddStringToObject(s, "state", state_names[state]);
        cJSON *in = cJSON_AddObjectToObject(s, "init");
        if (in) {
            cJSON_AddBoolToObject(in, "waiting", init_waiting);
            cJSON_AddBoolToObject(in, "received", init_received);
            if (init_at_ms >= 0)
                cJSON_AddNumberToObject(in, "at_ms", (double)init_at_ms);
            if (init_error[0])
                cJSON_AddStringToObject(in, "error", init_error);
            /* Names only: every value sandbox.init hands over may be a
             * secret, whatever its name or length. */
            cJSON *e = cJSON_AddObjectToObject(in, "env");
            for (size_t i = 0; e && i < n_env; i++)
                cJSON_AddStringToObject(e, env[i].key, REDACT_MARK);
        }
        cJSON *c = cJSON_AddObjectToObject(s, "clock");
        if (c) {
            cJSON_AddBoolToObject(c, "set", clock_allowed);
            cJSON_AddNumberToObject(c, "step_threshold_ms", (double)clock_threshold_ms);
            cJSON_AddNumberToObject(c, "detect_step_ms", (double)clock_detect_step_ms);
        }
        if (last_freeze_ms >= 0)
            cJSON_AddNumberToObject(s, "last_freeze_ms", (double)last_freeze_ms);
    }
    cJSON_AddBoolToObject(status, "frozen", state == SANDBOX_FROZEN);
    cJSON_AddItemToObject(status, "identity", identity_json());
}
