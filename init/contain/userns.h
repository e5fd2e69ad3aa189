/* userns: containment where hearth is root but holds no CAP_SYS_ADMIN (a
 * container under its runtime's default capabilities: podman, docker,
 * Kata, CubeSandbox). hearth cannot make a mount or pid namespace there,
 * but it can make a user namespace, and in one it owns every capability.
 * So each contained start is cloned with CLONE_NEWUSER together with its
 * pid and mount namespaces (contain_clone_flags), hearth writes the new
 * user namespace's maps (every uid and gid hearth has, each to itself:
 * a service's uid 10000 is uid 10000 outside too, and the files it makes
 * keep their owners), and the child, once told to go on, builds the same
 * containment as anywhere else. Its capabilities then reach only what its
 * user namespace owns: never hearth, the network or the container's
 * mounts.
 *
 * Where even a user namespace is refused (a seccomp profile, the
 * user.max_user_namespaces or kernel.unprivileged_userns_clone sysctl, a
 * kernel without them) nothing contained starts: userns_refused says
 * which setting the operator must change. */
#ifndef HEARTH_USERNS_H
#define HEARTH_USERNS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "err.h"

/* Whether contained starts need a user namespace: hearth is root without
 * CAP_SYS_ADMIN in its effective set (read once, and logged then). */
bool userns_needed(void);

/* In the parent, before the fork: the pipe the child waits on until its
 * maps are written (both ends close-on-exec). 0, or -1 with errno. */
int userns_pipe(int fds[2]);
/* In the parent, after the fork of pid: the identity maps of hearth's
 * own (/proc/self/uid_map, gid_map) written as the child's. setgroups
 * stays allowed: hearth writes the maps with CAP_SETGID, so the service
 * still takes its supplementary groups. 0, or -1 with errno and a message
 * (EPERM: hearth lacks CAP_SETUID or CAP_SETGID). */
int userns_map(pid_t pid, struct err *err);
/* The map a child gets from hearth's own (/proc/self/uid_map text):
 * each range "inside outside count" becomes "inside inside count", the
 * child's outside being hearth's inside. 0, or -1 with errno (ENODATA:
 * no range; E2BIG: out too small). Exposed for the unit tests. */
int userns_identity(const char *own, char *out, size_t outlen);
/* In the parent: tells the child how its set-up went (err 0: go on, else
 * the errno it fails with) and closes both ends; with pid < 0 (no child)
 * only closes them. fds are -1 afterwards. */
void userns_release(int fds[2], pid_t pid, int err);
/* In the child, first: waits for the parent's word. 0, or -1 with errno
 * (the parent's error; EPIPE when it said nothing). */
int userns_wait(int fds[2]);

/* After a clone with CLONE_NEWUSER failed with err: whether err is the
 * kernel refusing the user namespace (EPERM, ENOSPC, EINVAL, EUSERS). If
 * so it is recorded (userns_refusal) and msg says what is missing and
 * what the operator can change. A later start that gets its namespace
 * clears the record. */
bool userns_refused(int err, struct err *msg);
/* The recorded refusal, "" when there is none. */
const char *userns_refusal(void);
/* A start got its user namespace: the refusal is over. */
void userns_granted(void);

/* Whether a service in its own user namespace keeps the container's
 * /proc: the kernel mounts a fresh proc there only while some proc mount
 * of the namespace shows all of itself, and a runtime's masks (/proc/kcore
 * bound over, /proc/sys read-only) are mounts over it that the service's
 * namespace inherits locked. Read once from mountinfo. */
bool userns_proc_shared(void);
/* The same judged from mountinfo text, for the unit tests. */
bool userns_proc_shared_in(const char *mountinfo);

#endif
