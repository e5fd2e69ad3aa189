#include "service.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cJSON.h>
#include <ev.h>

#include "cgroup.h"
#include "check.h"
#include "events.h"
#include "hearth.h"
#include "log.h"
#include "launch.h"
#include "logring.h"
#include "reaper.h"

extern char **environ;

enum svc_event {
    E_START,        /* wanted up */
    E_STOP,         /* wanted down */
    E_EXEC_OK,      /* exec confirmed (close-on-exec pipe hit EOF) */
    E_EXIT,         /* the main process exited */
    E_TIMER,        /* backoff elapsed or stop timeout */
    E_DEPS,         /* everything it is "after" is up */
    E_READY,        /* its readiness check passed */
    E_NEVENTS
};

/* What the child was doing when it failed, reported with errno. */
enum child_stage { STAGE_SETUP = 1, STAGE_CWD, STAGE_EXEC };

static const char *const event_names[] = {"start", "stop", "exec", "exit", "timer", "deps", "ready"};

struct service {
    const struct service_config *cfg;
    enum svc_state state;
    pid_t pid;
    unsigned restarts;
    int wstatus;            /* last exit, valid when has_exit */
    bool has_exit;
    bool killed;            /* stop escalated to SIGKILL */
    char error[256];        /* last spawn error */
    int64_t since_ms;
    ev_timer timer;
    ev_io exec_io;
    int exec_fd;
    char cgroup[CGROUP_PATH_MAX];
    /* output capture */
    struct logring ring;
    struct outpipe {
        int fd;
        ev_io io;
        char part[LOGRING_LINE_MAX]; /* an unfinished line */
        size_t plen;
        struct service *s;
        enum log_stream stream;
    } out[2];
    unsigned fails;          /* consecutive failures, for the backoff */
    int64_t started_ms;      /* when it last reached running */
    bool restart_pending;    /* services.restart: start again once stopped */
    /* readiness: between exec and "running" */
    bool has_ready;
    struct check_spec ready;
    int64_t ready_timeout_ms; /* overall; 0 = no limit */
    int64_t ready_deadline;
    struct check *probe;
    ev_timer ready_timer;     /* next attempt */
};

static struct service svcs[CONFIG_MAX_SERVICES];
static size_t nsvcs;
static int main_index;
static void (*main_done_fn)(int);
static void (*stop_all_done)(void);
static int stop_all_next = -1; /* position in order[] being stopped during stop_all */
static int order[CONFIG_MAX_SERVICES]; /* dependency order: each after what it needs */

static void dispatch(struct service *s, enum svc_event ev);

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
        const char *n = config_signal_name(WTERMSIG(s->wstatus));
        if (n)
            cJSON_AddStringToObject(o, "signal", n);
        else
            cJSON_AddNumberToObject(o, "signal", WTERMSIG(s->wstatus));
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
        if (to == SVC_BACKOFF || to == SVC_FAILED || to == SVC_EXITED || to == SVC_STOPPED)
            cJSON_AddItemToObject(p, "last_exit", exit_json(s));
        if (s->error[0])
            cJSON_AddStringToObject(p, "error", s->error);
    }
    events_emit("service.state", p);
}

static void timer_start(struct service *s, int64_t ms)
{
    ev_timer_stop(H.loop, &s->timer);
    ev_timer_set(&s->timer, (double)ms / 1000.0, 0.);
    ev_timer_start(H.loop, &s->timer);
}

static void timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    dispatch(w->data, E_TIMER);
}

static void close_exec_pipe(struct service *s)
{
    if (s->exec_fd >= 0) {
        ev_io_stop(H.loop, &s->exec_io);
        close(s->exec_fd);
        s->exec_fd = -1;
    }
}

/* The child writes errno to the close-on-exec pipe if exec (or the setup
 * before it) fails; EOF alone means exec succeeded. */
static void exec_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    struct service *s = w->data;
    int report[2] = {0, 0};
    ssize_t n;

    do
        n = read(s->exec_fd, report, sizeof(report));
    while (n < 0 && errno == EINTR);
    if (n < 0 && errno == EAGAIN)
        return;
    close_exec_pipe(s);
    if (n == (ssize_t)sizeof(report)) {
        if (report[0] == STAGE_SETUP)
            snprintf(s->error, sizeof(s->error), "unable to set up limits, identity or capabilities: %s",
                     strerror(report[1]));
        else if (report[0] == STAGE_CWD)
            snprintf(s->error, sizeof(s->error), "unable to enter cwd %s: %s",
                     s->cfg->cwd ? s->cfg->cwd : "/", strerror(report[1]));
        else
            snprintf(s->error, sizeof(s->error), "unable to exec %s: %s", s->cfg->argv[0],
                     strerror(report[1]));
        log_error("service %s: %s", s->cfg->name, s->error);
        return; /* the exit follows through the reaper */
    }
    dispatch(s, E_EXEC_OK);
}

static void child_exited(void *ctx, pid_t pid, int wstatus)
{
    struct service *s = ctx;
    if (s->exec_fd >= 0)
        exec_cb(H.loop, &s->exec_io, 0);
    s->wstatus = wstatus;
    s->has_exit = true;
    s->pid = 0;
    dispatch(s, E_EXIT);
}

static void (*log_sink)(const char *service, size_t index, const struct logline *l);

void services_set_log_sink(void (*fn)(const char *, size_t, const struct logline *)) { log_sink = fn; }

static void emit_line(struct service *s, enum log_stream st, const char *text, size_t len)
{
    const struct logline *l = logring_add(&s->ring, st, text, len);
    if (l && log_sink)
        log_sink(s->cfg->name, (size_t)(s - svcs), l);
}

static void outpipe_close(struct outpipe *o)
{
    if (o->fd < 0)
        return;
    if (o->plen) {
        emit_line(o->s, o->stream, o->part, o->plen);
        o->plen = 0;
    }
    ev_io_stop(H.loop, &o->io);
    close(o->fd);
    o->fd = -1;
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
        outpipe_close(o);
        return;
    }
    for (ssize_t i = 0; i < n; i++) {
        char c = buf[i];
        if (c == '\n') {
            emit_line(o->s, o->stream, o->part, o->plen);
            o->plen = 0;
            continue;
        }
        if (o->plen == sizeof(o->part)) {
            emit_line(o->s, o->stream, o->part, o->plen);
            o->plen = 0;
        }
        o->part[o->plen++] = c;
    }
}

/* Runs in the child between fork and exec: only async-signal-safe calls
 * that cannot touch hearth's loop. Any failure is reported through the
 * pipe and ends the child with 127. */
static void __attribute__((noreturn)) child_exec(struct service *s, int errfd,
                                                 const struct launch_plan *plan, int outfd,
                                                 int errpipe)
{
    const struct service_config *c = s->cfg;
    int report[2];

    launch_reset_signals();
    setsid();
    if (s->cgroup[0]) {
        char path[CGROUP_PATH_MAX + 16];
        snprintf(path, sizeof(path), "%s/cgroup.procs", s->cgroup);
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd >= 0) {
            if (write(fd, "0", 1) != 1) {
                /* Running outside the leaf still works; kill falls back. */
            }
            close(fd);
        }
    }
    int nul = open("/dev/null", O_RDONLY);
    if (nul >= 0 && nul != 0) {
        dup2(nul, 0);
        close(nul);
    }
    if (outfd >= 0)
        dup2(outfd, 1);
    if (errpipe >= 0)
        dup2(errpipe, 2);
    report[0] = STAGE_SETUP;
    if (launch_apply(plan) < 0)
        goto fail;
    report[0] = STAGE_CWD;
    if (chdir(c->cwd ? c->cwd : "/") < 0)
        goto fail;
    report[0] = STAGE_EXEC;
    execvpe(c->argv[0], c->argv, plan->env);
fail:
    report[1] = errno;
    if (write(errfd, report, sizeof(report)) < 0) {
        /* nothing more to do */
    }
    _exit(127);
}

static int spawn(struct service *s)
{
    int p[2];
    struct launch_plan plan;
    pid_t pid;

    s->error[0] = 0;
    if (cgroup_available() && !s->cgroup[0] &&
        cgroup_service_create(s->cfg->name, s->cgroup, sizeof(s->cgroup)) < 0) {
        log_warn("service %s: unable to create cgroup: %s", s->cfg->name, strerror(errno));
        s->cgroup[0] = 0;
    }
    if (pipe2(p, O_CLOEXEC) < 0) {
        snprintf(s->error, sizeof(s->error), "unable to create pipe: %s", strerror(errno));
        return -1;
    }
    if (launch_prepare(s->cfg, &plan, s->error, sizeof(s->error)) < 0) {
        close(p[0]);
        close(p[1]);
        return -1;
    }
    int po[2] = {-1, -1}, pe[2] = {-1, -1};
    for (int i = 0; i < 2; i++)
        outpipe_close(&s->out[i]);
    if (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0) {
        /* Still runnable: output then goes to hearth's own stdout. */
        log_warn("service %s: unable to create output pipes: %s", s->cfg->name, strerror(errno));
        for (int i = 0; i < 2; i++) {
            if (po[i] >= 0) close(po[i]);
            if (pe[i] >= 0) close(pe[i]);
            po[i] = pe[i] = -1;
        }
    }
    pid = fork();
    if (pid < 0) {
        snprintf(s->error, sizeof(s->error), "unable to fork: %s", strerror(errno));
        close(p[0]);
        close(p[1]);
        for (int i = 0; i < 2; i++) {
            if (po[i] >= 0) close(po[i]);
            if (pe[i] >= 0) close(pe[i]);
        }
        launch_free(&plan);
        return -1;
    }
    if (pid == 0) {
        close(p[0]);
        child_exec(s, p[1], &plan, po[1], pe[1]);
    }
    close(p[1]);
    int rd[2] = {po[0], pe[0]};
    for (int i = 0; i < 2; i++) {
        if (po[1] >= 0 && i == 0) close(po[1]);
        if (pe[1] >= 0 && i == 1) close(pe[1]);
        struct outpipe *o = &s->out[i];
        o->fd = rd[i];
        o->plen = 0;
        if (o->fd < 0)
            continue;
        fcntl(o->fd, F_SETFL, O_NONBLOCK);
        ev_io_init(&o->io, outpipe_cb, o->fd, EV_READ);
        o->io.data = o;
        ev_io_start(H.loop, &o->io);
    }
    launch_free(&plan);
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    s->pid = pid;
    s->has_exit = false;
    s->killed = false;
    s->exec_fd = p[0];
    ev_io_init(&s->exec_io, exec_cb, p[0], EV_READ);
    s->exec_io.data = s;
    ev_io_start(H.loop, &s->exec_io);
    if (reaper_watch(pid, child_exited, s) < 0) {
        /* Cannot happen with REAPER_MAX > services; still, never leak. */
        log_error("service %s: unable to watch pid %d", s->cfg->name, (int)pid);
    }
    log_debug("service %s: spawned pid %d", s->cfg->name, (int)pid);
    return 0;
}

static void signal_group(struct service *s, int sig)
{
    if (s->pid > 0) {
        /* The service leads its own process group (setsid). */
        if (kill(-s->pid, sig) < 0 && errno == ESRCH)
            kill(s->pid, sig);
    }
}

/* Kill whatever is left in the leaf once the main process is gone, so no
 * descendant outlives its service. */
static void sweep(struct service *s)
{
    if (s->cgroup[0] && !cgroup_is_empty(s->cgroup))
        cgroup_kill(s->cgroup);
}

/* ---- actions: each returns the next state ---- */

typedef enum svc_state (*action_fn)(struct service *s);

static enum svc_state a_spawn(struct service *s)
{
    if (spawn(s) < 0) {
        log_error("service %s: %s", s->cfg->name, s->error);
        return SVC_FAILED;
    }
    return SVC_STARTING;
}

static void ready_cancel(struct service *s)
{
    check_cancel(s->probe);
    s->probe = NULL;
    ev_timer_stop(H.loop, &s->ready_timer);
}

static void ready_attempt(struct service *s);
static bool suspended;

static void ready_done(void *ctx, bool ok, const char *detail)
{
    struct service *s = ctx;
    s->probe = NULL;
    if (s->state != SVC_STARTING)
        return;
    if (ok) {
        dispatch(s, E_READY);
        return;
    }
    /* Frozen: a failed probe says nothing; services_suspend(false) tries
     * again with the deadline moved by the frozen time. */
    if (suspended)
        return;
    if (s->ready_timeout_ms && mono_ms() >= s->ready_deadline) {
        snprintf(s->error, sizeof(s->error), "not ready after %lld ms: %s",
                 (long long)s->ready_timeout_ms, detail);
        log_warn("service %s: %s; killing it", s->cfg->name, s->error);
        signal_group(s, SIGKILL);
        if (s->cgroup[0])
            cgroup_kill(s->cgroup);
        return; /* the exit goes on through the reaper into backoff */
    }
    /* Poll again shortly: readiness usually comes within seconds. */
    ev_timer_set(&s->ready_timer, 0.2, 0.);
    ev_timer_start(H.loop, &s->ready_timer);
}

static void ready_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    if (suspended)
        return; /* held until the thaw */
    ready_attempt(w->data);
}

static void ready_attempt(struct service *s)
{
    char err[160];
    struct check_spec spec = s->ready;
    spec.argv = spec.argv ? s->ready.argv_store : NULL;
    /* One attempt never outlasts the overall deadline (or 1 s). */
    int64_t left = s->ready_timeout_ms ? s->ready_deadline - mono_ms() : 1000;
    spec.timeout_ms = left < 1 ? 1 : left > 1000 ? 1000 : left;
    s->probe = check_start(H.loop, &spec, ready_done, s, err, sizeof(err));
    if (!s->probe) {
        snprintf(s->error, sizeof(s->error), "readiness check: %s", err);
        log_warn("service %s: %s", s->cfg->name, s->error);
        ev_timer_set(&s->ready_timer, 1.0, 0.);
        ev_timer_start(H.loop, &s->ready_timer);
    }
}

static enum svc_state a_running(struct service *s)
{
    if (s->has_ready) {
        /* exec worked; "running" waits for the readiness check. */
        s->ready_deadline = mono_ms() + s->ready_timeout_ms;
        ready_attempt(s);
        return SVC_STARTING;
    }
    s->started_ms = mono_ms();
    return SVC_RUNNING;
}

static enum svc_state a_ready(struct service *s)
{
    ready_cancel(s);
    s->error[0] = 0;
    s->started_ms = mono_ms();
    return SVC_RUNNING;
}

static enum svc_state a_stop(struct service *s)
{
    ready_cancel(s);
    ev_timer_stop(H.loop, &s->timer);
    signal_group(s, s->cfg->stop_signal);
    timer_start(s, s->cfg->stop_timeout_ms);
    return SVC_STOPPING;
}

static enum svc_state a_cancel(struct service *s)
{
    ev_timer_stop(H.loop, &s->timer);
    return SVC_STOPPED;
}

static enum svc_state a_kill(struct service *s)
{
    log_warn("service %s: no exit %lld ms after %s, killing", s->cfg->name,
             (long long)s->cfg->stop_timeout_ms, config_signal_name(s->cfg->stop_signal));
    s->killed = true;
    signal_group(s, SIGKILL);
    if (s->cgroup[0])
        cgroup_kill(s->cgroup);
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
        int64_t span = d / 5;
        d += (int64_t)(random() % (span + 1)) - span / 2;
    }
    return d < 0 ? 0 : d;
}

static enum svc_state a_spawn(struct service *s);

static enum svc_state a_exited(struct service *s)
{
    ready_cancel(s);
    bool ok = exit_is_success(s);
    sweep(s);
    if (s->error[0] == 0 && !ok) {
        if (WIFEXITED(s->wstatus))
            snprintf(s->error, sizeof(s->error), "exited with code %d", WEXITSTATUS(s->wstatus));
        else if (WIFSIGNALED(s->wstatus))
            snprintf(s->error, sizeof(s->error), "killed by %s",
                     config_signal_name(WTERMSIG(s->wstatus)) ?: "signal");
    }
    if (s->restart_pending) {
        s->restart_pending = false;
        return a_spawn(s);
    }
    if (s->cfg->restart == RESTART_ALWAYS || (s->cfg->restart == RESTART_ON_FAILURE && !ok)) {
        s->restarts++;
        timer_start(s, backoff_delay(s));
        return SVC_BACKOFF;
    }
    return ok ? SVC_EXITED : SVC_FAILED;
}

static enum svc_state a_stopped(struct service *s)
{
    ev_timer_stop(H.loop, &s->timer);
    sweep(s);
    s->fails = 0;
    if (s->restart_pending) {
        s->restart_pending = false;
        return a_spawn(s);
    }
    return SVC_STOPPED;
}

/* Phases services may be "after" (config_after_phases), and whether each
 * has been reached. A module marks its phase when its setup is done
 * (mounts mounted, egress applied...); a phase whose module has nothing to
 * do is marked at boot. Until then, services after it wait. */
static bool phase_done[8];

static int phase_index(const char *name)
{
    for (int i = 0; config_after_phases[i]; i++)
        if (strcmp(config_after_phases[i], name) == 0)
            return i;
    return -1;
}

static struct service *find(const char *name);

/* The first thing s is "after" that is not up yet, or NULL. A service is
 * up when running, or when it exited successfully (a one-shot setup job).
 * A phase is up once its module has marked it reached. */
static const char *unmet_dep(const struct service *s)
{
    for (size_t i = 0; i < s->cfg->n_after; i++) {
        const char *a = s->cfg->after[i];
        int ph = phase_index(a);
        if (ph >= 0) {
            if (!phase_done[ph])
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
    /*               START     STOP      EXEC_OK    EXIT       TIMER    DEPS     READY */
    [SVC_STOPPED]  = {a_start, NULL,     NULL,      NULL,      NULL,    NULL,    NULL},
    [SVC_WAITING]  = {NULL,    a_cancel, NULL,      NULL,      NULL,    a_spawn, NULL},
    [SVC_STARTING] = {NULL,    a_stop,   a_running, a_exited,  NULL,    NULL,    a_ready},
    [SVC_RUNNING]  = {NULL,    a_stop,   NULL,      a_exited,  NULL,    NULL,    NULL},
    [SVC_STOPPING] = {NULL,    NULL,     NULL,      a_stopped, a_kill,  NULL,    NULL},
    [SVC_BACKOFF]  = {NULL,    a_cancel, NULL,      NULL,      a_spawn, NULL,    NULL},
    [SVC_FAILED]   = {a_start, NULL,     NULL,      NULL,      NULL,    NULL,    NULL},
    [SVC_EXITED]   = {a_start, NULL,     NULL,      NULL,      NULL,    NULL,    NULL},
};

static void after_transition(struct service *s);
static void release_waiting(void);

static void dispatch(struct service *s, enum svc_event ev)
{
    action_fn fn = table[s->state][ev];
    if (!fn) {
        log_debug("service %s: %s ignored in %s", s->cfg->name, event_names[ev],
                  state_names[s->state]);
        return;
    }
    set_state(s, fn(s));
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
        main_done_fn(services_main_status());
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
            dispatch(w, E_DEPS);
    }
}

void services_phase_set(const char *phase, bool reached)
{
    int i = phase_index(phase);
    if (i < 0 || phase_done[i] == reached)
        return;
    phase_done[i] = reached;
    log_info("phase %s %s", phase, reached ? "reached" : "no longer reached");
    cJSON *o = cJSON_CreateObject();
    if (o) {
        cJSON_AddStringToObject(o, "phase", phase);
        cJSON_AddBoolToObject(o, "reached", reached);
    }
    events_emit("phase.reached", o);
    if (reached && stop_all_next < 0)
        release_waiting();
}

bool services_phase_reached(const char *phase)
{
    int i = phase_index(phase);
    return i >= 0 && phase_done[i];
}

cJSON *services_phases_json(void)
{
    cJSON *o = cJSON_CreateObject();
    for (int i = 0; o && config_after_phases[i]; i++)
        cJSON_AddBoolToObject(o, config_after_phases[i], phase_done[i]);
    return o;
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

int services_init(const struct config *cfg)
{
    srandom((unsigned)(mono_ms() ^ (getpid() << 16)));
    nsvcs = cfg->n_services;
    main_index = nsvcs ? 0 : -1;
    for (size_t i = 0; i < nsvcs; i++) {
        struct service *s = &svcs[i];
        memset(s, 0, sizeof(*s));
        s->cfg = &cfg->services[i];
        s->state = SVC_STOPPED;
        s->exec_fd = -1;
        for (int k = 0; k < 2; k++) {
            s->out[k].fd = -1;
            s->out[k].s = s;
            s->out[k].stream = (enum log_stream)k;
        }
        {
            const cJSON *lg = cJSON_GetObjectItemCaseSensitive(s->cfg->json, "log");
            const cJSON *rl = cJSON_GetObjectItemCaseSensitive(lg, "ring_lines");
            const cJSON *fl = cJSON_GetObjectItemCaseSensitive(lg, "file");
            const cJSON *mb = cJSON_GetObjectItemCaseSensitive(lg, "max_bytes");
            const cJSON *kp = cJSON_GetObjectItemCaseSensitive(lg, "keep");
            logring_init(&s->ring, cJSON_IsNumber(rl) ? (size_t)rl->valuedouble : LOGRING_DEFAULT_LINES,
                         cJSON_IsString(fl) ? fl->valuestring : NULL,
                         cJSON_IsNumber(mb) ? (int64_t)mb->valuedouble : 10 * 1024 * 1024,
                         cJSON_IsNumber(kp) ? kp->valueint : 3);
        }
        ev_timer_init(&s->timer, timer_cb, 0., 0.);
        s->timer.data = s;
        ev_timer_init(&s->ready_timer, ready_timer_cb, 0., 0.);
        s->ready_timer.data = s;
        const cJSON *rj = cJSON_GetObjectItemCaseSensitive(s->cfg->json, "ready");
        if (rj) {
            char err[160];
            int rc = check_spec_from_json(rj, &s->ready, err, sizeof(err));
            if (rc == 0) {
                s->has_ready = true;
                s->ready_timeout_ms = s->ready.timeout_ms;
            } else if (rc == 1) {
                log_warn("service %s: ready.notify_fd is not supported yet; treated as ready at exec",
                         s->cfg->name);
            } else {
                log_warn("service %s: ready: %s", s->cfg->name, err);
            }
        }
        if (s->cfg->main)
            main_index = (int)i;
    }
    compute_order();
    return 0;
}

void services_start_all(void)
{
    for (size_t i = 0; i < nsvcs; i++)
        dispatch(&svcs[order[i]], E_START);
}

static bool in_stop_next;

static void stop_next(void)
{
    /* dispatch() below re-enters through after_transition(). */
    if (in_stop_next)
        return;
    in_stop_next = true;
    while (stop_all_next >= 0) {
        struct service *s = &svcs[order[stop_all_next]];
        if (!is_down(s) && s->state != SVC_STOPPING)
            dispatch(s, E_STOP);
        else if (s->state == SVC_BACKOFF || s->state == SVC_WAITING)
            dispatch(s, E_STOP);
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

void services_stop_all(void (*done)(void))
{
    stop_all_done = done;
    stop_all_next = (int)nsvcs - 1;
    /* Nothing may restart while the stop walks down the list. */
    for (size_t i = 0; i < nsvcs; i++)
        if (svcs[i].state == SVC_BACKOFF || svcs[i].state == SVC_WAITING)
            dispatch(&svcs[i], E_STOP);
    stop_next();
}

void services_on_main_done(void (*fn)(int)) { main_done_fn = fn; }

int services_main_status(void)
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

cJSON *services_to_json(void)
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
        cJSON_AddNumberToObject(o, "since_ms", (double)(now - s->since_ms));
        cJSON_AddItemToObject(o, "last_exit", exit_json(s));
        if (s->error[0])
            cJSON_AddStringToObject(o, "error", s->error);
        if (s->state == SVC_WAITING && unmet_dep(s))
            cJSON_AddStringToObject(o, "waiting_for", unmet_dep(s));
        if (s->state == SVC_BACKOFF) {
            double left = ev_timer_remaining(H.loop, (ev_timer *)&s->timer);
            cJSON_AddNumberToObject(o, "next_start_ms", (double)(int64_t)(left * 1000.0));
        }
        if (s->cgroup[0])
            cJSON_AddStringToObject(o, "cgroup", s->cgroup);
        cJSON_AddNumberToObject(o, "output_lines", (double)s->ring.total);
        if (s->ring.last_mono_ms)
            cJSON_AddNumberToObject(o, "last_output_ms", (double)(now - s->ring.last_mono_ms));
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

int service_start(int idx, char *err, size_t errlen)
{
    struct service *s = &svcs[idx];
    if (s->state == SVC_STOPPING) {
        s->restart_pending = true;
        return 0;
    }
    if (s->state == SVC_BACKOFF) {
        /* Start now rather than at the end of the delay. */
        ev_timer_stop(H.loop, &s->timer);
        dispatch(s, E_TIMER);
        return 0;
    }
    if (s->state == SVC_RUNNING || s->state == SVC_STARTING || s->state == SVC_WAITING)
        return 0;
    s->fails = 0;
    dispatch(s, E_START);
    if (s->state == SVC_FAILED && s->error[0]) {
        snprintf(err, errlen, "%s", s->error);
        return -1;
    }
    return 0;
}

int service_stop(int idx, char *err, size_t errlen)
{
    struct service *s = &svcs[idx];
    s->restart_pending = false;
    dispatch(s, E_STOP);
    return 0;
}

int service_restart(int idx, char *err, size_t errlen)
{
    struct service *s = &svcs[idx];
    if (s->state == SVC_RUNNING || s->state == SVC_STARTING) {
        s->restart_pending = true;
        dispatch(s, E_STOP);
        return 0;
    }
    if (s->state == SVC_STOPPING) {
        s->restart_pending = true;
        return 0;
    }
    return service_start(idx, err, errlen);
}

int service_signal(int idx, int sig, char *err, size_t errlen)
{
    struct service *s = &svcs[idx];
    if (s->pid <= 0) {
        snprintf(err, errlen, "service %s is not running (%s)", s->cfg->name, state_names[s->state]);
        return -1;
    }
    signal_group(s, sig);
    return 0;
}

cJSON *service_logs_json(int idx, size_t n) { return logring_tail_json(&svcs[idx].ring, n); }

/* ---- pause and resume ---- */

/* While the sandbox is frozen, no clock-driven judgement about a service
 * (health, readiness, backoff) may count the frozen time against it. */
static int64_t suspended_at;

void services_suspend(bool on)
{
    if (suspended == on)
        return;
    suspended = on;
    log_debug("services %s", on ? "suspended" : "no longer suspended");
    if (on) {
        suspended_at = mono_ms();
        return;
    }
    int64_t frozen = mono_ms() - suspended_at;
    for (size_t i = 0; i < nsvcs; i++) {
        struct service *s = &svcs[i];
        if (s->state != SVC_STARTING || !s->has_ready)
            continue;
        s->ready_deadline += frozen;
        if (!s->probe && !ev_is_active(&s->ready_timer))
            ready_attempt(s);
    }
}

bool services_suspended(void) { return suspended; }

int services_resumed(cJSON *report)
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
        if (strcmp(how, "restart") == 0) {
            char err[128];
            if (service_restart((int)(s - svcs), err, sizeof(err)) < 0) {
                log_warn("service %s: restart on resume: %s", s->cfg->name, err);
                continue;
            }
            did = "restart";
        } else {
            /* config.c accepted "signal:NAME" with a known signal. */
            int sig = config_signal_number(how + strlen("signal:"));
            if (sig <= 0)
                continue;
            signal_group(s, sig);
            did = how + strlen("signal:");
        }
        log_info("service %s: %s on resume", s->cfg->name, did);
        if (report)
            cJSON_AddStringToObject(report, s->cfg->name, did);
        acted++;
    }
    return acted;
}
