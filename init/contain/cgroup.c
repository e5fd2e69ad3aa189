#include "cgroup.h"

#include <dirent.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "err.h"
#include "kfile.h"
#include "log.h"
#include "mountinfo.h"
#include "timebase.h"

static char base[CGROUP_PATH_MAX];
static char services_dir[CGROUP_PATH_MAX];
static char mount_point[CGROUP_PATH_MAX];
/* The services directory's depth below the root of hearth's cgroup
 * namespace (the root is level 0). */
static uint32_t services_level;

bool cgroup_available(void) { return base[0] != 0; }

struct cg2_find {
    char *out;
    size_t outlen;
    int found;
};

static bool cg2_match(const struct mountinfo_entry *e, void *ctx)
{
    struct cg2_find *q = ctx;
    if (strcmp(e->fstype, "cgroup2") != 0)
        return true;
    snprintf(q->out, q->outlen, "%s", e->target);
    q->found = 0;
    return false;
}

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

/* Where cgroup2 is mounted: the two usual places by statfs first (the
 * unified layout, and the hybrid one's "unified"), else the first cgroup2
 * mount in /proc/self/mountinfo. The kernel formats mountinfo line by line
 * for every mount, a tenth of a millisecond or more before the first
 * service can start; a statfs is a few microseconds. */
static int find_cgroup2_mount(char *out, size_t outlen)
{
    static const char *const usual[] = {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"};
    for (size_t i = 0; i < sizeof(usual) / sizeof(usual[0]); i++) {
        struct statfs sf;
        if (statfs(usual[i], &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC) {
            snprintf(out, outlen, "%s", usual[i]);
            return 0;
        }
    }
    struct cg2_find q = {out, outlen, -1};
    if (mountinfo_each(cg2_match, &q) < 0)
        return -1;
    return q.found;
}

/* Our own cgroup v2 path, from the "0::" line of /proc/self/cgroup. */
static int own_cgroup(char *out, size_t outlen)
{
    char buf[4096];
    if (kfile_read("/proc/self/cgroup", buf, sizeof(buf)) < 0)
        return -1;
    char *save;
    for (char *l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        if (strncmp(l, "0::", 3) == 0) {
            snprintf(out, outlen, "%s", l + 3);
            return 0;
        }
    }
    errno = ENOENT;
    return -1;
}

/* Best effort: pass every controller the parent has down one level, so
 * service leaves get memory and cpu accounting where the host allows it.
 * One write per controller: the kernel applies a subtree_control write
 * all or nothing, so one controller it refuses (cpu with a realtime task
 * about, say) would otherwise take the memory and pids ones with it. */
static void enable_controllers(const char *dir)
{
    char path[CGROUP_PATH_MAX + 32], ctl[512], req[64];

    snprintf(path, sizeof(path), "%s/cgroup.controllers", dir);
    if (kfile_read(path, ctl, sizeof(ctl)) <= 0)
        return;
    snprintf(path, sizeof(path), "%s/cgroup.subtree_control", dir);
    char *save = NULL;
    for (char *c = strtok_r(ctl, " \n", &save); c; c = strtok_r(NULL, " \n", &save)) {
        snprintf(req, sizeof(req), "+%s", c);
        if (kfile_write(path, req) < 0)
            log_debug("unable to enable the %s controller in %s: %s", c, dir, strerror(errno));
    }
}

int cgroup_setup(bool vm_mode)
{
    char own[CGROUP_PATH_MAX];

    base[0] = 0;
    if (find_cgroup2_mount(mount_point, sizeof(mount_point)) < 0) {
        log_warn("no cgroup2 mount: services run without cgroups");
        return -1;
    }
    if (vm_mode) {
        snprintf(base, sizeof(base), "%s/hearth", mount_point);
        services_level = 2;
        /* A child sees only what its parent's subtree_control enables,
         * and a fresh root enables nothing. The root is exempt from the
         * no-internal-processes rule, so this works with hearth in it. */
        enable_controllers(mount_point);
    } else {
        uint32_t r = 0;
        if (own_cgroup(own, sizeof(own)) < 0) {
            log_warn("cgroup: unable to read /proc/self/cgroup: %s", strerror(errno));
            return -1;
        }
        /* A random suffix: several hearth instances may share one cgroup
         * and one pid number (each PID 1 of its own namespace). */
        if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r))
            r = (uint32_t)getpid() ^ (uint32_t)time(NULL);
        snprintf(base, sizeof(base), "%s%s/hearth.%08x", mount_point,
                 strcmp(own, "/") == 0 ? "" : own, r);
        services_level = 2;
        for (const char *p = own; *p; p++)
            if (*p == '/' && p[1] && p[1] != '/')
                services_level++;
    }
    if (mkdir(base, 0755) < 0 && errno != EEXIST) {
        log_warn("cgroup: unable to create cgroup %s: %s", base, strerror(errno));
        base[0] = 0;
        return -1;
    }
    /* hearth stays in the cgroup it was started in: base is a child of it,
     * so base holds no process and may enable controllers for the
     * services below. Moving itself into the tree would gain nothing and
     * cost the first cgroup migration of the boot, which waits for an RCU
     * grace period (about 10 ms here) before the first service can start.
     * In vm mode that cgroup is the root, which cannot be frozen. */
    enable_controllers(base);
    snprintf(services_dir, sizeof(services_dir), "%s/services", base);
    if (mkdir(services_dir, 0755) < 0 && errno != EEXIST) {
        log_warn("cgroup: unable to create cgroup %s: %s", services_dir, strerror(errno));
        base[0] = 0;
        return -1;
    }
    enable_controllers(services_dir);
    /* The exec sessions' directory exists from the start, so its id is
     * known before the first session (see cgroup_services_match). */
    char exec_dir[CGROUP_PATH_MAX + 8];
    snprintf(exec_dir, sizeof(exec_dir), "%s/@exec", services_dir);
    if (mkdir(exec_dir, 0755) < 0 && errno != EEXIST)
        log_warn("cgroup: unable to create cgroup %s: %s", exec_dir, strerror(errno));
    log_debug("cgroup tree at %s", base);
    return 0;
}

int cgroup_service_create(const char *name, char *out, size_t outlen)
{
    if (!base[0]) {
        errno = ENOTSUP;
        return -1;
    }
    if ((size_t)snprintf(out, outlen, "%s/%s", services_dir, name) >= outlen) {
        errno = ENAMETOOLONG;
        return -1;
    }
    if (mkdir(out, 0755) < 0 && errno != EEXIST)
        return -1;
    return 0;
}

int cgroup_service_recreate(const char *leaf)
{
    if (rmdir(leaf) < 0 && errno != ENOENT)
        return -1;
    if (mkdir(leaf, 0755) < 0 && errno != EEXIST)
        return -1;
    return 0;
}

void cgroup_service_remove(const char *leaf)
{
    if (leaf && leaf[0] && rmdir(leaf) < 0 && errno != ENOENT && errno != EBUSY)
        log_debug("unable to remove cgroup %s: %s", leaf, strerror(errno));
}

bool cgroup_is_empty(const char *leaf)
{
    char path[CGROUP_PATH_MAX + 32], buf[64];
    snprintf(path, sizeof(path), "%s/cgroup.procs", leaf);
    ssize_t n = kfile_read(path, buf, sizeof(buf));
    return n <= 0;
}

int cgroup_kill(const char *leaf)
{
    char path[CGROUP_PATH_MAX + 32];

    snprintf(path, sizeof(path), "%s/cgroup.kill", leaf);
    if (kfile_write(path, "1") == 0)
        return 0;
    /* Kernels before 5.14 have no cgroup.kill: signal each member. New
     * forks can race this loop, so callers repeat it until empty. */
    char buf[4096];
    snprintf(path, sizeof(path), "%s/cgroup.procs", leaf);
    if (kfile_read(path, buf, sizeof(buf)) < 0)
        return -1;
    char *save;
    for (char *l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        pid_t p = (pid_t)atoi(l);
        if (p > 1)
            kill(p, SIGKILL);
    }
    return 0;
}

/* 1 when /proc/PID/cgroup's unified line names dir (a cgroup2 directory
 * under the mount point) or a directory below it, 0 when it names another,
 * -1 when unreadable or without a unified line (the process is gone). */
static int pid_under(pid_t pid, const char *dir)
{
    char path[64], buf[4096], rel[CGROUP_PATH_MAX];

    snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
    if (kfile_read(path, buf, sizeof(buf)) <= 0)
        return -1;
    /* dir relative to the mount point is what the process's "0::" line
     * shows: hearth reads it, so the path is relative to hearth's cgroup
     * namespace even when the process has one of its own. */
    snprintf(rel, sizeof(rel), "%s", dir + strlen(mount_point));
    bool seen = false;
    char *save = NULL;
    for (char *l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        if (strncmp(l, "0::", 3) != 0)
            continue;
        seen = true;
        size_t n = strlen(rel);
        if (strncmp(l + 3, rel, n) == 0 && (l[3 + n] == '/' || l[3 + n] == 0))
            return 1;
    }
    /* No unified line (a process already past exit): not identified. */
    return seen ? 0 : -1;
}

int cgroup_pid_service(pid_t pid)
{
    if (!base[0])
        return 0;
    return pid_under(pid, services_dir);
}

int cgroup_pid_in_leaf(pid_t pid, const char *leaf)
{
    size_t ml = strlen(mount_point);
    if (!base[0] || !leaf || strncmp(leaf, mount_point, ml) != 0)
        return -1;
    return pid_under(pid, leaf);
}

bool cgroup_pid_in_services(pid_t pid)
{
    return cgroup_pid_service(pid) == 1;
}

int cgroup_parse_oom_kills(const char *text, uint64_t *count)
{
    /* Lines "KEY VALUE"; only oom_kill matters here. */
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (strncmp(l, "oom_kill ", 9) != 0)
            continue;
        char *end;
        errno = 0;
        unsigned long long v = strtoull(l + 9, &end, 10);
        if (errno || end == l + 9 || (*end && *end != '\n'))
            return -1;
        *count = v;
        return 0;
    }
    return -1;
}

/* The number after prefix at the start of leaf/file (cpu.stat's first
 * line, or a one-number file with prefix ""). */
static int read_u64(const char *leaf, const char *file, const char *prefix, uint64_t *out)
{
    char path[CGROUP_PATH_MAX + 32], buf[1024];
    size_t pl = strlen(prefix);
    snprintf(path, sizeof(path), "%s/%s", leaf, file);
    if (kfile_read(path, buf, sizeof(buf)) <= 0 || strncmp(buf, prefix, pl) != 0)
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(buf + pl, &end, 10);
    if (errno || end == buf + pl)
        return -1;
    *out = v;
    return 0;
}

int cgroup_cpu_usec(const char *leaf, uint64_t *usec)
{
    return read_u64(leaf, "cpu.stat", "usage_usec ", usec);
}

int cgroup_memory_bytes(const char *leaf, uint64_t *bytes)
{
    return read_u64(leaf, "memory.current", "", bytes);
}

int cgroup_pids_current(const char *leaf, uint64_t *count)
{
    return read_u64(leaf, "pids.current", "", count);
}

int cgroup_parse_io_stat(const char *text, uint64_t *rbytes, uint64_t *wbytes)
{
    *rbytes = *wbytes = 0;
    /* "MAJ:MIN rbytes=N wbytes=N rios=N ..." per device; summed. */
    for (const char *p = text; p && *p;) {
        const char *eol = strchr(p, '\n');
        size_t n = eol ? (size_t)(eol - p) : strlen(p);
        for (size_t i = 0; i < n; i++) {
            if (i > 0 && p[i - 1] != ' ')
                continue;
            uint64_t *dst = NULL;
            size_t kl = 0;
            if (n - i > 7 && strncmp(p + i, "rbytes=", 7) == 0)
                dst = rbytes, kl = 7;
            else if (n - i > 7 && strncmp(p + i, "wbytes=", 7) == 0)
                dst = wbytes, kl = 7;
            if (!dst)
                continue;
            char *end;
            errno = 0;
            unsigned long long v = strtoull(p + i + kl, &end, 10);
            if (errno || end == p + i + kl)
                return -1;
            *dst += v;
        }
        p = eol ? eol + 1 : NULL;
    }
    return 0;
}

int cgroup_io_bytes(const char *leaf, uint64_t *rbytes, uint64_t *wbytes)
{
    char path[CGROUP_PATH_MAX + 32], buf[8192];
    snprintf(path, sizeof(path), "%s/io.stat", leaf);
    /* An empty io.stat (no I/O yet) is 0 and 0; a missing one (no io
     * controller in the leaf) is unknown. */
    if (kfile_read(path, buf, sizeof(buf)) < 0)
        return -1;
    return cgroup_parse_io_stat(buf, rbytes, wbytes);
}

int cgroup_set_limits(const char *leaf, int64_t memory_max, int64_t memory_high, int64_t pids_max,
                      struct err *err)
{
    static const struct {
        const char *field, *file, *controller;
    } lim[] = {
        {"memory_max", "memory.max", "memory"},
        {"memory_high", "memory.high", "memory"},
        {"pids_max", "pids.max", "pids"},
    };
    const int64_t val[] = {memory_max, memory_high, pids_max};
    for (size_t i = 0; i < sizeof(lim) / sizeof(lim[0]); i++) {
        char path[CGROUP_PATH_MAX + 32], v[32];
        snprintf(path, sizeof(path), "%s/%s", leaf, lim[i].file);
        /* Unset stays the kernel's "max": the config cannot change
         * while hearth runs and a recreated leaf starts at "max". */
        if (val[i] <= 0)
            continue;
#ifdef HEARTH_MUTANT_NO_LIMITS
        /* A deliberately broken build for tests/vm/test_limits.py: the
         * limit tests must fail against it, or they prove nothing. */
        continue;
#endif
        snprintf(v, sizeof(v), "%lld", (long long)val[i]);
        if (kfile_write(path, v) == 0)
            continue;
        if (errno == ENOENT)
            err_set(err, "limits.%s: the %s controller is not enabled for service cgroups",
                    lim[i].field, lim[i].controller);
        else
            err_set(err, "limits.%s: unable to write %s: %s", lim[i].field, path,
                    strerror(errno));
        return -1;
    }
    return 0;
}

int cgroup_oom_kills(const char *leaf, uint64_t *count)
{
    char path[CGROUP_PATH_MAX + 32], buf[512];
    snprintf(path, sizeof(path), "%s/memory.events", leaf);
    if (kfile_read(path, buf, sizeof(buf)) < 0)
        return -1;
    return cgroup_parse_oom_kills(buf, count);
}

#ifndef SYS_clone3
#define SYS_clone3 435 /* the same number on every architecture */
#endif
#define HEARTH_CLONE_INTO_CGROUP 0x200000000ULL

/* struct clone_args up to the cgroup field (CLONE_ARGS_SIZE_VER2), spelt
 * out here: <linux/sched.h> clashes with the libc's <sched.h>. */
struct clone_args_v2 {
    uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
    uint64_t set_tid, set_tid_size, cgroup;
};

static bool clone3_unusable; /* the kernel has no clone3 or no CLONE_INTO_CGROUP */

pid_t cgroup_fork_into(const char *leaf, uint64_t ns_flags, bool *placed)
{
    *placed = false;
    if (leaf && leaf[0] && !clone3_unusable) {
        int dfd = open(leaf, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            struct clone_args_v2 a;
            memset(&a, 0, sizeof(a));
            a.flags = HEARTH_CLONE_INTO_CGROUP | ns_flags;
            a.exit_signal = SIGCHLD;
            a.cgroup = (uint64_t)dfd;
            /* No CLONE_VM and no stack: the child is a copy, as with fork;
             * it only makes plain syscalls before exec. */
            long r = syscall(SYS_clone3, &a, sizeof(a));
            /* The child is in its leaf too: it must not move itself again,
             * which would cost a cgroup migration (an RCU grace period)
             * between fork and exec. */
            if (r == 0) {
                *placed = true;
                return 0;
            }
            int e = errno;
            close(dfd);
            if (r > 0) {
                *placed = true;
                return (pid_t)r;
            }
            /* EINVAL with namespace flags may be a namespace this kernel
             * lacks: clone below says so again, and clone3 stays usable. */
            if (e == ENOSYS || e == E2BIG || (e == EINVAL && !ns_flags)) {
                clone3_unusable = true;
                log_debug("clone3 into a cgroup is not available (%s): forking", strerror(e));
            } else {
                log_debug("clone3 into %s failed (%s): forking", leaf, strerror(e));
            }
        } else {
            log_debug("unable to open %s: %s", leaf, strerror(errno));
        }
    }
    /* clone without a stack is fork with flags; hearth has one thread,
     * and the child only makes plain syscalls before it execs. */
    if (ns_flags)
        return (pid_t)syscall(SYS_clone, SIGCHLD | (unsigned long)ns_flags, 0, 0, 0, 0);
    return fork();
}

const char *cgroup_services_dir(void) { return base[0] ? services_dir : ""; }

int cgroup_services_match(uint64_t *svc_id, uint32_t *level, uint64_t *exec_id)
{
    struct stat st;
    char exec_dir[CGROUP_PATH_MAX + 8];
    if (!base[0] || stat(services_dir, &st) < 0) {
        errno = base[0] ? errno : ENOENT;
        return -1;
    }
    /* A cgroup2 directory's inode number is the kernel's cgroup id. */
    *svc_id = (uint64_t)st.st_ino;
    *level = services_level;
    snprintf(exec_dir, sizeof(exec_dir), "%s/@exec", services_dir);
    *exec_id = stat(exec_dir, &st) == 0 ? (uint64_t)st.st_ino : 0;
    return 0;
}

int cgroup_services_memory_max(int64_t bytes)
{
    char path[CGROUP_PATH_MAX + 32], v[32];
    if (!base[0]) {
        errno = ENOENT;
        return -1;
    }
    snprintf(path, sizeof(path), "%s/memory.max", services_dir);
    snprintf(v, sizeof(v), "%lld", (long long)bytes);
#ifdef HEARTH_MUTANT_NO_LIMITS
    return 0;
#endif
    return kfile_write(path, v);
}

int64_t cgroup_own_memory_max(void)
{
    char path[CGROUP_PATH_MAX + 32], buf[64];
    const char *slash = strrchr(base, '/');
    if (!base[0] || !slash)
        return 0;
    /* base is a child of the cgroup hearth was started in. */
    snprintf(path, sizeof(path), "%.*s/memory.max", (int)(slash - base), base);
    if (kfile_read(path, buf, sizeof(buf)) <= 0 || strncmp(buf, "max", 3) == 0)
        return 0;
    return strtoll(buf, NULL, 10);
}

int cgroup_services_freeze(bool on)
{
    char path[CGROUP_PATH_MAX + 32];

    if (!base[0]) {
        errno = ENOTSUP;
        return -1;
    }
    snprintf(path, sizeof(path), "%s/cgroup.freeze", services_dir);
    return kfile_write(path, on ? "1" : "0");
}

int cgroup_services_frozen(void)
{
    char path[CGROUP_PATH_MAX + 32], buf[256];

    if (!base[0]) {
        errno = ENOTSUP;
        return -1;
    }
    snprintf(path, sizeof(path), "%s/cgroup.events", services_dir);
    if (kfile_read(path, buf, sizeof(buf)) < 0)
        return -1;
    char *save;
    for (char *l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
        if (strncmp(l, "frozen ", 7) == 0)
            return l[7] == '1';
    errno = ENOENT; /* kernels before 5.2 have no freezer in cgroup2 */
    return -1;
}

/* Removes a cgroup directory and the ones below it (exec leaves sit one
 * level down, in services/@exec). A process killed a moment ago still
 * holds its leaf until it has finished exiting, so EBUSY is retried until
 * the shared deadline: hearth is on its way out and nothing else waits on
 * its loop, and a leaf left behind would outlive it on the host. */
static void remove_tree(const char *path, int depth, int64_t deadline_us)
{
    if (depth < 3) {
        DIR *d = opendir(path);
        if (d) {
            struct dirent *e;
            char sub[CGROUP_PATH_MAX + 32];
            while ((e = readdir(d))) {
                if (e->d_type != DT_DIR || e->d_name[0] == '.')
                    continue;
                if (snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name) < (int)sizeof(sub))
                    remove_tree(sub, depth + 1, deadline_us);
            }
            closedir(d);
        }
    }
    while (rmdir(path) < 0) {
        if (errno == ENOENT)
            return;
        if (errno != EBUSY || mono_us() >= deadline_us) {
            log_warn("cgroup: unable to remove %s: %s", path, strerror(errno));
            return;
        }
        nanosleep(&(struct timespec){.tv_nsec = 5 * 1000 * 1000}, NULL);
    }
}

/* Directories at path and below, to the depth the tree has (base,
 * services, a leaf or @exec, an exec session's leaf). */
static int64_t count_tree(const char *path, int depth)
{
    int64_t n = 1;
    DIR *d = depth < 4 ? opendir(path) : NULL;
    if (!d)
        return n;
    struct dirent *e;
    char sub[CGROUP_PATH_MAX + 32];
    while ((e = readdir(d))) {
        if (e->d_type != DT_DIR || e->d_name[0] == '.')
            continue;
        if (snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name) < (int)sizeof(sub))
            n += count_tree(sub, depth + 1);
    }
    closedir(d);
    return n;
}

int64_t cgroup_tree_count(void)
{
    return base[0] ? count_tree(base, 0) : -1;
}

void cgroup_teardown(void)
{
    if (!base[0])
        return;
    remove_tree(base, 0, mono_us() + 500 * 1000);
}
