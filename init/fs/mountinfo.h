/* mountinfo: one reader of /proc/self/mountinfo for the modules that ask
 * what is mounted where (the cgroup2 mount, power-off unmounting, the
 * persistent mounts), and one watch on it for the mounts others make
 * (the platform's). Paths come back with the kernel's octal escapes
 * (\040 for a space) undone. */
#ifndef HEARTH_MOUNTINFO_H
#define HEARTH_MOUNTINFO_H

#include <stdbool.h>

struct ev_loop;

struct mountinfo_entry {
    int id;             /* the mount's id: a new mount at the same place has another */
    const char *root;   /* the directory of its filesystem mounted there ("/", or a bind's) */
    const char *target; /* mount point */
    const char *opts;   /* per-mount options: "rw,nosuid,..." */
    const char *fstype;
    const char *source;
};

/* Calls fn for each mount in the kernel's order (parents before the
 * mounts below them) until fn returns false. The entry's strings live
 * until fn returns. A line longer than the 4 KiB line buffer is still
 * reported when its head holds every field up to the source (the long
 * part is then the superblock options, as an overlay's layer list); one
 * whose head does not is skipped. Returns -1 with errno when the file
 * cannot be read, else 0. */
int mountinfo_each(bool (*fn)(const struct mountinfo_entry *e, void *ctx), void *ctx);
/* The same, and *skipped counts the lines that could not be reported, for
 * a caller that must assume the worst of a mount it did not see. */
int mountinfo_scan(bool (*fn)(const struct mountinfo_entry *e, void *ctx), void *ctx,
                   unsigned *skipped);

/* The id of the mount path is in, as the path resolves now (statx's
 * STATX_MNT_ID, Linux 5.8+, without following a last link and without
 * asking a network or FUSE filesystem's server): a mount's line in the
 * table names its mount point even when a later mount over it or over a
 * parent hides it, and this id tells the visible one. -1 where the
 * kernel cannot say, 0 when path does not resolve (nothing is mounted
 * there). */
long long mountinfo_mount_id(const char *path);

/* Parses one mountinfo line in place (the fields are cut out of it and
 * unescaped); false when the line is malformed. Exposed for the tests. */
bool mountinfo_parse(char *line, struct mountinfo_entry *e);

/* Calls fn (from the loop) after the mount table of hearth's mount
 * namespace may have changed: a mount or unmount by anyone, hearth
 * included, or one propagated in from another namespace. Without
 * polling: the kernel flags /proc/self/mountinfo with POLLPRI|POLLERR on
 * each change, which libev's epoll backend does not ask for (EPOLLIN
 * is always set on that file), so the file sits in an epoll set of its
 * own, registered for EPOLLPRI, whose fd the loop watches for reading.
 * fn may be called when nothing changed (once from the loop's first
 * turn, whatever happened); it reads the table again. One watch per
 * process. Returns -1 with errno when it cannot be set up. */
int mountinfo_watch(struct ev_loop *loop, void (*fn)(void));
/* Ends the watch (nothing when there is none). */
void mountinfo_unwatch(void);

#endif
