/* launch: how a service process is set up between fork and exec. The
 * parent resolves everything that can fail or allocate (identity from
 * the snapshot of the image's /etc/passwd and /etc/group taken at boot,
 * see accounts.h; env_files, limits, capabilities) into a plan; the
 * child only applies it with plain syscalls. */
#ifndef HEARTH_LAUNCH_H
#define HEARTH_LAUNCH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "config.h"
#include "contain.h"
#include "err.h"

#define LAUNCH_MAX_GROUPS 32
#define LAUNCH_MAX_RLIMITS 16
#define LAUNCH_ENV_FILE_MAX (256 * 1024)

struct launch_plan {
    char **env;              /* full environment, NULL-terminated (owned) */
    size_t n_env;
    bool set_ids;
    uid_t uid;
    gid_t gid;
    gid_t groups[LAUNCH_MAX_GROUPS];
    size_t n_groups;
    bool set_umask;
    mode_t umask;
    struct { int resource; struct rlimit lim; } rlimits[LAUNCH_MAX_RLIMITS];
    size_t n_rlimits;
    bool set_oom;
    int oom_score_adj;
    bool no_new_privs;
    /* With contain.pidns: the write end of the pipe the reaper reports
     * the main process's status on (pidreaper_pipe), -1 until the
     * caller makes it. */
    int reaper_fd;
    /* Runs in the child once contained (its own view of the files) and
     * before limits, identity and capabilities change: what the caller
     * does there with root's rights, such as a service's secrets. 0, or
     * -1 with a message in what. NULL: nothing. Set only on the child's
     * own copy of a plan, so a copy kept for probes never runs it. */
    int (*as_root)(const struct launch_plan *p, void *ctx, struct err *err);
    void *as_root_ctx;
    /* capabilities, namespaces, masks, seccomp: filled by
     * contain_prepare once the leaf is known */
    struct contain_plan contain;
};

/* Builds the plan; on failure returns -1 with a message naming the field
 * or file ("env_files[0] /root/.hermes/.env:3: expected KEY=VALUE"). */
int launch_prepare(const struct service_config *c, struct launch_plan *p, struct err *err);
void launch_free(struct launch_plan *p);
/* Sets KEY=value in a prepared plan's environment, replacing any value it
 * had; value NULL removes the key. -1 when out of memory. */
int launch_env_set(struct launch_plan *p, const char *key, const char *value);
/* Per-sandbox variables (sandbox.init): added after a service's own env
 * and before its env_files. The array stays owned by the caller and must
 * live until the next call. */
struct env_var;
void launch_set_sandbox_env(const struct env_var *vars, size_t n);
/* Whether the service runs as uid 0 (its user, or hearth's own uid). */
bool launch_is_root(const struct launch_plan *p);
/* In the child: applies limits, identity, capabilities, no_new_privs
 * (always on when a seccomp filter follows). Returns 0 or -1 with errno
 * set (the caller reports it). */
int launch_apply(const struct launch_plan *p);
/* In a child without an oom_score_adj of its own: back to the kernel's
 * default, 0. A child inherits its parent's value, and hearth keeps
 * -1000 for itself; the write happens while the child still holds
 * CAP_SYS_RESOURCE, which also raises the floor it inherited (the
 * kernel's oom_score_adj_min) to 0, so a service without that capability
 * cannot go back to -1000. 0, or -1 with errno. */
int launch_oom_default(void);

/* In the parent, right after the fork of a start with plan p (pid < 0:
 * the fork failed): in user namespace mode (contain.h) what the child
 * cannot do for itself there, as hearth: the maps of its user namespace,
 * its oom_score_adj (which then also sets the floor it may not go below,
 * as the child's own write does where it holds CAP_SYS_RESOURCE) and its
 * rlimits (raising a hard limit takes CAP_SYS_RESOURCE outside the user
 * namespace); then the child is told to go on, or to fail. 0, or -1 with
 * a message (the child then fails its start too). */
int launch_after_fork(struct launch_plan *p, pid_t pid, struct err *err);

/* The steps of a child on its way to exec, as its report to the parent
 * names the one that failed (0 is none). */
enum launch_step {
    LAUNCH_STEP_SETUP = 1,  /* the caller's own steps, then launch_apply */
    LAUNCH_STEP_CONTAIN,
    LAUNCH_STEP_CWD,
    LAUNCH_STEP_SECCOMP,
    LAUNCH_STEP_EXEC,
    LAUNCH_STEP_AS_ROOT,    /* the plan's as_root hook; what says why */
};

/* In the child, its descriptors in place: the last steps to exec, in the
 * one order that works (shared by services, exec.start and exec probes;
 * a plan that joined a PID namespace forks once more before exec, and the
 * process left outside waits and ends as the command did). Returns only
 * on failure, with errno set, the step in *step and, for
 * LAUNCH_STEP_CONTAIN and LAUNCH_STEP_AS_ROOT, the message in what. With contain.pidns the
 * child is PID 1 of its own pid namespace: once contained it forks the
 * main process, which goes on to exec, and becomes the reaper itself
 * (pidreaper.h); report_fd is the exec-status pipe the reaper lets go of. */
void launch_exec(const struct launch_plan *p, const char *cwd, char *const argv[], int report_fd,
                 int *step, struct err *err);

/* In a child before exec: every signal to its default disposition and
 * none blocked, including those the C library reserves for itself. A
 * child that will be PID 1 of a pid namespace of its own (plan->contain
 * .pidns, not joined) keeps every signal blocked instead: the kernel drops
 * a signal such an init neither blocks nor handles, so a stop sent while
 * it sets up would be lost; blocked, it waits for the reaper, which hands
 * it on (launch_exec unblocks the program's). */
void launch_reset_signals(const struct launch_plan *p);
/* In hearth, once its own dispositions are set (SIGPIPE ignored; it
 * installs no handler: signals come through a signalfd): which signals
 * are not at their default, so launch_reset_signals resets only those
 * (a caught one would be reset by the exec anyway; an ignored one would
 * pass through it). Until it is called, every signal is reset. Call it
 * again after changing a disposition. */
void launch_learn_signals(void);

/* Parses one env file's text into KEY=VALUE strings appended to *env.
 * Exposed for unit tests. */
int launch_parse_env(const char *text, size_t len, const char *fname, char ***env, size_t *n,
                     struct err *err);
/* Who owns the files hearth makes for service c (its log files, the
 * private skills): its user and group when hearth is root and they
 * resolve, else hearth's own identity. */
void launch_owner(const struct service_config *c, uid_t *uid, gid_t *gid);

#endif
