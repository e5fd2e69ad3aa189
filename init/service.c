#include "service.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cJSON.h>
#include <ev.h>

#include "cgroup.h"
#include "contain.h"
#include "check.h"
#include "events.h"
#include "gates.h"
#include "hearth.h"
#include "log.h"
#include "launch.h"
#include "logring.h"
#include "notify.h"
#include "reaper.h"
#include "redact.h"

extern char **environ;

enum svc_event {
    E_START,        /* wanted up */
    E_STOP,         /* wanted down */
    E_EXEC_OK,      /* exec confirmed (close-on-exec pipe hit EOF) */
    E_EXIT,         /* the main process exited */
    E_TIMER,        /* backoff elapsed or stop timeout */
    E_DEPS,         /* everything it is "after" is up */
    E_READY,        /* its readiness check passed */
    E_UNHEALTHY,    /* its health check failed too many times in a row */
    E_NEVENTS
};

/* What the child was doing when it failed, reported with errno. */
enum child_stage { STAGE_SETUP = 1, STAGE_CWD, STAGE_EXEC, STAGE_CONTAIN, STAGE_SECCOMP };

/* What a child that failed before exec writes to the exec-status pipe
 * (one write below PIPE_BUF, so it arrives whole or not at all). */
struct child_report {
    int stage;
    int err;
    char what[200]; /* STAGE_CONTAIN: "unable to mask /proc/kcore" */
};

static const char *const event_names[] = {"start", "stop", "exec", "exit", "timer", "deps", "ready", "unhealthy"};

struct service {
    const struct service_config *cfg;
    enum svc_state state;
    pid_t pid;
    unsigned restarts;
    int wstatus;            /* last exit, valid when has_exit */
    bool has_exit;
    bool killed;            /* stop escalated to SIGKILL */
    char error[256];        /* last spawn error */
    char privileged[256];   /* why its settings let it undo hearth's setup; "" = contained */
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
        bool paused;                 /* not read: every follower is full */
    } out[2];
    unsigned fails;          /* consecutive failures, for the backoff */
    int64_t started_ms;      /* when it last reached running */
    bool restart_pending;    /* services.restart: start again once stopped */
    int restart_signal;      /* a graceful restart's signal for the next stop; 0 = stop.signal */
    /* readiness: between exec and "running" */
    bool has_ready;
    struct check_spec ready;
    int64_t ready_timeout_ms; /* overall; 0 = no limit */
    int64_t ready_deadline;
    char ready_why[192];      /* the last whole attempt's failure */
    struct check *probe;
    ev_timer ready_timer;     /* next attempt; with notify_fd, the deadline */
    int notify_fd;            /* ready.notify_fd in the child; 0 = not used */
    int notify_rd;            /* hearth's end of that pipe, -1 when closed */
    ev_io notify_io;
    bool ready_notify;        /* ready.notify: READY=1 on NOTIFY_SOCKET makes it running */
    bool ready_extended;      /* EXTEND_TIMEOUT_USEC moved ready_deadline */
    /* NOTIFY_SOCKET (ready.notify, health.watchdog_ms): its own datagram
     * socket, bound at boot and kept for hearth's life */
    int nsock;                /* -1 = none */
    ev_io nsock_io;
    char nsock_addr[NOTIFY_ADDR_MAX];
    char nstatus[NOTIFY_STATUS_MAX]; /* the last STATUS= */
    bool nstopping, nreloading;      /* STOPPING=1, RELOADING=1 this run */
    unsigned long n_msgs;     /* datagrams accepted */
    unsigned long n_refused;  /* from a process outside the service, or without credentials */
    unsigned long n_bad;      /* oversized, holding a NUL, or lines not understood */
    int64_t n_last_ms;        /* when the last accepted datagram came; 0 = none */
    int64_t watchdog_ms;      /* health.watchdog_ms; 0 = no watchdog */
    int64_t wd_last_ms;       /* the last WATCHDOG=1; 0 = none */
    int64_t stop_began_ms;    /* bounds EXTEND_TIMEOUT_USEC during a stop */
    const char *cause;        /* why the next state change happens ("notify", "watchdog") */
    /* health: periodic probes while running */
    bool has_health;
    struct check_spec health;
    int64_t health_interval_ms;
    unsigned health_threshold;   /* consecutive failures that restart it */
    struct check *hprobe;
    ev_timer health_timer;       /* next probe */
    unsigned health_fails;       /* consecutive */
    unsigned long health_checks; /* probes completed since it last started */
    int64_t health_last_ms;      /* when the last probe ended; 0 = none yet */
    char health_detail[160];     /* the last failure */
    bool unhealthy_stop;         /* being stopped because of its health */
    /* backoff time left when suspended, restored on resume */
    int64_t suspend_left_ms;
    /* OOM kills in its leaf (memory.events), when it has memory accounting */
    bool oom_known;
    int oom_wd;               /* inotify watch on memory.events, -1 = none */
    uint64_t oom_leaf;        /* the current leaf's oom_kill count, last read */
    uint64_t oom_kills;       /* over every leaf it had */
    bool leaf_killed;         /* cgroup.kill was used on the leaf */
    uint64_t cpu_usec_before; /* CPU time of leaves it had before this one */
    bool oom_this_run;        /* the OOM killer struck since the last spawn */
};

static struct service svcs[CONFIG_MAX_SERVICES];
static size_t nsvcs;
static int main_index;
static void (*main_done_fn)(int);
static void (*stop_all_done)(void);
static int stop_all_next = -1; /* position in order[] being stopped during stop_all */
static int order[CONFIG_MAX_SERVICES]; /* dependency order: each after what it needs */

static void dispatch(struct service *s, enum svc_event ev);
static void notify_close(struct service *s);
static void notify_cb(struct ev_loop *loop, ev_io *w, int revents);

/* While the sandbox is frozen, no clock-driven judgement about a service
 * (health, readiness, backoff) may count the frozen time against it. */
static bool suspended;
static int64_t suspended_at; /* mono_ms when it began */

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

static void health_on_state(struct service *s, enum svc_state from, enum svc_state to);

static void set_state(struct service *s, enum svc_state to)
{
    enum svc_state from = s->state;
    if (from == to)
        return;
    s->state = to;
    s->since_ms = mono_ms();
    health_on_state(s, from, to);
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
        if (s->cause)
            cJSON_AddStringToObject(p, "cause", s->cause);
    }
    s->cause = NULL;
    events_emit("service.state", p);
}

static void timer_start(struct service *s, int64_t ms)
{
    ev_timer_stop(H.loop, &s->timer);
    ev_timer_set(&s->timer, (double)ms / 1000.0, 0.);
    ev_timer_start(H.loop, &s->timer);
}

void service_owner(const struct service_config *c, uid_t *uid, gid_t *gid)
{
    char home[256];

    *uid = geteuid();
    *gid = getegid();
    /* Only a root hearth can give files away. */
    if (*uid != 0)
        return;
    /* A user that does not resolve fails the start later, with its own
     * error; meanwhile hearth keeps what it makes. */
    if (c->user && launch_lookup_user("/etc/passwd", c->user, uid, gid, home, sizeof(home)) < 0) {
        *uid = 0;
        *gid = getegid();
        return;
    }
    if (c->group && launch_lookup_group("/etc/group", c->group, gid) < 0)
        *gid = getegid();
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
    struct child_report report;
    ssize_t n;

    memset(&report, 0, sizeof(report));
    do
        n = read(s->exec_fd, &report, sizeof(report));
    while (n < 0 && errno == EINTR);
    if (n < 0 && errno == EAGAIN)
        return;
    close_exec_pipe(s);
    if (n == (ssize_t)sizeof(report)) {
        report.what[sizeof(report.what) - 1] = 0;
        if (report.stage == STAGE_SETUP)
            snprintf(s->error, sizeof(s->error), "unable to set up limits, identity or capabilities: %s",
                     strerror(report.err));
        else if (report.stage == STAGE_CONTAIN)
            snprintf(s->error, sizeof(s->error), "containment: %s: %s", report.what,
                     strerror(report.err));
        else if (report.stage == STAGE_SECCOMP)
            snprintf(s->error, sizeof(s->error), "seccomp: unable to install the filter: %s",
                     strerror(report.err));
        else if (report.stage == STAGE_CWD)
            snprintf(s->error, sizeof(s->error), "unable to enter cwd %s: %s",
                     s->cfg->cwd ? s->cfg->cwd : "/", strerror(report.err));
        else
            snprintf(s->error, sizeof(s->error), "unable to exec %s: %s", s->cfg->argv[0],
                     strerror(report.err));
        log_error("service %s: %s", s->cfg->name, s->error);
        return; /* the exit follows through the reaper */
    }
    if (!H.first_exec_us)
        H.first_exec_us = mono_us();
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
static bool (*log_full)(size_t index);
static unsigned paused_pipes; /* output pipes not being read, over all services */

void services_set_log_sink(void (*fn)(const char *, size_t, const struct logline *)) { log_sink = fn; }
void services_set_log_gate(bool (*full)(size_t index)) { log_full = full; }

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
    if (o->paused) {
        o->paused = false;
        paused_pipes--;
    }
    ev_io_stop(H.loop, &o->io);
    close(o->fd);
    o->fd = -1;
}

void services_output_resume(void)
{
    if (!paused_pipes)
        return;
    for (size_t i = 0; i < nsvcs; i++) {
        for (int k = 0; k < 2; k++) {
            struct outpipe *o = &svcs[i].out[k];
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
    /* Back-pressure: when everyone following this service has a full
     * queue, the pipe is left unread, so the service blocks in write()
     * instead of hearth buffering its output. The loop and the other
     * services go on; services_output_resume starts reading again. */
    if (log_full && log_full((size_t)(o->s - svcs))) {
        ev_io_stop(loop, &o->io);
        o->paused = true;
        paused_pipes++;
    }
}

/* The plan's environment is hearth's own, the service's env, the sandbox
 * env (registered by sandbox.init) and what its env_files said: every
 * value that is neither inherited nor configured (nor the HOME and USER
 * set for its user) came from an env file, and is kept out of what
 * hearth shows. */
static void register_file_values(const struct service_config *c, const struct launch_plan *p)
{
    if (!c->n_env_files)
        return;
    for (size_t i = 0; i < p->n_env; i++) {
        const char *kv = p->env[i], *eq = strchr(kv, '=');
        if (!eq)
            continue;
        size_t klen = (size_t)(eq - kv);
        const char *v = eq + 1;
        if ((klen == 4 && (strncmp(kv, "HOME", 4) == 0 || strncmp(kv, "USER", 4) == 0)))
            continue;
        bool known = false;
        for (size_t j = 0; j < c->n_env && !known; j++)
            known = strlen(c->env[j].key) == klen && strncmp(c->env[j].key, kv, klen) == 0 &&
                    strcmp(c->env[j].value, v) == 0;
        for (char **e = environ; e && *e && !known; e++)
            known = strncmp(*e, kv, klen + 1) == 0 && strcmp(*e + klen + 1, v) == 0;
        if (!known)
            redact_add_value(v);
    }
}

/* Runs in the child between fork and exec: only async-signal-safe calls
 * that cannot touch hearth's loop. Any failure is reported through the
 * pipe and ends the child with 127. */
static void __attribute__((noreturn)) child_exec(struct service *s, int errfd,
                                                 const struct launch_plan *plan, int outfd,
                                                 int errpipe, int notify_w, bool placed)
{
    const struct service_config *c = s->cfg;
    struct child_report report;

    launch_reset_signals();
    setsid();
    /* Born in its leaf by clone3; otherwise it moves itself there. */
    if (s->cgroup[0] && !placed) {
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
    memset(&report, 0, sizeof(report));
    report.stage = STAGE_SETUP;
    if (notify_w >= 0) {
        /* The write end goes to the number the service expects, without
         * close-on-exec; the error pipe moves away if it sits there. */
        int nfd = s->notify_fd;
        if (errfd == nfd) {
            int moved = fcntl(errfd, F_DUPFD_CLOEXEC, 3);
            if (moved < 0)
                goto fail;
            errfd = moved;
        }
        if (notify_w == nfd ? fcntl(nfd, F_SETFD, 0) < 0 : dup2(notify_w, nfd) < 0)
            goto fail;
    }
    /* Namespaces and masks first: they need the privileges the
     * capability and identity changes below take away. */
    report.stage = STAGE_CONTAIN;
    if (contain_enter(&plan->contain, report.what, sizeof(report.what)) < 0)
        goto fail;
    report.stage = STAGE_SETUP;
    if (launch_apply(plan) < 0)
        goto fail;
    report.stage = STAGE_CWD;
    if (chdir(c->cwd ? c->cwd : "/") < 0)
        goto fail;
    /* Last: the filter would refuse the mounts made above. */
    report.stage = STAGE_SECCOMP;
    if (plan->contain.seccomp && seccomp_install(&plan->contain.prog) < 0)
        goto fail;
    report.stage = STAGE_EXEC;
    execvpe(c->argv[0], c->argv, plan->env);
fail:
    report.err = errno;
    if (write(errfd, &report, sizeof(report)) < 0) {
        /* nothing more to do */
    }
    _exit(127);
}

/* Kills everything in the leaf. Some kernels then SIGKILL every child
 * clone3 places into that leaf later on (the count of kills the child
 * was forked under is taken from the parent's cgroup, not the target's),
 * so the next spawn recreates the leaf first, or falls back to a fork. */
static void leaf_kill(struct service *s)
{
    if (!s->cgroup[0])
        return;
    cgroup_kill(s->cgroup);
    s->leaf_killed = true;
}

static void oom_watch(struct service *s);

/* Before a spawn: a leaf cgroup.kill was used on is replaced by a fresh
 * one when it is empty. Returns the leaf clone3 may place the child in,
 * or NULL when the child has to move itself. */
static const char *leaf_for_spawn(struct service *s)
{
    if (!s->cgroup[0])
        return NULL;
    if (!s->leaf_killed)
        return s->cgroup;
    uint64_t used = 0;
    bool have_used = cgroup_cpu_usec(s->cgroup, &used) == 0;
    if (!cgroup_is_empty(s->cgroup) || cgroup_service_recreate(s->cgroup) < 0) {
        log_debug("service %s: cgroup %s not recreated (%s); forking", s->cfg->name, s->cgroup,
                  strerror(errno));
        return NULL;
    }
    s->leaf_killed = false;
    if (have_used)
        s->cpu_usec_before += used;
    /* The old watch went with the old leaf; counts go on from the new one. */
    s->oom_known = false;
    s->oom_wd = -1;
    oom_watch(s);
    return s->cgroup;
}

/* ---- OOM kills: memory.events of each leaf, watched with inotify ---- */

/* The kernel signals a change of a cgroup's memory.events as a file
 * modification; poll() on it would report readable at all times, so one
 * inotify descriptor carries the news for every leaf. */
static int ino_fd = -1;
static ev_io ino_io;

static void oom_check(struct service *s)
{
    uint64_t n;
    if (!s->oom_known || !s->cgroup[0] || cgroup_oom_kills(s->cgroup, &n) < 0 || n <= s->oom_leaf)
        return;
    uint64_t added = n - s->oom_leaf;
    s->oom_leaf = n;
    s->oom_kills += added;
    s->oom_this_run = true;
    log_warn("service %s: the kernel's OOM killer ended %llu process%s in its cgroup",
             s->cfg->name, (unsigned long long)added, added == 1 ? "" : "es");
    cJSON *p = cJSON_CreateObject();
    if (p) {
        cJSON_AddStringToObject(p, "service", s->cfg->name);
        cJSON_AddNumberToObject(p, "oom_kills", (double)s->oom_kills);
        cJSON_AddNumberToObject(p, "new", (double)added);
        cJSON_AddNumberToObject(p, "pid", s->pid);
    }
    events_emit("service.oom", p);
}

static void ino_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    ssize_t n;

    do
        n = read(ino_fd, buf, sizeof(buf));
    while (n < 0 && errno == EINTR);
    if (n <= 0)
        return;
    for (char *p = buf; p + sizeof(struct inotify_event) <= buf + n;) {
        const struct inotify_event *e = (const struct inotify_event *)p;
        for (size_t i = 0; i < nsvcs; i++) {
            if (svcs[i].oom_wd == e->wd) {
                if (e->mask & IN_IGNORED)
                    svcs[i].oom_wd = -1; /* the leaf went away */
                else
                    oom_check(&svcs[i]);
            }
        }
        p += sizeof(struct inotify_event) + e->len;
    }
}

/* Once per leaf: the baseline count and a watch. Without a memory
 * controller on the leaf there is nothing to watch, and status says so by
 * leaving out oom_kills. */
static void oom_watch(struct service *s)
{
    char path[CGROUP_PATH_MAX + 32];
    if (s->oom_known || !s->cgroup[0] || cgroup_oom_kills(s->cgroup, &s->oom_leaf) < 0)
        return;
    s->oom_known = true;
    if (ino_fd < 0) {
        ino_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (ino_fd < 0) {
            log_warn("unable to watch memory.events: inotify: %s", strerror(errno));
            return;
        }
        ev_io_init(&ino_io, ino_cb, ino_fd, EV_READ);
        ev_io_start(H.loop, &ino_io);
    }
    snprintf(path, sizeof(path), "%s/memory.events", s->cgroup);
    s->oom_wd = inotify_add_watch(ino_fd, path, IN_MODIFY);
    if (s->oom_wd < 0)
        log_warn("service %s: unable to watch %s: %s", s->cfg->name, path, strerror(errno));
}

/* ---- NOTIFY_SOCKET: systemd's readiness protocol ---- */

static bool wants_nsock(const struct service *s)
{
    return s->ready_notify || s->watchdog_ms;
}

static void nsock_cb(struct ev_loop *loop, ev_io *w, int revents);

static int nsock_open(struct service *s, char *err, size_t errlen)
{
    if (s->nsock >= 0)
        return 0;
    s->nsock = notify_open(s->cfg->name, s->nsock_addr, sizeof(s->nsock_addr), err, errlen);
    if (s->nsock < 0)
        return -1;
    ev_io_init(&s->nsock_io, nsock_cb, s->nsock, EV_READ);
    s->nsock_io.data = s;
    ev_io_start(H.loop, &s->nsock_io);
    log_debug("service %s: NOTIFY_SOCKET %s", s->cfg->name, s->nsock_addr);
    return 0;
}

static void nsock_close(struct service *s)
{
    if (s->nsock < 0)
        return;
    ev_io_stop(H.loop, &s->nsock_io);
    close(s->nsock);
    s->nsock = -1;
}

/* NOTIFY_SOCKET and WATCHDOG_USEC for a service that speaks the protocol;
 * for one that does not, whatever hearth itself inherited is removed (a
 * hearth started by systemd must not hand its own socket on), unless the
 * service's env sets it. WATCHDOG_PID is not set: without it sd_notify's
 * sd_watchdog_enabled accepts any process, and the pid is only known
 * after the fork. */
static int notify_env(struct service *s, struct launch_plan *plan)
{
    static const char *const keys[] = {"NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"};
    char err[160];

    s->nstopping = s->nreloading = false;
    s->nstatus[0] = 0;
    s->wd_last_ms = 0;
    s->ready_extended = false;
    if (!wants_nsock(s)) {
        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
            bool own = false;
            for (size_t j = 0; j < s->cfg->n_env && !own; j++)
                own = strcmp(s->cfg->env[j].key, keys[i]) == 0;
            if (!own && launch_env_set(plan, keys[i], NULL) < 0)
                goto nomem;
        }
        return 0;
    }
    if (nsock_open(s, err, sizeof(err)) < 0) {
        snprintf(s->error, sizeof(s->error), "NOTIFY_SOCKET: %s", err);
        return -1;
    }
    /* What the previous run left queued is not this run's news (its
     * senders are gone and would be refused anyway); bounded, so a flood
     * cannot hold the start. */
    for (int i = 0; i < 256; i++) {
        char junk[64];
        struct notify_sender from;
        bool truncated;
        if (notify_recv(s->nsock, junk, sizeof(junk), &from, &truncated) < 0)
            break;
    }
    char usec[32];
    snprintf(usec, sizeof(usec), "%lld", (long long)s->watchdog_ms * 1000);
    if (launch_env_set(plan, "NOTIFY_SOCKET", s->nsock_addr) < 0 ||
        launch_env_set(plan, "WATCHDOG_USEC", s->watchdog_ms ? usec : NULL) < 0 ||
        launch_env_set(plan, "WATCHDOG_PID", NULL) < 0)
        goto nomem;
    return 0;
nomem:
    snprintf(s->error, sizeof(s->error), "environment: %s", strerror(errno));
    return -1;
}

/* Whether a datagram's sender belongs to the service: its main process
 * (hearth's child, so its pid cannot be reused before hearth reaps it),
 * or any process of its cgroup leaf (systemd's NotifyAccess=all, bounded
 * by the cgroup), or without cgroups one of its session. Everything else,
 * a sender without credentials or from outside hearth's pid namespace
 * (pid 0) included, is refused. A helper that sent and exited at once may
 * be refused as gone: the check fails closed. */
static bool nsender_ok(const struct service *s, const struct notify_sender *f, char *why,
                       size_t wlen)
{
    if (!f->creds || f->pid <= 0) {
        snprintf(why, wlen, f->creds ? "sender outside hearth's pid namespace" : "no credentials");
        return false;
    }
    if (s->pid <= 0) {
        snprintf(why, wlen, "pid %d: the service is not running", (int)f->pid);
        return false;
    }
    if (f->pid == s->pid)
        return true;
    if (s->cgroup[0]) {
        int in = cgroup_pid_in_leaf(f->pid, s->cgroup);
        if (in == 1)
            return true;
        snprintf(why, wlen, "pid %d %s", (int)f->pid,
                 in == 0 ? "is not in the service's cgroup" : "cannot be identified (gone?)");
        return false;
    }
    if (notify_pid_session(f->pid) == s->pid)
        return true;
    snprintf(why, wlen, "pid %d is not in the service's session", (int)f->pid);
    return false;
}

static void health_result(struct service *s, bool ok, const char *detail);
static void ready_arm_deadline(struct service *s);

/* EXTEND_TIMEOUT_USEC: the deadline of what the service is doing now is
 * at least that far away. Starting: the readiness deadline (unbounded,
 * like ready.timeout_ms 0: a starting service holds nothing of hearth's).
 * Stopping: the kill, but never later than twice stop.timeout_ms after
 * the stop began, so a service cannot hold a shutdown for ever. */
static void notify_extend(struct service *s, uint64_t usec)
{
    int64_t ms = usec / 1000 > (uint64_t)INT32_MAX ? INT32_MAX : (int64_t)(usec / 1000);
    int64_t now = mono_ms();

    if (s->state == SVC_STARTING && s->ready_timeout_ms) {
        if (now + ms <= s->ready_deadline)
            return;
        s->ready_deadline = now + ms;
        s->ready_extended = true;
        if (s->ready_notify && !suspended)
            ready_arm_deadline(s);
        log_debug("service %s: readiness deadline extended by %lld ms", s->cfg->name,
                  (long long)ms);
    } else if (s->state == SVC_STOPPING && !s->killed && ev_is_active(&s->timer)) {
        int64_t left = (int64_t)(ev_timer_remaining(H.loop, &s->timer) * 1000.0);
        int64_t cap = s->stop_began_ms + 2 * s->cfg->stop_timeout_ms - now;
        int64_t want = ms < cap ? ms : cap;
        if (want > left) {
            timer_start(s, want);
            log_debug("service %s: stop deadline extended to %lld ms from now", s->cfg->name,
                      (long long)want);
        }
    }
}

static void notify_apply(struct service *s, const struct notify_msg *m)
{
    int64_t now = mono_ms();

    if (m->has_status && strcmp(s->nstatus, m->status) != 0) {
        memcpy(s->nstatus, m->status, sizeof(s->nstatus));
        log_debug("service %s: STATUS=%s", s->cfg->name, s->nstatus);
    }
    if (m->stopping && !s->nstopping) {
        s->nstopping = true;
        log_info("service %s: says it is stopping", s->cfg->name);
    }
    if (m->reloading && !s->nreloading) {
        s->nreloading = true;
        log_info("service %s: says it is reloading", s->cfg->name);
    }
    if (m->has_extend)
        notify_extend(s, m->extend_usec);
    if (m->ready) {
        /* READY=1 also ends a reload (systemd's RELOADING=1 ... READY=1). */
        s->nreloading = false;
        if (s->state == SVC_STARTING && s->ready_notify) {
            log_debug("service %s: READY=1", s->cfg->name);
            s->cause = "notify";
            dispatch(s, E_READY);
        }
    }
    if (s->watchdog_ms && (m->watchdog || m->watchdog_trigger)) {
        if (m->watchdog)
            s->wd_last_ms = now;
        /* A trigger counts as a missed ping at once; a ping re-arms the
         * one timer. */
        if (m->watchdog_trigger)
            health_result(s, false, "WATCHDOG=trigger");
        else
            health_result(s, true, NULL);
    }
}

/* Drains the socket, a bounded number of datagrams per wake-up so a
 * flood cannot hold the loop: each is checked for its sender, parsed and
 * applied, or dropped and counted. */
static void nsock_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    struct service *s = w->data;
    char buf[NOTIFY_DATAGRAM_MAX];

    for (int i = 0; i < 64; i++) {
        struct notify_sender from;
        bool truncated;
        ssize_t n = notify_recv(s->nsock, buf, sizeof(buf), &from, &truncated);
        if (n < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                log_warn("service %s: NOTIFY_SOCKET: recvmsg: %s", s->cfg->name, strerror(errno));
            return;
        }
        /* The exec pipe's EOF may be waiting in the same wake-up: a
         * service that says READY=1 has exec'd, and readiness starts from
         * the exec (a_running), so that comes first. */
        if (s->exec_fd >= 0)
            exec_cb(loop, &s->exec_io, 0);
        char why[128];
        if (!nsender_ok(s, &from, why, sizeof(why))) {
            s->n_refused++;
            /* Logged at 1, 2, 4, 8...: a flood does not flood the log. */
            if ((s->n_refused & (s->n_refused - 1)) == 0)
                log_warn("service %s: NOTIFY_SOCKET: refused a message (%lu so far): %s",
                         s->cfg->name, s->n_refused, why);
            continue;
        }
        struct notify_msg m;
        if (truncated || notify_parse(buf, (size_t)n, &m) < 0) {
            s->n_bad++;
            log_debug("service %s: NOTIFY_SOCKET: dropped a %s datagram", s->cfg->name,
                      truncated ? "longer than 4096-byte" : n ? "binary" : "empty");
            continue;
        }
        s->n_msgs++;
        s->n_bad += m.ignored;
        s->n_last_ms = mono_ms();
        notify_apply(s, &m);
    }
}

static cJSON *notify_json(const struct service *s, int64_t now)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddStringToObject(o, "socket", s->nsock_addr);
    cJSON_AddStringToObject(o, "status", s->nstatus);
    cJSON_AddBoolToObject(o, "stopping", s->nstopping);
    cJSON_AddBoolToObject(o, "reloading", s->nreloading);
    cJSON_AddNumberToObject(o, "messages", (double)s->n_msgs);
    cJSON_AddNumberToObject(o, "refused", (double)s->n_refused);
    cJSON_AddNumberToObject(o, "ignored", (double)s->n_bad);
    if (s->n_last_ms)
        cJSON_AddNumberToObject(o, "last_message_ms", (double)(now - s->n_last_ms));
    if (s->watchdog_ms) {
        cJSON_AddNumberToObject(o, "watchdog_ms", (double)s->watchdog_ms);
        if (s->wd_last_ms)
            cJSON_AddNumberToObject(o, "last_watchdog_ms", (double)(now - s->wd_last_ms));
    }
    return o;
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
    oom_watch(s);
    s->oom_this_run = false;
    const char *leaf = leaf_for_spawn(s);
    const struct service_config *sc = s->cfg;
    bool limited = sc->memory_max || sc->memory_high || sc->pids_max;
    if (limited && !s->cgroup[0]) {
        snprintf(s->error, sizeof(s->error), "limits: services have no cgroup here to apply them to");
        return -1;
    }
    if (limited && cgroup_set_limits(s->cgroup, sc->memory_max, sc->memory_high, sc->pids_max,
                                     s->error, sizeof(s->error)) < 0)
        return -1;
    logring_open_file(&s->ring);
    if (pipe2(p, O_CLOEXEC) < 0) {
        snprintf(s->error, sizeof(s->error), "unable to create pipe: %s", strerror(errno));
        return -1;
    }
    if (launch_prepare(s->cfg, &plan, s->error, sizeof(s->error)) < 0) {
        close(p[0]);
        close(p[1]);
        return -1;
    }
    register_file_values(s->cfg, &plan);
    if (notify_env(s, &plan) < 0) {
        close(p[0]);
        close(p[1]);
        launch_free(&plan);
        return -1;
    }
    if (contain_prepare(s->cfg, H.cfg, H.config_path, launch_is_root(&plan), s->cgroup,
                        &plan.contain, s->error, sizeof(s->error)) < 0) {
        close(p[0]);
        close(p[1]);
        launch_free(&plan);
        return -1;
    }
    if (plan.contain.isolate)
        contain_host_setup(H.mode == MODE_SUPERVISOR);
    int po[2] = {-1, -1}, pe[2] = {-1, -1}, pn[2] = {-1, -1};
    for (int i = 0; i < 2; i++)
        outpipe_close(&s->out[i]);
    notify_close(s);
    if (s->notify_fd && pipe2(pn, O_CLOEXEC) < 0) {
        snprintf(s->error, sizeof(s->error), "unable to create the notify_fd pipe: %s",
                 strerror(errno));
        close(p[0]);
        close(p[1]);
        launch_free(&plan);
        return -1;
    }
    if (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0) {
        /* Still runnable: output then goes to hearth's own stdout. */
        log_warn("service %s: unable to create output pipes: %s", s->cfg->name, strerror(errno));
        for (int i = 0; i < 2; i++) {
            if (po[i] >= 0) close(po[i]);
            if (pe[i] >= 0) close(pe[i]);
            po[i] = pe[i] = -1;
        }
    }
    bool placed;
    pid = cgroup_fork_into(leaf, &placed);
    if (pid < 0) {
        snprintf(s->error, sizeof(s->error), "unable to fork: %s", strerror(errno));
        close(p[0]);
        close(p[1]);
        for (int i = 0; i < 2; i++) {
            if (po[i] >= 0) close(po[i]);
            if (pe[i] >= 0) close(pe[i]);
            if (pn[i] >= 0) close(pn[i]);
        }
        launch_free(&plan);
        return -1;
    }
    if (pid == 0) {
        close(p[0]);
        child_exec(s, p[1], &plan, po[1], pe[1], pn[1], placed);
    }
    close(p[1]);
    if (pn[0] >= 0) {
        close(pn[1]);
        s->notify_rd = pn[0];
        fcntl(pn[0], F_SETFL, O_NONBLOCK);
        ev_io_init(&s->notify_io, notify_cb, pn[0], EV_READ);
        s->notify_io.data = s;
        ev_io_start(H.loop, &s->notify_io);
    }
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
    log_debug("service %s: spawned pid %d%s", s->cfg->name, (int)pid,
              placed ? " into its cgroup (clone3)" : "");
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
        leaf_kill(s);
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

static void ready_give_up(struct service *s, const char *detail)
{
    if (s->ready_extended)
        snprintf(s->error, sizeof(s->error),
                 "not ready after %lld ms (deadline extended by EXTEND_TIMEOUT_USEC): %s",
                 (long long)(mono_ms() - s->since_ms), detail);
    else
        snprintf(s->error, sizeof(s->error), "not ready after %lld ms: %s",
                 (long long)s->ready_timeout_ms, detail);
    log_warn("service %s: %s; killing it", s->cfg->name, s->error);
    signal_group(s, SIGKILL);
    if (s->cgroup[0])
        leaf_kill(s);
    /* the exit goes on through the reaper into backoff */
}

static void notify_close(struct service *s)
{
    if (s->notify_rd >= 0) {
        ev_io_stop(H.loop, &s->notify_io);
        close(s->notify_rd);
        s->notify_rd = -1;
    }
}

/* ready.notify_fd: any newline the service writes (sd_notify's "READY=1\n"
 * or a bare "\n") makes it ready. The pipe stays open and drained for the
 * service's life, so a later write neither blocks it nor kills it with
 * SIGPIPE; what it says is not kept. */
static void notify_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    struct service *s = w->data;
    char buf[4096];
    ssize_t n;

    do
        n = read(s->notify_rd, buf, sizeof(buf));
    while (n < 0 && errno == EINTR);
    if (n < 0 && errno == EAGAIN)
        return;
    if (n <= 0) {
        if (s->state == SVC_STARTING)
            log_warn("service %s: closed notify_fd %d without writing a line", s->cfg->name,
                     s->notify_fd);
        notify_close(s);
        return;
    }
    if (s->state == SVC_STARTING && memchr(buf, '\n', (size_t)n)) {
        log_debug("service %s: ready line on fd %d", s->cfg->name, s->notify_fd);
        dispatch(s, E_READY);
    }
}

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
        ready_give_up(s, detail);
        return;
    }
    snprintf(s->ready_why, sizeof(s->ready_why), "%s", detail);
    /* Poll again shortly: readiness usually comes within seconds. */
    ev_timer_set(&s->ready_timer, 0.2, 0.);
    ev_timer_start(H.loop, &s->ready_timer);
}

static void ready_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct service *s = w->data;
    if (suspended)
        return; /* held until the thaw */
    if (s->notify_fd) {
        char why[64];
        snprintf(why, sizeof(why), "no line on notify_fd %d", s->notify_fd);
        ready_give_up(s, why);
        return;
    }
    if (s->ready_notify) {
        char why[sizeof(s->nstatus) + 64];
        snprintf(why, sizeof(why), "no READY=1 on NOTIFY_SOCKET%s%s%s",
                 s->nstatus[0] ? " (last STATUS=" : "", s->nstatus, s->nstatus[0] ? ")" : "");
        ready_give_up(s, why);
        return;
    }
    ready_attempt(s);
}

/* notify_fd, notify: no probing, only the overall deadline (if any). */
static void ready_arm_deadline(struct service *s)
{
    int64_t left = s->ready_deadline - mono_ms();
    ev_timer_stop(H.loop, &s->ready_timer);
    if (!s->ready_timeout_ms)
        return;
    ev_timer_set(&s->ready_timer, (double)(left > 0 ? left : 0) / 1000.0, 0.);
    ev_timer_start(H.loop, &s->ready_timer);
}

static void ready_attempt(struct service *s)
{
    char err[160];
    if (s->notify_fd || s->ready_notify) {
        ready_arm_deadline(s);
        return;
    }
    struct check_spec spec = s->ready;
    spec.argv = spec.argv ? s->ready.argv_store : NULL;
    /* One attempt never outlasts the overall deadline (or 1 s; an HTTP
     * answer is the application's work, so it gets the probe default). */
    int64_t cap = spec.kind == CHECK_HTTP ? CHECK_DEFAULT_TIMEOUT_MS : 1000;
    int64_t left = s->ready_timeout_ms ? s->ready_deadline - mono_ms() : cap;
    /* An attempt the deadline would cut to a few milliseconds says only
     * that time ran out: the last whole attempt's answer is the reason. */
    if (s->ready_timeout_ms && left < 50 && s->ready_why[0]) {
        ready_give_up(s, s->ready_why);
        return;
    }
    spec.timeout_ms = left < 1 ? 1 : left > cap ? cap : left;
    s->probe = check_start(H.loop, &spec, ready_done, s, err, sizeof(err));
    if (!s->probe) {
        snprintf(s->error, sizeof(s->error), "readiness check: %s", err);
        log_warn("service %s: %s", s->cfg->name, s->error);
        ev_timer_set(&s->ready_timer, 1.0, 0.);
        ev_timer_start(H.loop, &s->ready_timer);
    }
}

/* ---- health: periodic probes while running ---- */

/* "starting" until the first probe ends, then "healthy" or "failing"
 * (some consecutive failures, fewer than the threshold) and "unhealthy"
 * once it is being restarted for it. */
static const char *health_status(const struct service *s)
{
    if (s->unhealthy_stop)
        return "unhealthy";
    if (s->state != SVC_RUNNING)
        return "off";
    if (suspended)
        return "suspended";
    if (!s->health_last_ms)
        return "starting";
    return s->health_fails ? "failing" : "healthy";
}

static void health_event(struct service *s, const char *action)
{
    cJSON *p = cJSON_CreateObject();
    if (p) {
        cJSON_AddStringToObject(p, "service", s->cfg->name);
        cJSON_AddStringToObject(p, "status", health_status(s));
        cJSON_AddNumberToObject(p, "failures", s->health_fails);
        cJSON_AddNumberToObject(p, "threshold", s->health_threshold);
        if (s->health_fails && s->health_detail[0])
            cJSON_AddStringToObject(p, "detail", s->health_detail);
        if (s->watchdog_ms)
            cJSON_AddStringToObject(p, "cause", "watchdog");
        if (action)
            cJSON_AddStringToObject(p, "action", action);
    }
    events_emit("service.health", p);
}

static void health_stop(struct service *s)
{
    check_cancel(s->hprobe);
    s->hprobe = NULL;
    ev_timer_stop(H.loop, &s->health_timer);
}

/* The next probe in ms; nothing while suspended (the resume re-arms it).
 * With health.watchdog_ms the same timer is the ping deadline instead:
 * exactly watchdog_ms from now (not on the grid), whatever ms says. */
static void health_arm(struct service *s, int64_t ms)
{
    ev_timer_stop(H.loop, &s->health_timer);
    if (!s->has_health || s->state != SVC_RUNNING || suspended || s->hprobe)
        return;
    ev_timer_set(&s->health_timer,
                 s->watchdog_ms ? (double)s->watchdog_ms / 1000.0 : hearth_grid_delay(ms), 0.);
    ev_timer_start(H.loop, &s->health_timer);
}

static void health_done(void *ctx, bool ok, const char *detail)
{
    struct service *s = ctx;
    s->hprobe = NULL;
    health_result(s, ok, detail);
}

/* One check's outcome, from a probe or from the watchdog (a ping passes,
 * a missed deadline or WATCHDOG=trigger fails): counted, reported, and
 * the next check armed; the threshold stops the service. */
static void health_result(struct service *s, bool ok, const char *detail)
{
    if (s->state != SVC_RUNNING || suspended || !s->has_health)
        return;
    s->health_checks++;
    s->health_last_ms = mono_ms();
    if (ok) {
        bool was = s->health_fails > 0 || s->health_checks == 1;
        s->health_fails = 0;
        if (was) {
            log_info("service %s: healthy", s->cfg->name);
            health_event(s, NULL);
        }
    } else {
        s->health_fails++;
        snprintf(s->health_detail, sizeof(s->health_detail), "%s", detail ? detail : "failed");
        log_warn("service %s: health check failed (%u of %u): %s", s->cfg->name, s->health_fails,
                 s->health_threshold, s->health_detail);
        if (s->health_fails >= s->health_threshold) {
            if (s->watchdog_ms)
                s->cause = "watchdog";
            dispatch(s, E_UNHEALTHY);
            return;
        }
        health_event(s, NULL);
    }
    health_arm(s, s->health_interval_ms);
}

static void health_attempt(struct service *s)
{
    char err[160];
    struct check_spec spec = s->health;
    spec.argv = spec.argv ? s->health.argv_store : NULL;
    s->hprobe = check_start(H.loop, &spec, health_done, s, err, sizeof(err));
    if (!s->hprobe) {
        /* hearth could not even run the probe (no fd, no fork): that says
         * nothing about the service, so it does not count as a failure. */
        log_warn("service %s: health check not started: %s", s->cfg->name, err);
        health_arm(s, s->health_interval_ms);
    }
}

static void health_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct service *s = w->data;
    if (s->watchdog_ms) {
        char why[96];
        snprintf(why, sizeof(why), "no WATCHDOG=1 within %lld ms", (long long)s->watchdog_ms);
        health_result(s, false, why);
        return;
    }
    if (s->state == SVC_RUNNING && !suspended && !s->hprobe)
        health_attempt(s);
}

/* Probing runs exactly while the service is running: the first probe one
 * interval after it became running (ready), none in any other state. */
static void health_on_state(struct service *s, enum svc_state from, enum svc_state to)
{
    if (!s->has_health)
        return;
    if (from == SVC_RUNNING)
        health_stop(s);
    if (to == SVC_RUNNING) {
        s->health_fails = 0;
        s->health_checks = 0;
        s->health_last_ms = 0;
        s->health_detail[0] = 0;
        health_arm(s, s->health_interval_ms);
    }
}

static enum svc_state a_unhealthy(struct service *s)
{
    snprintf(s->error, sizeof(s->error), "unhealthy: %u health checks failed in a row: %s",
             s->health_fails, s->health_detail);
    log_warn("service %s: %s; stopping it", s->cfg->name, s->error);
    s->unhealthy_stop = true;
    health_event(s, s->cfg->restart == RESTART_NEVER ? "stop" : "restart");
    ev_timer_stop(H.loop, &s->timer);
    s->stop_began_ms = mono_ms();
    signal_group(s, s->cfg->stop_signal);
    timer_start(s, s->cfg->stop_timeout_ms);
    return SVC_STOPPING;
}

static enum svc_state a_running(struct service *s)
{
    if (s->has_ready) {
        /* exec worked; "running" waits for the readiness check (after the
         * resume, when suspended). */
        s->ready_deadline = mono_ms() + s->ready_timeout_ms;
        s->ready_extended = false;
        s->ready_why[0] = 0;
        if (!suspended)
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
    /* A graceful restart asks with its own signal (Hermes: SIGUSR1, drain,
     * exit 75); the timeout and the kill after it are the stop's. */
    int sig = s->restart_signal ? s->restart_signal : s->cfg->stop_signal;
    s->restart_signal = 0;
    ready_cancel(s);
    ev_timer_stop(H.loop, &s->timer);
    s->stop_began_ms = mono_ms();
    signal_group(s, sig);
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
    log_warn("service %s: no exit %lld ms after it was asked to stop, killing", s->cfg->name,
             (long long)s->cfg->stop_timeout_ms);
    s->killed = true;
    signal_group(s, SIGKILL);
    if (s->cgroup[0])
        leaf_kill(s);
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

/* What follows the end of the main process: ok forced false when it was
 * stopped for failing its health check, whatever it exited with. code is
 * the exit code of an exit the service chose (-1 otherwise): only those
 * are judged by restart_force_exit_codes and restart_prevent_exit_codes. */
static enum svc_state exit_policy(struct service *s, bool ok, int code)
{
    ready_cancel(s);
    notify_close(s);
    /* The exit may be seen before the inotify news of why. */
    oom_check(s);
    sweep(s);
    if (s->error[0] == 0 && !ok) {
        if (WIFEXITED(s->wstatus))
            snprintf(s->error, sizeof(s->error), "exited with code %d", WEXITSTATUS(s->wstatus));
        else if (WIFSIGNALED(s->wstatus))
            snprintf(s->error, sizeof(s->error), "killed by %s%s",
                     config_signal_name(WTERMSIG(s->wstatus)) ?: "signal",
                     WTERMSIG(s->wstatus) == SIGKILL && s->oom_this_run ? " (out of memory)" : "");
    }
    if (s->restart_pending) {
        s->restart_pending = false;
        return a_spawn(s);
    }
    if (config_code_in(s->cfg->prevent_exit, code)) {
        /* systemd's RestartPreventExitStatus: the service said a restart
         * cannot help (Hermes: 78, a configuration error). */
        snprintf(s->error, sizeof(s->error),
                 "exited with code %d, listed in restart_prevent_exit_codes: not restarted", code);
        return SVC_FAILED;
    }
    if (config_code_in(s->cfg->force_exit, code)) {
        /* systemd's RestartForceExitStatus: the service asked to be
         * restarted (Hermes: 75). Whatever restart says, after the first
         * delay, and the backoff does not grow: this is no crash. */
        snprintf(s->error, sizeof(s->error),
                 "exited with code %d, listed in restart_force_exit_codes: restarting", code);
        s->restarts++;
        if (suspended)
            s->suspend_left_ms = s->cfg->backoff_initial_ms;
        else
            timer_start(s, s->cfg->backoff_initial_ms);
        return SVC_BACKOFF;
    }
    if (s->cfg->restart == RESTART_ALWAYS || (s->cfg->restart == RESTART_ON_FAILURE && !ok)) {
        s->restarts++;
        int64_t d = backoff_delay(s);
        if (suspended)
            s->suspend_left_ms = d; /* the resume starts the timer */
        else
            timer_start(s, d);
        return SVC_BACKOFF;
    }
    return ok ? SVC_EXITED : SVC_FAILED;
}

static enum svc_state a_exited(struct service *s)
{
    return exit_policy(s, exit_is_success(s), WIFEXITED(s->wstatus) ? WEXITSTATUS(s->wstatus) : -1);
}

static enum svc_state a_stopped(struct service *s)
{
    ev_timer_stop(H.loop, &s->timer);
    if (s->unhealthy_stop) {
        /* Stopped for its health: restart (or not) as its policy says. */
        s->unhealthy_stop = false;
        return exit_policy(s, false, -1);
    }
    notify_close(s);
    sweep(s);
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

static void dispatch(struct service *s, enum svc_event ev)
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

/* A gate reached may release services waiting for it (not while every
 * service is being stopped). */
static void gate_changed(const char *name, bool reached)
{
    if (reached && stop_all_next < 0)
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

int services_init(const struct config *cfg)
{
    srandom((unsigned)(mono_ms() ^ (getpid() << 16)));
    gates_on_change(gate_changed);
    nsvcs = cfg->n_services;
    main_index = nsvcs ? 0 : -1;
    for (size_t i = 0; i < nsvcs; i++) {
        struct service *s = &svcs[i];
        memset(s, 0, sizeof(*s));
        s->cfg = &cfg->services[i];
        s->state = SVC_STOPPED;
        s->exec_fd = -1;
        s->notify_rd = -1;
        s->nsock = -1;
        s->oom_wd = -1;
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
            uid_t lo_uid;
            gid_t lo_gid;
            service_owner(s->cfg, &lo_uid, &lo_gid);
            logring_init(&s->ring, cJSON_IsNumber(rl) ? (size_t)rl->valuedouble : LOGRING_DEFAULT_LINES,
                         cJSON_IsString(fl) ? fl->valuestring : NULL,
                         cJSON_IsNumber(mb) ? (int64_t)mb->valuedouble : 10 * 1024 * 1024,
                         cJSON_IsNumber(kp) ? kp->valueint : 3, lo_uid, lo_gid);
        }
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
                s->has_ready = true;
                s->notify_fd = s->ready.notify_fd;
                s->ready_notify = s->ready.notify;
                s->ready_timeout_ms = s->ready.timeout_ms;
            } else {
                log_warn("service %s: ready: %s", s->cfg->name, err);
            }
        }
        ev_timer_init(&s->health_timer, health_timer_cb, 0., 0.);
        s->health_timer.data = s;
        const cJSON *hj = cJSON_GetObjectItemCaseSensitive(s->cfg->json, "health");
        if (hj) {
            char err[160];
            int rc = check_spec_from_json(hj, &s->health, err, sizeof(err));
            if (rc == 0 || (rc == 1 && s->health.watchdog_ms > 0)) {
                s->has_health = true;
                s->watchdog_ms = s->health.watchdog_ms;
                s->health_interval_ms = s->health.interval_ms ? s->health.interval_ms : 10000;
                s->health_threshold = s->health.failures ? (unsigned)s->health.failures : 3;
            } else {
                log_warn("service %s: health: %s", s->cfg->name, err);
            }
        }
        if (s->cfg->main)
            main_index = (int)i;
        /* Bound now, before any service runs (see notify.c); a failure is
         * tried again, and reported, at each start. */
        if (wants_nsock(s)) {
            char err[160];
            if (nsock_open(s, err, sizeof(err)) < 0)
                log_warn("service %s: NOTIFY_SOCKET: %s", s->cfg->name, err);
        }
    }
    compute_order();
    return 0;
}

void services_free(void)
{
    for (size_t i = 0; i < nsvcs; i++) {
        struct service *s = &svcs[i];
        health_stop(s);
        ready_cancel(s);
        ev_timer_stop(H.loop, &s->timer);
        close_exec_pipe(s);
        notify_close(s);
        nsock_close(s);
        for (int k = 0; k < 2; k++)
            outpipe_close(&s->out[k]);
        logring_free(&s->ring);
    }
    nsvcs = 0;
    if (ino_fd >= 0) {
        ev_io_stop(H.loop, &ino_io);
        close(ino_fd);
        ino_fd = -1;
    }
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
    for (size_t i = 0; i < nsvcs; i++) {
        svcs[i].unhealthy_stop = false;
        svcs[i].restart_pending = false;
        svcs[i].restart_signal = 0;
        if (svcs[i].state == SVC_BACKOFF || svcs[i].state == SVC_WAITING)
            dispatch(&svcs[i], E_STOP);
    }
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
        cJSON_AddNumberToObject(o, "since_ms", (double)(now - s->since_ms));
        cJSON_AddItemToObject(o, "last_exit", exit_json(s));
        if (s->error[0])
            cJSON_AddStringToObject(o, "error", s->error);
        if (s->state == SVC_WAITING && unmet_dep(s))
            cJSON_AddStringToObject(o, "waiting_for", unmet_dep(s));
        if (s->state == SVC_BACKOFF) {
            double left = suspended ? (double)s->suspend_left_ms / 1000.0
                                    : ev_timer_remaining(H.loop, (ev_timer *)&s->timer);
            cJSON_AddNumberToObject(o, "next_start_ms", (double)(int64_t)(left * 1000.0));
        }
        if (s->cgroup[0])
            cJSON_AddStringToObject(o, "cgroup", s->cgroup);
        if (s->has_health) {
            cJSON *hc = cJSON_AddObjectToObject(o, "health");
            if (hc) {
                cJSON_AddStringToObject(hc, "status", health_status(s));
                cJSON_AddNumberToObject(hc, "failures", s->health_fails);
                cJSON_AddNumberToObject(hc, "threshold", s->health_threshold);
                cJSON_AddNumberToObject(hc, "checks", (double)s->health_checks);
                if (s->health_last_ms)
                    cJSON_AddNumberToObject(hc, "last_check_ms", (double)(now - s->health_last_ms));
                if (s->health_detail[0])
                    cJSON_AddStringToObject(hc, "last_failure", s->health_detail);
            }
        }
        if (wants_nsock(s))
            cJSON_AddItemToObject(o, "notify", notify_json(s, now));
        if (s->oom_known)
            cJSON_AddNumberToObject(o, "oom_kills", (double)s->oom_kills);
        /* Activity, for a host deciding whether the sandbox is idle. */
        if (s->state == SVC_RUNNING && s->started_ms)
            cJSON_AddNumberToObject(o, "uptime_ms", (double)(now - s->started_ms));
        uint64_t cpu;
        if (s->cgroup[0] && cgroup_cpu_usec(s->cgroup, &cpu) == 0)
            cJSON_AddNumberToObject(o, "cpu_ms", (double)((s->cpu_usec_before + cpu) / 1000));
        uint64_t mem;
        if (s->cgroup[0] && cgroup_memory_bytes(s->cgroup, &mem) == 0)
            cJSON_AddNumberToObject(o, "memory_bytes", (double)mem);
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
    *cpu_usec_before = svcs[idx].cpu_usec_before;
    return svcs[idx].cgroup;
}

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
    /* Already stopping for its health: stay down once it is. */
    s->unhealthy_stop = false;
    dispatch(s, E_STOP);
    return 0;
}

int service_restart(int idx, char *err, size_t errlen)
{
    return service_restart_signal(idx, 0, err, errlen);
}

int service_restart_signal(int idx, int sig, char *err, size_t errlen)
{
    struct service *s = &svcs[idx];
    if (s->state == SVC_RUNNING || s->state == SVC_STARTING) {
        s->restart_pending = true;
        s->restart_signal = sig;
        if (sig)
            log_info("service %s: graceful restart: %s, then start again", s->cfg->name,
                     config_signal_name(sig) ?: "signal");
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


/* Suspending stops every clock that judges a service: health probes (one
 * in flight is cancelled and not counted), readiness attempts and their
 * deadline, backoff delays. Resuming re-arms them: the readiness deadline
 * moves by the frozen time, a backoff gets what it had left, and health is
 * probed at once. */
void services_suspend(bool on)
{
    if (suspended == on)
        return;
    suspended = on;
    int64_t now = mono_ms();
    if (on)
        suspended_at = now;
    for (size_t i = 0; i < nsvcs; i++) {
        struct service *s = &svcs[i];
        if (on) {
            health_stop(s);
            if (s->state == SVC_STARTING && s->has_ready)
                ready_cancel(s);
            if (s->state == SVC_BACKOFF && ev_is_active(&s->timer)) {
                s->suspend_left_ms = (int64_t)(ev_timer_remaining(H.loop, &s->timer) * 1000.0);
                ev_timer_stop(H.loop, &s->timer);
            }
            continue;
        }
        if (s->state == SVC_RUNNING)
            health_arm(s, 0);
        else if (s->state == SVC_STARTING && s->has_ready && s->exec_fd < 0) {
            /* exec confirmed: readiness was being probed */
            s->ready_deadline += now - suspended_at;
            ready_attempt(s);
        } else if (s->state == SVC_BACKOFF) {
            timer_start(s, s->suspend_left_ms > 0 ? s->suspend_left_ms : 0);
        }
    }
    log_debug("services %s", on ? "suspended" : "no longer suspended");
}

bool services_suspended(void) { return suspended; }

int services_health_now(void)
{
    int n = 0;
    for (size_t i = 0; i < nsvcs; i++) {
        struct service *s = &svcs[i];
        if (!s->has_health || s->state != SVC_RUNNING)
            continue;
        /* A probe already in flight is as good as a new one. */
        if (!s->hprobe)
            health_arm(s, 0);
        n++;
    }
    return n;
}

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
        if (strcmp(how, "restart") == 0 || strncmp(how, "restart:", 8) == 0) {
            /* config.c accepted "restart:NAME" with a known signal. */
            int sig = how[7] == ':' ? config_signal_number(how + 8) : 0;
            char err[128];
            if (sig < 0 || service_restart_signal((int)(s - svcs), sig, err, sizeof(err)) < 0) {
                log_warn("service %s: restart on resume: %s", s->cfg->name,
                         sig < 0 ? "unknown signal" : err);
                continue;
            }
            did = how;
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
