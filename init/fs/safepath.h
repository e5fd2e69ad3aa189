/* safepath: the one way hearth opens a path in a tree an agent can write
 * (its home, its private skills, its log directory, resolv.conf's temp
 * name). Everything is resolved beneath a directory fd without following
 * any symbolic link (openat2 RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH, or
 * O_NOFOLLOW on each component where openat2 is missing or a container's
 * seccomp filter refuses it with EPERM), opened with
 * O_NONBLOCK | O_CLOEXEC | O_NOCTTY so a FIFO can never block PID 1, and
 * checked with fstat: a regular file where a file is expected, a
 * directory where a directory is. Modes and owners are then set on the
 * fd, never by name, and renames go by directory fd.
 *
 * Errors: -1 with errno and a reason in why (no path: the caller names
 * it, "unable to open PATH: WHY"). errno is ELOOP for a symbolic link in
 * the way, EXDEV for a path that would leave its directory ('..', an
 * absolute path), SAFEPATH_EWRONGTYPE for a FIFO, socket, device or
 * directory where a file is expected, SAFEPATH_EOWNER for a file hearth
 * would trust that belongs to someone else or has other hard links. */
#ifndef HEARTH_SAFEPATH_H
#define HEARTH_SAFEPATH_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "err.h"

#define SAFEPATH_EWRONGTYPE EMEDIUMTYPE
#define SAFEPATH_EOWNER EACCES

/* Whether rel is a path safepath accepts beneath a directory: not empty,
 * relative, shorter than PATH_MAX, no '..' component. Returns 0, or -1
 * with errno EXDEV (absolute or '..'), ENOENT (empty) or ENAMETOOLONG. */
int safepath_check(const char *rel);

/* Splits rel (checked as above) into its directory part and last
 * component: "a/b/c" -> "a/b" + "c", "c" -> "." + "c"; trailing slashes
 * are dropped. dir and leaf hold at least PATH_MAX bytes. */
int safepath_split(const char *rel, char *dir, char *leaf);

/* Opens dirfd/rel. flags: an access mode, optionally O_CREAT, O_EXCL,
 * O_APPEND, O_DIRECTORY (a directory is expected: opened read-only).
 * O_TRUNC is refused (EINVAL): truncate the fd once it is checked. */
int safepath_open(int dirfd, const char *rel, int flags, mode_t mode, struct err *err);

/* Opens a file hearth keeps writing to (a log, a marker): as
 * safepath_open, and when hearth creates it, it is owned by uid:gid; an
 * existing one must belong to uid or to root and have no other hard link
 * (else SAFEPATH_EOWNER), so a planted hard link to a root file is never
 * written. */
int safepath_open_owned(int dirfd, const char *rel, int flags, mode_t mode, uid_t uid, gid_t gid,
                        struct err *err);

/* Opens an absolute configured path the same way, resolved from "/"
 * without following a symbolic link anywhere on it. */
int safepath_open_abs(const char *path, int flags, mode_t mode, struct err *err);

/* Makes the directory dirfd/rel (the last component; the rest must
 * exist) owned by uid:gid with mode, and opens it; an existing directory
 * is opened as it is. *made tells whether it was created (may be NULL). */
int safepath_mkdir(int dirfd, const char *rel, mode_t mode, uid_t uid, gid_t gid, bool *made,
                   struct err *err);

/* mkdir -p of an absolute path, each missing level made with mode and
 * owner uid:gid, no symbolic link followed; returns the last level open
 * as a directory fd. */
int safepath_mkdir_p(const char *path, mode_t mode, uid_t uid, gid_t gid, struct err *err);

/* Tests: false forces the component-by-component fallback used where
 * the kernel has no openat2. */
void safepath_use_openat2(bool on);

#endif
