#include "envd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cJSON.h>
#include <ev.h>

#include "accounts.h"
#include "config.h"
#include "control.h"
#include "hearth.h"
#include "jsonout.h"
#include "lifeline.h"
#include "log.h"
#include "m_files.h"
#include "m_files_int.h"
#include "params.h"
#include "pidreaper.h"
#include "reaper.h"
#include "redact.h"
#include "shutdown.h"
#include "sysids.h"
#include "utf8.h"

#define RESTART_MIN_MS 500
#define RESTART_MAX_MS 30000
/* A role process that ran this long before it ended starts again at once. */
#define RESTART_RESET_MS 60000
/* The unprivileged identity the role process takes when hearth is root. */
#define ENVD_UID 65534
#define ENVD_GID 65534

#ifndef AT_EMPTY_PATH
#define AT_EMPTY_PATH 0x1000
#endif

/* What a link may call: the host's process and file methods, nothing
 * that changes the sandbox, its services or hearth. */
static const char *const link_methods[] = {
    "ping",        "exec.start",   "exec.input",   "exec.resize", "exec.signal",
    "exec.wait",   "exec.list",    "exec.attach",  "files.stat",  "files.list",
    "files.read",  "files.hash",   "files.write",  "files.rename", "files.mkdir",
    "files.remove", "envd.watch", "envd.init", NULL};

/* What POST /init may add to the processes' environment. */
#define INIT_ENVS_MAX 128
#define INIT_ENVS_BYTES (64 * 1024)

static struct {
    const struct envd_cfg *cfg;
    bool on, stopping;
    pid_t pid;
    struct client *links[ENVD_LINKS];
    unsigned restarts;
    int64_t started_ms, delay_ms;
    ev_timer retry;
    char error[200];
    char token[ENVD_TOKEN_MAX];
    /* envd's POST /init: the default user and directory it set ("" =
     * the config's) and the variables every process gets. */
    char user[ENVD_NAME_MAX], cwd[256];
    cJSON *envs;
    size_t envs_bytes;
} E; /* zero-filled: its buffers take no room in the file */
/* Kept out of E, whose only non-zero start they are. */
static int listen_fd = -1;
static int role_ifd = -1; /* the role process's inotify instance (hearth's copy) */

static void spawn(void);

bool envd_enabled(void) { return E.on; }

static void drop_links(void)
{
    for (int i = 0; i < ENVD_LINKS; i++) {
        control_detach(E.links[i]);
        E.links[i] = NULL;
    }
}

static void schedule(int64_t ms)
{
    ev_timer_stop(H.loop, &E.retry);
    ev_timer_set(&E.retry, (double)ms / 1000., 0.);
    ev_timer_start(H.loop, &E.retry);
}

static void retry_cb(struct ev_loop *loop, ev_timer *w, int revents) { spawn(); }

static int open_listener(void)
{
    const struct envd_cfg *c = E.cfg;
    struct sockaddr_storage ss;
    socklen_t sl;
    int one = 1;

    memset(&ss, 0, sizeof(ss));
    if (strchr(c->host, ':')) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons(c->port);
        inet_pton(AF_INET6, c->host, &a->sin6_addr);
        sl = sizeof(*a);
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_port = htons(c->port);
        inet_pton(AF_INET, c->host, &a->sin_addr);
        sl = sizeof(*a);
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        snprintf(E.error, sizeof(E.error), "unable to create the socket: %s", strerror(errno));
        return -1;
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, 128) < 0) {
        snprintf(E.error, sizeof(E.error), "unable to listen on %s port %u: %s", c->host,
                 (unsigned)c->port, strerror(errno));
        close(fd);
        return -1;
    }
    listen_fd = fd;
    log_info("envd: listening on %s port %u", c->host, (unsigned)c->port);
    return 0;
}

/* The settings the role process needs, and the accounts as hearth read
 * them at boot: the role resolves users from the same snapshot as
 * exec.start does, and names the owners of the files it lists. */
static cJSON *config_json(void)
{
    const struct envd_cfg *c = E.cfg;
    const struct accounts *a = accounts_snapshot();
    cJSON *p = cJSON_CreateObject();
    if (!p)
        return NULL;
    cJSON_AddStringToObject(p, "user", E.user[0] ? E.user : c->user);
    cJSON_AddStringToObject(p, "cwd", E.cwd[0] ? E.cwd : c->cwd);
    cJSON_AddItemToObject(p, "envs", E.envs ? cJSON_Duplicate(E.envs, 1) : cJSON_CreateObject());
    cJSON_AddStringToObject(p, "access_token", E.token);
    cJSON *al = cJSON_AddObjectToObject(p, "users");
    for (size_t i = 0; al && i < c->n_users; i++)
        cJSON_AddStringToObject(al, c->users[i].from, c->users[i].to);
    cJSON_AddNumberToObject(p, "max_header_bytes", (double)c->max_header_bytes);
    cJSON_AddNumberToObject(p, "max_connections", (double)c->max_connections);
    cJSON_AddNumberToObject(p, "max_streams", (double)c->max_streams);
    cJSON_AddNumberToObject(p, "max_upload_bytes", (double)c->max_upload_bytes);
    cJSON_AddNumberToObject(p, "watcher_idle_ms", (double)c->watcher_idle_ms);
    cJSON *u = cJSON_AddArrayToObject(p, "passwd");
    for (size_t i = 0; u && i < a->n_users; i++) {
        cJSON *e = cJSON_CreateArray();
        if (!e)
            break;
        cJSON_AddItemToArray(e, cJSON_CreateString(a->users[i].name));
        cJSON_AddItemToArray(e, cJSON_CreateNumber(a->users[i].uid));
        cJSON_AddItemToArray(e, cJSON_CreateNumber(a->users[i].gid));
        cJSON_AddItemToArray(e, cJSON_CreateString(a->users[i].home ? a->users[i].home : "/"));
        cJSON_AddItemToArray(u, e);
    }
    cJSON *g = cJSON_AddArrayToObject(p, "group");
    for (size_t i = 0; g && i < a->n_groups; i++) {
        cJSON *e = cJSON_CreateArray();
        if (!e)
            break;
        cJSON_AddItemToArray(e, cJSON_CreateString(a->groups[i].name));
        cJSON_AddItemToArray(e, cJSON_CreateNumber(a->groups[i].gid));
        cJSON_AddItemToArray(g, e);
    }
    return p;
}

/* The settings go down link 0 as one notification, "envd.config". */
static void send_config(void)
{
    if (!E.links[0])
        return;
    cJSON *msg = cJSON_CreateObject(), *p = config_json();
    if (!msg || !p) {
        cJSON_Delete(msg);
        cJSON_Delete(p);
        log_error("envd: unable to send the settings: out of memory");
        return;
    }
    cJSON_AddStringToObject(msg, "jsonrpc", "2.0");
    cJSON_AddStringToObject(msg, "method", "envd.config");
    cJSON_AddItemToObject(msg, "params", p);
    char *t = jsonout_print(msg);
    cJSON_Delete(msg);
    if (!t) {
        log_error("envd: unable to send the settings: out of memory");
        return;
    }
    size_t n = strlen(t);
    char *line = malloc(n + 1);
    if (line) {
        memcpy(line, t, n);
        line[n] = '\n';
        if (control_send(E.links[0], line, n + 1) < 0)
            log_warn("envd: unable to send the settings to the role process");
        explicit_bzero(line, n + 1);
        free(line);
    }
    explicit_bzero(t, n);
    cJSON_free(t);
}

static void close_watches(void)
{
    if (role_ifd >= 0)
        close(role_ifd);
    role_ifd = -1;
}

int envd_watch_fd(void) { return role_ifd; }

static int files_watch_now(struct client *c, cJSON *params, cJSON **result,
                           struct rpc_error *err);

static bool is_link(const struct client *c)
{
    bool link = false;
    for (int i = 0; c && i < ENVD_LINKS; i++)
        link |= c == E.links[i];
    return link;
}

/* Equal, in time that depends on the set token's length only. */
static bool token_eq(const cJSON *v)
{
    if (!cJSON_IsString(v))
        return false;
    const char *t = v->valuestring;
    size_t n = strlen(E.token), m = strlen(t);
    unsigned diff = (unsigned)(n ^ m);
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)E.token[i] ^ (unsigned char)(i < m ? t[i] : 0);
    return diff == 0;
}

static bool account_known(const char *name)
{
    for (size_t i = 0; i < E.cfg->n_users; i++)
        if (!strcmp(E.cfg->users[i].from, name)) {
            name = E.cfg->users[i].to;
            break;
        }
    uid_t uid;
    gid_t gid;
    char home[16];
    for (const char *p = name; *p; p++)
        if (*p < '0' || *p > '9')
            return accounts_user(accounts_snapshot(), name, &uid, &gid, home, sizeof(home)) == 0;
    return false; /* a number is no account name */
}

int envd_method_init(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    static const char *const known[] = {"presented", "access_token", "env_vars", "user", "cwd",
                                        NULL};
    if (!is_link(c)) {
        rpc_error_set(err, RPC_METHOD_NOT_FOUND,
                      "envd.init: only the envd role process calls it (envd's POST /init)");
        return -1;
    }
    if (params_only(params, known, err) < 0)
        return -1;
    const cJSON *presented = cJSON_GetObjectItemCaseSensitive(params, "presented");
    const cJSON *tok = cJSON_GetObjectItemCaseSensitive(params, "access_token");
    const cJSON *envs = cJSON_GetObjectItemCaseSensitive(params, "env_vars");
    const cJSON *user = cJSON_GetObjectItemCaseSensitive(params, "user");
    const cJSON *cwd = cJSON_GetObjectItemCaseSensitive(params, "cwd");
    /* With a token set, the request must present it: in X-Access-Token
     * (presented) or as the body's accessToken (envd's own rule). So a
     * token is replaced only by whoever holds the one in force. */
    if (E.token[0] && !token_eq(presented) && !token_eq(tok)) {
        rpc_error_set(err, RPC_ERR_STATE, "envd.init: an access token is set: present it to change anything");
        return -1;
    }
    if (tok && !cJSON_IsString(tok)) {
        rpc_error_set(err, RPC_INVALID_PARAMS, "access_token: expected a string");
        return -1;
    }
    const char *t = tok ? tok->valuestring : "";
    size_t tn = strlen(t);
    bool ok = tn < ENVD_TOKEN_MAX;
    for (size_t i = 0; ok && i < tn; i++)
        ok = (unsigned char)t[i] > 0x20 && (unsigned char)t[i] < 0x7f;
    if (!ok) {
        rpc_error_set(err, RPC_INVALID_PARAMS,
                      "access_token: expected at most %d printable ASCII characters without blanks",
                      ENVD_TOKEN_MAX - 1);
        return -1;
    }
    if (user && (!cJSON_IsString(user) || strlen(user->valuestring) >= ENVD_NAME_MAX ||
                 (user->valuestring[0] && !account_known(user->valuestring)))) {
        rpc_error_set(err, RPC_INVALID_PARAMS, "user: no such account in the image (envd.users maps names)");
        return -1;
    }
    if (cwd && (!cJSON_IsString(cwd) || strlen(cwd->valuestring) >= sizeof(E.cwd) ||
                (cwd->valuestring[0] && cwd->valuestring[0] != '/'))) {
        rpc_error_set(err, RPC_INVALID_PARAMS, "cwd: expected an absolute path under %zu bytes",
                      sizeof(E.cwd));
        return -1;
    }
    /* The variables are merged into what earlier calls set, within the
     * bounds, or not at all. */
    cJSON *merged = E.envs ? cJSON_Duplicate(E.envs, 1) : cJSON_CreateObject();
    if (!merged)
        return -1;
    if (envs && !cJSON_IsObject(envs)) {
        cJSON_Delete(merged);
        rpc_error_set(err, RPC_INVALID_PARAMS, "env_vars: expected an object of strings");
        return -1;
    }
    const cJSON *v;
    cJSON_ArrayForEach(v, envs) {
        if (!cJSON_IsString(v) || !v->string[0] || strchr(v->string, '=')) {
            cJSON_Delete(merged);
            rpc_error_set(err, RPC_INVALID_PARAMS,
                          "env_vars: expected names without '=' and string values");
            return -1;
        }
        cJSON_DeleteItemFromObjectCaseSensitive(merged, v->string);
        cJSON_AddStringToObject(merged, v->string, v->valuestring);
    }
    size_t bytes = 0;
    int count = cJSON_GetArraySize(merged);
    cJSON_ArrayForEach(v, merged)
        bytes += strlen(v->string) + strlen(v->valuestring) + 2;
    if (count > INIT_ENVS_MAX || bytes > INIT_ENVS_BYTES) {
        cJSON_Delete(merged);
        rpc_error_set(err, RPC_INVALID_PARAMS,
                      "env_vars: at most %d variables and %d bytes in all", INIT_ENVS_MAX,
                      INIT_ENVS_BYTES);
        return -1;
    }
    cJSON_Delete(E.envs);
    E.envs = merged;
    E.envs_bytes = bytes;
    if (user && user->valuestring[0])
        snprintf(E.user, sizeof(E.user), "%s", user->valuestring);
    if (cwd && cwd->valuestring[0])
        snprintf(E.cwd, sizeof(E.cwd), "%s", cwd->valuestring);
    /* An empty token changes nothing: clearing one is the host's
     * (sandbox.init), never a network client's. */
    if (tn && !token_eq(tok))
        envd_set_token(t);
    else
        send_config();
    cJSON *r = cJSON_CreateObject();
    if (!r)
        return -1;
    cJSON_AddBoolToObject(r, "access_token", E.token[0] != 0);
    cJSON_AddStringToObject(r, "user", E.user[0] ? E.user : E.cfg->user);
    cJSON_AddStringToObject(r, "cwd", E.cwd[0] ? E.cwd : E.cfg->cwd);
    cJSON_AddNumberToObject(r, "env_vars", count);
    *result = r;
    return 0;
}

int envd_method_watch(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    if (!is_link(c)) {
        rpc_error_set(err, RPC_METHOD_NOT_FOUND,
                      "envd.watch: only the envd role process calls it (its inotify instance)");
        return -1;
    }
    return m_files_watch(c, params, result, err, files_watch_now, envd_watch_fd);
}

/* What envd reports (fsnotify's set): create (and a move in), write,
 * remove (of an entry or the directory itself), rename (a move out, or
 * of the directory), chmod (any attribute change). */
#define WATCH_MASK                                                                                 \
    (IN_CREATE | IN_MOVED_TO | IN_MODIFY | IN_DELETE | IN_DELETE_SELF | IN_MOVED_FROM |           \
     IN_MOVE_SELF | IN_ATTRIB | IN_ONLYDIR)

/* Adds a watch on a directory to the role process's inotify instance,
 * whose events the role reads; the reply is the watch's number in that
 * instance. Runs in the loop, or in a files job's child for a path that
 * may reach a share (the child keeps the instance open: route r_watch). inotify takes a path, so a path resolved without
 * following links is handed over as the directory's descriptor through
 * /proc/self/fd, which resolves to the open directory itself. */
static int files_watch_now(struct client *c, cJSON *params, cJSON **result,
                           struct rpc_error *err)
{
    static const char *const known[] = {"path", "follow", NULL};
    struct fpath p;
    bool follow;
    char leaf[NAME_MAX + 1], via[64];
    int wd, e, ifd = envd_watch_fd();

    if (params_only(params, known, err) < 0 || m_files_get_path(params, "path", &p, err) < 0 ||
        m_files_param_flag(params, "follow", &follow, err) < 0)
        return -1;
    if (ifd < 0) {
        rpc_error_set(err, RPC_ERR_STATE, "no envd role process to watch for");
        return -1;
    }
    if (follow || m_files_is_root(&p)) {
        wd = inotify_add_watch(ifd, follow ? p.abs : "/", WATCH_MASK);
        e = errno;
    } else {
        int dfd = m_files_open_parent(&p, leaf, err);
        if (dfd < 0)
            return -1;
        int fd = openat(dfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
        e = errno;
        close(dfd);
        if (fd < 0)
            return m_files_path_error(err, &p, e, e == ELOOP ? "a symbolic link (not followed)" : NULL);
        snprintf(via, sizeof(via), "/proc/self/fd/%d", fd);
        wd = inotify_add_watch(ifd, via, WATCH_MASK);
        e = errno;
        close(fd);
    }
    if (wd < 0) {
        if (e == ENOSPC) {
            rpc_error_set(err, RPC_ERR_BUSY, "%s: %.*s: no more watches (fs.inotify.max_user_watches)",
                          p.param, utf8_clip(p.abs, 160), p.abs);
            return -1;
        }
        return m_files_path_error(err, &p, e, NULL);
    }
    cJSON *r = cJSON_CreateObject();
    if (!r)
        return -1;
    cJSON_AddStringToObject(r, "path", p.abs);
    cJSON_AddNumberToObject(r, "wd", wd);
    *result = r;
    return 0;
}

static void exited(void *ctx, pid_t pid, int wstatus)
{
    int64_t ran = mono_ms() - E.started_ms;
    E.pid = 0;
    drop_links();
    /* Its watches go with the instance. */
    close_watches();
    if (WIFEXITED(wstatus))
        snprintf(E.error, sizeof(E.error), "the role process exited with code %d",
                 WEXITSTATUS(wstatus));
    else
        snprintf(E.error, sizeof(E.error), "the role process was killed by signal %d",
                 WTERMSIG(wstatus));
    if (E.stopping || shutdown_in_progress())
        return;
    E.delay_ms = ran >= RESTART_RESET_MS ? RESTART_MIN_MS
                 : E.delay_ms ? (E.delay_ms * 2 > RESTART_MAX_MS ? RESTART_MAX_MS : E.delay_ms * 2)
                              : RESTART_MIN_MS;
    log_warn("envd: %s; restarting in %lld ms", E.error, (long long)E.delay_ms);
    E.restarts++;
    schedule(E.delay_ms);
}

/* In the child: the listener at ENVD_LISTEN_FD, the links after it,
 * nothing else of hearth's; hearth's identity dropped when it is root;
 * then hearth's binary again as ENVD_ARGV0 (none of hearth's memory). */
static void __attribute__((noreturn)) child(int *theirs)
{
    int moved[2 + ENVD_LINKS];
    lifeline_hold();
    setsid();
    /* Above every target first, so no dup2 below lands on a source. */
    moved[0] = fcntl(listen_fd, F_DUPFD, 64);
    for (int i = 0; i < ENVD_LINKS; i++)
        moved[1 + i] = fcntl(theirs[i], F_DUPFD, 64);
    moved[1 + ENVD_LINKS] = role_ifd >= 0 ? fcntl(role_ifd, F_DUPFD, 64) : -1;
    for (int i = 0; i < 1 + ENVD_LINKS; i++)
        if (moved[i] < 0 || dup2(moved[i], ENVD_LISTEN_FD + i) < 0)
            _exit(127);
    /* Without an instance the role answers WatchDir unavailable. */
    if (moved[1 + ENVD_LINKS] < 0)
        close(ENVD_WATCH_FD);
    else if (dup2(moved[1 + ENVD_LINKS], ENVD_WATCH_FD) < 0)
        _exit(127);
    int nul = open("/dev/null", O_RDWR);
    if (nul >= 0)
        dup2(nul, 0);
    /* hearth's binary, for the exec, just after the links (close-on-exec):
     * opened for reading here, while still root, because an O_PATH
     * descriptor (pidreaper's) is refused to the unprivileged exec. */
    int exe = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    if (exe < 0)
        exe = pidreaper_exe_fd();
    int exe_at = ENVD_WATCH_FD + 1;
    if (exe >= 0 && (exe = fcntl(exe, F_DUPFD, 64)) >= 0 &&
        (exe = dup3(exe, exe_at, O_CLOEXEC)) < 0)
        exe = -1;
    syscall(SYS_close_range, exe_at + 1, ~0U, 0);
    if (geteuid() == 0) {
        if (sysids_setgroups(0, NULL) < 0 || sysids_setresgid(ENVD_GID, ENVD_GID, ENVD_GID) < 0 ||
            sysids_setresuid(ENVD_UID, ENVD_UID, ENVD_UID) < 0)
            _exit(126);
    }
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    /* The id change cleared the death signal: ask again. */
    lifeline_hold();
    char *argv[] = {(char *)ENVD_ARGV0, NULL};
    char *envp[] = {NULL};
    if (exe >= 0)
        syscall(SYS_execveat, exe, "", argv, envp, AT_EMPTY_PATH);
    /* Without the exec the role runs in this copy of hearth, which holds
     * nothing the role could not read anyway (it is no longer root). */
    dprintf(2, "hearth-envd: unable to exec hearth's binary (%s); running in the forked copy\n",
            exe < 0 ? "no descriptor" : strerror(errno));
    _exit(envd_role_main(1, argv));
}

static void spawn(void)
{
    int pairs[ENVD_LINKS][2];
    int theirs[ENVD_LINKS];
    int made = 0;

    if (E.stopping || shutdown_in_progress())
        return;
    if (listen_fd < 0 && open_listener() < 0) {
        log_warn("envd: %s; retrying", E.error);
        schedule(RESTART_MAX_MS / 3);
        return;
    }
    for (; made < ENVD_LINKS; made++)
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pairs[made]) < 0)
            break;
    if (made < ENVD_LINKS) {
        snprintf(E.error, sizeof(E.error), "unable to make its links: %s", strerror(errno));
        goto fail;
    }
    for (int i = 0; i < ENVD_LINKS; i++)
        theirs[i] = pairs[i][1];
    close_watches();
    role_ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (role_ifd < 0)
        log_warn("envd: no inotify instance (%s): WatchDir is unavailable", strerror(errno));
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(E.error, sizeof(E.error), "unable to fork: %s", strerror(errno));
        goto fail;
    }
    if (pid == 0)
        child(theirs);
    for (int i = 0; i < ENVD_LINKS; i++) {
        close(pairs[i][1]);
        fcntl(pairs[i][0], F_SETFL, O_NONBLOCK);
        E.links[i] = control_attach(pairs[i][0], "envd", link_methods);
        if (!E.links[i]) {
            close(pairs[i][0]);
            log_error("envd: unable to attach link %d", i);
        }
    }
    E.pid = pid;
    E.started_ms = mono_ms();
    E.error[0] = 0;
    if (reaper_watch(pid, exited, NULL) < 0)
        log_error("envd: unable to watch pid %d", (int)pid);
    send_config();
    log_info("envd: role process %d started", (int)pid);
    return;
fail:
    for (int i = 0; i < made; i++) {
        close(pairs[i][0]);
        close(pairs[i][1]);
    }
    log_warn("envd: %s; retrying", E.error);
    schedule(RESTART_MAX_MS / 3);
}

void envd_listen(const struct config *cfg)
{
    if (!cfg->envd.enabled)
        return;
    E.cfg = &cfg->envd;
    E.on = true;
    if (open_listener() < 0)
        log_warn("envd: %s; retrying", E.error);
}

void envd_start(const struct config *cfg)
{
    if (!cfg->envd.enabled)
        return;
    E.cfg = &cfg->envd;
    E.on = true;
    snprintf(E.token, sizeof(E.token), "%s", cfg->envd.access_token);
    if (E.token[0]) {
        const char *why = redact_add_value(E.token);
        if (why)
            log_warn("envd: the access token is not redacted: %s", why);
    }
    ev_init(&E.retry, retry_cb);
    spawn();
}

void envd_stop(void)
{
    E.stopping = true;
    if (!E.on)
        return;
    ev_timer_stop(H.loop, &E.retry);
    if (E.pid > 0)
        kill(E.pid, SIGKILL);
    drop_links();
    close_watches();
}

void envd_set_token(const char *token)
{
    snprintf(E.token, sizeof(E.token), "%s", token);
    if (E.token[0]) {
        const char *why = redact_add_value(E.token);
        if (why)
            log_warn("envd: the access token is not redacted: %s", why);
    }
    log_info("envd: access token %s", E.token[0] ? "set" : "cleared");
    send_config();
}

cJSON *envd_status_json(void)
{
    if (!E.on)
        return NULL;
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    char listen[96];
    snprintf(listen, sizeof(listen), strchr(E.cfg->host, ':') ? "tcp:[%s]:%u" : "tcp:%s:%u",
             E.cfg->host, (unsigned)E.cfg->port);
    cJSON_AddStringToObject(o, "listen", listen);
    cJSON_AddStringToObject(o, "state", E.pid > 0 ? "running" : "restarting");
    cJSON_AddNumberToObject(o, "pid", (double)E.pid);
    cJSON_AddNumberToObject(o, "restarts", (double)E.restarts);
    cJSON_AddBoolToObject(o, "access_token", E.token[0] != 0);
    if (E.error[0])
        cJSON_AddStringToObject(o, "error", E.error);
    return o;
}
