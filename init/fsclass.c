#include "fsclass.h"

#include <stdio.h>
#include <string.h>

#include "mountinfo.h"

/* Served by the guest kernel itself: memory, its own block devices, or
 * kernel state. autofs is absent on purpose (a lookup may wait for an
 * automount daemon), and so is fuseblk (a FUSE server). An overlay is
 * counted by its own type: hearth layers none over a share. */
static const char *const local_types[] = {
    "tmpfs",     "ramfs",    "rootfs",  "devtmpfs", "proc",     "sysfs",     "cgroup",
    "cgroup2",   "devpts",   "mqueue",  "debugfs",  "tracefs",  "securityfs", "pstore",
    "bpf",       "configfs", "hugetlbfs", "efivarfs", "binfmt_misc", "nsfs",  "fusectl",
    "overlay",   "ext2",     "ext3",    "ext4",     "xfs",      "btrfs",     "vfat",
    "msdos",     "exfat",    "f2fs",    "squashfs", "erofs",    "iso9660",   "udf",
    NULL,
};

bool fsclass_local_type(const char *fstype)
{
    for (size_t i = 0; local_types[i]; i++)
        if (strcmp(fstype, local_types[i]) == 0)
            return true;
    return false;
}

int fsclass_normalize(const char *abs, char *out, size_t n)
{
    size_t o = 0;

    if (!abs || abs[0] != '/' || n < 2)
        return -1;
    for (const char *s = abs; *s;) {
        while (*s == '/')
            s++;
        const char *e = s + strcspn(s, "/");
        size_t len = (size_t)(e - s);
        if (len == 0)
            break;
        if (len == 2 && s[0] == '.' && s[1] == '.')
            return -1;
        if (!(len == 1 && s[0] == '.')) {
            if (o + 1 + len + 1 > n)
                return -1;
            out[o++] = '/';
            memcpy(out + o, s, len);
            o += len;
        }
        s = e;
    }
    if (o == 0)
        out[o++] = '/';
    out[o] = '\0';
    return 0;
}

bool fsclass_on_path(const char *path, const char *mnt)
{
    size_t ml = strlen(mnt);
    if (ml == 1 && mnt[0] == '/')
        return true;
    return strncmp(path, mnt, ml) == 0 && (path[ml] == '\0' || path[ml] == '/');
}

struct scan {
    const char *path;
    unsigned flags;
    struct fsclass_hit *hit;
    bool found;
};

static void set_hit(struct fsclass_hit *hit, const char *target, const char *fstype)
{
    snprintf(hit->target, sizeof(hit->target), "%s", target);
    snprintf(hit->fstype, sizeof(hit->fstype), "%s", fstype);
}

static bool scan_one(const struct mountinfo_entry *e, void *ctx)
{
    struct scan *s = ctx;
    char mnt[4096];

    if (fsclass_local_type(e->fstype))
        return true;
    /* A mount point the kernel could not show as a plain path (one
     * outside hearth's root) is compared as shown: it can only fail to
     * match, and then it is not reachable by path anyway. */
    if (fsclass_normalize(e->target, mnt, sizeof(mnt)) < 0)
        snprintf(mnt, sizeof(mnt), "%s", e->target);
    bool reach = (s->flags & FSCLASS_FOLLOW) || fsclass_on_path(s->path, mnt) ||
                 ((s->flags & FSCLASS_BELOW) && fsclass_on_path(mnt, s->path));
    if (!reach)
        return true;
    set_hit(s->hit, e->target, e->fstype);
    s->found = true;
    return false;
}

int fsclass_path(const char *abs, unsigned flags, struct fsclass_hit *hit)
{
    char path[4096];
    unsigned skipped = 0;

    set_hit(hit, "", "");
    if (fsclass_normalize(abs, path, sizeof(path)) < 0) {
        set_hit(hit, abs, "path not normalised");
        return 1;
    }
    struct scan s = {.path = path, .flags = flags, .hit = hit};
    if (mountinfo_scan(scan_one, &s, &skipped) < 0) {
        set_hit(hit, "", "unreadable mount table");
        return 1;
    }
    if (s.found)
        return 1;
    if (skipped) {
        set_hit(hit, "", "unreadable mount-table line");
        return 1;
    }
    return 0;
}
