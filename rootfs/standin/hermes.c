/* A stand-in for Hermes Agent's gateway (and for hermes-web-ui), baked
 * into the test image where the real, Python, agent cannot be installed.
 * It follows the process contract docs/hermes.md describes, point by
 * point, so the VM tests exercise that contract:
 *
 *   hermes gateway run --external-supervisor
 *     - refuses to start without --external-supervisor (or one of the
 *       supervisor markers Hermes itself honours), exit 78: the real
 *       gateway would start, and then answer an in-chat /restart by
 *       spawning a detached replacement outside the supervisor;
 *     - refuses to run as root unless HERMES_ALLOW_ROOT_GATEWAY is set
 *       (exit 1), as the real gateway does;
 *     - outside a container (no /.dockerenv, /run/.containerenv or
 *       $container) sets $HERMES_HOME to mode 0700 at every start,
 *       HERMES_HOME_MODE (octal) overriding the mode;
 *     - loads $HERMES_HOME/.env itself, its values overriding the process
 *       environment (hermes_cli/env_loader.py loads it with override=True);
 *       a malformed line is skipped with a warning, never fatal;
 *     - checks $HERMES_HOME/config.yaml and exits 78 (EX_CONFIG) when it
 *       cannot be used;
 *     - serves GET /health and /v1/health on API_SERVER_HOST:API_SERVER_PORT
 *       (127.0.0.1:8642) only when API_SERVER_ENABLED is true and, as the
 *       gateway does since v0.16, API_SERVER_KEY is set (else the API
 *       server is not started, with a warning);
 *     - SIGUSR1 or an in-chat /restart: no new turns, the turns in flight
 *       drain (bounded by agent.restart_drain_timeout, default 180 s), then
 *       exit 75 (EX_TEMPFAIL) for the supervisor to start it again;
 *     - SIGTERM/SIGINT: exit 1 after writing "stop";
 *     - lists its skills as Hermes does: skills/<skill>/SKILL.md and
 *       skills/<category>/<skill>/SKILL.md, links followed, dot-entries
 *       (.hub, .bundled_manifest) skipped.
 *
 *   hermes-web-ui PORT
 *     the foreground form only; state (server.log) in $HOME/.hermes-web-ui.
 *
 * Test hooks that are not Hermes's: a line protocol on HERMES_PORT (9119)
 * standing in for a chat platform and for inspection, and SIGHUP re-reading
 * the skills (the real gateway has no SIGHUP handler):
 *   health                 ok
 *   state                  {"pid":..,"uid":..,"gid":..,"skills":[..],"api_port":..,..}
 *   note TEXT              appends TEXT to both history files; ok
 *   env NAME               the variable's value, or "-"
 *   chat /restart          the in-chat restart; "ok restarting"
 *   chat TEXT              ok
 *   turn SECONDS           a turn in flight for SECONDS; ok
 *   eat MIB                allocates and touches MIB MiB; ok
 *   news                   the resume file's line ($HEARTH_RESUME_FILE, default
 *                          /run/hearth-news/resume), or "error: ..."
 *   connect ADDR PORT      ok MS LINE-FROM-PEER | refused MS | timeout MS | error ..
 *   GET /...               an HTTP/1.0 200 reply
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define EXIT_RESTART 75 /* EX_TEMPFAIL: restart me (gateway/restart.py) */
#define EXIT_CONFIG 78  /* EX_CONFIG: do not restart me */

#define MAX_CLIENTS 16
#define LINE_MAX_LEN 1024
#define MAX_SKILLS 256
#define MAX_TURNS 16
#define FILE_MAX (64 * 1024)

enum kind { K_LINE, K_HTTP };

struct client {
    int fd;
    enum kind kind;
    size_t len;
    char buf[LINE_MAX_LEN];
};

static const char *home;
static struct client clients[MAX_CLIENTS];
static unsigned hups, notes;
static char skills[MAX_SKILLS][128];
static size_t nskills;
static struct timespec started;
static int api_port;
static double drain_timeout_s = 180.0;
static int draining;
static const char *drain_reason = "";
static long long drain_deadline_ms;
static long long turn_end_ms[MAX_TURNS];

static long long mono_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static int truthy(const char *v)
{
    return v && (!strcasecmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") ||
                 !strcasecmp(v, "on"));
}

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
    char msg[LINE_MAX_LEN], line[LINE_MAX_LEN + 64], path[PATH_MAX];
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

/* Reads a whole small file; NULL if it is missing or unreadable, with
 * errno set. */
static char *slurp(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    char *buf = malloc(FILE_MAX + 1);
    size_t n = 0;
    if (!buf) {
        close(fd);
        errno = ENOMEM;
        return NULL;
    }
    while (n < FILE_MAX) {
        ssize_t r = read(fd, buf + n, FILE_MAX - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = 0;
    *len = n;
    return buf;
}

/* ---- $HERMES_HOME/.env ------------------------------------------------ */

/* KEY=VALUE lines, "export " allowed, a value in single or double quotes
 * taken as it is. Loaded over the process environment, as Hermes's
 * load_hermes_dotenv(override=True) does; a line it cannot read is
 * skipped, as python-dotenv skips it. */
static void load_dotenv(void)
{
    char path[PATH_MAX];
    size_t len;
    snprintf(path, sizeof(path), "%s/.env", home);
    char *text = slurp(path, &len);
    if (!text)
        return;
    unsigned lineno = 0, loaded = 0;
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        lineno++;
        line[strcspn(line, "\r")] = 0;
        while (*line == ' ' || *line == '\t')
            line++;
        if (!*line || *line == '#')
            continue;
        if (!strncmp(line, "export ", 7))
            line += 7;
        char *eq = strchr(line, '=');
        char *key_end = eq;
        while (key_end && key_end > line && (key_end[-1] == ' ' || key_end[-1] == '\t'))
            key_end--;
        int good = eq && key_end > line;
        for (char *k = line; good && k < key_end; k++)
            if (!(isalnum((unsigned char)*k) || *k == '_'))
                good = 0;
        if (!good) {
            fprintf(stderr, "hermes: %s:%u: not KEY=VALUE, skipped\n", path, lineno);
            continue;
        }
        *key_end = 0;
        char *v = eq + 1;
        while (*v == ' ' || *v == '\t')
            v++;
        if (*v == '"' || *v == '\'') {
            char *close_q = strrchr(v + 1, *v);
            if (!close_q) {
                fprintf(stderr, "hermes: %s:%u: unterminated quote, skipped\n", path, lineno);
                continue;
            }
            *close_q = 0;
            v++;
        } else {
            char *hash = strstr(v, " #");
            if (hash)
                *hash = 0;
            for (char *e = v + strlen(v); e > v && (e[-1] == ' ' || e[-1] == '\t'); e--)
                e[-1] = 0;
        }
        if (setenv(line, v, 1) == 0)
            loaded++;
    }
    free(text);
    printf("hermes: %u variables from %s\n", loaded, path);
    fflush(stdout);
}

/* ---- who and where ---------------------------------------------------- */

static int in_container(void)
{
    const char *c = getenv("container");
    return (c && *c) || access("/.dockerenv", F_OK) == 0 ||
           access("/run/.containerenv", F_OK) == 0;
}

/* Hermes keeps its home private: 0700 (or HERMES_HOME_MODE) at every
 * start, except in a container, where the image decides. */
static void home_mode(void)
{
    const char *m = getenv("HERMES_HOME_MODE");
    mode_t mode = 0700;
    if (m && *m) {
        char *end;
        long v = strtol(m, &end, 8);
        if (*end || v < 0 || v > 07777) {
            fprintf(stderr, "hermes: HERMES_HOME_MODE \"%s\" is not an octal mode; using 0700\n", m);
        } else {
            mode = (mode_t)v;
        }
    }
    if (in_container())
        return;
    if (chmod(home, mode) < 0)
        fprintf(stderr, "hermes: unable to set the mode of %s: %s\n", home, strerror(errno));
}

/* ---- $HERMES_HOME/config.yaml ---------------------------------------- */

/* A small YAML reader: block mappings by indentation, scalars, comments,
 * lists and flow collections closed on their line. Enough to find
 * model.provider, model.base_url, model.default and
 * agent.restart_drain_timeout, and to refuse a file Hermes could not parse
 * either. Errors name the line. */
struct yaml_check {
    char section[64];
    char provider[128], base_url[512], model_default[256], model_scalar[256];
    int model_is_map;
    char drain[32];
};

static void unquote(char *v)
{
    size_t n = strlen(v);
    if (n >= 2 && (v[0] == '"' || v[0] == '\'') && v[n - 1] == v[0]) {
        memmove(v, v + 1, n - 2);
        v[n - 2] = 0;
    }
}

static int flow_balanced(const char *v)
{
    int depth = 0;
    char quote = 0;
    for (; *v; v++) {
        if (quote) {
            if (*v == quote)
                quote = 0;
            continue;
        }
        if (*v == '"' || *v == '\'')
            quote = *v;
        else if (*v == '[' || *v == '{')
            depth++;
        else if (*v == ']' || *v == '}')
            depth--;
        if (depth < 0)
            return 0;
    }
    return depth == 0 && !quote;
}

static int check_config(char *err, size_t errlen, struct yaml_check *yc)
{
    char path[PATH_MAX];
    size_t len;
    snprintf(path, sizeof(path), "%s/config.yaml", home);
    memset(yc, 0, sizeof(*yc));
    char *text = slurp(path, &len);
    if (!text) {
        if (errno == ENOENT)
            return 0; /* Hermes runs on its defaults without one */
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (memchr(text, 0, len)) {
        snprintf(err, errlen, "%s: a NUL byte", path);
        free(text);
        return -1;
    }
    unsigned lineno = 0;
    int rc = 0;
    for (char *line = text, *next; line && *line && rc == 0; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        lineno++;
        line[strcspn(line, "\r")] = 0;
        size_t indent = strspn(line, " ");
        char *p = line + indent;
        if (*p == '\t') {
            snprintf(err, errlen, "%s:%u: a tab in the indentation", path, lineno);
            rc = -1;
            break;
        }
        if (!*p || *p == '#' || !strcmp(p, "---"))
            continue;
        if (*p == '-' && (p[1] == ' ' || !p[1])) {
            if (indent == 0) {
                snprintf(err, errlen, "%s:%u: a list where a mapping was expected", path, lineno);
                rc = -1;
            }
            continue;
        }
        /* key: value, the key possibly quoted */
        char *colon = NULL;
        char quote = 0;
        for (char *c = p; *c; c++) {
            if (quote) {
                if (*c == quote)
                    quote = 0;
            } else if (*c == '"' || *c == '\'') {
                quote = *c;
            } else if (*c == ':' && (c[1] == ' ' || !c[1])) {
                colon = c;
                break;
            }
        }
        if (!colon) {
            snprintf(err, errlen, "%s:%u: expected \"key: value\"", path, lineno);
            rc = -1;
            break;
        }
        *colon = 0;
        char *key = p, *v = colon + 1;
        while (*v == ' ')
            v++;
        if (*v != '"' && *v != '\'') {
            char *hash = strstr(v, " #");
            if (hash)
                *hash = 0;
        }
        for (char *e = v + strlen(v); e > v && e[-1] == ' '; e--)
            e[-1] = 0;
        if (!flow_balanced(v)) {
            snprintf(err, errlen, "%s:%u: unclosed bracket or quote in the value of %s", path, lineno,
                     key);
            rc = -1;
            break;
        }
        unquote(key);
        unquote(v);
        if (indent == 0) {
            snprintf(yc->section, sizeof(yc->section), "%s", key);
            if (!strcmp(key, "model")) {
                yc->model_is_map = !*v;
                snprintf(yc->model_scalar, sizeof(yc->model_scalar), "%s", v);
            }
        } else if (!strcmp(yc->section, "model")) {
            if (!strcmp(key, "provider"))
                snprintf(yc->provider, sizeof(yc->provider), "%s", v);
            else if (!strcmp(key, "base_url"))
                snprintf(yc->base_url, sizeof(yc->base_url), "%s", v);
            else if (!strcmp(key, "default"))
                snprintf(yc->model_default, sizeof(yc->model_default), "%s", v);
        } else if (!strcmp(yc->section, "agent") && !strcmp(key, "restart_drain_timeout")) {
            snprintf(yc->drain, sizeof(yc->drain), "%s", v);
        }
    }
    free(text);
    if (rc)
        return rc;
    if (yc->model_is_map) {
        if (!strcmp(yc->provider, "custom") &&
            strncmp(yc->base_url, "http://", 7) && strncmp(yc->base_url, "https://", 8)) {
            snprintf(err, errlen, "%s: model.provider is custom but model.base_url \"%s\" is not an "
                     "http(s) URL", path, yc->base_url);
            return -1;
        }
        if (!yc->model_default[0] && yc->base_url[0]) {
            snprintf(err, errlen, "%s: model.base_url is set but model.default names no model", path);
            return -1;
        }
    }
    return 0;
}

/* ---- skills ------------------------------------------------------------ */

static int has_marker(const char *dir)
{
    char p[PATH_MAX];
    struct stat st;
    snprintf(p, sizeof(p), "%s/SKILL.md", dir);
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static int listable(const char *name)
{
    /* Hidden names (.hub, .bundled_manifest) are not skills; quotes would
     * break the state line. */
    return name[0] != '.' && !strpbrk(name, "\"\\");
}

/* Hermes's layout: skills/<skill>/SKILL.md, or one level down under a
 * category, skills/<category>/<skill>/SKILL.md; links are followed, so a
 * link whose target is gone is nothing. */
static void scan_skills(void)
{
    char dir[PATH_MAX], p[PATH_MAX], q[PATH_MAX];
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
        if (!listable(e->d_name))
            continue;
        snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
        if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode))
            continue;
        if (has_marker(p)) {
            snprintf(skills[nskills++], sizeof(skills[0]), "%s", e->d_name);
            continue;
        }
        DIR *c = opendir(p);
        if (!c)
            continue;
        struct dirent *f;
        while ((f = readdir(c)) && nskills < MAX_SKILLS) {
            if (!listable(f->d_name))
                continue;
            snprintf(q, sizeof(q), "%s/%s", p, f->d_name);
            if (stat(q, &st) == 0 && S_ISDIR(st.st_mode) && has_marker(q))
                snprintf(skills[nskills++], sizeof(skills[0]), "%.60s/%.60s", e->d_name, f->d_name);
        }
        closedir(c);
    }
    closedir(d);
    printf("hermes: %zu skills\n", nskills);
    fflush(stdout);
}

/* ---- sockets ----------------------------------------------------------- */

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
    long long t0 = mono_ms();
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
    long long ms = mono_ms() - t0;
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
        snprintf(out, sizeof(out), "ok %lld %s\n", ms, got);
    } else if (err == ECONNREFUSED) {
        snprintf(out, sizeof(out), "refused %lld\n", ms);
    } else if (err == ETIMEDOUT) {
        snprintf(out, sizeof(out), "timeout %lld\n", ms);
    } else {
        snprintf(out, sizeof(out), "error %lld %s\n", ms, strerror(err));
    }
    close(s);
    reply(fd, out);
}

static unsigned turns_in_flight(void)
{
    unsigned n = 0;
    long long now = mono_ms();
    for (int i = 0; i < MAX_TURNS; i++)
        if (turn_end_ms[i] > now)
            n++;
    return n;
}

/* Hermes's request_restart(via_service=True): refuse new turns, let the
 * ones in flight finish within the drain budget, then exit 75. */
static void request_restart(const char *why)
{
    if (draining)
        return;
    draining = 1;
    drain_reason = why;
    drain_deadline_ms = mono_ms() + (long long)(drain_timeout_s * 1000.0);
    history("draining reason=%s turns=%u timeout=%.0fs", why, turns_in_flight(), drain_timeout_s);
}

static void do_state(int fd)
{
    char out[LINE_MAX_LEN * 8];
    struct timespec now;
    size_t n;

    clock_gettime(CLOCK_REALTIME, &now);
    n = (size_t)snprintf(out, sizeof(out),
                         "{\"pid\":%d,\"uid\":%d,\"gid\":%d,\"home\":\"%s\",\"started\":%lld,"
                         "\"now\":%lld.%03ld,\"mono_ms\":%lld,\"hups\":%u,\"notes\":%u,\"api_port\":%d,"
                         "\"draining\":%s,\"turns\":%u,\"skills\":[",
                         (int)getpid(), (int)getuid(), (int)getgid(), home,
                         (long long)started.tv_sec, (long long)now.tv_sec,
                         now.tv_nsec / 1000000, mono_ms(), hups, notes, api_port,
                         draining ? "true" : "false", turns_in_flight());
    for (size_t i = 0; i < nskills && n < sizeof(out) - 200; i++)
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
    } else if (!strcmp(line, "chat /restart")) {
        /* The gateway's /restart command, as a chat platform would bring
         * it. Supervised, it drains and exits 75. */
        request_restart("chat");
        reply(fd, "ok restarting\n");
    } else if (!strncmp(line, "chat ", 5)) {
        reply(fd, draining ? "error: draining, no new turns\n" : "ok\n");
    } else if (!strncmp(line, "turn ", 5)) {
        long secs = strtol(line + 5, NULL, 10);
        int slot = -1;
        long long now = mono_ms();
        for (int i = 0; i < MAX_TURNS && slot < 0; i++)
            if (turn_end_ms[i] <= now)
                slot = i;
        if (draining) {
            reply(fd, "error: draining, no new turns\n");
        } else if (secs <= 0 || secs > 3600 || slot < 0) {
            reply(fd, "error: turn SECONDS (1..3600), at most 16 at once\n");
        } else {
            turn_end_ms[slot] = now + secs * 1000;
            history("turn %lds", secs);
            reply(fd, "ok\n");
        }
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
    } else if (!strcmp(line, "news")) {
        /* What an agent does after a pause: read the resume news. */
        const char *path = getenv("HEARTH_RESUME_FILE");
        char out[LINE_MAX_LEN];
        FILE *f = fopen(path ? path : "/run/hearth-news/resume", "re");
        if (!f || !fgets(out, sizeof(out), f))
            snprintf(out, sizeof(out), "error: %s\n", strerror(errno));
        if (f)
            fclose(f);
        reply(fd, out);
    } else if (sscanf(line, "connect %127s %d", a, &port) == 2) {
        do_connect(fd, a, port);
    } else {
        reply(fd, "error: unknown command\n");
    }
}

/* The API server's public routes: /health and /v1/health answer
 * {"status": "ok"}; everything else needs the bearer key the stand-in
 * does not model, and is a 404 here. */
static void http_answer(int fd, const char *req, const char *body_ok)
{
    char method[16] = "", target[256] = "";
    if (sscanf(req, "%15s %255s", method, target) != 2) {
        reply(fd, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        return;
    }
    target[strcspn(target, "?")] = 0;
    char out[512];
    if (!strcmp(method, "GET") && (!strcmp(target, "/health") || !strcmp(target, "/v1/health") ||
                                   body_ok)) {
        const char *body = body_ok ? body_ok : "{\"status\": \"ok\"}";
        snprintf(out, sizeof(out),
                 "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                 "Connection: close\r\n\r\n%s", strlen(body), body);
    } else {
        snprintf(out, sizeof(out),
                 "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    }
    reply(fd, out);
}

static int listen_on(const char *addr, int port)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};

    if (s < 0)
        return -1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1 ||
        bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(s, 16) < 0) {
        int e = errno;
        close(s);
        errno = e;
        return -1;
    }
    return s;
}

static void accept_client(int lfd, enum kind kind)
{
    int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (c < 0)
        return;
    for (int i = 0; i < MAX_CLIENTS; i++)
        if (clients[i].fd < 0) {
            clients[i].fd = c;
            clients[i].kind = kind;
            clients[i].len = 0;
            return;
        }
    close(c);
}

static void drop(struct client *cl)
{
    close(cl->fd);
    cl->fd = -1;
}

/* Reads what a client sent: lines for the test port, a request head for
 * HTTP (answered once the blank line is in, so closing never discards
 * unread request bytes into a reset). */
static void client_input(struct client *cl, const char *http_body)
{
    ssize_t r = read(cl->fd, cl->buf + cl->len, sizeof(cl->buf) - 1 - cl->len);
    if (r <= 0) {
        drop(cl);
        return;
    }
    cl->len += (size_t)r;
    cl->buf[cl->len] = 0;
    if (cl->kind == K_HTTP) {
        if (strstr(cl->buf, "\r\n\r\n") || strstr(cl->buf, "\n\n")) {
            http_answer(cl->fd, cl->buf, http_body);
            shutdown(cl->fd, SHUT_WR);
            drop(cl);
        } else if (cl->len == sizeof(cl->buf) - 1) {
            reply(cl->fd, "HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\n\r\n");
            drop(cl);
        }
        return;
    }
    char *nl;
    while (cl->fd >= 0 && (nl = memchr(cl->buf, '\n', cl->len))) {
        *nl = 0;
        if (nl > cl->buf && nl[-1] == '\r')
            nl[-1] = 0;
        command(cl->fd, cl->buf);
        size_t used = (size_t)(nl + 1 - cl->buf);
        memmove(cl->buf, nl + 1, cl->len - used);
        cl->len -= used;
    }
    if (cl->fd >= 0 && cl->len == sizeof(cl->buf) - 1)
        drop(cl);
}

/* ---- hermes-web-ui ----------------------------------------------------- */

static int web_ui_main(int argc, char **argv)
{
    const char *cmd = argc > 1 ? argv[1] : "start";
    if (!strcmp(cmd, "-v") || !strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        printf("hermes-web-ui stand-in\n");
        return 0;
    }
    char *end;
    long p = strtol(cmd, &end, 10);
    if (end == cmd || *end || p < 1 || p > 65535) {
        /* start (also what no argument means), restart and update detach
         * a server and return: no supervisor could follow that. */
        fprintf(stderr, "hermes-web-ui: \"%s\": this stand-in runs only in the foreground, as "
                "\"hermes-web-ui PORT\" (\"start\" would detach the server)\n", cmd);
        return 2;
    }
    int port = (int)p;
    const char *h = getenv("HOME");
    char dir[PATH_MAX], log[PATH_MAX + 16], line[128];
    /* Its HOME may be a directory the home template did not have yet. */
    if (h && *h && mkdir(h, 0700) < 0 && errno != EEXIST) {
        fprintf(stderr, "hermes-web-ui: unable to make %s: %s\n", h, strerror(errno));
        return 1;
    }
    snprintf(dir, sizeof(dir), "%s/.hermes-web-ui", h && *h ? h : "/root");
    if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
        fprintf(stderr, "hermes-web-ui: unable to make %s: %s\n", dir, strerror(errno));
        return 1;
    }
    snprintf(log, sizeof(log), "%s/server.log", dir);
    snprintf(line, sizeof(line), "start pid=%d port=%d\n", (int)getpid(), port);
    append(log, line);

    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    signal(SIGPIPE, SIG_IGN);
    int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
    int lfd = listen_on("127.0.0.1", port);
    if (sfd < 0 || lfd < 0) {
        fprintf(stderr, "hermes-web-ui: unable to listen on port %d: %s\n", port, strerror(errno));
        return 1;
    }
    printf("hermes-web-ui: listening on 127.0.0.1:%d, state in %s\n", port, dir);
    fflush(stdout);
    for (int i = 0; i < MAX_CLIENTS; i++)
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
                append(log, "stop\n");
                return 0;
            }
            if (map[k] == -2)
                accept_client(lfd, K_HTTP);
            else
                client_input(&clients[map[k]], "hermes-web-ui stand-in\n");
        }
    }
}

/* ---- hermes gateway run ------------------------------------------------ */

static int usage(void)
{
    fprintf(stderr, "usage: hermes gateway run --external-supervisor\n"
                    "(this stand-in of Hermes Agent runs only its gateway)\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *base = strrchr(argv[0], '/');
    base = base ? base + 1 : argv[0];
    if (!strcmp(base, "hermes-web-ui"))
        return web_ui_main(argc, argv);

    if (argc < 3 || strcmp(argv[1], "gateway") || strcmp(argv[2], "run"))
        return usage();
    int external = 0;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--external-supervisor"))
            external = 1;
        else if (strcmp(argv[i], "--replace") && strcmp(argv[i], "--accept-hooks"))
            return usage();
    }

    home = getenv("HERMES_HOME");
    if (!home || !*home)
        home = "/root/.hermes";
    clock_gettime(CLOCK_REALTIME, &started);
    load_dotenv();
    if (geteuid() == 0 && !truthy(getenv("HERMES_ALLOW_ROOT_GATEWAY"))) {
        fprintf(stderr, "hermes: refusing to run the gateway as root; run it as an unprivileged "
                        "user, or set HERMES_ALLOW_ROOT_GATEWAY=1\n");
        return 1;
    }
    home_mode();

    /* gateway/restart.py is_gateway_supervisor_process(): the flag sets
     * HERMES_GATEWAY_EXTERNAL_SUPERVISOR; systemd's INVOCATION_ID and the
     * image's s6 marker count too. */
    if (external)
        setenv("HERMES_GATEWAY_EXTERNAL_SUPERVISOR", "1", 1);
    const char *xpc = getenv("XPC_SERVICE_NAME");
    int supervised = truthy(getenv("HERMES_GATEWAY_EXTERNAL_SUPERVISOR")) ||
                     getenv("INVOCATION_ID") || getenv("HERMES_S6_SUPERVISED_CHILD") ||
                     (xpc && *xpc && strcmp(xpc, "0"));
    if (!supervised) {
        fprintf(stderr, "hermes: gateway run without --external-supervisor: an in-chat /restart "
                        "would start a detached gateway outside the supervisor; refusing "
                        "(exit %d)\n", EXIT_CONFIG);
        return EXIT_CONFIG;
    }

    char err[PATH_MAX + 256];
    struct yaml_check yc;
    if (check_config(err, sizeof(err), &yc) < 0) {
        fprintf(stderr, "hermes: fatal configuration error: %s (exit %d)\n", err, EXIT_CONFIG);
        history("config error");
        return EXIT_CONFIG;
    }
    const char *dt = getenv("HERMES_RESTART_DRAIN_TIMEOUT");
    if (!dt || !*dt)
        dt = yc.drain[0] ? yc.drain : NULL;
    if (dt) {
        char *end;
        double v = strtod(dt, &end);
        if (end != dt && v > 0 && v < 86400)
            drain_timeout_s = v;
    }

    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGUSR1);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    signal(SIGPIPE, SIG_IGN);
    int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
    if (sfd < 0) {
        fprintf(stderr, "hermes: signalfd: %s\n", strerror(errno));
        return 3;
    }
    const char *p = getenv("HERMES_PORT"), *b = getenv("HERMES_BIND");
    int port = p ? atoi(p) : 9119;
    int lfd = listen_on(b && *b ? b : "0.0.0.0", port);
    if (lfd < 0) {
        fprintf(stderr, "hermes: unable to listen on port %d: %s\n", port, strerror(errno));
        return 2;
    }
    int afd = -1;
    const char *key = getenv("API_SERVER_KEY");
    if (truthy(getenv("API_SERVER_ENABLED")) && !(key && *key))
        fprintf(stderr, "hermes: [API Server] API_SERVER_KEY is not set: not started\n");
    else if (truthy(getenv("API_SERVER_ENABLED"))) {
        const char *ap = getenv("API_SERVER_PORT"), *ah = getenv("API_SERVER_HOST");
        api_port = ap && *ap ? atoi(ap) : 8642;
        afd = listen_on(ah && *ah ? ah : "127.0.0.1", api_port);
        if (afd < 0) {
            fprintf(stderr, "hermes: [API Server] unable to listen on %s:%d: %s\n",
                    ah && *ah ? ah : "127.0.0.1", api_port, strerror(errno));
            return 1;
        }
        printf("hermes: [API Server] API server listening on http://%s:%d\n",
               ah && *ah ? ah : "127.0.0.1", api_port);
        fflush(stdout);
    }
    scan_skills();
    history("start skills=%zu api=%d", nskills, api_port);
    for (size_t i = 0; i < MAX_CLIENTS; i++)
        clients[i].fd = -1;

    for (;;) {
        if (draining && (turns_in_flight() == 0 || mono_ms() >= drain_deadline_ms)) {
            history("restart reason=%s interrupted=%u", drain_reason, turns_in_flight());
            return EXIT_RESTART;
        }
        struct pollfd pf[MAX_CLIENTS + 3];
        int map[MAX_CLIENTS + 3];
        nfds_t n = 0;
        pf[n] = (struct pollfd){.fd = sfd, .events = POLLIN};
        map[n++] = -1;
        pf[n] = (struct pollfd){.fd = lfd, .events = POLLIN};
        map[n++] = -2;
        if (afd >= 0) {
            pf[n] = (struct pollfd){.fd = afd, .events = POLLIN};
            map[n++] = -3;
        }
        for (int i = 0; i < MAX_CLIENTS; i++)
            if (clients[i].fd >= 0) {
                pf[n] = (struct pollfd){.fd = clients[i].fd, .events = POLLIN};
                map[n++] = i;
            }
        /* Idle means no timer: a wake-up only while draining. */
        int timeout = -1;
        if (draining) {
            long long left = drain_deadline_ms - mono_ms();
            timeout = left < 0 ? 0 : left > 1000 ? 1000 : (int)left;
        }
        if (poll(pf, n, timeout) < 0) {
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
                } else if (si.ssi_signo == SIGUSR1) {
                    request_restart("signal");
                } else {
                    history("stop signal=%u", si.ssi_signo);
                    /* The real gateway exits 1 on SIGTERM. */
                    return 1;
                }
            } else if (map[k] == -2) {
                accept_client(lfd, K_LINE);
            } else if (map[k] == -3) {
                accept_client(afd, K_HTTP);
            } else {
                client_input(&clients[map[k]], NULL);
            }
        }
    }
}
