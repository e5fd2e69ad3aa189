/* m_files_job: where a files.* call runs. A call whose paths can only
 * reach local filesystems runs at once in the loop. One that may reach a
 * share (fsclass.h: 9p, virtio-fs, FUSE, NFS..., whose server may stall
 * and leave every system call there blocked in the kernel) runs the very
 * same code in a forked child (childjob.h) with the files.timeout_ms
 * deadline; its reply is deferred until the child answers, and a child
 * past the deadline is killed and the call fails naming the path, the
 * deadline and the mount. */
#include "m_files.h"
#include "err.h"
#include "m_files_int.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cJSON.h>

#include "childjob.h"
#include "control.h"
#include "fsclass.h"
#include "hearth.h"
#include "jsonout.h"
#include "log.h"
#include "params.h"
#include "utf8.h"

/* A reply of a whole read chunk is ~350 KiB; a page of 1000 entries of
 * 255-byte names, every byte escaped as \u00XX, ~1.7 MiB. */
#define FILES_RESULT_MAX (2 * 1024 * 1024)

/* One method as routed: its work, its path parameters, and what its
 * resolution may reach beyond the paths themselves. */
struct route {
    method_fn now;
    bool follows;          /* takes "follow" */
    const char *paths[2];
    bool below;            /* looks at what is beneath the path (a listing) */
    const char *below_if;  /* ... when this boolean parameter is true */
    bool writes;           /* changes the tree: finishes even if the client goes */
    int (*keep)(void);     /* a descriptor of the loop's the work needs in a child */
};

struct fjob {
    struct childjob job;
    const struct route *route;
    cJSON *params;         /* the child's view of the request (not owned) */
    struct client *client; /* NULL once it went away */
    uint64_t ticket;
    char param[8];
    char path[160];
    struct fsclass_hit hit;
};

static struct fjob jobs[FILES_JOBS_MAX];
static bool hooked;

/* ---- in the child ---- */

static void put_all(int fd, const char *s, size_t n)
{
    if (childjob_write(fd, s, n) < 0)
        _exit(1); /* the loop went away: nobody to tell */
}

/* The method's own code, then its answer down the pipe: "R" and the
 * result as JSON text, or "E", the code, a newline and the message. */
static void child_run(int wfd, void *arg)
{
    struct fjob *j = arg;
    cJSON *result = NULL;
    struct rpc_error err = {0};

    int rc = j->route->now(NULL, j->params, &result, &err);
    if (rc == 0 && result) {
        char *text = result == rpc_empty_result() ? NULL : jsonout_print(result);
        if (text || result == rpc_empty_result()) {
            put_all(wfd, "R", 1);
            put_all(wfd, text ? text : "{}", text ? strlen(text) : 2);
            return;
        }
        rpc_error_set(&err, RPC_INTERNAL_ERROR, "out of memory");
    } else if (err.code == 0) {
        rpc_error_set(&err, RPC_INTERNAL_ERROR, "out of memory");
    }
    char head[24];
    int n = snprintf(head, sizeof(head), "E%d\n", err.code);
    put_all(wfd, head, (size_t)n);
    put_all(wfd, err.message, strlen(err.message));
}

/* ---- in the loop ---- */

static int64_t timeout_ms(void)
{
    return H.cfg ? H.cfg->files.timeout_ms : CONFIG_FILES_TIMEOUT_MS;
}

static void job_done(struct childjob *cj, enum childjob_end end, int status, const char *data,
                     size_t len)
{
    struct fjob *j = cj->ctx;
    uint64_t ticket = j->ticket;
    struct rpc_error e = {0};
    const char *where = j->hit.target[0] ? j->hit.target : "?";

    j->ticket = 0;
    j->client = NULL;
    j->params = NULL;
    if (end == CHILDJOB_TIMEOUT) {
        rpc_error_set(&e, RPC_ERR_FAILED,
                      "%s: %s: unable to finish the call: no answer from the %s filesystem at %s "
                      "within %lld ms (files.timeout_ms)",
                      j->param, j->path, j->hit.fstype, where, (long long)j->job.timeout_ms);
    } else if (end == CHILDJOB_TOO_BIG) {
        rpc_error_set(&e, RPC_INTERNAL_ERROR, "%s: %s: unable to finish the call: the answer was over %d bytes", j->param,
                      j->path, FILES_RESULT_MAX);
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || len < 1) {
        /* Killed because its client went away, or it failed. */
        rpc_error_set(&e, RPC_ERR_FAILED, "%s: %s: unable to finish the call: its process ended "
                      "without an answer (%s %d)", j->param, j->path,
                      WIFSIGNALED(status) ? "signal" : "status",
                      WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    } else if (data[0] == 'R') {
        if (control_complete_text(ticket, data + 1, len - 1))
            return;
        rpc_error_set(&e, RPC_INTERNAL_ERROR, "%s: %s: out of memory", j->param, j->path);
    } else {
        /* "E<code>\n<message>", from hearth's own code in the child. */
        const char *nl = memchr(data, '\n', len);
        char *end_code = NULL;
        long code = nl && data[0] == 'E' ? strtol(data + 1, &end_code, 10) : 0;
        if (!nl || end_code != nl || code == 0) {
            rpc_error_set(&e, RPC_INTERNAL_ERROR, "%s: %s: unable to finish the call: its process's answer "
                          "was unreadable",
                          j->param, j->path);
        } else {
            size_t ml = len - (size_t)(nl + 1 - data);
            e.code = (int)code;
            snprintf(e.message, sizeof(e.message), "%.*s",
                     (int)(ml < sizeof(e.message) ? ml : sizeof(e.message) - 1), nl + 1);
        }
    }
    control_complete(ticket, NULL, &e);
}

/* A client that goes away takes its reading calls with it (their answer
 * is for nobody); a call that changes the tree runs to its end (or its
 * deadline), so a write is never cut between its steps. */
static void client_gone(struct client *c)
{
    for (size_t i = 0; i < FILES_JOBS_MAX; i++) {
        struct fjob *j = &jobs[i];
        if (j->client != c)
            continue;
        j->client = NULL;
        if (!j->route->writes && childjob_running(&j->job) && !j->job.killing)
            kill(j->job.pid, SIGKILL);
    }
}

/* A slot neither running a call nor holding a killed child that the
 * kernel has not let go of yet (stuck on the share). */
static struct fjob *free_slot(size_t *stuck)
{
    struct fjob *f = NULL;
    *stuck = 0;
    for (size_t i = 0; i < FILES_JOBS_MAX; i++) {
        if (jobs[i].job.killed > 0)
            (*stuck)++;
        else if (!f && !childjob_running(&jobs[i].job))
            f = &jobs[i];
    }
    return f;
}

static int start_job(struct client *c, cJSON *params, const struct route *r,
                     const struct fpath *first, const struct fsclass_hit *hit,
                     struct rpc_error *err)
{
    size_t stuck;
    struct err why;

    if (!hooked)
        hooked = control_on_close(client_gone);
    struct fjob *j = free_slot(&stuck);
    if (!j) {
        rpc_error_set(err, RPC_ERR_BUSY,
                      "%s: %.*s: unable to start the call: %d calls on shares already running "
                      "(%zu stuck on a hung filesystem); try again later",
                      first->param, utf8_clip(first->abs, 160), first->abs, FILES_JOBS_MAX, stuck);
        return -1;
    }
    j->route = r;
    j->params = params;
    j->client = c;
    j->hit = *hit;
    snprintf(j->param, sizeof(j->param), "%s", first->param);
    snprintf(j->path, sizeof(j->path), "%.*s", utf8_clip(first->abs, sizeof(j->path) - 1),
             first->abs);
    j->job.ctx = j;
    /* A child stuck on a hung share holds this descriptor too until the
     * kernel lets it go: for envd.watch, the role's inotify instance,
     * which then outlives its role process by that long (memory only). */
    j->job.keep = r->keep ? r->keep() : 0;
    if (j->job.keep < 0)
        j->job.keep = 0;
    if (childjob_start(&j->job, timeout_ms(), FILES_RESULT_MAX, child_run, j, job_done, &why) < 0) {
        j->params = NULL;
        j->client = NULL;
        rpc_error_set(err, RPC_ERR_FAILED, "%s: %s: unable to start the call: %s", j->param,
                      j->path, why.msg);
        return -1;
    }
    /* The child has its own copy of params; the loop's is freed with the
     * request once this returns. */
    j->params = NULL;
    j->ticket = control_defer(c);
    return 0;
}

/* Runs r for this request where it belongs. Anything wrong with the
 * path parameters is left to the method itself, which reports it before
 * touching any file. */
static int route_call(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err,
                      const struct route *r)
{
    struct fpath p[2];
    struct rpc_error ignored;
    struct fsclass_hit hit;
    bool follow = false, below = r->below;
    unsigned flags = 0;
    int far = 0;

    /* No client (a direct call, as the fuzzer makes): nothing to defer. */
    if (!c)
        return r->now(c, params, result, err);
    if (r->follows && m_files_param_flag(params, "follow", &follow, &ignored) < 0)
        return r->now(c, params, result, err);
    if (r->below_if && m_files_param_flag(params, r->below_if, &below, &ignored) < 0)
        return r->now(c, params, result, err);
    flags = (follow ? FSCLASS_FOLLOW : 0) | (below ? FSCLASS_BELOW : 0);
    size_t n = 0;
    for (; n < 2 && r->paths[n]; n++)
        if (m_files_get_path(params, r->paths[n], &p[n], &ignored) < 0)
            return r->now(c, params, result, err);
    for (size_t i = 0; i < n && !far; i++)
        far = fsclass_path(p[i].abs, flags, &hit);
    if (!far)
        return r->now(c, params, result, err);
    return start_job(c, params, r, &p[0], &hit, err);
}

static const struct route r_stat = {m_files_stat_now, true, {"path"}, false, NULL, false, NULL};
static const struct route r_list = {m_files_list_now, true, {"path"}, true, NULL, false, NULL};
static const struct route r_read = {m_files_read_now, true, {"path"}, false, NULL, false, NULL};
static const struct route r_hash = {m_files_hash_now, true, {"path"}, false, NULL, false, NULL};
static const struct route r_write = {m_files_write_now, false, {"path"}, false, NULL, true, NULL};
static const struct route r_rename = {m_files_rename_now, false, {"from", "to"}, false, NULL, true, NULL};
static const struct route r_mkdir = {m_files_mkdir_now, false, {"path"}, false, NULL, true, NULL};
static const struct route r_remove = {m_files_remove_now, false, {"path"}, false, "recursive", true, NULL};
/* Its work and descriptor are the caller's (m_files_watch). */
static struct route r_watch = {NULL, true, {"path"}, false, NULL, false, NULL};

int m_files_stat(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    return route_call(c, params, result, err, &r_stat);
}

int m_files_list(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    return route_call(c, params, result, err, &r_list);
}

int m_files_read(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    return route_call(c, params, result, err, &r_read);
}

int m_files_hash(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    return route_call(c, params, result, err, &r_hash);
}

int m_files_write(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    return route_call(c, params, result, err, &r_write);
}

int m_files_rename(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    return route_call(c, params, result, err, &r_rename);
}

int m_files_mkdir(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    return route_call(c, params, result, err, &r_mkdir);
}

int m_files_remove(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    return route_call(c, params, result, err, &r_remove);
}

int m_files_watch(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err,
                  int (*now)(struct client *c, cJSON *params, cJSON **result,
                             struct rpc_error *err),
                  int (*keep)(void))
{
    r_watch.now = now;
    r_watch.keep = keep;
    return route_call(c, params, result, err, &r_watch);
}
