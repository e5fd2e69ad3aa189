#include "contain.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/capability.h>

#include "err.h"
#include "lines.h"
#include "log.h"
#include "mountinfo.h"
#include "nstemplate.h"
#include "pathname.h"
#include "safepath.h"
#include "userns.h"

#ifndef CLONE_NEWCGROUP
#define CLONE_NEWCGROUP 0x02000000
#endif
#ifndef SYS_getdents64
#define SYS_getdents64 217
#endif
#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_RAISE 2
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif

#define BIT(n) (UINT64_C(1) << (n))

/* Capabilities with which a service could undo what hearth set up: the
 * egress ruleset and raw frames (NET_ADMIN, NET_RAW), mounts and
 * namespaces (SYS_ADMIN), hearth's memory (SYS_PTRACE), the kernel
 * itself (SYS_MODULE, SYS_RAWIO, BPF, PERFMON), the machine (SYS_BOOT,
 * SYS_TIME), files by handle past any mount (DAC_READ_SEARCH), device
 * nodes for the raw disks (MKNOD), and the security modules
 * (MAC_ADMIN, MAC_OVERRIDE). */
static const int dangerous[] = {
    CAP_NET_ADMIN, CAP_NET_RAW,  CAP_SYS_ADMIN, CAP_SYS_PTRACE,      CAP_SYS_MODULE,
    CAP_SYS_RAWIO, CAP_BPF,      CAP_PERFMON,   CAP_SYS_BOOT,        CAP_SYS_TIME,
    CAP_DAC_READ_SEARCH, CAP_MKNOD, CAP_MAC_ADMIN, CAP_MAC_OVERRIDE,
};

/* The OCI runtimes' default masked paths: a file gets /dev/null over it,
 * a directory an empty read-only tmpfs. */
const char *const contain_masked[] = {
    "/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
    "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/proc/interrupts",
    "/sys/firmware", "/sys/devices/virtual/powercap", NULL,
};
/* Which of them are directories on the kernels hearth knows (the mask
 * still fits itself to what it finds). */
static bool masked_dir(const char *path)
{
    return strcmp(path, "/proc/acpi") == 0 || strcmp(path, "/proc/scsi") == 0 ||
           strncmp(path, "/sys/", 5) == 0;
}

/* Read-only in a service's namespace. All of /sys (sysfs files are
 * guarded by their mode only: /sys/power/state, module parameters, and
 * /sys/fs/cgroup with hearth's own cgroup.procs and cgroup.freeze), and
 * the /proc entries that reach the kernel's settings. */
const char *const contain_readonly[] = {
    "/sys", "/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs",
    "/proc/asound", NULL,
};

/* ---- policy ---- */

void contain_policy_of(const struct service_config *c, struct contain_policy *out)
{
    *out = (c->settings ? c->settings : svc_config_defaults())->contain;
}

uint64_t contain_caps(const struct contain_policy *pol, bool root)
{
    uint64_t keep = pol->keep_given ? pol->keep : root ? svc_config_default_caps : 0;
    return keep & ~pol->drop;
}

static void add_reason(char *buf, size_t len, int *n, const char *what, const char *name)
{
    size_t used = strlen(buf);
    if (used < len)
        snprintf(buf + used, len - used, "%s%s%s", *n ? ", " : "", what, name);
    (*n)++;
}

int contain_privileged(const struct contain_policy *pol, char *buf, size_t len)
{
    int n = 0;
    /* The default set holds none of the dangerous ones, so whether the
     * service is root does not change the verdict: use the larger set. */
    uint64_t caps = contain_caps(pol, true);
    static const char *const names[] = {
        [CAP_NET_ADMIN] = "NET_ADMIN", [CAP_NET_RAW] = "NET_RAW", [CAP_SYS_ADMIN] = "SYS_ADMIN",
        [CAP_SYS_PTRACE] = "SYS_PTRACE", [CAP_SYS_MODULE] = "SYS_MODULE",
        [CAP_SYS_RAWIO] = "SYS_RAWIO", [CAP_BPF] = "BPF", [CAP_PERFMON] = "PERFMON",
        [CAP_SYS_BOOT] = "SYS_BOOT", [CAP_SYS_TIME] = "SYS_TIME",
        [CAP_DAC_READ_SEARCH] = "DAC_READ_SEARCH", [CAP_MKNOD] = "MKNOD",
        [CAP_MAC_ADMIN] = "MAC_ADMIN", [CAP_MAC_OVERRIDE] = "MAC_OVERRIDE",
    };

    if (len)
        buf[0] = 0;
    for (size_t i = 0; i < sizeof(dangerous) / sizeof(dangerous[0]); i++)
        if (caps & BIT(dangerous[i]))
            add_reason(buf, len, &n, "keeps CAP_", names[dangerous[i]]);
    if (!pol->isolation)
        add_reason(buf, len, &n, "isolation off", "");
    if (!pol->seccomp)
        add_reason(buf, len, &n, "seccomp off", "");
    /* Without isolation the root is hearth's own anyway. */
    if (pol->isolation && !pol->ro_root)
        add_reason(buf, len, &n, "read_only_root off", "");
    return n;
}

/* ---- the parent's side ---- */

static int root_shared_line(char *line, bool whole, void *ctx)
{
    /* id parent dev root target ... : field 5 is the mount point */
    char *s = line, *field[6] = {0};
    for (int k = 0; k < 6 && s; k++)
        field[k] = strsep(&s, " ");
    /* (a line cut short still holds its optional fields: they come
     * before the filesystem's, which an overlay's layers make long) */
    if (!field[4] || strcmp(field[4], "/") != 0 || !s)
        return 0;
    /* The optional fields end at a lone "-" (there may be none). */
    char *dash = strncmp(s, "- ", 2) == 0 ? s : strstr(s, " - ");
    if (dash)
        *dash = 0;
    *(bool *)ctx = strstr(s, "shared:") != NULL; /* the last / mount wins */
    return 0;
}

/* Whether the mount at / carries a "shared:N" tag in mountinfo. */
static bool root_is_shared(void)
{
    char line[4096];
    bool shared = false;

    if (lines_each("/proc/self/mountinfo", line, sizeof(line), root_shared_line, &shared) < 0)
        return false;
    return shared;
}

/* Whether mounts hearth adds later reach the services' namespaces (and
 * the template): -1 not known yet. */
static int propagates = -1;
/* Whether contain_host_setup found the mount namespace hearth's own. */
static bool owned;

bool contain_mounts_propagate(void)
{
    /* Where hearth did not make its mounts shared itself (supervisor
     * mode), / says; read once, when first asked. */
    if (propagates < 0)
        propagates = root_is_shared();
    return propagates == 1;
}

/* Whether hearth's mount namespace is its own: as PID 1 it is (the
 * machine's, or the one the runtime made for the container). Beside
 * another init (a container's entrypoint in a shared pid namespace) it
 * is when it is not that init's: the runtime gave the container one of
 * its own. When the other init's cannot be read (no CAP_SYS_PTRACE), a
 * process told it is a container's believes it. */
static bool owns_mount_ns(void)
{
    struct stat self, init;
    if (getpid() == 1)
        return true;
    if (stat("/proc/self/ns/mnt", &self) < 0)
        return false;
    if (stat("/proc/1/ns/mnt", &init) < 0)
        return errno == EACCES || errno == EPERM;
    return self.st_ino != init.st_ino || self.st_dev != init.st_dev;
}

void contain_host_setup(bool supervisor)
{
    static bool done;

    if (done)
        return;
    done = true;
    /* In supervisor mode, or in a mount namespace another init uses too
     * (a forced --mode, the unit tests), the namespace is someone else's
     * and is left alone. */
    if (supervisor || !owns_mount_ns())
        return;
    /* Without CAP_SYS_ADMIN hearth mounts nothing itself, and cannot
     * change how its mounts propagate: / says whether later mounts (the
     * runtime's) reach the services. */
    if (userns_needed())
        return;
    owned = true;
    /* hearth owns this mount namespace (vm: the machine's; container:
     * the runtime made it for hearth): sharing it changes nothing outside. */
    propagates = mount(NULL, "/", NULL, MS_REC | MS_SHARED, NULL) == 0;
    if (!propagates)
        log_warn("contain: unable to make hearth's mounts shared: %s; mounts hearth adds after "
                 "a service started will not reach that service's namespace", strerror(errno));
}

static int add_path(char (*list)[CONTAIN_PATH_MAX], size_t *n, const char *path, size_t len,
                    struct err *err)
{
    for (size_t i = 0; i < *n; i++)
        if (strlen(list[i]) == len && strncmp(list[i], path, len) == 0)
            return 0;
    if (*n >= CONTAIN_MAX_EXTRA || len >= CONTAIN_PATH_MAX)
        return err_set(err, "containment: too many or too long paths to hide (%.*s)", (int)len,
                       path);
    memcpy(list[*n], path, len);
    list[(*n)++][len] = 0;
    return 0;
}

static int nsdelegate_line(char *line, bool whole, void *ctx)
{
    char *post = strstr(line, " - cgroup2 ");
    if (!post)
        return 0;
    /* The first cgroup2 mount decides; its options are the last field
     * (a line cut short has lost them: not known, so no). */
    bool ns = false;
    char *opts = strrchr(line, ' ');
    char *save;
    for (char *o = strtok_r(opts + 1, ",", &save); whole && o; o = strtok_r(NULL, ",", &save))
        ns = ns || strcmp(o, "nsdelegate") == 0;
    *(bool *)ctx = ns;
    return 1;
}

/* Whether the first cgroup2 mount carries nsdelegate (its superblock
 * options, the last field of its mountinfo line). */
static bool cgroup2_nsdelegate(void)
{
    char line[4096];
    bool ns = false;

    if (lines_each("/proc/self/mountinfo", line, sizeof(line), nsdelegate_line, &ns) < 0)
        return false;
    return ns;
}

static int cgroupns_known = -1;

static bool cgroupns_supported(void)
{
    if (cgroupns_known < 0) {
        cgroupns_known = access("/proc/self/ns/cgroup", F_OK) == 0;
        if (!cgroupns_known)
            log_warn("this kernel has no cgroup namespaces: services see hearth's whole cgroup tree "
                     "(read-only)");
    }
    return cgroupns_known;
}

void contain_host_report(bool supervisor)
{
    static bool done;

    if (done)
        return;
    done = true;
    if (!owned)
        propagates = root_is_shared();
    if (!owned && !propagates)
        log_warn("/ is not a shared mount here: mounts hearth adds after a service started "
                 "will not reach that service's namespace");
    /* The kernel checks migrations against the writer's cgroup namespace
     * only on a hierarchy mounted with nsdelegate (hearth mounts it so in
     * vm mode); elsewhere the read-only /sys is what keeps a service in
     * its leaf. */
    if (cgroupns_known > 0 && !cgroup2_nsdelegate())
        log_info("cgroup2 is mounted without nsdelegate here: a service's cgroup namespace "
                 "hides hearth's tree but does not bound migrations; the read-only /sys does");
}

static bool seccomp_available(void)
{
    static int known = -1;
    if (known < 0) {
        known = seccomp_supported();
        if (!known)
            log_warn("this kernel has no seccomp filters: services run without the default filter");
    }
    return known;
}

/* A hearth that is not root (supervisor mode on a developer's machine)
 * cannot make namespaces or mounts, and its services run as its own user:
 * there is nothing of its setup they could undo that they could not
 * already. They still get the capability sets and the filter. */
static bool can_isolate(void)
{
    static int known = -1;
    if (known < 0) {
        known = geteuid() == 0;
        if (!known)
            log_warn("hearth is not root: services run without their own mount and cgroup "
                     "namespaces");
    }
    return known;
}

static bool pidns_supported(void)
{
    static int known = -1;
    if (known < 0) {
        known = access("/proc/self/ns/pid_for_children", F_OK) == 0;
        if (!known)
            log_warn("this kernel has no pid namespaces: services share hearth's process space");
    }
    return known;
}

static char extra_ro[CONTAIN_PATH_MAX];
static int64_t tmp_default, shm_default;

void contain_set_tmpfs_defaults(int64_t tmp_bytes, int64_t shm_bytes)
{
    tmp_default = tmp_bytes;
    shm_default = shm_bytes;
}

int contain_add_writable(struct contain_plan *p, const char *path, struct err *err)
{
    size_t len = strlen(path);
    for (size_t i = 0; i < p->n_rw; i++)
        if (strcmp(p->rw[i], path) == 0)
            return 0;
    if (p->n_rw >= CONTAIN_MAX_RW || len >= CONTAIN_PATH_MAX)
        return err_set(err, "containment: too many or too long writable paths (%s)", path);
    memcpy(p->rw[p->n_rw++], path, len + 1);
    return 0;
}

void contain_as_host_session(struct contain_plan *p)
{
    p->ro_root = false;
    p->n_rw = 0;
    p->tmp_bytes = p->shm_bytes = 0;
}

void contain_readonly_dir(const char *path)
{
    snprintf(extra_ro, sizeof(extra_ro), "%s", path && strlen(path) < sizeof(extra_ro) ? path : "");
}

/* ---- the namespace template (nstemplate.h) for a plan ---- */

/* What a plan's namespace depends on: its hidden and read-only paths, in
 * order, each ended by a NUL, the two lists apart by an empty one. */
#define PLAN_KEY_MAX (2 * CONTAIN_MAX_EXTRA * CONTAIN_PATH_MAX + 2)
_Static_assert(CONTAIN_MAX_EXTRA <= NSTEMPLATE_PATHS_MAX, "every hidden path is checked");

static size_t plan_key(const struct contain_plan *p, char *out)
{
    size_t n = 0;
    for (int list = 0; list < 2; list++) {
        size_t cnt = list ? p->n_ro : p->n_hide;
        for (size_t i = 0; i < cnt; i++) {
            const char *s = list ? p->ro[i] : p->hide[i];
            size_t l = strlen(s) + 1;
            memcpy(out + n, s, l);
            n += l;
        }
        out[n++] = 0;
    }
    return n;
}

static void hidden_paths(const struct contain_plan *p, const char **out)
{
    for (size_t i = 0; i < p->n_hide; i++)
        out[i] = p->hide[i];
}

int contain_template_for(const struct contain_plan *p)
{
    char key[PLAN_KEY_MAX];
    const char *paths[CONTAIN_MAX_EXTRA];
    size_t n = plan_key(p, key);
    hidden_paths(p, paths);
    return nstemplate_for(key, n, paths, p->n_hide);
}

bool contain_snapshot_offer(struct contain_plan *p)
{
    char key[PLAN_KEY_MAX];
    const char *paths[CONTAIN_MAX_EXTRA];

    /* Not from a child that could change its own mounts afterwards. */
    /* Nor in user namespace mode: a mount namespace belongs to the user
     * namespace it was made in, and another service's could not enter it. */
    if (!p->isolate || p->userns || p->ns_fd >= 0 || (p->caps & BIT(CAP_SYS_ADMIN)))
        return false;
    size_t n = plan_key(p, key);
    hidden_paths(p, paths);
    p->snap_fd = nstemplate_offer(key, n, paths, p->n_hide);
    return p->snap_fd >= 0;
}

void contain_snapshot_forked(struct contain_plan *p, bool forked)
{
    nstemplate_forked(p->snap_fd, forked);
    p->snap_fd = -1;
}

/* Kept only where hearth's later mounts reach it, as they reach a running
 * service: otherwise a copy made later would miss what a fresh namespace
 * would have. */
void contain_snapshot_take(void) { nstemplate_take(contain_mounts_propagate); }

int contain_prepare(const struct service_config *c, const struct config *cfg,
                    const char *config_path, bool root, const char *leaf,
                    struct contain_plan *p, struct err *err)
{
    struct contain_policy pol;
    bool hide_dir[CONTAIN_MAX_EXTRA] = {false};

    contain_policy_of(c, &pol);
    memset(p, 0, sizeof(*p));
    p->ns_fd = p->snap_fd = -1;
    p->join_user = p->join_mnt = p->join_cgroup = p->join_pid = -1;
    p->userns_go[0] = p->userns_go[1] = -1;
    p->caps = contain_caps(&pol, root);
    p->ambient = !root && p->caps;
    p->isolate = pol.isolation && can_isolate();
    p->cgroupns = pol.isolation && leaf && leaf[0] && cgroupns_supported();
    p->pidns = p->isolate && pidns_supported();
    p->userns = p->isolate && userns_needed();
    p->proc_shared = p->userns && p->pidns && userns_proc_shared();
    if (pol.seccomp && seccomp_available()) {
        if (seccomp_build(p->caps, &p->prog) < 0)
            return err_set(err, "seccomp: unable to build the default filter: %s (set "
                           "\"seccomp\": \"off\" to run without it)", strerror(errno));
        p->seccomp = true;
    }
    if (!p->isolate)
        return 0;
    /* The control sockets' directories: a service must not even reach
     * the socket, whatever the peer check would say. */
    for (size_t i = 0; cfg && i < cfg->n_listen; i++) {
        if (cfg->listen[i].kind != LISTEN_UNIX)
            continue;
        const char *path = cfg->listen[i].path;
        const char *slash = strrchr(path, '/');
        /* A socket right under / hides itself rather than the root. */
        bool dir = slash && slash != path;
        size_t len = dir ? (size_t)(slash - path) : strlen(path);
        if (add_path(p->hide, &p->n_hide, path, len, err) < 0)
            return -1;
        hide_dir[p->n_hide - 1] = dir;
    }
    /* hearth's own files: its config holds every service's settings and
     * secrets, so no service reads it, let alone another's. Hidden only
     * where they exist: the template is kept for hidden paths that are
     * still the inodes they were. */
    struct stat st;
    if (lstat("/etc/hearth", &st) == 0 &&
        add_path(p->hide, &p->n_hide, "/etc/hearth", strlen("/etc/hearth"), err) < 0)
        return -1;
    if (config_path && config_path[0] && strncmp(config_path, "/etc/hearth/", 12) != 0 &&
        lstat(config_path, &st) == 0 &&
        add_path(p->hide, &p->n_hide, config_path, strlen(config_path), err) < 0)
        return -1;
    /* The resume news: services read it, none may forge it. */
    if (extra_ro[0] && add_path(p->ro, &p->n_ro, extra_ro, strlen(extra_ro), err) < 0)
        return -1;
    /* The service's own space: not part of the template (each start
     * gets its own tmpfs), so not part of its key either. */
    p->ro_root = pol.ro_root;
    for (size_t i = 0; i < pol.n_writable; i++)
        if (contain_add_writable(p, pol.writable[i], err) < 0)
            return -1;
    p->tmp_bytes = c->tmp_bytes ? c->tmp_bytes : tmp_default;
    p->shm_bytes = c->shm_bytes ? c->shm_bytes : shm_default;
    /* `writable` naming /tmp or /dev/shm itself asks for the guest's. */
    for (size_t i = 0; i < p->n_rw; i++) {
        if (strcmp(p->rw[i], "/tmp") == 0)
            p->tmp_bytes = 0;
        if (strcmp(p->rw[i], "/dev/shm") == 0)
            p->shm_bytes = 0;
    }
    if (!p->userns && (p->ns_fd = contain_template_for(p)) >= 0)
        return 0;
    /* A directory the listener has not made yet would be skipped as
     * missing and could appear unhidden later: make it now, as the
     * listener does (0755). The template masks them as they were. */
    for (size_t i = 0; i < p->n_hide; i++) {
        if (!hide_dir[i])
            continue;
        /* Without following a link: a service may write below /run. */
        struct err why;
        int dfd = safepath_mkdir_p(p->hide[i], 0755, 0, 0, &why);
        if (dfd >= 0)
            close(dfd);
        else
            log_debug("unable to create %s: %s", p->hide[i], why.msg);
    }
    return 0;
}

const char *contain_describe(const struct contain_policy *pol, struct err *err)
{
    if (err)
        err->msg[0] = 0;
    if (!pol->isolation) {
        err_set(err, "isolation off");
        return "none";
    }
    if (!can_isolate()) {
        err_set(err, "hearth is not root: services run as its own user, without "
                "namespaces of their own");
        return "none";
    }
    if (!userns_needed())
        return "full";
    if (userns_refusal()[0]) {
        err_set(err, "%s", userns_refusal());
        return "none";
    }
    err_set(err, "hearth holds no CAP_SYS_ADMIN: the service's namespaces are made in a "
            "user namespace of its own, every uid and gid mapped to itself%s",
            pidns_supported() && userns_proc_shared()
                ? "; the kernel refuses it a fresh /proc (the runtime masks paths in the "
                  "container's), so it keeps the container's /proc, with every process "
                  "running when it started hidden: those started later are listed there"
                : "");
    return "userns";
}

uint64_t contain_clone_flags(const struct contain_plan *p)
{
    uint64_t f = 0;
    if (p->join)
        return 0;
    if (p->pidns)
        f |= CLONE_NEWPID;
    if (p->userns)
        f |= CLONE_NEWUSER | CLONE_NEWNS;
    return f;
}

int contain_fork_prepare(struct contain_plan *p, struct err *err)
{
    if (!p->userns || p->join)
        return 0;
    if (userns_pipe(p->userns_go) < 0) {
        err_set(err, "containment: unable to create a pipe: %s", strerror(errno));
        p->userns_go[0] = p->userns_go[1] = -1;
        return -1;
    }
    return 0;
}

bool contain_fork_refused(const struct contain_plan *p, int err, struct err *msg)
{
    return p->userns && !p->join && userns_refused(err, msg);
}

/* ---- joining a running service's namespaces ---- */

static const char *const join_names[] = {"user", "mnt", "cgroup", "pid"};
#define N_JOIN (sizeof(join_names) / sizeof(join_names[0]))

/* Whether fd is the namespace hearth itself is in: hearth never changes
 * its own, so each is read once. */
static bool is_own_ns(size_t i, int fd)
{
    static struct stat own[N_JOIN];
    static bool known[N_JOIN];
    struct stat st;

    if (!known[i]) {
        char path[32];
        snprintf(path, sizeof(path), "/proc/self/ns/%s", join_names[i]);
        if (stat(path, &own[i]) < 0)
            return false; /* joined anyway: never less contained */
        known[i] = true;
    }
    return fstat(fd, &st) == 0 && st.st_dev == own[i].st_dev && st.st_ino == own[i].st_ino;
}

void contain_join_close(struct contain_plan *p)
{
    int *fds[] = {&p->join_user, &p->join_mnt, &p->join_cgroup, &p->join_pid};

    for (size_t i = 0; i < N_JOIN; i++) {
        if (p->join && *fds[i] >= 0)
            close(*fds[i]);
        *fds[i] = -1;
    }
    p->join = false;
}

int contain_join_open(struct contain_plan *p, pid_t pid, struct err *err)
{
    int *fds[] = {&p->join_user, &p->join_mnt, &p->join_cgroup, &p->join_pid};

    p->join = true;
    p->join_user = p->join_mnt = p->join_cgroup = p->join_pid = -1;
    if (pid <= 0) {
        err_set(err, "the service has no main process to run it beside");
        p->join = false;
        errno = ESRCH;
        return -1;
    }
    for (size_t i = 0; i < N_JOIN; i++) {
        char path[48];
        if (strcmp(join_names[i], "cgroup") == 0 && !cgroupns_supported())
            continue;
        snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)pid, join_names[i]);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            int e = errno;
            contain_join_close(p);
            /* A zombie has no namespaces left to open. */
            err_unable(err, e, "open %s (the service's main process%s)", path,
                       e == ENOENT || e == ESRCH ? " is gone" : "");
            errno = e;
            return -1;
        }
        if (is_own_ns(i, fd))
            close(fd);
        else
            *fds[i] = fd;
    }
    return 0;
}

/* ---- the child's side: plain syscalls only ---- */

#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif
#define HEARTH_MOUNT_ATTR_RDONLY 0x00000001

struct hearth_mount_attr {
    uint64_t attr_set, attr_clr, propagation, userns_fd;
};

static int fail(struct err *err, const char *verb, const char *path)
{
    int e = errno;
    /* No reason here: the child's report carries errno, and the parent
     * writes it after this. */
    err_unable(err, 0, "%s %s", verb, path);
    errno = e;
    return -1;
}

/* Without mount_setattr (before 5.12) each mount at or below path is
 * remounted read-only one by one, keeping its other flags. */
struct ro_walk {
    const char *path;
    size_t len;
    int err;
};

static unsigned long flags_of(const char *target)
{
    struct statvfs sv;
    unsigned long f = 0;
    if (statvfs(target, &sv) == 0) {
        if (sv.f_flag & ST_NOSUID) f |= MS_NOSUID;
        if (sv.f_flag & ST_NODEV) f |= MS_NODEV;
        if (sv.f_flag & ST_NOEXEC) f |= MS_NOEXEC;
    }
    return f;
}

static bool ro_each(const struct mountinfo_entry *e, void *ctx)
{
    struct ro_walk *w = ctx;
    /* "/" holds every mount. */
    if (w->len > 1 && (strncmp(e->target, w->path, w->len) != 0 ||
                       (e->target[w->len] && e->target[w->len] != '/')))
        return true;
    if (mount(NULL, e->target, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | flags_of(e->target),
              NULL) < 0) {
        /* Gone meanwhile, or a path that names no mount of its own any
         * more (a mask or another mount over it). */
        if (errno == ENOENT || errno == EINVAL)
            return true;
        w->err = errno;
        return false;
    }
    return true;
}

/* A bind of path onto itself (so it is a mount of its own), then read-only
 * with everything below it. */
static int make_readonly(const char *path, struct err *what)
{
    struct stat st;
    /* The bind first, as for the masks: a stat only explains a failure. */
    if (mount(path, path, NULL, MS_BIND | MS_REC, NULL) < 0) {
        int e = errno;
        if (stat(path, &st) < 0)
            return errno == ENOENT ? 0 : fail(what, "inspect", path);
        errno = e;
        return fail(what, "bind for read-only", path);
    }
    struct hearth_mount_attr a = {.attr_set = HEARTH_MOUNT_ATTR_RDONLY};
    if (syscall(SYS_mount_setattr, AT_FDCWD, path, AT_RECURSIVE, &a, sizeof(a)) == 0)
        return 0;
    if (errno != ENOSYS)
        return fail(what, "make read-only", path);
    struct ro_walk w = {path, strlen(path), 0};
    if (mountinfo_each(ro_each, &w) < 0)
        return fail(what, "list the mounts under", path);
    if (w.err) {
        errno = w.err;
        return fail(what, "make read-only", path);
    }
    return 0;
}

static int mask_as(const char *path, bool dir)
{
    if (dir)
        return mount("hearth-mask", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                     "size=4k,mode=0555");
    return mount("/dev/null", path, NULL, MS_BIND, NULL);
}

/* /dev/null over a file, an empty read-only tmpfs over a directory. The
 * mount is tried as the kind the path usually is; only when that fails
 * does a stat say why (missing: nothing to mask) or what it is instead:
 * each start of a contained service makes a dozen of these, and a stat
 * of a /proc or /sys path before every one cost as much as the mounts. */
static int mask(const char *path, bool dir, struct err *err)
{
    struct stat st;
    if (mask_as(path, dir) == 0)
        return 0;
    int e = errno;
    if (stat(path, &st) < 0)
        return errno == ENOENT ? 0 : fail(err, "inspect", path);
    if (!S_ISDIR(st.st_mode) != !dir && mask_as(path, S_ISDIR(st.st_mode)) == 0)
        return 0;
    if (!S_ISDIR(st.st_mode) == !dir)
        errno = e;
    return fail(err, "mask", path);
}

/* The device nodes a service gets: what programs expect to find (ptmx is
 * a node here, not a link, so the kernel finds the "pts" beside it). The
 * image's /dev (disks, the console, /dev/kmsg, the virtio ports, /dev/mem)
 * stays out of reach: a root service with DAC_OVERRIDE could open any of
 * them, and no device cgroup stands in the way. */
static const struct {
    const char *name;
    unsigned maj, min;
} dev_nodes[] = {
    {"null", 1, 3}, {"zero", 1, 5}, {"full", 1, 7}, {"random", 1, 8},
    {"urandom", 1, 9}, {"tty", 5, 0}, {"ptmx", 5, 2},
};

static const struct {
    const char *name, *target;
} dev_links[] = {
    {"fd", "/proc/self/fd"}, {"stdin", "/proc/self/fd/0"},
    {"stdout", "/proc/self/fd/1"}, {"stderr", "/proc/self/fd/2"},
};

/* Shared with hearth and the other services: ptys, POSIX shared memory
 * and message queues, bound in from the image's /dev. */
static const char *const dev_shared[] = {"pts", "shm", "mqueue"};

#define N_DEV_NODES (sizeof(dev_nodes) / sizeof(dev_nodes[0]))
#define N_DEV_SHARED (sizeof(dev_shared) / sizeof(dev_shared[0]))

/* Binds the file or directory behind an O_PATH descriptor onto path. */
static int bind_fd(int fd, const char *path, unsigned long flags)
{
    char src[32];
    snprintf(src, sizeof(src), "/proc/self/fd/%d", fd);
    return mount(src, path, NULL, MS_BIND | flags, NULL);
}

/* One node of the service's /dev: made with mknod (the umask is 0 here,
 * so it gets 0666 as it is), or, where that is refused (hearth in a user
 * namespace, as in a rootless container), the image's node bound onto an
 * empty file. ptmx is then a link into pts: the kernel finds the pts
 * instance beside the ptmx that was opened, and a bound node's "beside"
 * is the image's /dev. old is the image's /dev, under the new tmpfs. */
static int dev_node(size_t i, int old, struct err *err)
{
    char path[64];
    snprintf(path, sizeof(path), "/dev/%s", dev_nodes[i].name);
    if (mknod(path, S_IFCHR | 0666, makedev(dev_nodes[i].maj, dev_nodes[i].min)) == 0)
        return 0;
    if (errno != EPERM)
        return fail(err, "create", path);
    int orig = old < 0 ? -1 : openat(old, dev_nodes[i].name, O_PATH | O_CLOEXEC);
    /* Nodes cannot be made here (a user namespace) and the image has none
     * to bind: the service goes without that one. */
    if (orig < 0)
        return 0;
    int rc = 0;
    if (strcmp(dev_nodes[i].name, "ptmx") == 0) {
        rc = symlink("pts/ptmx", path) < 0 ? fail(err, "create", path) : 0;
    } else {
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0)
            rc = fail(err, "create", path);
        else {
            close(fd);
            if (bind_fd(orig, path, 0) < 0)
                rc = fail(err, "bind into the service's /dev", path);
        }
    }
    int e = errno;
    close(orig);
    errno = e;
    return rc;
}

/* A /dev of its own: a small tmpfs with the nodes above, the shared
 * directories bound in, then read-only. What it takes from the image's
 * /dev is reached through one descriptor of it opened first (the tmpfs
 * hides the path, not the directory the descriptor holds), and only
 * what is used is opened: a start makes no more calls than it needs. */
static int own_dev(struct err *err)
{
    char path[64];
    int rc = -1;

    int old = openat(AT_FDCWD, "/dev", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (old < 0)
        return 0; /* no /dev to replace */
    if (mount("hearth-dev", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k") < 0) {
        fail(err, "mount a tmpfs on", "/dev");
        close(old);
        return -1;
    }
    mode_t um = umask(0);
    for (size_t i = 0; i < N_DEV_NODES; i++)
        if (dev_node(i, old, err) < 0)
            goto out;
    for (size_t i = 0; i < sizeof(dev_links) / sizeof(dev_links[0]); i++) {
        snprintf(path, sizeof(path), "/dev/%s", dev_links[i].name);
        if (symlink(dev_links[i].target, path) < 0) {
            fail(err, "create", path);
            goto out;
        }
    }
    for (size_t i = 0; i < N_DEV_SHARED; i++) {
        int fd = openat(old, dev_shared[i], O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
            continue; /* not in the image's /dev */
        snprintf(path, sizeof(path), "/dev/%s", dev_shared[i]);
        int bad = mkdir(path, 0755) < 0 || bind_fd(fd, path, MS_REC) < 0;
        int e = errno;
        close(fd);
        if (bad) {
            errno = e;
            fail(err, "bind into the service's /dev", path);
            goto out;
        }
    }
    if (mount(NULL, "/dev", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC,
              "mode=0755,size=64k") < 0) {
        fail(err, "make read-only", "/dev");
        goto out;
    }
    rc = 0;
out:;
    int e = errno;
    umask(um);
    close(old);
    errno = e;
    return rc;
}

/* The running service's namespaces instead of new ones: its user
 * namespace where it has one (hearth without CAP_SYS_ADMIN), its mounts (so
 * the command sees what the service sees, and nothing of hearth's it
 * does not), its cgroup namespace (its leaf as the root), its PID
 * namespace (for the children only: launch_exec forks once more). */
static int join_enter(const struct contain_plan *p, struct err *err)
{
    /* Its user namespace first: the others belong to it, and joining it
     * gives the rights there that joining them takes. */
    if (p->join_user >= 0 && setns(p->join_user, CLONE_NEWUSER) < 0)
        return fail(err, "join", "the service's user namespace");
    if (p->join_mnt >= 0 && setns(p->join_mnt, CLONE_NEWNS) < 0)
        return fail(err, "join", "the service's mount namespace");
    if (p->join_cgroup >= 0 && setns(p->join_cgroup, CLONE_NEWCGROUP) < 0)
        return fail(err, "join", "the service's cgroup namespace");
    if (p->join_pid >= 0 && setns(p->join_pid, CLONE_NEWPID) < 0)
        return fail(err, "join", "the service's PID namespace");
    return 0;
}

#ifndef SYS_open_tree
#define SYS_open_tree 428
#endif
#ifndef SYS_move_mount
#define SYS_move_mount 429
#endif
#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#define MOVE_MOUNT_T_EMPTY_PATH 0x00000040
#endif
#ifndef STATX_ATTR_MOUNT_ROOT
#define STATX_ATTR_MOUNT_ROOT 0x00002000
#endif

static int setattr_fd(int fd, const char *path, unsigned flags, uint64_t set, uint64_t clr)
{
    struct hearth_mount_attr a = {.attr_set = set, .attr_clr = clr};
    return (int)syscall(SYS_mount_setattr, fd, path, flags, &a, sizeof(a));
}

#ifndef SYS_statx
#define SYS_statx 332
#endif

/* The head of the kernel's struct statx (256 bytes in all): musl 1.2.3
 * has no statx, and linux/stat.h clashes with its sys/stat.h. */
struct hearth_statx {
    uint32_t mask, blksize;
    uint64_t attributes;
    uint32_t nlink, uid, gid;
    uint16_t mode, spare;
    uint64_t ino, size, blocks, attributes_mask;
    uint8_t rest[256 - 64];
};

/* Whether fd is the root of a mount (statx, 5.8+; an older kernel says
 * no, and the path gets a writable copy of its own mounted over it). */
static bool mount_root(int fd)
{
    struct hearth_statx sx;
    return syscall(SYS_statx, fd, "", AT_EMPTY_PATH, 0, &sx) == 0 &&
           (sx.attributes_mask & STATX_ATTR_MOUNT_ROOT) && (sx.attributes & STATX_ATTR_MOUNT_ROOT);
}

/* A writable copy of the mount subtree at src (open_tree, then
 * mount_setattr on its top: the copy is writable before anyone can see
 * it; what is mounted below keeps its own flags). Returns its descriptor
 * for move_mount, or -1. */
static int writable_copy(int src, const char *path, struct err *err)
{
    int tree = (int)syscall(SYS_open_tree, src, "",
                            OPEN_TREE_CLONE | AT_EMPTY_PATH | AT_RECURSIVE | O_CLOEXEC);
    if (tree < 0)
        return fail(err, "copy the mount of", path);
    if (setattr_fd(tree, "", AT_EMPTY_PATH, 0, HEARTH_MOUNT_ATTR_RDONLY) < 0) {
        fail(err, "make writable", path);
        int e = errno;
        close(tree);
        errno = e;
        return -1;
    }
    return tree;
}

static int attach(int tree, int dst, const char *path, struct err *err)
{
    if (syscall(SYS_move_mount, tree, "", dst, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
        return fail(err, "mount writable", path);
    return 0;
}

static int private_tmpfs(const char *path, int64_t bytes, unsigned long flags, struct err *err)
{
    char opts[64];
    struct stat st;
    if (bytes <= 0 || stat(path, &st) < 0 || !S_ISDIR(st.st_mode))
        return 0; /* none asked for, or no such directory to cover */
    snprintf(opts, sizeof(opts), "size=%lld,mode=1777", (long long)bytes);
    if (mount("hearth-tmp", path, "tmpfs", MS_NOSUID | MS_NODEV | flags, opts) < 0)
        return fail(err, "mount a private tmpfs on", path);
    return 0;
}

/* The service's own space in its copy of the namespace: the root and
 * every mount read-only (but /proc, whose sensitive parts are mounts of
 * their own and stay as they are), a private /tmp and /dev/shm, and its
 * writable paths. The agent's files then live only where the host said
 * they may: nothing it writes outlives it in the image, nothing hearth
 * or another service runs from the image can be replaced.
 *
 * A writable path that is a mount root (a home or workspace share) is
 * made writable where it is, so what hearth mounts there later still
 * propagates in. Any other gets a writable copy of its subtree mounted
 * over itself; one below /tmp or /dev/shm is copied before the private
 * tmpfs covers it (a copy taken after would hold that tmpfs too) and
 * mounted at its place in the new tmpfs. */
/* Whether the new mount API is there (open_tree and move_mount, 5.2;
 * mount_setattr, 5.12). Without it (an older kernel, or valgrind, which
 * does not know these calls) the same is done with bind mounts and
 * remounts: the same result, made visible a step at a time. */
static bool new_mount_api(void)
{
    /* A change to make, on no mount (fd -1): EBADF where the call exists.
     * An empty change would not do: the kernel answers 0 to it before
     * looking at the fd, which read as "no API" on every kernel that has
     * it, and each start remounted every mount one by one. */
    return setattr_fd(-1, "", AT_EMPTY_PATH, HEARTH_MOUNT_ATTR_RDONLY, 0) < 0 && errno != ENOSYS;
}

/* Remounts the mount an fd names (the root of a mount, opened by path),
 * read-only or not, keeping its other flags. */
static int remount_fd(int fd, bool rdonly)
{
    char path[32];
    struct statvfs sv;
    unsigned long f = MS_REMOUNT | MS_BIND | (rdonly ? MS_RDONLY : 0);
    if (fstatvfs(fd, &sv) == 0) {
        if (sv.f_flag & ST_NOSUID) f |= MS_NOSUID;
        if (sv.f_flag & ST_NODEV) f |= MS_NODEV;
        if (sv.f_flag & ST_NOEXEC) f |= MS_NOEXEC;
    }
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    return mount(NULL, path, NULL, f, NULL);
}

/* The old API's writable place: src's subtree bound onto dst (itself, or
 * its place in the private tmpfs), then the new mount, found by path
 * without following a link, remounted writable. */
static int legacy_writable(int src, int dst, const char *path, struct err *err)
{
    char from[32], to[32];
    struct err why;
    if (src == dst && mount_root(src))
        return remount_fd(src, false) < 0 ? fail(err, "make writable", path) : 0;
    snprintf(from, sizeof(from), "/proc/self/fd/%d", src);
    snprintf(to, sizeof(to), "/proc/self/fd/%d", dst);
    if (mount(from, to, NULL, MS_BIND | MS_REC, NULL) < 0)
        return fail(err, "mount writable", path);
    int top = safepath_open_abs(path, O_RDONLY | O_DIRECTORY, 0, &why);
    if (top < 0)
        return err_set(err, "unable to open writable %s: %s", path, why.msg);
    int rc = remount_fd(top, false) < 0 ? fail(err, "make writable", path) : 0;
    int e = errno;
    close(top);
    errno = e;
    return rc;
}

static int ro_everything(bool api, struct err *what)
{
    if (api) {
        if (setattr_fd(AT_FDCWD, "/", AT_RECURSIVE, HEARTH_MOUNT_ATTR_RDONLY, 0) < 0)
            return fail(what, "make read-only", "/");
        if (setattr_fd(AT_FDCWD, "/proc", 0, 0, HEARTH_MOUNT_ATTR_RDONLY) < 0 &&
            errno != ENOENT && errno != EINVAL)
            return fail(what, "make writable", "/proc");
        return 0;
    }
    struct ro_walk w = {"/", 1, 0};
    if (mountinfo_each(ro_each, &w) < 0)
        return fail(what, "list the mounts under", "/");
    if (w.err) {
        errno = w.err;
        return fail(what, "make read-only", "/");
    }
    if (mount(NULL, "/proc", NULL, MS_REMOUNT | MS_BIND | flags_of("/proc"), NULL) < 0 &&
        errno != ENOENT && errno != EINVAL)
        return fail(what, "make writable", "/proc");
    return 0;
}

/* The service's own space in its copy of the namespace: the root and
 * every mount read-only (but /proc, whose sensitive parts are mounts of
 * their own and stay as they are), a private /tmp and /dev/shm, and its
 * writable paths. The agent's files then live only where the host said
 * they may: nothing it writes outlives it in the image, nothing hearth
 * or another service runs from the image can be replaced.
 *
 * A writable path that is a mount root (a home or workspace share) is
 * made writable where it is, so what hearth mounts there later still
 * propagates in. Any other gets a writable copy of its subtree mounted
 * over itself; one below /tmp or /dev/shm is copied before the private
 * tmpfs covers it (with the new API: a copy taken after would hold that
 * tmpfs too; the old one binds from below it, which takes only what is
 * below the path) and mounted at its place in the new tmpfs. */
static int private_space(const struct contain_plan *p, struct err *err)
{
    int fd[CONTAIN_MAX_RW], tree[CONTAIN_MAX_RW];
    bool moved[CONTAIN_MAX_RW];
    size_t order[CONTAIN_MAX_RW];
    struct err why;
    int rc = -1;
    size_t n = p->n_rw;
    bool api = (p->ro_root || n) && new_mount_api();

    /* Shallow paths first: a writable copy of a directory carries the
     * mounts below it as they are, so what lies below is made writable
     * after, in the copy. */
    for (size_t i = 0; i < n; i++) {
        fd[i] = tree[i] = -1;
        moved[i] = (p->tmp_bytes > 0 && pathname_at_or_under(p->rw[i], "/tmp")) ||
                   (p->shm_bytes > 0 && pathname_at_or_under(p->rw[i], "/dev/shm"));
        size_t j = i;
        for (; j > 0 && strlen(p->rw[order[j - 1]]) > strlen(p->rw[i]); j--)
            order[j] = order[j - 1];
        order[j] = i;
    }
    /* Those the private tmpfs will cover are opened now, without
     * following a link (a service may have swapped one in on the way). */
    for (size_t i = 0; i < n; i++) {
        if (!moved[i])
            continue;
        fd[i] = safepath_open_abs(p->rw[i], O_RDONLY | O_DIRECTORY, 0, &why);
        if (fd[i] < 0) {
            err_set(err, "unable to open writable %s: %s", p->rw[i], why.msg);
            goto out;
        }
    }
    if (p->ro_root && ro_everything(api, err) < 0)
        goto out;
    /* With the new API, their copies too: one taken once the tmpfs is
     * there would hold it. */
    for (size_t i = 0; api && i < n; i++)
        if (moved[i] && (tree[i] = writable_copy(fd[i], p->rw[i], err)) < 0)
            goto out;
    if (private_tmpfs("/tmp", p->tmp_bytes, 0, err) < 0 ||
        private_tmpfs("/dev/shm", p->shm_bytes, MS_NOEXEC, err) < 0)
        goto out;
    for (size_t k = 0; k < n; k++) {
        size_t i = order[k];
        int dst;
        if (moved[i]) {
            /* Its place in the new tmpfs, made as root: the copy mounted
             * there brings its own owner and mode. */
            if ((dst = safepath_mkdir_p(p->rw[i], 0755, 0, 0, &why)) < 0) {
                err_set(err, "unable to create %s in the private tmpfs: %s", p->rw[i], why.msg);
                goto out;
            }
        } else {
            /* A writable root needs nothing more where the path is. */
            if (!p->ro_root)
                continue;
            fd[i] = safepath_open_abs(p->rw[i], O_RDONLY | O_DIRECTORY, 0, &why);
            if (fd[i] < 0) {
                err_set(err, "unable to open writable %s: %s", p->rw[i], why.msg);
                goto out;
            }
            dst = fd[i];
            if (api && mount_root(fd[i])) {
                if (setattr_fd(fd[i], "", AT_EMPTY_PATH, 0, HEARTH_MOUNT_ATTR_RDONLY) < 0) {
                    fail(err, "make writable", p->rw[i]);
                    goto out;
                }
                continue;
            }
            if (api && (tree[i] = writable_copy(fd[i], p->rw[i], err)) < 0)
                goto out;
        }
        int r = api ? attach(tree[i], dst, p->rw[i], err)
                    : legacy_writable(fd[i], dst, p->rw[i], err);
        if (dst != fd[i]) {
            int e = errno;
            close(dst);
            errno = e;
        }
        if (r < 0)
            goto out;
    }
    rc = 0;
out:;
    int e = errno;
    for (size_t i = 0; i < n; i++) {
        if (fd[i] >= 0)
            close(fd[i]);
        if (tree[i] >= 0)
            close(tree[i]);
    }
    errno = e;
    return rc;
}

int contain_enter(const struct contain_plan *p, struct err *err)
{
    if (p->join)
        return join_enter(p, err);
    /* Nothing is done as root of the new user namespace before hearth
     * has mapped its ids: until then its uids are nobody's. */
    if (p->userns && userns_wait((int *)p->userns_go) < 0)
        return err_set(err, "hearth could not set up the uid and gid maps of its user namespace");
    if (!p->isolate)
        return 0;
    int copied = p->ns_fd >= 0 ? nstemplate_copy(p->ns_fd) : 0;
    if (copied < 0)
        return fail(err, "create", "a mount namespace");
    if (!copied) {
        /* In user namespace mode the clone made it already. */
        if (!p->userns && unshare(CLONE_NEWNS) < 0)
            return fail(err, "create", "a mount namespace");
        /* A slave of hearth's namespace: what hearth mounts later (host
         * mounts from sandbox.init, remounts after a resume) comes in,
         * and nothing done here goes back. */
        if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
            return fail(err, "make slave", "/");
        if (own_dev(err) < 0)
            return -1;
        for (size_t i = 0; i < p->n_hide; i++)
            if (mask(p->hide[i], true, err) < 0)
                return -1;
        for (const char *const *m = contain_masked; *m; m++)
            if (mask(*m, masked_dir(*m), err) < 0)
                return -1;
        for (const char *const *r = contain_readonly; *r; r++)
            if (make_readonly(*r, err) < 0)
                return -1;
        for (size_t i = 0; i < p->n_ro; i++)
            if (make_readonly(p->ro[i], err) < 0)
                return -1;
        /* The template stays as built: the service's own part goes into
         * a copy of it, as in every later start. */
        if (p->snap_fd >= 0) {
            nstemplate_send(p->snap_fd);
            if (unshare(CLONE_NEWNS) < 0)
                return fail(err, "create", "a mount namespace");
        }
    }
    if (private_space(p, err) < 0)
        return -1;
    /* The child already lives in its leaf: the namespace is rooted
     * there, so it cannot move itself or anything else out of it. */
    if (p->cgroupns && unshare(CLONE_NEWCGROUP) < 0)
        return fail(err, "create", "a cgroup namespace");
    return 0;
}

/* ---- a /proc for the service's own pid namespace ---- */

static bool under_proc(const char *path) { return strncmp(path, "/proc/", 6) == 0; }

/* Whether name is all digits (a pid in /proc). */
static bool numeric(const char *name)
{
    if (!*name)
        return false;
    for (; *name; name++)
        if (*name < '0' || *name > '9')
            return false;
    return true;
}

struct hearth_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

/* Calls fn(name, ctx) for every numeric entry of dir but skip; getdents64
 * on a buffer of the stack (no allocation between fork and exec). A
 * directory that is gone (its process ended) has nothing to list. */
static int each_number(const char *dir, const char *skip, int (*fn)(const char *, void *),
                       void *ctx, struct err *err)
{
    char buf[4096];
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT || errno == ESRCH ? 0 : fail(err, "list", dir);
    int rc = 0;
    for (;;) {
        long n = syscall(SYS_getdents64, fd, buf, sizeof(buf));
        if (n < 0 && errno != ENOENT && errno != ESRCH)
            rc = fail(err, "list", dir);
        if (n <= 0)
            break;
        for (long off = 0; off < n && rc == 0;) {
            struct hearth_dirent64 *d = (struct hearth_dirent64 *)(buf + off);
            off += d->d_reclen;
            if (numeric(d->d_name) && strcmp(d->d_name, skip) != 0)
                rc = fn(d->d_name, ctx);
        }
        if (rc)
            break;
    }
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

struct hide_ctx {
    struct err *what;
};

/* An empty read-only tmpfs over /proc/<n>; one gone meanwhile is left. */
static int hide_entry(const char *n, void *ctx)
{
    struct hide_ctx *h = ctx;
    char path[48];
    snprintf(path, sizeof(path), "/proc/%s", n);
    if (mask_as(path, true) == 0 || errno == ENOENT || errno == ESRCH)
        return 0;
    return fail(h->what, "hide", path);
}

/* A process's threads first (each tid names it under /proc too, though
 * /proc lists only the first), then the process. */
static int hide_process(const char *n, void *ctx)
{
    struct hide_ctx *h = ctx;
    char task[48];
    snprintf(task, sizeof(task), "/proc/%s/task", n);
    if (each_number(task, n, hide_entry, ctx, h->what) < 0)
        return -1;
    return hide_entry(n, ctx);
}

/* The container's /proc kept (a fresh one refused): what runs there now
 * is hidden, the child's own entry left (its main process, forked next,
 * and what it starts come after, and are its own). Processes started
 * later elsewhere are listed, but none can be signalled from the
 * service's pid namespace. */
static int hide_others(struct err *err)
{
    char own[16];
    ssize_t n = readlink("/proc/self", own, sizeof(own) - 1);
    if (n <= 0)
        return fail(err, "read", "/proc/self");
    own[n] = 0;
    struct hide_ctx h = {err};
    return each_number("/proc", own, hide_process, &h, err);
}

int contain_proc_for_pidns(const struct contain_plan *p, struct err *err)
{
    if (!p->isolate || !p->pidns)
        return 0;
    if (p->proc_shared)
        return hide_others(err);
    /* (The start that built the template moved on to a copy of it in
     * contain_enter: the template keeps hearth's /proc.) The old /proc goes (with its masks); where it cannot (a mount
     * locked by a user namespace) the new one covers it. */
    if (umount2("/proc", MNT_DETACH) < 0 && errno != EINVAL && errno != EPERM)
        return fail(err, "unmount", "/proc");
    /* Mounted from inside the new pid namespace: it shows that one. */
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
        return fail(err, "mount a /proc of its own on", "/proc");
    for (const char *const *m = contain_masked; *m; m++)
        if (under_proc(*m) && mask(*m, masked_dir(*m), err) < 0)
            return -1;
    for (const char *const *r = contain_readonly; *r; r++)
        if (under_proc(*r) && make_readonly(*r, err) < 0)
            return -1;
    return 0;
}

static int capget_now(uint64_t *eff, uint64_t *perm)
{
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2];
    memset(d, 0, sizeof(d));
    if (syscall(SYS_capget, &h, d) < 0)
        return -1;
    *eff = (uint64_t)d[0].effective | (uint64_t)d[1].effective << 32;
    *perm = (uint64_t)d[0].permitted | (uint64_t)d[1].permitted << 32;
    return 0;
}

int contain_caps_before_ids(const struct contain_plan *p)
{
    uint64_t eff = 0, perm = 0;
    /* Only a holder of CAP_SETPCAP can shrink the bounding set; a hearth
     * that is not root has nothing in it to lose here (no_new_privs
     * keeps file capabilities from adding any at exec). */
    if (capget_now(&eff, &perm) < 0)
        return -1;
    if (eff & BIT(CAP_SETPCAP)) {
        for (int c = 0; c < 64; c++) {
            if (p->caps & BIT(c))
                continue;
            if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0) {
                if (errno == EINVAL)
                    break; /* past the kernel's last capability */
                return -1;
            }
        }
    }
    if (p->ambient && prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) < 0)
        return -1;
    return 0;
}

int contain_caps_after_ids(const struct contain_plan *p)
{
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2];
    uint64_t eff = 0, perm = 0;

    /* Never more than held now: a hearth that is not root has none. */
    if (capget_now(&eff, &perm) < 0)
        return -1;
    uint64_t caps = p->caps & perm;
    uint32_t lo = (uint32_t)caps, hi = (uint32_t)(caps >> 32);
    memset(d, 0, sizeof(d));
    d[0].effective = d[0].permitted = lo;
    d[1].effective = d[1].permitted = hi;
    /* Ambient capabilities must be inheritable too; a root service gets
     * its set back from the bounding set at exec and needs none. */
    if (p->ambient) {
        d[0].inheritable = lo;
        d[1].inheritable = hi;
    }
    if (syscall(SYS_capset, &h, d) < 0)
        return -1;
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
        return -1;
    if (p->ambient) {
        for (int c = 0; c < 64; c++)
            if ((caps & BIT(c)) && prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, c, 0, 0) < 0)
                return -1;
        prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0);
    }
    return 0;
}
