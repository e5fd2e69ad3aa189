/* hearthctl over several sandboxes (see fleet.h): targets from --connect,
 * rounds of calls to all of them at once, and one-call commands printed
 * per target. */
#include "fleet.h"

#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"

#define RETRY_NS (10 * 1000000LL)  /* full unix backlog: next attempt */

enum { S_IDLE, S_RETRY, S_CONNECTING, S_HANDSHAKE, S_WAIT, S_DONE };

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
}

int fleet_catch_sigint(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_sigint; /* no SA_RESTART: poll must return EINTR */
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGINT, &sa, NULL) != 0) {
        fprintf(stderr, "hearthctl: unable to set up signals: %s\n", strerror(errno));
        return -1;
    }
    return 0;
}

bool fleet_interrupted(void) { return interrupted != 0; }

/* ---- targets ---------------------------------------------------------- */

static int add_one(struct fleet *f, const char *spec, size_t len)
{
    struct fleet_target *t;

    if (f->n >= FLEET_TARGETS_MAX) {
        fprintf(stderr, "hearthctl: more than %d targets\n", FLEET_TARGETS_MAX);
        return -1;
    }
    if (f->n == f->cap) {
        size_t ncap = f->cap ? f->cap * 2 : 8;
        struct fleet_target *nt = realloc(f->t, ncap * sizeof(*nt));

        if (!nt)
            base_die_oom();
        f->t = nt;
        f->cap = ncap;
    }
    t = &f->t[f->n];
    memset(t, 0, sizeof(*t));
    t->fd = -1;
    t->spec = strndup(spec, len);
    if (!t->spec)
        base_die_oom();
    /* A bad spec is this target's failure, reported in its row. */
    if (conn_addr_parse(t->spec, &t->addr) != 0)
        t->addr_errno = errno ? errno : EINVAL;
    f->n++;
    return 0;
}

static int add_spec(struct fleet *f, const char *spec, size_t len)
{
    char pat[PATH_MAX];
    glob_t g;
    int rc;

    f->given++;
    if (f->given > 1)
        f->multi = true;
    /* Only a filesystem path is a pattern: not @abstract, vsock, hvsock. */
    if (len <= 5 || strncmp(spec, "unix:", 5) != 0 || spec[5] == '@' ||
        len - 5 >= sizeof(pat) || !memchr(spec, '*', len) + !memchr(spec, '?', len) +
                                          !memchr(spec, '[', len) == 3)
        return add_one(f, spec, len);
    memcpy(pat, spec + 5, len - 5);
    pat[len - 5] = '\0';
    rc = glob(pat, 0, NULL, &g);
    if (rc == GLOB_NOMATCH)
        return add_one(f, spec, len);
    if (rc != 0) {
        fprintf(stderr, "hearthctl: unable to expand '%.*s': %s\n", (int)len, spec,
                rc == GLOB_NOSPACE ? "out of memory" : "read error");
        return -1;
    }
    f->multi = true;
    for (size_t i = 0; i < g.gl_pathc; i++) {
        char one[PATH_MAX + 8];
        int n = snprintf(one, sizeof(one), "unix:%s", g.gl_pathv[i]);

        if (n < 0 || (size_t)n >= sizeof(one) || add_one(f, one, (size_t)n) != 0) {
            globfree(&g);
            return -1;
        }
    }
    globfree(&g);
    return 0;
}

int fleet_add(struct fleet *f, const char *arg)
{
    const char *p = arg;

    for (;;) {
        size_t l = strcspn(p, ",");

        if (l == 0) {
            fprintf(stderr, "hearthctl: empty target in --connect '%s'\n", arg);
            return -1;
        }
        if (add_spec(f, p, l) != 0)
            return -1;
        if (p[l] == '\0')
            return 0;
        p += l + 1;
    }
}

/* ---- one round -------------------------------------------------------- */

static void drop_conn(struct fleet_target *t)
{
    if (t->fd >= 0)
        close(t->fd);
    t->fd = -1;
    t->state = S_IDLE;
    t->reused = false;
    t->out_len = t->out_off = 0;
    linebuf_free(&t->in);
}

static void clear_outcome(struct fleet_target *t)
{
    for (size_t i = 0; i < FLEET_CALLS_MAX; i++) {
        cJSON_Delete(t->reply[i]);
        t->reply[i] = NULL;
    }
    t->fail = FLEET_OK;
    t->why[0] = '\0';
    t->answered = 0;
    t->got_bytes = false;
}

__attribute__((format(printf, 3, 4)))
static void fail(struct fleet_target *t, enum fleet_fail how, const char *fmt, ...)
{
    va_list ap;

    t->fail = how;
    va_start(ap, fmt);
    vsnprintf(t->why, sizeof(t->why), fmt, ap);
    va_end(ap);
    t->state = S_DONE;
    if (t->fd >= 0)
        close(t->fd);
    t->fd = -1;
    t->reused = false;
    t->out_len = t->out_off = 0;
    linebuf_free(&t->in);
}

static void queue(struct fleet_target *t, const char *data, size_t len)
{
    char *nb = realloc(t->out, t->out_len + len);

    if (!nb)
        base_die_oom();
    t->out = nb;
    memcpy(t->out + t->out_len, data, len);
    t->out_len += len;
}

static void queue_calls(struct fleet_target *t, const struct fleet_call *calls, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        cJSON *req = cJSON_CreateObject();
        cJSON *params = calls[i].params ? cJSON_Duplicate(calls[i].params, 1)
                                        : cJSON_CreateObject();
        char *text;

        t->ids[i] = ++t->next_id;
        if (!req || !params || !cJSON_AddStringToObject(req, "jsonrpc", "2.0") ||
            !cJSON_AddNumberToObject(req, "id", t->ids[i]) ||
            !cJSON_AddStringToObject(req, "method", calls[i].method) ||
            !cJSON_AddItemToObject(req, "params", params))
            base_die_oom();
        text = cJSON_PrintUnformatted(req);
        cJSON_Delete(req);
        if (!text)
            base_die_oom();
        queue(t, text, strlen(text));
        queue(t, "\n", 1);
        cJSON_free(text);
    }
    t->ncalls = n;
    t->sent_ns = mono_ns();
    t->state = S_WAIT;
}

static void connected(struct fleet_target *t, const struct fleet_call *calls, size_t n)
{
    if (t->addr.hvsock) {
        char req[32];
        int l = snprintf(req, sizeof(req), "CONNECT %u\n", t->addr.hv_port);

        queue(t, req, (size_t)l);
        t->state = S_HANDSHAKE;
        return;
    }
    queue_calls(t, calls, n);
}

static void start_connect(struct fleet_target *t, const struct fleet_call *calls, size_t n)
{
    bool pending;

    t->fd = conn_connect_start(&t->addr, &pending);
    if (t->fd < 0) {
        if (errno == EAGAIN && t->addr.u.sa.sa_family == AF_UNIX) {
            t->state = S_RETRY;
            t->retry_ns = mono_ns() + RETRY_NS;
            return;
        }
        fail(t, FLEET_CONNECT, "unable to connect: %s", strerror(errno));
        return;
    }
    if (pending) {
        t->state = S_CONNECTING;
        return;
    }
    connected(t, calls, n);
}

/* One line from the server. */
static void on_line(struct fleet_target *t, char *line, size_t len,
                    const struct fleet_call *calls, size_t n)
{
    const char *end = NULL;
    cJSON *msg, *id, *err;

    if (t->state == S_HANDSHAKE) {
        if (strncmp(line, "OK", 2) == 0) {
            queue_calls(t, calls, n);
            return;
        }
        char said[201];
        print_safe_copy(said, sizeof(said), line);
        fail(t, FLEET_CONNECT, "handshake refused: %s", said);
        return;
    }
    if (len == 0)
        return;
    msg = cJSON_ParseWithLengthOpts(line, len + 1, &end, 1);
    if (!msg || end != line + len || !cJSON_IsObject(msg)) {
        cJSON_Delete(msg);
        fail(t, FLEET_PROTO, "bad reply: %s", "not a JSON object");
        return;
    }
    id = cJSON_GetObjectItemCaseSensitive(msg, "id");
    err = cJSON_GetObjectItemCaseSensitive(msg, "error");
    if (!id && cJSON_IsString(cJSON_GetObjectItemCaseSensitive(msg, "method"))) {
        cJSON_Delete(msg); /* a notification: not ours to show here */
        return;
    }
    for (size_t i = 0; i < t->ncalls; i++) {
        /* id null with an error: the server could not read the request's
         * id; it answers the oldest one still open (replies are in order). */
        bool match = cJSON_IsNumber(id) ? id->valuedouble == t->ids[i]
                                        : cJSON_IsNull(id) && err != NULL;

        if (t->reply[i] || !match)
            continue;
        if (!cJSON_GetObjectItemCaseSensitive(msg, "result") && !cJSON_IsObject(err)) {
            cJSON_Delete(msg);
            fail(t, FLEET_PROTO, "bad reply: %s", "neither result nor error");
            return;
        }
        t->reply[i] = msg;
        t->answered_ns = mono_ns();
        t->rtt_ms = (double)(t->answered_ns - t->sent_ns) / 1e6;
        if (++t->answered == t->ncalls)
            t->state = S_DONE; /* the connection stays for the next round */
        return;
    }
    cJSON_Delete(msg);
    fail(t, FLEET_PROTO, "bad reply: %s", "reply id does not match a request");
}

static void on_readable(struct fleet_target *t, const struct fleet_call *calls, size_t n)
{
    size_t space;
    ssize_t r;

    /* The handshake line is short; replies may be long. */
    t->in.max = t->state == S_HANDSHAKE ? HANDSHAKE_MAX : LINE_MAX_BYTES;
    space = linebuf_space(&t->in);
    if (space == 0)
        base_die_oom(); /* nothing pending is over max: the buffer could not grow */
    r = read(t->fd, linebuf_tail(&t->in), space);
    if (r < 0) {
        if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
            return;
        fail(t, FLEET_IO, "unable to read: %s", strerror(errno));
        return;
    }
    if (r == 0) {
        fail(t, FLEET_IO, "%s", t->state == S_HANDSHAKE
                                    ? "closed during the handshake (nothing listening on the port?)"
                                    : "closed the connection before the reply");
        return;
    }
    t->got_bytes = true;
    linebuf_commit(&t->in, (size_t)r);
    for (;;) {
        const char *l;
        size_t len;
        int got;

        t->in.max = t->state == S_HANDSHAKE ? HANDSHAKE_MAX : LINE_MAX_BYTES;
        got = linebuf_next(&t->in, &l, &len);
        if (got < 0) {
            fail(t, FLEET_PROTO, "bad reply: %s", "line too long");
            return;
        }
        if (got == 0)
            return;
        /* The terminator after the line is consumed: a NUL may go there
         * (as conn_read_line does). */
        ((char *)l)[len] = '\0';
        on_line(t, (char *)l, len, calls, n);
        /* Failed, or done: anything after the last reply waits for the
         * next round. */
        if (t->fd < 0 || t->state == S_DONE)
            return;
    }
}

static void on_writable(struct fleet_target *t, const struct fleet_call *calls, size_t n)
{
    ssize_t w;

    if (t->state == S_CONNECTING) {
        if (conn_connect_result(t->fd) != 0) {
            fail(t, FLEET_CONNECT, "unable to connect: %s", strerror(errno));
            return;
        }
        connected(t, calls, n);
    }
    if (t->out_off >= t->out_len)
        return;
    /* MSG_NOSIGNAL: a closed peer is an error to report, not SIGPIPE. */
    w = send(t->fd, t->out + t->out_off, t->out_len - t->out_off, MSG_NOSIGNAL);
    if (w < 0) {
        if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
            return;
        fail(t, FLEET_IO, "unable to send: %s", strerror(errno));
        return;
    }
    t->out_off += (size_t)w;
    if (t->out_off == t->out_len)
        t->out_off = t->out_len = 0;
}

static const char *waiting_for(const struct fleet_target *t)
{
    switch (t->state) {
    case S_RETRY:
    case S_CONNECTING:
        return "connecting";
    case S_HANDSHAKE:
        return "in the handshake";
    default:
        return "waiting for the reply";
    }
}

/* One socket per target: a large fleet needs more descriptors than the
 * usual soft limit of 1024. When the hard limit refuses, the targets past
 * it report EMFILE in their rows. */
static void room_for_fds(size_t n)
{
    struct rlimit rl;
    rlim_t want = (rlim_t)n + 32;

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= want)
        return;
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || want < rl.rlim_max ? want : rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        fprintf(stderr, "hearthctl: warning: unable to raise the open files limit: %s\n",
                strerror(errno));
}

int fleet_round(struct fleet *f, const struct fleet_call *calls, size_t ncalls, int timeout_ms)
{
    int64_t deadline = timeout_ms > 0 ? mono_ns() + (int64_t)timeout_ms * 1000000 : -1;
    struct pollfd *pfd;
    size_t *who;

    if (ncalls > FLEET_CALLS_MAX)
        ncalls = FLEET_CALLS_MAX;
    pfd = calloc(f->n ? f->n : 1, sizeof(*pfd));
    who = calloc(f->n ? f->n : 1, sizeof(*who));
    if (!pfd || !who)
        base_die_oom();
    room_for_fds(f->n);
    for (size_t i = 0; i < f->n; i++) {
        struct fleet_target *t = &f->t[i];

        clear_outcome(t);
        if (t->addr_errno) {
            t->fail = FLEET_CONNECT;
            t->state = S_DONE;
            if (t->addr_errno == ENAMETOOLONG)
                snprintf(t->why, sizeof(t->why), "unable to connect: %s", strerror(ENAMETOOLONG));
            else
                snprintf(t->why, sizeof(t->why),
                         "bad connect spec (want unix:PATH, vsock:CID:PORT or hvsock:UDS:PORT)");
            continue;
        }
        if (t->fd >= 0) {
            t->reused = true;
            queue_calls(t, calls, ncalls);
        } else {
            start_connect(t, calls, ncalls);
        }
    }
    for (;;) {
        size_t np = 0;
        int64_t now = mono_ns(), wake = deadline;
        bool retrying = false;
        int r, ms;

        for (size_t i = 0; i < f->n; i++) {
            struct fleet_target *t = &f->t[i];

            if (t->state == S_RETRY && now >= t->retry_ns)
                start_connect(t, calls, ncalls);
            if (t->state == S_RETRY) {
                retrying = true;
                if (wake < 0 || t->retry_ns < wake)
                    wake = t->retry_ns;
                continue;
            }
            if (t->state == S_DONE || t->fd < 0)
                continue;
            pfd[np].fd = t->fd;
            pfd[np].events = (short)(t->state == S_CONNECTING ? POLLOUT
                                     : POLLIN | (t->out_len > t->out_off ? POLLOUT : 0));
            pfd[np].revents = 0;
            who[np++] = i;
        }
        if (np == 0 && !retrying)
            break; /* nothing left to wait for */
        if (deadline >= 0 && now >= deadline)
            break;
        ms = wake < 0 ? -1
                      : (int)((wake - now + 999999) / 1000000 > INT_MAX
                                  ? INT_MAX
                                  : (wake - now + 999999) / 1000000);
        r = poll(pfd, np, ms);
        if (r < 0) {
            if (errno == EINTR && !interrupted)
                continue;
            if (errno != EINTR)
                fprintf(stderr, "hearthctl: unable to poll: %s\n", strerror(errno));
            break;
        }
        for (size_t k = 0; k < np; k++) {
            struct fleet_target *t = &f->t[who[k]];
            short ev = pfd[k].revents;
            bool was_reused = t->reused;

            if (!ev || t->fd < 0)
                continue;
            if (ev & POLLOUT || (t->state == S_CONNECTING && ev & (POLLERR | POLLHUP)))
                on_writable(t, calls, ncalls);
            if (t->fd >= 0 && t->state != S_CONNECTING && ev & (POLLIN | POLLHUP | POLLERR))
                on_readable(t, calls, ncalls);
            /* A connection kept from the last round that the server
             * closed meanwhile (idle eviction, a restart): connect again,
             * within the same deadline. */
            if (was_reused && t->fail == FLEET_IO && !t->got_bytes) {
                t->fail = FLEET_OK;
                t->why[0] = '\0';
                start_connect(t, calls, ncalls);
            }
        }
    }
    for (size_t i = 0; i < f->n; i++) {
        struct fleet_target *t = &f->t[i];

        if (t->state == S_DONE)
            continue;
        if (interrupted) {
            fail(t, FLEET_TIMEOUT, "%s", "interrupted");
            continue;
        }
        {
            char what[64];

            snprintf(what, sizeof(what), "%s", waiting_for(t));
            t->fail = FLEET_TIMEOUT;
            snprintf(t->why, sizeof(t->why), "timed out after %d ms %s", timeout_ms, what);
            /* Replies that come later must not answer the next round. */
            drop_conn(t);
            t->state = S_DONE;
        }
    }
    free(pfd);
    free(who);
    return interrupted ? -1 : 0;
}

const cJSON *fleet_result(const struct fleet_target *t, size_t i, const cJSON **error)
{
    const cJSON *res;

    *error = NULL;
    if (i >= FLEET_CALLS_MAX || !t->reply[i])
        return NULL;
    res = cJSON_GetObjectItemCaseSensitive(t->reply[i], "result");
    if (!res)
        *error = cJSON_GetObjectItemCaseSensitive(t->reply[i], "error");
    return res;
}

/* ---- one call, printed per target ----------------------------------- */

const char *fleet_fail_name(enum fleet_fail f)
{
    switch (f) {
    case FLEET_TIMEOUT:
        return "timeout";
    case FLEET_CONNECT:
        return "connect";
    case FLEET_IO:
        return "io";
    case FLEET_PROTO:
        return "protocol";
    default:
        return "ok";
    }
}

static void print_error(const struct fleet_target *t, const char *method, const cJSON *err)
{
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(err, "message");
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(err, "code");

    fputs("hearthctl: ", stderr);
    base_put_safe(stderr, t->spec);
    fprintf(stderr, ": unable to call %s: ", method);
    base_put_safe(stderr, cJSON_IsString(m) ? m->valuestring : "(no message)");
    if (cJSON_IsNumber(code) && fabs(code->valuedouble) < 9e15)
        fprintf(stderr, " (code %lld)", (long long)code->valuedouble);
    fputc('\n', stderr);
}

int fleet_call_print(struct fleet *f, const char *method, const cJSON *params, int timeout_ms,
                     bool json, fleet_print_fn print, void *ctx)
{
    struct fleet_call call = {.method = method, .params = params};
    cJSON *all = json ? cJSON_CreateArray() : NULL;
    int rc = 0;

    if (json && !all)
        base_die_oom();
    if (fleet_catch_sigint() != 0)
        return 2;
    fleet_round(f, &call, 1, timeout_ms);
    for (size_t i = 0; i < f->n; i++) {
        const struct fleet_target *t = &f->t[i];
        const cJSON *err, *res = fleet_result(t, 0, &err);
        int one = t->fail != FLEET_OK ? 2 : res ? 0 : 1;

        if (json) {
            cJSON *o = cJSON_CreateObject();

            if (!o || !cJSON_AddStringToObject(o, "target", t->spec))
                base_die_oom();
            cJSON_AddItemToArray(all, o);
            if (res) {
                cJSON_AddItemToObject(o, "result", cJSON_Duplicate(res, 1));
            } else if (err) {
                cJSON_AddItemToObject(o, "error", cJSON_Duplicate(err, 1));
            } else {
                cJSON_AddStringToObject(o, "failed", fleet_fail_name(t->fail));
                cJSON_AddStringToObject(o, "message", t->why);
            }
        } else {
            fputs(i ? "\n== " : "== ", stdout);
            base_put_safe(stdout, t->spec);
            fputs(" ==\n", stdout);
            if (res) {
                int p = print(ctx, t, res);

                one = p > one ? p : one;
            } else {
                /* stdout first, so the error lands under its heading. */
                fflush(stdout);
                if (err) {
                    print_error(t, method, err);
                } else {
                    fputs("hearthctl: ", stderr);
                    base_put_safe(stderr, t->spec);
                    fputs(": ", stderr);
                    base_put_safe(stderr, t->why);
                    fputc('\n', stderr);
                }
            }
        }
        /* 2 (no answer) outranks 1 (an error answer). */
        rc = one > rc ? one : rc;
    }
    if (json) {
        print_json(all, true);
        cJSON_Delete(all);
    }
    return rc;
}

/* One target's result through the command's printer, as for one target. */
static int print_one(void *ctx, const struct fleet_target *ft, const cJSON *result)
{
    struct ctl *t = ctx;

    t->conn.spec = ft->spec;
    t->rtt_ms = ft->rtt_ms;
    if (!t->cmd->print)
        return print_json(result, true);
    return t->cmd->print(t, result);
}

int fleet_run_one(struct ctl *t, struct fleet *f, cJSON *params)
{
    int rc;

    /* Following a stream stays a one-sandbox affair. */
    if (t->follow && t->cmd->notify) {
        fprintf(stderr, "hearthctl: following %s works on one sandbox: give one --connect\n",
                t->cmd->notify);
        rc = EXIT_USAGE;
    } else {
        /* --prometheus wins over --json, as for one target. */
        rc = fleet_call_print(f, t->method, params, t->timeout_ms,
                              t->json && !(t->cmd->print == print_metrics && t->arg), print_one, t);
    }
    cJSON_Delete(params);
    fleet_free(f);
    if (print_flush_stdout() != 0 && rc == 0)
        rc = EXIT_USAGE;
    return rc;
}

void fleet_free(struct fleet *f)
{
    for (size_t i = 0; i < f->n; i++) {
        struct fleet_target *t = &f->t[i];

        clear_outcome(t);
        drop_conn(t);
        free(t->spec);
        free(t->out);
    }
    free(f->t);
    memset(f, 0, sizeof(*f));
}
