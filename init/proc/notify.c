#include "notify.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "err.h"
#include "kfile.h"
#include "timebase.h"
#include "utf8.h"

/* ---- the parser ---- */

static bool is(const char *k, size_t kl, const char *want)
{
    return strlen(want) == kl && memcmp(k, want, kl) == 0;
}

static bool value_is(const char *v, size_t vl, const char *want)
{
    return strlen(want) == vl && memcmp(v, want, vl) == 0;
}

/* sd_notify keys are upper-case letters, digits and '_'. */
static bool good_key(const char *k, size_t kl)
{
    if (!kl)
        return false;
    for (size_t i = 0; i < kl; i++)
        if (!((k[i] >= 'A' && k[i] <= 'Z') || (k[i] >= '0' && k[i] <= '9') || k[i] == '_'))
            return false;
    return true;
}

/* Strict decimal: digits only, no sign, no overflow. */
static bool parse_u64(const char *v, size_t vl, uint64_t *out)
{
    uint64_t n = 0;
    if (!vl || vl > 20)
        return false;
    for (size_t i = 0; i < vl; i++) {
        if (v[i] < '0' || v[i] > '9')
            return false;
        uint64_t d = (uint64_t)(v[i] - '0');
        if (n > (UINT64_MAX - d) / 10)
            return false;
        n = n * 10 + d;
    }
    *out = n;
    return true;
}

/* STATUS= and HEARTH_BUSY_REASON= are shown in replies (JSON) and logs: valid
 * UTF-8 (a value that is not is ignored whole), controls become '?', and
 * it is cut on a character boundary. */
static bool set_text(char *out, const char *v, size_t vl)
{
    if (utf8_invalid_at(v, vl) >= 0)
        return false;
    size_t n = vl;
    if (n > NOTIFY_STATUS_MAX - 1) {
        n = NOTIFY_STATUS_MAX - 1;
        while (n > 0 && ((unsigned char)v[n] & 0xc0) == 0x80)
            n--;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)v[i];
        out[i] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
    }
    out[n] = 0;
    return true;
}

static void assignment(struct notify_msg *m, const char *k, size_t kl, const char *v, size_t vl)
{
    bool ok = true;

    if (is(k, kl, "READY"))
        ok = value_is(v, vl, "1") && (m->ready = true);
    else if (is(k, kl, "STOPPING"))
        ok = value_is(v, vl, "1") && (m->stopping = true);
    else if (is(k, kl, "RELOADING"))
        ok = value_is(v, vl, "1") && (m->reloading = true);
    else if (is(k, kl, "WATCHDOG")) {
        if (value_is(v, vl, "1"))
            m->watchdog = true;
        else if (value_is(v, vl, "trigger"))
            m->watchdog_trigger = true;
        else
            ok = false;
    } else if (is(k, kl, "STATUS"))
        ok = set_text(m->status, v, vl) && (m->has_status = true);
    else if (is(k, kl, "HEARTH_BUSY"))
        ok = parse_u64(v, vl, &m->busy_sec) && (m->has_busy = true);
    else if (is(k, kl, "HEARTH_BUSY_REASON"))
        ok = set_text(m->busy_reason, v, vl) && (m->has_busy_reason = true);
    else if (is(k, kl, "EXTEND_TIMEOUT_USEC"))
        ok = parse_u64(v, vl, &m->extend_usec) && (m->has_extend = true);
    else {
        /* MAINPID=, WATCHDOG_USEC=, ERRNO=, FDSTORE=...: understood by
         * systemd, not acted on here. */
        m->unknown++;
        return;
    }
    if (ok)
        m->understood++;
    else
        m->ignored++;
}

int notify_parse(const char *buf, size_t len, struct notify_msg *m)
{
    memset(m, 0, sizeof(*m));
    if (!buf || len == 0 || len > NOTIFY_DATAGRAM_MAX || memchr(buf, 0, len))
        return -1;
    const char *p = buf, *end = buf + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        if (le > p) {
            const char *eq = memchr(p, '=', (size_t)(le - p));
            if (!eq || !good_key(p, (size_t)(eq - p)))
                m->ignored++;
            else
                assignment(m, p, (size_t)(eq - p), eq + 1, (size_t)(le - eq - 1));
        }
        p = nl ? nl + 1 : end;
    }
    return 0;
}

/* ---- the socket ---- */

/* One name part per hearth: two hearths in one network namespace (a
 * developer's machine, tests) never collide, and nothing that ran before
 * hearth could have bound the name it picks. */
static char instance[17];

static void make_instance(void)
{
    uint64_t r = 0;
    if (syscall(SYS_getrandom, &r, sizeof(r), 0x1 /* GRND_NONBLOCK */) != (long)sizeof(r)) {
        uint64_t ns = (uint64_t)mono_ns();
        r = ns % 1000000000 * 0x9e3779b97f4a7c15ULL ^ ns / 1000000000 << 20 ^ (uint64_t)getpid();
    }
    snprintf(instance, sizeof(instance), "%016llx", (unsigned long long)r);
}

/* Why abstract: a service runs in a mount namespace of its own where
 * /run/hearth (the control socket's directory) is masked, and perhaps as
 * another user; a path would need a directory that is visible there,
 * writable by nobody but hearth, and a socket file owned per service.
 * Services share hearth's network namespace (containment never gives them
 * another), which is where abstract names live, so the name reaches them
 * wherever their mounts point. Anyone in that namespace can send to it
 * too: service.c keeps only messages whose SCM_CREDENTIALS pid belongs to
 * the service. The socket is bound at boot, before any service runs, and
 * kept for hearth's life, so the name cannot be taken over in between. */
int notify_open(const char *service, char *addr, size_t addrlen, struct err *err)
{
    struct sockaddr_un su;
    int one = 1;

    if (!instance[0])
        make_instance();
    memset(&su, 0, sizeof(su));
    su.sun_family = AF_UNIX;
    int n = snprintf(su.sun_path + 1, sizeof(su.sun_path) - 1, "hearth/notify/%s/%s", instance,
                     service);
    if (n < 0 || (size_t)n >= sizeof(su.sun_path) - 1 || (size_t)n + 2 > addrlen)
        return err_set(err, "unable to name the socket of %s: too long", service);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return err_unable(err, errno, "create the socket");
    /* Credentials with every datagram: the kernel fills in the sender's
     * real pid, so they cannot be forged by an unprivileged sender. */
    if (setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) < 0) {
        err_unable(err, errno, "set SO_PASSCRED");
        close(fd);
        return -1;
    }
    /* Abstract: no terminator counted, the length says where it ends. */
    socklen_t sl = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
    if (bind(fd, (struct sockaddr *)&su, sl) < 0) {
        err_unable(err, errno, "bind @%s", su.sun_path + 1);
        close(fd);
        return -1;
    }
    snprintf(addr, addrlen, "@%s", su.sun_path + 1);
    return fd;
}

ssize_t notify_recv(int fd, char *buf, size_t len, struct notify_sender *from, bool *truncated)
{
    /* Room for the credentials and a few descriptors: those that do not
     * fit are never installed (the kernel drops them, MSG_CTRUNC), those
     * that do are closed below. */
    union {
        char buf[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(16 * sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    struct msghdr mh;
    ssize_t n;

    memset(from, 0, sizeof(*from));
    *truncated = false;
    memset(&mh, 0, sizeof(mh));
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = ctl.buf;
    mh.msg_controllen = sizeof(ctl.buf);
    do
        n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return -1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET)
            continue;
        if (c->cmsg_type == SCM_CREDENTIALS && c->cmsg_len >= CMSG_LEN(sizeof(struct ucred))) {
            struct ucred uc;
            memcpy(&uc, CMSG_DATA(c), sizeof(uc));
            from->creds = true;
            from->pid = uc.pid;
            from->uid = uc.uid;
        } else if (c->cmsg_type == SCM_RIGHTS) {
            size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < k; i++) {
                int passed;
                memcpy(&passed, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                close(passed);
            }
        }
    }
    if (mh.msg_flags & MSG_TRUNC)
        *truncated = true;
    return n;
}

pid_t notify_pid_session(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if (kfile_read(path, buf, sizeof(buf)) <= 0)
        return -1;
    /* "pid (comm) state ppid pgrp session ...": comm may hold anything,
     * ')' included, so the fields start after the last ')'. */
    char *p = strrchr(buf, ')');
    if (!p)
        return -1;
    /* Then the state (one letter), ppid, pgrp and session. strtol, not
     * sscanf: no other caller in hearth needs scanf's code. */
    p++;
    while (*p == ' ')
        p++;
    if (!*p)
        return -1;
    p++;
    long v = -1;
    for (int i = 0; i < 3; i++) {
        char *end;
        v = strtol(p, &end, 10);
        if (end == p)
            return -1;
        p = end;
    }
    return v >= 0 && v <= INT_MAX ? (pid_t)v : -1;
}
