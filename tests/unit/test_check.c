/* Probes for readiness and health: each kind on loopback and temp files,
 * timeouts, cancel, and the spec parsed from a service's JSON. Each test
 * runs its own loop; an ev_timer drives the reaper for exec probes. */
#include "unit.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/mount.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sched.h>
#include <unistd.h>

#include <cJSON.h>
#include <ev.h>

#include "check.h"
#include "err.h"
#include "launch.h"
#include "reaper.h"
#include "timebase.h"

struct result {
    struct ev_loop *loop;
    int calls;
    bool ok;
    char detail[512];
};

static void on_done(void *ctx, bool ok, const char *detail)
{
    struct result *r = ctx;
    r->calls++;
    r->ok = ok;
    snprintf(r->detail, sizeof(r->detail), "%s", detail ? detail : "(null)");
    ev_break(r->loop, EVBREAK_ALL);
}

static void reap_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    reaper_reap();
}

static void stop_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    ev_break(loop, EVBREAK_ALL);
}

/* Runs loop (reaping every 10 ms) until done breaks it or max_ms passes;
 * returns the elapsed milliseconds. */
static int64_t run_for(struct ev_loop *loop, int64_t max_ms)
{
    ev_timer reap, stop;
    int64_t t0 = mono_ms();

    ev_timer_init(&reap, reap_cb, 0.01, 0.01);
    ev_timer_init(&stop, stop_cb, (double)max_ms / 1000., 0.);
    ev_timer_start(loop, &reap);
    ev_timer_start(loop, &stop);
    ev_now_update(loop);
    ev_run(loop, 0);
    ev_timer_stop(loop, &reap);
    ev_timer_stop(loop, &stop);
    return mono_ms() - t0;
}

static struct ev_loop *new_loop(void)
{
    return ev_loop_new(EVBACKEND_EPOLL | EVFLAG_NOSIGMASK);
}

extern char **environ;

/* An exec probe runs as a service's plan says: here one that keeps no
 * capability, with this process's environment, standing in for the
 * service's main process itself (its namespaces are the test's own, so
 * nothing is joined). */
static struct launch_plan plain_plan;
static struct check_exec plain_how;

static struct check_exec *plain(void)
{
    memset(&plain_plan, 0, sizeof(plain_plan));
    plain_plan.env = environ;
    plain_how = (struct check_exec){.plan = &plain_plan, .pid = getpid()};
    return &plain_how;
}

static int64_t probe_how(const struct check_spec *spec, const struct check_exec *how,
                         struct result *r);

/* One probe from start to done; checks done is called once and never from
 * inside check_start. Returns the elapsed milliseconds. */
static int64_t probe(const struct check_spec *spec, struct result *r)
{
    return probe_how(spec, plain(), r);
}

static int64_t probe_how(const struct check_spec *spec, const struct check_exec *how,
                         struct result *r)
{
    struct err err = {0};
    int64_t ms;

    memset(r, 0, sizeof(*r));
    r->loop = new_loop();
    CHECK(r->loop != NULL);
    if (!r->loop)
        return -1;
    /* From before the start: its deadline runs from then, and a loaded
     * machine can take a while to get from there into the loop. */
    int64_t t0 = mono_ms();
    struct check *c = check_start(r->loop, spec, how, on_done, r, &err);
    CHECK(c != NULL);
    if (!c) {
        fprintf(stderr, "  check_start: %s\n", err.msg);
        ev_loop_destroy(r->loop);
        return -1;
    }
    CHECK_EQ_INT(r->calls, 0);
    run_for(r->loop, 10000);
    ms = mono_ms() - t0;
    CHECK_EQ_INT(r->calls, 1);
    /* Nothing fires a second time. */
    run_for(r->loop, 30);
    CHECK_EQ_INT(r->calls, 1);
    ev_loop_destroy(r->loop);
    return ms;
}

/* The waits below poll every 10 ms for up to 20 s: they end as soon as
 * the condition holds, and a loaded machine (ASan, other jobs on the
 * cores) may take seconds to start a shell or finish a kill. */
#define WAIT_POLLS 2000

/* Waits until pid is reaped (the reaper frees what the probe held). */
static bool reaped(pid_t pid)
{
    for (int i = 0; i < WAIT_POLLS; i++) {
        reaper_reap();
        if (kill(pid, 0) < 0 && errno == ESRCH)
            return true;
        usleep(10000);
    }
    return false;
}

/* Dead: gone, or a zombie waiting for whoever inherited it. */
static bool dead(pid_t pid)
{
    char path[64], buf[256];
    for (int i = 0; i < WAIT_POLLS; i++) {
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        FILE *f = fopen(path, "re");
        if (!f)
            return true;
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = 0;
        char *p = strrchr(buf, ')');
        if (p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'))
            return true;
        usleep(10000);
    }
    return false;
}

static pid_t read_pid(const char *path)
{
    for (int i = 0; i < WAIT_POLLS; i++) {
        FILE *f = fopen(path, "re");
        int pid = 0;
        if (f) {
            int n = fscanf(f, "%d", &pid);
            fclose(f);
            if (n == 1 && pid > 0)
                return (pid_t)pid;
        }
        usleep(10000);
    }
    return -1;
}

static char tmpdir[64];

static const char *tmp(void)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/hearth-check-XXXXXX");
    if (!mkdtemp(tmpdir))
        tmpdir[0] = 0;
    return tmpdir;
}

static void rm_tmp(void)
{
    char cmd[128];
    if (tmpdir[0] && strncmp(tmpdir, "/tmp/hearth-check-", 18) == 0) {
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
        if (system(cmd) != 0)
            fprintf(stderr, "  unable to remove %s\n", tmpdir);
    }
    tmpdir[0] = 0;
}

static int tcp_listener(int backlog, int *port)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sin);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return -1;
    if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
        (backlog >= 0 && listen(fd, backlog) < 0) ||
        getsockname(fd, (struct sockaddr *)&sin, &len) < 0) {
        close(fd);
        return -1;
    }
    *port = ntohs(sin.sin_port);
    return fd;
}

static void tcp_spec(struct check_spec *s, const char *host, int port, int64_t timeout_ms)
{
    memset(s, 0, sizeof(*s));
    s->kind = CHECK_TCP;
    snprintf(s->target, sizeof(s->target), "%s:%d", host, port);
    s->timeout_ms = timeout_ms;
}

static void exec_spec(struct check_spec *s, char **argv, int64_t timeout_ms)
{
    memset(s, 0, sizeof(*s));
    s->kind = CHECK_EXEC;
    s->argv = argv;
    s->timeout_ms = timeout_ms;
}

/* ---- tcp ---- */

TEST(check_tcp_connects)
{
    struct check_spec s;
    struct result r;
    int port, fd = tcp_listener(16, &port);

    CHECK(fd >= 0);
    tcp_spec(&s, "127.0.0.1", port, 2000);
    probe(&s, &r);
    CHECK(r.ok);
    CHECK_CONTAINS(r.detail, "connected");
    tcp_spec(&s, "localhost", port, 2000);
    probe(&s, &r);
    CHECK(r.ok);
    close(fd);
}

TEST(check_tcp_ipv6)
{
    struct sockaddr_in6 sin6 = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    socklen_t len = sizeof(sin6);
    struct check_spec s;
    struct result r;
    int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);

    /* Without IPv6 on lo there is nothing to test. */
    if (fd < 0 || bind(fd, (struct sockaddr *)&sin6, sizeof(sin6)) < 0 || listen(fd, 4) < 0 ||
        getsockname(fd, (struct sockaddr *)&sin6, &len) < 0) {
        fprintf(stderr, "  (no IPv6 loopback, skipped)\n");
        if (fd >= 0)
            close(fd);
        return;
    }
    tcp_spec(&s, "[::1]", ntohs(sin6.sin6_port), 2000);
    probe(&s, &r);
    CHECK(r.ok);
    close(fd);
}

TEST(check_tcp_refused_fast)
{
    struct check_spec s;
    struct result r;
    /* Bound but not listening: the port stays ours and refuses. */
    int port, fd = tcp_listener(-1, &port);

    CHECK(fd >= 0);
    tcp_spec(&s, "127.0.0.1", port, 5000);
    int64_t ms = probe(&s, &r);
    CHECK(!r.ok);
    CHECK_CONTAINS(r.detail, "refused");
    CHECK_CONTAINS(r.detail, s.target);
    /* At the refusal, not the 5 s timeout (with room for a slow fork). */
    CHECK(ms < 4000);
    close(fd);
}

/* Fills a backlog-0 listener's accept queue with connections nobody
 * accepts; Linux then drops further SYNs, so the next connect hangs. */
static int fill_backlog(int port, int *fds, int max)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int n = 0;

    while (n < max) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
            break;
        fds[n++] = fd;
        if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0)
            continue;
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        if (errno != EINPROGRESS || poll(&p, 1, 200) != 1)
            return n; /* this one hangs: the queue is full */
    }
    return -1;
}

TEST(check_tcp_timeout)
{
    struct check_spec s;
    struct result r;
    int fds[32], port, lfd = tcp_listener(0, &port);
    int n = lfd >= 0 ? fill_backlog(port, fds, 32) : -1;

    CHECK(n > 0);
    if (n > 0) {
        tcp_spec(&s, "127.0.0.1", port, 150);
        int64_t ms = probe(&s, &r);
        CHECK(!r.ok);
        CHECK_STR(r.detail, "timed out after 150 ms");
        CHECK(ms >= 140 && ms < 2000);
    }
    for (int i = 0; i < (n > 0 ? n : 0); i++)
        close(fds[i]);
    if (lfd >= 0)
        close(lfd);
}

/* ---- unix ---- */

TEST(check_unix_connects_and_missing)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    struct check_spec s = {.kind = CHECK_UNIX, .timeout_ms = 2000};
    struct result r;
    const char *dir = tmp();
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    CHECK(dir[0] != 0);
    snprintf(sun.sun_path, sizeof(sun.sun_path), "%s/ready.sock", dir);
    CHECK(fd >= 0);
    CHECK_EQ_INT(bind(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
    CHECK_EQ_INT(listen(fd, 4), 0);
    snprintf(s.target, sizeof(s.target), "%s", sun.sun_path);
    probe(&s, &r);
    CHECK(r.ok);

    snprintf(s.target, sizeof(s.target), "%s/missing.sock", dir);
    probe(&s, &r);
    CHECK(!r.ok);
    CHECK_CONTAINS(r.detail, "No such file");
    CHECK_CONTAINS(r.detail, "missing.sock");

    /* A socket file nobody listens on any more refuses. */
    close(fd);
    snprintf(s.target, sizeof(s.target), "%s", sun.sun_path);
    probe(&s, &r);
    CHECK(!r.ok);
    CHECK_CONTAINS(r.detail, "refused");
    rm_tmp();
}

/* ---- file ---- */

TEST(check_file_present_absent)
{
    struct check_spec s = {.kind = CHECK_FILE};
    struct result r;
    const char *dir = tmp();

    snprintf(s.target, sizeof(s.target), "%s/ready", dir);
    probe(&s, &r);
    CHECK(!r.ok);
    CHECK_CONTAINS(r.detail, "No such file");
    int fd = open(s.target, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    CHECK(fd >= 0);
    if (fd >= 0)
        close(fd);
    probe(&s, &r);
    CHECK(r.ok);
    rm_tmp();
}

/* ---- exec ---- */

TEST(check_exec_exit_codes)
{
    char *t[] = {"/bin/sh", "-c", "exit 0", NULL};
    char *f[] = {"/bin/sh", "-c", "exit 3", NULL};
    char *k[] = {"/bin/sh", "-c", "kill -9 $$", NULL};
    char *path[] = {"true", NULL};
    char *missing[] = {"/nonexistent/probe", NULL};
    struct check_spec s;
    struct result r;

    exec_spec(&s, t, 5000);
    probe(&s, &r);
    CHECK(r.ok);
    exec_spec(&s, path, 5000);
    probe(&s, &r);
    CHECK(r.ok);
    exec_spec(&s, f, 5000);
    probe(&s, &r);
    CHECK(!r.ok);
    CHECK_CONTAINS(r.detail, "exited with status 3");
    exec_spec(&s, k, 5000);
    probe(&s, &r);
    CHECK(!r.ok);
    CHECK_CONTAINS(r.detail, "killed by signal 9");
    exec_spec(&s, missing, 5000);
    probe(&s, &r);
    CHECK(!r.ok);
    CHECK_STR(r.detail, "exec /nonexistent/probe: unable to run it: No such file or directory");
}

TEST(check_exec_timeout_kills_group)
{
    char script[512];
    char *argv[] = {"/bin/sh", "-c", script, NULL};
    struct check_spec s;
    struct result r;
    const char *dir = tmp();

    /* The probe and a background child of it; both must die. The shell
     * has a second to write both pids before it is killed, and the kill
     * must come long before the child's 30 s are up. */
    snprintf(script, sizeof(script),
             "sleep 30 & echo $! > %s/bg; echo $$ > %s/pid.tmp; mv %s/pid.tmp %s/pid; wait", dir,
             dir, dir, dir);
    exec_spec(&s, argv, 1000);
    int64_t ms = probe(&s, &r);
    CHECK(!r.ok);
    CHECK_STR(r.detail, "timed out after 1000 ms");
    CHECK(ms >= 990 && ms < 10000);
    char p[128];
    snprintf(p, sizeof(p), "%s/pid", dir);
    pid_t pid = read_pid(p);
    snprintf(p, sizeof(p), "%s/bg", dir);
    pid_t bg = read_pid(p);
    CHECK(pid > 0 && bg > 0);
    if (pid > 0)
        CHECK(reaped(pid));
    if (bg > 0)
        CHECK(dead(bg));
    rm_tmp();
}

TEST(check_exec_clean_signal_state)
{
    /* hearth blocks signals for its signalfd and ignores SIGPIPE. */
    char *argv[] = {"/bin/sh", "-c",
                    "grep -q '^SigBlk:[[:space:]]*0*$' /proc/self/status && "
                    "grep -q '^SigIgn:[[:space:]]*0*$' /proc/self/status",
                    NULL};
    struct check_spec s;
    struct result r;
    sigset_t set, old;
    struct sigaction ign = {.sa_handler = SIG_IGN}, oldact;

    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGTERM);
    sigprocmask(SIG_BLOCK, &set, &old);
    sigaction(SIGPIPE, &ign, &oldact);
    exec_spec(&s, argv, 5000);
    probe(&s, &r);
    CHECK(r.ok);
    if (!r.ok)
        fprintf(stderr, "  %s\n", r.detail);
    sigaction(SIGPIPE, &oldact, NULL);
    sigprocmask(SIG_SETMASK, &old, NULL);
}

TEST(check_exec_stdio_null)
{
    /* stdin reads EOF at once; stdout is /dev/null. */
    char *argv[] = {"/bin/sh", "-c",
                    "read x; test $? -ne 0 && for fd in 0 1 2; do "
                    "test \"$(readlink /proc/$$/fd/$fd)\" = /dev/null || exit 1; done",
                    NULL};
    struct check_spec s;
    struct result r;

    exec_spec(&s, argv, 5000);
    probe(&s, &r);
    CHECK(r.ok);
}

/* ---- exec: as and where the service runs ---- */

TEST(check_exec_needs_the_services_plan)
{
    struct ev_loop *loop = new_loop();
    struct result r = {.loop = loop};
    char *argv[] = {"true", NULL};
    struct check_spec s;
    struct check_exec how = {0};
    struct err err = {0};

    /* Never as hearth itself: without a plan there is no probe. */
    exec_spec(&s, argv, 1000);
    CHECK(check_start(loop, &s, NULL, on_done, &r, &err) == NULL);
    CHECK_CONTAINS(err.msg, "without the service's plan");
    err.msg[0] = 0;
    CHECK(check_start(loop, &s, &how, on_done, &r, &err) == NULL);
    CHECK_CONTAINS(err.msg, "without the service's plan");
    run_for(loop, 30);
    CHECK_EQ_INT(r.calls, 0);
    ev_loop_destroy(loop);
}

TEST(check_exec_fails_when_the_main_process_is_gone)
{
    char mark[256];
    char *argv[] = {"/bin/sh", "-c", mark, NULL};
    struct check_spec s;
    struct result r;
    const char *dir = tmp();
    struct check_exec *how = plain();

    /* A child reaped at once: its pid names nothing (or not a service). */
    pid_t gone = fork();
    if (gone == 0)
        _exit(0);
    CHECK(gone > 0);
    waitpid(gone, NULL, 0);
    how->pid = gone;
    snprintf(mark, sizeof(mark), ": > %s/ran", dir);
    exec_spec(&s, argv, 2000);
    probe_how(&s, how, &r);
    CHECK(!r.ok);
    CHECK_CONTAINS(r.detail, "exec /bin/sh: unable to open /proc/");
    CHECK_CONTAINS(r.detail, "is gone");
    /* Not run anywhere else instead. */
    snprintf(mark, sizeof(mark), "%s/ran", dir);
    CHECK(access(mark, F_OK) < 0);
    how->pid = 0;
    probe_how(&s, how, &r);
    CHECK(!r.ok);
    CHECK_CONTAINS(r.detail, "no main process");
    rm_tmp();
}

TEST(check_exec_takes_the_plans_identity_and_environment)
{
    char *argv[] = {"/bin/sh", "-c",
                    "test \"$(id -u):$(id -g)\" = 65534:65534 && test \"$PROBE_VAR\" = from-plan && "
                    "grep -q '^NoNewPrivs:[[:space:]]*1$' /proc/self/status && "
                    "grep -q '^CapEff:[[:space:]]*0*$' /proc/self/status && "
                    "grep -q '^CapBnd:[[:space:]]*0*$' /proc/self/status && test \"$PWD\" = /tmp",
                    NULL};
    char *env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "PROBE_VAR=from-plan", NULL};
    struct check_spec s;
    struct result r;

    if (geteuid() != 0) {
        fprintf(stderr, "  (not root: identity not testable, skipped)\n");
        return;
    }
    struct check_exec *how = plain();
    plain_plan.env = env;
    plain_plan.set_ids = true;
    plain_plan.uid = plain_plan.gid = 65534;
    plain_plan.groups[0] = 65534;
    plain_plan.n_groups = 1;
    plain_plan.no_new_privs = true;
    how->cwd = "/tmp";
    exec_spec(&s, argv, 5000);
    probe_how(&s, how, &r);
    CHECK(r.ok);
    if (!r.ok)
        fprintf(stderr, "  %s\n", r.detail);
    /* A step of the service's that fails is named. */
    how->cwd = "/nonexistent-cwd";
    probe_how(&s, how, &r);
    CHECK(!r.ok);
    CHECK_CONTAINS(r.detail, "unable to enter the service's cwd");
}

/* A stand-in service: a process in a mount and PID namespace of its own
 * (PID 1 there), with a file only its mount namespace shows. The probe
 * finds that file and runs inside that PID namespace (two NSpid levels). */
TEST(check_exec_joins_the_services_namespaces)
{
    char marker[128], script[512];
    char *argv[] = {"/bin/sh", "-c", script, NULL};
    struct check_spec s;
    struct result r;
    int ready[2];

    if (geteuid() != 0) {
        fprintf(stderr, "  (not root: namespaces not testable, skipped)\n");
        return;
    }
    const char *dir = tmp();
    CHECK(dir[0] && pipe(ready) == 0);
    snprintf(marker, sizeof(marker), "%s/only-in-the-service", dir);
    pid_t outer = fork();
    if (outer == 0) {
        /* The PID namespace takes in the next child, which is the service. */
        if (unshare(CLONE_NEWNS | CLONE_NEWPID) < 0 ||
            mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
            _exit(1);
        pid_t svc = fork();
        if (svc == 0) {
            if (mount("probe-test", dir, "tmpfs", 0, "size=64k") < 0)
                _exit(1);
            int fd = open(marker, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
            if (fd < 0)
                _exit(1);
            close(fd);
            if (write(ready[1], "x", 1) != 1)
                _exit(1);
            pause();
            _exit(0);
        }
        if (svc < 0)
            _exit(1);
        waitpid(svc, NULL, 0);
        _exit(0);
    }
    CHECK(outer > 0);
    close(ready[1]);
    char c;
    CHECK(read(ready[0], &c, 1) == 1);
    close(ready[0]);
    /* The service's pid as this process sees it: the outer child's one child. */
    char kids[64] = "", path[96];
    snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)outer, (int)outer);
    FILE *f = fopen(path, "re");
    if (f) {
        if (!fgets(kids, sizeof(kids), f))
            kids[0] = 0;
        fclose(f);
    }
    pid_t svc = (pid_t)atoi(kids);
    CHECK(svc > 0);
    CHECK(access(marker, F_OK) < 0); /* not in this mount namespace */

    struct check_exec *how = plain();
    how->pid = svc;
    snprintf(script, sizeof(script),
             "test -e %s && set -- $(grep '^NSpid:' /proc/self/status) && test $# -eq 3", marker);
    exec_spec(&s, argv, 5000);
    probe_how(&s, how, &r);
    CHECK(r.ok);
    if (!r.ok)
        fprintf(stderr, "  %s\n", r.detail);
    /* The exit status comes through the extra fork. */
    snprintf(script, sizeof(script), "test -e %s && exit 7", marker);
    probe_how(&s, how, &r);
    CHECK(!r.ok);
    CHECK_CONTAINS(r.detail, "exited with status 7");
    snprintf(script, sizeof(script), "kill -9 $$");
    probe_how(&s, how, &r);
    CHECK(!r.ok);
    CHECK_CONTAINS(r.detail, "killed by signal 9");

    kill(svc, SIGKILL);
    waitpid(outer, NULL, 0);
    rm_tmp();
}

/* ---- cancel ---- */

TEST(check_cancel_no_callback)
{
    char script[256];
    char *argv[] = {"/bin/sh", "-c", script, NULL};
    struct check_spec s;
    struct result r = {0};
    struct err err;
    const char *dir = tmp();
    int fds[32], port, lfd = tcp_listener(0, &port);
    int n = lfd >= 0 ? fill_backlog(port, fds, 32) : -1;

    r.loop = new_loop();
    check_cancel(NULL);

    /* A connect that would hang. */
    tcp_spec(&s, "127.0.0.1", port, 100);
    struct check *c1 = check_start(r.loop, &s, NULL, on_done, &r, &err);
    CHECK(c1 != NULL);
    /* A file result that is already due. */
    struct check_spec f = {.kind = CHECK_FILE, .target = "/"};
    struct check *c2 = check_start(r.loop, &f, NULL, on_done, &r, &err);
    CHECK(c2 != NULL);
    /* A running process. */
    snprintf(script, sizeof(script), "echo $$ > %s/pid.tmp; mv %s/pid.tmp %s/pid; exec sleep 30",
             dir, dir, dir);
    exec_spec(&s, argv, 100);
    struct check *c3 = check_start(r.loop, &s, plain(), on_done, &r, &err);
    CHECK(c3 != NULL);
    char p[128];
    snprintf(p, sizeof(p), "%s/pid", dir);
    pid_t pid = read_pid(p);
    CHECK(pid > 0);

    check_cancel(c1);
    check_cancel(c2);
    check_cancel(c3);
    run_for(r.loop, 300);
    CHECK_EQ_INT(r.calls, 0);
    if (pid > 0)
        CHECK(reaped(pid));
    ev_loop_destroy(r.loop);
    for (int i = 0; i < (n > 0 ? n : 0); i++)
        close(fds[i]);
    if (lfd >= 0)
        close(lfd);
    rm_tmp();
}

/* done may start the next attempt right away (a caller's retry loop). */
static int retries;
static struct check_spec retry_spec;
static void retry_done(void *ctx, bool ok, const char *detail)
{
    struct result *r = ctx;
    struct err err;

    r->calls++;
    if (++retries < 3 && check_start(r->loop, &retry_spec, NULL, retry_done, r, &err))
        return;
    ev_break(r->loop, EVBREAK_ALL);
}

TEST(check_restart_from_done)
{
    struct result r = {0};
    struct err err;

    r.loop = new_loop();
    retry_spec = (struct check_spec){.kind = CHECK_FILE, .target = "/nonexistent"};
    retries = 0;
    CHECK(check_start(r.loop, &retry_spec, NULL, retry_done, &r, &err) != NULL);
    run_for(r.loop, 2000);
    CHECK_EQ_INT(r.calls, 3);
    ev_loop_destroy(r.loop);
}

/* ---- start errors ---- */

TEST(check_start_refuses_bad_specs)
{
    struct ev_loop *loop = new_loop();
    struct result r = {.loop = loop};
    struct check_spec s;
    struct err err;
    char *noargv[] = {NULL};

    tcp_spec(&s, "db.internal", 80, 0);
    err.msg[0] = 0;
    CHECK(check_start(loop, &s, NULL, on_done, &r, &err) == NULL);
    CHECK_CONTAINS(err.msg, "not resolved");
    memset(&s, 0, sizeof(s));
    s.kind = CHECK_TCP;
    snprintf(s.target, sizeof(s.target), "127.0.0.1");
    CHECK(check_start(loop, &s, NULL, on_done, &r, &err) == NULL);
    CHECK_CONTAINS(err.msg, "HOST:PORT");
    tcp_spec(&s, "127.0.0.1", 70000, 0);
    CHECK(check_start(loop, &s, NULL, on_done, &r, &err) == NULL);
    memset(&s, 0, sizeof(s));
    s.kind = CHECK_UNIX;
    memset(s.target, 'a', 200);
    s.target[0] = '/';
    CHECK(check_start(loop, &s, NULL, on_done, &r, &err) == NULL);
    CHECK_CONTAINS(err.msg, "socket path");
    exec_spec(&s, noargv, 0);
    CHECK(check_start(loop, &s, NULL, on_done, &r, &err) == NULL);
    exec_spec(&s, NULL, 0);
    CHECK(check_start(loop, &s, NULL, on_done, &r, &err) == NULL);
    tcp_spec(&s, "127.0.0.1", 80, -1);
    CHECK(check_start(loop, &s, NULL, on_done, &r, &err) == NULL);
    run_for(loop, 30);
    CHECK_EQ_INT(r.calls, 0);
    ev_loop_destroy(loop);
}

/* ---- spec from JSON ---- */

static int spec_of(const char *json, struct check_spec *s, struct err *err)
{
    cJSON *j = cJSON_Parse(json);
    int rc;

    CHECK(j != NULL);
    if (err)
        err->msg[0] = 0;
    rc = checkspec_from_json(j, s, err);
    cJSON_Delete(j);
    return rc;
}

TEST(check_spec_json_kinds)
{
    struct check_spec s;
    struct err err;

    CHECK_EQ_INT(spec_of("{\"tcp\":\"127.0.0.1:9119\",\"timeout_ms\":60000}", &s, &err), 0);
    CHECK_EQ_INT(s.kind, CHECK_TCP);
    CHECK_STR(s.target, "127.0.0.1:9119");
    CHECK_EQ_INT(s.timeout_ms, 60000);
    CHECK_EQ_INT(spec_of("{\"tcp\":\"localhost:80\"}", &s, &err), 0);
    CHECK_EQ_INT(s.timeout_ms, 0);
    CHECK_EQ_INT(spec_of("{\"tcp\":\"[::1]:8080\"}", &s, &err), 0);
    CHECK_STR(s.target, "[::1]:8080");
    CHECK_EQ_INT(spec_of("{\"tcp\":\"127.0.0.1:9119\",\"interval_ms\":10000,\"failures\":3}",
                         &s, &err), 0);
    CHECK_EQ_INT(s.interval_ms, 10000);
    CHECK_EQ_INT(s.failures, 3);

    CHECK_EQ_INT(spec_of("{\"unix\":\"/run/app.sock\"}", &s, &err), 0);
    CHECK_EQ_INT(s.kind, CHECK_UNIX);
    CHECK_STR(s.target, "/run/app.sock");
    CHECK_EQ_INT(spec_of("{\"file\":\"/run/app.ready\",\"timeout_ms\":100}", &s, &err), 0);
    CHECK_EQ_INT(s.kind, CHECK_FILE);
    CHECK_STR(s.target, "/run/app.ready");
    CHECK_EQ_INT(s.timeout_ms, 100);
    CHECK_EQ_INT(spec_of("{\"notify_fd\":3}", &s, &err), 1);
    CHECK_EQ_INT(s.notify_fd, 3);
    CHECK_EQ_INT(spec_of("{\"notify\":true,\"timeout_ms\":500}", &s, &err), 1);
    CHECK(s.notify && s.notify_fd == 0 && s.watchdog_ms == 0);
    CHECK_EQ_INT(s.timeout_ms, 500);
    CHECK_EQ_INT(spec_of("{\"notify\":false}", &s, &err), -1);
    CHECK_STR(err.msg, "notify: expected true");
    CHECK_EQ_INT(spec_of("{\"watchdog_ms\":30000,\"failures\":1}", &s, &err), 1);
    CHECK(!s.notify && s.watchdog_ms == 30000 && s.failures == 1);
    CHECK_EQ_INT(spec_of("{\"watchdog_ms\":30000,\"tcp\":\"127.0.0.1:1\"}", &s, &err), -1);
    CHECK_CONTAINS(err.msg, "only one of");
}

TEST(check_spec_json_exec_runs)
{
    cJSON *j = cJSON_Parse("{\"exec\":[\"/bin/sh\",\"-c\",\"test \\\"$0\\\" = x\",\"x\"],"
                           "\"timeout_ms\":3000}");
    struct check_spec s;
    struct result r;
    struct err err;

    CHECK_EQ_INT(checkspec_from_json(j, &s, &err), 0);
    CHECK_EQ_INT(s.kind, CHECK_EXEC);
    CHECK(s.argv == s.argv_store);
    CHECK_STR(s.argv[0], "/bin/sh");
    CHECK_STR(s.argv[3], "x");
    CHECK(s.argv[4] == NULL);
    CHECK_EQ_INT(s.timeout_ms, 3000);
    probe(&s, &r);
    CHECK(r.ok);
    cJSON_Delete(j);
}

TEST(check_spec_json_errors)
{
    struct check_spec s;
    struct err err;

    CHECK_EQ_INT(spec_of("{\"tcp\":\"db.internal:5432\"}", &s, &err), -1);
    CHECK_CONTAINS(err.msg, "tcp: bad address \"db.internal:5432\"");
    CHECK_EQ_INT(spec_of("{\"tcp\":\"127.0.0.1\"}", &s, &err), -1);
    CHECK_CONTAINS(err.msg, "HOST:PORT");
    CHECK_EQ_INT(spec_of("{\"tcp\":\"127.0.0.1:0\"}", &s, &err), -1);
    CHECK_EQ_INT(spec_of("{\"tcp\":\"::1:80\"}", &s, &err), -1);
    CHECK_EQ_INT(spec_of("{\"tcp\":\"[::1:80\"}", &s, &err), -1);
    CHECK_EQ_INT(spec_of("{\"tcp\":\"1.2.3.4:80x\"}", &s, &err), -1);
    CHECK_EQ_INT(spec_of("{\"timeout_ms\":5}", &s, &err), -1);
    CHECK_CONTAINS(err.msg, "needs one of");
    CHECK_EQ_INT(spec_of("{\"tcp\":\"127.0.0.1:1\",\"file\":\"/x\"}", &s, &err), -1);
    CHECK_CONTAINS(err.msg, "only one of");
    CHECK_EQ_INT(spec_of("{\"exec\":[]}", &s, &err), -1);
    CHECK_EQ_INT(spec_of("{\"exec\":[\"\"]}", &s, &err), -1);
    CHECK_EQ_INT(spec_of("{\"file\":\"/x\",\"timeout_ms\":-1}", &s, &err), -1);
    CHECK_CONTAINS(err.msg, "timeout_ms");
    CHECK_EQ_INT(spec_of("[1]", &s, &err), -1);
}

TEST(check_exec_leftovers_killed_on_exit)
{
    char script[256];
    char *argv[] = {"/bin/sh", "-c", script, NULL};
    struct check_spec s;
    struct result r;
    const char *dir = tmp();

    /* The probe succeeds but leaves a helper behind in its group. */
    snprintf(script, sizeof(script), "sleep 30 & echo $! > %s/bg.tmp; mv %s/bg.tmp %s/bg", dir,
             dir, dir);
    exec_spec(&s, argv, 5000);
    probe(&s, &r);
    CHECK(r.ok);
    char p[128];
    snprintf(p, sizeof(p), "%s/bg", dir);
    pid_t bg = read_pid(p);
    CHECK(bg > 0);
    if (bg > 0)
        CHECK(dead(bg));
    rm_tmp();
}

static int count_fds(void)
{
    char path[64];
    int n = 0;

    for (int fd = 0; fd < 1024; fd++) {
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        n += access(path, F_OK) == 0;
    }
    return n;
}

TEST(check_no_fd_leaks)
{
    char *ok[] = {"/bin/sh", "-c", "exit 0", NULL};
    char *slow[] = {"/bin/sh", "-c", "exec sleep 30", NULL};
    struct check_spec s;
    struct result r;
    int port, lfd = tcp_listener(16, &port);
    int before = count_fds();

    for (int i = 0; i < 3; i++) {
        tcp_spec(&s, "127.0.0.1", port, 1000);
        probe(&s, &r);
        tcp_spec(&s, "127.0.0.1", 1, 1000);
        probe(&s, &r);
        exec_spec(&s, ok, 1000);
        probe(&s, &r);
        exec_spec(&s, slow, 50);
        probe(&s, &r);
        CHECK(!r.ok);
    }
    /* Let the killed ones be reaped, which closes their pipes. */
    for (int i = 0; i < WAIT_POLLS && count_fds() > before; i++) {
        reaper_reap();
        usleep(10000);
    }
    CHECK_EQ_INT(count_fds(), before);
    close(lfd);
}
