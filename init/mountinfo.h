/* mountinfo: one reader of /proc/self/mountinfo for the modules that ask
 * what is mounted where (the cgroup2 mount, power-off unmounting, the
 * persistent mounts). Paths come back with the kernel's octal escapes
 * (\040 for a space) undone. */
#ifndef HEARTH_MOUNTINFO_H
#define HEARTH_MOUNTINFO_H

#include <stdbool.h>

struct mountinfo_entry {
    const char *root;   /* the directory of the filesystem mounted there */
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

/* Parses one mountinfo line in place (the fields are cut out of it and
 * unescaped); false when the line is malformed. Exposed for the tests. */
bool mountinfo_parse(char *line, struct mountinfo_entry *e);

#endif
