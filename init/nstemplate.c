/* The mount namespace template (nstemplate.h): the parent keeps one
 * namespace a child built and hands its descriptor to later starts; the
 * child either copies it or, having built its own, sends it back. */
#include "nstemplate.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/capability.h>

#include "log.h"

/* ---- the parent's side ---- */

/* What a plan's namespace depends on: its hidden and read-only paths, in
 * order, each ended by a NUL, the two lists apart by an empty one. */
static size_t plan_key(const struct contain_plan *p, char *out, size_t cap)
{
    size_t n = 0;
    for (int list = 0; list < 2; list++) {
        size_t cnt = list ? p->n_ro : p->n_hide;
        for (size_t i = 0; i < cnt; i++) {
            const char *s = list ? p->ro[i] : p->hide[i];
            size_t l = strlen(s) + 1;
            if (n + l <= cap)
                memcpy(out + n, s, l);
            n += l;
        }
        if (n < cap)
            out[n] = 0;
        n++;
    }
    return n;
}

static bool plan_key_is(const struct contain_plan *p, const char *key, size_t len)
{
    char buf[2 * CONTAIN_MAX_EXTRA * CONTAIN_PATH_MAX + 2];
    size_t n = plan_key(p, buf, sizeof(buf));
    return key && n == len && n <= sizeof(buf) && memcmp(buf, key, n) == 0;
}

static struct {
    int fd;        /* the template's mount namespace, -1 none */
    char *key;     /* the plan_key it was built for */
    size_t key_len;
    int pending;   /* socket a building child sends its namespace on */
    char *pending_key;
    size_t pending_len;
    /* The hidden directories as they were when it was built: one made
     * again since (removed and created anew) is a different inode, which
     * the template's mask does not cover any more. */
    struct hidden { dev_t dev; ino_t ino; } hidden[CONTAIN_MAX_EXTRA],
        pending_hidden[CONTAIN_MAX_EXTRA];
} tmpl = {.fd = -1, .pending = -1};

static void hides_now(const struct contain_plan *p, struct hidden *out)
{
    struct stat st;
    for (size_t i = 0; i < CONTAIN_MAX_EXTRA; i++) {
        out[i].dev = 0;
        out[i].ino = 0;
        if (i < p->n_hide && stat(p->hide[i], &st) == 0) {
            out[i].dev = st.st_dev;
            out[i].ino = st.st_ino;
        }
    }
}

static bool hides_same(const struct contain_plan *p, const struct hidden *was)
{
    struct hidden now[CONTAIN_MAX_EXTRA];
    hides_now(p, now);
    for (size_t i = 0; i < p->n_hide; i++)
        if (!now[i].ino || now[i].dev != was[i].dev || now[i].ino != was[i].ino)
            return false;
    return true;
}

int nstemplate_for(const struct contain_plan *p)
{
    if (tmpl.fd >= 0 && plan_key_is(p, tmpl.key, tmpl.key_len) && hides_same(p, tmpl.hidden))
        return tmpl.fd;
    return -1;
}

bool nstemplate_offer(struct contain_plan *p)
{
    char buf[2 * CONTAIN_MAX_EXTRA * CONTAIN_PATH_MAX + 2];
    int sv[2];

    /* Not from a child that could change its own mounts afterwards. */
    if (!p->isolate || p->ns_fd >= 0 || tmpl.pending >= 0 ||
        (p->caps & (UINT64_C(1) << CAP_SYS_ADMIN)))
        return false;
    size_t n = plan_key(p, buf, sizeof(buf));
    char *key = n <= sizeof(buf) ? malloc(n) : NULL;
    if (!key)
        return false;
    if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) < 0) {
        log_debug("contain: no namespace template this time: socketpair: %s", strerror(errno));
        free(key);
        return false;
    }
    memcpy(key, buf, n);
    tmpl.pending = sv[0];
    tmpl.pending_key = key;
    tmpl.pending_len = n;
    hides_now(p, tmpl.pending_hidden);
    p->snap_fd = sv[1];
    return true;
}

static void drop_pending(void)
{
    if (tmpl.pending >= 0)
        close(tmpl.pending);
    tmpl.pending = -1;
    free(tmpl.pending_key);
    tmpl.pending_key = NULL;
}

void nstemplate_forked(struct contain_plan *p, bool forked)
{
    if (p->snap_fd < 0)
        return;
    close(p->snap_fd);
    p->snap_fd = -1;
    if (!forked)
        drop_pending();
}

void nstemplate_take(void)
{
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } u;
    char c;
    struct iovec iov = {&c, 1};
    struct msghdr m;

    if (tmpl.pending < 0)
        return;
    memset(&m, 0, sizeof(m));
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = u.buf;
    m.msg_controllen = sizeof(u.buf);
    ssize_t r = recvmsg(tmpl.pending, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    struct cmsghdr *cm = r == 1 ? CMSG_FIRSTHDR(&m) : NULL;
    int fd = -1;
    if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
        cm->cmsg_len == CMSG_LEN(sizeof(int)))
        memcpy(&fd, CMSG_DATA(cm), sizeof(int));
    /* Kept only where hearth's later mounts reach it; otherwise a copy
     * made later would miss what a fresh namespace would have (asked
     * here, after the child's exec, not before a start). */
    if (fd >= 0 && !contain_mounts_propagate()) {
        close(fd);
        fd = -1;
    }
    if (fd >= 0) {
        if (tmpl.fd >= 0)
            close(tmpl.fd);
        free(tmpl.key);
        tmpl.fd = fd;
        tmpl.key = tmpl.pending_key;
        tmpl.key_len = tmpl.pending_len;
        memcpy(tmpl.hidden, tmpl.pending_hidden, sizeof(tmpl.hidden));
        tmpl.pending_key = NULL;
        log_debug("contain: later starts copy a namespace template");
    }
    drop_pending();
}

/* ---- the child's side: plain syscalls only ---- */

void nstemplate_send(int sock)
{
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } u;
    char c = 0;
    struct iovec iov = {&c, 1};
    struct msghdr m;

    int fd = openat(AT_FDCWD, "/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    memset(&m, 0, sizeof(m));
    memset(&u, 0, sizeof(u));
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = u.buf;
    m.msg_controllen = sizeof(u.buf);
    struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &fd, sizeof(int));
    if (sendmsg(sock, &m, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
        /* the parent builds no template from this start */
    }
    close(fd);
}

int nstemplate_copy(int ns_fd, char *what, size_t len)
{
    if (setns(ns_fd, CLONE_NEWNS) < 0)
        return 0;
    if (unshare(CLONE_NEWNS) < 0) {
        int e = errno;
        snprintf(what, len, "unable to create a mount namespace");
        errno = e;
        return -1;
    }
    return 1;
}
