#include "userns.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/capability.h>

#include "err.h"
#include "kfile.h"
#include "log.h"
#include "mountinfo.h"

/* ---- whether it is needed ---- */

static bool holds_sys_admin(void)
{
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2];
    memset(d, 0, sizeof(d));
    /* Unreadable: assumed held, as before user namespaces were used. */
    if (syscall(SYS_capget, &h, d) < 0)
        return true;
    return (d[CAP_SYS_ADMIN / 32].effective >> (CAP_SYS_ADMIN % 32)) & 1;
}

bool userns_needed(void)
{
    static int known = -1;
    if (known < 0) {
        known = geteuid() == 0 && !holds_sys_admin();
        if (known)
            log_info("contain: hearth holds no CAP_SYS_ADMIN: each contained service gets a "
                     "user namespace of its own (uids and gids mapped to themselves), its "
                     "namespaces made inside it");
    }
    return known;
}

/* ---- the maps ---- */

int userns_identity(const char *own, char *out, size_t outlen)
{
    size_t used = 0;
    for (const char *line = own; line && *line;) {
        const char *next = strchr(line, '\n');
        /* Three numbers, read as sscanf's "%lu %lu %lu" would (strtoul:
         * no other caller in hearth needs scanf's 4 KiB). */
        unsigned long v[3] = {0};
        const char *p = line;
        int ok = 1;
        for (int i = 0; i < 3 && ok; i++) {
            char *end;
            v[i] = strtoul(p, &end, 10);
            ok = end != p;
            p = end;
        }
        unsigned long inside = v[0], count = v[2];
        line = next ? next + 1 : NULL;
        if (!ok)
            continue;
        int n = snprintf(out + used, outlen - used, "%lu %lu %lu\n", inside, inside, count);
        if (n < 0 || (size_t)n >= outlen - used) {
            errno = E2BIG;
            return -1;
        }
        used += (size_t)n;
    }
    if (!used) {
        errno = ENODATA;
        return -1;
    }
    return 0;
}

int userns_map(pid_t pid, struct err *err)
{
    static char uid_map[16384], gid_map[16384];
    static bool read_once;
    char path[64];

    if (!read_once) {
        char own[2][16384];
        if (kfile_read("/proc/self/uid_map", own[0], sizeof(own[0])) < 0 ||
            kfile_read("/proc/self/gid_map", own[1], sizeof(own[1])) < 0 ||
            userns_identity(own[0], uid_map, sizeof(uid_map)) < 0 ||
            userns_identity(own[1], gid_map, sizeof(gid_map)) < 0) {
            int e = errno;
            uid_map[0] = gid_map[0] = 0;
            err_unable(err, e, "read hearth's own uid and gid maps");
            errno = e;
            return -1;
        }
        read_once = true;
    }
    static const char *const what[] = {"uid_map", "gid_map"};
    const char *maps[] = {uid_map, gid_map};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, what[i]);
        if (kfile_write(path, maps[i]) < 0) {
            int e = errno;
            err_set(err, "unable to write the %s of the service's user namespace: %s%s",
                    what[i], strerror(e),
                    e == EPERM ? " (hearth needs CAP_SETUID and CAP_SETGID to map every id)" : "");
            errno = e;
            return -1;
        }
    }
    return 0;
}

int userns_pipe(int fds[2])
{
    return pipe2(fds, O_CLOEXEC);
}

void userns_release(int fds[2], pid_t pid, int err)
{
    /* Written while the read end is still open here: a child that ended
     * early costs no SIGPIPE, and a pipe has room for an int. */
    if (fds[1] >= 0 && pid > 0 && write(fds[1], &err, sizeof(err)) != (ssize_t)sizeof(err)) {
        /* the child then reads EOF and fails the start */
    }
    for (int i = 0; i < 2; i++) {
        if (fds[i] >= 0)
            close(fds[i]);
        fds[i] = -1;
    }
}

int userns_wait(int fds[2])
{
    int err = 0;
    ssize_t n;

    /* The parent's end too, or EOF would never come. */
    close(fds[1]);
    do
        n = read(fds[0], &err, sizeof(err));
    while (n < 0 && errno == EINTR);
    close(fds[0]);
    if (n != (ssize_t)sizeof(err)) {
        errno = EPIPE;
        return -1;
    }
    if (err) {
        errno = err;
        return -1;
    }
    return 0;
}

/* ---- when the kernel refuses ---- */

static char refusal[400];

const char *userns_refusal(void) { return refusal; }

void userns_granted(void)
{
    if (refusal[0])
        log_info("contain: user namespaces are granted again");
    refusal[0] = 0;
}

/* A sysctl's value, first word; "" when it is not there. */
static const char *sysctl_value(const char *path, char *buf, size_t len)
{
    if (kfile_read(path, buf, len) < 0)
        buf[0] = 0;
    buf[strcspn(buf, " \t\n")] = 0;
    return buf;
}

/* Whether hearth itself runs under a seccomp filter (the runtime's). */
static bool seccomp_filtered(void)
{
    char buf[4096];
    if (kfile_read("/proc/self/status", buf, sizeof(buf)) < 0)
        return false;
    const char *s = strstr(buf, "\nSeccomp:");
    return s && atoi(s + 9) != 0;
}

bool userns_refused(int err, struct err *msg)
{
    char cause[120], fix[120], v[32];

    switch (err) {
    case ENOSPC:
    case EUSERS:
        sysctl_value("/proc/sys/user/max_user_namespaces", v, sizeof(v));
        if (strcmp(v, "0") == 0)
            snprintf(cause, sizeof(cause), "user.max_user_namespaces is 0");
        else
            snprintf(cause, sizeof(cause), "user.max_user_namespaces (%s) reached, or nested "
                     "too deep", v);
        snprintf(fix, sizeof(fix), "raise user.max_user_namespaces");
        break;
    case EINVAL:
        snprintf(cause, sizeof(cause), "this kernel has none");
        snprintf(fix, sizeof(fix), "a kernel with CONFIG_USER_NS");
        break;
    case EPERM:
        if (strcmp(sysctl_value("/proc/sys/kernel/unprivileged_userns_clone", v, sizeof(v)), "0") == 0) {
            snprintf(cause, sizeof(cause), "kernel.unprivileged_userns_clone is 0");
            snprintf(fix, sizeof(fix), "set it to 1");
        } else if (strcmp(sysctl_value("/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
                                       v, sizeof(v)), "1") == 0) {
            snprintf(cause, sizeof(cause), "kernel.apparmor_restrict_unprivileged_userns is 1");
            snprintf(fix, sizeof(fix), "set it to 0");
        } else if (seccomp_filtered()) {
            /* hearth runs under the runtime's filter: the likely one. */
            snprintf(cause, sizeof(cause), "the seccomp profile refuses CLONE_NEWUSER");
            snprintf(fix, sizeof(fix), "a seccomp profile that allows it (podman's default does)");
        } else {
            snprintf(cause, sizeof(cause), "refused by a security module");
            snprintf(fix, sizeof(fix), "allow user namespaces in its policy");
        }
        break;
    default:
        return false;
    }
    /* Short enough for an RPC error's message whole (exec.start). */
    snprintf(refusal, sizeof(refusal),
             "no CAP_SYS_ADMIN and no user namespace (%s: %s): add CAP_SYS_ADMIN "
             "(--cap-add SYS_ADMIN), or %s", strerror(err), cause, fix);
    err_set(msg, "containment: %s", refusal);
    return true;
}

/* ---- whether a fresh /proc can be had ---- */

#define PROCS_MAX 16

struct procvis {
    size_t n;
    char target[PROCS_MAX][256];
    bool covered[PROCS_MAX];
};

/* The proc mounts that show all of proc (their root is proc's), and
 * whether each is mounted read-only (a fresh one, read-write, then
 * needs another). */
static void vis_collect(struct procvis *v, const struct mountinfo_entry *e)
{
    if (strcmp(e->fstype, "proc") != 0 || strcmp(e->root, "/") != 0 || v->n >= PROCS_MAX ||
        strlen(e->target) >= sizeof(v->target[0]))
        return;
    snprintf(v->target[v->n], sizeof(v->target[0]), "%s", e->target);
    v->covered[v->n++] = strncmp(e->opts, "ro", 2) == 0 && (e->opts[2] == ',' || !e->opts[2]);
}

/* A mount below one of them covers part of it; the kernel lets only a
 * permanently empty directory be covered, and proc's one is binfmt_misc.
 * Told apart by path alone: a mount below a proc mount that another one
 * covers counts against both, which errs towards "shared". */
static void vis_cover(struct procvis *v, const struct mountinfo_entry *e)
{
    for (size_t i = 0; i < v->n; i++) {
        size_t l = strlen(v->target[i]);
        const char *rest = e->target + l;
        if (strncmp(e->target, v->target[i], l) != 0)
            continue;
        if (l > 1) {
            if (*rest != '/')
                continue;
            rest++;
        }
        if (*rest && strcmp(rest, "sys/fs/binfmt_misc") != 0)
            v->covered[i] = true;
    }
}

static bool vis_shared(const struct procvis *v)
{
    for (size_t i = 0; i < v->n; i++)
        if (!v->covered[i])
            return false;
    return true;
}

bool userns_proc_shared_in(const char *mountinfo)
{
    struct procvis v;
    memset(&v, 0, sizeof(v));
    for (int pass = 0; pass < 2; pass++) {
        char *copy = strdup(mountinfo);
        if (!copy)
            return true;
        for (char *line = copy, *next; line && *line; line = next) {
            next = strchr(line, '\n');
            if (next)
                *next++ = 0;
            struct mountinfo_entry e;
            if (!mountinfo_parse(line, &e))
                continue;
            if (pass == 0)
                vis_collect(&v, &e);
            else
                vis_cover(&v, &e);
        }
        free(copy);
    }
    return vis_shared(&v);
}

static bool collect_cb(const struct mountinfo_entry *e, void *ctx)
{
    vis_collect(ctx, e);
    return true;
}

static bool cover_cb(const struct mountinfo_entry *e, void *ctx)
{
    vis_cover(ctx, e);
    return true;
}

bool userns_proc_shared(void)
{
    static int known = -1;
    if (known < 0) {
        struct procvis v;
        memset(&v, 0, sizeof(v));
        known = mountinfo_each(collect_cb, &v) < 0 || mountinfo_each(cover_cb, &v) < 0 ||
                vis_shared(&v);
        if (known)
            log_warn("contain: paths in /proc are masked here (the container runtime's masked "
                     "and read-only paths), so the kernel mounts no fresh /proc in a user "
                     "namespace: services keep the container's, with every process running "
                     "when each starts hidden (unmask /proc, or grant CAP_SYS_ADMIN, for one of "
                     "their own)");
    }
    return known;
}
