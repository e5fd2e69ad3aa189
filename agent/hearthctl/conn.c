/* hearthctl connections: a connect spec (unix:PATH, vsock:CID:PORT, or the
 * Firecracker/Cloud Hypervisor hybrid vsock hvsock:UDS:PORT) opened within
 * a deadline, and line I/O on it bounded by the same deadline. */
#include "ctl.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <linux/vm_sockets.h>

/* Milliseconds left until deadline for poll(): -1 means no deadline. */
static int remaining_ms(int64_t deadline)
{
    int64_t left;

    if (deadline < 0)
        return -1;
    left = deadline - mono_ms();
    if (left < 0)
        return 0;
    return left > INT_MAX ? INT_MAX : (int)left;
}

int64_t conn_deadline_after(int timeout_ms)
{
    return timeout_ms > 0 ? mono_ms() + timeout_ms : -1;
}

/* Strict decimal parse into [0, max]. */
bool conn_parse_ulong(const char *s, unsigned long long max, unsigned long long *out)
{
    char *end;
    unsigned long long v;

    if (!s || !isdigit((unsigned char)s[0]))
        return false;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || v > max)
        return false;
    *out = v;
    return true;
}

/* Wait for events on fd; retries EINTR unless SIGINT was caught. */
static enum io wait_fd(int fd, short events, int64_t deadline)
{
    for (;;) {
        struct pollfd p = {.fd = fd, .events = events};
        int r = poll(&p, 1, remaining_ms(deadline));

        if (r > 0)
            return IO_OK; /* includes POLLHUP/POLLERR: the next call reports it */
        if (r == 0)
            return IO_TIMEOUT;
        if (errno != EINTR)
            return IO_ERR;
        if (base_got_sigint)
            return IO_INTR;
    }
}

enum io conn_write(struct conn *c, const char *data, size_t len, int64_t deadline)
{
    while (len > 0) {
        /* MSG_NOSIGNAL: a closed peer is an error to report, not SIGPIPE. */
        ssize_t n = send(c->fd, data, len, MSG_NOSIGNAL);

        if (n > 0) {
            data += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            enum io r = wait_fd(c->fd, POLLOUT, deadline);

            if (r != IO_OK)
                return r;
            continue;
        }
        if (n == 0)
            errno = EPIPE;
        return IO_ERR;
    }
    return IO_OK;
}

/* The server's line reader (rpc.c) with this call's limit: the hybrid
 * vsock handshake line is short, replies may be long. */
enum io conn_read_line(struct conn *c, int64_t deadline, size_t max, char **line,
                       size_t *linelen)
{
    c->in.max = max;
    for (;;) {
        const char *l;
        size_t len, space;
        ssize_t n;
        enum io r;
        int got = linebuf_next(&c->in, &l, &len);

        if (got < 0)
            return IO_TOOLONG;
        if (got > 0) {
            /* The byte after the line is its "\r" or "\n", already
             * consumed and never looked at again: the terminator goes
             * there, so callers get a C string without a copy. */
            char *w = (char *)l;

            w[len] = '\0';
            *line = w;
            *linelen = len;
            return IO_OK;
        }
        space = linebuf_space(&c->in);
        if (space == 0) {
            /* Nothing pending is longer than max here (linebuf_next said
             * so), so no room means the buffer could not grow. */
            base_die_oom();
        }
        r = wait_fd(c->fd, POLLIN, deadline);
        if (r != IO_OK)
            return r;
        n = read(c->fd, linebuf_tail(&c->in), space);
        if (n > 0) {
            linebuf_commit(&c->in, (size_t)n);
            continue;
        }
        if (n == 0)
            return IO_EOF;
        if (errno == EINTR) {
            if (base_got_sigint)
                return IO_INTR;
            continue;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            continue;
        return IO_ERR;
    }
}

/* The connect of a parsed spec, started without waiting: a non-blocking
 * socket, *pending while the connect goes on (EINPROGRESS, or EINTR: it
 * goes on in the background). Shared with fleet.c, which waits for many
 * at once. */
int conn_connect_start(const struct ctl_addr *a, bool *pending)
{
    int fd = socket(a->u.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int err;

    *pending = false;
    if (fd < 0)
        return -1;
    if (connect(fd, &a->u.sa, a->len) == 0)
        return fd;
    if (errno == EINPROGRESS || errno == EINTR) {
        *pending = true;
        return fd;
    }
    err = errno;
    close(fd);
    errno = err;
    return -1;
}

int conn_connect_result(int fd)
{
    int err = 0;
    socklen_t elen = sizeof(err);

    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0)
        return -1;
    if (err != 0) {
        errno = err;
        return -1;
    }
    return 0;
}

/* Non-blocking connect bounded by deadline. Returns fd or -1 with errno
 * (ETIMEDOUT when the deadline passed). */
static int sock_connect(const struct ctl_addr *a, int64_t deadline)
{
    for (;;) {
        bool pending;
        int fd = conn_connect_start(a, &pending), err;
        enum io r;

        if (fd < 0 && errno == EAGAIN && a->u.sa.sa_family == AF_UNIX) {
            /* Listen backlog full: unix sockets do not queue; retry. */
            struct timespec ts = {0, 10 * 1000 * 1000};

            if (deadline >= 0 && remaining_ms(deadline) == 0) {
                errno = ETIMEDOUT;
                return -1;
            }
            nanosleep(&ts, NULL);
            continue;
        }
        if (fd < 0 || !pending)
            return fd;
        r = wait_fd(fd, POLLOUT, deadline);
        if (r == IO_TIMEOUT)
            errno = ETIMEDOUT;
        if (r == IO_OK && conn_connect_result(fd) == 0)
            return fd;
        err = errno;
        close(fd);
        errno = err;
        return -1;
    }
}

static bool fill_sun(struct sockaddr_un *sa, socklen_t *alen, const char *path)
{
    size_t l = strlen(path);

    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    if (l == 0 || l >= sizeof(sa->sun_path))
        return false;
    memcpy(sa->sun_path, path, l);
    /* "@name" is a Linux abstract socket: leading NUL, no terminator. */
    if (path[0] == '@') {
        sa->sun_path[0] = '\0';
        *alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + l);
    } else {
        *alen = (socklen_t)sizeof(*sa);
    }
    return true;
}

static int bad_spec(const char *spec)
{
    fprintf(stderr,
            "hearthctl: bad connect spec '%s' (want unix:PATH, vsock:CID:PORT or "
            "hvsock:UDS:PORT)\n",
            spec);
    return EXIT_USAGE;
}

static int connect_error(const struct conn *c, int timeout_ms)
{
    if (errno == ETIMEDOUT && timeout_ms > 0)
        fprintf(stderr, "hearthctl: unable to connect to %s: timed out after %d ms\n", c->spec,
                timeout_ms);
    else
        fprintf(stderr, "hearthctl: unable to connect to %s: %s\n", c->spec, strerror(errno));
    return EXIT_USAGE;
}

/* Hybrid vsock: the VMM's UDS accepts "CONNECT <port>\n" and answers
 * "OK <host port>\n" once the guest accepted, or closes the socket. */
static int hvsock_handshake(struct conn *c, uint32_t port, int timeout_ms, int64_t deadline)
{
    char req[32];
    char *line;
    size_t len;
    int n = snprintf(req, sizeof(req), "CONNECT %u\n", port);
    enum io r = conn_write(c, req, (size_t)n, deadline);

    if (r == IO_OK)
        r = conn_read_line(c, deadline, HANDSHAKE_MAX, &line, &len);
    switch (r) {
    case IO_OK:
        if (strncmp(line, "OK", 2) == 0)
            return 0;
        fputs("hearthctl: unable to connect to ", stderr);
        fputs(c->spec, stderr);
        fputs(": handshake refused: ", stderr);
        base_put_safe(stderr, line);
        fputc('\n', stderr);
        return EXIT_USAGE;
    case IO_EOF:
        fprintf(stderr,
                "hearthctl: unable to connect to %s: closed during handshake (nothing "
                "listening on guest port %u?)\n",
                c->spec, port);
        return EXIT_USAGE;
    case IO_TOOLONG:
        fprintf(stderr, "hearthctl: unable to connect to %s: handshake reply too long\n",
                c->spec);
        return EXIT_USAGE;
    case IO_TIMEOUT:
        errno = ETIMEDOUT;
        return connect_error(c, timeout_ms);
    default:
        return connect_error(c, timeout_ms);
    }
}

void conn_close(struct conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    linebuf_free(&c->in);
}

int conn_addr_parse(const char *spec, struct ctl_addr *a)
{
    unsigned long long cid, port;

    memset(a, 0, sizeof(*a));
    if (strncmp(spec, "unix:", 5) == 0) {
        if (spec[5] == '\0') {
            errno = EINVAL;
            return -1;
        }
        if (!fill_sun(&a->u.un, &a->len, spec + 5)) {
            errno = ENAMETOOLONG;
            return -1;
        }
        return 0;
    }
    if (strncmp(spec, "vsock:", 6) == 0) {
        char cidbuf[16];
        const char *colon = strchr(spec + 6, ':');
        size_t cl = colon ? (size_t)(colon - (spec + 6)) : 0;

        errno = EINVAL;
        if (!colon || cl == 0 || cl >= sizeof(cidbuf))
            return -1;
        memcpy(cidbuf, spec + 6, cl);
        cidbuf[cl] = '\0';
        if (!conn_parse_ulong(cidbuf, UINT32_MAX, &cid) || !conn_parse_ulong(colon + 1, UINT32_MAX, &port))
            return -1;
        a->u.vm.svm_family = AF_VSOCK;
        a->u.vm.svm_cid = (unsigned)cid;
        a->u.vm.svm_port = (unsigned)port;
        a->len = sizeof(a->u.vm);
        return 0;
    }
    if (strncmp(spec, "hvsock:", 7) == 0) {
        /* The UDS path may contain ':'; the port is after the last one. */
        const char *colon = strrchr(spec + 7, ':');
        char path[sizeof(a->u.un.sun_path)];
        size_t pl = colon ? (size_t)(colon - (spec + 7)) : 0;

        errno = EINVAL;
        if (!colon || pl == 0 || !conn_parse_ulong(colon + 1, UINT32_MAX, &port))
            return -1;
        if (pl >= sizeof(path)) {
            errno = ENAMETOOLONG;
            return -1;
        }
        memcpy(path, spec + 7, pl);
        path[pl] = '\0';
        if (!fill_sun(&a->u.un, &a->len, path))
            return -1;
        a->hvsock = true;
        a->hv_port = (uint32_t)port;
        return 0;
    }
    errno = EINVAL;
    return -1;
}

int conn_open(struct conn *c, const char *spec, int timeout_ms)
{
    int64_t deadline = conn_deadline_after(timeout_ms);
    struct ctl_addr a;
    int rc;

    memset(c, 0, sizeof(*c));
    c->spec = spec;
    c->fd = -1;
    if (conn_addr_parse(spec, &a) != 0)
        return errno == ENAMETOOLONG ? connect_error(c, timeout_ms) : bad_spec(spec);
    c->fd = sock_connect(&a, deadline);
    if (c->fd < 0)
        return connect_error(c, timeout_ms);
    if (!a.hvsock)
        return 0;
    rc = hvsock_handshake(c, a.hv_port, timeout_ms, deadline);
    if (rc != 0)
        conn_close(c);
    return rc;
}
