/* Bench client for one-line request/reply servers on a unix socket.
 *
 *   ping_client lat SOCK REQUEST N WARMUP WINDOW M
 *     N requests one at a time (write, then read to the reply's newline);
 *     the first WARMUP are dropped; then M requests with WINDOW in flight
 *     on the same connection. Prints "p50_us p99_us requests_per_s".
 *   ping_client hold SOCK REQUEST K
 *     K connections, REQUEST sent once on each, replies awaited for up to
 *     1 s; prints "connected C answered A" and waits for SIGTERM, holding
 *     every connection open (idle) meanwhile. An empty REQUEST sends
 *     nothing. Connects are nonblocking: one refused because the server's
 *     backlog is full (EAGAIN) is left out of C rather than waited on.
 *
 * REQUEST is sent with a newline appended. The same client measures every
 * server, so its own cost is the same on each row. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what)
{
    fprintf(stderr, "ping_client: %s: %s\n", what, errno ? strerror(errno) : "failed");
    exit(1);
}

static long num(const char *s, long min)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < min) {
        fprintf(stderr, "ping_client: bad number: %s\n", s);
        exit(2);
    }
    return v;
}

/* Returns the descriptor, or -1 with errno set when nonblock is asked and
 * the server's backlog is full (EAGAIN): the hold mode counts those. */
static int dial(const char *path, int nonblock)
{
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    if (strlen(path) >= sizeof a.sun_path) {
        errno = ENAMETOOLONG;
        die(path);
    }
    strcpy(a.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0), 0);
    if (fd < 0)
        die("socket");
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        if (nonblock && errno == EAGAIN) {
            close(fd);
            return -1;
        }
        die("connect");
    }
    return fd;
}

static void write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            die("write");
        }
        p += w;
        n -= (size_t)w;
    }
}

/* Reads once and returns how many newlines (whole replies) arrived. A
 * reply split across reads is counted when its newline comes. */
static long read_lines(int fd)
{
    char buf[65536];
    ssize_t r;
    do
        r = read(fd, buf, sizeof buf);
    while (r < 0 && errno == EINTR);
    if (r < 0)
        die("read");
    if (r == 0) {
        errno = 0;
        die("server closed the connection");
    }
    long n = 0;
    for (char *p = buf; (p = memchr(p, '\n', (size_t)(buf + r - p))); p++)
        n++;
    return n;
}

static long long now_ns(void)
{
    struct timespec t;
    if (clock_gettime(CLOCK_MONOTONIC, &t) < 0)
        die("clock_gettime");
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

static char *with_newline(const char *req, size_t *len)
{
    *len = strlen(req) + 1;
    char *s = malloc(*len + 1);
    if (!s)
        die("malloc");
    memcpy(s, req, *len - 1);
    s[*len - 1] = '\n';
    s[*len] = 0;
    return s;
}

static int lat(const char *path, const char *req0, long n, long warm, long window, long m)
{
    size_t len;
    char *req = with_newline(req0, &len);
    long long *t = malloc((size_t)n * sizeof *t);
    if (!t)
        die("malloc");
    int fd = dial(path, 0);

    for (long i = 0; i < n; i++) {
        long long t0 = now_ns();
        write_all(fd, req, len);
        long got = read_lines(fd);
        /* One request in flight: anything but one reply is a protocol error. */
        while (got == 0)
            got = read_lines(fd);
        if (got != 1) {
            errno = 0;
            die("more than one reply line to one request");
        }
        t[i] = now_ns() - t0;
    }
    long k = n - warm;
    qsort(t + warm, (size_t)k, sizeof *t, cmp_ll);
    double p50 = (k % 2 ? t[warm + k / 2] : (t[warm + k / 2 - 1] + t[warm + k / 2]) / 2.0) / 1000.0;
    double p99 = t[warm + k * 99 / 100] / 1000.0;

    /* Pipelined phase: keep `window` requests in flight, topping the
     * window up with one write each time replies come back. */
    double rps = 0;
    if (window > 0 && m > 0) {
        char *batch = malloc((size_t)window * len);
        if (!batch)
            die("malloc");
        for (long i = 0; i < window; i++)
            memcpy(batch + i * (long)len, req, len);
        long sent = 0, done = 0, inflight = 0;
        long long t0 = now_ns();
        while (done < m) {
            long more = window - inflight;
            if (more > m - sent)
                more = m - sent;
            if (more > 0) {
                write_all(fd, batch, (size_t)more * len);
                sent += more;
                inflight += more;
            }
            long got = read_lines(fd);
            if (got > inflight) {
                errno = 0;
                die("more replies than requests");
            }
            inflight -= got;
            done += got;
        }
        rps = m / ((now_ns() - t0) / 1e9);
        free(batch);
    }
    if (close(fd) < 0)
        die("close");
    printf("%.1f %.1f %.0f\n", p50, p99, rps);
    free(t);
    free(req);
    return 0;
}

static volatile sig_atomic_t stop;
static void on_term(int sig) { stop = sig; }

static int hold(const char *path, const char *req0, long k)
{
    size_t len;
    char *req = with_newline(req0, &len);
    struct pollfd *p = calloc((size_t)k, sizeof *p);
    if (!p)
        die("calloc");
    long conn = 0, answered = 0;
    for (long i = 0; i < k; i++) {
        int fd = dial(path, 1);
        if (fd < 0)
            continue;
        p[conn].fd = fd;
        p[conn].events = POLLIN;
        conn++;
    }
    /* The socket is nonblocking; a request is tiny, so a short write
     * means the server is not reading at all, which we just record. */
    int quiet = !*req0; /* empty REQUEST: connect only, never send */
    for (long i = 0; i < conn && !quiet; i++)
        if (write(p[i].fd, req, len) != (ssize_t)len && errno != EAGAIN)
            die("write");
    long long end = now_ns() + 1000000000LL;
    while (answered < conn && !quiet) {
        long long left = (end - now_ns()) / 1000000;
        if (left <= 0)
            break;
        int r = poll(p, (nfds_t)conn, (int)left);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            die("poll");
        }
        for (long i = 0; i < conn; i++) {
            if (!p[i].revents)
                continue;
            char buf[4096];
            ssize_t n = read(p[i].fd, buf, sizeof buf);
            if (n < 0 && errno != EAGAIN)
                die("read");
            if (n == 0 || memchr(buf, '\n', n > 0 ? (size_t)n : 0)) {
                answered += n > 0;
                p[i].fd = ~p[i].fd; /* poll skips it; still held open, idle */
            }
        }
    }
    struct sigaction sa = { .sa_handler = on_term };
    if (sigaction(SIGTERM, &sa, NULL) < 0 || sigaction(SIGINT, &sa, NULL) < 0)
        die("sigaction");
    printf("connected %ld answered %ld\n", conn, answered);
    if (fflush(stdout) == EOF)
        die("stdout");
    while (!stop)
        pause();
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 8 && !strcmp(argv[1], "lat")) {
        long n = num(argv[4], 1), warm = num(argv[5], 0);
        if (warm >= n) {
            fprintf(stderr, "ping_client: warm-up must be below N\n");
            return 2;
        }
        return lat(argv[2], argv[3], n, warm, num(argv[6], 0), num(argv[7], 0));
    }
    if (argc == 5 && !strcmp(argv[1], "hold"))
        return hold(argv[2], argv[3], num(argv[4], 1));
    fprintf(stderr, "usage: ping_client lat SOCK REQUEST N WARMUP WINDOW M\n"
                    "       ping_client hold SOCK REQUEST K\n");
    return 2;
}
