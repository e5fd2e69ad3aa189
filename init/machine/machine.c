#include "machine.h"

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "log.h"
#include "mountinfo.h"

struct api_mount {
    const char *source;
    const char *target;
    const char *type;
    unsigned long flags;
    const char *data;
    mode_t mode; /* for mkdir of the target */
};

/* The order matters: /dev before /dev/pts and /dev/shm, /sys before its
 * cgroup2 mount point. */
static const struct api_mount api_mounts[] = {
    {"proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL, 0555},
    {"sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL, 0555},
    {"devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755", 0755},
    {"devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "gid=5,mode=0620,ptmxmode=0666", 0755},
    {"tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777", 01777},
    {"tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755", 0755},
    {"tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777", 01777},
    {"cgroup2", "/sys/fs/cgroup", "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC, "nsdelegate", 0555},
};

/* A target is "already mounted" when it is a mount point: its device
 * differs from its parent's, or it is the root of the filesystem. */
static int is_mount_point(const char *path)
{
    struct stat a, b;
    char parent[256];

    if (stat(path, &a) < 0)
        return 0;
    snprintf(parent, sizeof(parent), "%s/..", path);
    if (stat(parent, &b) < 0)
        return 0;
    return a.st_dev != b.st_dev || a.st_ino == b.st_ino;
}

int machine_mount_api(void)
{
    int failures = 0;

    for (size_t i = 0; i < sizeof(api_mounts) / sizeof(api_mounts[0]); i++) {
        const struct api_mount *m = &api_mounts[i];
        if (mkdir(m->target, m->mode) < 0 && errno != EEXIST) {
            log_warn("machine: unable to create %s: %s", m->target, strerror(errno));
            failures++;
            continue;
        }
        if (is_mount_point(m->target)) {
            log_debug("%s already mounted", m->target);
            continue;
        }
        if (mount(m->source, m->target, m->type, m->flags, m->data) < 0) {
            /* nsdelegate is newer than cgroup2 itself. */
            if (errno == EINVAL && m->data && strcmp(m->type, "cgroup2") == 0 &&
                mount(m->source, m->target, m->type, m->flags, NULL) == 0)
                continue;
            log_warn("machine: unable to mount %s on %s: %s", m->type, m->target, strerror(errno));
            failures++;
        }
    }
    /* The console links some programs expect. */
    symlink("/proc/self/fd", "/dev/fd");
    symlink("/proc/self/fd/0", "/dev/stdin");
    symlink("/proc/self/fd/1", "/dev/stdout");
    symlink("/proc/self/fd/2", "/dev/stderr");
    return failures;
}

int machine_kmsg_unlimit(void)
{
    int fd = open("/proc/sys/kernel/printk_devkmsg", O_WRONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return -1;
    ssize_t n = write(fd, "on\n", 3);
    int saved = errno;
    close(fd);
    errno = saved;
    return n == 3 ? 0 : -1;
}

int machine_set_hostname(const char *name)
{
    if (sethostname(name, strlen(name)) < 0) {
        log_warn("machine: unable to set hostname %s: %s", name, strerror(errno));
        return -1;
    }
    log_debug("hostname %s", name);
    return 0;
}

int machine_loopback_up(void)
{
    struct ifreq ifr;
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

    if (fd < 0) {
        log_warn("machine: unable to bring lo up (socket): %s", strerror(errno));
        return -1;
    }
    memset(&ifr, 0, sizeof(ifr));
    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
    if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0) {
        log_warn("machine: unable to bring lo up: %s", strerror(errno));
        close(fd);
        return -1;
    }
    if (!(ifr.ifr_flags & IFF_UP)) {
        ifr.ifr_flags |= IFF_UP;
        if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0) {
            log_warn("machine: unable to bring lo up: %s", strerror(errno));
            close(fd);
            return -1;
        }
    }
    close(fd);
    return 0;
}

struct unmount_list {
    char targets[64][256];
    int n;
};

static bool unmount_collect(const struct mountinfo_entry *e, void *ctx)
{
    struct unmount_list *l = ctx;
    const char *mp = e->target;
    if (strcmp(mp, "/") == 0 || strncmp(mp, "/proc", 5) == 0 || strncmp(mp, "/sys", 4) == 0 ||
        strncmp(mp, "/dev", 4) == 0)
        return true;
    snprintf(l->targets[l->n++], sizeof(l->targets[0]), "%s", mp);
    return l->n < 64;
}

/* Unmounts everything below / that is not an API filesystem, deepest
 * first (reverse mountinfo order), a bounded number of passes. Busy ones
 * are detached lazily so power-off never waits on them. */
static void unmount_all(void)
{
    static struct unmount_list l;
    char (*targets)[256] = l.targets;

    l.n = 0;
    if (mountinfo_each(unmount_collect, &l) < 0)
        return;
    int n = l.n;
    for (int i = n - 1; i >= 0; i--) {
        if (umount2(targets[i], 0) < 0 && errno != EINVAL && errno != ENOENT) {
            log_warn("machine: unable to unmount %s: %s; detaching", targets[i], strerror(errno));
            umount2(targets[i], MNT_DETACH);
        }
    }
    mount(NULL, "/", NULL, MS_REMOUNT | MS_RDONLY, NULL);
}

void machine_power(enum shutdown_action action)
{
    sync();
    unmount_all();
    sync();
    log_info("%s", action == SHUTDOWN_REBOOT ? "rebooting" : "powering off");
    if (reboot(action == SHUTDOWN_REBOOT ? RB_AUTOBOOT : RB_POWER_OFF) < 0)
        log_error("machine: unable to %s: %s", action == SHUTDOWN_REBOOT ? "reboot" : "power off",
                  strerror(errno));
}
