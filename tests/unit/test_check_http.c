/* The HTTP probe end to end on loopback: a peer thread answers one
 * request with canned bytes (after a delay, or not at all) while the
 * probe runs on a loop of its own. */
#include "unit.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cJSON.h>
#include <ev.h>

#include "check.h"
#include "err.h"

struct peer {
    int lfd, port;
    const char *answer; /* NULL: close without answering */
    size_t answer_len;  /* 0: strlen(answer) */
    int delay_ms;
    char request[1024];
    pthread_t thread;
};

static void *serve_once(void *arg)
{
    struct peer *p = arg;
    int c = accept(p->lfd, NULL, NULL);
    size_t n = 0;

    if (c < 0)
        return NULL;
    while (n + 1 < sizeof(p->request) && !strstr(p->request, "\r\n\r\n")) {
        ssize_t k = read(c, p->request + n, sizeof(p->request) - 1 - n);
        if (k <= 0)
            break;
        n += (size_t)k;
        p->request[n] = 0;
    }
    if (p->delay_ms) {
        struct timespec ts = {p->delay_ms / 1000, (long)(p->delay_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (p->answer) {
        size_t len = p->answer_len ? p->answer_len : strlen(p->answer), off = 0;
        while (off < len) {
            ssize_t k = send(c, p->answer + off, len - off, MSG_NOSIGNAL);
            if (k <= 0)
                break;
            off += (size_t)k;
        }
    }
    close(c);
    return NULL;
}

static int peer_start(struct peer *p, const char *answer, int delay_ms)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sin);

    memset(p, 0, sizeof(*p));
    p->answer = answer;
    p->delay_ms = delay_ms;
    p->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (p->lfd < 0 || bind(p->lfd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
        listen(p->lfd, 4) < 0 || getsockname(p->lfd, (struct sockaddr *)&sin, &len) < 0)
        return -1;
    p->port = ntohs(sin.sin_port);
    return pthread_create(&p->thread, NULL, serve_once, p) == 0 ? 0 : -1;
}

static void peer_end(struct peer *p)
{
    pthread_join(p->thread, NULL);
    close(p->lfd);
}

struct outcome {
    struct ev_loop *loop;
    int calls;
    bool ok;
    char detail[400];
};

static void done_cb(void *ctx, bool ok, const char *detail)
{
    struct outcome *o = ctx;
    o->calls++;
    o->ok = ok;
    snprintf(o->detail, sizeof(o->detail), "%s", detail);
    ev_break(o->loop, EVBREAK_ALL);
}

static void guard_cb(struct ev_loop *loop, ev_timer *w, int revents) { ev_break(loop, EVBREAK_ALL); }

/* One probe of "127.0.0.1:PORT/health" with timeout_ms; fills o. */
static void http_probe(int port, int64_t timeout_ms, struct outcome *o)
{
    struct err err = {0};
    struct check_spec spec;
    ev_timer guard;

    memset(o, 0, sizeof(*o));
    memset(&spec, 0, sizeof(spec));
    spec.kind = CHECK_HTTP;
    snprintf(spec.target, sizeof(spec.target), "127.0.0.1:%d/health", port);
    spec.timeout_ms = timeout_ms;
    o->loop = ev_loop_new(EVFLAG_AUTO);
    struct check *c = check_start(o->loop, &spec, NULL, done_cb, o, &err);
    CHECK(c != NULL);
    /* Never from inside check_start. */
    CHECK_EQ_INT(o->calls, 0);
    ev_timer_init(&guard, guard_cb, 10.0, 0.);
    ev_timer_start(o->loop, &guard);
    if (c)
        ev_run(o->loop, 0);
    ev_timer_stop(o->loop, &guard);
    CHECK_EQ_INT(o->calls, 1);
    ev_loop_destroy(o->loop);
}

TEST(check_http_2xx_passes_and_sends_a_get)
{
    struct peer p;
    struct outcome o;
    char want[256];

    CHECK(peer_start(&p, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 0) == 0);
    http_probe(p.port, 2000, &o);
    peer_end(&p);
    CHECK(o.ok);
    snprintf(want, sizeof(want), "http 127.0.0.1:%d/health: status 200 OK", p.port);
    CHECK_STR(o.detail, want);
    snprintf(want, sizeof(want), "GET /health HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n", p.port);
    CHECK(strncmp(p.request, want, strlen(want)) == 0);
    CHECK_CONTAINS(p.request, "Connection: close\r\n\r\n");

    /* A body far past the bound, without a length: still a pass. */
    static char big[300000];
    int hl = snprintf(big, sizeof(big), "HTTP/1.0 204 No Content\r\n\r\n");
    memset(big + hl, 'x', sizeof(big) - (size_t)hl);
    CHECK(peer_start(&p, big, 0) == 0);
    p.answer_len = sizeof(big);
    http_probe(p.port, 2000, &o);
    peer_end(&p);
    CHECK(o.ok);
}

TEST(check_http_failures_say_why)
{
    static const struct {
        const char *answer;
        int delay_ms;
        const char *detail;
    } cases[] = {
        {"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n", 0,
         "status 503 Service Unavailable"},
        {"HTTP/1.1 301 Moved Permanently\r\nLocation: /x\r\n\r\n", 0, "status 301 Moved Permanently"},
        {"SSH-2.0-OpenSSH_9.6\r\n", 0, "bad status line \"SSH-2.0-OpenSSH_9.6\""},
        {"HTTP/1.1 200 OK\r\nbroken\r\n\r\n", 0, "bad header line \"broken\""},
        {NULL, 0, "connection closed without an answer"},
        {"HTTP/1.1 200 OK\r\n\r\n", 600, "timed out after 150 ms waiting for the status line"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct peer p;
        struct outcome o;
        char want[256];

        CHECK(peer_start(&p, cases[i].answer, cases[i].delay_ms) == 0);
        http_probe(p.port, 150, &o);
        peer_end(&p);
        CHECK(!o.ok);
        snprintf(want, sizeof(want), "http 127.0.0.1:%d/health: %s", p.port, cases[i].detail);
        CHECK_STR(o.detail, want);
    }
}

TEST(check_http_refused_and_spec)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sin);
    struct outcome o;
    char want[128];
    /* Bound, not listening: the port refuses. */
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0 &&
          getsockname(fd, (struct sockaddr *)&sin, &len) == 0);
    http_probe(ntohs(sin.sin_port), 2000, &o);
    close(fd);
    CHECK(!o.ok);
    snprintf(want, sizeof(want), "http 127.0.0.1:%d/health: unable to connect: Connection refused",
             ntohs(sin.sin_port));
    CHECK_STR(o.detail, want);

    struct check_spec spec;
    struct err err;
    cJSON *j = cJSON_Parse("{\"http\":\"[::1]:8642/health\",\"timeout_ms\":300}");
    CHECK_EQ_INT(checkspec_from_json(j, &spec, &err), 0);
    CHECK_EQ_INT(spec.kind, CHECK_HTTP);
    CHECK_STR(spec.target, "[::1]:8642/health");
    CHECK_EQ_INT((int)spec.timeout_ms, 300);
    cJSON_Delete(j);
    j = cJSON_Parse("{\"http\":\"db.local:80/\"}");
    CHECK_EQ_INT(checkspec_from_json(j, &spec, &err), -1);
    CHECK_CONTAINS(err.msg, "names are not resolved");
    cJSON_Delete(j);
}
