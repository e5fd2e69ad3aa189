#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cJSON.h>
#include <ev.h>
#include <linux/netlink.h>

#include "cgroup.h"
#include "clock.h"
#include "config.h"
#include "entropy.h"
#include "events.h"
#include "hearth.h"
#include "launch.h"
#include "inherit.h"
#include "log.h"
#include "machine.h"
#include "mounts.h"
#include "network.h"
#include "egress.h"
#include "gates.h"
#include "skills.h"
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

static void set_state(enum sandbox_state s)
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
static int64_t clock_check_ms = 30000;

bool sandbox_clock_allowed(void) { return clock_allowed; }
int64_t sandbox_clock_threshold_ms(void) { return clock_threshold_ms; }

static cJSON *last_resume;
static int64_t last_resume_mono_ms = -1;
static int64_t last_freeze_ms = -1;

static double ms_since(int64_t t0_ns) { return (double)(mono_ns() - t0_ns) / 1e6; }

/* One step's row: {"name","result","ms"[,"detail"]}. */
static cJSON *step_row(cJSON *steps, const char *name, const char *result, double ms,
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
    if (n == 0 || n > 128 || (k[0] >= '0' && k[0] <= '9'))
        return false;
    for (const char *p = k; *p; p++)
        if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
              *p == '_'))
            return false;
    return true;
}

static bool hostname_ok(const char *h)
{
    cJSON *s = cJSON_CreateString(h);
    int rc = s ? config_check_section("hostname", s, NULL, 0) : -1;
    cJSON_Delete(s);
    return rc == 0;
}

/* Replaces the sandbox env with the union of the old one and obj (new
 * values win). Built aside and swapped so a failure changes nothing. */
static int env_merge(const cJSON *obj, char *err, size_t errlen)
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
        redact_add_value(it->valuestring);
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
            snprintf(err, errlen, "env: out of memory");
            return -1;
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

static int init_validate(const struct sandbox_init_req *r, char *err, size_t errlen)
{
    if (r->env) {
        const cJSON *it;
        size_t total = 0, merged = n_env;
        if (!cJSON_IsObject(r->env)) {
            snprintf(err, errlen, "env: expected an object of strings");
            return -1;
        }
        cJSON_ArrayForEach(it, r->env) {
            if (!env_key_ok(it->string)) {
                /* The name came from the request: cut on a character
                 * boundary so the error reply stays valid UTF-8. */
                snprintf(err, errlen, "env: bad variable name \"%.*s\"", utf8_clip(it->string, 64),
                         it->string);
                return -1;
            }
            if (!cJSON_IsString(it)) {
                snprintf(err, errlen, "env.%.64s: expected a string", it->string);
                return -1;
            }
            size_t vl = strlen(it->valuestring);
            if (vl > SANDBOX_ENV_VALUE_MAX) {
                snprintf(err, errlen, "env.%.64s: longer than %d bytes", it->string,
                         SANDBOX_ENV_VALUE_MAX);
                return -1;
            }
            total += vl + strlen(it->string);
            bool known = false;
            for (size_t i = 0; i < n_env && !known; i++)
                known = strcmp(env[i].key, it->string) == 0;
            if (!known)
                merged++;
        }
        if (merged > SANDBOX_ENV_MAX || total > SANDBOX_ENV_TOTAL_MAX) {
            snprintf(err, errlen, "env: more than %d variables or %d bytes", SANDBOX_ENV_MAX,
                     SANDBOX_ENV_TOTAL_MAX);
            return -1;
        }
    }
    if (r->egress && config_check_section("egress", r->egress, err, errlen) < 0)
        return -1;
    if (r->host_mounts && config_check_section("host_mounts", r->host_mounts, err, errlen) < 0)
        return -1;
    if (r->hostname && !hostname_ok(r->hostname)) {
        snprintf(err, errlen, "hostname: not a valid host name");
        return -1;
    }
    return 0;
}

int sandbox_init(const struct sandbox_init_req *r, cJSON *report, int *code, char *err,
                 size_t errlen)
{
    char detail[256];
    int rc = 0;

    *code = -32602;
    if (init_validate(r, err, errlen) < 0)
        return -1;
    *code = -32000;
    if (r->env) {
        if (env_merge(r->env, err, errlen) < 0)
            return -1;
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
        cJSON_AddItemToObject(report, "time", clock_result_json(&cr));
    }
    if (r->entropy) {
        int e = entropy_add(r->entropy, r->entropy_len, detail, sizeof(detail));
        cJSON_AddStringToObject(report, "entropy", e == 0 ? "added" : detail);
        if (e < 0)
            rc = -1;
    }
    if (r->egress) {
        detail[0] = 0;
        int e = egress_set(r->egress, detail, sizeof(detail));
        cJSON_AddStringToObject(report, "egress", detail[0] ? detail : (e == 0 ? "applied" : "failed"));
        if (e < 0)
            rc = -1;
    }
    if (r->host_mounts) {
        detail[0] = 0;
        int e = mounts_set_host(r->host_mounts, detail, sizeof(detail));
        cJSON_AddStringToObject(report, "host_mounts",
                                detail[0] ? detail : (e == 0 ? "applied" : "failed"));
        if (e < 0)
            rc = -1;
    }
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
    double total = ms_since(fz.t0_ns);
    if (r) {
        cJSON_AddBoolToObject(r, "frozen", error == NULL);
        cJSON_AddNumberToObject(r, "total_ms", total);
        cJSON_AddItemToObject(r, "steps", fz.steps);
    } else {
        cJSON_Delete(fz.steps);
    }
    fz.steps = NULL;
    if (error) {
        log_warn("sandbox.freeze failed after %.1f ms: %s", total, error);
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
        step_row(fz.steps, "freeze", "skipped", 0, "no cgroup2: services keep running");
        step_row(fz.steps, "suspend", "ok", 0, NULL);
        services_suspend(true);
        set_state(SANDBOX_FROZEN);
        freeze_finish(NULL);
        return;
    }
    if (cgroup_services_freeze(true) < 0) {
        char d[160];
        snprintf(d, sizeof(d), "cgroup.freeze: %s", strerror(errno));
        step_row(fz.steps, "freeze", "failed", ms_since(fz.step_ns), d);
        set_state(SANDBOX_RUNNING);
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
        step_row(fz.steps, "freeze", "ok", ms_since(fz.step_ns), NULL);
        services_suspend(true);
        step_row(fz.steps, "suspend", "ok", 0, NULL);
        set_state(SANDBOX_FROZEN);
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
        step_row(fz.steps, "freeze", f < 0 ? "failed" : "timeout", ms_since(fz.step_ns), d);
        /* A half-frozen sandbox is worse than a running one: thaw back. */
        cgroup_services_freeze(false);
        set_state(SANDBOX_RUNNING);
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
        snprintf(d, sizeof(d), "mounts_sync failed");
    else
        snprintf(d, sizeof(d), "sync child killed by signal %d", WTERMSIG(wstatus));
    step_row(fz.steps, "sync", failed == 0 ? "ok" : "failed", ms_since(fz.step_ns), d);
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
    step_row(fz.steps, "sync", "timeout", ms_since(fz.step_ns), d);
    freeze_cgroup_start();
}

int sandbox_freeze(int64_t timeout_ms, sandbox_freeze_done done, void *ctx, char *err,
                   size_t errlen)
{
    if (fz.active || state == SANDBOX_FREEZING) {
        snprintf(err, errlen, "a freeze is in progress");
        return -1;
    }
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
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (state == SANDBOX_FROZEN) {
        step_row(fz.steps, "freeze", "ok", 0, "already frozen");
        freeze_finish(NULL);
        return 0;
    }
    set_state(SANDBOX_FREEZING);
    /* syncfs can block for as long as the storage wants (a stalled
     * virtio-fs daemon, a frozen backing store): it runs in a child the
     * loop only waits for with a deadline. */
    pid_t pid = fork();
    if (pid < 0) {
        char d[96];
        snprintf(d, sizeof(d), "fork: %s", strerror(errno));
        step_row(fz.steps, "sync", "failed", 0, d);
        freeze_cgroup_start();
        return 0;
    }
    if (pid == 0) {
        inherit_close_all_but(-1);
        _exit(mounts_sync() < 0 ? 1 : 0);
    }
    fz.sync_pid = pid;
    fz.syncing = true;
    if (reaper_watch(pid, sync_reaped, (void *)(uintptr_t)fz.gen) < 0)
        log_warn("unable to watch the sync child %d", (int)pid);
    ev_timer_init(&fz.timer, sync_timeout_cb, (double)timeout_ms / 2000.0, 0.);
    ev_timer_start(H.loop, &fz.timer);
    return 0;
}

/* ---- resume ---- */

enum step_result { STEP_OK, STEP_SKIPPED, STEP_FAILED };
static const char *const step_results[] = {"ok", "skipped", "failed"};

struct resume_ctx {
    const struct sandbox_resume_req *req;
    const char *cause;
    bool host;          /* sandbox.resume, not a detector */
    bool was_frozen;
    bool stepped;       /* the time step set the clock */
    cJSON *row;         /* the current step's row, for extra members */
};

static enum step_result step_time(struct resume_ctx *rc, char *d, size_t dl)
{
    struct clock_result cr;
    struct timespec target;
    int64_t threshold = clock_threshold_ms;
    const char *src = "host";

    if (rc->req && rc->req->has_time) {
        target = rc->req->time;
    } else if (!rc->host) {
        int64_t res;
        if (clock_hw_read(&target, &src, &res) < 0) {
            snprintf(d, dl, "no time given and no hardware clock");
            return STEP_SKIPPED;
        }
        threshold += res;
    } else {
        snprintf(d, dl, "no time given");
        return STEP_SKIPPED;
    }
    clock_sync(&target, clock_allowed, threshold, &cr);
    rc->stepped = cr.action == CLOCK_STEPPED;
    cJSON_AddStringToObject(rc->row, "source", src);
    cJSON_AddItemToObject(rc->row, "clock", clock_result_json(&cr));
    snprintf(d, dl, "%s", cr.error[0] ? cr.error : clock_action_name(cr.action));
    return cr.action == CLOCK_ERROR ? STEP_FAILED : STEP_OK;
}

static enum step_result step_entropy(struct resume_ctx *rc, char *d, size_t dl)
{
    if (!rc->req || !rc->req->entropy) {
        snprintf(d, dl, "no entropy given");
        return STEP_SKIPPED;
    }
    if (entropy_add(rc->req->entropy, rc->req->entropy_len, d, dl) < 0)
        return STEP_FAILED;
    snprintf(d, dl, "%zu bytes, CRNG reseeded", rc->req->entropy_len);
    return STEP_OK;
}

static enum step_result run_hook(int (*fn)(char *, size_t), char *d, size_t dl)
{
    d[0] = 0;
    return fn(d, dl) == 0 ? STEP_OK : STEP_FAILED;
}

static enum step_result step_mounts(struct resume_ctx *rc, char *d, size_t dl)
{
    return run_hook(mounts_recheck, d, dl);
}

static enum step_result step_network(struct resume_ctx *rc, char *d, size_t dl)
{
    return run_hook(network_recheck, d, dl);
}

static enum step_result step_egress(struct resume_ctx *rc, char *d, size_t dl)
{
    return run_hook(egress_recheck, d, dl);
}

static enum step_result step_skills(struct resume_ctx *rc, char *d, size_t dl)
{
    if (!skills_enabled()) {
        snprintf(d, dl, "no skills overlay configured");
        return STEP_SKIPPED;
    }
    d[0] = 0;
    if (skills_sync("resume", d, dl) < 0)
        return STEP_FAILED;
    /* The walk runs in a child: its outcome is the skills.sync event. */
    snprintf(d, dl, "reconcile queued");
    return STEP_OK;
}

/* A detector never thaws what the host froze: the host's own
 * sandbox.resume does, once it is ready for the sandbox to run. */
static bool held_by_host(const struct resume_ctx *rc) { return rc->was_frozen && !rc->host; }

static enum step_result step_thaw(struct resume_ctx *rc, char *d, size_t dl)
{
    if (!rc->was_frozen) {
        snprintf(d, dl, "not frozen");
        return STEP_SKIPPED;
    }
    if (held_by_host(rc)) {
        snprintf(d, dl, "frozen by the host: waits for sandbox.resume");
        return STEP_SKIPPED;
    }
    enum step_result r = STEP_OK;
    if (cgroup_available() && cgroup_services_freeze(false) < 0) {
        snprintf(d, dl, "cgroup.freeze: %s", strerror(errno));
        r = STEP_FAILED;
    }
    services_suspend(false);
    set_state(SANDBOX_RUNNING);
    return r;
}

static enum step_result step_on_resume(struct resume_ctx *rc, char *d, size_t dl)
{
    if (held_by_host(rc)) {
        snprintf(d, dl, "sandbox still frozen");
        return STEP_SKIPPED;
    }
    cJSON *acted = cJSON_CreateObject();
    int n = services_resumed(acted);
    if (acted)
        cJSON_AddItemToObject(rc->row, "services", acted);
    snprintf(d, dl, "%d service%s", n, n == 1 ? "" : "s");
    return n ? STEP_OK : STEP_SKIPPED;
}

static enum step_result step_health(struct resume_ctx *rc, char *d, size_t dl)
{
    if (services_suspended()) {
        snprintf(d, dl, "services still frozen");
        return STEP_SKIPPED;
    }
    int n = services_health_now();
    snprintf(d, dl, "%d service%s checked at once", n, n == 1 ? "" : "s");
    return n ? STEP_OK : STEP_SKIPPED;
}

struct resume_step {
    const char *name;
    enum step_result (*fn)(struct resume_ctx *rc, char *detail, size_t len);
};

/* The order matters: the clock first (everything after logs and checks
 * with the right time), checks and repairs while services are still
 * frozen, then thaw and each service's own on_resume. */
static const struct resume_step resume_steps[] = {
    {"time", step_time},     {"entropy", step_entropy}, {"mounts", step_mounts},
    {"network", step_network}, {"egress", step_egress}, {"skills", step_skills},
    {"thaw", step_thaw},     {"on_resume", step_on_resume}, {"health", step_health},
};

static int64_t self_step_pending; /* mono ms of our own clock step, for the timerfd */

struct cJSON *sandbox_resume(const struct sandbox_resume_req *req, const char *cause, char *err,
                             size_t errlen)
{
    struct resume_ctx rc = {.req = req, .cause = cause, .host = strcmp(cause, "host") == 0};
    char detail[256];
    int64_t t0 = mono_ns();

    if (state == SANDBOX_FREEZING) {
        snprintf(err, errlen, "a freeze is in progress");
        return NULL;
    }
    rc.was_frozen = state == SANDBOX_FROZEN;
    cJSON *r = cJSON_CreateObject(), *steps = cJSON_CreateArray();
    if (!r || !steps) {
        cJSON_Delete(r);
        cJSON_Delete(steps);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (!rc.was_frozen)
        set_state(SANDBOX_RESUMING);
    self_step_pending = mono_ms();
    int failed = 0;
    for (size_t i = 0; i < sizeof(resume_steps) / sizeof(resume_steps[0]); i++) {
        int64_t ts = mono_ns();
        rc.row = step_row(steps, resume_steps[i].name, "ok", 0, NULL);
        if (!rc.row) {
            rc.row = cJSON_CreateObject(); /* keep going; the row is lost */
            if (!rc.row)
                continue;
            cJSON_AddItemToArray(steps, rc.row);
        }
        detail[0] = 0;
        enum step_result sr = resume_steps[i].fn(&rc, detail, sizeof(detail));
        cJSON_ReplaceItemInObjectCaseSensitive(rc.row, "result",
                                               cJSON_CreateString(step_results[sr]));
        cJSON_ReplaceItemInObjectCaseSensitive(rc.row, "ms", cJSON_CreateNumber(ms_since(ts)));
        if (detail[0])
            cJSON_AddStringToObject(rc.row, "detail", detail);
        if (sr == STEP_FAILED) {
            failed++;
            log_warn("resume step %s failed: %s", resume_steps[i].name, detail);
        }
    }
    if (state == SANDBOX_RESUMING)
        set_state(SANDBOX_RUNNING);
    double total = ms_since(t0);
    cJSON_AddStringToObject(r, "cause", cause);
    cJSON_AddBoolToObject(r, "ok", failed == 0);
    cJSON_AddStringToObject(r, "state", state_names[state]);
    cJSON_AddNumberToObject(r, "total_ms", total);
    cJSON_AddNumberToObject(r, "at_ms", (double)wall_ms());
    cJSON_AddItemToObject(r, "steps", steps);
    /* The news for the services: a clock step detected from outside is
     * a stepped clock too. */
    cJSON *news = resumefile_write(cause, rc.stepped || strcmp(cause, "clock_step") == 0,
                                   rc.was_frozen);
    if (news)
        cJSON_AddItemToObject(r, "resume_file", news);
    if (state != SANDBOX_FROZEN)
        resumefile_frozen(false);
    last_resume_mono_ms = mono_ms();
    cJSON_Delete(last_resume);
    last_resume = cJSON_Duplicate(r, 1);
    cJSON *ev = cJSON_Duplicate(r, 1);
    if (ev)
        events_emit("resume", ev);
    log_info("resume (%s) in %.2f ms, %d step%s failed", cause, total, failed,
             failed == 1 ? "" : "s");
    return r;
}

cJSON *sandbox_time_sync(const struct timespec *t)
{
    struct clock_result cr;
    self_step_pending = mono_ms();
    clock_sync(t, clock_allowed, clock_threshold_ms, &cr);
    /* A step here is a correction, not a pause the next resume reports. */
    resumefile_reference();
    cJSON *r = clock_result_json(&cr);
    if (r) {
        cJSON_AddBoolToObject(r, "allowed", clock_allowed);
        cJSON_AddNumberToObject(r, "threshold_ms", (double)clock_threshold_ms);
    }
    return r;
}

/* ---- resume detection ---- */

static int clock_fd = -1, uevent_fd = -1;
static ev_io clock_io, uevent_io;
static ev_timer hw_timer;

/* Detectors can fire together for one restore (a vmgenid uevent, then the
 * clock comparison): within a second of the last resume they only log.
 * Returns whether the resume steps ran. */
static bool detected(const char *cause)
{
    if (last_resume_mono_ms >= 0 && mono_ms() - last_resume_mono_ms < 1000) {
        log_debug("resume detector %s: just resumed, nothing to do", cause);
        return false;
    }
    log_info("resume detected (%s)", cause);
    char err[128];
    cJSON *r = sandbox_resume(NULL, cause, err, sizeof(err));
    if (!r)
        log_warn("resume (%s) not run: %s", cause, err);
    cJSON_Delete(r);
    return true;
}

static int arm_clock_fd(void)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    /* An absolute deadline far away: only a clock step wakes it up. */
    struct itimerspec its = {.it_value = {.tv_sec = now.tv_sec + 10LL * 365 * 86400}};
    return timerfd_settime(clock_fd, TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET, &its, NULL);
}

static void clock_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    uint64_t n;
    ssize_t r = read(clock_fd, &n, sizeof(n));
    bool stepped = r < 0 && errno == ECANCELED;
    if (arm_clock_fd() < 0) {
        log_warn("clock-step watcher: %s; turned off", strerror(errno));
        ev_io_stop(H.loop, &clock_io);
        close(clock_fd);
        clock_fd = -1;
        return;
    }
    if (!stepped)
        return;
    /* Our own step (resume, time.sync) also cancels the timer. */
    if (self_step_pending && mono_ms() - self_step_pending < 1000) {
        self_step_pending = 0;
        return;
    }
    detected("clock_step");
}

bool sandbox_uevent_is_vmgenid(const char *buf, size_t n)
{
    /* "ACTION@DEVPATH" then NUL-separated KEY=VALUE strings; the last one
     * need not be terminated. */
    for (size_t off = 0; off < n;) {
        size_t l = strnlen(buf + off, n - off);
        if (l >= 13 && memcmp(buf + off, "NEW_VMGEN_ID=", 13) == 0)
            return true;
        off += l + 1;
    }
    return false;
}

static void uevent_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    char buf[8192];
    for (int i = 0; i < 16; i++) {
        struct sockaddr_nl from;
        socklen_t fl = sizeof(from);
        ssize_t n = recvfrom(uevent_fd, buf, sizeof(buf), MSG_DONTWAIT, (struct sockaddr *)&from,
                             &fl);
        if (n < 0) {
            if (errno != EAGAIN && errno != EINTR && errno != ENOBUFS)
                log_debug("uevent socket: %s", strerror(errno));
            return;
        }
        /* Only the kernel (port 0) speaks for the VM generation: a
         * process that may send on this socket cannot fake a restore. */
        if (fl < sizeof(from) || from.nl_pid != 0)
            continue;
        if (sandbox_uevent_is_vmgenid(buf, (size_t)n))
            detected("vmgenid");
    }
}

/* The lag already accounted for: when the clock could not be stepped the
 * lag stays, and only a further jump is a new pause. */
static int64_t hw_baseline_ms;

static int hw_lag_ms(int64_t *lag_ms, int64_t *res, const char **src)
{
    struct timespec hw, sys;
    if (clock_hw_read(&hw, src, res) < 0 || clock_gettime(CLOCK_REALTIME, &sys) < 0)
        return -1;
    /* After a pause the system clock lags by the gap; the hardware clock
     * kept going. Only a lag counts: RTC truncation makes sys look ahead. */
    *lag_ms = clock_diff_ns(&hw, &sys) / 1000000;
    return 0;
}

static void hw_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    const char *src;
    int64_t lag, res;

    if (hw_lag_ms(&lag, &res, &src) < 0)
        return;
    if (sandbox_hw_clock_lags(lag - hw_baseline_ms, clock_threshold_ms, res)) {
        /* A lag seen within a second of a resume is not taken as the new
         * baseline: the monotonic clock that second is counted on stops
         * while the VM does, so the host's pause right after its own
         * sandbox.resume lands here, and must be found by the next check. */
        if (!detected(strcmp(src, "ptp0") == 0 ? "ptp_clock" : "rtc"))
            return;
        if (hw_lag_ms(&lag, &res, &src) == 0)
            hw_baseline_ms = lag > 0 ? lag : 0;
    }
}

bool sandbox_hw_clock_lags(int64_t lag_ms, int64_t threshold_ms, int64_t resolution_ms)
{
    return lag_ms > threshold_ms + resolution_ms;
}

static void detectors_start(void)
{
    /* The clock-step watcher only where hearth owns the clock: in a
     * container a step is the host's NTP, not a resume. */
    if (clock_allowed) {
        clock_fd = timerfd_create(CLOCK_REALTIME, TFD_NONBLOCK | TFD_CLOEXEC);
        if (clock_fd < 0 || arm_clock_fd() < 0) {
            log_warn("clock-step watcher unavailable: %s", strerror(errno));
            if (clock_fd >= 0)
                close(clock_fd);
            clock_fd = -1;
        } else {
            ev_io_init(&clock_io, clock_cb, clock_fd, EV_READ);
            ev_io_start(H.loop, &clock_io);
        }
    }
    uevent_fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                       NETLINK_KOBJECT_UEVENT);
    struct sockaddr_nl sa = {.nl_family = AF_NETLINK, .nl_groups = 1};
    if (uevent_fd < 0 || bind(uevent_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        log_debug("uevent socket unavailable: %s", strerror(errno));
        if (uevent_fd >= 0)
            close(uevent_fd);
        uevent_fd = -1;
    } else {
        ev_io_init(&uevent_io, uevent_cb, uevent_fd, EV_READ);
        ev_io_start(H.loop, &uevent_io);
    }
    /* Also only where hearth owns the clock: a host's RTC drifts from its
     * NTP-disciplined clock by seconds, which is not a resume. */
    if (clock_allowed && clock_check_ms > 0 && clock_hw_present()) {
        double s = (double)clock_check_ms / 1000.0;
        ev_timer_init(&hw_timer, hw_cb, hearth_grid_delay(clock_check_ms), s);
        ev_timer_start(H.loop, &hw_timer);
    }
}

void sandbox_thaw_for_shutdown(void)
{
    if (fz.active) {
        /* A freeze finishing now would freeze services mid-stop. */
        if (fz.sync_pid > 0)
            kill(fz.sync_pid, SIGKILL);
        fz.sync_pid = -1;
        fz.syncing = false;
        step_row(fz.steps, "freeze", "cancelled", ms_since(fz.step_ns), "shutting down");
        freeze_finish("cancelled: shutting down");
    }
    if (state != SANDBOX_FROZEN && state != SANDBOX_FREEZING)
        return;
    if (cgroup_available() && cgroup_services_freeze(false) < 0)
        log_warn("unable to thaw services before stopping: %s", strerror(errno));
    services_suspend(false);
    set_state(SANDBOX_RUNNING);
}

/* ---- setup and status ---- */

static int64_t json_int_or(const cJSON *o, const char *k, int64_t dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : dflt;
}

void sandbox_setup(const struct config *cfg)
{
    const cJSON *clk = cJSON_GetObjectItemCaseSensitive(cfg->json, "clock");
    const cJSON *set = cJSON_GetObjectItemCaseSensitive(clk, "set");
    const cJSON *wait = cJSON_GetObjectItemCaseSensitive(cfg->json, "wait_for_init");
    const cJSON *ot = cJSON_GetObjectItemCaseSensitive(wait, "on_timeout");

    clock_allowed = cJSON_IsBool(set) ? cJSON_IsTrue(set) : H.mode == MODE_VM;
    clock_threshold_ms = json_int_or(clk, "step_threshold_ms", CLOCK_DEFAULT_THRESHOLD_MS);
    clock_check_ms = json_int_or(clk, "check_ms", 30000);
    on_timeout_fail = cJSON_IsString(ot) && strcmp(ot->valuestring, "fail") == 0;
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
    detectors_start();
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
        }
        cJSON *d = cJSON_AddArrayToObject(s, "detectors");
        if (d) {
            if (clock_fd >= 0)
                cJSON_AddItemToArray(d, cJSON_CreateString("clock_step"));
            if (uevent_fd >= 0)
                cJSON_AddItemToArray(d, cJSON_CreateString("vmgenid"));
            if (ev_is_active(&hw_timer))
                cJSON_AddItemToArray(d, cJSON_CreateString("hw_clock"));
        }
        if (last_freeze_ms >= 0)
            cJSON_AddNumberToObject(s, "last_freeze_ms", (double)last_freeze_ms);
    }
    cJSON_AddBoolToObject(status, "frozen", state == SANDBOX_FROZEN);
    if (last_resume)
        cJSON_AddItemToObject(status, "last_resume", cJSON_Duplicate(last_resume, 1));
    else
        cJSON_AddNullToObject(status, "last_resume");
}
