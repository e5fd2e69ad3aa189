/* fsclass: whether resolving a path may reach a filesystem whose answers
 * come from somewhere PID 1 cannot vouch for (a host share over 9p or
 * virtio-fs, FUSE, NFS...). A stalled file server there blocks every
 * system call on it in the kernel for as long as the server likes, so the
 * caller (the files.* methods) runs such work in a child process.
 *
 * The decision never touches the filesystem in question: it reads the
 * mount table (/proc/self/mountinfo) and compares mount points with the
 * path, lexically. It errs towards "may hang": an unknown filesystem
 * type, a mount-table line it could not read, or the table itself not
 * readable all count as a share. */
#ifndef HEARTH_FSCLASS_H
#define HEARTH_FSCLASS_H

#include <stdbool.h>
#include <stddef.h>

/* Resolution follows symbolic links: a link may lead anywhere, so every
 * non-local mount in the namespace counts. */
#define FSCLASS_FOLLOW 1u
/* The work also looks beneath the path (a listing stats each entry, a
 * recursive removal opens subdirectories): mounts below it count too. */
#define FSCLASS_BELOW 2u

/* The first mount found that makes a path count as a share. */
struct fsclass_hit {
    char target[160]; /* its mount point (cut to fit), "" when none */
    char fstype[32];
};

/* Filesystem types served by the guest's own kernel from memory or its
 * own block devices (tmpfs, ext4, overlay, proc...). Anything else,
 * including an unknown type, is a share. */
bool fsclass_local_type(const char *fstype);

/* "//a/./b/" -> "/a/b" in out (n bytes). -1 for a relative path, a ".."
 * component (not resolved lexically: it could climb out of a link) or a
 * result that does not fit. */
int fsclass_normalize(const char *abs, char *out, size_t n);

/* 1 when resolving abs (with flags) may reach a filesystem that is not
 * local, hit saying which (a mount, or a reason in fstype: "unreadable
 * mount table"); 0 when every mount it can reach is local. */
int fsclass_path(const char *abs, unsigned flags, struct fsclass_hit *hit);

#endif
