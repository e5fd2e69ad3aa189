/* hearthctl: host-side client for hearth's control protocol.
 *
 * Newline-delimited JSON-RPC 2.0 over a stream socket (unix, vsock, or the
 * Firecracker/Cloud Hypervisor hybrid vsock). One request at a time: send
 * a line, read lines until the reply with our id, keeping any notifications
 * (event, log) that arrive first so follow modes lose none of them.
 *
 * Commands live in one table (cmds[]): name, method, a params builder and a
 * human printer. Adding a method is one builder, one printer, one row.
 *
 * Exit codes: 0 ok, 1 the server answered with an error, 2 usage,
 * connection, timeout or protocol errors. */
#include <cJSON.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <linux/vm_sockets.h>

#include "base64.h"
#include "sha256.h"
#include "hearthctl_prom.h"

#ifndef HEARTH_VERSION
#define HEARTH_VERSION "0.0.0"
#endif

#define EXIT_SERVER 1
#define EXIT_USAGE 2 /* also connection, timeout and protocol errors */

#define DEFAULT_CONNECT "unix:/run/hearth/control.sock"
#define DEFAULT_TIMEOUT_MS 10000
#define REQUEST_MAX (1u << 20)        /* the server's line limit */
#define LINE_MAX_BYTES (16u << 20)    /* replies can be large (logs, config) */
#define HANDSHAKE_MAX 256             /* hybrid vsock "OK <port>" line */
#define NOTES_MAX_BYTES (16u << 20)   /* notifications queued before a reply */
#define BUF_INITIAL (64u << 10)
#define CELL_MAX 64                   /* one table cell, bytes incl. NUL */
#define METHOD_MAX 128

/* ---- small helpers ---------------------------------------------------- */

static volatile sig_atomic_t got_sigint;

static void on_sigint(int sig)
{
    (void)sig;
    got_sigint = 1;
}

static void die_oom(void)
{
    fputs("hearthctl: out of memory\n", stderr);
    exit(EXIT_USAGE);
}

static int64_t now_ns(void)
{
    struct timespec ts;

    /* CLOCK_MONOTONIC cannot fail on Linux; keep going with 0 if it does. */
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t now_ms(void) { return now_ns() / 1000000; }

/* Milliseconds left until deadline for poll(): -1 means no deadline. */
static int remaining_ms(int64_t deadline)
{
    int64_t left;

    if (deadline < 0)
        return -1;
    left = deadline - now_ms();
    if (left < 0)
        return 0;
    return left > INT_MAX ? INT_MAX : (int)left;
}

static int64_t deadline_after(int timeout_ms)
{
    return timeout_ms > 0 ? now_ms() + timeout_ms : -1;
}

/* Strict decimal parse into [0, max]. */
static bool parse_ulong(const char *s, unsigned long long max, unsigned long long *out)
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

/* Guest-provided text goes to a host terminal: escape control bytes so a
 * service cannot move the cursor or retitle the window. UTF-8 passes. */
static void put_safe(FILE *f, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p < 0x20 && *p != '\t') || *p == 0x7f)
            fprintf(f, "\\x%02x", *p);
        else
            fputc(*p, f);
    }
}

/* Same escaping into a bounded buffer; truncates with "..." if needed. */
static void safe_copy(char *dst, size_t n, const char *s)
{
    size_t o = 0;

    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[5];
        size_t l = 1;

        if ((*p < 0x20 && *p != '\t') || *p == 0x7f)
            l = (size_t)snprintf(esc, sizeof(esc), "\\x%02x", *p);
        else
            esc[0] = (char)*p;
        if (o + l + 1 > n) {
            if (n >= 4) {
                o = o > n - 4 ? n - 4 : o;
                memcpy(dst + o, "...", 3);
                o += 3;
            }
            break;
        }
        memcpy(dst + o, esc, l);
        o += l;
    }
    if (n > 0)
        dst[o < n ? o : n - 1] = '\0';
}

static const char *jstr(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

    return cJSON_IsString(v) && v->valuestring ? v->valuestring : NULL;
}

static bool jnum(const cJSON *obj, const char *key, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return false;
    *out = v->valuedouble;
    return true;
}

/* An integer-valued JSON number as text, or "-". */
static void fmt_int(char *buf, size_t n, const cJSON *obj, const char *key)
{
    double d;

    if (jnum(obj, key, &d) && fabs(d) < 9e15)
        snprintf(buf, n, "%lld", (long long)d);
    else
        snprintf(buf, n, "-");
}

/* 850ms, 12s, 3m12s, 2h05m, 3d04h. */
static void fmt_duration(char *buf, size_t n, double ms)
{
    unsigned long long s;

    if (!isfinite(ms) || ms < 0 || ms > 1e15) {
        snprintf(buf, n, "-");
        return;
    }
    if (ms < 1000) {
        snprintf(buf, n, "%llums", (unsigned long long)ms);
        return;
    }
    s = (unsigned long long)(ms / 1000);
    if (s < 60)
        snprintf(buf, n, "%llus", s);
    else if (s < 3600)
        snprintf(buf, n, "%llum%02llus", s / 60, s % 60);
    else if (s < 86400)
        snprintf(buf, n, "%lluh%02llum", s / 3600, (s / 60) % 60);
    else
        snprintf(buf, n, "%llud%02lluh", s / 86400, (s / 3600) % 24);
}

/* ---- connection and line I/O ----------------------------------------- */

enum io { IO_OK, IO_EOF, IO_TIMEOUT, IO_ERR, IO_TOOLONG, IO_INTR };

struct conn {
    const char *spec;
    int fd;
    char *buf;
    size_t cap, len;
    size_t off;  /* start of unconsumed data */
    size_t scan; /* bytes after off already searched for '\n' */
};

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
        if (got_sigint)
            return IO_INTR;
    }
}

static enum io conn_write(struct conn *c, const char *data, size_t len, int64_t deadline)
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

/* Next line without its "\n" (and "\r"), NUL-terminated, valid until the
 * next call. Lines longer than max bytes are IO_TOOLONG. */
static enum io conn_read_line(struct conn *c, int64_t deadline, size_t max, char **line,
                              size_t *linelen)
{
    for (;;) {
        size_t avail = c->len - c->off;
        char *start = c->buf + c->off;
        char *nl = c->buf ? memchr(start + c->scan, '\n', avail - c->scan) : NULL;
        ssize_t n;
        enum io r;

        if (nl) {
            size_t l = (size_t)(nl - start);

            if (l > max)
                return IO_TOOLONG;
            *nl = '\0';
            if (l > 0 && start[l - 1] == '\r')
                start[--l] = '\0';
            c->off += (size_t)(nl - start) + 1;
            c->scan = 0;
            *line = start;
            *linelen = l;
            return IO_OK;
        }
        c->scan = avail;
        if (avail > max)
            return IO_TOOLONG;
        if (c->off > 0) {
            memmove(c->buf, start, avail);
            c->len = avail;
            c->off = 0;
        }
        if (c->len == c->cap) {
            size_t ncap = c->cap ? c->cap * 2 : BUF_INITIAL;
            char *nb;

            if (ncap > (size_t)LINE_MAX_BYTES + 1)
                ncap = (size_t)LINE_MAX_BYTES + 1;
            if (ncap <= c->cap)
                return IO_TOOLONG;
            nb = realloc(c->buf, ncap);
            if (!nb)
                die_oom();
            c->buf = nb;
            c->cap = ncap;
        }
        r = wait_fd(c->fd, POLLIN, deadline);
        if (r != IO_OK)
            return r;
        n = read(c->fd, c->buf + c->len, c->cap - c->len);
        if (n > 0) {
            c->len += (size_t)n;
            continue;
        }
        if (n == 0)
            return IO_EOF;
        if (errno == EINTR) {
            if (got_sigint)
                return IO_INTR;
            continue;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            continue;
        return IO_ERR;
    }
}

/* Non-blocking connect bounded by deadline. Returns fd or -1 with errno
 * (ETIMEDOUT when the deadline passed). */
static int sock_connect(int family, const void *addr, socklen_t alen, int64_t deadline)
{
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int err;

    if (fd < 0)
        return -1;
    for (;;) {
        if (connect(fd, addr, alen) == 0)
            return fd;
        if (errno == EAGAIN && family == AF_UNIX) {
            /* Listen backlog full: unix sockets do not queue; retry. */
            struct timespec ts = {0, 10 * 1000 * 1000};

            if (deadline >= 0 && remaining_ms(deadline) == 0) {
                errno = ETIMEDOUT;
                goto fail;
            }
            nanosleep(&ts, NULL);
            continue;
        }
        if (errno == EINPROGRESS || errno == EINTR) {
            /* EINTR: the connect goes on in the background; wait for it. */
            socklen_t elen = sizeof(err);
            enum io r = wait_fd(fd, POLLOUT, deadline);

            if (r == IO_TIMEOUT) {
                errno = ETIMEDOUT;
                goto fail;
            }
            if (r != IO_OK)
                goto fail;
            if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0)
                goto fail;
            if (err != 0) {
                errno = err;
                goto fail;
            }
            return fd;
        }
        goto fail;
    }
fail:
    err = errno;
    close(fd);
    errno = err;
    return -1;
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
        fprintf(stderr, "hearthctl: cannot connect to %s: timed out after %d ms\n", c->spec,
                timeout_ms);
    else
        fprintf(stderr, "hearthctl: cannot connect to %s: %s\n", c->spec, strerror(errno));
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
        fputs("hearthctl: cannot connect to ", stderr);
        fputs(c->spec, stderr);
        fputs(": handshake refused: ", stderr);
        put_safe(stderr, line);
        fputc('\n', stderr);
        return EXIT_USAGE;
    case IO_EOF:
        fprintf(stderr,
                "hearthctl: cannot connect to %s: closed during handshake (nothing "
                "listening on guest port %u?)\n",
                c->spec, port);
        return EXIT_USAGE;
    case IO_TOOLONG:
        fprintf(stderr, "hearthctl: cannot connect to %s: handshake reply too long\n",
                c->spec);
        return EXIT_USAGE;
    case IO_TIMEOUT:
        errno = ETIMEDOUT;
        return connect_error(c, timeout_ms);
    default:
        return connect_error(c, timeout_ms);
    }
}

static void conn_close(struct conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    free(c->buf);
    c->buf = NULL;
}

static int conn_open(struct conn *c, const char *spec, int timeout_ms)
{
    int64_t deadline = deadline_after(timeout_ms);
    unsigned long long cid, port;
    struct sockaddr_un sun;
    socklen_t alen;

    memset(c, 0, sizeof(*c));
    c->spec = spec;
    c->fd = -1;
    if (strncmp(spec, "unix:", 5) == 0) {
        if (!fill_sun(&sun, &alen, spec + 5)) {
            if (spec[5] == '\0')
                return bad_spec(spec);
            errno = ENAMETOOLONG;
            return connect_error(c, timeout_ms);
        }
        c->fd = sock_connect(AF_UNIX, &sun, alen, deadline);
    } else if (strncmp(spec, "vsock:", 6) == 0) {
        char cidbuf[16];
        const char *colon = strchr(spec + 6, ':');
        size_t cl = colon ? (size_t)(colon - (spec + 6)) : 0;
        struct sockaddr_vm svm;

        if (!colon || cl == 0 || cl >= sizeof(cidbuf))
            return bad_spec(spec);
        memcpy(cidbuf, spec + 6, cl);
        cidbuf[cl] = '\0';
        if (!parse_ulong(cidbuf, UINT32_MAX, &cid) || !parse_ulong(colon + 1, UINT32_MAX, &port))
            return bad_spec(spec);
        memset(&svm, 0, sizeof(svm));
        svm.svm_family = AF_VSOCK;
        svm.svm_cid = (unsigned)cid;
        svm.svm_port = (unsigned)port;
        c->fd = sock_connect(AF_VSOCK, &svm, sizeof(svm), deadline);
    } else if (strncmp(spec, "hvsock:", 7) == 0) {
        /* The UDS path may contain ':'; the port is after the last one. */
        const char *colon = strrchr(spec + 7, ':');
        char path[sizeof(sun.sun_path)];
        size_t pl = colon ? (size_t)(colon - (spec + 7)) : 0;
        int rc;

        if (!colon || pl == 0 || !parse_ulong(colon + 1, UINT32_MAX, &port))
            return bad_spec(spec);
        if (pl >= sizeof(path)) {
            errno = ENAMETOOLONG;
            return connect_error(c, timeout_ms);
        }
        memcpy(path, spec + 7, pl);
        path[pl] = '\0';
        if (!fill_sun(&sun, &alen, path))
            return bad_spec(spec);
        c->fd = sock_connect(AF_UNIX, &sun, alen, deadline);
        if (c->fd < 0)
            return connect_error(c, timeout_ms);
        rc = hvsock_handshake(c, (uint32_t)port, timeout_ms, deadline);
        if (rc != 0)
            conn_close(c);
        return rc;
    } else {
        return bad_spec(spec);
    }
    if (c->fd < 0)
        return connect_error(c, timeout_ms);
    return 0;
}

/* ---- JSON-RPC --------------------------------------------------------- */

struct note {
    struct note *next;
    cJSON *msg;
};

struct ctl;

/* Builder: turns the command's arguments into params (returns 0, or
 * EXIT_USAGE after printing why). Printer: human output of the result.
 * Note printer: one notification's params while following. */
typedef int (*build_fn)(struct ctl *t, int argc, char **argv, cJSON **params);
typedef int (*print_fn)(struct ctl *t, const cJSON *result);
typedef void (*note_fn)(struct ctl *t, const cJSON *params);

struct cmd {
    const char *name;   /* one or two words: "status", "services restart" */
    const char *method; /* NULL: the builder sets t->method */
    const char *args;   /* synopsis for usage */
    const char *help;
    build_fn build;     /* NULL: no arguments, params {} */
    print_fn print;     /* NULL: result pretty-printed as JSON */
    const char *notify; /* notification method printed when t->follow */
    note_fn on_note;
    bool note_by_name;  /* follow only notifications whose name is t->arg */
    bool hidden;        /* alias not listed in usage */
    /* Commands made of several calls: run after connecting, instead of
     * build + one call + print. */
    int (*run)(struct ctl *t, int argc, char **argv);
};

struct ctl {
    struct conn conn;
    int timeout_ms;
    bool json;
    double next_id;
    double rtt_ms;        /* of the last call, for ping */
    const struct cmd *cmd;
    const char *method;   /* method actually called (call overrides) */
    bool follow;          /* keep reading notifications after the reply */
    bool quiet;           /* an error reply is the caller's to report */
    const char *arg;      /* builder -> printer: service name, action */
    /* Notifications that arrived before the reply, in order. */
    struct note *notes, **notes_tail;
    size_t notes_bytes;
    unsigned long notes_dropped;
};

static int bad_reply(const struct ctl *t, const char *why)
{
    fprintf(stderr, "hearthctl: bad reply from %s: %s\n", t->conn.spec, why);
    return EXIT_USAGE;
}

/* Parse one whole line as JSON; NULL if it is not exactly one value. */
static cJSON *parse_line(const char *line, size_t len)
{
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(line, len + 1, &end, 1);

    /* end == line + len rejects an embedded NUL followed by junk. */
    if (j && end != line + len) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

static bool is_notification(const cJSON *msg)
{
    return !cJSON_HasObjectItem(msg, "id") && jstr(msg, "method") != NULL;
}

static void queue_note(struct ctl *t, cJSON *msg, size_t bytes)
{
    struct note *n;

    if (t->notes_bytes + bytes > NOTES_MAX_BYTES) {
        t->notes_dropped++;
        cJSON_Delete(msg);
        return;
    }
    n = calloc(1, sizeof(*n));
    if (!n)
        die_oom();
    n->msg = msg;
    *t->notes_tail = n;
    t->notes_tail = &n->next;
    t->notes_bytes += bytes;
}

static void print_server_error(const struct ctl *t, const cJSON *err)
{
    const char *msg = jstr(err, "message");
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(err, "data");
    double code;

    fprintf(stderr, "hearthctl: %s failed: ", t->method);
    put_safe(stderr, msg ? msg : "(no message)");
    if (jnum(err, "code", &code) && fabs(code) < 9e15)
        fprintf(stderr, " (code %lld)", (long long)code);
    fputc('\n', stderr);
    if (data && !cJSON_IsNull(data)) {
        char *s = cJSON_IsString(data) ? NULL : cJSON_PrintUnformatted(data);

        fputs("hearthctl:   data: ", stderr);
        if (cJSON_IsString(data))
            put_safe(stderr, data->valuestring);
        else if (s)
            put_safe(stderr, s);
        fputc('\n', stderr);
        cJSON_free(s);
    }
}

/* Call t->method with params (consumed). On 0, *reply is the whole reply
 * (caller deletes) and *result points into it. Otherwise the failure was
 * printed and the return value is the exit code. */
static int rpc_call(struct ctl *t, cJSON *params, cJSON **reply, const cJSON **result)
{
    cJSON *req = cJSON_CreateObject();
    double id = ++t->next_id;
    char *text, *line;
    size_t tlen, llen;
    int64_t deadline, t0;
    enum io r;

    if (!req || !params || !cJSON_AddStringToObject(req, "jsonrpc", "2.0") ||
        !cJSON_AddNumberToObject(req, "id", id) ||
        !cJSON_AddStringToObject(req, "method", t->method))
        die_oom();
    if (!cJSON_AddItemToObject(req, "params", params))
        die_oom();
    text = cJSON_PrintUnformatted(req);
    cJSON_Delete(req);
    if (!text)
        die_oom();
    tlen = strlen(text);
    if (tlen + 1 > REQUEST_MAX) {
        fprintf(stderr, "hearthctl: %s: request is %zu bytes, over the 1 MiB limit\n",
                t->method, tlen + 1);
        cJSON_free(text);
        return EXIT_USAGE;
    }
    deadline = deadline_after(t->timeout_ms);
    t0 = now_ns();
    /* The terminating NUL becomes the line's newline: one send. */
    text[tlen] = '\n';
    r = conn_write(&t->conn, text, tlen + 1, deadline);
    cJSON_free(text);
    if (r != IO_OK) {
        if (r == IO_TIMEOUT)
            fprintf(stderr, "hearthctl: timed out after %d ms sending %s to %s\n",
                    t->timeout_ms, t->method, t->conn.spec);
        else
            fprintf(stderr, "hearthctl: cannot send to %s: %s\n", t->conn.spec,
                    strerror(errno));
        return EXIT_USAGE;
    }
    for (;;) {
        cJSON *msg;
        const cJSON *jid, *res, *err;

        r = conn_read_line(&t->conn, deadline, LINE_MAX_BYTES, &line, &llen);
        switch (r) {
        case IO_OK:
            break;
        case IO_TIMEOUT:
            fprintf(stderr, "hearthctl: timed out after %d ms waiting for the %s reply from %s\n",
                    t->timeout_ms, t->method, t->conn.spec);
            return EXIT_USAGE;
        case IO_EOF:
            fprintf(stderr, "hearthctl: %s closed the connection before the %s reply\n",
                    t->conn.spec, t->method);
            return EXIT_USAGE;
        case IO_TOOLONG:
            return bad_reply(t, "line longer than 16 MiB");
        case IO_INTR:
            return EXIT_USAGE;
        default:
            fprintf(stderr, "hearthctl: cannot read from %s: %s\n", t->conn.spec,
                    strerror(errno));
            return EXIT_USAGE;
        }
        if (llen == 0)
            continue;
        msg = parse_line(line, llen);
        if (!msg)
            return bad_reply(t, "not JSON");
        if (!cJSON_IsObject(msg)) {
            cJSON_Delete(msg);
            return bad_reply(t, "not a JSON object");
        }
        if (is_notification(msg)) {
            const char *m = jstr(msg, "method");

            /* Keep only what the follow loop will print, in order. */
            if (t->follow && t->cmd && t->cmd->notify && strcmp(m, t->cmd->notify) == 0)
                queue_note(t, msg, llen);
            else
                cJSON_Delete(msg);
            continue;
        }
        jid = cJSON_GetObjectItemCaseSensitive(msg, "id");
        res = cJSON_GetObjectItemCaseSensitive(msg, "result");
        err = cJSON_GetObjectItemCaseSensitive(msg, "error");
        /* id null: the server could not read our request's id at all. */
        if (!(cJSON_IsNumber(jid) && jid->valuedouble == id) &&
            !(cJSON_IsNull(jid) && err)) {
            cJSON_Delete(msg);
            return bad_reply(t, "reply id does not match the request");
        }
        t->rtt_ms = (double)(now_ns() - t0) / 1e6;
        if (res) {
            *reply = msg;
            *result = res;
            return 0;
        }
        if (cJSON_IsObject(err)) {
            if (!t->quiet)
                print_server_error(t, err);
            cJSON_Delete(msg);
            return EXIT_SERVER;
        }
        cJSON_Delete(msg);
        return bad_reply(t, err ? "error is not an object" : "neither result nor error");
    }
}

/* ---- output ----------------------------------------------------------- */

static int flush_stdout(void)
{
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "hearthctl: cannot write output: %s\n", strerror(errno));
        return EXIT_USAGE;
    }
    return 0;
}

static int print_json(const cJSON *j, bool pretty)
{
    char *s = pretty ? cJSON_Print(j) : cJSON_PrintUnformatted(j);

    if (!s)
        die_oom();
    fputs(s, stdout);
    fputc('\n', stdout);
    cJSON_free(s);
    return 0;
}

enum { COL_NAME, COL_STATE, COL_PID, COL_RESTARTS, COL_EXIT, COL_HEALTH, COL_SINCE, NCOLS };

static const char *const col_head[NCOLS] = {"NAME",      "STATE",  "PID", "RESTARTS",
                                            "LAST-EXIT", "HEALTH", "SINCE"};

/* SINCE: since_ms is how long the service has been in its state. */
static void service_cells(const cJSON *svc, char cells[NCOLS][CELL_MAX])
{
    const char *name = jstr(svc, "name"), *state = jstr(svc, "state");
    const cJSON *ex = cJSON_GetObjectItemCaseSensitive(svc, "last_exit");
    double pid, since, code;

    safe_copy(cells[COL_NAME], CELL_MAX, name ? name : "?");
    safe_copy(cells[COL_STATE], CELL_MAX, state ? state : "?");
    if (jnum(svc, "pid", &pid) && pid > 0 && pid < 1e10)
        snprintf(cells[COL_PID], CELL_MAX, "%lld", (long long)pid);
    else
        snprintf(cells[COL_PID], CELL_MAX, "-");
    fmt_int(cells[COL_RESTARTS], CELL_MAX, svc, "restarts");
    if (cJSON_IsObject(ex) && jstr(ex, "signal"))
        safe_copy(cells[COL_EXIT], CELL_MAX, jstr(ex, "signal"));
    else if (cJSON_IsObject(ex) && jnum(ex, "code", &code) && fabs(code) < 1e10)
        snprintf(cells[COL_EXIT], CELL_MAX, "exit %lld", (long long)code);
    else
        snprintf(cells[COL_EXIT], CELL_MAX, "-");
    /* HEALTH: the health check's status, "-" for a service without one. */
    const char *hs = jstr(cJSON_GetObjectItemCaseSensitive(svc, "health"), "status");
    safe_copy(cells[COL_HEALTH], CELL_MAX, hs ? hs : "-");
    if (!jnum(svc, "since_ms", &since) || since < 0)
        snprintf(cells[COL_SINCE], CELL_MAX, "-");
    else
        fmt_duration(cells[COL_SINCE], CELL_MAX, since);
}

static void print_row(const size_t *width, const char *const *cells)
{
    for (int i = 0; i + 1 < NCOLS; i++)
        printf("%-*s  ", (int)width[i], cells[i]);
    printf("%s\n", cells[NCOLS - 1]);
}

/* Two passes over the array (widths, then rows) instead of storing rows:
 * the number of services is not bounded here. */
static void print_service_table(const cJSON *services)
{
    size_t width[NCOLS];
    char cells[NCOLS][CELL_MAX];
    const cJSON *svc;
    int rows = 0;

    for (int i = 0; i < NCOLS; i++)
        width[i] = strlen(col_head[i]);
    if (cJSON_IsArray(services)) {
        cJSON_ArrayForEach(svc, services)
        {
            if (!cJSON_IsObject(svc))
                continue;
            service_cells(svc, cells);
            for (int i = 0; i < NCOLS; i++)
                if (strlen(cells[i]) > width[i])
                    width[i] = strlen(cells[i]);
            rows++;
        }
    }
    if (rows == 0) {
        puts("no services");
        return;
    }
    print_row(width, col_head);
    cJSON_ArrayForEach(svc, services)
    {
        const char *row[NCOLS];

        if (!cJSON_IsObject(svc))
            continue;
        service_cells(svc, cells);
        for (int i = 0; i < NCOLS; i++)
            row[i] = cells[i];
        print_row(width, row);
    }
}

/* After the table, one line per privileged service with its reasons: a
 * service that can undo the sandbox's setup should not hide in a column. */
static void print_privileged(const cJSON *services)
{
    const cJSON *svc;

    if (!cJSON_IsArray(services))
        return;
    cJSON_ArrayForEach(svc, services)
    {
        const cJSON *why = cJSON_GetObjectItemCaseSensitive(svc, "privileged_reasons");
        const cJSON *r;
        char name[CELL_MAX];
        bool first = true;

        if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(svc, "privileged")))
            continue;
        safe_copy(name, sizeof(name), jstr(svc, "name") ? jstr(svc, "name") : "?");
        printf("privileged: %s", name);
        cJSON_ArrayForEach(r, why)
        {
            char text[CELL_MAX];
            if (!cJSON_IsString(r))
                continue;
            safe_copy(text, sizeof(text), r->valuestring);
            printf("%s%s", first ? " (" : ", ", text);
            first = false;
        }
        puts(first ? "" : ")");
    }
}

/* A notification value: bare when it is a plain word, else JSON. */
static void put_value(const cJSON *v)
{
    char *s;

    if (cJSON_IsString(v) && v->valuestring && v->valuestring[0]) {
        bool plain = true;

        for (const unsigned char *p = (const unsigned char *)v->valuestring; *p; p++)
            if (*p <= ' ' || *p == '"' || *p == '=' || *p == '\\' || *p == 0x7f)
                plain = false;
        if (plain) {
            fputs(v->valuestring, stdout);
            return;
        }
    }
    s = cJSON_PrintUnformatted(v);
    if (!s)
        die_oom();
    put_safe(stdout, s);
    cJSON_free(s);
}

static void print_log_line(const cJSON *l)
{
    const char *wall = jstr(l, "wall"), *stream = jstr(l, "stream"), *text = jstr(l, "line");
    double tms;

    if (wall)
        put_safe(stdout, wall);
    else if (jnum(l, "t_ms", &tms))
        printf("+%.3fs", tms / 1000);
    else
        fputc('-', stdout);
    fputc(' ', stdout);
    put_safe(stdout, stream ? stream : "-");
    fputc(' ', stdout);
    put_safe(stdout, text ? text : "");
    fputc('\n', stdout);
}

/* ---- printers --------------------------------------------------------- */

static int p_ping(struct ctl *t, const cJSON *res)
{
    printf("pong (%.3f ms)\n", t->rtt_ms);
    return 0;
}

static int p_version(struct ctl *t, const cJSON *res)
{
    const char *ver = jstr(res, "version");
    const cJSON *feat = cJSON_GetObjectItemCaseSensitive(res, "features");
    const cJSON *f;
    double proto;
    int n = 0;

    fputs("hearth ", stdout);
    put_safe(stdout, ver ? ver : "?");
    if (jnum(res, "protocol", &proto) && fabs(proto) < 1e10)
        printf(" (protocol %lld)", (long long)proto);
    fputs("\nfeatures:", stdout);
    if (cJSON_IsArray(feat)) {
        cJSON_ArrayForEach(f, feat)
        {
            if (!cJSON_IsString(f))
                continue;
            fputc(' ', stdout);
            put_safe(stdout, f->valuestring);
            n++;
        }
    }
    puts(n ? "" : " none");
    return 0;
}

static int p_status(struct ctl *t, const cJSON *res)
{
    static const char *const keys[] = {"hostname", "mode", "phase"};
    double up, clients;
    bool have_up = jnum(res, "uptime_ms", &up);
    const char *ver = jstr(res, "version");
    char d[32];

    fputs("hearth ", stdout);
    put_safe(stdout, ver ? ver : "?");
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        const char *v = jstr(res, keys[i]);

        printf("  %s ", keys[i]);
        put_safe(stdout, v ? v : "?");
    }
    if (have_up) {
        fmt_duration(d, sizeof(d), up);
        printf("  uptime %s", d);
    }
    if (jnum(res, "clients", &clients) && clients >= 0 && clients < 1e10)
        printf("  clients %lld", (long long)clients);
    const char *sb = jstr(cJSON_GetObjectItemCaseSensitive(res, "sandbox"), "state");
    if (sb) {
        fputs("  sandbox ", stdout);
        put_safe(stdout, sb);
    }
    const cJSON *lr = cJSON_GetObjectItemCaseSensitive(res, "last_resume");
    const char *cause = jstr(lr, "cause");
    double lr_ms;
    if (cause && jnum(lr, "total_ms", &lr_ms)) {
        fputs("\nlast resume: ", stdout);
        put_safe(stdout, cause);
        printf(", %.3f ms%s", lr_ms, cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(lr, "ok"))
                                         ? ", a step failed" : "");
    }
    fputs("\n", stdout);
    /* A required mount that failed holds services back: say so up front. */
    const cJSON *mounts = cJSON_GetObjectItemCaseSensitive(res, "mounts");
    double failed;
    if (jnum(mounts, "failed", &failed) && failed > 0 && failed < 1e6) {
        const char *merr = jstr(mounts, "error");
        printf("mounts: %lld required failed: ", (long long)failed);
        put_safe(stdout, merr ? merr : "?");
        fputc('\n', stdout);
    }
    fputc('\n', stdout);
    print_service_table(cJSON_GetObjectItemCaseSensitive(res, "services"));
    print_privileged(cJSON_GetObjectItemCaseSensitive(res, "services"));
    return 0;
}

static int p_services(struct ctl *t, const cJSON *res)
{
    print_service_table(cJSON_GetObjectItemCaseSensitive(res, "services"));
    print_privileged(cJSON_GetObjectItemCaseSensitive(res, "services"));
    return 0;
}

static int p_state(struct ctl *t, const cJSON *res)
{
    const char *state = jstr(res, "state");

    put_safe(stdout, state ? state : "ok");
    fputc('\n', stdout);
    return 0;
}

static int p_logs(struct ctl *t, const cJSON *res)
{
    const cJSON *lines = cJSON_GetObjectItemCaseSensitive(res, "lines"), *l;

    if (cJSON_IsArray(lines)) {
        cJSON_ArrayForEach(l, lines)
        {
            if (cJSON_IsObject(l))
                print_log_line(l);
        }
    }
    return 0;
}

static int p_events(struct ctl *t, const cJSON *res)
{
    return 0; /* the subscription reply carries nothing to show */
}

static int p_shutdown(struct ctl *t, const cJSON *res)
{
    /* The action hearth will take: a container exits whatever was asked. */
    const char *a = jstr(res, "action");
    fputs("shutting down (", stdout);
    put_safe(stdout, a ? a : t->arg);
    fputs(")\n", stdout);
    return 0;
}

#define PATH_CELL 4096 /* mount paths are shown whole, not cut like names */

static void print_mount_row(const char *target, const char *type, const char *src,
                            const char *state, const char *err, int wt, int wy, int wsrc)
{
    printf("%-*s  %-*s  %-*s  %s", wt, target, wy, type, wsrc, src, state);
    if (err && *err) {
        fputs("  ", stdout);
        put_safe(stdout, err);
    }
    fputc('\n', stdout);
}

static void mount_cells(const cJSON *m, char c[3][PATH_CELL])
{
    safe_copy(c[0], PATH_CELL, jstr(m, "target") ? jstr(m, "target") : "?");
    safe_copy(c[1], PATH_CELL, jstr(m, "type") ? jstr(m, "type") : "?");
    safe_copy(c[2], PATH_CELL, jstr(m, "source") ? jstr(m, "source") : "");
}

static int p_mounts(struct ctl *t, const cJSON *res)
{
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(res, "mounts"), *m;
    int w[3] = {6, 4, 6}, rows = 0;
    static char c[3][PATH_CELL];

    cJSON_ArrayForEach(m, list) {
        mount_cells(m, c);
        for (int i = 0; i < 3; i++)
            if ((int)strlen(c[i]) > w[i])
                w[i] = (int)strlen(c[i]);
        rows++;
    }
    if (!rows) {
        puts("no mounts");
        return 0;
    }
    print_mount_row("TARGET", "TYPE", "SOURCE", "STATE", NULL, w[0], w[1], w[2]);
    cJSON_ArrayForEach(m, list) {
        char state[CELL_MAX];
        const cJSON *ro = cJSON_GetObjectItemCaseSensitive(m, "read_only");
        mount_cells(m, c);
        safe_copy(state, 32, jstr(m, "state") ? jstr(m, "state") : "?");
        if (cJSON_IsTrue(ro))
            strcat(state, " (ro)");
        print_mount_row(c[0], c[1], c[2], state, jstr(m, "error"), w[0], w[1], w[2]);
    }
    return 0;
}

static void print_names(const char *label, const cJSON *arr)
{
    const cJSON *n;
    int count = cJSON_GetArraySize(arr), shown = 0;

    printf("%-9s %d", label, count);
    cJSON_ArrayForEach(n, arr) {
        if (!cJSON_IsString(n))
            continue;
        /* A few names tell the story; --json has them all. */
        if (shown++ == 8) {
            fputs(" ...", stdout);
            break;
        }
        fputs(shown == 1 ? ": " : " ", stdout);
        put_safe(stdout, n->valuestring);
    }
    fputc('\n', stdout);
}

static void print_sync(const cJSON *last)
{
    double runs = 0, v;
    const char *trig = jstr(last, "trigger"), *err = jstr(last, "error");

    jnum(last, "runs", &runs);
    if (runs <= 0) {
        puts("last sync: never");
    } else {
        fputs("last sync: ", stdout);
        put_safe(stdout, trig ? trig : "?");
        static const char *const keys[] = {"linked", "created", "removed", "shadowed", "ignored",
                                           "errors"};
        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
            if (jnum(last, keys[i], &v) && v >= 0 && v < 1e10)
                printf(", %s %lld", keys[i], (long long)v);
        if (jnum(last, "duration_us", &v) && v >= 0 && v < 1e12)
            printf(" in %.3f ms", v / 1000.0);
        fputc('\n', stdout);
    }
    if (err) {
        fputs("error: ", stdout);
        put_safe(stdout, err);
        fputc('\n', stdout);
    }
}

static int p_skills(struct ctl *t, const cJSON *res)
{
    const char *pub = jstr(res, "public_dir"), *priv = jstr(res, "private_dir");

    fputs("public   ", stdout);
    put_safe(stdout, pub ? pub : "?");
    fputs("\nprivate  ", stdout);
    put_safe(stdout, priv ? priv : "?");
    fputc('\n', stdout);
    print_names("public", cJSON_GetObjectItemCaseSensitive(res, "public"));
    print_names("linked", cJSON_GetObjectItemCaseSensitive(res, "linked"));
    print_names("shadowed", cJSON_GetObjectItemCaseSensitive(res, "shadowed"));
    print_names("private", cJSON_GetObjectItemCaseSensitive(res, "private"));
    print_names("ignored", cJSON_GetObjectItemCaseSensitive(res, "ignored"));
    print_sync(cJSON_GetObjectItemCaseSensitive(res, "last"));
    return 0;
}

static int p_skills_sync(struct ctl *t, const cJSON *res)
{
    print_sync(res);
    return 0;
}

static int p_forked(struct ctl *t, const cJSON *res)
{
    fputs("forked ", stdout);
    put_safe(stdout, t->arg ? t->arg : "?");
    puts(": now a private copy");
    return 0;
}

static void n_event(struct ctl *t, const cJSON *p)
{
    const char *type = jstr(p, "type");
    const cJSON *kv;
    double seq;

    if (jnum(p, "seq", &seq) && fabs(seq) < 9e15)
        printf("%lld ", (long long)seq);
    else
        fputs("- ", stdout);
    put_safe(stdout, type ? type : "?");
    cJSON_ArrayForEach(kv, p)
    {
        if (!kv->string || strcmp(kv->string, "seq") == 0 || strcmp(kv->string, "type") == 0)
            continue;
        fputc(' ', stdout);
        put_safe(stdout, kv->string);
        fputc('=', stdout);
        put_value(kv);
    }
    fputc('\n', stdout);
}

static void n_log(struct ctl *t, const cJSON *p)
{
    print_log_line(p);
}

/* ---- following notifications ----------------------------------------- */

static int emit_note(struct ctl *t, const cJSON *msg)
{
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(msg, "params");
    const char *name = jstr(params, "name");

    if (t->cmd->note_by_name && name && t->arg && strcmp(name, t->arg) != 0)
        return 0;
    if (t->json)
        print_json(msg, false);
    else if (cJSON_IsObject(params))
        t->cmd->on_note(t, params);
    return flush_stdout();
}

/* Print notifications until the server closes or SIGINT; no timeout. */
static int follow(struct ctl *t)
{
    struct sigaction sa;
    int rc = 0;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_sigint; /* no SA_RESTART: poll must return EINTR */
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGINT, &sa, NULL) != 0) {
        fprintf(stderr, "hearthctl: sigaction: %s\n", strerror(errno));
        return EXIT_USAGE;
    }
    if (t->notes_dropped)
        fprintf(stderr, "hearthctl: warning: dropped %lu notifications that came before the reply\n",
                t->notes_dropped);
    while (t->notes) {
        struct note *n = t->notes;

        t->notes = n->next;
        if (rc == 0)
            rc = emit_note(t, n->msg);
        cJSON_Delete(n->msg);
        free(n);
    }
    t->notes_tail = &t->notes;
    while (rc == 0) {
        char *line;
        size_t len;
        cJSON *msg;
        enum io r = conn_read_line(&t->conn, -1, LINE_MAX_BYTES, &line, &len);

        if (r == IO_EOF || r == IO_INTR || got_sigint)
            break;
        if (r == IO_TOOLONG)
            return bad_reply(t, "line longer than 16 MiB");
        if (r != IO_OK) {
            fprintf(stderr, "hearthctl: cannot read from %s: %s\n", t->conn.spec,
                    strerror(errno));
            return EXIT_USAGE;
        }
        if (len == 0)
            continue;
        msg = parse_line(line, len);
        if (!msg)
            return bad_reply(t, "not JSON");
        if (cJSON_IsObject(msg) && is_notification(msg) &&
            strcmp(jstr(msg, "method"), t->cmd->notify) == 0)
            rc = emit_note(t, msg);
        else if (cJSON_IsObject(msg) && is_notification(msg) &&
                 strcmp(jstr(msg, "method"), "dropped") == 0) {
            /* The server gave up on this stream (we read too slowly, or
             * its output budget ran out): say so, do not end quietly. */
            const cJSON *p = cJSON_GetObjectItemCaseSensitive(msg, "params");
            const char *why = jstr(p, "message");
            fprintf(stderr, "hearthctl: dropped by %s: %s\n", t->conn.spec, why ? why : "?");
            rc = EXIT_SERVER;
        }
        cJSON_Delete(msg);
    }
    return rc;
}

/* ---- builders --------------------------------------------------------- */

static void cmd_usage(const struct cmd *c)
{
    fprintf(stderr, "usage: hearthctl [OPTIONS] %s%s%s\n", c->name, c->args[0] ? " " : "",
            c->args);
}

static int usage_err(const struct ctl *t, const char *fmt, const char *what)
{
    fputs("hearthctl: ", stderr);
    fputs(t->cmd->name, stderr);
    fputs(": ", stderr);
    fprintf(stderr, fmt, what);
    fputc('\n', stderr);
    cmd_usage(t->cmd);
    return EXIT_USAGE;
}

static cJSON *new_object(void)
{
    cJSON *o = cJSON_CreateObject();

    if (!o)
        die_oom();
    return o;
}

static void add_str(cJSON *o, const char *k, const char *v)
{
    if (!cJSON_AddStringToObject(o, k, v))
        die_oom();
}

static void add_num(cJSON *o, const char *k, double v)
{
    if (!cJSON_AddNumberToObject(o, k, v))
        die_oom();
}

/* "--opt VALUE" or "--opt=VALUE" at argv[*i]; NULL if argv[*i] is not it. */
static const char *opt_value(int argc, char **argv, int *i, const char *lng, const char *shrt,
                             bool *missing)
{
    const char *a = argv[*i];
    size_t l = strlen(lng);

    *missing = false;
    if (strcmp(a, lng) == 0 || (shrt && strcmp(a, shrt) == 0)) {
        if (*i + 1 >= argc) {
            *missing = true;
            return NULL;
        }
        return argv[++*i];
    }
    if (strncmp(a, lng, l) == 0 && a[l] == '=')
        return a + l + 1;
    if (shrt && strncmp(a, shrt, 2) == 0 && a[2] != '\0')
        return a + 2; /* -n50 */
    return NULL;
}

static bool valid_name(const char *s)
{
    size_t l = strlen(s);

    if (l == 0 || l > 255 || s[0] == '-')
        return false;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return false;
    return true;
}

static int b_service(struct ctl *t, int argc, char **argv, cJSON **params)
{
    if (argc != 1)
        return usage_err(t, "%s", argc ? "too many arguments" : "missing service NAME");
    if (!valid_name(argv[0]))
        return usage_err(t, "bad service name '%s'", argv[0]);
    t->arg = argv[0];
    /* skills.fork replies once the copy is done, which hearth stops after
     * 120 s: wait that long (and a little more) unless told otherwise. */
    if (strcmp(t->cmd->method, "skills.fork") == 0 && t->timeout_ms > 0 && t->timeout_ms < 122000)
        t->timeout_ms = 122000;
    *params = new_object();
    add_str(*params, "name", argv[0]);
    return 0;
}

static int b_skill(struct ctl *t, int argc, char **argv, cJSON **params)
{
    if (argc != 1)
        return usage_err(t, "%s", argc ? "too many arguments" : "missing skill NAME");
    /* NAME or CATEGORY/NAME; hearth checks the rest (depth, '..'). */
    if (!valid_name(argv[0]) || argv[0][0] == '/')
        return usage_err(t, "bad skill name '%s'", argv[0]);
    t->arg = argv[0];
    *params = new_object();
    add_str(*params, "name", argv[0]);
    return 0;
}

static int b_signal(struct ctl *t, int argc, char **argv, cJSON **params)
{
    char sig[20];
    const char *s;
    size_t o = 0;

    if (argc != 2)
        return usage_err(t, "%s", argc > 2 ? "too many arguments" : "need NAME and SIGNAL");
    if (!valid_name(argv[0]))
        return usage_err(t, "bad service name '%s'", argv[0]);
    /* Canonical "SIGHUP" from hup, HUP, sighup. */
    s = argv[1];
    if (strncasecmp(s, "SIG", 3) == 0)
        s += 3;
    if (*s == '\0' || strlen(s) > 12 || isdigit((unsigned char)*s))
        return usage_err(t, "bad signal '%s' (want a name such as HUP or SIGTERM)", argv[1]);
    memcpy(sig, "SIG", 3);
    o = 3;
    for (; *s; s++) {
        if (!isalnum((unsigned char)*s) && *s != '+' && *s != '-')
            return usage_err(t, "bad signal '%s' (want a name such as HUP or SIGTERM)",
                             argv[1]);
        sig[o++] = (char)toupper((unsigned char)*s);
    }
    sig[o] = '\0';
    t->arg = argv[0];
    *params = new_object();
    add_str(*params, "name", argv[0]);
    add_str(*params, "signal", sig);
    return 0;
}

/* "services restart NAME [SIGNAL]": with a signal, a graceful restart
 * (that signal instead of the stop signal); same params as a signal. */
static int b_restart(struct ctl *t, int argc, char **argv, cJSON **params)
{
    return argc == 2 ? b_signal(t, argc, argv, params) : b_service(t, argc, argv, params);
}

static int b_logs(struct ctl *t, int argc, char **argv, cJSON **params)
{
    const char *name = NULL;
    unsigned long long lines = 0;
    bool have_lines = false, fol = false;

    for (int i = 0; i < argc; i++) {
        bool missing;
        const char *v = opt_value(argc, argv, &i, "--lines", "-n", &missing);

        if (missing)
            return usage_err(t, "%s needs a number", argv[i]);
        if (v) {
            if (!parse_ulong(v, 1000000000, &lines))
                return usage_err(t, "bad line count '%s'", v);
            have_lines = true;
        } else if (strcmp(argv[i], "-f") == 0 || strcmp(argv[i], "--follow") == 0) {
            fol = true;
        } else if (argv[i][0] == '-') {
            return usage_err(t, "unknown option '%s'", argv[i]);
        } else if (name) {
            return usage_err(t, "unexpected argument '%s'", argv[i]);
        } else {
            name = argv[i];
        }
    }
    if (!name)
        return usage_err(t, "%s", "missing service NAME");
    if (!valid_name(name))
        return usage_err(t, "bad service name '%s'", name);
    t->arg = name;
    t->follow = fol;
    *params = new_object();
    add_str(*params, "name", name);
    if (have_lines)
        add_num(*params, "lines", (double)lines);
    if (!cJSON_AddBoolToObject(*params, "follow", fol))
        die_oom();
    return 0;
}

static int b_events(struct ctl *t, int argc, char **argv, cJSON **params)
{
    *params = new_object();
    t->follow = true;
    for (int i = 0; i < argc; i++) {
        bool missing;
        unsigned long long seq;
        const char *v = opt_value(argc, argv, &i, "--since", NULL, &missing);

        if (missing || !v) {
            cJSON_Delete(*params);
            if (missing)
                return usage_err(t, "%s needs a sequence number", argv[i]);
            return usage_err(t, "unexpected argument '%s'", argv[i]);
        }
        /* 2^53: exact in a JSON number. */
        if (!parse_ulong(v, 9007199254740992ULL, &seq)) {
            cJSON_Delete(*params);
            return usage_err(t, "bad sequence number '%s'", v);
        }
        cJSON_DeleteItemFromObjectCaseSensitive(*params, "since");
        add_num(*params, "since", (double)seq);
    }
    return 0;
}

static int b_shutdown(struct ctl *t, int argc, char **argv, cJSON **params)
{
    t->arg = "poweroff";
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--reboot") == 0)
            t->arg = "reboot";
        else if (strcmp(argv[i], "--poweroff") == 0)
            t->arg = "poweroff";
        else
            return usage_err(t, "unexpected argument '%s'", argv[i]);
    }
    *params = new_object();
    add_str(*params, "action", t->arg);
    return 0;
}

static int b_call(struct ctl *t, int argc, char **argv, cJSON **params)
{
    const char *end = NULL;
    size_t ml;

    if (argc < 1 || argc > 2)
        return usage_err(t, "%s", argc ? "too many arguments (quote the JSON)" : "missing METHOD");
    ml = strlen(argv[0]);
    if (ml == 0 || ml > METHOD_MAX || argv[0][0] == '-')
        return usage_err(t, "bad method '%s'", argv[0]);
    for (const unsigned char *p = (const unsigned char *)argv[0]; *p; p++)
        if (*p <= ' ' || *p == 0x7f)
            return usage_err(t, "bad method '%s'", argv[0]);
    t->method = argv[0];
    if (argc == 1) {
        *params = new_object();
        return 0;
    }
    *params = cJSON_ParseWithOpts(argv[1], &end, 1);
    if (!*params) {
        char near[24];

        /* cJSON leaves end NULL on failure; its error pointer says where. */
        end = cJSON_GetErrorPtr();
        safe_copy(near, sizeof(near), end && *end ? end : "end of input");
        fprintf(stderr, "hearthctl: call: params are not valid JSON (near '%s')\n", near);
        return EXIT_USAGE;
    }
    if (!cJSON_IsObject(*params) && !cJSON_IsArray(*params)) {
        cJSON_Delete(*params);
        *params = NULL;
        fputs("hearthctl: call: params must be a JSON object or array\n", stderr);
        return EXIT_USAGE;
    }
    return 0;
}

/* ---- sandbox commands ---------------------------------------------------- */

#define ENTROPY_FROM_BYTES 64

/* --entropy-from PATH: 64 bytes read from PATH (/dev/urandom), base64. */
static int add_entropy_from(struct ctl *t, cJSON *params, const char *key, const char *path)
{
    unsigned char buf[ENTROPY_FROM_BYTES];
    char enc[ENTROPY_FROM_BYTES / 3 * 4 + 8];
    size_t got = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd < 0) {
        fprintf(stderr, "hearthctl: %s: %s\n", path, strerror(errno));
        return EXIT_USAGE;
    }
    while (got < sizeof(buf)) {
        ssize_t n = read(fd, buf + got, sizeof(buf) - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    if (got == 0)
        return usage_err(t, "no bytes read from '%s'", path);
    base64_encode(buf, got, enc);
    add_str(params, key, enc);
    return 0;
}

/* --time now|SEC[.FRACTION] as {"sec","nsec"}. */
static int add_time(struct ctl *t, cJSON *params, const char *v)
{
    struct timespec ts;
    unsigned long long sec = 0, nsec = 0;

    if (strcmp(v, "now") == 0) {
        clock_gettime(CLOCK_REALTIME, &ts);
        sec = (unsigned long long)ts.tv_sec;
        nsec = (unsigned long long)ts.tv_nsec;
    } else {
        char whole[24];
        const char *dot = strchr(v, '.');
        size_t wl = dot ? (size_t)(dot - v) : strlen(v);
        if (wl == 0 || wl >= sizeof(whole))
            return usage_err(t, "bad time '%s' (want now or seconds since the epoch)", v);
        memcpy(whole, v, wl);
        whole[wl] = '\0';
        if (!parse_ulong(whole, 1ULL << 40, &sec))
            return usage_err(t, "bad time '%s' (want now or seconds since the epoch)", v);
        if (dot) {
            size_t digits = 0;
            for (const char *p = dot + 1; *p; p++, digits++) {
                if (!isdigit((unsigned char)*p) || digits >= 9)
                    return usage_err(t, "bad time '%s' (at most 9 fraction digits)", v);
                nsec = nsec * 10 + (unsigned)(*p - '0');
            }
            for (; digits < 9; digits++)
                nsec *= 10;
        }
    }
    cJSON *o = new_object();
    add_num(o, "sec", (double)sec);
    add_num(o, "nsec", (double)nsec);
    cJSON_AddItemToObject(params, "time", o);
    return 0;
}

static int b_init(struct ctl *t, int argc, char **argv, cJSON **params)
{
    cJSON *p = new_object(), *env = NULL, *allow = NULL;
    int rc = 0;

    for (int i = 0; i < argc && rc == 0; i++) {
        bool missing;
        const char *v;

        if ((v = opt_value(argc, argv, &i, "--env", "-e", &missing))) {
            const char *eq = strchr(v, '=');
            char key[129];
            if (!eq || eq == v || (size_t)(eq - v) >= sizeof(key)) {
                rc = usage_err(t, "bad --env '%s' (want KEY=VALUE)", v);
                break;
            }
            memcpy(key, v, (size_t)(eq - v));
            key[eq - v] = '\0';
            if (!env)
                env = cJSON_AddObjectToObject(p, "env");
            if (!env)
                die_oom();
            cJSON_DeleteItemFromObjectCaseSensitive(env, key);
            add_str(env, key, eq + 1);
        } else if ((v = opt_value(argc, argv, &i, "--allow-out", NULL, &missing))) {
            if (!allow) {
                cJSON *eg = cJSON_AddObjectToObject(p, "egress");
                allow = eg ? cJSON_AddArrayToObject(eg, "allowOut") : NULL;
                if (!allow)
                    die_oom();
            }
            cJSON_AddItemToArray(allow, cJSON_CreateString(v));
        } else if ((v = opt_value(argc, argv, &i, "--hostname", NULL, &missing))) {
            add_str(p, "hostname", v);
        } else if ((v = opt_value(argc, argv, &i, "--time", NULL, &missing))) {
            rc = add_time(t, p, v);
        } else if ((v = opt_value(argc, argv, &i, "--entropy-from", NULL, &missing))) {
            rc = add_entropy_from(t, p, "entropy", v);
        } else if (missing) {
            rc = usage_err(t, "%s needs a value", argv[i]);
        } else {
            rc = usage_err(t, "unexpected argument '%s'", argv[i]);
        }
    }
    if (rc) {
        cJSON_Delete(p);
        return rc;
    }
    *params = p;
    return 0;
}

static int b_freeze(struct ctl *t, int argc, char **argv, cJSON **params)
{
    unsigned long long ms = 5000;
    bool force = false;

    for (int i = 0; i < argc; i++) {
        bool missing;
        if (strcmp(argv[i], "--force") == 0) { /* even while a service holds a lease */
            force = true;
            continue;
        }
        const char *v = opt_value(argc, argv, &i, "--timeout-ms", NULL, &missing);
        if (missing)
            return usage_err(t, "%s needs a number", argv[i]);
        if (!v)
            return usage_err(t, "unexpected argument '%s'", argv[i]);
        if (!parse_ulong(v, 600000, &ms))
            return usage_err(t, "bad timeout '%s' (milliseconds, at most 600000)", v);
    }
    /* The reply comes once the freeze is done: wait a bit longer. */
    if ((unsigned long long)t->timeout_ms < ms + 2000)
        t->timeout_ms = (int)ms + 2000;
    *params = new_object();
    add_num(*params, "timeout_ms", (double)ms);
    if (force)
        cJSON_AddBoolToObject(*params, "force", true);
    return 0;
}

static int b_resume(struct ctl *t, int argc, char **argv, cJSON **params)
{
    cJSON *p = new_object();
    int rc = 0;

    for (int i = 0; i < argc && rc == 0; i++) {
        bool missing;
        const char *v;
        if ((v = opt_value(argc, argv, &i, "--time", NULL, &missing)))
            rc = add_time(t, p, v);
        else if ((v = opt_value(argc, argv, &i, "--entropy-from", NULL, &missing)))
            rc = add_entropy_from(t, p, "entropy", v);
        else if (missing)
            rc = usage_err(t, "%s needs a value", argv[i]);
        else
            rc = usage_err(t, "unexpected argument '%s'", argv[i]);
    }
    if (rc) {
        cJSON_Delete(p);
        return rc;
    }
    *params = p;
    return 0;
}

/* A freeze or resume report: one line per step, then the total. */
static int p_steps(struct ctl *t, const cJSON *res)
{
    const cJSON *steps = cJSON_GetObjectItemCaseSensitive(res, "steps"), *s;
    double total = 0;

    cJSON_ArrayForEach(s, steps) {
        const char *name = jstr(s, "name"), *result = jstr(s, "result"), *d = jstr(s, "detail");
        double ms = 0;
        char nb[32], rb[16];
        jnum(s, "ms", &ms);
        safe_copy(nb, sizeof(nb), name ? name : "?");
        safe_copy(rb, sizeof(rb), result ? result : "?");
        printf("%-10s %-8s %8.3f ms", nb, rb, ms);
        if (d) {
            fputs("  ", stdout);
            put_safe(stdout, d);
        }
        fputc('\n', stdout);
    }
    jnum(res, "total_ms", &total);
    printf("total %.3f ms", total);
    const char *st = jstr(res, "state");
    if (st) {
        fputs(", sandbox ", stdout);
        put_safe(stdout, st);
    }
    fputc('\n', stdout);
    return 0;
}

static int p_init(struct ctl *t, const cJSON *res)
{
    const cJSON *v;

    cJSON_ArrayForEach(v, res) {
        char *txt = cJSON_IsString(v) ? NULL : cJSON_PrintUnformatted(v);
        put_safe(stdout, v->string ? v->string : "?");
        fputs(": ", stdout);
        put_safe(stdout, txt ? txt : (v->valuestring ? v->valuestring : ""));
        fputc('\n', stdout);
        free(txt);
    }
    return 0;
}

/* ---- cp ------------------------------------------------------------------ */

/* Both sides of a transfer go in chunks of the server's per-call limit;
 * the end is checked with files.hash over ranges of CP_HASH_BLOCK, each
 * compared with the hash of the same range of the bytes sent or received. */
#define CP_CHUNK (256u << 10)      /* files.read / files.write per call */
#define CP_HASH_BLOCK (1u << 20)   /* files.hash per call */
#define CP_PREFIX "sandbox:"

struct cp {
    struct ctl *t;
    const char *guest;       /* the guest path */
    char *local;             /* the host path (after a directory is resolved) */
    unsigned long long size, done;
    struct sha256 whole, block;
    char (*blocks)[65];      /* hex sha256 of each finished CP_HASH_BLOCK */
    size_t nblocks, capblocks;
    bool tty;
    int64_t last_progress;
};

/* Feeds transferred bytes into the whole-file hash and the range hashes. */
static void cp_hash(struct cp *c, const unsigned char *p, size_t n)
{
    sha256_update(&c->whole, p, n);
    while (n) {
        size_t room = CP_HASH_BLOCK - (size_t)(c->block.bytes);
        size_t take = n < room ? n : room;
        sha256_update(&c->block, p, take);
        p += take, n -= take;
        if (c->block.bytes == CP_HASH_BLOCK) {
            if (c->nblocks == c->capblocks) {
                c->capblocks = c->capblocks ? c->capblocks * 2 : 64;
                c->blocks = realloc(c->blocks, c->capblocks * sizeof(*c->blocks));
                if (!c->blocks)
                    die_oom();
            }
            sha256_hex(&c->block, c->blocks[c->nblocks++]);
            sha256_init(&c->block);
        }
    }
}

static void cp_progress(struct cp *c, bool last)
{
    int64_t now = now_ms();

    if (!c->tty || (!last && now - c->last_progress < 200))
        return;
    c->last_progress = now;
    fprintf(stderr, "\r%.1f / %.1f MiB (%3d%%)%s", c->done / 1048576.0, c->size / 1048576.0,
            c->size ? (int)(c->done * 100 / c->size) : 100, last ? "\n" : "");
}

/* One call: t->method with params; *reply to delete, *res inside it. */
static int cp_call(struct cp *c, const char *method, cJSON *params, cJSON **reply,
                   const cJSON **res)
{
    c->t->method = method;
    return rpc_call(c->t, params, reply, res);
}

static cJSON *path_params(const char *key, const char *path)
{
    cJSON *p = new_object();
    add_str(p, key, path);
    return p;
}

/* Compares every range hash with files.hash of the guest file, then
 * prints the result. */
static int cp_verify(struct cp *c, const char *guest)
{
    char last[65];
    size_t n = c->nblocks + (c->block.bytes || c->size == 0 ? 1 : 0);

    if (c->block.bytes || c->size == 0)
        sha256_hex(&c->block, last);
    for (size_t i = 0; i < n; i++) {
        cJSON *p = path_params("path", guest), *reply;
        const cJSON *res;
        add_num(p, "offset", (double)i * CP_HASH_BLOCK);
        add_num(p, "length", CP_HASH_BLOCK);
        int rc = cp_call(c, "files.hash", p, &reply, &res);
        if (rc)
            return rc;
        const char *h = jstr(res, "sha256");
        const char *want = i < c->nblocks ? c->blocks[i] : last;
        bool ok = h && strcmp(h, want) == 0;
        cJSON_Delete(reply);
        if (!ok) {
            fprintf(stderr, "hearthctl: cp: checksum mismatch in bytes %llu-%llu: the copy differs\n",
                    (unsigned long long)i * CP_HASH_BLOCK,
                    (unsigned long long)(i + 1) * CP_HASH_BLOCK - 1);
            return EXIT_SERVER;
        }
    }
    char hex[65];
    sha256_hex(&c->whole, hex);
    printf("%llu bytes, sha256 %s\n", c->done, hex);
    return 0;
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* host -> guest: one files.write when it fits, else a temp name beside
 * the target written with append and renamed over it at the end. */
static int cp_upload(struct cp *c, const char *src, const char *dst_in)
{
    struct stat st;
    int fd = open(src, O_RDONLY | O_CLOEXEC);
    char *dst = NULL, *tmp = NULL;
    unsigned char *buf = malloc(CP_CHUNK);
    char *enc = malloc(CP_CHUNK / 3 * 4 + 8);
    int rc = EXIT_USAGE;
    bool tmp_made = false;

    if (!buf || !enc)
        die_oom();
    if (fd < 0 || fstat(fd, &st) < 0) {
        fprintf(stderr, "hearthctl: cp: %s: %s\n", src, strerror(errno));
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        fprintf(stderr, "hearthctl: cp: %s: not a regular file\n", src);
        goto out;
    }
    /* A guest directory (or a path ending in '/') receives the file by
     * its own name. */
    size_t dl = strlen(dst_in);
    bool into = dl && dst_in[dl - 1] == '/';
    if (!into) {
        cJSON *reply;
        const cJSON *res;
        cJSON *p = path_params("path", dst_in);
        /* A missing target is the usual case: ask quietly. */
        c->t->quiet = true;
        int r = cp_call(c, "files.stat", p, &reply, &res);
        c->t->quiet = false;
        if (r == 0) {
            into = jstr(res, "type") && strcmp(jstr(res, "type"), "dir") == 0;
            cJSON_Delete(reply);
        } else if (r != EXIT_SERVER) {
            fprintf(stderr, "hearthctl: cp: cannot reach %s\n", c->t->conn.spec);
            goto out;
        }
    }
    if (into) {
        if (asprintf(&dst, "%s%s%s", dst_in, dst_in[dl - 1] == '/' ? "" : "/", base_name(src)) < 0)
            die_oom();
    } else if (!(dst = strdup(dst_in))) {
        die_oom();
    }
    c->size = (unsigned long long)st.st_size;
    char mode[8];
    snprintf(mode, sizeof(mode), "%04o", (unsigned)(st.st_mode & 07777));
    const char *target = dst;
    if ((unsigned long long)st.st_size > CP_CHUNK) {
        const char *slash = strrchr(dst, '/');
        if (asprintf(&tmp, "%.*s.%.180s.hearthctl-%ld", (int)(slash - dst + 1), dst, slash + 1,
                     (long)getpid()) < 0)
            die_oom();
        target = tmp;
    }
    for (bool first = true;; first = false) {
        size_t got = 0;
        while (got < CP_CHUNK) {
            ssize_t n = read(fd, buf + got, CP_CHUNK - got);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0) {
                fprintf(stderr, "hearthctl: cp: %s: %s\n", src, strerror(errno));
                goto out;
            }
            if (n == 0)
                break;
            got += (size_t)n;
        }
        if (!first && got == 0)
            break;
        cp_hash(c, buf, got);
        base64_encode(buf, got, enc);
        cJSON *p = path_params("path", target), *reply;
        const cJSON *res;
        add_str(p, "data", enc);
        add_str(p, "mode", mode);
        if (!first && !cJSON_AddBoolToObject(p, "append", 1))
            die_oom();
        if (first && tmp && !cJSON_AddBoolToObject(p, "exclusive", 1))
            die_oom();
        rc = cp_call(c, "files.write", p, &reply, &res);
        if (rc)
            goto out;
        cJSON_Delete(reply);
        tmp_made = tmp != NULL;
        c->done += got;
        cp_progress(c, false);
        /* Without a temp name the one write was the whole copy: a file
         * that grew since fstat is copied as it was then, never appended
         * to the target itself. */
        if (got < CP_CHUNK || !tmp)
            break;
    }
    if (tmp) {
        cJSON *p = path_params("from", tmp), *reply;
        const cJSON *res;
        add_str(p, "to", dst);
        rc = cp_call(c, "files.rename", p, &reply, &res);
        if (rc)
            goto out;
        cJSON_Delete(reply);
        tmp_made = false;
    }
    cp_progress(c, true);
    rc = cp_verify(c, dst);
out:
    if (tmp_made) {
        cJSON *reply;
        const cJSON *res;
        if (cp_call(c, "files.remove", path_params("path", tmp), &reply, &res) == 0)
            cJSON_Delete(reply);
    }
    if (fd >= 0)
        close(fd);
    free(buf);
    free(enc);
    free(dst);
    free(tmp);
    return rc;
}

/* guest -> host: read into a temp file beside the target, checked, then
 * renamed over it. */
static int cp_download(struct cp *c, const char *src, const char *dst_in)
{
    struct stat st;
    char *dst = NULL, *tmp = NULL;
    unsigned char *buf = malloc(CP_CHUNK);
    int fd = -1, rc;
    cJSON *reply;
    const cJSON *res;
    mode_t mode = 0644;

    if (!buf)
        die_oom();
    rc = cp_call(c, "files.stat", path_params("path", src), &reply, &res);
    if (rc) {
        free(buf);
        return rc;
    }
    const char *type = jstr(res, "type"), *m = jstr(res, "mode");
    double size = 0;
    jnum(res, "size", &size);
    if (!type || strcmp(type, "file") != 0) {
        fprintf(stderr, "hearthctl: cp: %s is a %s, not a regular file\n", src,
                type ? type : "?");
        cJSON_Delete(reply);
        free(buf);
        return EXIT_SERVER;
    }
    if (m)
        mode = (mode_t)strtoul(m, NULL, 8) & 07777;
    cJSON_Delete(reply);
    c->size = (unsigned long long)size;
    size_t dl = strlen(dst_in);
    if ((dl && dst_in[dl - 1] == '/') || (stat(dst_in, &st) == 0 && S_ISDIR(st.st_mode))) {
        if (asprintf(&dst, "%s%s%s", dst_in, dst_in[dl - 1] == '/' ? "" : "/", base_name(src)) < 0)
            die_oom();
    } else if (!(dst = strdup(dst_in))) {
        die_oom();
    }
    if (asprintf(&tmp, "%s.hearthctl-%ld", dst, (long)getpid()) < 0)
        die_oom();
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        fprintf(stderr, "hearthctl: cp: %s: %s\n", tmp, strerror(errno));
        rc = EXIT_USAGE;
        goto out;
    }
    for (;;) {
        cJSON *p = path_params("path", src);
        add_num(p, "offset", (double)c->done);
        add_num(p, "length", CP_CHUNK);
        rc = cp_call(c, "files.read", p, &reply, &res);
        if (rc)
            goto out;
        const char *data = jstr(res, "data");
        long n = data ? base64_decode(data, strlen(data), buf, CP_CHUNK, NULL, 0) : -1;
        bool eof = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res, "eof"));
        cJSON_Delete(reply);
        if (n < 0) {
            rc = bad_reply(c->t, "files.read data is not base64");
            goto out;
        }
        for (size_t off = 0; off < (size_t)n;) {
            ssize_t w = write(fd, buf + off, (size_t)n - off);
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0) {
                fprintf(stderr, "hearthctl: cp: %s: %s\n", tmp, strerror(errno));
                rc = EXIT_USAGE;
                goto out;
            }
            off += (size_t)w;
        }
        cp_hash(c, buf, (size_t)n);
        c->done += (unsigned long long)n;
        if (c->done > c->size)
            c->size = c->done;
        cp_progress(c, false);
        if (eof || n == 0)
            break;
    }
    cp_progress(c, true);
    rc = cp_verify(c, src);
    if (rc)
        goto out;
    if (fchmod(fd, mode) < 0 || fsync(fd) < 0 || rename(tmp, dst) < 0) {
        fprintf(stderr, "hearthctl: cp: %s: %s\n", dst, strerror(errno));
        rc = EXIT_USAGE;
        goto out;
    }
    free(tmp);
    tmp = NULL;
out:
    if (fd >= 0)
        close(fd);
    if (tmp)
        unlink(tmp);
    free(tmp);
    free(dst);
    free(buf);
    return rc;
}

/* Checks cp's arguments before anything connects. */
static int b_cp(struct ctl *t, int argc, char **argv, cJSON **params)
{
    *params = NULL;
    if (argc != 2)
        return usage_err(t, "%s", argc < 2 ? "needs SRC and DST" : "too many arguments");
    bool g0 = strncmp(argv[0], CP_PREFIX, strlen(CP_PREFIX)) == 0;
    bool g1 = strncmp(argv[1], CP_PREFIX, strlen(CP_PREFIX)) == 0;
    if (g0 == g1)
        return usage_err(t, "%s", "exactly one of SRC and DST names the guest side (sandbox:PATH)");
    const char *guest = argv[g0 ? 0 : 1] + strlen(CP_PREFIX);
    if (guest[0] != '/')
        return usage_err(t, "guest path '%s' is not absolute", guest);
    return 0;
}

static int r_cp(struct ctl *t, int argc, char **argv)
{
    struct cp c;
    bool g0 = strncmp(argv[0], CP_PREFIX, strlen(CP_PREFIX)) == 0;
    const char *guest = argv[g0 ? 0 : 1] + strlen(CP_PREFIX);

    memset(&c, 0, sizeof(c));
    c.t = t;
    c.tty = isatty(STDERR_FILENO);
    sha256_init(&c.whole);
    sha256_init(&c.block);
    int rc = g0 ? cp_download(&c, guest, argv[1]) : cp_upload(&c, argv[0], guest);
    free(c.blocks);
    return rc;
}

/* ---- command table ---------------------------------------------------- */

/* egress set: --allow-out and --deny-out take one or more CIDRs each (up
 * to the next option); the result replaces the whole policy. */
static int b_egress_set(struct ctl *t, int argc, char **argv, cJSON **params)
{
    cJSON *p = new_object(), *list = NULL;
    cJSON *allow = cJSON_AddArrayToObject(p, "allowOut");
    cJSON *deny = cJSON_AddArrayToObject(p, "denyOut");
    bool pub = true;

    if (!allow || !deny) {
        cJSON_Delete(p);
        return usage_err(t, "%s", "out of memory");
    }
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--allow-out") == 0) {
            list = allow;
        } else if (strcmp(argv[i], "--deny-out") == 0) {
            list = deny;
        } else if (strcmp(argv[i], "--public") == 0) {
            list = NULL;
            if (i + 1 >= argc || (strcmp(argv[i + 1], "on") != 0 && strcmp(argv[i + 1], "off") != 0)) {
                cJSON_Delete(p);
                return usage_err(t, "%s", "--public takes on or off");
            }
            pub = strcmp(argv[++i], "on") == 0;
        } else if (list && argv[i][0] != '-') {
            cJSON_AddItemToArray(list, cJSON_CreateString(argv[i]));
        } else {
            cJSON_Delete(p);
            return usage_err(t, "unexpected argument '%s'", argv[i]);
        }
    }
    cJSON_AddBoolToObject(p, "allowPublicTraffic", pub);
    *params = p;
    return 0;
}

static void put_cidrs(const char *label, const cJSON *arr)
{
    const cJSON *it;
    printf("%-10s", label);
    if (!cJSON_GetArraySize(arr))
        fputs(" -", stdout);
    cJSON_ArrayForEach(it, arr) {
        if (cJSON_IsString(it)) {
            putchar(' ');
            put_safe(stdout, it->valuestring);
        }
    }
    putchar('\n');
}

/* One row per rule counter; nested objects that are not counters (the
 * netdev chains' table) are skipped. */
static void p_counters(const cJSON *ctr, const char *head)
{
    const cJSON *it;
    printf("%-12s %12s %14s\n", head, "PACKETS", "BYTES");
    cJSON_ArrayForEach(it, ctr) {
        const cJSON *pk = cJSON_GetObjectItemCaseSensitive(it, "packets");
        const cJSON *by = cJSON_GetObjectItemCaseSensitive(it, "bytes");
        if (!cJSON_IsNumber(pk))
            continue;
        printf("%-12.32s %12.0f %14.0f\n", it->string ? it->string : "?", pk->valuedouble,
               cJSON_IsNumber(by) ? by->valuedouble : 0);
    }
}

static int p_egress(struct ctl *t, const cJSON *res)
{
    const cJSON *pol = cJSON_GetObjectItemCaseSensitive(res, "policy");
    const cJSON *ctr = cJSON_GetObjectItemCaseSensitive(res, "counters"), *it;
    const char *err = jstr(res, "error");

    if (!pol) {
        puts("no egress policy");
        return 0;
    }
    printf("applied   %s\n", cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res, "applied")) ? "yes" : "no");
    if (err) {
        fputs("error     ", stdout);
        put_safe(stdout, err);
        putchar('\n');
    }
    printf("public    %s\n",
           cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(pol, "allowPublicTraffic")) ? "on" : "off");
    put_cidrs("allowOut", cJSON_GetObjectItemCaseSensitive(pol, "allowOut"));
    put_cidrs("denyOut", cJSON_GetObjectItemCaseSensitive(pol, "denyOut"));
    put_cidrs("always", cJSON_GetObjectItemCaseSensitive(res, "alwaysAllowed"));
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res, "repaired")))
        puts("repaired  yes (the ruleset had changed)");
    const cJSON *lay = cJSON_GetObjectItemCaseSensitive(res, "layers");
    if (lay) {
        const cJSON *nd = cJSON_GetObjectItemCaseSensitive(lay, "netdev");
        printf("layers    inet %s, owner %s, watch %s, netdev",
               cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(lay, "inet")) ? "yes" : "no",
               cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(lay, "owner")) ? "yes" : "no",
               cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(lay, "watch")) ? "yes" : "no");
        if (cJSON_GetArraySize(nd) == 0)
            fputs(" -", stdout);
        cJSON_ArrayForEach(it, nd) {
            putchar(' ');
            put_safe(stdout, cJSON_GetStringValue(it) ? cJSON_GetStringValue(it) : "?");
        }
        putchar('\n');
    }
    if (ctr) {
        p_counters(ctr, "RULE");
        const cJSON *nd = cJSON_GetObjectItemCaseSensitive(ctr, "netdev");
        if (cJSON_IsObject(nd))
            p_counters(nd, "NETDEV RULE");
    }
    return 0;
}

static int b_metrics(struct ctl *t, int argc, char **argv, cJSON **params)
{
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--prometheus") == 0)
            t->arg = "prometheus";
        else
            return usage_err(t, "unexpected argument '%s'", argv[i]);
    }
    *params = new_object();
    return 0;
}

/* JSON by default (the reply as it is); --prometheus: the exposition
 * format a node exporter's textfile collector or a scraper reads. */
static int p_metrics(struct ctl *t, const cJSON *res)
{
    if (t->arg && strcmp(t->arg, "prometheus") == 0) {
        if (prom_write(stdout, res) < 0)
            return bad_reply(t, "metrics: expected an object");
        return 0;
    }
    return print_json(res, true);
}

static const struct cmd cmds[] = {
    {.name = "ping", .method = "ping", .args = "", .help = "check the server, show round-trip time",
     .print = p_ping},
    {.name = "version", .method = "version", .args = "", .help = "server version, protocol, features",
     .print = p_version},
    {.name = "status", .method = "status", .args = "", .help = "sandbox state and services",
     .print = p_status},
    {.name = "services", .method = "services.list", .args = "[list]", .help = "list services",
     .print = p_services},
    {.name = "services list", .method = "services.list", .args = "", .help = "list services",
     .print = p_services, .hidden = true},
    {.name = "services start", .method = "services.start", .args = "NAME",
     .help = "start a service", .build = b_service, .print = p_state},
    {.name = "services stop", .method = "services.stop", .args = "NAME",
     .help = "stop a service", .build = b_service, .print = p_state},
    {.name = "services restart", .method = "services.restart", .args = "NAME [SIGNAL]",
     .help = "restart a service; with SIGNAL (USR1) a graceful restart", .build = b_restart,
     .print = p_state},
    {.name = "services signal", .method = "services.signal", .args = "NAME SIGNAL",
     .help = "send a signal (HUP, SIGTERM, ...)", .build = b_signal, .print = p_state},
    {.name = "logs", .method = "logs.read", .args = "NAME [-n N] [-f]",
     .help = "last N output lines; -f keeps following", .build = b_logs, .print = p_logs,
     .notify = "log", .on_note = n_log, .note_by_name = true},
    {.name = "events", .method = "events.subscribe", .args = "[--since SEQ]",
     .help = "follow the event stream", .build = b_events, .print = p_events,
     .notify = "event", .on_note = n_event},
    {.name = "mounts", .method = "mounts.list", .args = "",
     .help = "host-shared mounts and seeding", .print = p_mounts},
    {.name = "skills", .method = "skills.list", .args = "[list]",
     .help = "public skills overlay", .print = p_skills},
    {.name = "skills list", .method = "skills.list", .args = "",
     .help = "public skills overlay", .print = p_skills, .hidden = true},
    {.name = "skills sync", .method = "skills.sync", .args = "",
     .help = "reconcile the skills overlay now", .print = p_skills_sync},
    {.name = "skills fork", .method = "skills.fork", .args = "NAME",
     .help = "replace a linked public skill by a private copy", .build = b_skill,
     .print = p_forked},
    {.name = "egress", .method = "egress.get", .args = "[get]", .help = "egress policy and counters",
     .print = p_egress},
    {.name = "egress get", .method = "egress.get", .args = "", .help = "egress policy and counters",
     .print = p_egress, .hidden = true},
    {.name = "egress set", .method = "egress.set",
     .args = "[--allow-out CIDR...] [--deny-out CIDR...] [--public on|off]",
     .help = "replace the egress policy", .build = b_egress_set, .print = p_egress},
    {.name = "egress check", .method = "egress.check", .args = "",
     .help = "verify the ruleset, repair it if changed", .print = p_egress},
    {.name = "network", .method = "network.get", .args = "[check]",
     .help = "interfaces, addresses, DNS (JSON)"},
    {.name = "network check", .method = "network.check", .args = "",
     .help = "link, carrier, address, route, gateway neighbour (JSON)"},
    {.name = "call", .method = NULL, .args = "METHOD [JSON]",
     .help = "call any method; params JSON, default {}", .build = b_call},
    {.name = "init", .method = "sandbox.init",
     .args = "[--env K=V]... [--allow-out CIDR]... [--hostname H] [--time now|SEC] [--entropy-from PATH]",
     .help = "send the per-sandbox parameters (releases services after init)", .build = b_init,
     .print = p_init},
    {.name = "freeze", .method = "sandbox.freeze", .args = "[--timeout-ms MS] [--force]",
     .help = "sync persistent mounts and freeze the services", .build = b_freeze,
     .print = p_steps},
    {.name = "resume", .method = "sandbox.resume", .args = "[--time now|SEC] [--entropy-from PATH]",
     .help = "run the resume checks and thaw; each step timed", .build = b_resume,
     .print = p_steps},
    {.name = "cp", .method = "files.write", .args = "SRC DST",
     .help = "copy a file in or out; sandbox:PATH names the guest side", .build = b_cp,
     .run = r_cp},
    {.name = "metrics", .method = "metrics", .args = "[--prometheus]",
     .help = "memory, mount usage, service cgroups, egress counters (JSON or Prometheus text)",
     .build = b_metrics, .print = p_metrics},
    {.name = "shutdown", .method = "system.shutdown", .args = "[--reboot]",
     .help = "power off (or reboot) the sandbox", .build = b_shutdown, .print = p_shutdown},
};

#define NCMDS (sizeof(cmds) / sizeof(cmds[0]))

/* Longest match: "services restart x" picks the two-word entry. */
static const struct cmd *find_cmd(int argc, char **argv, int *words)
{
    const struct cmd *best = NULL;

    *words = 0;
    for (size_t i = 0; i < NCMDS; i++) {
        const char *sp = strchr(cmds[i].name, ' ');

        if (!sp) {
            if (*words < 1 && strcmp(argv[0], cmds[i].name) == 0) {
                best = &cmds[i];
                *words = 1;
            }
        } else if (argc >= 2 && strlen(argv[0]) == (size_t)(sp - cmds[i].name) &&
                   strncmp(argv[0], cmds[i].name, (size_t)(sp - cmds[i].name)) == 0 &&
                   strcmp(argv[1], sp + 1) == 0) {
            best = &cmds[i];
            *words = 2;
        }
    }
    return best;
}

static void usage(FILE *f)
{
    fputs("usage: hearthctl [--connect SPEC] [--json] [--timeout MS] COMMAND [ARGS]\n"
          "       hearthctl --help | --version\n"
          "\n"
          "options:\n"
          "  -c, --connect SPEC  unix:PATH, vsock:CID:PORT or hvsock:UDS:PORT\n"
          "                      (default $HEARTH_CONNECT, else " DEFAULT_CONNECT ")\n"
          "  -j, --json          print the raw result as JSON\n"
          "  -t, --timeout MS    bound connect and each reply, 0 = none (default 10000)\n"
          "  -h, --help          this text\n"
          "  -V, --version       hearthctl's version\n"
          "\n"
          "commands:\n",
          f);
    for (size_t i = 0; i < NCMDS; i++) {
        char syn[64];

        if (cmds[i].hidden)
            continue;
        snprintf(syn, sizeof(syn), "%s%s%s", cmds[i].name, cmds[i].args[0] ? " " : "",
                 cmds[i].args);
        fprintf(f, "  %-30s %s\n", syn, cmds[i].help);
    }
    fputs("\nexit status: 0 ok, 1 the server returned an error, 2 usage, connection,\n"
          "timeout or protocol error.\n",
          f);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"connect", required_argument, NULL, 'c'}, {"json", no_argument, NULL, 'j'},
        {"timeout", required_argument, NULL, 't'}, {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},       {NULL, 0, NULL, 0},
    };
    const char *spec = getenv("HEARTH_CONNECT");
    const struct cmd *cmd;
    struct ctl t;
    cJSON *params = NULL, *reply = NULL;
    const cJSON *result = NULL;
    unsigned long long ms;
    int o, words, rc;

    memset(&t, 0, sizeof(t));
    t.timeout_ms = DEFAULT_TIMEOUT_MS;
    t.notes_tail = &t.notes;
    t.conn.fd = -1;
    if (!spec || !*spec)
        spec = DEFAULT_CONNECT;
    /* "+": options end at COMMAND, whose own options (-n, -f) follow it. */
    opterr = 0; /* our own messages, named "hearthctl" whatever argv[0] is */
    while ((o = getopt_long(argc, argv, "+:c:jt:hV", opts, NULL)) != -1) {
        switch (o) {
        case 'c':
            spec = optarg;
            break;
        case 'j':
            t.json = true;
            break;
        case 't':
            if (!parse_ulong(optarg, INT_MAX, &ms)) {
                fprintf(stderr, "hearthctl: bad --timeout '%s' (milliseconds)\n", optarg);
                return EXIT_USAGE;
            }
            t.timeout_ms = (int)ms;
            break;
        case 'h':
            usage(stdout);
            return flush_stdout();
        case 'V':
            puts("hearthctl " HEARTH_VERSION);
            return flush_stdout();
        default:
            /* A long option is the word just read; a short one is optopt. */
            if (optind > 0 && optind <= argc && argv[optind - 1] &&
                strncmp(argv[optind - 1], "--", 2) == 0)
                fprintf(stderr, "hearthctl: option '%.*s' %s\n",
                        (int)strcspn(argv[optind - 1], "="), argv[optind - 1],
                        o == ':' ? "needs a value" : "is unknown or takes no value");
            else
                fprintf(stderr, "hearthctl: option '-%c' %s\n", optopt,
                        o == ':' ? "needs a value" : "is unknown");
            usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        usage(stderr);
        return EXIT_USAGE;
    }
    cmd = find_cmd(argc - optind, argv + optind, &words);
    if (!cmd) {
        fprintf(stderr, "hearthctl: unknown command '%s'\n", argv[optind]);
        usage(stderr);
        return EXIT_USAGE;
    }
    t.cmd = cmd;
    t.method = cmd->method;
    argc -= optind + words;
    argv += optind + words;
    if (cmd->run) {
        rc = cmd->build ? cmd->build(&t, argc, argv, &params) : 0;
        cJSON_Delete(params);
        if (rc != 0)
            return rc;
        rc = conn_open(&t.conn, spec, t.timeout_ms);
        if (rc == 0)
            rc = cmd->run(&t, argc, argv);
        conn_close(&t.conn);
        if (flush_stdout() != 0 && rc == 0)
            rc = EXIT_USAGE;
        return rc;
    }
    if (cmd->build) {
        rc = cmd->build(&t, argc, argv, &params);
        if (rc != 0)
            return rc;
    } else if (argc > 0) {
        return usage_err(&t, "unexpected argument '%s'", argv[0]);
    } else {
        params = new_object();
    }
    rc = conn_open(&t.conn, spec, t.timeout_ms);
    if (rc != 0) {
        cJSON_Delete(params);
        return rc;
    }
    rc = rpc_call(&t, params, &reply, &result);
    if (rc == 0) {
        if ((t.json && cmd->print != p_metrics) || !cmd->print)
            rc = print_json(result, true);
        else
            rc = cmd->print(&t, result);
        cJSON_Delete(reply);
        if (rc == 0)
            rc = flush_stdout();
        if (rc == 0 && t.follow && cmd->notify)
            rc = follow(&t);
    }
    while (t.notes) {
        struct note *n = t.notes;

        t.notes = n->next;
        cJSON_Delete(n->msg);
        free(n);
    }
    conn_close(&t.conn);
    if (flush_stdout() != 0 && rc == 0)
        rc = EXIT_USAGE;
    return rc;
}
