#include "mounts.h"
#include "err.h"
#include "mountinfo.h"
#include "pathname.h"
#include "safepath.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cJSON.h>
#include <ev.h>

#include "accounts.h"
#include "childjob.h"
#include "config.h"
#include "events.h"
#include "identity.h"
#include "gates.h"
#include "hearth.h"
#include "log.h"

#define RETRY_FIRST_MS 50
#define RETRY_MAX_MS 1000

/* M_OWNING: mounted (or there, for a platform mount), its owner being
 * given in a child; not usable until that answers. */
enum mstate { M_PENDING, M_WAITING, M_MOUNTED, M_FAILED, M_OWNING };
static const char *const state_names[] = {"pending", "waiting", "mounted", "failed", "owning"};

enum mfrom { FROM_CONFIG, FROM_HOST, FROM_SHARE };
static const char *const from_names[] = {"mounts", "host_mounts", "host_mounts_rule"};

struct mnt {
    char source[512];
    char target[512];
    char type[32];
    char options[512];
    char owner[160];       /* "USER[:GROUP]" given to the mount's root, or "" */
    bool ro, required;
    enum mfrom from;
    int64_t timeout_ms;
    enum mstate state;
    bool already;          /* found in place, not mounted by this pass */
    unsigned attempts;
    int64_t first_ms;      /* monotonic time of the first attempt */
    char error[256];
    /* What the mount table shows at target once mounted: the mount's id
     * and its root within its filesystem (a bind's directory), or its
     * source when that root is the whole filesystem. */
    int mount_id;
    char mounted_from[512];
    /* type "platform": made by someone else (the platform's agent, the
     * runtime's -v), watched for, never mounted or unmounted by hearth.
     * changes counts appearances, departures and replacements after boot;
     * late: still not there timeout_ms after hearth began to wait. */
    bool platform, late;
    unsigned changes;
    const char *last_change;
    int64_t last_change_ms, wait_since_ms;
    /* Waiting under a platform mount that is not there yet: mounted
     * into the image's directory it would be hidden by it. */
    bool blocked;
    struct owner_job *oj;  /* the owner step under way (M_OWNING) */
    bool left;             /* went or was replaced in this look (platform_check) */
};

static struct {
    struct mnt *m;         /* grown as entries are added, at most MOUNTS_MAX */
    size_t n, cap;
    size_t cur;            /* the next entry to try in this pass */
    bool running, done;
    bool again;            /* a platform mount appeared during the pass: one more */
    bool identity_renewed; /* the first platform mount after start renewed it */
    ev_timer retry;
    ev_timer late;         /* the next platform mount to become late */
    ev_timer poll;         /* only when the mount table cannot be watched */
    void (*done_fn)(void);
    void (*left_fn)(const char *target, const char *why);
    char rule_mode[16], rule_tag[256], rule_root[512];
    char rule_owner[160];
} M;

/* ------------------------------------------------------------------ */
/* Options and sources. */

static const struct {
    const char *name;
    unsigned long set, clear;
} flag_opts[] = {
    {"ro", MS_RDONLY, 0},          {"rw", 0, MS_RDONLY},
    {"nosuid", MS_NOSUID, 0},      {"suid", 0, MS_NOSUID},
    {"nodev", MS_NODEV, 0},        {"dev", 0, MS_NODEV},
    {"noexec", MS_NOEXEC, 0},      {"exec", 0, MS_NOEXEC},
    {"noatime", MS_NOATIME, 0},    {"nodiratime", MS_NODIRATIME, 0},
    {"relatime", MS_RELATIME, 0},  {"strictatime", MS_STRICTATIME, 0},
    {"sync", MS_SYNCHRONOUS, 0},   {"dirsync", MS_DIRSYNC, 0},
    {"lazytime", MS_LAZYTIME, 0},  {"defaults", 0, 0},
};

int mounts_parse_options(const char *opts, unsigned long *flags, char *data, size_t datalen)
{
    size_t o = 0;

    data[0] = '\0';
    while (opts && *opts) {
        size_t len = strcspn(opts, ",");
        bool known = false;
        for (size_t i = 0; i < sizeof(flag_opts) / sizeof(flag_opts[0]); i++) {
            if (strlen(flag_opts[i].name) == len && strncmp(opts, flag_opts[i].name, len) == 0) {
                *flags = (*flags | flag_opts[i].set) & ~flag_opts[i].clear;
                known = true;
                break;
            }
        }
        if (!known && len > 0) {
            if (o + len + 2 > datalen)
                return -1;
            if (o)
                data[o++] = ',';
            memcpy(data + o, opts, len);
            o += len;
            data[o] = '\0';
        }
        opts += len;
        if (*opts == ',')
            opts++;
    }
    return 0;
}

static const char *last_component(const char *p)
{
    const char *s = strrchr(p, '/');
    return s && s[1] ? s + 1 : p;
}

int mounts_host_source(const char *mode, const char *tag, const char *host_root,
                       const char *host_path, char *out, size_t outlen)
{
    int n;

    if (mode && strcmp(mode, "subpath") == 0) {
        size_t rl = strlen(host_root ? host_root : "/");
        while (rl > 1 && host_root[rl - 1] == '/')
            rl--;
        const char *rest = host_path;
        if (host_root && !(rl == 1 && host_root[0] == '/')) {
            if (strncmp(host_path, host_root, rl) != 0 || (host_path[rl] && host_path[rl] != '/'))
                return -1;
            rest = host_path + rl;
        }
        n = snprintf(out, outlen, "%s/%s%s", MOUNTS_SHARE_DIR, tag ? tag : "", rest);
    } else {
        n = snprintf(out, outlen, "%s%s", tag ? tag : "", last_component(host_path));
    }
    return n < 0 || (size_t)n >= outlen ? -1 : 0;
}

/* ------------------------------------------------------------------ */
/* /proc/self/mountinfo: what is mounted at a path now. */

struct minfo {
    char fstype[32];
    char source[512];
    char from[512];        /* the root of the mount when not "/", else source */
    int id;
    bool ro;
};

struct minfo_find {
    const char *target;
    struct minfo *out;
    bool found;
    long long visible;     /* the id of the mount target resolves to, or -1 */
};

static bool minfo_match(const struct mountinfo_entry *e, void *ctx)
{
    struct minfo_find *q = ctx;
    if (strcmp(e->target, q->target) != 0)
        return true;
    /* A mount hidden by a later one over it or over a parent (a platform
     * mount replacing a home, hearth's mount under the old one) keeps
     * its line: only the one the path leads to counts. */
    if (q->visible >= 0 && e->id != q->visible)
        return true;
    snprintf(q->out->fstype, sizeof(q->out->fstype), "%s", e->fstype);
    snprintf(q->out->source, sizeof(q->out->source), "%s", e->source);
    snprintf(q->out->from, sizeof(q->out->from), "%s",
             strcmp(e->root, "/") != 0 ? e->root : e->source);
    q->out->id = e->id;
    q->out->ro = strncmp(e->opts, "ro,", 3) == 0 || strcmp(e->opts, "ro") == 0;
    q->found = true;
    return true; /* keep going: the topmost mount is the last one */
}

/* The mount at target, if any: the one the path leads to, or where the
 * kernel cannot say which that is, the last line naming it. */
static bool mountinfo_find(const char *target, struct minfo *out)
{
    struct minfo_find q = {target, out, false, mountinfo_mount_id(target)};
    return mountinfo_each(minfo_match, &q) == 0 && q.found;
}

static const char *kernel_type(const struct mnt *m)
{
    return strcmp(m->type, "bind") == 0 ? NULL : m->type;
}

/* Whether what is mounted at m->target is m already: same filesystem and
 * source, or for a bind the same inode as the source. */
static bool in_place(const struct mnt *m, const struct minfo *mi)
{
    if (strcmp(m->type, "bind") == 0) {
        struct stat a, b;
        return stat(m->source, &a) == 0 && stat(m->target, &b) == 0 && a.st_dev == b.st_dev &&
               a.st_ino == b.st_ino;
    }
    if (strcmp(mi->fstype, kernel_type(m)) != 0)
        return false;
    if (strcmp(m->type, "tmpfs") == 0)
        return true;
    if (strcmp(mi->source, m->source) == 0)
        return true;
    /* A block device named through a link (/dev/disk/by-label/x): the
     * mounted filesystem's device is the source's. */
    struct stat a, b;
    return stat(m->source, &a) == 0 && S_ISBLK(a.st_mode) && stat(m->target, &b) == 0 &&
           a.st_rdev == b.st_dev;
}

/* ------------------------------------------------------------------ */
/* One attempt. */

enum attempt { A_DONE, A_RETRY };

/* The mount point, made (or found) without following a link anywhere on
 * its path: a directory, or for a bind of a single file a regular file
 * (never blocking on a FIFO). *fd keeps it open so the mount lands on
 * that very inode (by /proc/self/fd), not on whatever a link swapped in
 * since points to. */
static int make_target(const struct mnt *m, int *fd)
{
    struct stat s;
    struct err why;

    *fd = -1;
    if (strcmp(m->type, "bind") == 0 && stat(m->source, &s) == 0 && !S_ISDIR(s.st_mode)) {
        char parent[512];
        snprintf(parent, sizeof(parent), "%s", m->target);
        char *slash = strrchr(parent, '/');
        if (!slash || !slash[1]) {
            errno = EINVAL;
            return -1;
        }
        *slash = '\0';
        int pfd = safepath_mkdir_p(parent[0] ? parent : "/", 0755, geteuid(), getegid(), &why);
        if (pfd < 0)
            return -1;
        int tfd = safepath_open(pfd, slash + 1, O_RDONLY | O_CREAT, 0644, &why);
        int e = errno;
        close(pfd);
        if (tfd < 0) {
            errno = e;
            return e == EISDIR ? 0 : -1;
        }
        *fd = tfd;
        return 0;
    }
    /* A directory target likewise: made without following a link, and
     * mounted on through its fd. */
    int dfd = safepath_mkdir_p(m->target, 0755, geteuid(), getegid(), &why);
    if (dfd < 0)
        return -1;
    *fd = dfd;
    return 0;
}

/* Errors that mean "not there yet": the tag, device or source may still
 * be hot-plugged. virtio-fs answers EINVAL for an unknown tag, 9p ENOENT. */
static bool retryable(const struct mnt *m, int e)
{
    if (e == ENOENT || e == ENXIO || e == ENODEV)
        return true;
    return e == EINVAL && strcmp(m->type, "virtiofs") == 0;
}

static void set_error(struct mnt *m, const char *fmt, const char *what, int e)
{
    snprintf(m->error, sizeof(m->error), fmt, what, strerror(e));
}

static int read_only_now(const char *target)
{
    struct statvfs v;
    if (statvfs(target, &v) < 0)
        return -1;
    return (v.f_flag & ST_RDONLY) != 0;
}


#ifndef SYS_open_tree
#define SYS_open_tree 428
#endif
#ifndef SYS_move_mount
#define SYS_move_mount 429
#endif
#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif

/* A bind mount given its flags before it is attached (open_tree, then
 * mount_setattr, then move_mount; kernel 5.12+). The copies propagation
 * makes into running services' namespaces are taken when it is attached
 * and keep the flags it had then: a read-only remount afterwards would
 * change hearth's copy only and leave theirs writable. -1 with errno
 * ENOSYS where the kernel lacks one of the calls. */
static int bind_with_flags(const char *src, int tfd, const char *target, unsigned long rf)
{
    struct {
        uint64_t attr_set, attr_clr, propagation, userns_fd;
    } a = {0, 0, 0, 0};
    int fd = (int)syscall(SYS_open_tree, AT_FDCWD, src, 1 /* OPEN_TREE_CLONE */ | O_CLOEXEC |
                                                              0x8000 /* AT_RECURSIVE */);
    if (fd < 0)
        return -1;
    a.attr_set = (rf & MS_RDONLY ? 0x1 : 0) | (rf & MS_NOSUID ? 0x2 : 0) |
                 (rf & MS_NODEV ? 0x4 : 0) | (rf & MS_NOEXEC ? 0x8 : 0) |
                 (rf & MS_NOATIME ? 0x10 : 0) | (rf & MS_NODIRATIME ? 0x80 : 0);
    if (rf & MS_NOATIME)
        a.attr_clr = 0x70; /* MOUNT_ATTR__ATIME: the atime mode is replaced whole */
    int rc = -1;
    /* Onto the target's own fd where there is one (what make_target
     * checked), else by name. */
    if (syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH | 0x8000, &a, sizeof(a)) == 0 &&
        (tfd >= 0 ? syscall(SYS_move_mount, fd, "", tfd, "",
                            0x4 /* MOVE_MOUNT_F_EMPTY_PATH */ | 0x40 /* MOVE_MOUNT_T_EMPTY_PATH */)
                  : syscall(SYS_move_mount, fd, "", AT_FDCWD, target,
                            0x4 /* MOVE_MOUNT_F_EMPTY_PATH */)) == 0)
        rc = 0;
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

static enum attempt attempt_fd(struct mnt *m, int *tfd)
{
    unsigned long flags = 0;
    char data[640];
    struct minfo mi;
    const char *src = m->source;

    if (m->attempts++ == 0)
        m->first_ms = mono_ms();
    m->error[0] = '\0';
    const char *parent = mounts_path_failed(m->target);
    if (parent && strcmp(parent, m->target) != 0) {
        snprintf(m->error, sizeof(m->error), "unable to mount beneath %s: it failed", parent);
        m->state = M_FAILED;
        return A_DONE;
    }
    if (make_target(m, tfd) < 0) {
        /* The source decides whether a bind target is a file: maybe later. */
        int e = errno;
        set_error(m, "unable to create %s: %s", m->target, e);
        if (e == ELOOP)
            snprintf(m->error, sizeof(m->error),
                     "unable to create %s: a symbolic link is in the way (not followed)",
                     m->target);
        else if (e == SAFEPATH_EWRONGTYPE)
            snprintf(m->error, sizeof(m->error), "unable to use %s: not a regular file", m->target);
        if (e == ENOENT)
            goto failed_or_retry;
        m->state = M_FAILED;
        return A_DONE;
    }
    if (mountinfo_find(m->target, &mi) && in_place(m, &mi)) {
        int ro = read_only_now(m->target);
        if (ro == (int)m->ro) {
            m->already = true;
            m->state = M_MOUNTED;
            log_info("mount %s: already in place", m->target);
            return A_DONE;
        }
        /* In place with the wrong mode: fix just that. */
        unsigned long rf = MS_REMOUNT | (m->ro ? MS_RDONLY : 0) |
                           (strcmp(m->type, "bind") == 0 ? MS_BIND : 0);
        if (mount(NULL, m->target, NULL, rf, NULL) < 0) {
            set_error(m, "unable to remount %s: %s", m->target, errno);
            m->state = M_FAILED;
            return A_DONE;
        }
        m->already = true;
        goto verify;
    }
    if (mounts_parse_options(m->options, &flags, data, sizeof(data)) < 0) {
        snprintf(m->error, sizeof(m->error), "options too long");
        m->state = M_FAILED;
        return A_DONE;
    }
    if (m->ro)
        flags |= MS_RDONLY;
    if (strcmp(m->type, "9p") == 0) {
        char d9[sizeof(data)];
        snprintf(d9, sizeof(d9), "trans=virtio,version=9p2000.L%s%s", data[0] ? "," : "", data);
        snprintf(data, sizeof(data), "%s", d9);
    } else if (strcmp(m->type, "bind") == 0) {
        /* The kernel ignores MS_RDONLY on the bind itself: a remount
         * below makes it read-only. */
        flags = MS_BIND | MS_REC;
    } else if (strcmp(m->type, "tmpfs") == 0 && !src[0]) {
        src = "tmpfs";
    }
    /* Mounted on through the fd make_target checked. */
    char fdpath[40];
    const char *mt = m->target;
    if (*tfd >= 0 && access("/proc/self/fd", X_OK) == 0) {
        snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", *tfd);
        mt = fdpath;
    }
    unsigned long bind_rf = 0;
    if (strcmp(m->type, "bind") == 0) {
        char ignored[sizeof(data)];
        mounts_parse_options(m->options, &bind_rf, ignored, sizeof(ignored));
        bind_rf &= MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME | MS_NODIRATIME;
        if (m->ro)
            bind_rf |= MS_RDONLY;
    }
    /* A bind with flags is attached with them where the kernel can
     * (ENOSYS: mounted, then remounted below); anything else by mount(2). */
    bool attached = false, failed = false;
    if (bind_rf) {
        attached = bind_with_flags(src, *tfd, m->target, bind_rf) == 0;
        /* ENOSYS: an older kernel; EPERM: a container's seccomp profile
         * that does not know these calls (mount(2) then says what is
         * really allowed). */
        failed = !attached && errno != ENOSYS && errno != EPERM;
    }
    if (!attached && !failed && mount(src, mt, kernel_type(m), flags, data[0] ? data : NULL) < 0)
        failed = true;
    if (failed) {
        int e = errno;
        set_error(m, "unable to mount %s: %s", src, e);
        if (retryable(m, e))
            goto failed_or_retry;
        m->state = M_FAILED;
        return A_DONE;
    }
    if (!attached && bind_rf) {
        unsigned long rf = bind_rf;
        if (mount(NULL, m->target, NULL, MS_REMOUNT | MS_BIND | rf, NULL) < 0) {
            set_error(m, "unable to make %s read-only: %s", m->target, errno);
            umount2(m->target, MNT_DETACH);
            m->state = M_FAILED;
            return A_DONE;
        }
    }
verify:
    /* Read-only is a promise to the host (shared skills, templates): it is
     * checked, never assumed. */
    if (m->ro && read_only_now(m->target) != 1) {
        snprintf(m->error, sizeof(m->error), "%s is not read-only after mounting", m->target);
        umount2(m->target, MNT_DETACH);
        m->state = M_FAILED;
        return A_DONE;
    }
    m->state = M_MOUNTED;
    log_info("mounted %s on %s (%s%s) after %u attempt%s", src[0] ? src : m->type, m->target,
             m->type, m->ro ? ", read-only" : "", m->attempts, m->attempts == 1 ? "" : "s");
    return A_DONE;

failed_or_retry:
    if (mono_ms() - m->first_ms < m->timeout_ms) {
        m->state = M_WAITING;
        return A_RETRY;
    }
    m->state = M_FAILED;
    return A_DONE;
}

/* The owner of a mounted share's root: a fresh share belongs to whoever
 * made it on the host (root, mostly), and an agent that is not root
 * could not write its own home. Resolved through the boot snapshot of
 * the image's accounts, set on the root opened without following a link,
 * only when it differs, and read back: a 9p server that drops ownership
 * changes (security_model=none, unprivileged) must not pass for done.
 *
 * Opening, stating and changing that root wait on the share's server: on
 * one that hangs at its first appearance (a stuck virtio-fs or 9p
 * daemon) each waits for ever. So that step runs in a child (childjob)
 * with the mount's deadline (timeout_ms, else CONFIG_MOUNT_TIMEOUT_MS),
 * and the mount is "owning" until it answers: not usable, so what waits
 * for it (entries under it, seeding, the phase) waits on. The jobs live
 * in a pool, not in the list (its entries move when it grows or
 * host_mounts change), found again through the entry that points to
 * one; a job killed while stuck in the kernel keeps its slot until it is
 * reaped. */
#define OWNER_JOBS 16
#define OWNER_RESULT_MAX 320
enum { OWNER_SAME = 'S', OWNER_GIVEN = 'G', OWNER_FAILED = 'F' };

struct owner_job {
    struct childjob job;
    char owner[160], target[512];
    uid_t uid;
    gid_t gid;
};
static struct owner_job owner_jobs[OWNER_JOBS];

/* The step itself (in the child, or here without a loop): OWNER_SAME,
 * OWNER_GIVEN, or OWNER_FAILED with err. */
static char owner_work(const struct owner_job *o, struct err *err)
{
    struct err why;
    struct stat st;

    err->msg[0] = '\0';
    err->code = 0;
    int fd = safepath_open_abs(o->target, O_RDONLY | O_DIRECTORY, 0, &why);
    if (fd < 0 && (errno == ENOTDIR || errno == SAFEPATH_EWRONGTYPE)) /* a bind of one file */
        fd = safepath_open_abs(o->target, O_RDONLY, 0, &why);
    if (fd < 0) {
        err_set(err, "owner %s: unable to open %s: %s", o->owner, o->target, why.msg);
        return OWNER_FAILED;
    }
    char r = OWNER_FAILED;
    if (fstat(fd, &st) < 0) {
        err_unable(err, errno, "stat %s", o->target);
        err_wrap(err, "owner");
    } else if (st.st_uid == o->uid && st.st_gid == o->gid) {
        r = OWNER_SAME;
    } else if (fchown(fd, o->uid, o->gid) < 0) {
        err_unable(err, errno, "give %s to %u:%u", o->target, (unsigned)o->uid, (unsigned)o->gid);
        err_wrap(err, "owner %s", o->owner);
    } else if (fstat(fd, &st) < 0 || st.st_uid != o->uid || st.st_gid != o->gid) {
        err_set(err,
                "owner %s: %s still belongs to %u:%u after the change to %u:%u (the share "
                "does not keep owners)", o->owner, o->target, (unsigned)st.st_uid,
                (unsigned)st.st_gid, (unsigned)o->uid, (unsigned)o->gid);
    } else {
        r = OWNER_GIVEN;
    }
    close(fd);
    return r;
}

static void owner_child(int wfd, void *arg)
{
    struct err e;
    char msg[OWNER_RESULT_MAX];

    msg[0] = owner_work(arg, &e);
    snprintf(msg + 1, sizeof(msg) - 1, "%s", e.msg);
    _exit(childjob_write(wfd, msg, 1 + strlen(msg + 1)) == 0 ? 0 : 1);
}

/* Whether m's owner step ended well (its log line when it changed the
 * owner); on failure m->error says why. */
static bool owner_result(struct mnt *m, const struct owner_job *o, char r, const char *msg)
{
    if (r == OWNER_GIVEN)
        log_info("mount %s: its root given to %s (%u:%u)", m->target, m->owner, (unsigned)o->uid,
                 (unsigned)o->gid);
    if (r == OWNER_SAME || r == OWNER_GIVEN)
        return true;
    snprintf(m->error, sizeof(m->error), "%s", msg);
    return false;
}

/* A job whose mount changed under it: killed, its answer ignored. */
static void owner_cancel(struct mnt *m)
{
    if (!m->oj)
        return;
    struct owner_job *o = m->oj;
    m->oj = NULL;
    childjob_cancel(&o->job);
}

static void owner_done(struct childjob *j, enum childjob_end end, int status, const char *data,
                       size_t len);

/* Starts giving m's root its owner: 0 nothing to do, or done here (no
 * loop); 1 under way in a child (owner_done follows: m is M_OWNING); -1
 * failed (m->error). */
static int owner_begin(struct mnt *m)
{
    struct owner_job *o = NULL;
    uid_t uid = geteuid();
    gid_t gid = getegid();
    struct err why;

    if (!m->owner[0])
        return 0;
    if (accounts_owner(accounts_snapshot(), m->owner, &uid, &gid, &why) < 0) {
        snprintf(m->error, sizeof(m->error), "owner %s: %s", m->owner, why.msg);
        return -1;
    }
    for (size_t i = 0; i < OWNER_JOBS && !o; i++)
        if (owner_jobs[i].job.pid == 0 && owner_jobs[i].job.killed == 0)
            o = &owner_jobs[i];
    if (!o) {
        snprintf(m->error, sizeof(m->error),
                 "owner %s: unable to give %s its owner: %d owner steps are still under way "
                 "(shares that hang?)", m->owner, m->target, OWNER_JOBS);
        return -1;
    }
    snprintf(o->owner, sizeof(o->owner), "%s", m->owner);
    snprintf(o->target, sizeof(o->target), "%s", m->target);
    o->uid = uid;
    o->gid = gid;
    if (!H.loop) {
        /* No loop (unit tests): here and now. */
        struct err e;
        char r = owner_work(o, &e);
        return owner_result(m, o, r, e.msg) ? 0 : -1;
    }
    int64_t timeout = m->timeout_ms > 0 ? m->timeout_ms : CONFIG_MOUNT_TIMEOUT_MS;
    if (childjob_start(&o->job, timeout, OWNER_RESULT_MAX, owner_child, o, owner_done,
                       &why) < 0) {
        snprintf(m->error, sizeof(m->error), "owner %s: unable to start giving %s its owner: %s",
                 m->owner, m->target, why.msg);
        return -1;
    }
    m->oj = o;
    m->state = M_OWNING;
    return 1;
}

static void record_mount(struct mnt *m)
{
    struct minfo mi;
    if (mountinfo_find(m->target, &mi)) {
        m->mount_id = mi.id;
        snprintf(m->mounted_from, sizeof(m->mounted_from), "%s", mi.from);
    } else {
        m->mount_id = 0;
        m->mounted_from[0] = '\0';
    }
}

/* A home the agent cannot write is no home: failed, and what this pass
 * mounted is taken away again. */
static void owner_failed(struct mnt *m)
{
    log_error("mount %s: %s", m->target, m->error);
    if (!m->already)
        umount2(m->target, MNT_DETACH);
    m->state = M_FAILED;
}

static enum attempt attempt(struct mnt *m)
{
    int tfd = -1;
    enum attempt r = attempt_fd(m, &tfd);
    if (tfd >= 0)
        close(tfd);
    if (r == A_DONE && m->state == M_MOUNTED) {
        int o = owner_begin(m);
        if (o < 0)
            owner_failed(m);
    }
    if (m->state == M_MOUNTED || m->state == M_OWNING)
        record_mount(m);
    return r;
}

/* ------------------------------------------------------------------ */
/* Platform mounts. */

/* The platform mount that path lies at or under and that is not there
 * (or failed), else NULL. */
static const struct mnt *platform_absent_above(const char *path)
{
    for (size_t i = 0; i < M.n; i++) {
        const struct mnt *p = &M.m[i];
        if (p->platform && p->state != M_MOUNTED && pathname_at_or_under(path, p->target))
            return p;
    }
    return NULL;
}

/* Required platform mounts not there (one there whose owner could not be
 * given is failed, and counts with failed_required). */
static size_t platform_waiting(void)
{
    size_t n = 0;
    for (size_t i = 0; i < M.n; i++)
        n += M.m[i].platform && M.m[i].required && M.m[i].state == M_WAITING;
    return n;
}

/* Platform mounts there whose owner step is under way. */
static size_t platform_owning(void)
{
    size_t n = 0;
    for (size_t i = 0; i < M.n; i++)
        n += M.m[i].platform && M.m[i].state == M_OWNING;
    return n;
}

static void emit_late(const struct mnt *m, int64_t now)
{
    log_warn("platform mount %s: still not there after %lld ms (timeout_ms)%s", m->target,
             (long long)(now - m->wait_since_ms), m->required ? "; services after mounts wait" : "");
    cJSON *ev = cJSON_CreateObject();
    if (ev) {
        cJSON_AddStringToObject(ev, "target", m->target);
        cJSON_AddNumberToObject(ev, "waited_ms", (double)(now - m->wait_since_ms));
        cJSON_AddNumberToObject(ev, "timeout_ms", (double)m->timeout_ms);
        cJSON_AddBoolToObject(ev, "required", m->required);
    }
    events_emit("mount.late", ev);
}

/* Marks the platform mounts whose timeout_ms has passed late (once per
 * wait) and arms the timer for the next one. */
static void check_late(void)
{
    int64_t now = mono_ms(), next = -1;

    for (size_t i = 0; i < M.n; i++) {
        struct mnt *m = &M.m[i];
        if (!m->platform || m->state != M_WAITING || m->late || m->timeout_ms <= 0)
            continue;
        int64_t left = m->wait_since_ms + m->timeout_ms - now;
        if (left <= 0) {
            m->late = true;
            emit_late(m, now);
        } else if (next < 0 || left < next) {
            next = left;
        }
    }
    if (!H.loop)
        return;
    ev_timer_stop(H.loop, &M.late);
    if (next >= 0) {
        ev_timer_set(&M.late, (double)next / 1000.0, 0.);
        ev_timer_start(H.loop, &M.late);
    }
}

static void on_late(struct ev_loop *loop, ev_timer *w, int revents)
{
    check_late();
}

static void change_event(const struct mnt *m, const char *change, int prev_id,
                         const char *prev_from, const struct minfo *mi)
{
    cJSON *ev = cJSON_CreateObject();
    if (!ev)
        return;
    cJSON_AddStringToObject(ev, "target", m->target);
    cJSON_AddStringToObject(ev, "change", change);
    cJSON_AddBoolToObject(ev, "required", m->required);
    if (mi) {
        cJSON_AddNumberToObject(ev, "mount_id", mi->id);
        cJSON_AddStringToObject(ev, "mounted_from", mi->from);
        cJSON_AddStringToObject(ev, "fstype", mi->fstype);
        cJSON_AddBoolToObject(ev, "read_only", mi->ro);
    }
    if (prev_id) {
        cJSON_AddNumberToObject(ev, "previous_mount_id", prev_id);
        cJSON_AddStringToObject(ev, "previous_from", prev_from);
    }
    cJSON_AddNumberToObject(ev, "changes", m->changes);
    if (m->state == M_FAILED)
        cJSON_AddStringToObject(ev, "error", m->error);
    events_emit("mount.changed", ev);
}

/* The entries hearth mounts at or under a platform mount that came (back):
 * the ones it had mounted there went with the mount the platform took
 * away, unless they are still in place, and are mounted again. */
static void renew_nested(const struct mnt *p)
{
    for (size_t i = 0; i < M.n; i++) {
        struct mnt *m = &M.m[i];
        struct minfo mi;
        if (m->platform || m->state != M_MOUNTED || !pathname_at_or_under(m->target, p->target))
            continue;
        if (mountinfo_find(m->target, &mi) && in_place(m, &mi))
            continue;
        log_info("mount %s: gone with the platform mount at %s; mounting it again", m->target,
                 p->target);
        m->state = M_PENDING;
        m->attempts = 0;
        m->already = false;
    }
}

static void repass(void);
static void run(void);

static void emit_failed(const struct mnt *m)
{
    /* Not mount_json: "type" is the event's own key. */
    cJSON *ev = cJSON_CreateObject();
    if (ev) {
        cJSON_AddStringToObject(ev, "target", m->target);
        cJSON_AddStringToObject(ev, "source", m->source);
        cJSON_AddStringToObject(ev, "fstype", m->type);
        cJSON_AddBoolToObject(ev, "required", m->required);
        cJSON_AddStringToObject(ev, "error", m->error);
    }
    events_emit("mount.failed", ev);
}

/* A platform mount whose owner could not be given: failed until it
 * changes (it is the platform's to take away, not hearth's). */
static void platform_owner_failed(struct mnt *m)
{
    log_error("platform mount %s: %s", m->target, m->error);
    m->state = M_FAILED;
    emit_failed(m);
}

static void after_attempt(struct mnt *m);

/* The owner step's answer (or its deadline): the mount is usable, or
 * failed; then what waited for it goes on. */
static void owner_done(struct childjob *j, enum childjob_end end, int status, const char *data,
                       size_t len)
{
    struct owner_job *o = (struct owner_job *)j;
    struct mnt *m = NULL;
    char msg[OWNER_RESULT_MAX];
    char r = OWNER_FAILED;

    for (size_t i = 0; i < M.n && !m; i++)
        if (M.m[i].oj == o)
            m = &M.m[i];
    if (!m)
        return; /* cancelled: its mount changed or left the list */
    m->oj = NULL;
    if (end == CHILDJOB_TIMEOUT) {
        snprintf(msg, sizeof(msg), "owner %s: %s did not answer in %lld ms", o->owner, o->target,
                 (long long)j->timeout_ms);
    } else if (end == CHILDJOB_EXITED && WIFEXITED(status) && len >= 1 &&
               (data[0] == OWNER_SAME || data[0] == OWNER_GIVEN || data[0] == OWNER_FAILED)) {
        r = data[0];
        snprintf(msg, sizeof(msg), "%.*s", (int)(len - 1), data + 1);
    } else {
        snprintf(msg, sizeof(msg), "owner %s: unable to give %s its owner: the process ended "
                 "without an answer (status %d)", o->owner, o->target, status);
    }
    bool ok = owner_result(m, o, r, msg);
    if (m->platform) {
        if (ok)
            m->state = M_MOUNTED;
        else
            platform_owner_failed(m);
        repass(); /* what waited under it, seeding and the phase */
        return;
    }
    if (ok)
        m->state = M_MOUNTED;
    else
        owner_failed(m);
    /* The pass waited on this entry: it goes on from here. */
    if (M.running && M.cur < M.n && &M.m[M.cur] == m) {
        after_attempt(m);
        M.cur++;
        run();
    }
}

/* Compares each platform mount with what the mount table shows at its
 * target now (the topmost mount there, by id). at_boot: the first look,
 * which is no change (a runtime's -v is simply there). */
static void platform_check(bool at_boot)
{
    char why[700] = "";
    bool revoke = false, pass = false, first_arrival = false;
    int64_t now = mono_ms();

    for (size_t i = 0; i < M.n; i++) {
        struct mnt *m = &M.m[i];
        struct minfo mi;
        if (!m->platform)
            continue;
        bool present = mountinfo_find(m->target, &mi);
        int id = present ? mi.id : 0;
        if (!at_boot && id == m->mount_id)
            continue;
        /* An owner step for the one that was there no longer counts. */
        owner_cancel(m);
        const char *change = !m->mount_id ? "appeared" : !id ? "gone" : "replaced";
        int prev_id = m->mount_id;
        char prev_from[sizeof(m->mounted_from)];
        snprintf(prev_from, sizeof(prev_from), "%s", m->mounted_from);
        bool was_up = m->state == M_MOUNTED;
        m->mount_id = id;
        snprintf(m->mounted_from, sizeof(m->mounted_from), "%s", present ? mi.from : "");
        m->error[0] = '\0';
        if (!at_boot) {
            m->changes++;
            m->last_change = change;
            m->last_change_ms = now;
        }
        if (present) {
            first_arrival |= !at_boot && !prev_id && m->changes == 1;
            m->state = M_MOUNTED;
            m->already = at_boot;
            m->late = false;
            m->ro = mi.ro;
            log_info("platform mount %s: %s (mount %d of %s, %s%s)", m->target,
                     at_boot ? "in place" : change, id, mi.from, mi.fstype,
                     mi.ro ? ", read-only" : "");
            if (owner_begin(m) < 0)
                platform_owner_failed(m);
            renew_nested(m);
            pass = true;
        } else {
            m->state = M_WAITING;
            m->wait_since_ms = now;
            m->late = false;
            m->already = false;
            m->ro = false;
            snprintf(m->error, sizeof(m->error), "%s", at_boot
                     ? "not mounted yet (the platform mounts it)"
                     : "gone (the platform unmounted it)");
            if (at_boot)
                log_info("platform mount %s: not there yet; waiting for it", m->target);
            else
                log_warn("platform mount %s: gone (was mount %d of %s)", m->target, prev_id,
                         prev_from);
        }
        if (!at_boot)
            change_event(m, change, prev_id, prev_from, present ? &mi : NULL);
        /* The services on it must not write into what it hid, nor keep
         * writing into the one that replaced it unseeded. */
        if (!at_boot && was_up && m->required && prev_id) {
            size_t l = strlen(why);
            snprintf(why + l, sizeof(why) - l, "%splatform mount %s %s", l ? "; " : "", m->target,
                     change);
            revoke = true;
        }
        m->left = !at_boot && was_up && prev_id;
    }
    check_late();
    if (first_arrival && !M.identity_renewed) {
        /* A platform that mounts the home after start is one that restores
         * sandboxes from a snapshot of a template waiting here (CubeSandbox):
         * every copy holds the same generator state and ids until now, and
         * the seeding, the key made at the agent's first start and the
         * agent itself come next. Once per run of hearth: a later
         * replacement is not a restore. */
        struct err detail;
        M.identity_renewed = true;
        log_info("platform mounts arrived after start: a restored copy; renewing its identity");
        if (identity_refresh("platform_mounts", &detail) < 0)
            log_warn("identity: %s", detail.msg);
    }
    if (revoke)
        gate_revoke("mounts", why);
    /* The work under way on what went (a seed copy, a skills walk) is
     * stopped by its owner, and redone when the mount is back. */
    for (size_t i = 0; i < M.n; i++) {
        struct mnt *m = &M.m[i];
        if (!m->left)
            continue;
        m->left = false;
        if (M.left_fn) {
            char what[600];
            snprintf(what, sizeof(what), "platform mount %s %s", m->target, m->last_change);
            M.left_fn(m->target, what);
        }
    }
    if (pass && !at_boot)
        repass();
}

static void on_table(void)
{
    platform_check(false);
}

static void on_poll(struct ev_loop *loop, ev_timer *w, int revents)
{
    platform_check(false);
}

/* ------------------------------------------------------------------ */
/* The pass over the list. */

static size_t failed_required(void)
{
    size_t n = 0;
    for (size_t i = 0; i < M.n; i++)
        n += M.m[i].state == M_FAILED && M.m[i].required;
    return n;
}

static cJSON *mount_json(const struct mnt *m)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    if (!m->platform)
        cJSON_AddStringToObject(o, "source", m->source);
    cJSON_AddStringToObject(o, "target", m->target);
    cJSON_AddStringToObject(o, "type", m->type);
    if (m->options[0])
        cJSON_AddStringToObject(o, "options", m->options);
    cJSON_AddBoolToObject(o, "read_only", m->ro);
    if (m->owner[0])
        cJSON_AddStringToObject(o, "owner", m->owner);
    cJSON_AddBoolToObject(o, "required", m->required);
    cJSON_AddStringToObject(o, "state", state_names[m->state]);
    if (m->error[0] && m->state != M_MOUNTED)
        cJSON_AddStringToObject(o, "error", m->error);
    cJSON_AddNumberToObject(o, "attempts", m->attempts);
    if (m->already)
        cJSON_AddBoolToObject(o, "already", 1);
    cJSON_AddStringToObject(o, "from", from_names[m->from]);
    if (m->mount_id && m->state != M_PENDING && m->state != M_WAITING) {
        cJSON_AddNumberToObject(o, "mount_id", m->mount_id);
        cJSON_AddStringToObject(o, "mounted_from", m->mounted_from);
    }
    if (m->platform) {
        if (m->timeout_ms > 0)
            cJSON_AddNumberToObject(o, "timeout_ms", (double)m->timeout_ms);
        cJSON_AddBoolToObject(o, "late", m->late);
        cJSON_AddNumberToObject(o, "changes", m->changes);
        if (m->last_change) {
            cJSON_AddStringToObject(o, "last_change", m->last_change);
            cJSON_AddNumberToObject(o, "last_change_ms", (double)(mono_ms() - m->last_change_ms));
        }
        if (m->state == M_WAITING)
            cJSON_AddNumberToObject(o, "waiting_ms", (double)(mono_ms() - m->wait_since_ms));
    }
    return o;
}

static void finish(void)
{
    size_t bad = failed_required(), mounted = 0, waiting = platform_waiting();
    size_t owning = platform_owning();

    M.running = false;
    if (M.again) {
        /* A platform mount came during the pass: what waited for it now. */
        M.again = false;
        repass();
        return;
    }
    for (size_t i = 0; i < M.n; i++)
        mounted += M.m[i].state == M_MOUNTED;
    M.done = true;
    log_info("mounts: %zu of %zu mounted, %zu required failed%s%s", mounted, M.n, bad,
             waiting ? ", waiting for the platform's" : "",
             owning ? ", giving the platform's their owner" : "");
    cJSON *o = cJSON_CreateObject();
    if (o) {
        cJSON_AddNumberToObject(o, "mounted", (double)mounted);
        cJSON_AddNumberToObject(o, "failed_required", (double)bad);
        cJSON_AddNumberToObject(o, "waiting", (double)waiting);
    }
    events_emit("mounts.done", o);
    /* Seeding and the skills overlay write into the homes: not into the
     * image's directories a platform mount still to come would hide. The
     * watch runs this pass again when they are there (the owner step
     * when it answers). */
    if (waiting || owning)
        return;
    /* With a done callback (seeding follows), the phase waits for
     * mounts_phase_ready: "mounts" means mounted and seeded. */
    if (M.done_fn)
        M.done_fn();
    else
        mounts_phase_ready();
}

void mounts_phase_ready(void)
{
    if (M.done && failed_required() == 0 && platform_waiting() == 0 && platform_owning() == 0)
        gate_set("mounts", true);
}

/* After a platform mount appeared or was replaced: the entries that
 * waited under it, then seeding and the skills overlay (finish), the
 * others left as they are. */
static void repass(void)
{
    if (M.running) {
        M.again = true;
        return;
    }
    for (size_t i = 0; i < M.n; i++) {
        struct mnt *m = &M.m[i];
        if (m->blocked) {
            m->blocked = false;
            m->state = M_PENDING;
            m->attempts = 0;
        }
    }
    M.cur = 0;
    M.done = false;
    run();
}

static void run(void);

static void on_retry(struct ev_loop *loop, ev_timer *w, int revents)
{
    run();
}

static void run(void)
{
    M.running = true;
    while (M.cur < M.n) {
        struct mnt *m = &M.m[M.cur];
        /* Platform mounts are the watch's; a failed entry is tried again
         * only by a fresh pass (restart_pass). */
        if (m->state == M_MOUNTED || m->state == M_FAILED || m->platform) {
            M.cur++;
            continue;
        }
        const struct mnt *above = platform_absent_above(m->target);
        if (above) {
            m->state = M_WAITING;
            m->blocked = true;
            snprintf(m->error, sizeof(m->error), "waiting for the platform mount at %s",
                     above->target);
            M.cur++;
            continue;
        }
        m->blocked = false;
        if (attempt(m) == A_RETRY) {
            /* Backoff doubling from 50 ms to 1 s, never past the deadline. */
            int64_t delay = RETRY_FIRST_MS << (m->attempts < 6 ? m->attempts - 1 : 5);
            int64_t left = m->first_ms + m->timeout_ms - mono_ms();
            if (delay > RETRY_MAX_MS)
                delay = RETRY_MAX_MS;
            if (delay > left)
                delay = left > 1 ? left : 1;
            if (m->attempts == 1)
                log_info("mount %s: %s; retrying for up to %lld ms", m->target, m->error,
                         (long long)m->timeout_ms);
            if (H.loop) {
                ev_timer_set(&M.retry, (double)delay / 1000.0, 0.);
                ev_timer_start(H.loop, &M.retry);
                return;
            }
            continue; /* no loop (unit tests): try again at once */
        }
        if (m->state == M_OWNING)
            return; /* owner_done goes on */
        after_attempt(m);
        M.cur++;
    }
    finish();
}

static void after_attempt(struct mnt *m)
{
    if (m->state != M_FAILED)
        return;
    log_error("mount %s: %s%s", m->target, m->error, m->required ? "" : " (not required: skipped)");
    emit_failed(m);
}

/* Starts a pass from the first entry that is not mounted. */
static void restart_pass(void)
{
    if (H.loop && ev_is_active(&M.retry))
        ev_timer_stop(H.loop, &M.retry);
    M.cur = 0;
    M.done = false;
    /* Failed entries get a fresh timeout: the host may have fixed them.
     * Platform mounts are the watch's. */
    for (size_t i = 0; i < M.n; i++) {
        if (M.m[i].state != M_MOUNTED && !M.m[i].platform) {
            owner_cancel(&M.m[i]);
            M.m[i].state = M_PENDING;
            M.m[i].attempts = 0;
            M.m[i].blocked = false;
        }
    }
    if (M.n)
        gate_set("mounts", false);
    run();
}

static void add_mount(const char *source, const char *target, const char *type,
                      const char *options, const char *owner, bool ro, bool required,
                      int64_t timeout_ms, enum mfrom from)
{
    if (M.n >= MOUNTS_MAX) {
        log_error("mount %s: unable to add it: more than %d mounts", target, MOUNTS_MAX);
        return;
    }
    if (M.n == M.cap) {
        size_t nc = M.cap ? M.cap * 2 : 8;
        struct mnt *nm = realloc(M.m, nc * sizeof(*nm));
        if (!nm) {
            log_error("mount %s: unable to add it: out of memory", target);
            return;
        }
        M.m = nm;
        M.cap = nc;
    }
    struct mnt *m = &M.m[M.n++];
    memset(m, 0, sizeof(*m));
    snprintf(m->source, sizeof(m->source), "%s", source ? source : "");
    snprintf(m->target, sizeof(m->target), "%s", target);
    snprintf(m->type, sizeof(m->type), "%s", type ? type : "virtiofs");
    snprintf(m->options, sizeof(m->options), "%s", options ? options : "");
    snprintf(m->owner, sizeof(m->owner), "%s", owner ? owner : "");
    m->ro = ro;
    m->required = required;
    m->timeout_ms = timeout_ms;
    m->from = from;
    m->platform = strcmp(m->type, "platform") == 0;
}

/* Appends the entries of host_mounts under the rule. */
static void add_host(const struct host_mounts_cfg *hm)
{
    bool subpath = strcmp(M.rule_mode, "subpath") == 0;
    char src[512];

    if (subpath && hm->n > 0) {
        char share[512];
        snprintf(share, sizeof(share), "%s/%s", MOUNTS_SHARE_DIR, M.rule_tag);
        add_mount(M.rule_tag, share, "virtiofs", NULL, NULL, false, true, CONFIG_MOUNT_TIMEOUT_MS,
                  FROM_SHARE);
    }
    for (size_t i = 0; i < hm->n; i++) {
        const char *hp = hm->v[i].host_path, *mp = hm->v[i].mount_path;
        if (!hp || !mp ||
            mounts_host_source(M.rule_mode, M.rule_tag, M.rule_root, hp, src, sizeof(src)) < 0) {
            log_error("host_mounts entry %s: unable to add it: no source under the rule", mp ? mp : "?");
            continue;
        }
        /* The rule's owner for each writable share; the shared tag's
         * mount itself stays hearth's. */
        const char *owner = !hm->v[i].read_only && M.rule_owner[0] ? M.rule_owner : NULL;
        add_mount(src, mp, subpath ? "bind" : "virtiofs", NULL, owner, hm->v[i].read_only, true,
                  CONFIG_MOUNT_TIMEOUT_MS, FROM_HOST);
    }
}

void mounts_start(const struct config *cfg, void (*done)(void))
{
    const struct mounts_cfg *mc = &cfg->mounts;

    if (H.loop) {
        ev_timer_stop(H.loop, &M.retry);
        ev_timer_stop(H.loop, &M.late);
        ev_timer_stop(H.loop, &M.poll);
    }
    mountinfo_unwatch();
    free(M.m);
    void (*left)(const char *, const char *) = M.left_fn;
    memset(&M, 0, sizeof(M));
    M.done_fn = done;
    M.left_fn = left;
    ev_timer_init(&M.retry, on_retry, 0., 0.);
    ev_timer_init(&M.late, on_late, 0., 0.);
    ev_timer_init(&M.poll, on_poll, 1., 1.);
    snprintf(M.rule_mode, sizeof(M.rule_mode), "%s",
             mc->rule_mode[0] ? mc->rule_mode : CONFIG_MOUNT_RULE_MODE);
    snprintf(M.rule_tag, sizeof(M.rule_tag), "%s", mc->rule_tag);
    snprintf(M.rule_owner, sizeof(M.rule_owner), "%s", mc->rule_owner);
    snprintf(M.rule_root, sizeof(M.rule_root), "%s",
             mc->rule_root[0] ? mc->rule_root : CONFIG_MOUNT_HOST_ROOT);
    for (size_t i = 0; i < mc->n; i++) {
        const struct mount_cfg *e = &mc->v[i];
        add_mount(e->source, e->target, e->type, e->options, e->owner, e->read_only, e->required,
                  e->timeout_ms, FROM_CONFIG);
    }
    add_host(&mc->host);
    size_t platform = 0;
    for (size_t i = 0; i < M.n; i++)
        platform += M.m[i].platform;
    if (platform) {
        /* Watched from the start, so no change between the first look
         * and the watch goes unseen. */
        if (H.loop && mountinfo_watch(H.loop, on_table) < 0) {
            log_error("mounts: unable to watch the mount table (%s); looking at it every second "
                      "for the platform's mounts", strerror(errno));
            ev_timer_start(H.loop, &M.poll);
        }
        platform_check(true);
    }
    if (M.n == 0) {
        M.done = true;
        if (done)
            done();
        else
            mounts_phase_ready();
        return;
    }
    run();
}

void mounts_on_left(void (*fn)(const char *target, const char *why))
{
    M.left_fn = fn;
}

void mounts_apply_host(const struct host_mounts_cfg *hm)
{
    /* Drop the previous host entries (those mounted stay mounted). */
    size_t keep = 0;
    for (size_t i = 0; i < M.n; i++) {
        if (M.m[i].from == FROM_CONFIG)
            M.m[keep++] = M.m[i];
        else
            owner_cancel(&M.m[i]);
    }
    M.n = keep;
    add_host(hm);
    log_info("mounts: host_mounts set, %zu mounts", M.n);
    restart_pass();
}

int mounts_set_host(const cJSON *host_mounts, struct err *err)
{
    struct host_mounts_cfg hm;

    if (sections_host_mounts_parse(host_mounts, &hm, err) < 0)
        return -1;
    mounts_apply_host(&hm);
    sections_host_mounts_free(&hm);
    return 0;
}

int mounts_recheck(struct err *err)
{
    size_t stale = 0;
    struct minfo mi;

    if (err)
        err->msg[0] = '\0';
    if (M.running)
        return 0; /* a pass is under way: it will get there */
    for (size_t i = 0; i < M.n; i++) {
        struct mnt *m = &M.m[i];
        struct stat s;
        if (m->state != M_MOUNTED || m->platform)
            continue; /* a platform mount's changes are the watch's */
        bool gone = stat(m->target, &s) < 0 || !mountinfo_find(m->target, &mi) || !in_place(m, &mi);
        if (!gone)
            continue;
        log_warn("mount %s is gone or stale; remounting", m->target);
        umount2(m->target, MNT_DETACH);
        m->state = M_PENDING;
        m->attempts = 0;
        m->already = false;
        stale++;
    }
    if (stale == 0)
        return 0;
    restart_pass();
    for (size_t i = 0; i < M.n; i++) {
        if (M.m[i].state == M_FAILED)
            return err_set(err, "mount %s: %s", M.m[i].target, M.m[i].error);
    }
    return (int)stale;
}

int mounts_sync(void)
{
    int count = 0, failed = 0;

    for (size_t i = 0; i < M.n; i++) {
        const struct mnt *m = &M.m[i];
        if (m->state != M_MOUNTED || m->ro || strcmp(m->type, "tmpfs") == 0)
            continue;
        int fd = open(m->target, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0 || syncfs(fd) < 0) {
            log_error("mounts: unable to sync %s: %s", m->target, strerror(errno));
            failed++;
        } else {
            count++;
        }
        if (fd >= 0)
            close(fd);
    }
    return failed ? -1 : count;
}

const char *mounts_path_blocked(const char *path)
{
    static char why[600];
    const char *f = mounts_path_failed(path);
    const struct mnt *p = f ? NULL : platform_absent_above(path);

    if (f)
        snprintf(why, sizeof(why), "mount %s failed", f);
    else if (p && p->state == M_OWNING)
        snprintf(why, sizeof(why), "the platform mount at %s is not ready (its owner is being "
                 "given)", p->target);
    else if (p)
        snprintf(why, sizeof(why), "the platform mount at %s is not there", p->target);
    else
        return NULL;
    return why;
}

const char *mounts_path_failed(const char *path)
{
    for (size_t i = 0; i < M.n; i++) {
        const struct mnt *m = &M.m[i];
        size_t n = strlen(m->target);
        if (m->state != M_FAILED)
            continue;
        if (strncmp(path, m->target, n) == 0 && (path[n] == '\0' || path[n] == '/' ||
                                                  (n == 1 && m->target[0] == '/')))
            return m->target;
    }
    return NULL;
}

int mounts_entry(size_t i, struct mounts_entry *out)
{
    if (i >= M.n)
        return -1;
    out->target = M.m[i].target;
    out->type = M.m[i].type;
    out->read_only = M.m[i].ro;
    out->mounted = M.m[i].state == M_MOUNTED;
    return 0;
}

bool mounts_done(void)
{
    return M.done;
}

cJSON *mounts_list_json(void)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON *a = cJSON_AddArrayToObject(o, "mounts");
    for (size_t i = 0; a && i < M.n; i++)
        cJSON_AddItemToArray(a, mount_json(&M.m[i]));
    cJSON_AddBoolToObject(o, "done", M.done);
    cJSON_AddNumberToObject(o, "failed", (double)failed_required());
    return o;
}

cJSON *mounts_status_json(void)
{
    size_t mounted = 0;
    const struct mnt *bad = NULL;

    for (size_t i = 0; i < M.n; i++) {
        mounted += M.m[i].state == M_MOUNTED;
        if (!bad && M.m[i].state == M_FAILED && M.m[i].required)
            bad = &M.m[i];
    }
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddBoolToObject(o, "done", M.done);
    cJSON_AddNumberToObject(o, "total", (double)M.n);
    cJSON_AddNumberToObject(o, "mounted", (double)mounted);
    cJSON_AddNumberToObject(o, "failed", (double)failed_required());
    if (bad) {
        char msg[900];
        snprintf(msg, sizeof(msg), "%s: %s", bad->target, bad->error);
        cJSON_AddStringToObject(o, "error", msg);
    }
    /* The platform's mounts the services after "mounts" wait for. */
    cJSON_AddNumberToObject(o, "waiting", (double)platform_waiting());
    cJSON *wf = cJSON_AddArrayToObject(o, "waiting_for");
    cJSON *late = NULL;
    for (size_t i = 0; i < M.n; i++) {
        const struct mnt *m = &M.m[i];
        if (!m->platform || !m->required || m->state != M_WAITING)
            continue;
        if (wf)
            cJSON_AddItemToArray(wf, cJSON_CreateString(m->target));
        if (m->late && (late || (late = cJSON_AddArrayToObject(o, "late"))))
            cJSON_AddItemToArray(late, cJSON_CreateString(m->target));
    }
    /* Those there whose owner step has not answered yet (a share that
     * hangs shows here until its deadline). */
    cJSON *owning = NULL;
    for (size_t i = 0; i < M.n; i++) {
        const struct mnt *m = &M.m[i];
        if (m->state == M_OWNING && m->required &&
            (owning || (owning = cJSON_AddArrayToObject(o, "owning"))))
            cJSON_AddItemToArray(owning, cJSON_CreateString(m->target));
    }
    return o;
}
