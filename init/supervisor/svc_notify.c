/* systemd's readiness protocol for a service: its NOTIFY_SOCKET (bound
 * at boot, senders checked, messages applied: READY, STATUS, STOPPING,
 * RELOADING, EXTEND_TIMEOUT_USEC, WATCHDOG) and the ready.notify_fd pipe. */
#include "service_priv.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>
#include <ev.h>

#include "cgroup.h"
#include "err.h"
#include "hearth.h"
#include "launch.h"
#include "log.h"
#include "notify.h"

static void nsock_cb(struct ev_loop *loop, ev_io *w, int revents);

bool svc_wants_nsock(const struct service *s)
{
    return s->ready.notify || s->health.watchdog_ms || (s->cfg->settings && s->cfg->settings->activity_lease);
}

int svc_nsock_open(struct service *s, struct err *err)
{
    if (s->n.fd >= 0)
        return 0;
    s->n.fd = notify_open(s->cfg->name, s->n.addr, sizeof(s->n.addr), err);
    if (s->n.fd < 0)
        return -1;
    ev_io_init(&s->n.io, nsock_cb, s->n.fd, EV_READ);
    s->n.io.data = s;
    ev_io_start(H.loop, &s->n.io);
    log_debug("service %s: NOTIFY_SOCKET %s", s->cfg->name, s->n.addr);
    return 0;
}

void svc_nsock_close(struct service *s)
{
    if (s->n.fd < 0)
        return;
    ev_io_stop(H.loop, &s->n.io);
    close(s->n.fd);
    s->n.fd = -1;
}

/* NOTIFY_SOCKET and WATCHDOG_USEC for a service that speaks the protocol;
 * for one that does not, whatever hearth itself inherited is removed (a
 * hearth started by systemd must not hand its own socket on), unless the
 * service's env sets it. WATCHDOG_PID is not set: without it sd_notify's
 * sd_watchdog_enabled accepts any process, and the pid is only known
 * after the fork. */
int svc_notify_env(struct service *s, struct launch_plan *plan)
{
    static const char *const keys[] = {"NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"};
    struct err err;

    s->n.stopping = s->n.reloading = false;
    s->n.status[0] = 0;
    s->n.wd_last_ms = 0;
    s->ready.extended = false;
    if (!svc_wants_nsock(s)) {
        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
            bool own = false;
            for (size_t j = 0; j < s->cfg->n_env && !own; j++)
                own = strcmp(s->cfg->env[j].key, keys[i]) == 0;
            if (!own && launch_env_set(plan, keys[i], NULL) < 0)
                goto nomem;
        }
        return 0;
    }
    if (svc_nsock_open(s, &err) < 0) {
        snprintf(s->error, sizeof(s->error), "NOTIFY_SOCKET: %s", err.msg);
        return -1;
    }
    /* What the previous run left queued is not this run's news (its
     * senders are gone and would be refused anyway); bounded, so a flood
     * cannot hold the start. */
    for (int i = 0; i < 256; i++) {
        char junk[64];
        struct notify_sender from;
        bool truncated;
        if (notify_recv(s->n.fd, junk, sizeof(junk), &from, &truncated) < 0)
            break;
    }
    char usec[32];
    snprintf(usec, sizeof(usec), "%lld", (long long)s->health.watchdog_ms * 1000);
    if (launch_env_set(plan, "NOTIFY_SOCKET", s->n.addr) < 0 ||
        launch_env_set(plan, "WATCHDOG_USEC", s->health.watchdog_ms ? usec : NULL) < 0 ||
        launch_env_set(plan, "WATCHDOG_PID", NULL) < 0)
        goto nomem;
    return 0;
nomem:
    snprintf(s->error, sizeof(s->error), "unable to set the environment: %s", strerror(errno));
    return -1;
}

/* Whether a datagram's sender belongs to the service: its main process
 * (hearth's child, so its pid cannot be reused before hearth reaps it),
 * or any process of its cgroup leaf (systemd's NotifyAccess=all, bounded
 * by the cgroup), or without cgroups one of its session. Everything else,
 * a sender without credentials or from outside hearth's pid namespace
 * (pid 0) included, is refused. A helper that sent and exited at once may
 * be refused as gone: the check fails closed. */
static bool nsender_ok(const struct service *s, const struct notify_sender *f, struct err *err)
{
    if (!f->creds || f->pid <= 0) {
        err_set(err, f->creds ? "sender outside hearth's pid namespace" : "no credentials");
        return false;
    }
    if (s->pid <= 0) {
        err_set(err, "pid %d: the service is not running", (int)f->pid);
        return false;
    }
    if (f->pid == s->pid)
        return true;
    if (s->leaf.path[0]) {
        int in = cgroup_pid_in_leaf(f->pid, s->leaf.path);
        if (in == 1)
            return true;
        err_set(err, in == 0 ? "pid %d is not in the service's cgroup"
                                    : "unable to identify pid %d: gone?", (int)f->pid);
        return false;
    }
    if (notify_pid_session(f->pid) == s->pid)
        return true;
    err_set(err, "pid %d is not in the service's session", (int)f->pid);
    return false;
}

/* EXTEND_TIMEOUT_USEC: the deadline of what the service is doing now is
 * at least that far away. Starting: the readiness deadline (unbounded,
 * like ready.timeout_ms 0: a starting service holds nothing of hearth's).
 * Stopping: the kill, but never later than twice stop.timeout_ms after
 * the stop began, so a service cannot hold a shutdown for ever. */
static void notify_extend(struct service *s, uint64_t usec)
{
    int64_t ms = usec / 1000 > (uint64_t)INT32_MAX ? INT32_MAX : (int64_t)(usec / 1000);
    int64_t now = mono_ms();

    if (s->state == SVC_STARTING && s->ready.timeout_ms) {
        if (now + ms <= s->ready.deadline)
            return;
        s->ready.deadline = now + ms;
        s->ready.extended = true;
        if (s->ready.notify && !svc_suspended)
            svc_ready_arm_deadline(s);
        log_debug("service %s: readiness deadline extended by %lld ms", s->cfg->name,
                  (long long)ms);
    } else if (s->state == SVC_STOPPING && !s->killed && ev_is_active(&s->timer)) {
        int64_t left = (int64_t)(ev_timer_remaining(H.loop, &s->timer) * 1000.0);
        int64_t cap = s->stop_began_ms + 2 * s->cfg->stop_timeout_ms - now;
        int64_t want = ms < cap ? ms : cap;
        if (want > left) {
            svc_timer_start(s, want);
            log_debug("service %s: stop deadline extended to %lld ms from now", s->cfg->name,
                      (long long)want);
        }
    }
}

static void notify_apply(struct service *s, const struct notify_msg *m)
{
    int64_t now = mono_ms();

    if (m->has_status && strcmp(s->n.status, m->status) != 0) {
        memcpy(s->n.status, m->status, sizeof(s->n.status));
        log_debug("service %s: STATUS=%s", s->cfg->name, s->n.status);
    }
    if (m->stopping && !s->n.stopping) {
        s->n.stopping = true;
        log_info("service %s: says it is stopping", s->cfg->name);
    }
    if (m->reloading && !s->n.reloading) {
        s->n.reloading = true;
        log_info("service %s: says it is reloading", s->cfg->name);
    }
    if (m->has_extend)
        notify_extend(s, m->extend_usec);
    if (m->ready) {
        /* READY=1 also ends a reload (systemd's RELOADING=1 ... READY=1). */
        s->n.reloading = false;
        if (s->state == SVC_STARTING && s->ready.notify) {
            log_debug("service %s: READY=1", s->cfg->name);
            s->cause = "notify";
            svc_post(s, E_READY);
        }
    }
    if (m->has_busy && svc_activity.lease) /* a lease: activity judges it */
        svc_activity.lease((size_t)(s - svcs), m->busy_sec,
                           m->has_busy_reason ? m->busy_reason : NULL);
    if (s->health.watchdog_ms && (m->watchdog || m->watchdog_trigger)) {
        if (m->watchdog)
            s->n.wd_last_ms = now;
        /* A trigger counts as a missed ping at once; a ping re-arms the
         * one timer. */
        if (m->watchdog_trigger)
            svc_health_result(s, false, "WATCHDOG=trigger");
        else
            svc_health_result(s, true, NULL);
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
        ssize_t n = notify_recv(s->n.fd, buf, sizeof(buf), &from, &truncated);
        if (n < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                log_warn("service %s: unable to read NOTIFY_SOCKET: %s", s->cfg->name,
                         strerror(errno));
            return;
        }
        /* The exec pipe's EOF may be waiting in the same wake-up: a
         * service that says READY=1 has exec'd, and readiness starts from
         * the exec (a_running), so that comes first: the pipe's own
         * callback, through its watcher (the start's, svc_spawn.c, above
         * this file, which names nothing of it). */
        if (s->exec_fd >= 0)
            ev_invoke(loop, &s->exec_io, 0);
        struct err why;
        if (!nsender_ok(s, &from, &why)) {
            s->n.refused++;
            /* Logged at 1, 2, 4, 8...: a flood does not flood the log. */
            if ((s->n.refused & (s->n.refused - 1)) == 0)
                log_warn("service %s: NOTIFY_SOCKET: refused a message (%lu so far): %s",
                         s->cfg->name, s->n.refused, why.msg);
            continue;
        }
        struct notify_msg m;
        if (truncated || notify_parse(buf, (size_t)n, &m) < 0) {
            s->n.bad++;
            log_debug("service %s: NOTIFY_SOCKET: dropped a %s datagram", s->cfg->name,
                      truncated ? "longer than 4096-byte" : n ? "binary" : "empty");
            continue;
        }
        s->n.msgs++;
        s->n.bad += m.ignored;
        s->n.last_ms = mono_ms();
        notify_apply(s, &m);
    }
}

cJSON *svc_notify_json(const struct service *s, int64_t now)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddStringToObject(o, "socket", s->n.addr);
    cJSON_AddStringToObject(o, "status", s->n.status);
    cJSON_AddBoolToObject(o, "stopping", s->n.stopping);
    cJSON_AddBoolToObject(o, "reloading", s->n.reloading);
    cJSON_AddNumberToObject(o, "messages", (double)s->n.msgs);
    cJSON_AddNumberToObject(o, "refused", (double)s->n.refused);
    cJSON_AddNumberToObject(o, "ignored", (double)s->n.bad);
    if (s->n.last_ms)
        cJSON_AddNumberToObject(o, "last_message_ms", (double)(now - s->n.last_ms));
    if (s->health.watchdog_ms) {
        cJSON_AddNumberToObject(o, "watchdog_ms", (double)s->health.watchdog_ms);
        if (s->n.wd_last_ms)
            cJSON_AddNumberToObject(o, "last_watchdog_ms", (double)(now - s->n.wd_last_ms));
    }
    return o;
}

void svc_notify_close(struct service *s)
{
    if (s->ready.notify_rd >= 0) {
        ev_io_stop(H.loop, &s->ready.notify_io);
        close(s->ready.notify_rd);
        s->ready.notify_rd = -1;
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
        n = read(s->ready.notify_rd, buf, sizeof(buf));
    while (n < 0 && errno == EINTR);
    if (n < 0 && errno == EAGAIN)
        return;
    if (n <= 0) {
        if (s->state == SVC_STARTING)
            log_warn("service %s: closed notify_fd %d without writing a line", s->cfg->name,
                     s->ready.notify_fd);
        svc_notify_close(s);
        return;
    }
    if (s->state == SVC_STARTING && memchr(buf, '\n', (size_t)n)) {
        log_debug("service %s: ready line on fd %d", s->cfg->name, s->ready.notify_fd);
        svc_post(s, E_READY);
    }
}

/* hearth's end of the ready.notify_fd pipe, read for the service's life. */
void svc_notify_fd_attach(struct service *s, int fd)
{
    s->ready.notify_rd = fd;
    fcntl(fd, F_SETFL, O_NONBLOCK);
    ev_io_init(&s->ready.notify_io, notify_cb, fd, EV_READ);
    s->ready.notify_io.data = s;
    ev_io_start(H.loop, &s->ready.notify_io);
}
