/* contain: what keeps a service inside what hearth set up. A service is a
 * guest of PID 1, not its peer:
 *  - capabilities by allowlist (caps_keep, default the container set
 *    without NET_RAW for root, none for other users; caps_drop subtracts),
 *    every set (bounding, inheritable, ambient, effective, permitted)
 *    cleared beyond them;
 *  - its own mount namespace (isolation, default on), a slave of hearth's
 *    so later mounts still reach it, with a /dev of its own (no disks,
 *    console or kernel log), the control sockets' directories masked, the kernel's sensitive /proc and /sys files masked or
 *    read-only, /sys/fs/cgroup and hearth's config read-only;
 *  - a cgroup namespace rooted at its leaf;
 *  - the default seccomp filter (seccomp.h), with no_new_privs.
 * A service whose settings let it undo that (a kept capability such as
 * NET_ADMIN, isolation or seccomp off) is "privileged": logged when the
 * config loads and shown with its reasons in status.
 *
 * The parent resolves everything into a plan (contain_prepare); the child
 * only applies it with plain syscalls. */
#ifndef HEARTH_CONTAIN_H
#define HEARTH_CONTAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "err.h"
#include "seccomp.h"
#include "svc_config.h"

#define CONTAIN_PATH_MAX 256
#define CONTAIN_MAX_EXTRA 12
/* Writable paths in a read-only root: a service's `writable` and the
 * writable mounts hearth made. */
#define CONTAIN_MAX_RW 48

struct contain_plan {
    uint64_t caps;      /* the capabilities the service keeps */
    bool ambient;       /* raise them as ambient: the service is not root */
    bool isolate;       /* own mount namespace and masks */
    bool cgroupns;      /* own cgroup namespace at its leaf */
    bool pidns;         /* own pid namespace (isolated services): the
                         * caller forks with CLONE_NEWPID, launch.c
                         * makes the child its reaper */
    bool seccomp;
    struct seccomp_prog prog;
    /* Directories hidden under an empty read-only tmpfs (the control
     * sockets' directories), files or directories made read-only
     * (hearth's config). */
    char hide[CONTAIN_MAX_EXTRA][CONTAIN_PATH_MAX];
    size_t n_hide;
    char ro[CONTAIN_MAX_EXTRA][CONTAIN_PATH_MAX];
    size_t n_ro;
    /* The namespace template (see contain_snapshot_offer): a mount
     * namespace already set up as this plan asks, which the child copies
     * instead of building its own (-1: none fits), and the socket a child
     * that builds sends its namespace back on (-1: not asked to). */
    int ns_fd;
    int snap_fd;
    /* A command run on a service's behalf (its exec probes) runs where
     * the service runs: join set by contain_join_open, and the namespaces
     * of the service's main process that are not hearth's own joined
     * with setns instead of any made (-1: that one is hearth's). */
    bool join;
    int join_user, join_mnt, join_cgroup, join_pid;
    /* hearth holds no CAP_SYS_ADMIN (userns.h): the child is cloned into
     * a user namespace of its own with its pid and mount namespaces
     * (contain_clone_flags) and waits on userns_go, in contain_enter,
     * until hearth has written its maps (launch_after_fork). proc_shared:
     * the kernel will not mount it a fresh /proc (userns_proc_shared), so
     * it keeps the container's with every process already there hidden. */
    bool userns;
    bool proc_shared;
    int userns_go[2];
    /* The service's own part, applied at every start after the template
     * copy (contain_enter): with ro_root every mount of the namespace is
     * read-only (the image's root first) but /proc and the paths in rw;
     * a private tmpfs of tmp_bytes on /tmp and of shm_bytes on
     * /dev/shm (0: the namespace's own). */
    bool ro_root;
    char rw[CONTAIN_MAX_RW][CONTAIN_PATH_MAX];
    size_t n_rw;
    int64_t tmp_bytes, shm_bytes;
};

/* What a service with policy pol gets here, for status: "full" (its
 * namespaces made by hearth, which holds CAP_SYS_ADMIN), "userns" (made
 * inside a user namespace of its own, see userns.h) or "none" (isolation
 * off, hearth not root, or user namespaces refused: then such a service
 * does not start). why gets the reason when it is not "full" ("" else). */
const char *contain_describe(const struct contain_policy *pol, struct err *err);

/* The namespace flags a start with plan p is cloned with (for
 * cgroup_fork_into): CLONE_NEWPID for its own pid namespace, with
 * CLONE_NEWUSER and CLONE_NEWNS in user namespace mode, so the pid
 * namespace is the user namespace's (a /proc of it can be mounted there). */
uint64_t contain_clone_flags(const struct contain_plan *p);
/* In the parent, right before the fork: what the child of a user
 * namespace plan waits on. 0, or -1 with a message. */
int contain_fork_prepare(struct contain_plan *p, struct err *err);
/* In the parent, when the fork with CLONE_NEWUSER failed with err: the
 * message for the start (the kernel refused the user namespace, and
 * which setting would let it) in msg, and true; false when err is not
 * such a refusal. */
bool contain_fork_refused(const struct contain_plan *p, int err, struct err *msg);

/* caps_keep, caps_drop, isolation and seccomp of a service, as typed when
 * the config loaded (struct contain_policy and svc_config_default_caps are
 * svc_config.h's). */
void contain_policy_of(const struct service_config *c, struct contain_policy *out);
/* The capabilities kept: caps_keep (or the default when root, none when
 * not) minus caps_drop. */
uint64_t contain_caps(const struct contain_policy *pol, bool root);
/* Why a service is privileged: "keeps CAP_NET_ADMIN", "isolation off",
 * "seccomp off", joined by ", " into buf. Returns how many reasons. */
int contain_privileged(const struct contain_policy *pol, char *buf, size_t len);

/* Once, in the parent, before the first isolated service starts: makes
 * hearth's own mounts shared (vm and container modes: hearth owns the
 * mount namespace) so mounts it adds later propagate into the services'
 * namespaces, which are slaves of it. In supervisor mode (or when hearth
 * is not PID 1) the namespace is someone else's and is left as it is. */
void contain_host_setup(bool supervisor);

/* Once, in the parent, after the first isolated service has forked: what
 * the host's mounts mean for containment, logged (/ not shared in
 * supervisor mode; cgroup2 without nsdelegate). Reading mountinfo for it
 * costs a tenth of a millisecond or more, which waits here rather than
 * before that service's start. */
void contain_host_report(bool supervisor);

/* A directory hearth writes for the services to read (the resume news):
 * bound read-only in every isolated service's namespace from the next
 * start on. NULL or "" clears it; a path of CONTAIN_PATH_MAX bytes or more
 * is ignored. */
void contain_readonly_dir(const char *path);

/* The sizes of a service's private /tmp and /dev/shm when its limits say
 * nothing (limits.h works them out from the guest's memory). */
void contain_set_tmpfs_defaults(int64_t tmp_bytes, int64_t shm_bytes);

/* Builds the plan for a service running as root (root) or not, in leaf
 * (NULL or "" without cgroups); cfg's unix listeners, /etc/hearth and
 * config_path are hidden from it. With isolation it gets a read-only
 * root (unless read_only_root is false) where its `writable` paths stay
 * writable, and a private /tmp and /dev/shm. Returns 0, or -1 with a
 * message. */
int contain_prepare(const struct service_config *c, const struct config *cfg,
                    const char *config_path, bool root, const char *leaf,
                    struct contain_plan *p, struct err *err);

/* One more writable path for a plan with a read-only root (a writable
 * mount hearth made). Returns 0, or -1 with a message when the plan is
 * full or the path too long. */
int contain_add_writable(struct contain_plan *p, const char *path, struct err *err);
/* A host's exec session: its root stays writable and /tmp and /dev/shm
 * are the guest's, as for files.* (the host may write anywhere); the
 * rest of the containment is a default service's. */
void contain_as_host_session(struct contain_plan *p);

/* Whether mounts hearth adds later reach the services' namespaces:
 * hearth made its mounts shared (vm and container modes), or / is
 * shared (supervisor mode; read once, when first asked). */
bool contain_mounts_propagate(void);

/* The namespace template (nstemplate.h) for contained starts: the first
 * child whose plan keeps no CAP_SYS_ADMIN (so it cannot change its own
 * mounts afterwards) sends its finished namespace back; later plans with
 * the same hidden and read-only paths copy it, as long as the hidden
 * directories are the ones it masks and hearth's later mounts propagate
 * into it. contain_prepare sets p->ns_fd from contain_template_for.
 *  - contain_snapshot_offer before the fork: asks this start's child
 *    (p->snap_fd) when nothing fits; returns whether it asked;
 *  - contain_snapshot_forked after it (forked false drops the request);
 *  - contain_snapshot_take once that child has exec'd or ended. */
int contain_template_for(const struct contain_plan *p);
bool contain_snapshot_offer(struct contain_plan *p);
void contain_snapshot_forked(struct contain_plan *p, bool forked);
void contain_snapshot_take(void);

/* In the parent, before the fork of a command run on behalf of a
 * service whose main process is pid (the plan is the service's own):
 * opens the namespaces of pid that differ from hearth's (user, mount,
 * cgroup, PID) for contain_enter to join, the user namespace first. Returns 0, or -1 with a message (the
 * process is gone: its namespaces cannot be opened), and then nothing
 * is held. hearth is pid's parent and only reaper, so pid cannot name
 * another process while hearth has not reaped it. */
int contain_join_open(struct contain_plan *p, pid_t pid, struct err *err);
/* After the fork: closes what contain_join_open opened; join off. */
void contain_join_close(struct contain_plan *p);

/* In the child, before identity changes: the namespaces and the mounts
 * (or, with join, the running service's namespaces joined); in user
 * namespace mode it first waits for hearth to write its maps.
 * Returns 0, or -1 with errno and what it was doing in what ("unable to
 * mask /proc/kcore"). */
int contain_enter(const struct contain_plan *p, struct err *err);
/* In the child that is PID 1 of the service's own pid namespace, after
 * contain_enter: a /proc of that namespace in place of the one the mount
 * namespace came with (which shows hearth's), with the /proc entries of
 * contain_masked and contain_readonly masked and read-only again over it.
 * A child that sent its namespace as the template first takes a copy of
 * its own, so the template keeps no one's /proc. With proc_shared the
 * container's /proc stays, and the entry of every process in it but the
 * child's own (hearth, the platform's init, what started before: their
 * pids and their threads') gets an empty read-only tmpfs over it. */
int contain_proc_for_pidns(const struct contain_plan *p, struct err *err);
/* In the child, as root: shrinks the bounding set to the kept
 * capabilities (before the uid changes) and asks the kernel to keep the
 * permitted set across setuid when they must become ambient. */
int contain_caps_before_ids(const struct contain_plan *p);
/* In the child, after the uid change: effective, permitted and
 * inheritable set to the kept capabilities (inheritable only for a
 * non-root service), ambient cleared and then raised for a non-root one. */
int contain_caps_after_ids(const struct contain_plan *p);

/* Paths a service's namespace masks and makes read-only, for docs and
 * tests (NULL-terminated). */
extern const char *const contain_masked[];
extern const char *const contain_readonly[];

#endif
