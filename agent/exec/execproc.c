#include "execproc.h"
#include "err.h"
#include "execproc_priv.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cJSON.h>
#include <ev.h>

#include "base64.h"
#include "cgroup.h"
#include "activity.h"
#include "config.h"
#include "contain.h"
#include "control.h"
#include "hearth.h"
#include "jsonout.h"
#include "launch.h"
#include "log.h"
#include "pidreaper.h"
#include "reaper.h"
#include "sandbox.h"
#include "seccomp.h"
#include "shutdown.h"

/* Room for running processes plus as many exited ones kept for a late
 * exec.wait or attach (the config's maximum is 64). */
#define TABLE_MAX 128
#define READ_CHUNK (48 * 1024)
/* After the main process is gone its leaf is killed; a pipe or pty that
 * something outside the leaf still holds (no cgroups) is closed after
 * this. */
#define EXIT_GRACE_MS 2000

static struct proc *table[TABLE_MAX];
static uint64_t next_id = 1;
static bool hooks_set;
static uint8_t read_buf[READ_CHUNK];

static void pump(struct proc *p);
static void finish_check(struct proc *p);
static size_t running_count(void);

/* An open exec session keeps the sandbox busy for an auto-pauser. */
static void sessions_changed(void) { activity_exec_count((unsigned)running_count()); }

void exec_limits(size_t *max_processes, size_t *buffer_bytes)
{
    *max_processes = H.cfg ? H.cfg->exec.max_processes : CONFIG_EXEC_MAX_PROCESSES;
    *buffer_bytes = H.cfg ? H.cfg->exec.buffer_bytes : CONFIG_EXEC_BUFFER_BYTES;
}

struct proc *execproc_find(uint64_t id, struct rpc_error *err)
{
    for (size_t i = 0; i < TABLE_MAX; i++)
        if (table[i] && table[i]->id == id)
            return table[i];
    rpc_error_set(err, RPC_ERR_NOT_FOUND, "id: no process %llu", (unsigned long long)id);
    return NULL;
}

static const char *stream_name(int s) { return s == EXEC_STDOUT ? "stdout" : "stderr"; }

static uint64_t ring_start(const struct stream *s) { return s->end > s->cap ? s->end - s->cap : 0; }

static void ring_append(struct stream *s, const uint8_t *d, size_t n)
{
    uint64_t old_start = ring_start(s);
    while (n) {
        size_t at = (size_t)(s->end % s->cap);
        size_t k = s->cap - at < n ? s->cap - at : n;
        memcpy(s->ring + at, d, k);
        s->end += k;
        d += k;
        n -= k;
    }
    /* What fell out of the ring unsent to anyone is lost. */
    uint64_t new_start = ring_start(s);
    uint64_t from = old_start > s->hw ? old_start : s->hw;
    if (new_start > from)
        s->dropped += new_start - from;
}

static void set_reading(struct proc *p, int i, bool on)
{
    struct stream *s = &p->out[i];
    if (!s->open || !p->started)
        on = false;
    if (on == s->reading)
        return;
    s->reading = on;
    if (on)
        ev_io_start(H.loop, &s->io);
    else
        ev_io_stop(H.loop, &s->io);
}

static void stream_close(struct proc *p, int i)
{
    struct stream *s = &p->out[i];
    set_reading(p, i, false);
    if (s->open && s->fd >= 0)
        close(s->fd);
    s->open = false;
    s->fd = -1;
    /* p->master only names the pty's stdout stream (stdin has a dup). */
    if (p->tty && i == EXEC_STDOUT)
        p->master = -1;
}

static void detach(struct proc *p)
{
    if (!p->client)
        return;
    p->client = NULL;
    if (p->kill_on_disconnect && !p->reaped && p->pid > 0) {
        log_info("exec %llu: client gone, killing it (kill_on_disconnect)",
                 (unsigned long long)p->id);
        p->killed = true;
        if (p->leaf[0])
            cgroup_kill(p->leaf);
        kill(-p->pid, SIGKILL);
        kill(p->pid, SIGKILL);
    }
    pump(p);
}

/* One exec.output line. The data is base64 of at most READ_CHUNK bytes. */
static int send_output(struct proc *p, int i, uint64_t off, const uint8_t *d, size_t n)
{
    static char line[BASE64_ENCODED_SIZE(READ_CHUNK) + 200];
    int h = snprintf(line, sizeof(line),
                     "{\"jsonrpc\":\"2.0\",\"method\":\"exec.output\",\"params\":{\"id\":%llu,"
                     "\"stream\":\"%s\",\"offset\":%llu,\"data\":\"",
                     (unsigned long long)p->id, stream_name(i), (unsigned long long)off);
    base64_encode(d, n, line + h);
    size_t len = (size_t)h + strlen(line + h);
    memcpy(line + len, "\"}}\n", 4);
    len += 4;
    return control_send(p->client, line, len);
}

static cJSON *status_json(const struct proc *p, cJSON *o)
{
    cJSON_AddNumberToObject(o, "id", (double)p->id);
    if (!p->reaped) {
        cJSON_AddBoolToObject(o, "exited", false);
        return o;
    }
    cJSON_AddBoolToObject(o, "exited", true);
    if (WIFEXITED(p->wstatus)) {
        cJSON_AddNumberToObject(o, "exit_code", WEXITSTATUS(p->wstatus));
    } else if (WIFSIGNALED(p->wstatus)) {
        const char *n = names_signal_name(WTERMSIG(p->wstatus));
        cJSON_AddNumberToObject(o, "signal", WTERMSIG(p->wstatus));
        if (n)
            cJSON_AddStringToObject(o, "signal_name", n);
    }
    if (p->timed_out)
        cJSON_AddBoolToObject(o, "timed_out", true);
    if (p->killed)
        cJSON_AddBoolToObject(o, "killed", true);
    return o;
}

/* How it is contained, as a service's status says it: isolation, and
 * privileged with its reasons (contain_privileged). */
static void containment_json(const struct proc *p, cJSON *o)
{
    cJSON_AddBoolToObject(o, "isolation", !p->uncontained);
    cJSON_AddBoolToObject(o, "privileged", p->privileged[0] != 0);
    if (!p->privileged[0])
        return;
    cJSON *why = cJSON_AddArrayToObject(o, "privileged_reasons");
    char copy[sizeof(p->privileged)];
    snprintf(copy, sizeof(copy), "%s", p->privileged);
    for (char *save = NULL, *t = strtok_r(copy, ",", &save); why && t;
         t = strtok_r(NULL, ",", &save))
        cJSON_AddItemToArray(why, cJSON_CreateString(t[0] == ' ' ? t + 1 : t));
}

static void send_exit(struct proc *p)
{
    if (!p->client)
        return;
    cJSON *msg = cJSON_CreateObject(), *params = cJSON_CreateObject();
    if (!msg || !params) {
        cJSON_Delete(msg);
        cJSON_Delete(params);
        return;
    }
    cJSON_AddStringToObject(msg, "jsonrpc", "2.0");
    cJSON_AddStringToObject(msg, "method", "exec.exit");
    status_json(p, params);
    cJSON_AddNumberToObject(params, "dropped",
                            (double)(p->out[0].dropped + p->out[1].dropped));
    cJSON_AddItemToObject(msg, "params", params);
    char *t = jsonout_print(msg);
    cJSON_Delete(msg);
    if (!t)
        return;
    size_t len = strlen(t);
    char *line = malloc(len + 1);
    if (line) {
        memcpy(line, t, len);
        line[len] = '\n';
        if (control_send(p->client, line, len + 1) < 0)
            p->client = NULL;
        free(line);
    }
    cJSON_free(t);
}

/* Sends what the attached client has not had yet, as far as its queue
 * allows, and reads from the process only while there is room: the
 * client's pace is the process's pace. Without a client, reading goes on
 * and the ring keeps the newest output. */
static void pump_once(struct proc *p);

static void pump(struct proc *p)
{
    /* A send can flush the client, whose room hook pumps again: the
     * outer call goes round once more instead. */
    if (p->pumping) {
        p->repump = true;
        return;
    }
    p->pumping = true;
    do {
        p->repump = false;
        pump_once(p);
    } while (p->repump);
    p->pumping = false;
}

static void pump_once(struct proc *p)
{
    if (p->client) {
        for (int i = 0; i < 2; i++) {
            struct stream *s = &p->out[i];
            if (!s->cap)
                continue;
            if (s->sent < ring_start(s))
                s->sent = ring_start(s);
            while (s->sent < s->end) {
                int room = control_room(p->client);
                if (room <= 0) {
                    if (room < 0) {
                        detach(p);
                        return;
                    }
                    set_reading(p, 0, false);
                    set_reading(p, 1, false);
                    return;
                }
                size_t at = (size_t)(s->sent % s->cap);
                uint64_t left = s->end - s->sent;
                size_t n = s->cap - at;
                if (n > left)
                    n = (size_t)left;
                if (n > READ_CHUNK)
                    n = READ_CHUNK;
                if (send_output(p, i, s->sent, s->ring + at, n) < 0) {
                    detach(p);
                    return;
                }
                s->sent += n;
                if (s->sent > s->hw)
                    s->hw = s->sent;
            }
        }
        int room = control_room(p->client);
        if (room < 0) {
            detach(p);
            return;
        }
        set_reading(p, 0, room > 0);
        set_reading(p, 1, room > 0);
        if (p->exit_pending) {
            p->exit_pending = false;
            send_exit(p);
        }
    } else {
        set_reading(p, 0, true);
        set_reading(p, 1, true);
    }
    finish_check(p);
}

static void read_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    struct proc *p = w->data;
    int i = w == &p->out[0].io ? 0 : 1;
    struct stream *s = &p->out[i];
    ssize_t n;

    do
        n = read(s->fd, read_buf, sizeof(read_buf));
    while (n < 0 && errno == EINTR);
    if (n < 0 && errno == EAGAIN)
        return;
    if (n <= 0) {
        /* EIO: a pty whose other side every process has closed. */
        if (n < 0 && errno != EIO)
            log_warn("exec %llu: unable to read its %s: %s", (unsigned long long)p->id,
                     stream_name(i), strerror(errno));
        stream_close(p, i);
        finish_check(p);
        return;
    }
    ring_append(s, read_buf, (size_t)n);
    pump(p);
}

/* A deferred reply must always come: one still waiting when its process
 * goes (a wait for an id whose start failed) is answered with an error. */
static void fail_pending(struct proc *p)
{
    struct rpc_error e = {0};
    uint64_t t[EXEC_MAX_WAITERS + 2] = {p->start_ticket, p->in_ticket};
    size_t n = 2;
    for (int i = 0; i < EXEC_MAX_WAITERS; i++)
        t[n++] = p->waiters[i].ticket;
    p->start_ticket = p->in_ticket = 0;
    for (int i = 0; i < EXEC_MAX_WAITERS; i++)
        p->waiters[i].ticket = 0;
    for (size_t i = 0; i < n; i++) {
        if (!t[i])
            continue;
        rpc_error_set(&e, RPC_ERR_NOT_FOUND, "id: process %llu is gone", (unsigned long long)p->id);
        control_complete(t[i], NULL, &e);
    }
}

static void proc_free(struct proc *p)
{
    fail_pending(p);
    for (size_t i = 0; i < TABLE_MAX; i++)
        if (table[i] == p)
            table[i] = NULL;
    sessions_changed();
    for (int i = 0; i < 2; i++) {
        stream_close(p, i);
        free(p->out[i].ring);
    }
    if (p->in_fd >= 0) {
        ev_io_stop(H.loop, &p->in_io);
        close(p->in_fd);
    }
    if (p->report_fd >= 0) {
        ev_io_stop(H.loop, &p->report_io);
        close(p->report_fd);
    }
    if (p->reaper_fd >= 0)
        close(p->reaper_fd);
    if (p->ns_offer)
        contain_snapshot_take();
    ev_timer_stop(H.loop, &p->timeout);
    ev_timer_stop(H.loop, &p->grace);
    ev_timer_stop(H.loop, &p->expire);
    ev_timer_stop(H.loop, &p->kick);
    for (int i = 0; i < EXEC_MAX_WAITERS; i++)
        ev_timer_stop(H.loop, &p->waiters[i].timer);
    if (p->leaf[0])
        cgroup_service_remove(p->leaf);
    for (size_t i = 0; i < p->argc; i++)
        free(p->argv[i]);
    free(p->argv);
    bytebuf_release(&p->in);
    free(p);
}

static void complete_waiters(struct proc *p)
{
    for (int i = 0; i < EXEC_MAX_WAITERS; i++) {
        struct waiter *w = &p->waiters[i];
        if (!w->ticket)
            continue;
        ev_timer_stop(H.loop, &w->timer);
        uint64_t t = w->ticket;
        w->ticket = 0;
        cJSON *r = cJSON_CreateObject();
        if (r)
            status_json(p, r);
        struct rpc_error e = {0};
        if (!r)
            rpc_error_set(&e, RPC_INTERNAL_ERROR, "out of memory");
        control_complete(t, r, &e);
    }
}

/* Finished: reaped, every stream at its end and (with a client) sent. */
static void finish_check(struct proc *p)
{
    if (p->finished || !p->reaped || !p->started)
        return;
    for (int i = 0; i < 2; i++)
        if (p->out[i].open || (p->client && p->out[i].sent < p->out[i].end))
            return;
    p->finished = true;
    ev_timer_stop(H.loop, &p->grace);
    ev_timer_stop(H.loop, &p->timeout);
    if (p->in_fd >= 0) {
        ev_io_stop(H.loop, &p->in_io);
        close(p->in_fd);
        p->in_fd = -1;
    }
    if (p->in_ticket) {
        struct rpc_error e = {0};
        rpc_error_set(&e, RPC_ERR_STATE, "id: process %llu exited before its input was written",
                      (unsigned long long)p->id);
        control_complete(p->in_ticket, NULL, &e);
        p->in_ticket = 0;
    }
    send_exit(p);
    complete_waiters(p);
    /* After the host has its answer: an activity sample may follow. */
    sessions_changed();
    if (p->leaf[0])
        cgroup_service_remove(p->leaf);
    ev_timer_set(&p->expire, EXEC_KEEP_MS / 1000., 0.);
    ev_timer_start(H.loop, &p->expire);
}

static void expire_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct proc *p = w->data;
    log_debug("exec %llu: forgotten", (unsigned long long)p->id);
    proc_free(p);
}

static void grace_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct proc *p = w->data;
    /* Held open by something outside the leaf: end the streams, except
     * one waiting for its client's room (that client will take it). */
    for (int i = 0; i < 2; i++)
        if (p->out[i].open && (!p->client || control_room(p->client) > 0))
            stream_close(p, i);
    if (p->out[0].open || p->out[1].open)
        ev_timer_again(H.loop, w);
    finish_check(p);
}

static void exited(void *ctx, pid_t pid, int wstatus)
{
    struct proc *p = ctx;
    p->reaped = true;
    /* pid is the reaper of the session's pid namespace when it has one:
     * its main process's end is what the session reports. */
    p->wstatus = pidreaper_status(p->reaper_fd, wstatus);
    p->reaper_fd = -1;
    p->exited_ms = mono_ms();
    /* Like a service's: nothing it started outlives it. */
    if (p->leaf[0] && !cgroup_is_empty(p->leaf))
        cgroup_kill(p->leaf);
    if (p->start_failed) {
        proc_free(p);
        return;
    }
    if (!p->started) {
        /* The report pipe says whether it ran; read first. */
        return;
    }
    ev_timer_set(&p->grace, EXIT_GRACE_MS / 1000., EXIT_GRACE_MS / 1000.);
    ev_timer_start(H.loop, &p->grace);
    log_debug("exec %llu: pid %d ended (status 0x%x)", (unsigned long long)p->id, (int)pid,
              wstatus);
    finish_check(p);
}

static void timeout_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct proc *p = w->data;
    if (p->reaped)
        return;
    log_info("exec %llu: timeout_ms passed, killing it", (unsigned long long)p->id);
    p->timed_out = true;
    if (p->leaf[0])
        cgroup_kill(p->leaf);
    kill(-p->pid, SIGKILL);
    kill(p->pid, SIGKILL);
}

static void kick_cb(struct ev_loop *loop, ev_timer *w, int revents) { pump(w->data); }

static void report_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    struct proc *p = w->data;
    struct child_report rep;
    ssize_t n;

    do
        n = read(p->report_fd, &rep, sizeof(rep));
    while (n < 0 && errno == EINTR);
    if (n < 0 && errno == EAGAIN)
        return;
    ev_io_stop(H.loop, &p->report_io);
    close(p->report_fd);
    p->report_fd = -1;
    if (p->ns_offer) {
        /* Its child sent its namespace before exec, if it built one. */
        p->ns_offer = false;
        contain_snapshot_take();
    }
    uint64_t ticket = p->start_ticket;
    p->start_ticket = 0;
    if (n == (ssize_t)sizeof(rep)) {
        /* The child could not be set up or executed. */
        static const char *const stage[] = {
            [LAUNCH_STEP_SETUP] = "setup", [LAUNCH_STEP_CONTAIN] = "containment",
            [LAUNCH_STEP_CWD] = "cwd", [LAUNCH_STEP_SECCOMP] = "seccomp",
            [LAUNCH_STEP_EXEC] = "argv[0]"};
        struct rpc_error e = {0};
        rep.what[sizeof(rep.what) - 1] = 0;
        const char *st = rep.stage >= LAUNCH_STEP_SETUP && rep.stage <= LAUNCH_STEP_EXEC
                             ? stage[rep.stage] : "setup";
        const char *obj = rep.stage == LAUNCH_STEP_EXEC  ? p->argv[0]
                          : rep.stage == LAUNCH_STEP_CWD ? p->cwd
                                                         : rep.what;
        rpc_error_set(&e, RPC_ERR_FAILED, "%s: %s%s%s", st, obj, obj[0] ? ": " : "",
                      strerror(rep.err));
        log_info("exec %llu: %s", (unsigned long long)p->id, e.message);
        control_complete(ticket, NULL, &e);
        /* The child ends with 127: gone for the host, freed once reaped. */
        p->start_failed = true;
        for (size_t i = 0; i < TABLE_MAX; i++)
            if (table[i] == p)
                table[i] = NULL;
        if (p->reaped)
            proc_free(p);
        return;
    }
    /* EOF: the exec succeeded (the pipe is close-on-exec). */
    p->started = true;
    cJSON *r = cJSON_CreateObject();
    if (r) {
        cJSON_AddNumberToObject(r, "id", (double)p->id);
        cJSON_AddNumberToObject(r, "pid", (double)p->pid);
        cJSON_AddBoolToObject(r, "tty", p->tty);
        containment_json(p, r);
    }
    struct rpc_error e = {0};
    if (!r)
        rpc_error_set(&e, RPC_INTERNAL_ERROR, "out of memory");
    /* The reply is queued before the first output. */
    control_complete(ticket, r, &e);
    if (p->reaped) {
        ev_timer_set(&p->grace, EXIT_GRACE_MS / 1000., EXIT_GRACE_MS / 1000.);
        ev_timer_start(H.loop, &p->grace);
    }
    pump(p);
}

static void room_hook(struct client *c)
{
    for (size_t i = 0; i < TABLE_MAX; i++)
        if (table[i] && table[i]->client == c)
            pump(table[i]);
}

static void closed_hook(struct client *c)
{
    for (size_t i = 0; i < TABLE_MAX; i++)
        if (table[i] && table[i]->client == c)
            detach(table[i]);
}

/* Running processes, and a free slot (an exited one given up if need
 * be, the oldest first). */
static size_t running_count(void)
{
    size_t n = 0;
    for (size_t i = 0; i < TABLE_MAX; i++)
        if (table[i] && !table[i]->finished)
            n++;
    return n;
}

static int free_slot(void)
{
    int oldest = -1;
    for (int i = 0; i < TABLE_MAX; i++) {
        if (!table[i])
            return i;
        if (table[i]->finished && (oldest < 0 || table[i]->exited_ms < table[oldest]->exited_ms))
            oldest = i;
    }
    if (oldest >= 0)
        proc_free(table[oldest]);
    return oldest;
}

int exec_start(struct client *c, const struct exec_request *r, struct rpc_error *err)
{
    size_t max_procs, max_buf;
    struct launch_plan plan;
    struct err why = {0};

    if (shutdown_in_progress()) {
        rpc_error_set(err, RPC_ERR_STATE, "shutting down");
        return -1;
    }
    /* Its leaf would be frozen with the services: it could not even exec. */
    if (sandbox_state() != SANDBOX_RUNNING) {
        rpc_error_set(err, RPC_ERR_STATE, "the sandbox is %s", sandbox_state_name(sandbox_state()));
        return -1;
    }
    exec_limits(&max_procs, &max_buf);
    if (running_count() >= max_procs) {
        rpc_error_set(err, RPC_ERR_BUSY, "exec.max_processes: %zu processes already running",
                      max_procs);
        return -1;
    }
    uint64_t bufsz = r->buffer_bytes ? r->buffer_bytes : max_buf;
    if (bufsz > max_buf || bufsz < EXEC_MIN_BUFFER_BYTES) {
        rpc_error_set(err, RPC_INVALID_PARAMS,
                      "buffer_bytes: %llu is outside %d..%zu (exec.buffer_bytes)",
                      (unsigned long long)bufsz, EXEC_MIN_BUFFER_BYTES, max_buf);
        return -1;
    }
    if (r->uncontained && H.cfg && !H.cfg->exec.allow_uncontained) {
        rpc_error_set(err, RPC_ERR_STATE,
                      "isolation: sessions without isolation are off (exec.allow_uncontained)");
        return -1;
    }
    if (!hooks_set) {
        control_set_stream_hooks(room_hook, closed_hook);
        hooks_set = true;
    }
    int slot = free_slot();
    /* Numbered in one sequence for the life of hearth. */
    if (slot < 0) {
        rpc_error_set(err, RPC_ERR_BUSY, "exec.max_processes: no room in the process table");
        return -1;
    }

    /* What launch and contain read of a service, for this process: a
     * default service's settings, or with isolation off those of a
     * service whose config says "isolation": false, so contain_prepare
     * takes the very path such a service takes. */
    static struct svc_settings uncontained;
    if (r->uncontained) {
        uncontained = *svc_config_defaults();
        uncontained.contain.isolation = false;
    }
    cJSON *policy = cJSON_CreateObject();
    struct service_config sc = {
        .name = "exec", .argv = r->argv, .argc = r->argc, .env = r->env, .n_env = r->n_env,
        .cwd = (char *)r->cwd, .user = (char *)r->user, .group = (char *)r->group,
        .json = policy, .settings = r->uncontained ? &uncontained : NULL,
    };
    struct proc *p = calloc(1, sizeof(*p));
    if (!policy || !p) {
        cJSON_Delete(policy);
        free(p);
        rpc_error_set(err, RPC_INTERNAL_ERROR, "out of memory");
        return -1;
    }
    p->id = next_id;
    p->master = p->in_fd = p->report_fd = p->reaper_fd = -1;
    p->out[0].fd = p->out[1].fd = -1;
    p->tty = r->tty;
    p->kill_on_disconnect = r->kill_on_disconnect;
    p->uncontained = r->uncontained;
    {
        struct contain_policy pol;
        contain_policy_of(&sc, &pol);
        contain_privileged(&pol, p->privileged, sizeof(p->privileged));
    }
    snprintf(p->user, sizeof(p->user), "%s", r->user ? r->user : "");
    snprintf(p->cwd, sizeof(p->cwd), "%s", r->cwd ? r->cwd : "/");
    p->argv = calloc(r->argc + 1, sizeof(char *));
    if (!p->argv)
        goto oom;
    for (size_t i = 0; i < r->argc; i++) {
        if (!(p->argv[i] = strdup(r->argv[i])))
            goto oom;
        p->argc++;
    }
    for (int i = 0; i < (r->tty ? 1 : 2); i++) {
        p->out[i].cap = (size_t)bufsz;
        if (!(p->out[i].ring = malloc(p->out[i].cap)))
            goto oom;
    }
    if (launch_prepare(&sc, &plan, &why) < 0) {
        rpc_error_from(err, RPC_INVALID_PARAMS, &why);
        goto fail_nofree_plan;
    }
    if (cgroup_available()) {
        char dir[CGROUP_PATH_MAX], name[32];
        snprintf(name, sizeof(name), "@exec/%llu", (unsigned long long)p->id);
        if (cgroup_service_create("@exec", dir, sizeof(dir)) < 0 ||
            cgroup_service_create(name, p->leaf, sizeof(p->leaf)) < 0) {
            log_warn("exec: unable to create its cgroup: %s", strerror(errno));
            p->leaf[0] = 0;
        }
    }
    if (contain_prepare(&sc, H.cfg, H.config_path, launch_is_root(&plan), p->leaf,
                        &plan.contain, &why) < 0) {
        rpc_error_from(err, RPC_ERR_FAILED, &why);
        goto fail;
    }
    contain_as_host_session(&plan.contain);
    if (plan.contain.isolate)
        contain_host_setup(H.mode == MODE_SUPERVISOR);

    int fds[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
    enum { REP_R, REP_W, IN_R, IN_W, OUT_R, OUT_W, ERR_R, ERR_W };
    int slave = -1;
    if (pipe2(&fds[REP_R], O_CLOEXEC) < 0)
        goto syserr;
    if (r->tty) {
        if (exec_open_pty(r->rows, r->cols, &p->master, &slave) < 0)
            goto syserr;
    } else {
        if ((r->stdin_open && pipe2(&fds[IN_R], O_CLOEXEC) < 0) ||
            pipe2(&fds[OUT_R], O_CLOEXEC) < 0 || pipe2(&fds[ERR_R], O_CLOEXEC) < 0)
            goto syserr;
    }
    int pr[2] = {-1, -1};
    if (plan.contain.pidns && pidreaper_pipe(pr) < 0)
        goto syserr;
    plan.reaper_fd = pr[1];
    if (contain_fork_prepare(&plan.contain, &why) < 0) {
        exec_close_fds(pr, 2);
        goto syserr;
    }
    bool placed = false;
    /* In the table before the fork: a child that fails before its exec
     * still reaches p from a global (what memcheck asks of it). */
    table[slot] = p;
    p->ns_offer = contain_snapshot_offer(&plan.contain);
    pid_t pid = cgroup_fork_into(p->leaf[0] ? p->leaf : NULL, contain_clone_flags(&plan.contain),
                                 &placed);
    int fork_errno = errno;
    if (pid == 0) {
        close(fds[REP_R]);
        exec_child_run(p, r, &plan, fds[REP_W], fds[IN_R], fds[OUT_W], fds[ERR_W], slave, placed);
    }
    contain_snapshot_forked(&plan.contain, pid > 0);
    /* A failure here the child reports as its start's too. */
    if (launch_after_fork(&plan, pid, &why) < 0)
        log_error("exec %llu: %s", (unsigned long long)p->id, why.msg);
    if (pid < 0) {
        p->ns_offer = false;
        exec_close_fds(pr, 2);
        if (contain_fork_refused(&plan.contain, fork_errno, &why)) {
            rpc_error_from(err, RPC_ERR_FAILED, &why);
            goto fail_fds;
        }
        errno = fork_errno;
        goto syserr;
    }
    launch_free(&plan);
    cJSON_Delete(policy);
    if (slave >= 0)
        close(slave);
    close(fds[REP_W]);
    if (pr[1] >= 0)
        close(pr[1]);
    p->reaper_fd = pr[0];
    close(fds[IN_R]);
    close(fds[OUT_W]);
    close(fds[ERR_W]);
    p->pid = pid;
    p->started_ms = mono_ms();
    if (reaper_watch(pid, exited, p) < 0)
        log_error("exec %llu: unable to watch pid %d", (unsigned long long)p->id, (int)pid);
    p->report_fd = fds[REP_R];
    fcntl(p->report_fd, F_SETFL, O_NONBLOCK);
    ev_io_init(&p->report_io, report_cb, p->report_fd, EV_READ);
    p->report_io.data = p;
    ev_io_start(H.loop, &p->report_io);
    if (r->tty) {
        p->out[0].fd = p->master;
        if (r->stdin_open && (p->in_fd = fcntl(p->master, F_DUPFD_CLOEXEC, 3)) < 0)
            log_warn("exec %llu: unable to open stdin: %s", (unsigned long long)p->id,
                     strerror(errno));
    } else {
        p->out[0].fd = fds[OUT_R];
        p->out[1].fd = fds[ERR_R];
        p->in_fd = fds[IN_W];
        if (p->in_fd >= 0)
            fcntl(p->in_fd, F_SETFL, O_NONBLOCK);
    }
    for (int i = 0; i < 2; i++) {
        struct stream *s = &p->out[i];
        if (s->fd < 0)
            continue;
        s->open = true;
        fcntl(s->fd, F_SETFL, O_NONBLOCK);
        ev_io_init(&s->io, read_cb, s->fd, EV_READ);
        s->io.data = p;
    }
    ev_init(&p->timeout, timeout_cb);
    ev_init(&p->grace, grace_cb);
    ev_init(&p->expire, expire_cb);
    ev_init(&p->kick, kick_cb);
    p->timeout.data = p->grace.data = p->expire.data = p->kick.data = p;
    for (int i = 0; i < EXEC_MAX_WAITERS; i++)
        p->waiters[i].p = p;
    if (r->timeout_ms) {
        ev_timer_set(&p->timeout, (double)r->timeout_ms / 1000., 0.);
        ev_timer_start(H.loop, &p->timeout);
    }
    if (r->attach)
        p->client = c;
    next_id++;
    p->start_ticket = control_defer(c);
    log_info("exec %llu: pid %d started: %s%s", (unsigned long long)p->id, (int)pid, p->argv[0],
             p->tty ? " (tty)" : "");
    if (p->privileged[0])
        log_info("exec %llu: privileged: %s", (unsigned long long)p->id, p->privileged);
    sessions_changed();
    return 0;

syserr:
    rpc_error_set(err, RPC_ERR_FAILED, "unable to start: %s", strerror(errno));
fail_fds:
    exec_close_fds(fds, 8);
    if (slave >= 0)
        close(slave);
    if (p->master >= 0)
        close(p->master);
    p->master = -1;
fail:
    launch_free(&plan);
fail_nofree_plan:
    cJSON_Delete(policy);
    proc_free(p);
    return -1;
oom:
    rpc_error_set(err, RPC_INTERNAL_ERROR, "out of memory");
    cJSON_Delete(policy);
    proc_free(p);
    return -1;
}

static void wait_timeout_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
    struct waiter *w = t->data;
    uint64_t ticket = w->ticket;
    w->ticket = 0;
    cJSON *r = cJSON_CreateObject();
    if (r)
        status_json(w->p, r);
    struct rpc_error e = {0};
    if (!r)
        rpc_error_set(&e, RPC_INTERNAL_ERROR, "out of memory");
    control_complete(ticket, r, &e);
}

int exec_wait(struct client *c, uint64_t id, uint64_t timeout_ms, cJSON **result,
              struct rpc_error *err)
{
    struct proc *p = execproc_find(id, err);
    if (!p)
        return -1;
    if (p->finished) {
        *result = cJSON_CreateObject();
        if (!*result) {
            rpc_error_set(err, RPC_INTERNAL_ERROR, "out of memory");
            return -1;
        }
        status_json(p, *result);
        return 0;
    }
    struct waiter *w = NULL;
    for (int i = 0; i < EXEC_MAX_WAITERS && !w; i++)
        if (!p->waiters[i].ticket)
            w = &p->waiters[i];
    if (!w) {
        rpc_error_set(err, RPC_ERR_BUSY, "id: %d exec.wait calls already wait for process %llu",
                      EXEC_MAX_WAITERS, (unsigned long long)id);
        return -1;
    }
    w->ticket = control_defer(c);
    ev_timer_init(&w->timer, wait_timeout_cb, (double)timeout_ms / 1000., 0.);
    w->timer.data = w;
    ev_timer_start(H.loop, &w->timer);
    return 0;
}

int exec_attach(struct client *c, uint64_t id, uint64_t off_out, uint64_t off_err, cJSON **result,
                struct rpc_error *err)
{
    struct proc *p = execproc_find(id, err);
    if (!p)
        return -1;
    uint64_t off[2] = {off_out, off_err};
    for (int i = 0; i < 2; i++) {
        if (p->out[i].cap && off[i] > p->out[i].end) {
            rpc_error_set(err, RPC_INVALID_PARAMS, "%s: %llu is past the end of %s (%llu)",
                          i ? "stderr_offset" : "offset", (unsigned long long)off[i],
                          stream_name(i), (unsigned long long)p->out[i].end);
            return -1;
        }
    }
    cJSON *r = cJSON_CreateObject(), *streams = cJSON_AddObjectToObject(r, "streams");
    if (!r || !streams) {
        cJSON_Delete(r);
        rpc_error_set(err, RPC_INTERNAL_ERROR, "out of memory");
        return -1;
    }
    /* One client at a time: a new one takes over (the old one gets no
     * more output and is not an end of the process's life any more). */
    p->client = c;
    p->exit_pending = p->finished;
    cJSON_AddNumberToObject(r, "id", (double)p->id);
    for (int i = 0; i < 2; i++) {
        struct stream *s = &p->out[i];
        if (!s->cap)
            continue;
        uint64_t start = ring_start(s);
        uint64_t from = off[i] < start ? start : off[i];
        s->sent = from;
        cJSON *o = cJSON_AddObjectToObject(streams, stream_name(i));
        if (!o)
            continue;
        cJSON_AddNumberToObject(o, "from", (double)from);
        cJSON_AddNumberToObject(o, "end", (double)s->end);
        cJSON_AddNumberToObject(o, "lost", (double)(from - off[i]));
    }
    cJSON_AddNumberToObject(r, "dropped", (double)(p->out[0].dropped + p->out[1].dropped));
    status_json(p, r);
    *result = r;
    /* The reply goes first; the output follows on the next loop turn.
     * (Two attaches in one read: the kick is already on its way.) */
    if (!ev_is_active(&p->kick)) {
        ev_timer_set(&p->kick, 0., 0.);
        ev_timer_start(H.loop, &p->kick);
    }
    return 0;
}

void exec_kill_all(void)
{
    for (size_t i = 0; i < TABLE_MAX; i++) {
        struct proc *p = table[i];
        if (!p || p->reaped || p->pid <= 0)
            continue;
        p->killed = true;
        if (p->leaf[0])
            cgroup_kill(p->leaf);
        kill(-p->pid, SIGKILL);
        kill(p->pid, SIGKILL);
    }
}

cJSON *exec_list_json(void)
{
    cJSON *arr = cJSON_CreateArray();
    int64_t now = mono_ms();
    for (size_t i = 0; arr && i < TABLE_MAX; i++) {
        const struct proc *p = table[i];
        if (!p || !p->started)
            continue;
        cJSON *o = cJSON_CreateObject();
        if (!o)
            break;
        cJSON_AddItemToArray(arr, o);
        status_json(p, o);
        cJSON_AddNumberToObject(o, "pid", (double)p->pid);
        cJSON *a = cJSON_AddArrayToObject(o, "argv");
        for (size_t k = 0; a && k < p->argc; k++)
            cJSON_AddItemToArray(a, cJSON_CreateString(p->argv[k]));
        if (p->user[0])
            cJSON_AddStringToObject(o, "user", p->user);
        cJSON_AddBoolToObject(o, "tty", p->tty);
        containment_json(p, o);
        cJSON_AddBoolToObject(o, "attached", p->client != NULL);
        cJSON_AddBoolToObject(o, "stdin", p->in_fd >= 0);
        cJSON_AddNumberToObject(o, "age_ms", (double)(now - p->started_ms));
        cJSON *st = cJSON_AddObjectToObject(o, "streams");
        for (int k = 0; st && k < 2; k++) {
            const struct stream *s = &p->out[k];
            if (!s->cap)
                continue;
            cJSON *so = cJSON_AddObjectToObject(st, stream_name(k));
            if (!so)
                continue;
            cJSON_AddNumberToObject(so, "start", (double)ring_start(s));
            cJSON_AddNumberToObject(so, "end", (double)s->end);
            cJSON_AddNumberToObject(so, "dropped", (double)s->dropped);
        }
    }
    return arr;
}
