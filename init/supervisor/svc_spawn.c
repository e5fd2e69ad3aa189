/* Starting a service's main process: its leaf, limits, environment,
 * output and notify pipes, the fork (into the leaf by clone3), what the
 * child does before exec, and the exec-status pipe that says how it went. */
#include "service_priv.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ev.h>

#include "cgroup.h"
#include "contain.h"
#include "err.h"
#include "hearth.h"
#include "launch.h"
#include "lifeline.h"
#include "log.h"
#include "mounts.h"
#include "pidreaper.h"
#include "reaper.h"
#include "redact.h"
#include "secretfile.h"
#include "svc_config.h"

extern char **environ;

/* What a child that failed before exec writes to the exec-status pipe
 * (one write below PIPE_BUF, so it arrives whole or not at all). */
struct child_report {
    int stage;      /* enum launch_step: what the child was doing */
    int err;
    char what[240]; /* LAUNCH_STEP_CONTAIN: "unable to mask /proc/kcore" */
};

/* A report that is not a failure, sent before one or before exec: the
 * outcome of each secrets[] entry (what[i], SVC_SECRET_* letters). */
#define REPORT_SECRETS 100

void svc_close_exec_pipe(struct service *s)
{
    if (s->exec_fd >= 0) {
        ev_io_stop(H.loop, &s->exec_io);
        close(s->exec_fd);
        s->exec_fd = -1;
    }
}

static bool ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), t = strlen(tail);
    return n >= t && strcmp(s + n - t, tail) == 0;
}

/* The child writes errno to the close-on-exec pipe if exec (or the setup
 * before it) fails; EOF alone means exec succeeded. */
static void exec_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    struct service *s = w->data;
    struct child_report report;
    ssize_t n;

    for (;;) {
        memset(&report, 0, sizeof(report));
        do
            n = read(s->exec_fd, &report, sizeof(report));
        while (n < 0 && errno == EINTR);
        if (n < 0 && errno == EAGAIN)
            return;
        if (n != (ssize_t)sizeof(report) || report.stage != REPORT_SECRETS)
            break;
        for (size_t i = 0; i < SVC_SECRETS_MAX; i++)
            if (report.what[i])
                s->secret_state[i] = report.what[i];
    }
    svc_close_exec_pipe(s);
    if (s->ns_offer) {
        /* Whatever the outcome: a child that built its namespace sent it
         * before exec (or before failing after that). */
        s->ns_offer = false;
        contain_snapshot_take();
    }
    if (n == (ssize_t)sizeof(report)) {
        report.what[sizeof(report.what) - 1] = 0;
        if (report.stage == LAUNCH_STEP_SETUP)
            snprintf(s->error, sizeof(s->error), "unable to set up limits, identity or capabilities: %s",
                     strerror(report.err));
        else if (report.stage == LAUNCH_STEP_CONTAIN)
            /* A step whose message already names its reason (a path
             * opened through safepath) is not given it twice. */
            snprintf(s->error, sizeof(s->error), "containment: %s%s%s", report.what,
                     ends_with(report.what, strerror(report.err)) ? "" : ": ",
                     ends_with(report.what, strerror(report.err)) ? "" : strerror(report.err));
        else if (report.stage == LAUNCH_STEP_AS_ROOT)
            snprintf(s->error, sizeof(s->error), "%s", report.what);
        else if (report.stage == LAUNCH_STEP_SECCOMP)
            snprintf(s->error, sizeof(s->error), "seccomp: unable to install the filter: %s",
                     strerror(report.err));
        else if (report.stage == LAUNCH_STEP_CWD)
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
    svc_post(s, E_EXEC_OK);
}

static void child_exited(void *ctx, pid_t pid, int wstatus)
{
    struct service *s = ctx;
    if (s->exec_fd >= 0)
        exec_cb(H.loop, &s->exec_io, 0);
    /* pid is the reaper of the service's pid namespace when it has one:
     * its main process's end is what counts (exit code or signal). */
    s->wstatus = pidreaper_status(s->reaper_fd, wstatus);
    s->reaper_fd = -1;
    s->has_exit = true;
    /* Killed by the kernel's OOM killer: SIGKILL, and the leaf's oom_kill
     * count rose during this run. The kernel counts the kill right after
     * sending it, and the news reaches hearth only after the victim has
     * died and its reaper has reported, so the count is read here rather
     * than waiting for its inotify news, which may come later. */
    svc_oom_check(s);
    s->exit_oom = WIFSIGNALED(s->wstatus) && WTERMSIG(s->wstatus) == SIGKILL &&
                  s->leaf.oom_this_run;
    s->pid = 0;
    if (svc_activity.down)
        svc_activity.down((size_t)(s - svcs)); /* its lease ends with it */
    svc_post(s, E_EXIT);
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
        const char *why = known ? NULL : redact_add_value(v);
        if (why)
            log_warn("%s", why);
    }
}

/* Runs in the child between fork and exec: only async-signal-safe calls
 * that cannot touch hearth's loop. Any failure is reported through the
 * pipe and ends the child with 127. */
/* Both ends of each pipe that was made (-1: not made), on a failed start. */
static void close_pipes(int *const pipes[], size_t n)
{
    for (size_t i = 0; i < n; i++)
        for (int end = 0; end < 2; end++)
            if (pipes[i][end] >= 0)
                close(pipes[i][end]);
}

/* The writable mounts hearth made (mounts, host_mounts) stay writable in
 * a service's read-only root. */
static int writable_mounts(struct contain_plan *p, struct err *err)
{
    struct mounts_entry m;
    for (size_t i = 0; p->ro_root && mounts_entry(i, &m) == 0; i++)
        if (m.mounted && !m.read_only && contain_add_writable(p, m.target, err) < 0)
            return -1;
    return 0;
}

const char *svc_secret_state_name(char state)
{
    switch (state) {
    case SVC_SECRET_FROM_ENV: return "from_env";
    case SVC_SECRET_PRESENT: return "present";
    case SVC_SECRET_GENERATED: return "generated";
    case SVC_SECRET_FAILED: return "failed";
    case SVC_SECRET_PENDING: return "pending";
    default: return "not_started";
    }
}

/* Before the fork: an entry whose variable the service's final
 * environment (hearth's own, env, sandbox.init's, env_files) already has
 * with a value needs nothing; the others are the child's to look at. */
static void secrets_plan(struct service *s, const struct launch_plan *plan)
{
    const struct svc_settings *st = s->cfg->settings;
    memset(s->secret_state, 0, sizeof(s->secret_state));
    for (size_t i = 0; st && i < st->n_secrets; i++) {
        size_t kl = strlen(st->secrets[i].env);
        s->secret_state[i] = SVC_SECRET_PENDING;
        for (size_t j = 0; j < plan->n_env; j++)
            if (strncmp(plan->env[j], st->secrets[i].env, kl) == 0 && plan->env[j][kl] == '=' &&
                plan->env[j][kl + 1])
                s->secret_state[i] = SVC_SECRET_FROM_ENV;
    }
}

struct secrets_ctx {
    const struct service *s;
    int report_fd;
};

/* The plan's as_root hook in a service's start child, contained and not
 * yet the service's user: each pending secret is looked for in its file
 * and made when missing (secretfile.h), with the service's filesystem
 * identity and groups, so hearth writes nothing there that the service
 * could not write itself; the file ends up owned by the service. Here
 * rather than in hearth's loop: the file is on a share that may block.
 * The outcome goes to the parent as a REPORT_SECRETS record first. */
static int secrets_in_child(const struct launch_plan *p, void *ctx, struct err *err)
{
    const struct secrets_ctx *x = ctx;
    const struct svc_settings *st = x->s->cfg->settings;
    struct child_report info;
    uid_t uid = p->set_ids ? p->uid : geteuid();
    gid_t gid = p->set_ids ? p->gid : getegid();
    bool as_service = geteuid() == 0 && (uid != 0 || gid != 0);
    int rc = 0, e = 0;

    memset(&info, 0, sizeof(info));
    info.stage = REPORT_SECRETS;
    if (as_service) {
        if (syscall(SYS_setgroups, p->n_groups, p->groups) < 0) {
            e = errno;
            err_set(err, "services[%zu].secrets: unable to take the service's groups: %s",
                    (size_t)(x->s - svcs), strerror(e));
            errno = e;
            return -1;
        }
        setfsgid(gid);
        setfsuid(uid);
    }
    for (size_t i = 0; st && i < st->n_secrets; i++) {
        const struct svc_secret *sec = &st->secrets[i];
        struct err why;
        info.what[i] = x->s->secret_state[i];
        if (x->s->secret_state[i] != SVC_SECRET_PENDING)
            continue;
        int r = secretfile_ensure(sec->file, sec->env, sec->chars, uid, gid, &why);
        if (r < 0) {
            e = errno;
            info.what[i] = SVC_SECRET_FAILED;
            err_set(err, "services[%zu].secrets[%zu] %s: %s", (size_t)(x->s - svcs), i,
                    sec->file, why.msg);
            rc = -1;
            break;
        }
        info.what[i] = r == SECRETFILE_GENERATED ? SVC_SECRET_GENERATED : SVC_SECRET_PRESENT;
    }
    if (as_service) {
        setfsuid(0);
        setfsgid(0);
    }
    if (write(x->report_fd, &info, sizeof(info)) < 0) {
        /* the parent then shows the entries as pending */
    }
    errno = e;
    return rc;
}

static void __attribute__((noreturn)) child_exec(struct service *s, int errfd,
                                                 struct launch_plan *plan, int outfd,
                                                 int errpipe, int notify_w, bool placed)
{
    const struct service_config *c = s->cfg;
    struct child_report report;

    /* First: a service outlives no hearth (lifeline.h); asked again
     * after its identity changes (launch_apply). */
    lifeline_hold();
    launch_reset_signals(plan);
    setsid();
    /* Born in its leaf by clone3; otherwise it moves itself there. */
    if (s->leaf.path[0] && !placed) {
        char path[CGROUP_PATH_MAX + 16];
        snprintf(path, sizeof(path), "%s/cgroup.procs", s->leaf.path);
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
    report.stage = LAUNCH_STEP_SETUP;
    if (notify_w >= 0) {
        /* The write end goes to the number the service expects, without
         * close-on-exec; the error pipe moves away if it sits there. */
        int nfd = s->ready.notify_fd;
        if (errfd == nfd) {
            int moved = fcntl(errfd, F_DUPFD_CLOEXEC, 3);
            if (moved < 0)
                goto fail;
            errfd = moved;
        }
        if (notify_w == nfd ? fcntl(nfd, F_SETFD, 0) < 0 : dup2(notify_w, nfd) < 0)
            goto fail;
    }
    /* Set in the child's memory only: the parent's plan (kept for
     * probes) never carries the secrets hook. */
    struct secrets_ctx sctx = {s, errfd};
    if (c->settings && c->settings->n_secrets) {
        plan->as_root = secrets_in_child;
        plan->as_root_ctx = &sctx;
    }
    struct err what = {0};
    launch_exec(plan, c->cwd, c->argv, errfd, &report.stage, &what);
    snprintf(report.what, sizeof(report.what), "%s", what.msg);
fail:
    report.err = errno;
    if (write(errfd, &report, sizeof(report)) < 0) {
        /* nothing more to do */
    }
    _exit(127);
}

/* A start's failure, kept as the service's last error (for status). */
static int start_failed(struct service *s, const struct err *e)
{
    snprintf(s->error, sizeof(s->error), "%s", e->msg);
    return -1;
}

int svc_spawn(struct service *s)
{
    int p[2];
    struct launch_plan plan;
    struct err e;
    pid_t pid;

    s->error[0] = 0;
    if (cgroup_available() && !s->leaf.path[0] &&
        cgroup_service_create(s->cfg->name, s->leaf.path, sizeof(s->leaf.path)) < 0) {
        log_warn("service %s: unable to create cgroup: %s", s->cfg->name, strerror(errno));
        s->leaf.path[0] = 0;
    }
    svc_oom_watch(s);
    s->leaf.oom_this_run = false;
    const char *leaf = svc_leaf_for_spawn(s);
    const struct service_config *sc = s->cfg;
    bool limited = sc->memory_max || sc->memory_high || sc->pids_max;
    if (limited && !s->leaf.path[0]) {
        snprintf(s->error, sizeof(s->error), "limits: services have no cgroup here to apply them to");
        return -1;
    }
    /* Every service has a pids.max (limits.pids_max, guest-wide); only
     * one the service asks for itself fails its start when it cannot be
     * applied. */
    if (limited && cgroup_set_limits(s->leaf.path, sc->memory_max, sc->memory_high, sc->pids_max,
                                     &e) < 0)
        return start_failed(s, &e);
    int64_t pids_default = H.cfg ? H.cfg->limits.pids_max : 0;
    if (!sc->pids_max && pids_default && s->leaf.path[0]) {
        struct err why;
        if (cgroup_set_limits(s->leaf.path, 0, 0, pids_default, &why) < 0)
            log_debug("service %s: the default %s", s->cfg->name, why.msg);
    }
    logring_open_file(&s->out.ring);
    svc_log_file_news(s);
    if (pipe2(p, O_CLOEXEC) < 0) {
        snprintf(s->error, sizeof(s->error), "unable to create pipe: %s", strerror(errno));
        return -1;
    }
    if (launch_prepare(s->cfg, &plan, &e) < 0) {
        close(p[0]);
        close(p[1]);
        return start_failed(s, &e);
    }
    register_file_values(s->cfg, &plan);
    secrets_plan(s, &plan);
    if (svc_notify_env(s, &plan) < 0) {
        close(p[0]);
        close(p[1]);
        launch_free(&plan);
        return -1;
    }
    if (contain_prepare(s->cfg, H.cfg, H.config_path, launch_is_root(&plan), s->leaf.path,
                        &plan.contain, &e) < 0 ||
        writable_mounts(&plan.contain, &e) < 0) {
        close(p[0]);
        close(p[1]);
        launch_free(&plan);
        return start_failed(s, &e);
    }
    if (plan.contain.isolate)
        contain_host_setup(H.mode == MODE_SUPERVISOR);
    int po[2] = {-1, -1}, pe[2] = {-1, -1}, pn[2] = {-1, -1};
    for (int i = 0; i < 2; i++)
        svc_outpipe_close(&s->out.pipe[i]);
    svc_notify_close(s);
    if (s->ready.notify_fd && pipe2(pn, O_CLOEXEC) < 0) {
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
    int pr[2] = {-1, -1};
    if (plan.contain.pidns && pidreaper_pipe(pr) < 0) {
        snprintf(s->error, sizeof(s->error), "unable to create the reaper's pipe: %s",
                 strerror(errno));
        close_pipes((int *[]){p, po, pe, pn}, 4);
        launch_free(&plan);
        return -1;
    }
    plan.reaper_fd = pr[1];
    if (contain_fork_prepare(&plan.contain, &e) < 0) {
        close_pipes((int *[]){p, po, pe, pn, pr}, 5);
        launch_free(&plan);
        return start_failed(s, &e);
    }
    bool offered = contain_snapshot_offer(&plan.contain);
    bool placed;
    pid = cgroup_fork_into(leaf, contain_clone_flags(&plan.contain), &placed);
    int fork_errno = errno;
    if (pid == 0) {
        close(p[0]);
        child_exec(s, p[1], &plan, po[1], pe[1], pn[1], placed);
    }
    contain_snapshot_forked(&plan.contain, pid > 0);
    struct err why;
    /* A failure here is the child's to report too, as its start's. */
    if (launch_after_fork(&plan, pid, &why) < 0)
        log_error("service %s: %s", s->cfg->name, why.msg);
    if (pid < 0) {
        /* The kernel refusing a user namespace is the one thing this
         * start cannot do without: said with what would allow it. */
        if (!contain_fork_refused(&plan.contain, fork_errno, &e))
            err_unable(&e, fork_errno, "fork");
        close_pipes((int *[]){p, po, pe, pn, pr}, 5);
        launch_free(&plan);
        return start_failed(s, &e);
    }
    close(p[1]);
    if (pr[1] >= 0)
        close(pr[1]);
    if (s->reaper_fd >= 0)
        close(s->reaper_fd);
    s->reaper_fd = pr[0];
    if (plan.contain.isolate)
        contain_host_report(H.mode == MODE_SUPERVISOR);
    if (pn[0] >= 0) {
        close(pn[1]);
        svc_notify_fd_attach(s, pn[0]);
    }
    if (po[1] >= 0)
        close(po[1]);
    if (pe[1] >= 0)
        close(pe[1]);
    int rd[2] = {po[0], pe[0]};
    svc_output_attach(s, rd);
    s->out_mark = s->out.ring.total;
    svc_probe_keep_plan(s, &plan);
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    s->pid = pid;
    /* has_exit stays: last_exit is the last run's end until this one
     * ends (after a graceful restart too, which is no backoff). */
    s->killed = false;
    s->exec_fd = p[0];
    s->ns_offer = offered;
    ev_io_init(&s->exec_io, exec_cb, p[0], EV_READ);
    s->exec_io.data = s;
    ev_io_start(H.loop, &s->exec_io);
    if (reaper_watch(pid, child_exited, s) < 0) {
        /* Cannot happen with REAPER_MAX > services; still, never leak. */
        log_error("service %s: unable to watch pid %d", s->cfg->name, (int)pid);
    }
    log_debug("service %s: spawned pid %d%s%s", s->cfg->name, (int)pid,
              placed ? " into its cgroup (clone3)" : "",
              plan.contain.pidns ? ", the reaper of its own pid namespace" : "");
    return 0;
}
