#include "launch.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <sys/fsuid.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "accounts.h"
#include "err.h"
#include "lifeline.h"
#include "pidreaper.h"
#include "safepath.h"
#include "sysids.h"
#include "seccomp.h"
#include "svc_config.h"
#include "userns.h"

extern char **environ;

/* ---- environment ---- */

static int env_set(char ***env, size_t *n, const char *key, size_t klen, const char *val, size_t vlen)
{
    char *kv = malloc(klen + vlen + 2);
    if (!kv)
        return -1;
    memcpy(kv, key, klen);
    kv[klen] = '=';
    memcpy(kv + klen + 1, val, vlen);
    kv[klen + 1 + vlen] = 0;
    for (size_t i = 0; i < *n; i++) {
        if (strncmp((*env)[i], key, klen) == 0 && (*env)[i][klen] == '=') {
            free((*env)[i]);
            (*env)[i] = kv;
            return 0;
        }
    }
    char **ne = realloc(*env, (*n + 2) * sizeof(char *));
    if (!ne) {
        free(kv);
        return -1;
    }
    *env = ne;
    ne[(*n)++] = kv;
    ne[*n] = NULL;
    return 0;
}

static bool env_has(char **env, size_t n, const char *key)
{
    size_t kl = strlen(key);
    for (size_t i = 0; i < n; i++)
        if (strncmp(env[i], key, kl) == 0 && env[i][kl] == '=')
            return true;
    return false;
}

int launch_env_set(struct launch_plan *p, const char *key, const char *value)
{
    size_t kl = strlen(key);
    if (value)
        return env_set(&p->env, &p->n_env, key, kl, value, strlen(value));
    for (size_t i = 0; i < p->n_env; i++) {
        if (strncmp(p->env[i], key, kl) == 0 && p->env[i][kl] == '=') {
            free(p->env[i]);
            memmove(&p->env[i], &p->env[i + 1], (p->n_env - i) * sizeof(char *));
            p->n_env--;
            return 0;
        }
    }
    return 0;
}

/* KEY=VALUE lines; '#' comments and blank lines; an optional "export ";
 * values may be 'single' (literal) or "double" quoted (\" \\ \n \t \$
 * escapes) or bare (trailing spaces and a " #comment" cut). */
int launch_parse_env(const char *text, size_t len, const char *fname, char ***env, size_t *n,
                     struct err *err)
{
    size_t pos = 0;
    int lineno = 0;
    char *val = malloc(len + 1);

    if (!val)
        return err_set(err, "%s: out of memory", fname);
    while (pos < len) {
        size_t end = pos;
        while (end < len && text[end] != '\n')
            end++;
        lineno++;
        const char *p = text + pos, *e = text + end;
        pos = end + 1;
        /* A NUL would silently cut the value short in the environment. */
        if (memchr(p, '\0', (size_t)(e - p))) {
            err_set(err, "%s:%d: NUL byte", fname, lineno);
            free(val);
            return -1;
        }
        while (p < e && (*p == ' ' || *p == '\t'))
            p++;
        while (e > p && (e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
            e--;
        if (p == e || *p == '#')
            continue;
        if ((size_t)(e - p) > 7 && strncmp(p, "export ", 7) == 0) {
            p += 7;
            while (p < e && *p == ' ')
                p++;
        }
        const char *k = p, *eq = memchr(p, '=', (size_t)(e - p));
        if (!eq || !names_env_valid(k, (size_t)(eq - k)))
            goto bad;
        p = eq;
        size_t klen = (size_t)(p - k);
        p++;
        size_t vlen = 0;
        if (p < e && (*p == '"' || *p == '\'')) {
            char q = *p++;
            bool closed = false;
            while (p < e) {
                char c = *p++;
                if (c == q) {
                    closed = true;
                    break;
                }
                if (q == '"' && c == '\\' && p < e) {
                    c = *p++;
                    c = c == 'n' ? '\n' : c == 't' ? '\t' : c;
                }
                val[vlen++] = c;
            }
            if (!closed) {
                err_set(err, "%s:%d: unterminated quote", fname, lineno);
                free(val);
                return -1;
            }
            while (p < e && (*p == ' ' || *p == '\t'))
                p++;
            if (p < e && *p != '#') {
                err_set(err, "%s:%d: text after the closing quote", fname, lineno);
                free(val);
                return -1;
            }
        } else {
            const char *v = p;
            while (p < e && !(*p == '#' && p > v && (p[-1] == ' ' || p[-1] == '\t')))
                p++;
            while (p > v && (p[-1] == ' ' || p[-1] == '\t'))
                p--;
            vlen = (size_t)(p - v);
            memcpy(val, v, vlen);
        }
        if (env_set(env, n, k, klen, val, vlen) < 0) {
            err_set(err, "%s: out of memory", fname);
            free(val);
            return -1;
        }
        continue;
bad:
        err_set(err, "%s:%d: expected KEY=VALUE", fname, lineno);
        free(val);
        return -1;
    }
    free(val);
    return 0;
}

/* Opens an env file as the service would: with its filesystem uid, gid
 * and no supplementary group (setfsuid/setfsgid and setgroups touch only
 * this thread, and hearth has one; all are put back before returning),
 * so a file or link the service could not read itself never reaches its
 * environment. The last component is never followed, and a FIFO, socket
 * or device is refused without blocking (safepath). why gets the reason
 * when the file is refused. */
static int open_env_file(const char *path, bool as_service, uid_t uid, gid_t gid, struct err *err)
{
    char dir[PATH_MAX], leaf[PATH_MAX];
    gid_t saved[LAUNCH_MAX_GROUPS * 2];
    int n_saved = 0, old_uid = 0, old_gid = 0;

    if (path[0] != '/' || safepath_split(path + 1, dir + 1, leaf) < 0) {
        errno = path[0] != '/' ? EINVAL : errno;
        return err_set(err, "%s", strerror(errno));
    }
    dir[0] = '/';
    if (strcmp(dir + 1, ".") == 0)
        dir[1] = '\0';
    if (as_service) {
        n_saved = getgroups((int)(sizeof(saved) / sizeof(saved[0])), saved);
        if (n_saved < 0 || syscall(SYS_setgroups, 0, NULL) < 0)
            return err_unable(err, errno, "take the service's identity");
        old_gid = setfsgid(gid);
        old_uid = setfsuid(uid);
    }
    int fd = -1, e = 0;
    int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        e = errno;
        err_set(err, "%s", strerror(e));
    } else {
        fd = safepath_open(dfd, leaf, O_RDONLY, 0, err);
        e = errno;
        close(dfd);
    }
    if (as_service) {
        setfsuid(old_uid);
        setfsgid(old_gid);
        syscall(SYS_setgroups, n_saved, saved);
    }
    errno = e;
    return fd;
}

static int read_small_file(int fd, char **out, size_t *len, size_t max)
{
    char *buf = malloc(max + 1);
    size_t n = 0;
    if (!buf) {
        close(fd);
        errno = ENOMEM;
        return -1;
    }
    for (;;) {
        ssize_t r = read(fd, buf + n, max + 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            free(buf);
            close(fd);
            errno = e;
            return -1;
        }
        if (r == 0)
            break;
        n += (size_t)r;
        if (n > max) {
            free(buf);
            close(fd);
            errno = EFBIG;
            return -1;
        }
    }
    close(fd);
    buf[n] = 0;
    *out = buf;
    *len = n;
    return 0;
}

/* ---- identity: the image's users and groups as they were at boot ---- */

/* The user's error: which name, and where it was looked for. */
static void no_user(const char *user, struct err *err)
{
    const struct accounts *a = accounts_snapshot();

    if (a->pw_problem[0])
        err_set(err, "user: no user %s: %s was refused at boot (%s)", user,
                ACCOUNTS_PASSWD, a->pw_problem);
    else
        err_set(err, "user: no user %s in %s (as read at boot)", user, ACCOUNTS_PASSWD);
}

static void no_group(const char *group, struct err *err)
{
    const struct accounts *a = accounts_snapshot();

    if (a->gr_problem[0])
        err_set(err, "group: no group %s: %s was refused at boot (%s)", group,
                ACCOUNTS_GROUP, a->gr_problem);
    else
        err_set(err, "group: no group %s in %s (as read at boot)", group, ACCOUNTS_GROUP);
}

/* ---- the plan ---- */

/* The identity env_files are read with: the service's user and group
 * when it names a non-root one; false (read as hearth) otherwise. A user
 * that does not resolve is reported by launch_prepare afterwards. */
static bool env_identity(const struct service_config *c, uid_t *uid, gid_t *gid)
{
    char home[256];

    *uid = getuid();
    *gid = getgid();
    if (c->user && accounts_user(accounts_snapshot(), c->user, uid, gid, home, sizeof(home)) < 0)
        return false;
    if (c->group && accounts_group(accounts_snapshot(), c->group, gid) < 0)
        return false;
    /* Only root can take another identity; a hearth that is not root
     * reads with its own. */
    return geteuid() == 0 && (*uid != 0 || *gid != 0);
}

static const struct env_var *sandbox_env;
static size_t n_sandbox_env;

void launch_set_sandbox_env(const struct env_var *vars, size_t n)
{
    sandbox_env = vars;
    n_sandbox_env = n;
}

int launch_prepare(const struct service_config *c, struct launch_plan *p, struct err *err)
{
    char home[256] = "";

    memset(p, 0, sizeof(*p));
    p->reaper_fd = -1;
    p->no_new_privs = true;
    for (char **e = environ; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (eq && env_set(&p->env, &p->n_env, *e, (size_t)(eq - *e), eq + 1, strlen(eq + 1)) < 0)
            goto oom;
    }
    for (size_t i = 0; i < c->n_env; i++)
        if (env_set(&p->env, &p->n_env, c->env[i].key, strlen(c->env[i].key), c->env[i].value,
                    strlen(c->env[i].value)) < 0)
            goto oom;
    for (size_t i = 0; i < n_sandbox_env; i++)
        if (env_set(&p->env, &p->n_env, sandbox_env[i].key, strlen(sandbox_env[i].key),
                    sandbox_env[i].value, strlen(sandbox_env[i].value)) < 0)
            goto oom;
    uid_t fs_uid = 0;
    gid_t fs_gid = 0;
    bool as_service = c->n_env_files > 0 && env_identity(c, &fs_uid, &fs_gid);
    for (size_t i = 0; i < c->n_env_files; i++) {
        char *text, fname[300];
        struct err why;
        size_t len;
        int fd = open_env_file(c->env_files[i], as_service, fs_uid, fs_gid, &why);
        if (fd < 0 && errno == ENOENT)
            continue; /* an env file that is not there yet is fine */
        if (fd < 0 || read_small_file(fd, &text, &len, LAUNCH_ENV_FILE_MAX) < 0) {
            if (fd >= 0)
                err_set(&why, "%s", strerror(errno));
            err_set(err, "env_files[%zu] %s: %s", i, c->env_files[i], why.msg);
            launch_free(p);
            return -1;
        }
        snprintf(fname, sizeof(fname), "env_files[%zu] %s", i, c->env_files[i]);
        int rc = launch_parse_env(text, len, fname, &p->env, &p->n_env, err);
        free(text);
        if (rc < 0) {
            launch_free(p);
            return -1;
        }
    }
    if (c->user) {
        if (accounts_user(accounts_snapshot(), c->user, &p->uid, &p->gid, home, sizeof(home)) < 0) {
            no_user(c->user, err);
            launch_free(p);
            return -1;
        }
        p->set_ids = true;
        /* Supplementary groups: every group listing the user. */
        p->groups[0] = p->gid;
        p->n_groups = 1 + accounts_member_groups(accounts_snapshot(), c->user, p->gid,
                                                 p->groups + 1, LAUNCH_MAX_GROUPS - 1);
        if (!env_has(p->env, p->n_env, "HOME") || (c->user && strcmp(c->user, "root") != 0)) {
            bool explicit_home = false;
            for (size_t i = 0; i < c->n_env; i++)
                if (strcmp(c->env[i].key, "HOME") == 0)
                    explicit_home = true;
            if (!explicit_home && home[0] && env_set(&p->env, &p->n_env, "HOME", 4, home, strlen(home)) < 0)
                goto oom;
        }
        if (env_set(&p->env, &p->n_env, "USER", 4, c->user, strlen(c->user)) < 0)
            goto oom;
    }
    if (c->group) {
        if (accounts_group(accounts_snapshot(), c->group, &p->gid) < 0) {
            no_group(c->group, err);
            launch_free(p);
            return -1;
        }
        p->set_ids = true;
        if (p->n_groups == 0)
            p->groups[p->n_groups++] = p->gid;
        else
            p->groups[0] = p->gid;
    }
    const struct svc_launch_settings *ls =
        &(c->settings ? c->settings : svc_config_defaults())->launch;
    p->set_umask = ls->set_umask;
    p->umask = ls->umask;
    for (size_t i = 0; i < ls->n_rlimits && p->n_rlimits < LAUNCH_MAX_RLIMITS; i++) {
        p->rlimits[p->n_rlimits].resource = ls->rlimits[i].resource;
        p->rlimits[p->n_rlimits].lim.rlim_cur = ls->rlimits[i].lim;
        p->rlimits[p->n_rlimits].lim.rlim_max = ls->rlimits[i].lim;
        p->n_rlimits++;
    }
    p->set_oom = ls->set_oom;
    p->oom_score_adj = ls->oom_score_adj;
    p->no_new_privs = ls->no_new_privs;
    return 0;
oom:
    err_set(err, "unable to build the environment: out of memory");
    launch_free(p);
    return -1;
}

bool launch_is_root(const struct launch_plan *p)
{
    return p->set_ids ? p->uid == 0 : geteuid() == 0;
}

void launch_free(struct launch_plan *p)
{
    for (size_t i = 0; i < p->n_env; i++)
        free(p->env[i]);
    free(p->env);
    p->env = NULL;
    p->n_env = 0;
}

/* Async-signal-safe: between fork and exec. */
static int write_oom(int v)
{
    char buf[16];
    int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int n = snprintf(buf, sizeof(buf), "%d", v);
    ssize_t w = write(fd, buf, (size_t)n);
    int e = errno;
    close(fd);
    errno = e;
    return w == n ? 0 : -1;
}

int launch_oom_default(void)
{
    /* EACCES: what was inherited is above 0 and may not be lowered
     * without CAP_SYS_RESOURCE (a supervisor under a shell's value); the
     * child keeps it, which is never hearth's protection. ENOENT: no
     * /proc to write. */
    if (write_oom(0) < 0 && errno != EACCES && errno != ENOENT)
        return -1;
    return 0;
}

int launch_apply(const struct launch_plan *p)
{
    for (size_t i = 0; i < p->n_rlimits; i++)
        if (sysids_setrlimit(p->rlimits[i].resource, &p->rlimits[i].lim) < 0)
            return -1;
    if (p->set_oom) {
        if (write_oom(p->oom_score_adj) < 0 && errno != ENOENT)
            return -1;
    } else if (launch_oom_default() < 0) {
        return -1;
    }
    if (p->set_umask)
        umask(p->umask);
    /* The bounding set must shrink while we still hold CAP_SETPCAP, i.e.
     * before changing uid. For a root service exec then grants exactly
     * the bounding set, so what is not kept is gone for good. */
    if (contain_caps_before_ids(&p->contain) < 0)
        return -1;
    if (p->set_ids) {
        if (sysids_setgroups(p->n_groups, p->groups) < 0 && errno != EPERM)
            return -1;
        /* setgid and setuid as root: real, effective and saved alike. */
        if (sysids_setresgid(p->gid, p->gid, p->gid) < 0 ||
            sysids_setresuid(p->uid, p->uid, p->uid) < 0)
            return -1;
    }
    if (contain_caps_after_ids(&p->contain) < 0)
        return -1;
    /* A seccomp filter needs no_new_privs, and a filtered service must
     * not regain what it lost through a setuid or file-capability exec. */
    if ((p->no_new_privs || p->contain.seccomp) && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return -1;
    /* Again: the id change cleared the death signal asked for at the
     * fork (lifeline.h). */
    lifeline_hold();
    return 0;
}

int launch_after_fork(struct launch_plan *p, pid_t pid, struct err *err)
{
    struct contain_plan *c = &p->contain;
    int e = 0;

    if (!c->userns || c->join)
        return 0;
    if (pid > 0 && userns_map(pid, err) < 0)
        e = errno;
    if (pid > 0 && !e) {
        char path[48], val[16];
        int v = p->set_oom ? p->oom_score_adj : 0;
        snprintf(path, sizeof(path), "/proc/%d/oom_score_adj", (int)pid);
        snprintf(val, sizeof(val), "%d", v);
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        ssize_t w = fd < 0 ? -1 : write(fd, val, strlen(val));
        int we = errno;
        if (fd >= 0)
            close(fd);
        /* As launch_oom_default: a value above 0 inherited and not to be
         * lowered stays (never hearth's protection); none is asked. */
        if (w < 0 && (p->set_oom || (we != EACCES && we != ENOENT))) {
            e = we;
            err_unable(err, e, "set the oom_score_adj of the service");
        }
    }
    for (size_t i = 0; pid > 0 && !e && i < p->n_rlimits; i++)
        if (prlimit(pid, p->rlimits[i].resource, &p->rlimits[i].lim, NULL) < 0) {
            e = errno;
            err_unable(err, e, "set the service's rlimits");
        }
    if (pid > 0 && !e)
        userns_granted();
    userns_release(c->userns_go, pid, e);
    errno = e;
    return e ? -1 : 0;
}

/* setns into a PID namespace places only the children of who joined:
 * one more fork, as late as can be (the process that stays outside is
 * as contained as the one that goes in, and outside the service's view),
 * and the one outside ends as the one inside did, so whoever waits for
 * it (a probe's timeout and exit status) sees the command itself. A
 * process group kill reaches both. Returns 0 in the child, -1 when the
 * fork failed. */
static int into_joined_pidns(void)
{
    int st;
    pid_t k = fork();

    if (k <= 0)
        return k;
    while (waitpid(k, &st, 0) < 0)
        if (errno != EINTR)
            _exit(127);
    if (WIFSIGNALED(st)) {
        kill(getpid(), WTERMSIG(st));
        _exit(128 + WTERMSIG(st));
    }
    _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 127);
}

void launch_exec(const struct launch_plan *p, const char *cwd, char *const argv[], int report_fd,
                 int *step, struct err *err)
{
    /* Namespaces and masks first: they need the privileges the
     * capability and identity changes below take away. */
    *step = LAUNCH_STEP_CONTAIN;
    if (contain_enter(&p->contain, err) < 0)
        return;
    /* A probe joins its service's namespaces (the service's reaper is
     * PID 1 there already); everything else contained is born PID 1 of
     * a namespace of its own and becomes its reaper. */
    bool own_pidns = p->contain.pidns && !p->contain.join;
    if (own_pidns && contain_proc_for_pidns(&p->contain, err) < 0)
        return;
    *step = LAUNCH_STEP_AS_ROOT;
    if (p->as_root && p->as_root(p, p->as_root_ctx, err) < 0)
        return;
    *step = LAUNCH_STEP_SETUP;
    if (launch_apply(p) < 0)
        return;
    if (own_pidns) {
        /* The reaper takes the same identity, capabilities and filter as
         * the service: it is no more than the service. Filtered before
         * the fork, so both carry it; a plain fork passes the filter. */
        *step = LAUNCH_STEP_SECCOMP;
        if (p->contain.seccomp && seccomp_install(&p->contain.prog) < 0)
            return;
        sigset_t all, none;
        sigfillset(&all);
        sigemptyset(&none);
        /* Blocked before the fork (and since the child began, see
         * launch_reset_signals): the main process's end cannot come
         * before the reaper waits for it (see pidreaper.c), and what
         * was sent to the service while it set up is still here. */
        sigprocmask(SIG_SETMASK, &all, NULL);
        /* The program waits on this pipe, all blocked, until the reaper
         * has handed on what it holds: see below. */
        int go[2];
        if (pipe2(go, O_CLOEXEC) < 0)
            return;
        *step = LAUNCH_STEP_SETUP;
        pid_t main = fork();
        if (main < 0)
            return;
        if (main > 0) {
            /* A signal the reaper holds now came either before the fork,
             * to it alone (a stop sent while the service set up), or
             * after it, to the group, so the program has it too. Nothing
             * tells which, so each is handed on: the program blocks
             * everything until the pipe closes, and a signal sent to it
             * while one of its kind is pending is merged into that one, so
             * it sees each once (a real-time signal would be queued twice;
             * hearth sends none). Read before the fork instead, a stop
             * sent between that read and the fork went to the reaper
             * alone, which leaves group signals to the kernel: it was
             * lost, and the stop ended in SIGKILL. */
            struct timespec zero = {0, 0};
            sigset_t held;
            sigemptyset(&held);
            sigpending(&held);
            for (int sig = 1; sig < 65; sig++) {
                sigset_t one;
                if (sig == SIGCHLD || !sigismember(&held, sig))
                    continue;
                sigemptyset(&one);
                sigaddset(&one, sig);
                if (sigtimedwait(&one, NULL, &zero) == sig)
                    kill(main, sig);
            }
            close(go[0]);
            close(go[1]); /* the program's read ends */
            pidreaper_become(main, p->reaper_fd, report_fd);
        }
        close(go[1]);
        char byte;
        while (read(go[0], &byte, 1) < 0 && errno == EINTR)
            ;
        close(go[0]);
        sigprocmask(SIG_SETMASK, &none, NULL);
        close(p->reaper_fd);
        *step = LAUNCH_STEP_CWD;
        if (chdir(cwd ? cwd : "/") < 0)
            return;
        *step = LAUNCH_STEP_EXEC;
        execvpe(argv[0], argv, p->env);
        return;
    }
    *step = LAUNCH_STEP_CWD;
    if (chdir(cwd ? cwd : "/") < 0)
        return;
    /* Last: the filter would refuse the mounts made above. */
    *step = LAUNCH_STEP_SECCOMP;
    if (p->contain.seccomp && seccomp_install(&p->contain.prog) < 0)
        return;
    *step = LAUNCH_STEP_EXEC;
    if (p->contain.join && p->contain.join_pid >= 0 && into_joined_pidns() < 0)
        return;
    execvpe(argv[0], argv, p->env);
}

/* The kernel's own sigaction layout: libc wrappers refuse the real-time
 * signals they reserve (32, 33, ...), so a disposition inherited for those
 * (make, for one, leaves them ignored) would otherwise pass to services. */
struct kernel_sigaction {
    void (*handler)(int);
    unsigned long flags;
    void (*restorer)(void);
    unsigned long mask;
};

/* The signals whose disposition in hearth is not the default (bit sig-1),
 * as launch_learn_signals found them; all of them until it has run. */
static uint64_t nondefault = ~0ULL;

void launch_learn_signals(void)
{
    uint64_t m = 0;
    for (int sig = 1; sig <= 64; sig++) {
        struct kernel_sigaction old;
        if (sig == SIGKILL || sig == SIGSTOP)
            continue;
        if (syscall(SYS_rt_sigaction, sig, NULL, &old, sizeof(unsigned long)) < 0 ||
            old.handler != SIG_DFL)
            m |= 1ULL << (sig - 1);
    }
    nondefault = m;
}

void launch_reset_signals(const struct launch_plan *p)
{
    struct kernel_sigaction dfl = {SIG_DFL, 0, NULL, 0};
    unsigned long mask = p && p->contain.pidns && !p->contain.join ? ~0UL : 0;

    /* Only those hearth left elsewhere (ignored, as make leaves some, or
     * SIGPIPE): one system call each rather than 62 on every start. */
    for (int sig = 1; sig <= 64; sig++)
        if (sig != SIGKILL && sig != SIGSTOP && (nondefault >> (sig - 1) & 1))
            syscall(SYS_rt_sigaction, sig, &dfl, NULL, sizeof(unsigned long));
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &mask, NULL, sizeof(unsigned long));
}

void launch_owner(const struct service_config *c, uid_t *uid, gid_t *gid)
{
    char home[256];

    *uid = geteuid();
    *gid = getegid();
    /* Only a root hearth can give files away. */
    if (*uid != 0)
        return;
    /* A user that does not resolve fails the start later, with its own
     * error; meanwhile hearth keeps what it makes. */
    if (c->user && accounts_user(accounts_snapshot(), c->user, uid, gid, home, sizeof(home)) < 0) {
        *uid = 0;
        *gid = getegid();
        return;
    }
    if (c->group && accounts_group(accounts_snapshot(), c->group, gid) < 0)
        *gid = getegid();
}
