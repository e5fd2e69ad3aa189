#include "check.h"
#include "cgroup.h"
#include "contain.h"
#include "err.h"
#include "http.h"
#include "launch.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>


#include "lifeline.h"
#include "log.h"
#include "reaper.h"

struct check {
    struct ev_loop *loop;
    enum check_kind kind;
    check_done_fn done;
    void *ctx;
    ev_timer timer;      /* the attempt's deadline */
    ev_timer soon;       /* delivers a result known at start; runs the file probe */
    ev_io io;            /* connect completion */
    int fd;              /* the socket, or the exec probe's error pipe */
    pid_t pid;           /* exec: set until the reaper has reaped it */
    bool finished;       /* done called or cancelled; exec may still await its reap */
    bool soon_ok;        /* the result soon delivers (tcp, unix) */
    int64_t timeout_ms;
    char target[256];    /* as given; argv[0] for exec */
    char detail[320];
    /* http: the request being sent, then the answer being read */
    char req[HTTP_REQUEST_MAX];
    size_t req_len, req_off;
    bool reading;
    struct http_reader http;
};

/* ---- the probe ---- */

static void check_free(struct check *c)
{
    if (c->fd >= 0)
        close(c->fd);
    free(c);
}

static void stop_watchers(struct check *c)
{
    ev_timer_stop(c->loop, &c->timer);
    ev_timer_stop(c->loop, &c->soon);
    ev_io_stop(c->loop, &c->io);
}

/* Calls done once. c is freed first (unless an exec probe still awaits its
 * reap, whose callback frees it) so nothing here touches c after done:
 * done may start a new check or do anything else. */
static void report(struct check *c, bool ok)
{
    char detail[sizeof(c->detail)];
    check_done_fn done = c->done;
    void *ctx = c->ctx;

    stop_watchers(c);
    /* Sockets close at once; the exec pipe is read at reap time. */
    if (c->kind != CHECK_EXEC && c->fd >= 0) {
        close(c->fd);
        c->fd = -1;
    }
    memcpy(detail, c->detail, sizeof(detail));
    c->finished = true;
    if (c->pid == 0)
        check_free(c);
    done(ctx, ok, detail);
}

/* Results known inside check_start still arrive from the loop. */
static void report_soon(struct check *c, bool ok)
{
    c->soon_ok = ok;
    ev_timer_set(&c->soon, 0., 0.);
    ev_timer_start(c->loop, &c->soon);
}

static void kill_group(struct check *c)
{
    /* The group is ours from fork on (setpgid on both sides); the plain pid
     * is a fallback should the group not exist for some reason. */
    if (kill(-c->pid, SIGKILL) < 0 && (errno != ESRCH || kill(c->pid, SIGKILL) < 0) &&
        errno != ESRCH)
        log_warn("check: unable to kill probe %s (pid %d): %s", c->target, (int)c->pid,
                 strerror(errno));
}

static void timeout_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct check *c = w->data;

    if (c->kind == CHECK_HTTP && c->reading && c->http.status >= 200 && c->http.status < 300) {
        /* The status passed; the body is read only so the server can
         * finish its answer, and has no say. */
        snprintf(c->detail, sizeof(c->detail), "http %s: status %d %s", c->target,
                 c->http.status, c->http.reason);
        report(c, true);
        return;
    }
    if (c->kind == CHECK_HTTP)
        snprintf(c->detail, sizeof(c->detail), "http %s: timed out after %lld ms %s", c->target,
                 (long long)c->timeout_ms,
                 c->reading ? (c->http.status ? "reading the answer" : "waiting for the status line")
                 : c->req_off ? "sending the request" : "connecting");
    else
        snprintf(c->detail, sizeof(c->detail), "timed out after %lld ms", (long long)c->timeout_ms);
    if (c->kind == CHECK_EXEC && c->pid)
        kill_group(c);
    report(c, false);
}

static void file_probe(struct check *c)
{
    struct stat st;

    if (stat(c->target, &st) == 0) {
        snprintf(c->detail, sizeof(c->detail), "%s exists", c->target);
        report(c, true);
    } else {
        snprintf(c->detail, sizeof(c->detail), "unable to stat %s: %s", c->target, strerror(errno));
        report(c, false);
    }
}

static void soon_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct check *c = w->data;

    if (c->kind == CHECK_FILE)
        file_probe(c);
    else
        report(c, c->soon_ok);
}

static void http_io_cb(struct ev_loop *loop, ev_io *w, int revents);

/* Once connected, the request goes out as the socket takes it, then the
 * answer is read as it comes: never more than one buffer per wake-up. */
static void http_begin(struct check *c)
{
    ev_io_stop(c->loop, &c->io);
    ev_io_init(&c->io, http_io_cb, c->fd, EV_WRITE);
    c->io.data = c;
    ev_io_start(c->loop, &c->io);
}

static void http_fail(struct check *c, const char *what, const char *why)
{
    /* With why, what is the step that failed; without, what went wrong. */
    if (why)
        snprintf(c->detail, sizeof(c->detail), "http %s: unable to %s: %s", c->target, what, why);
    else
        snprintf(c->detail, sizeof(c->detail), "http %s: %s", c->target, what);
    report(c, false);
}

/* What one read brought: 2xx passes, any other status fails at once (no
 * need to read on), an answer that is not HTTP fails with what was wrong. */
static void http_feed(struct check *c, const char *buf, size_t n)
{
    enum http_progress pr;
    size_t used;
    bool passed = c->http.status >= 200 && c->http.status < 300;

    do {
        pr = http_reader_feed(&c->http, buf, n, &used);
        buf += used;
        n -= used;
        if (pr == HTTP_STATUS) {
            passed = c->http.status >= 200 && c->http.status < 300;
            if (!passed) {
                char st[96];
                snprintf(st, sizeof(st), "status %d%s%s", c->http.status,
                         c->http.reason[0] ? " " : "", c->http.reason);
                http_fail(c, st, NULL);
                return;
            }
        } else if (pr == HTTP_ERROR && !passed) {
            http_fail(c, c->http.err, NULL);
            return;
        } else if (pr == HTTP_DONE || pr == HTTP_ERROR) {
            break;
        }
    } while (n || pr == HTTP_STATUS);
    if (passed && (pr == HTTP_DONE || pr == HTTP_ERROR)) {
        snprintf(c->detail, sizeof(c->detail), "http %s: status %d %s", c->target,
                 c->http.status, c->http.reason);
        report(c, true);
    }
}

static void http_io_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    struct check *c = w->data;
    char buf[4096];
    ssize_t n;

    if (!c->reading) {
        n = send(c->fd, c->req + c->req_off, c->req_len - c->req_off, MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        if (n < 0) {
            http_fail(c, "send", strerror(errno));
            return;
        }
        c->req_off += (size_t)n;
        if (c->req_off < c->req_len)
            return;
        c->reading = true;
        ev_io_stop(loop, &c->io);
        ev_io_set(&c->io, c->fd, EV_READ);
        ev_io_start(loop, &c->io);
        return;
    }
    n = read(c->fd, buf, sizeof(buf));
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    bool passed = c->http.status >= 200 && c->http.status < 300;
    if (n < 0 && !passed) {
        http_fail(c, "read", strerror(errno));
        return;
    }
    if (n <= 0) {
        if (!passed && http_reader_eof(&c->http) == HTTP_ERROR) {
            http_fail(c, c->http.err, NULL);
            return;
        }
        /* A reset or EOF after a passing status: still a pass. */
        snprintf(c->detail, sizeof(c->detail), "http %s: status %d %s", c->target,
                 c->http.status, c->http.reason);
        report(c, true);
        return;
    }
    http_feed(c, buf, (size_t)n);
}

static void connected_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    struct check *c = w->data;
    int e = 0;
    socklen_t len = sizeof(e);

    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &e, &len) < 0)
        e = errno;
    if (c->kind == CHECK_HTTP) {
        if (e)
            http_fail(c, "connect", strerror(e));
        else
            http_begin(c);
        return;
    }
    if (e == 0)
        snprintf(c->detail, sizeof(c->detail), "connected to %s", c->target);
    else
        snprintf(c->detail, sizeof(c->detail), "unable to connect to %s: %s", c->target, strerror(e));
    report(c, e == 0);
}

static uint32_t probe_mark;

void check_set_mark(uint32_t mark)
{
    probe_mark = mark;
}

static int connect_start(struct check *c, const struct sockaddr *sa, socklen_t salen, struct err *err)
{
    int r;

    c->fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        return err_unable(err, errno, "create socket for %s", c->target);
    /* Set only where the ruleset reads it, and hearth then has NET_ADMIN
     * (it applied that ruleset); should it fail, the probe goes unmarked
     * and meets the rule the services do. */
    if (probe_mark && sa->sa_family != AF_UNIX &&
        setsockopt(c->fd, SOL_SOCKET, SO_MARK, &probe_mark, sizeof(probe_mark)) < 0)
        log_debug("check: unable to mark the socket for %s: %s", c->target, strerror(errno));
    do
        r = connect(c->fd, sa, salen);
    while (r < 0 && errno == EINTR && sa->sa_family == AF_UNIX);
    /* An interrupted TCP connect goes on in the background, like
     * EINPROGRESS; repeating it would fail with EALREADY. */
    /* http: even a connect done at once goes on from the loop. */
    if ((r < 0 && (errno == EINPROGRESS || errno == EINTR)) || (r == 0 && c->kind == CHECK_HTTP)) {
        ev_io_init(&c->io, connected_cb, c->fd, EV_WRITE);
        c->io.data = c;
        ev_io_start(c->loop, &c->io);
        return 0;
    }
    if (r == 0)
        snprintf(c->detail, sizeof(c->detail), "connected to %s", c->target);
    else if (c->kind == CHECK_HTTP)
        snprintf(c->detail, sizeof(c->detail), "http %s: unable to connect: %s", c->target,
                 strerror(errno));
    else
        snprintf(c->detail, sizeof(c->detail), "unable to connect to %s: %s", c->target,
                 strerror(errno));
    report_soon(c, r == 0);
    return 0;
}

/* In a probe's child: the check it runs for (see check_exec). */
/* volatile: written and never read, it would be optimised away. */
static struct check *volatile probe_of_child;

/* What a probe child that failed before exec writes to its pipe (one
 * write below PIPE_BUF: whole or nothing). */
struct probe_report {
    int step; /* enum launch_step */
    int err;
    char what[120];
};

/* Between fork and exec: async-signal-safe calls only. hearth blocks its
 * signals for the signalfd and ignores SIGPIPE; neither must leak into the
 * probe. The rest is the service's own last steps (launch_exec): its
 * namespaces joined, its identity, capabilities, cwd, seccomp filter and
 * environment. A failure is reported through errfd. */
static void __attribute__((noreturn)) exec_child(const struct check_exec *how, char *const *argv,
                                                 int errfd, bool placed)
{
    struct probe_report rep;
    int nul;

    lifeline_hold(); /* first: a probe outlives no hearth */
    memset(&rep, 0, sizeof(rep));
    rep.step = LAUNCH_STEP_SETUP;
    launch_reset_signals(how->plan);
    /* A probe is no part of PID 1: the OOM killer may pick it. */
    launch_oom_default();
    setpgid(0, 0);
    /* With hearth's stdio closed the pipe may sit on 0..2, which the
     * dup2s below would overwrite. */
    if (errfd <= 2) {
        int moved = fcntl(errfd, F_DUPFD_CLOEXEC, 3);
        if (moved < 0)
            goto fail;
        errfd = moved;
    }
    /* Born in the service's leaf by clone3; otherwise it moves there
     * itself, from hearth's view of the tree (the service's has it
     * read-only), and a probe that cannot does not run at all. */
    if (how->leaf && how->leaf[0] && !placed) {
        char path[CGROUP_PATH_MAX + 16];
        snprintf(path, sizeof(path), "%s/cgroup.procs", how->leaf);
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, "0", 1) != 1) {
            snprintf(rep.what, sizeof(rep.what), "unable to join the service's cgroup");
            rep.step = LAUNCH_STEP_CONTAIN;
            goto fail;
        }
        close(fd);
    }
    /* Not O_CLOEXEC: if it lands on 0..2 itself it must survive exec. */
    nul = open("/dev/null", O_RDWR | O_NOCTTY);
    if (nul < 0)
        goto fail;
    for (int fd = 0; fd <= 2; fd++)
        if (fd != nul && dup2(nul, fd) < 0)
            goto fail;
    if (nul > 2)
        close(nul);
    struct err what = {0};
    launch_exec(how->plan, how->cwd, argv, -1, &rep.step, &what);
    snprintf(rep.what, sizeof(rep.what), "%s", what.msg);
fail:
    rep.err = errno;
    if (write(errfd, &rep, sizeof(rep)) < 0) {
        /* nothing more to do: the exit status says 127 */
    }
    _exit(127);
}

/* A child's report as the detail: which of the service's steps failed. */
static void report_detail(struct check *c, const struct probe_report *rep)
{
    const char *e = strerror(rep->err);

    switch (rep->step) {
    case LAUNCH_STEP_CONTAIN:
        snprintf(c->detail, sizeof(c->detail), "exec %s: containment: %.*s: %s", c->target,
                 (int)sizeof(rep->what), rep->what, e);
        break;
    case LAUNCH_STEP_CWD:
        snprintf(c->detail, sizeof(c->detail), "exec %s: unable to enter the service's cwd: %s",
                 c->target, e);
        break;
    case LAUNCH_STEP_SECCOMP:
        snprintf(c->detail, sizeof(c->detail), "exec %s: seccomp: unable to install the filter: %s",
                 c->target, e);
        break;
    case LAUNCH_STEP_EXEC:
        snprintf(c->detail, sizeof(c->detail), "exec %s: unable to run it: %s", c->target, e);
        break;
    default:
        snprintf(c->detail, sizeof(c->detail),
                 "exec %s: unable to take the service's identity, limits or capabilities: %s",
                 c->target, e);
        break;
    }
}

static void exec_reaped(void *ctx, pid_t pid, int wstatus)
{
    struct check *c = ctx;
    struct probe_report rep;

    c->pid = 0;
    /* Whatever the probe left in its group (a backgrounded helper) goes
     * with it. Nothing can have forked since waitpid returned, and the
     * kernel keeps a pid unused while it still names a group. */
    if (kill(-pid, SIGKILL) < 0 && errno != ESRCH)
        log_warn("check: unable to kill the rest of probe group %d: %s", (int)pid,
                 strerror(errno));
    if (c->finished) {
        check_free(c);
        return;
    }
    if (read(c->fd, &rep, sizeof(rep)) == (ssize_t)sizeof(rep)) {
        report_detail(c, &rep);
        report(c, false);
    } else if (WIFEXITED(wstatus)) {
        snprintf(c->detail, sizeof(c->detail), "exec %s: exited with status %d", c->target,
                 WEXITSTATUS(wstatus));
        report(c, WEXITSTATUS(wstatus) == 0);
    } else if (WIFSIGNALED(wstatus)) {
        snprintf(c->detail, sizeof(c->detail), "exec %s: killed by signal %d", c->target,
                 WTERMSIG(wstatus));
        report(c, false);
    } else {
        snprintf(c->detail, sizeof(c->detail), "exec %s: ended with status 0x%x", c->target,
                 (unsigned)wstatus);
        report(c, false);
    }
}

static int probe_exec_start(struct check *c, char *const *argv, const struct check_exec *how,
                            struct err *err)
{
    int p[2];
    pid_t pid;
    bool placed;
    struct err why;

    if (!argv || !argv[0] || !argv[0][0])
        return err_set(err, "exec probe without argv");
    /* hearth never runs a probe as itself. */
    if (!how || !how->plan)
        return err_set(err, "exec probe without the service's plan to run it with");
    snprintf(c->target, sizeof(c->target), "%s", argv[0]);
    /* The service's main process is gone (or going): the probe fails
     * with that, from the loop, rather than run anywhere else. */
    if (contain_join_open(&how->plan->contain, how->pid, &why) < 0) {
        snprintf(c->detail, sizeof(c->detail), "exec %s: %s", c->target, why.msg);
        report_soon(c, false);
        return 0;
    }
    /* The read end is only read once the child has exited: non-blocking
     * just so a stray writer can never stall the loop. */
    if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0) {
        err_unable(err, errno, "create pipe for %s", c->target);
        contain_join_close(&how->plan->contain);
        return -1;
    }
    pid = cgroup_fork_into(how->leaf, 0, &placed);
    if (pid == 0) {
        /* The probe's own copy of its check, held until it exits: where
         * it joined a pid namespace it waits for the command and exits
         * without an exec, and a memory checker then judges its heap. */
        probe_of_child = c;
        close(p[0]);
        exec_child(how, argv, p[1], placed);
    }
    contain_join_close(&how->plan->contain);
    if (pid < 0) {
        err_unable(err, errno, "fork %s", c->target);
        close(p[0]);
        close(p[1]);
        return -1;
    }
    close(p[1]);
    c->fd = p[0];
    /* Also set from here so a kill of the group right after check_start
     * finds it. EACCES: the child has exec'd, so it already did it. */
    if (setpgid(pid, pid) < 0 && errno != EACCES && errno != ESRCH)
        log_warn("check: unable to set process group of %s: %s", c->target, strerror(errno));
    c->pid = pid;
    if (reaper_watch(pid, exec_reaped, c) < 0) {
        err_unable(err, errno, "watch %s (pid %d)", c->target, (int)pid);
        /* The reaper still reaps it, as an orphan. */
        kill_group(c);
        c->pid = 0;
        return -1;
    }
    return 0;
}

struct check *check_start(struct ev_loop *loop, const struct check_spec *spec,
                          const struct check_exec *how, check_done_fn done, void *ctx, struct err *err)
{
    struct sockaddr_storage ss;
    struct sockaddr_un su;
    socklen_t len;
    struct err why;
    struct check *c;
    int r = -1;

    if (!loop || !spec || !done) {
        err_set(err, "check_start: missing loop, spec or callback");
        return NULL;
    }
    if (spec->timeout_ms < 0) {
        err_set(err, "bad timeout_ms %lld", (long long)spec->timeout_ms);
        return NULL;
    }
    if (spec->kind != CHECK_EXEC && !memchr(spec->target, 0, sizeof(spec->target))) {
        err_set(err, "target not terminated");
        return NULL;
    }
    c = calloc(1, sizeof(*c));
    if (!c) {
        err_unable(err, errno, "start check");
        return NULL;
    }
    c->loop = loop;
    c->kind = spec->kind;
    c->done = done;
    c->ctx = ctx;
    c->fd = -1;
    c->timeout_ms = spec->timeout_ms ? spec->timeout_ms : CHECK_DEFAULT_TIMEOUT_MS;
    ev_timer_init(&c->timer, timeout_cb, (double)c->timeout_ms / 1000., 0.);
    c->timer.data = c;
    ev_timer_init(&c->soon, soon_cb, 0., 0.);
    c->soon.data = c;
    ev_init(&c->io, connected_cb);
    c->io.data = c;
    if (spec->kind != CHECK_EXEC)
        memcpy(c->target, spec->target, sizeof(c->target));

    switch (spec->kind) {
    case CHECK_TCP:
        if (checkspec_parse_hostport(c->target, &ss, &len, &why) < 0) {
            err_set(err, "tcp: %s", why.msg);
            break;
        }
        r = connect_start(c, (struct sockaddr *)&ss, len, err);
        break;
    case CHECK_HTTP: {
        char hp[256], path[256];
        if (http_target_split(c->target, hp, sizeof(hp), path, sizeof(path), &why) < 0 ||
            checkspec_parse_hostport(hp, &ss, &len, &why) < 0) {
            err_set(err, "http: %s", why.msg);
            break;
        }
        c->req_len = http_request(c->req, sizeof(c->req), hp, path);
        if (!c->req_len) {
            err_set(err, "http: request for %s does not fit", c->target);
            break;
        }
        http_reader_init(&c->http);
        r = connect_start(c, (struct sockaddr *)&ss, len, err);
        break;
    }
    case CHECK_UNIX:
        if (checkspec_parse_unix(c->target, &su, &len, &why) < 0) {
            err_set(err, "unix: %s", why.msg);
            break;
        }
        r = connect_start(c, (struct sockaddr *)&su, len, err);
        break;
    case CHECK_FILE:
        if (!c->target[0]) {
            err_set(err, "file: empty path");
            break;
        }
        report_soon(c, false);
        r = 0;
        break;
    case CHECK_EXEC:
        r = probe_exec_start(c, spec->argv, how, err);
        break;
    default:
        err_set(err, "unknown check kind %d", (int)spec->kind);
        break;
    }
    if (r < 0) {
        stop_watchers(c);
        check_free(c);
        return NULL;
    }
    ev_timer_start(loop, &c->timer);
    return c;
}

void check_cancel(struct check *c)
{
    if (!c)
        return;
    stop_watchers(c);
    c->finished = true;
    /* A running probe is killed; its reaper callback frees c. */
    if (c->kind == CHECK_EXEC && c->pid) {
        kill_group(c);
        return;
    }
    check_free(c);
}
