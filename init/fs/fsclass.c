#include "fsclass.h"

#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mountinfo.h"
#include "pathname.h"

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

/* The non-local mounts, kept between calls: reading the whole mount
 * table costs more than a small files.* call itself. A descriptor of
 * mountinfo kept open tells when the table changed (poll reports
 * POLLPRI once per change), and only then is it read again. */
struct far_mount {
    char *target; /* normalised */
    char fstype[32];
};

static struct {
    bool opened;          /* poll_fd was tried */
    int poll_fd;          /* -1 when mountinfo cannot be watched */
    bool valid;
    struct far_mount *v;
    size_t n, cap;
    unsigned skipped;     /* lines that could not be read: assume the worst */
} cache;

static void cache_clear(void)
{
    for (size_t i = 0; i < cache.n; i++)
        free(cache.v[i].target);
    cache.n = 0;
    cache.valid = false;
}

static bool collect(const struct mountinfo_entry *e, void *ctx)
{
    char mnt[4096];
    bool *oom = ctx;

    if (fsclass_local_type(e->fstype))
        return true;
    /* A mount point the kernel could not show as a plain path (one
     * outside hearth's root) is kept as shown: it can only fail to
     * match, and then it is not reachable by path anyway. */
    if (fsclass_normalize(e->target, mnt, sizeof(mnt)) < 0)
        snprintf(mnt, sizeof(mnt), "%s", e->target);
    if (cache.n == cache.cap) {
        size_t nc = cache.cap ? cache.cap * 2 : 16;
        struct far_mount *nv = realloc(cache.v, nc * sizeof(*nv));
        if (!nv) {
            *oom = true;
            return false;
        }
        cache.v = nv;
        cache.cap = nc;
    }
    struct far_mount *m = &cache.v[cache.n];
    if (!(m->target = strdup(mnt))) {
        *oom = true;
        return false;
    }
    snprintf(m->fstype, sizeof(m->fstype), "%s", e->fstype);
    cache.n++;
    return true;
}

/* Whether the mount table changed since it was last read (or cannot be
 * watched, in which case it is read every time). */
static bool table_changed(void)
{
    if (!cache.opened || cache.poll_fd < 0) {
        /* Tried again until it opens (before /proc is mounted it cannot). */
        cache.opened = true;
        cache.poll_fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
        return true;
    }
    if (!cache.valid)
        return true;
    struct pollfd pf = {.fd = cache.poll_fd, .events = POLLPRI};
    return poll(&pf, 1, 0) != 0;
}

static int refresh(void)
{
    bool oom = false;

    if (!table_changed())
        return 0;
    cache_clear();
    if (mountinfo_scan(collect, &oom, &cache.skipped) < 0 || oom) {
        cache_clear();
        return -1;
    }
    cache.valid = true;
    return 0;
}

static void set_hit(struct fsclass_hit *hit, const char *target, const char *fstype)
{
    snprintf(hit->target, sizeof(hit->target), "%s", target);
    snprintf(hit->fstype, sizeof(hit->fstype), "%s", fstype);
}

int fsclass_path(const char *abs, unsigned flags, struct fsclass_hit *hit)
{
    char path[4096];

    set_hit(hit, "", "");
    if (fsclass_normalize(abs, path, sizeof(path)) < 0) {
        set_hit(hit, abs, "path not normalised");
        return 1;
    }
    if (refresh() < 0) {
        set_hit(hit, "", "unreadable mount table");
        return 1;
    }
    for (size_t i = 0; i < cache.n; i++) {
        const char *mnt = cache.v[i].target;
        if ((flags & FSCLASS_FOLLOW) || pathname_at_or_under(path, mnt) ||
            ((flags & FSCLASS_BELOW) && pathname_at_or_under(mnt, path))) {
            set_hit(hit, mnt, cache.v[i].fstype);
            return 1;
        }
    }
    if (cache.skipped) {
        set_hit(hit, "", "unreadable mount-table line");
        return 1;
    }
    return 0;
}
