/* cgroup: hearth's cgroup v2 subtree. In vm mode cgroup2 is mounted at
 * /sys/fs/cgroup and the tree is /sys/fs/cgroup/hearth; elsewhere the
 * cgroup2 mount is found in /proc/self/mountinfo and the tree is built
 * under the cgroup hearth was started in, so several instances on one host
 * never collide. Each service gets a leaf: <base>/services/<name>. */
#ifndef HEARTH_CGROUP_H
#define HEARTH_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"

#define CGROUP_PATH_MAX 512

/* Finds the mount and creates the tree. Returns 0, or -1 (logged): hearth
 * then runs services without cgroups. */
int cgroup_setup(bool vm_mode);
bool cgroup_available(void);
/* Creates (if needed) the leaf for a service; writes its path to out. */
int cgroup_service_create(const char *name, char *out, size_t outlen);
/* Replaces an empty leaf by a new one of the same path; -1 with errno
 * (EBUSY while a process is still in it). */
int cgroup_service_recreate(const char *leaf);
/* Removes an empty leaf; ignores EBUSY/ENOENT. */
void cgroup_service_remove(const char *leaf);
/* Kills every process in the leaf (cgroup.kill, or SIGKILL per pid). */
int cgroup_kill(const char *leaf);
/* Whether pid is in a service leaf of this hearth: such a peer (a service
 * or its descendant) is never a control client. */
bool cgroup_pid_in_services(pid_t pid);
/* The same as a verdict that fails closed: 1 in a service leaf, 0 not
 * (or hearth has no cgroups), -1 when /proc/PID/cgroup cannot be read or
 * shows no cgroup2 line (the process is gone). */
int cgroup_pid_service(pid_t pid);
/* Whether pid runs in the service leaf leaf (or below it): 1 yes, 0 no,
 * -1 when that cannot be told (no cgroups, /proc/PID/cgroup unreadable or
 * without a cgroup2 line: the process is gone). Fails closed for callers
 * that accept only 1. */
int cgroup_pid_in_leaf(pid_t pid, const char *leaf);
/* Whether the leaf holds no process. */
bool cgroup_is_empty(const char *leaf);

/* The oom_kill count of a leaf's memory.events (processes the kernel's
 * OOM killer ended there). -1 when the leaf has no memory controller. */
int cgroup_oom_kills(const char *leaf, uint64_t *count);
/* CPU time used in the leaf so far (cpu.stat usage_usec, which cgroup2
 * keeps even without the cpu controller); -1 when unreadable. */
int cgroup_cpu_usec(const char *leaf, uint64_t *usec);
/* Bytes charged to the leaf now (memory.current); -1 without the memory
 * controller. */
int cgroup_memory_bytes(const char *leaf, uint64_t *bytes);
/* Processes and threads in the leaf now (pids.current); -1 without the
 * pids controller. */
int cgroup_pids_current(const char *leaf, uint64_t *count);
/* Bytes read and written by the leaf, summed over devices (io.stat
 * rbytes/wbytes); -1 without the io controller. */
int cgroup_io_bytes(const char *leaf, uint64_t *rbytes, uint64_t *wbytes);
/* Parses io.stat text; exposed for unit tests. */
int cgroup_parse_io_stat(const char *text, uint64_t *rbytes, uint64_t *wbytes);
/* Writes a service's limits (memory.max, memory.high, pids.max; 0 leaves
 * one untouched, at the kernel's "max") into its leaf. -1 with a message naming the
 * limits field when one cannot be applied, a controller missing from
 * service cgroups included: a configured limit is never silently lost. */
int cgroup_set_limits(const char *leaf, int64_t memory_max, int64_t memory_high, int64_t pids_max,
                      struct err *err);
/* Parses memory.events text; exposed for unit tests. */
int cgroup_parse_oom_kills(const char *text, uint64_t *count);

/* Forks a child that starts life inside leaf (clone3 with
 * CLONE_INTO_CGROUP, kernel 5.7+), so not even its first instructions run
 * outside it. Where the kernel cannot (older kernel, leaf NULL or empty,
 * leaf refused), it is a plain fork and *placed is false: the child then
 * has to join the leaf itself (cgroup.procs). ns_flags: the namespaces the
 * child is born in (CLONE_NEWPID: as PID 1 of a new pid namespace;
 * CLONE_NEWUSER with it: both, and the pid namespace owned by the new user
 * namespace; see contain_clone_flags), either way. Returns as fork()
 * does; -1 with the errno of the last attempt (EPERM, ENOSPC: a namespace
 * refused). */
pid_t cgroup_fork_into(const char *leaf, uint64_t ns_flags, bool *placed);
/* Freezing: the services directory is frozen as a whole (cgroup.freeze
 * is hierarchical), so one write covers every leaf and hearth itself,
 * in <tree>/init, keeps running. */
int cgroup_services_freeze(bool on);
/* From <tree>/services/cgroup.events: 1 once every process below is
 * frozen, 0 when not (yet), -1 on error (errno). The kernel reports the
 * change asynchronously, so freezers poll this with a deadline. */
int cgroup_services_frozen(void);
/* <tree>/services, or "" without cgroups. */
const char *cgroup_services_dir(void);
/* The services cgroup as nf_tables' `socket cgroupv2` match sees it: its
 * id, its level below the root of hearth's cgroup namespace, and the id of
 * the exec sessions' directory "@exec" below it (0 when there is none).
 * -1 without cgroups. */
int cgroup_services_match(uint64_t *svc_id, uint32_t *level, uint64_t *exec_id);
/* memory.max of the services directory: every service and exec session
 * together (-1 with errno; ENOENT without cgroups or the memory
 * controller). */
int cgroup_services_memory_max(int64_t bytes);
/* memory.max of the cgroup hearth was started in (a container's limit);
 * 0 when it has none ("max") or cannot be read. */
int64_t cgroup_own_memory_max(void);

/* The cgroups in hearth's tree, the tree's own directory included: a
 * figure that must not grow over a sandbox's life (metrics). -1 without
 * cgroups. */
int64_t cgroup_tree_count(void);

/* Removes the tree (non-vm modes, on exit); leaves must be empty. */
void cgroup_teardown(void);

#endif
