/* envd's HTTP routes beside /files in the role process: POST /init (the
 * host's settings: a token, the default user and directory, variables
 * for every process), GET /envs (those variables) and GET /metrics (the
 * machine's CPU, memory and disk figures in envd's shape). A route file
 * like envd_ops.c: the loop runs it, and it calls hearth through the
 * links (envd_link.c) and answers through envd_conn.c, nothing above.
 *
 * /init changes nothing here first: hearth checks the token rule and
 * keeps the settings (envd.init), so a role process started again has
 * them; the role applies them once hearth said yes.
 *
 * /metrics never blocks the loop: /proc/stat and /proc/meminfo are
 * kernel files that answer at once, but statvfs of "/" may sit on a
 * share whose server stalled, so it runs in a child with a deadline;
 * one such child at a time, and none while one that missed its
 * deadline has not ended (its figures are then the last known). */
#include "envd_role.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <cJSON.h>

#include "jsonout.h"
#include "kfile.h"

#define DISK_DEADLINE_S 2.0
#define METRICS_WAITERS_MAX 1024 /* envd.max_connections' top */

/* ---------------- POST /init ---------------- */

static const cJSON *member(const cJSON *o, const char *camel, const char *snake)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, camel);
    return v ? v : cJSON_GetObjectItemCaseSensitive(o, snake);
}

static void op_json_free(void *op) { cJSON_Delete(op); }

static void init_done(void *ctx, cJSON *res, int code, const char *msg)
{
    struct conn *c = ctx;
    if (!res) {
        /* envd's statuses: 401 for the token rule, 400 for a bad value. */
        int status = code == -32003 ? 401 : code == -32602 ? 400 : 500;
        conn_http_error(c, status, "%s", msg ? msg : "refused");
        return;
    }
    /* hearth said yes, and sends envd.config on link 0 too; applied here
     * as well so the next request already sees it, whatever link the
     * answer came on. */
    const cJSON *body = c->op;
    const cJSON *tok = member(body, "accessToken", "access_token");
    const cJSON *user = member(body, "defaultUser", "default_user");
    const cJSON *cwd = member(body, "defaultWorkdir", "default_workdir");
    const cJSON *envs = member(body, "envVars", "env_vars");
    if (cJSON_IsString(tok) && tok->valuestring[0])
        snprintf(RC.token, sizeof(RC.token), "%s", tok->valuestring);
    if (cJSON_IsString(user) && user->valuestring[0])
        snprintf(RC.user, sizeof(RC.user), "%s", user->valuestring);
    if (cJSON_IsString(cwd) && cwd->valuestring[0])
        snprintf(RC.cwd, sizeof(RC.cwd), "%s", cwd->valuestring);
    if (!RC.envs)
        RC.envs = cJSON_CreateObject();
    const cJSON *v;
    cJSON_ArrayForEach(v, envs) {
        cJSON_DeleteItemFromObjectCaseSensitive(RC.envs, v->string);
        cJSON_AddStringToObject(RC.envs, v->string, v->valuestring);
    }
    conn_respond(c, 204, NULL, NULL, 0);
}

void api_post_init(struct conn *c)
{
    const char *b = bytebuf_head(&c->body);
    size_t n = bytebuf_pending(&c->body);
    cJSON *body = n ? cJSON_ParseWithLength(b, n) : cJSON_CreateObject();
    if (!cJSON_IsObject(body)) {
        cJSON_Delete(body);
        conn_http_error(c, 400, "the body is not a JSON object");
        return;
    }
    cJSON *p = cJSON_CreateObject();
    if (!p) {
        cJSON_Delete(body);
        conn_http_error(c, 500, "out of memory");
        return;
    }
    if (c->req.has_token)
        cJSON_AddStringToObject(p, "presented", c->req.token);
    /* timestamp, hyperloopIP and volumeMounts have no meaning here: the
     * clock is the host's (sandbox.init's time), hearth's mounts are its
     * config's. */
    static const struct { const char *camel, *snake, *to; } take[] = {
        {"accessToken", "access_token", "access_token"},
        {"envVars", "env_vars", "env_vars"},
        {"defaultUser", "default_user", "user"},
        {"defaultWorkdir", "default_workdir", "cwd"},
    };
    for (size_t i = 0; i < sizeof(take) / sizeof(take[0]); i++) {
        const cJSON *v = member(body, take[i].camel, take[i].snake);
        if (v && !cJSON_IsNull(v))
            cJSON_AddItemToObject(p, take[i].to, cJSON_Duplicate(v, 1));
    }
    c->op = body;
    c->op_free = op_json_free;
    if (link_call("envd.init", p, init_done, c) < 0)
        conn_http_error(c, 503, "hearth did not take the call");
}

/* ---------------- GET /envs ---------------- */

void api_envs(struct conn *c)
{
    char *t = RC.envs ? jsonout_print(RC.envs) : NULL;
    if (t)
        conn_respond(c, 200, "application/json", t, strlen(t));
    else
        conn_respond(c, 200, "application/json", "{}", 2);
    cJSON_free(t);
}

/* ---------------- GET /metrics ---------------- */

static struct {
    pid_t pid;           /* the statvfs child, 0 when none */
    int fd;              /* its pipe */
    bool late;           /* it missed its deadline and was killed */
    ev_io io;
    ev_timer deadline;
    uint64_t disk_total, disk_used;
    uint64_t cpu_total, cpu_idle; /* the previous /proc/stat sample */
    double cpu_pct;
    struct conn *waiting[METRICS_WAITERS_MAX];
    size_t n_waiting;
    bool init;
} M; /* zero-filled, so its waiters' array takes no room in the file */

static void cpu_sample(void)
{
    char buf[512];
    if (kfile_read("/proc/stat", buf, sizeof(buf)) <= 0)
        return;
    /* "cpu" and up to eight counts, read as sscanf's "cpu %lu %lu ..."
     * would (strtoull: no other caller in hearth needs scanf's 4 KiB). */
    uint64_t f[8] = {0};
    if (strncmp(buf, "cpu", 3) != 0)
        return;
    const char *p = buf + 3;
    int got = 0;
    for (; got < 8; got++) {
        char *end;
        f[got] = strtoull(p, &end, 10);
        if (end == p)
            break;
        p = end;
    }
    if (got < 4)
        return;
    uint64_t total = 0, idle = f[3] + f[4];
    for (int i = 0; i < 8; i++)
        total += f[i];
    /* Busy share since the previous sample (role start, or the previous
     * call); the same figure again when no tick passed between. */
    if (total > M.cpu_total && idle >= M.cpu_idle) {
        uint64_t dt = total - M.cpu_total, di = idle - M.cpu_idle;
        M.cpu_pct = di >= dt ? 0 : (double)(dt - di) * 100. / (double)dt;
        M.cpu_pct = (double)(int64_t)(M.cpu_pct * 100. + 0.5) / 100.;
    }
    M.cpu_total = total;
    M.cpu_idle = idle;
}

static void mem_figures(uint64_t *total, uint64_t *avail)
{
    char buf[4096];
    *total = *avail = 0;
    if (kfile_read("/proc/meminfo", buf, sizeof(buf)) <= 0)
        return;
    const char *p = strstr(buf, "MemTotal:");
    if (p)
        *total = strtoull(p + 9, NULL, 10) * 1024;
    p = strstr(buf, "MemAvailable:");
    if (p)
        *avail = strtoull(p + 13, NULL, 10) * 1024;
}

static void answer_all(void)
{
    cpu_sample();
    uint64_t mt, ma;
    mem_figures(&mt, &ma);
    uint64_t mu = mt > ma ? mt - ma : 0;
    /* The CPUs this process may run on, as sysconf(_SC_NPROCESSORS_ONLN)
     * counts them in musl (sysconf is 1 KiB of tables in a static binary). */
    cpu_set_t set;
    int cpus = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "ts", (double)time(NULL));
    cJSON_AddNumberToObject(o, "cpu_count", (double)(cpus > 0 ? cpus : 1));
    cJSON_AddNumberToObject(o, "cpu_used_pct", M.cpu_pct);
    cJSON_AddNumberToObject(o, "mem_total", (double)mt);
    cJSON_AddNumberToObject(o, "mem_used", (double)mu);
    cJSON_AddNumberToObject(o, "mem_total_mib", (double)(mt >> 20));
    cJSON_AddNumberToObject(o, "mem_used_mib", (double)(mu >> 20));
    cJSON_AddNumberToObject(o, "disk_used", (double)M.disk_used);
    cJSON_AddNumberToObject(o, "disk_total", (double)M.disk_total);
    char *t = jsonout_print(o);
    cJSON_Delete(o);
    size_t n = M.n_waiting;
    M.n_waiting = 0;
    for (size_t i = 0; i < n; i++) {
        struct conn *c = M.waiting[i];
        if (!c)
            continue;
        c->op = NULL;
        c->op_free = NULL;
        if (t)
            conn_respond(c, 200, "application/json", t, strlen(t));
        else
            conn_http_error(c, 500, "out of memory");
    }
    cJSON_free(t);
}

static void probe_over(void)
{
    ev_io_stop(role_loop, &M.io);
    ev_timer_stop(role_loop, &M.deadline);
    close(M.fd);
    M.fd = -1;
    M.pid = 0;
    M.late = false;
}

static void probe_io(struct ev_loop *loop, ev_io *w, int revents)
{
    uint64_t v[2];
    ssize_t n = read(M.fd, v, sizeof(v));
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    bool late = M.late;
    /* The child is gone (its figures, or EOF); SIGCHLD is ignored, so
     * the kernel reaps it. */
    probe_over();
    if (n == (ssize_t)sizeof(v) && !late) {
        M.disk_total = v[0];
        M.disk_used = v[1];
    }
    if (!late)
        answer_all();
}

static void probe_deadline(struct ev_loop *loop, ev_timer *w, int revents)
{
    /* statvfs is stuck (a stalled share under "/"): the callers get the
     * last figures; the child is killed while its pipe shows it has not
     * ended (so the pid is still its own), and no other starts until it
     * has. */
    char b;
    if (read(M.fd, &b, 1) == 0) {
        probe_over();
        answer_all();
        return;
    }
    kill(M.pid, SIGKILL);
    M.late = true;
    answer_all();
}

static void waiter_free(void *op)
{
    for (size_t i = 0; i < M.n_waiting; i++)
        if (M.waiting[i] == op)
            M.waiting[i] = NULL;
}

void api_metrics(struct conn *c)
{
    if (!M.init) {
        M.init = true;
        ev_io_init(&M.io, probe_io, -1, EV_READ);
        ev_init(&M.deadline, probe_deadline);
    }
    if (M.n_waiting >= METRICS_WAITERS_MAX) {
        conn_http_error(c, 503, "too many /metrics calls wait");
        return;
    }
    if (M.late) {
        /* The last stuck child has not ended: no second one. */
        M.waiting[M.n_waiting++] = c;
        answer_all();
        return;
    }
    M.waiting[M.n_waiting++] = c;
    c->op = c;
    c->op_free = waiter_free;
    if (M.pid)
        return; /* joins the probe under way */
    int p[2];
    if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0) {
        answer_all();
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        struct statvfs s;
        uint64_t v[2] = {0, 0};
        if (statvfs("/", &s) == 0) {
            v[0] = (uint64_t)s.f_blocks * s.f_frsize;
            v[1] = (uint64_t)(s.f_blocks - s.f_bfree) * s.f_frsize;
        }
        ssize_t w = write(p[1], v, sizeof(v));
        _exit(w == (ssize_t)sizeof(v) ? 0 : 1);
    }
    close(p[1]);
    if (pid < 0) {
        close(p[0]);
        answer_all();
        return;
    }
    M.pid = pid;
    M.fd = p[0];
    ev_io_set(&M.io, M.fd, EV_READ);
    ev_io_start(role_loop, &M.io);
    ev_timer_set(&M.deadline, DISK_DEADLINE_S, 0.);
    ev_timer_start(role_loop, &M.deadline);
}

void api_init(void)
{
    /* The statvfs children are reaped by the kernel. */
    signal(SIGCHLD, SIG_IGN);
    M.fd = -1;
    cpu_sample();
}
