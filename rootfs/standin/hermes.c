/* A stand-in for a resident agent, for demos and VM tests of an image.
 *
 * It behaves the way the sandbox expects a Hermes-like agent to: it reads
 * HERMES_HOME, lists its skills following symlinks, appends to a history
 * file in the home and in its working directory (the workspace), answers
 * on a TCP port, re-reads its skills on SIGHUP and exits 1 on SIGTERM
 * after writing "stop" to its history.
 *
 * The port speaks one command per line and answers one line:
 *   health                 ok
 *   state                  {"pid":..,"hups":..,"skills":[..],..}
 *   note TEXT              appends TEXT to both history files; ok
 *   env NAME               the variable's value, or "-"
 *   connect ADDR PORT      ok LINE-FROM-PEER | refused | timeout | error: ..
 *   GET /...               an HTTP/1.0 200 reply (for curl-style probes)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_CLIENTS 16
#define LINE_MAX_LEN 1024
#define MAX_SKILLS 256

struct client {
    int fd;
    size_t len;
    char buf[LINE_MAX_LEN];
};

static const char *home;
static struct client clients[MAX_CLIENTS];
static unsigned hups, notes;
static char skills[MAX_SKILLS][80];
static size_t nskills;
static struct timespec started;

static void append(const char *path, const char *line)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        fprintf(stderr, "hermes: unable to open %s: %s\n", path, strerror(errno));
        return;
    }
    if (write(fd, line, strlen(line)) < 0)
        fprintf(stderr, "hermes: unable to write %s: %s\n", path, strerror(errno));
    fsync(fd);
    close(fd);
}


__attribute__((format(printf, 1, 2))) static void history(const char *fmt, ...)
{
    char msg[LINE_MAX_LEN], line[LINE_MAX_LEN + 64], path[512];
    struct timespec now;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    clock_gettime(CLOCK_REALTIME, &now);
    snprintf(line, sizeof(line), "%lld pid=%d %s\n", (long long)now.tv_sec, (int)getpid(), msg);
    snprintf(path, sizeof(path), "%s/sessions/history.log", home);
    append(path, line);
    append("history.log", line);
    printf("hermes: %s", line);
    fflush(stdout);
}

/* Skills are whatever the home's skills/ holds, links followed: a link
 * whose target is gone is not a skill. */
static void scan_skills(void)
{
    char dir[512], p[1024];
    struct stat st;

    nskills = 0;
    snprintf(dir, sizeof(dir), "%s/skills", home);
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "hermes: unable to list %s: %s\n", dir, strerror(errno));
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) && nskills < MAX_SKILLS) {
        /* Hidden names are not skills; quotes would break the state line. */
        if (e->d_name[0] == '.' || strpbrk(e->d_name, "\"\\"))
            continue;
        snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
        if (stat(p, &st) == 0 && S_ISDIR(st.st_mode))
            snprintf(skills[nskills++], sizeof(skills[0]), "%s", e->d_name);
    }
    closedir(d);
    printf("hermes: %zu skills\n", nskills);
    fflush(stdout);
}

static void reply(int fd, const char *s)
{
    size_t len = strlen(s), off = 0;
    while (off < len) {
        ssize_t w = write(fd, s + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        off += (size_t)w;
    }
}

/* A bounded, blocking probe: this is a test agent, a few seconds' stall
 * of its own loop is fine. */
static void do_connect(int fd, const char *addr, int port)
{
    struct sockaddr_storage ss = {0};
    socklen_t sl;
    struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
    char out[LINE_MAX_LEN];

    if (inet_pton(AF_INET, addr, &s4->sin_addr) == 1) {
        s4->sin_family = AF_INET;
        s4->sin_port = htons((unsigned short)port);
        sl = sizeof(*s4);
    } else if (inet_pton(AF_INET6, addr, &s6->sin6_addr) == 1) {
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((unsigned short)port);
        sl = sizeof(*s6);
    } else {
        reply(fd, "error: bad address\n");
        return;
    }
    int s = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s < 0) {
        snprintf(out, sizeof(out), "error: socket: %s\n", strerror(errno));
        reply(fd, out);
        return;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = connect(s, (struct sockaddr *)&ss, sl), err = rc < 0 ? errno : 0;
    if (rc < 0 && err == EINPROGRESS) {
        struct pollfd p = {.fd = s, .events = POLLOUT};
        int n = poll(&p, 1, 5000);
        socklen_t el = sizeof(err);
        if (n == 0)
            err = ETIMEDOUT;
        else if (getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
            err = errno;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
    if (err == 0) {
        /* The peer's greeting, if it sends one within a second. */
        char got[256] = "";
        struct pollfd p = {.fd = s, .events = POLLIN};
        if (poll(&p, 1, 1000) > 0) {
            ssize_t r = read(s, got, sizeof(got) - 1);
            if (r > 0) {
                got[r] = 0;
                got[strcspn(got, "\r\n")] = 0;
            }
        }
        snprintf(out, sizeof(out), "ok %ld %s\n", ms, got);
    } else if (err == ECONNREFUSED) {
        snprintf(out, sizeof(out), "refused %ld\n", ms);
    } else if (err == ETIMEDOUT) {
        snprintf(out, sizeof(out), "timeout %ld\n", ms);
    } else {
        snprintf(out, sizeof(out), "error %ld %s\n", ms, strerror(err));
    }
    close(s);
    reply(fd, out);
}

static void do_state(int fd)
{
    char out[LINE_MAX_LEN * 8];
    struct timespec now, mono;
    size_t n;

    clock_gettime(CLOCK_REALTIME, &now);
    clock_gettime(CLOCK_MONOTONIC, &mono);
    n = (size_t)snprintf(out, sizeof(out),
                         "{\"pid\":%d,\"home\":\"%s\",\"started\":%lld,\"now\":%lld.%03ld,"
                         "\"mono_ms\":%lld,\"hups\":%u,\"notes\":%u,\"skills\":[",
                         (int)getpid(), home, (long long)started.tv_sec, (long long)now.tv_sec,
                         now.tv_nsec / 1000000, (long long)mono.tv_sec * 1000 + mono.tv_nsec / 1000000,
                         hups, notes);
    for (size_t i = 0; i < nskills && n < sizeof(out) - 100; i++)
        n += (size_t)snprintf(out + n, sizeof(out) - n, "%s\"%s\"", i ? "," : "", skills[i]);
    snprintf(out + n, sizeof(out) - n, "]}\n");
    reply(fd, out);
}

static void command(int fd, char *line)
{
    char a[128];
    int port;

    if (!strncmp(line, "GET ", 4)) {
        reply(fd, "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nok\n");
        return;
    }
    if (!strcmp(line, "health")) {
        reply(fd, "ok\n");
    } else if (!strcmp(line, "state")) {
        do_state(fd);
    } else if (!strncmp(line, "note ", 5)) {
        notes++;
        history("note %s", line + 5);
        reply(fd, "ok\n");
    } else if (!strncmp(line, "env ", 4)) {
        const char *v = getenv(line + 4);
        char out[LINE_MAX_LEN];
        snprintf(out, sizeof(out), "%s\n", v ? v : "-");
        reply(fd, out);
    } else if (!strncmp(line, "eat ", 4)) {
        /* A runaway tool: N MiB allocated and touched, so a memory limit
         * on the service's cgroup is what ends it. */
        long mib = strtol(line + 4, NULL, 10);
        char *p = mib > 0 && mib <= 1 << 16 ? malloc((size_t)mib << 20) : NULL;
        if (!p) {
            reply(fd, "error: cannot allocate\n");
            return;
        }
        for (size_t off = 0; off < (size_t)mib << 20; off += 4096)
            p[off] = 1;
        history("ate %ld MiB", mib);
        free(p);
        reply(fd, "ok\n");
    } else if (sscanf(line, "connect %127s %d", a, &port) == 2) {
        do_connect(fd, a, port);
    } else {
        reply(fd, "error: unknown command\n");
    }
}

static int listen_on(int port)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
    const char *bind_addr = getenv("HERMES_BIND");

    if (s < 0)
        return -1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (inet_pton(AF_INET, bind_addr ? bind_addr : "0.0.0.0", &sa.sin_addr) != 1 ||
        bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(s, 16) < 0) {
        close(s);
        return -1;
    }
    return s;
}

int main(void)
{
    sigset_t mask;
    const char *p = getenv("HERMES_PORT");
    int port = p ? atoi(p) : 9119;

    home = getenv("HERMES_HOME");
    if (!home)
        home = "/root/.hermes";
    clock_gettime(CLOCK_REALTIME, &started);
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGINT);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    signal(SIGPIPE, SIG_IGN);
    int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
    int lfd = listen_on(port);
    if (lfd < 0) {
        fprintf(stderr, "hermes: unable to listen on port %d: %s\n", port, strerror(errno));
        return 2;
    }
    scan_skills();
    history("start skills=%zu", nskills);
    for (size_t i = 0; i < MAX_CLIENTS; i++)
        clients[i].fd = -1;

    for (;;) {
        struct pollfd pf[MAX_CLIENTS + 2];
        int map[MAX_CLIENTS + 2];
        nfds_t n = 0;
        pf[n] = (struct pollfd){.fd = sfd, .events = POLLIN};
        map[n++] = -1;
        pf[n] = (struct pollfd){.fd = lfd, .events = POLLIN};
        map[n++] = -2;
        for (int i = 0; i < MAX_CLIENTS; i++)
            if (clients[i].fd >= 0) {
                pf[n] = (struct pollfd){.fd = clients[i].fd, .events = POLLIN};
                map[n++] = i;
            }
        if (poll(pf, n, -1) < 0) {
            if (errno == EINTR)
                continue;
            return 3;
        }
        for (nfds_t k = 0; k < n; k++) {
            if (!pf[k].revents)
                continue;
            if (map[k] == -1) {
                struct signalfd_siginfo si;
                if (read(sfd, &si, sizeof(si)) != sizeof(si))
                    continue;
                if (si.ssi_signo == SIGHUP) {
                    hups++;
                    scan_skills();
                    history("hup skills=%zu", nskills);
                } else {
                    history("stop signal=%u", si.ssi_signo);
                    /* The real gateway exits 1 on SIGTERM. */
                    return 1;
                }
            } else if (map[k] == -2) {
                int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
                if (c < 0)
                    continue;
                int slot = -1;
                for (int i = 0; i < MAX_CLIENTS && slot < 0; i++)
                    if (clients[i].fd < 0)
                        slot = i;
                if (slot < 0) {
                    close(c);
                    continue;
                }
                clients[slot].fd = c;
                clients[slot].len = 0;
            } else {
                struct client *cl = &clients[map[k]];
                ssize_t r = read(cl->fd, cl->buf + cl->len, sizeof(cl->buf) - 1 - cl->len);
                if (r <= 0) {
                    close(cl->fd);
                    cl->fd = -1;
                    continue;
                }
                cl->len += (size_t)r;
                char *nl;
                while ((nl = memchr(cl->buf, '\n', cl->len))) {
                    *nl = 0;
                    if (nl > cl->buf && nl[-1] == '\r')
                        nl[-1] = 0;
                    command(cl->fd, cl->buf);
                    size_t used = (size_t)(nl + 1 - cl->buf);
                    memmove(cl->buf, nl + 1, cl->len - used);
                    cl->len -= used;
                }
                if (cl->len == sizeof(cl->buf) - 1) {
                    close(cl->fd);
                    cl->fd = -1;
                }
            }
        }
    }
}
