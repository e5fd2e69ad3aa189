/* The mount namespace template (nstemplate.h): the parent keeps one
 * namespace a child built, under the key it was built for, and hands its
 * descriptor to later starts with the same key; the child either copies
 * it or, having built its own, sends it back. */
#include "nstemplate.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"

/* ---- the parent's side ---- */

static struct {
    int fd;        /* the template's mount namespace, -1 none */
    char *key;     /* the key it was built for */
    size_t key_len;
    int pending;   /* socket a building child sends its namespace on */
    char *pending_key;
    size_t pending_len;
    /* The paths as they were when it was built: one made again since
     * (removed and created anew) is a different inode, which a mount the
     * template holds there does not cover any more. */
    struct ident { dev_t dev; ino_t ino; } ident[NSTEMPLATE_PATHS_MAX],
        pending_ident[NSTEMPLATE_PATHS_MAX];
} tmpl = {.fd = -1, .pending = -1};

static void idents_now(const char *const *paths, size_t n, struct ident *out)
{
    struct stat st;
    for (size_t i = 0; i < NSTEMPLATE_PATHS_MAX; i++) {
        out[i].dev = 0;
        out[i].ino = 0;
        /* lstat: the entry itself; a link put in a directory's place is
         * another inode, never followed from PID 1. */
        if (i < n && lstat(paths[i], &st) == 0) {
            out[i].dev = st.st_dev;
            out[i].ino = st.st_ino;
        }
    }
}

static bool idents_same(const char *const *paths, size_t n, const struct ident *was)
{
    struct ident now[NSTEMPLATE_PATHS_MAX];
    idents_now(paths, n, now);
    for (size_t i = 0; i < n; i++)
        if (!now[i].ino || now[i].dev != was[i].dev || now[i].ino != was[i].ino)
            return false;
    return true;
}

int nstemplate_for(const char *key, size_t key_len, const char *const *paths, size_t n)
{
    if (tmpl.fd < 0 || n > NSTEMPLATE_PATHS_MAX || key_len != tmpl.key_len ||
        memcmp(key, tmpl.key, key_len) != 0 || !idents_same(paths, n, tmpl.ident))
        return -1;
    return tmpl.fd;
}

int nstemplate_offer(const char *key, size_t key_len, const char *const *paths, size_t n)
{
    int sv[2];

    if (tmpl.pending >= 0 || n > NSTEMPLATE_PATHS_MAX)
        return -1;
    char *copy = malloc(key_len ? key_len : 1);
    if (!copy)
        return -1;
    if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) < 0) {
        log_debug("contain: no namespace template this time: socketpair: %s", strerror(errno));
        free(copy);
        return -1;
    }
    memcpy(copy, key, key_len);
    tmpl.pending = sv[0];
    tmpl.pending_key = copy;
    tmpl.pending_len = key_len;
    idents_now(paths, n, tmpl.pending_ident);
    return sv[1];
}

static void drop_pending(void)
{
    if (tmpl.pending >= 0)
        close(tmpl.pending);
    tmpl.pending = -1;
    free(tmpl.pending_key);
    tmpl.pending_key = NULL;
}

void nstemplate_forked(int child_end, bool forked)
{
    if (child_end < 0)
        return;
    close(child_end);
    if (!forked)
        drop_pending();
}

void nstemplate_take(bool (*keep)(void))
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
    /* Asked only now that there is one: the answer may cost a read of
     * mountinfo, which waits here rather than before a start. */
    if (fd >= 0 && keep && !keep()) {
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
        memcpy(tmpl.ident, tmpl.pending_ident, sizeof(tmpl.ident));
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

int nstemplate_copy(int ns_fd)
{
    if (setns(ns_fd, CLONE_NEWNS) < 0)
        return 0;
    return unshare(CLONE_NEWNS) < 0 ? -1 : 1;
}
