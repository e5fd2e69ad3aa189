/* A stand-in for Hermes Agent's gateway (and for hermes-web-ui), baked
 * into the test image where the real, Python, agent cannot be installed.
 * It follows the process contract docs/hermes.md describes, point by
 * point, so the VM tests exercise that contract:
 *
 *   hermes gateway run [FLAGS]
 *     the release picked by HERMES_STANDIN_VERSION (or the kernel command
 *     line's hermes_standin.version=; default 0.21.3): its flags (an
 *     unknown one is argparse's exit 2), its supervisor markers (without
 *     one an in-chat /restart leaves a detached replacement and exits 0),
 *     the API server only with a usable API_SERVER_KEY, bundled skills and
 *     their manifest, the offline tirith marker, gateway.pid/gateway.lock,
 *     .clean_shutdown, the watchdog notify, and the exit codes measured on
 *     0.18.2 (SIGTERM 1, SIGINT 0, SIGUSR1 75, fatal config 78).
 *     docs/hermes.md ("The stand-in") lists each point and its source.
 *
 *   hermes-web-ui PORT
 *     the foreground form only; state (server.log) in $HOME/.hermes-web-ui.
 *
 * Test hooks that are not Hermes's: a line protocol on HERMES_PORT (9119)
 * standing in for a chat platform and for inspection, and SIGHUP re-reading
 * the skills (the real gateway has no SIGHUP handler):
 *   health                 ok
 *   state                  {"pid":..,"uid":..,"gid":..,"skills":[..],"api_port":..,
 *                          "version":..,"supervised":..,"api":..}
 *   skills                 {"name":..,"path":..,"source":..} a line per skill, then "end"
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
#include <stddef.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
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
static const char *version = "0.21.3";
static struct timespec started;
static int api_port;
static double drain_timeout_s = 180.0;
static int draining, supervised, detached_restart;
static long long drain_min_ms;
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
    char tirith[16];       /* security.tirith_enabled */
    char watchdog[32];     /* gateway.systemd_watchdog_seconds */
    char ext_dirs[8][256]; /* skills.external_dirs */
    int n_ext;
    int in_ext;            /* the lines below belong to skills.external_dirs */
};

static void add_ext_dir(struct yaml_check *yc, const char *v)
{
    while (*v == ' ')
        v++;
    char tmp[256];
    snprintf(tmp, sizeof(tmp), "%s", v);
    for (char *e = tmp + strlen(tmp); e > tmp && e[-1] == ' '; e--)
        e[-1] = 0;
    size_t n = strlen(tmp);
    if (n >= 2 && (tmp[0] == '"' || tmp[0] == '\'') && tmp[n - 1] == tmp[0]) {
        memmove(tmp, tmp + 1, n - 2);
        tmp[n - 2] = 0;
    }
    if (*tmp && yc->n_ext < 8)
        snprintf(yc->ext_dirs[yc->n_ext++], sizeof(yc->ext_dirs[0]), "%s", tmp);
}

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
            if (yc->in_ext && indent > 0)
                add_ext_dir(yc, p + 1);
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
        yc->in_ext = 0;
        if (indent > 0 && !strcmp(yc->section, "skills") && !strcmp(key, "external_dirs")) {
            if (*v == '[') {
                char list[512];
                snprintf(list, sizeof(list), "%s", v + 1);
                list[strcspn(list, "]")] = 0;
                for (char *save, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save))
                    add_ext_dir(yc, t);
            } else if (*v) {
                add_ext_dir(yc, v);
            } else {
                yc->in_ext = 1;
            }
            continue;
        }
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
        } else if (!strcmp(yc->section, "security") && !strcmp(key, "tirith_enabled")) {
            snprintf(yc->tirith, sizeof(yc->tirith), "%s", v);
        } else if (!strcmp(yc->section, "gateway") && !strcmp(key, "systemd_watchdog_seconds")) {
            snprintf(yc->watchdog, sizeof(yc->watchdog), "%s", v);
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

/* One skill as Hermes resolves it (tools/skills_tool.py _find_all_skills):
 * the home's skills/ first, then each skills.external_dirs entry in
 * config order; in each, every SKILL.md found by a walk that follows links,
 * in the order of its path relative to that directory; the name is the
 * front matter's `name`, else the directory's; the first skill of a name
 * wins and later ones of the same name are hidden. */
struct skill {
    char name[96];
    char rel[160];  /* relative to its skills directory */
    char path[PATH_MAX];
    char source[12]; /* builtin (in the manifest), local, external */
};

static struct skill skills[MAX_SKILLS];
static size_t nskills;
static struct yaml_check cfg;

/* agent/skill_utils.py EXCLUDED_SKILL_DIRS and SKILL_SUPPORT_DIRS */
static int excluded_dir(const char *n)
{
    static const char *const ex[] = {".git", ".github", ".hub", ".archive", ".venv", "venv",
                                     "node_modules", "site-packages", "__pycache__", ".tox",
                                     ".nox", ".pytest_cache", ".mypy_cache", ".ruff_cache"};
    for (size_t i = 0; i < sizeof(ex) / sizeof(ex[0]); i++)
        if (!strcmp(n, ex[i]))
            return 1;
    return 0;
}

static int support_dir(const char *n)
{
    return !strcmp(n, "references") || !strcmp(n, "templates") || !strcmp(n, "assets") ||
           !strcmp(n, "scripts");
}

static int is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The front matter's name: between the first two "---" lines. */
static void front_matter_name(const char *skill_md, char *out, size_t outlen, const char *fallback)
{
    size_t len;
    char *t = slurp(skill_md, &len);
    snprintf(out, outlen, "%s", fallback);
    if (!t)
        return;
    if (len > 4000)
        t[4000] = 0;
    int in = 0;
    for (char *line = t, *next; line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        while (*line == ' ' || *line == '\t')
            line++;
        line[strcspn(line, "\r")] = 0;
        if (!strcmp(line, "---")) {
            if (in)
                break;
            in = 1;
            continue;
        }
        if (in && !strncmp(line, "name:", 5)) {
            char *v = line + 5;
            while (*v == ' ')
                v++;
            unquote(v);
            if (*v && !strpbrk(v, "\"\\"))
                snprintf(out, outlen, "%s", v);
            break;
        }
    }
    free(t);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every SKILL.md below base/rel, relative paths collected into found. */
static void walk(const char *base, const char *rel, int depth, char **found, size_t *nfound,
                 size_t max)
{
    char dir[PATH_MAX], p[PATH_MAX * 2];
    snprintf(dir, sizeof(dir), "%s%s%s", base, *rel ? "/" : "", rel);
    if (depth > 8)
        return;
    snprintf(p, sizeof(p), "%s/SKILL.md", dir);
    int has_md = is_file(p);
    if (has_md && *nfound < max) {
        char *r = malloc(strlen(rel) + 10);
        if (r) {
            sprintf(r, "%s%sSKILL.md", rel, *rel ? "/" : "");
            found[(*nfound)++] = r;
        }
    }
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || excluded_dir(e->d_name) ||
            (has_md && support_dir(e->d_name)) || strpbrk(e->d_name, "\"\\"))
            continue;
        snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
        if (!is_dir(p))
            continue;
        char sub[PATH_MAX];
        snprintf(sub, sizeof(sub), "%s%s%s", rel, *rel ? "/" : "", e->d_name);
        walk(base, sub, depth + 1, found, nfound, max);
    }
    closedir(d);
}

static int manifest_has(const char *name);

static void scan_dir(const char *base, int external)
{
    char *found[MAX_SKILLS * 2];
    size_t nfound = 0;
    walk(base, "", 0, found, &nfound, MAX_SKILLS * 2);
    qsort(found, nfound, sizeof(found[0]), cmp_str);
    for (size_t i = 0; i < nfound; i++) {
        char md[PATH_MAX * 2], name[96], rel[PATH_MAX];
        snprintf(md, sizeof(md), "%s/%s", base, found[i]);
        snprintf(rel, sizeof(rel), "%s", found[i]);
        char *slash = strrchr(rel, '/');
        if (slash)
            *slash = 0;
        else
            rel[0] = 0;
        const char *dirname = strrchr(rel, '/') ? strrchr(rel, '/') + 1 : rel;
        free(found[i]);
        if (!*rel)
            continue; /* a SKILL.md at the top is no skill */
        front_matter_name(md, name, sizeof(name), dirname);
        int dup = 0;
        for (size_t k = 0; k < nskills && !dup; k++)
            dup = !strcmp(skills[k].name, name);
        if (dup || nskills >= MAX_SKILLS)
            continue;
        struct skill *s = &skills[nskills++];
        snprintf(s->name, sizeof(s->name), "%s", name);
        snprintf(s->rel, sizeof(s->rel), "%s", rel);
        snprintf(s->path, sizeof(s->path), "%s/%s", base, rel);
        snprintf(s->source, sizeof(s->source), "%s",
                 external ? "external" : manifest_has(name) ? "builtin" : "local");
    }
}

/* skills.external_dirs as agent/skill_utils.py get_external_skills_dirs()
 * takes them: ~ and $VAR expanded, relative to HERMES_HOME, the home's own
 * skills directory and repeats skipped, missing directories skipped. */
static void external_dir(const char *entry, char *out, size_t outlen)
{
    char exp[PATH_MAX] = "";
    size_t n = 0;
    const char *h = getenv("HOME");
    if (entry[0] == '~' && (entry[1] == '/' || !entry[1])) {
        n = (size_t)snprintf(exp, sizeof(exp), "%s", h ? h : "");
        entry++;
    }
    for (const char *c = entry; *c && n < sizeof(exp) - 1; c++) {
        if (*c == '$') {
            char var[128];
            size_t k = 0;
            const char *q = c + 1;
            int brace = *q == '{';
            if (brace)
                q++;
            while ((isalnum((unsigned char)*q) || *q == '_') && k < sizeof(var) - 1)
                var[k++] = *q++;
            var[k] = 0;
            if (k && (!brace || *q == '}')) {
                const char *val = getenv(var);
                n += (size_t)snprintf(exp + n, sizeof(exp) - n, "%s", val ? val : "");
                if (n >= sizeof(exp))
                    n = sizeof(exp) - 1;
                c = brace ? q : q - 1;
                continue;
            }
        }
        exp[n++] = *c;
        exp[n] = 0;
    }
    char joined[PATH_MAX * 2];
    if (exp[0] == '/')
        snprintf(joined, sizeof(joined), "%s", exp);
    else
        snprintf(joined, sizeof(joined), "%s/%s", home, exp);
    if (!realpath(joined, out))
        out[0] = 0;
    (void)outlen;
}

static void scan_skills(void)
{
    char dir[PATH_MAX], local[PATH_MAX], seen[8][PATH_MAX];
    int nseen = 0;

    nskills = 0;
    snprintf(dir, sizeof(dir), "%s/skills", home);
    if (is_dir(dir))
        scan_dir(dir, 0);
    if (!realpath(dir, local))
        snprintf(local, sizeof(local), "%s", dir);
    for (int i = 0; i < cfg.n_ext; i++) {
        char p[PATH_MAX];
        external_dir(cfg.ext_dirs[i], p, sizeof(p));
        int skip = !p[0] || !is_dir(p) || !strcmp(p, local);
        for (int k = 0; k < nseen && !skip; k++)
            skip = !strcmp(seen[k], p);
        if (skip)
            continue;
        snprintf(seen[nseen++], sizeof(seen[0]), "%s", p);
        scan_dir(p, 1);
    }
    printf("hermes: %zu skills\n", nskills);
    fflush(stdout);
}

/* ---- bundled skills ------------------------------------------------------ */

/* A few skills the stand-in carries as Hermes carries its bundled ones;
 * one of them names the version, so a version change updates it. */
struct bundled {
    const char *rel, *body;
};

static char bundled_version_body[512];

static const struct bundled bundled_skills[] = {
    {"productivity/daily-notes",
     "---\nname: daily-notes\ndescription: Keep a short daily log in the workspace.\n---\n"
     "# Daily notes\n\nAppend what was done today to notes/YYYY-MM-DD.md.\n"},
    {"software-development/code-review",
     "---\nname: code-review\ndescription: Review a diff for bugs before it lands.\n---\n"
     "# Code review\n\nRead the diff, run the tests, list what breaks.\n"},
    {"hermes/gateway-status", NULL}, /* bundled_version_body */
};
#define NBUNDLED (sizeof(bundled_skills) / sizeof(bundled_skills[0]))

static const char *bundled_body(size_t i)
{
    return bundled_skills[i].body ? bundled_skills[i].body : bundled_version_body;
}

/* The change-detection hash over a skill's files, relative path then
 * content, in path order, as tools/skills_sync.py _dir_hash() computes
 * it (there MD5; here two FNV-1a 64 lanes, printed as the same 32 hex
 * digits: only equality matters). */
struct hash {
    unsigned long long a, b;
};

static void hash_init(struct hash *h)
{
    h->a = 0xcbf29ce484222325ULL;
    h->b = 0x84222325cbf29ce4ULL;
}

static void hash_add(struct hash *h, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        h->a = (h->a ^ p[i]) * 0x100000001b3ULL;
        h->b = (h->b ^ (p[i] + 0x5bu)) * 0x100000001b3ULL;
    }
}

static void hash_hex(const struct hash *h, char out[33])
{
    snprintf(out, 33, "%016llx%016llx", h->a, h->b);
}

static void hash_tree(struct hash *h, const char *base, const char *rel, int depth)
{
    char dir[PATH_MAX], p[PATH_MAX * 2], sub[PATH_MAX];
    struct dirent **ents;
    snprintf(dir, sizeof(dir), "%s%s%s", base, *rel ? "/" : "", rel);
    if (depth > 8)
        return;
    int n = scandir(dir, &ents, NULL, alphasort);
    if (n < 0)
        return;
    for (int i = 0; i < n; i++) {
        const char *nm = ents[i]->d_name;
        if (strcmp(nm, ".") && strcmp(nm, "..")) {
            snprintf(p, sizeof(p), "%s/%s", dir, nm);
            snprintf(sub, sizeof(sub), "%s%s%s", rel, *rel ? "/" : "", nm);
            if (is_file(p)) {
                size_t len;
                char *t = slurp(p, &len);
                hash_add(h, sub, strlen(sub));
                if (t)
                    hash_add(h, t, len);
                free(t);
            } else if (is_dir(p)) {
                hash_tree(h, base, sub, depth + 1);
            }
        }
        free(ents[i]);
    }
    free(ents);
}

static void dir_hash(const char *dir, char out[33])
{
    struct hash h;
    hash_init(&h);
    hash_tree(&h, dir, "", 0);
    hash_hex(&h, out);
}

static void bundled_hash(size_t i, char out[33])
{
    struct hash h;
    const char *b = bundled_body(i);
    hash_init(&h);
    hash_add(&h, "SKILL.md", 8);
    hash_add(&h, b, strlen(b));
    hash_hex(&h, out);
}

/* skills/.bundled_manifest: "name:hash" lines, sorted by name. */
static char manifest[NBUNDLED + 32][160];
static size_t nmanifest;

static int manifest_find(const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < nmanifest; i++)
        if (!strncmp(manifest[i], name, n) && (manifest[i][n] == ':' || !manifest[i][n]))
            return (int)i;
    return -1;
}

static int manifest_has(const char *name)
{
    return manifest_find(name) >= 0;
}

static void read_manifest(void)
{
    char path[PATH_MAX];
    size_t len;
    nmanifest = 0;
    snprintf(path, sizeof(path), "%s/skills/.bundled_manifest", home);
    char *t = slurp(path, &len);
    if (!t)
        return;
    for (char *line = t, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        if (*line && nmanifest < sizeof(manifest) / sizeof(manifest[0]))
            snprintf(manifest[nmanifest++], sizeof(manifest[0]), "%s", line);
    }
    free(t);
}

static void manifest_set(const char *name, const char *hash)
{
    int i = manifest_find(name);
    if (i < 0) {
        if (nmanifest >= sizeof(manifest) / sizeof(manifest[0]))
            return;
        i = (int)nmanifest++;
    }
    snprintf(manifest[i], sizeof(manifest[0]), "%s:%s", name, hash);
}

static int mkdirs(const char *path)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof(tmp), "%s", path);
    for (char *s = tmp + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
                return -1;
            *s = '/';
        }
    return mkdir(tmp, 0755) < 0 && errno != EEXIST ? -1 : 0;
}

static int write_file(const char *path, const char *body)
{
    char tmp[PATH_MAX + 8];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    size_t len = strlen(body);
    int ok = write(fd, body, len) == (ssize_t)len;
    close(fd);
    if (!ok || rename(tmp, path) < 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* tools/skills_sync.py sync_skills(), on every start: a skill never offered
 * is copied (unless a skill of that name is already there); one the
 * manifest lists and the user left as it was is replaced when the bundled
 * copy changed; one the user edited is never touched; one the user deleted
 * stays deleted; names no longer bundled leave the manifest. */
static void sync_bundled(void)
{
    char dir[PATH_MAX], dest[PATH_MAX * 2], md[PATH_MAX * 2 + 16];
    snprintf(bundled_version_body, sizeof(bundled_version_body),
             "---\nname: gateway-status\ndescription: Report the gateway's health.\n---\n"
             "# Gateway status\n\nAsk GET /health; this gateway is version %s.\n", version);
    snprintf(dir, sizeof(dir), "%s/skills", home);
    if (mkdirs(dir) < 0) {
        fprintf(stderr, "hermes: unable to make %s: %s\n", dir, strerror(errno));
        return;
    }
    read_manifest();
    unsigned copied = 0, updated = 0, kept = 0;
    for (size_t i = 0; i < NBUNDLED; i++) {
        const char *rel = bundled_skills[i].rel;
        const char *name = strrchr(rel, '/') + 1;
        char want[33], have[33];
        bundled_hash(i, want);
        snprintf(dest, sizeof(dest), "%s/%s", dir, rel);
        snprintf(md, sizeof(md), "%s/SKILL.md", dest);
        int m = manifest_find(name);
        int exists = is_dir(dest);
        if (m < 0) {
            if (exists) {
                dir_hash(dest, have);
                if (!strcmp(have, want))
                    manifest_set(name, want);
                else
                    kept++;
                continue;
            }
            if (mkdirs(dest) < 0 || write_file(md, bundled_body(i)) < 0) {
                fprintf(stderr, "hermes: unable to copy bundled skill %s: %s\n", name,
                        strerror(errno));
                continue;
            }
            manifest_set(name, want);
            copied++;
        } else if (exists) {
            const char *origin = strchr(manifest[m], ':') ? strchr(manifest[m], ':') + 1 : "";
            dir_hash(dest, have);
            if (!*origin) {
                manifest_set(name, have); /* an old manifest: baseline */
            } else if (strcmp(have, origin)) {
                kept++; /* the user's edit */
            } else if (strcmp(want, origin)) {
                if (write_file(md, bundled_body(i)) == 0) {
                    manifest_set(name, want);
                    updated++;
                }
            }
        }
    }
    /* Entries for skills no longer bundled go. */
    for (size_t i = 0; i < nmanifest;) {
        int known = 0;
        for (size_t k = 0; k < NBUNDLED && !known; k++) {
            const char *name = strrchr(bundled_skills[k].rel, '/') + 1;
            size_t n = strlen(name);
            known = !strncmp(manifest[i], name, n) && (manifest[i][n] == ':' || !manifest[i][n]);
        }
        if (known) {
            i++;
            continue;
        }
        memmove(manifest[i], manifest[i + 1], (nmanifest - i - 1) * sizeof(manifest[0]));
        nmanifest--;
    }
    char *sorted[sizeof(manifest) / sizeof(manifest[0])];
    char body[sizeof(manifest) + 64] = "";
    size_t n = 0;
    for (size_t i = 0; i < nmanifest; i++)
        sorted[i] = manifest[i];
    qsort(sorted, nmanifest, sizeof(sorted[0]), cmp_str);
    for (size_t i = 0; i < nmanifest; i++)
        n += (size_t)snprintf(body + n, sizeof(body) - n, "%s\n", sorted[i]);
    snprintf(md, sizeof(md), "%s/.bundled_manifest", dir);
    if (write_file(md, body) < 0)
        fprintf(stderr, "hermes: unable to write %s: %s\n", md, strerror(errno));
    printf("hermes: bundled skills: %u copied, %u updated, %u user-modified kept\n", copied,
           updated, kept);
    fflush(stdout);
}

/* ---- tirith -------------------------------------------------------------- */

/* tools/tirith_security.py ensure_installed(): unless disabled (env
 * TIRITH_ENABLED, else security.tirith_enabled), with no tirith on PATH or
 * in $HERMES_HOME/bin, and no failure marker younger than a day, it
 * downloads tirith from GitHub. This image is offline: the stand-in makes
 * no connection and leaves what the failed download leaves. */
static void tirith(void)
{
    const char *e = getenv("TIRITH_ENABLED");
    int enabled = 1;
    if (e)
        enabled = !strcasecmp(e, "1") || !strcasecmp(e, "true") || !strcasecmp(e, "yes");
    else if (cfg.tirith[0])
        enabled = truthy(cfg.tirith);
    if (!enabled)
        return;
    char bin[PATH_MAX], p[PATH_MAX + 16];
    snprintf(bin, sizeof(bin), "%s/bin", home);
    if (mkdir(bin, 0755) < 0 && errno != EEXIST)
        fprintf(stderr, "hermes: unable to make %s: %s\n", bin, strerror(errno));
    snprintf(p, sizeof(p), "%s/tirith", bin);
    if (access(p, X_OK) == 0)
        return;
    snprintf(p, sizeof(p), "%s/.tirith-install-failed", home);
    struct stat st;
    if (stat(p, &st) == 0 && time(NULL) - st.st_mtime < 86400)
        return;
    if (write_file(p, "download_failed") < 0)
        fprintf(stderr, "hermes: unable to write %s: %s\n", p, strerror(errno));
    printf("hermes: tirith download failed (offline)\n");
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
    /* The chat /restart with no supervisor marker takes Hermes's detached
     * path; SIGUSR1 is always the service path. About a second passes
     * before an idle gateway exits. */
    detached_restart = !strcmp(why, "chat") && !supervised;
    drain_min_ms = mono_ms() + 1000;
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
    for (size_t i = 0; i < nskills && n < sizeof(out) - 400; i++)
        n += (size_t)snprintf(out + n, sizeof(out) - n, "%s\"%s\"", i ? "," : "", skills[i].rel);
    if (n < sizeof(out) - 300)
        n += (size_t)snprintf(out + n, sizeof(out) - n, "],\"version\":\"%s\",\"supervised\":%s,"
                              "\"api\":%s}\n", version, supervised ? "true" : "false",
                              api_port ? "true" : "false");
    else
        snprintf(out + n, sizeof(out) - n, "]}\n");
    reply(fd, out);
}

/* The skills as Hermes resolves them, one JSON object a line, then "end". */
static void do_skills(int fd)
{
    char out[PATH_MAX + 512];
    scan_skills();
    for (size_t i = 0; i < nskills; i++) {
        snprintf(out, sizeof(out), "{\"name\":\"%s\",\"path\":\"%s\",\"source\":\"%s\"}\n",
                 skills[i].name, skills[i].path, skills[i].source);
        reply(fd, out);
    }
    reply(fd, "end\n");
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
        scan_skills();
        do_state(fd);
    } else if (!strcmp(line, "skills")) {
        do_skills(fd);
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

/* gateway/platforms/api_server.py: /health and /v1/health are public and
 * answer {"status": "ok", "platform": "hermes-agent", "version": ...};
 * the other routes need "Authorization: Bearer API_SERVER_KEY" and answer
 * 401 without it; a path with no route is aiohttp's 404. */
static const char *api_key;

static int authorized(const char *req)
{
    for (const char *l = strchr(req, '\n'); l && l[1]; l = strchr(l + 1, '\n')) {
        if (strncasecmp(l + 1, "Authorization:", 14))
            continue;
        const char *v = l + 15;
        while (*v == ' ')
            v++;
        if (strncmp(v, "Bearer ", 7))
            return 0;
        v += 7;
        while (*v == ' ')
            v++;
        size_t n = strcspn(v, "\r\n");
        while (n && v[n - 1] == ' ')
            n--;
        return api_key && strlen(api_key) == n && !strncmp(v, api_key, n);
    }
    return 0;
}

static void http_send(int fd, int code, const char *status, const char *body)
{
    char out[LINE_MAX_LEN * 8];
    snprintf(out, sizeof(out),
             "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
             "Connection: close\r\n\r\n%s", code, status, strlen(body), body);
    reply(fd, out);
}

static void http_answer(int fd, const char *req, const char *body_ok)
{
    static const char *const routes[] = {"/health/detailed", "/v1/models", "/v1/capabilities",
                                         "/v1/skills", "/v1/toolsets", "/api/sessions",
                                         "/api/jobs", "/v1/chat/completions", "/v1/responses"};
    char method[16] = "", target[256] = "", body[LINE_MAX_LEN * 6];
    if (sscanf(req, "%15s %255s", method, target) != 2) {
        reply(fd, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        return;
    }
    target[strcspn(target, "?")] = 0;
    if (body_ok) { /* hermes-web-ui */
        snprintf(body, sizeof(body), "%s", body_ok);
        http_send(fd, 200, "OK", body);
        return;
    }
    if (!strcmp(target, "/health") || !strcmp(target, "/v1/health")) {
        snprintf(body, sizeof(body),
                 "{\"status\": \"ok\", \"platform\": \"hermes-agent\", \"version\": \"%s\"}", version);
        http_send(fd, 200, "OK", body);
        return;
    }
    int known = 0;
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]) && !known; i++)
        known = !strcmp(target, routes[i]) ||
                (!strncmp(target, routes[i], strlen(routes[i])) && target[strlen(routes[i])] == '/');
    if (!known) {
        http_send(fd, 404, "Not Found", "404: Not Found");
        return;
    }
    if (!authorized(req)) {
        http_send(fd, 401, "Unauthorized",
                  "{\"error\": {\"message\": \"Invalid API key\", \"type\": "
                  "\"invalid_request_error\", \"code\": \"invalid_api_key\"}}");
        return;
    }
    if (!strcmp(target, "/v1/skills")) {
        size_t n = (size_t)snprintf(body, sizeof(body), "{\"object\": \"list\", \"data\": [");
        scan_skills();
        for (size_t i = 0; i < nskills && n < sizeof(body) - 300; i++)
            n += (size_t)snprintf(body + n, sizeof(body) - n,
                                  "%s{\"name\": \"%s\", \"source\": \"%s\"}", i ? ", " : "",
                                  skills[i].name, skills[i].source);
        snprintf(body + n, sizeof(body) - n, "]}");
        http_send(fd, 200, "OK", body);
    } else if (!strcmp(target, "/v1/models")) {
        http_send(fd, 200, "OK", "{\"object\": \"list\", \"data\": [{\"id\": \"hermes-agent\", "
                                 "\"object\": \"model\", \"owned_by\": \"hermes\"}]}");
    } else {
        /* No model behind this stand-in. */
        http_send(fd, 503, "Service Unavailable",
                  "{\"error\": {\"message\": \"no model in this stand-in\"}}");
    }
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

/* ---- versions ------------------------------------------------------------ */

/* What a knob says: the environment, else the kernel command line's
 * hermes_standin.KEY=VALUE (a VM test picks the version at boot). */
static const char *knob(const char *env, const char *key, char *buf, size_t len)
{
    const char *v = getenv(env);
    if (v && *v)
        return v;
    size_t n;
    char *cmd = slurp("/proc/cmdline", &n);
    if (!cmd)
        return NULL;
    char pat[64];
    snprintf(pat, sizeof(pat), "hermes_standin.%s=", key);
    const char *found = NULL;
    for (char *t = cmd; (t = strstr(t, pat)); t += strlen(pat))
        if (t == cmd || t[-1] == ' ') {
            t += strlen(pat);
            snprintf(buf, len, "%.*s", (int)strcspn(t, " \n"), t);
            found = buf;
            break;
        }
    free(cmd);
    return found;
}

/* major*1000 + minor: 0.18.2 -> 18, 0.19.0 -> 19, 0.21.3 -> 21 */
static int ver_minor(void)
{
    int ma = 0, mi = 0;
    sscanf(version, "%d.%d", &ma, &mi);
    return ma * 1000 + mi;
}

/* `hermes gateway run`'s flags (hermes_cli/subcommands/gateway.py):
 * --external-supervisor exists from 0.19. An unknown one is argparse's
 * error, exit 2; a unique prefix of a long flag is that flag, as argparse
 * allows. */
static int parse_flags(int argc, char **argv, int *external)
{
    static const char *const longs[] = {"--verbose", "--quiet", "--replace", "--force",
                                        "--no-supervise", "--accept-hooks", "--help",
                                        "--external-supervisor"};
    size_t nlongs = sizeof(longs) / sizeof(longs[0]) - (ver_minor() >= 19 ? 0 : 1);
    char usage[256];
    snprintf(usage, sizeof(usage), "usage: hermes gateway run [-h] [-v] [-q] [--replace] [--force] "
             "[--no-supervise]%s [--accept-hooks]\n",
             ver_minor() >= 19 ? " [--external-supervisor]" : "");
    for (int i = 3; i < argc; i++) {
        const char *a = argv[i];
        const char *hit = NULL;
        if (a[0] == '-' && a[1] == '-' && a[2]) {
            int n = 0;
            for (size_t k = 0; k < nlongs; k++)
                if (!strncmp(longs[k], a, strlen(a))) {
                    n++;
                    hit = longs[k];
                    if (!strcmp(longs[k], a)) {
                        n = 1;
                        break;
                    }
                }
            if (n > 1) {
                fprintf(stderr, "%shermes: error: ambiguous option: %s\n", usage, a);
                return 2;
            }
        } else if (a[0] == '-' && a[1] && a[1] != '-' && strspn(a + 1, "vqh") == strlen(a + 1)) {
            hit = strchr(a, 'h') ? "--help" : "-short";
        }
        if (!hit) {
            fprintf(stderr, "%shermes: error: unrecognized arguments: %s\n", usage, a);
            return 2;
        }
        if (!strcmp(hit, "--help")) {
            printf("%s", usage);
            return 0;
        }
        if (!strcmp(hit, "--external-supervisor"))
            *external = 1;
    }
    return -1;
}

/* gateway/restart.py is_gateway_supervisor_process() (0.19 on), or the
 * inline test in gateway/slash_commands.py's /restart (0.18.2, which knew
 * only systemd's INVOCATION_ID and launchd's XPC_SERVICE_NAME); in both, a
 * container (/.dockerenv, /run/.containerenv) takes the service path too. */
static int supervisor_marked(void)
{
    const char *xpc = getenv("XPC_SERVICE_NAME");
    if ((getenv("INVOCATION_ID") && *getenv("INVOCATION_ID")) || (xpc && *xpc && strcmp(xpc, "0")))
        return 1;
    if (access("/.dockerenv", F_OK) == 0 || access("/run/.containerenv", F_OK) == 0)
        return 1;
    if (ver_minor() < 19)
        return 0;
    const char *s6 = getenv("HERMES_S6_SUPERVISED_CHILD");
    if (s6 && *s6)
        return 1;
    const char *ext = getenv("HERMES_GATEWAY_EXTERNAL_SUPERVISOR");
    return truthy(ext);
}

/* ---- hermes gateway run ------------------------------------------------ */

static char pid_path[PATH_MAX], lock_path[PATH_MAX];
static char self_exe[PATH_MAX];
static char **saved_argv;

/* gateway/status.py write_pid_file(): a JSON record; gateway.lock beside it. */
static void write_pid_files(int argc, char **argv)
{
    char rec[LINE_MAX_LEN * 2];
    size_t n = (size_t)snprintf(rec, sizeof(rec), "{\"pid\": %d, \"kind\": \"hermes-gateway\", "
                                "\"argv\": [", (int)getpid());
    for (int i = 0; i < argc && n < sizeof(rec) - 300; i++)
        n += (size_t)snprintf(rec + n, sizeof(rec) - n, "%s\"%.200s\"", i ? ", " : "",
                              strpbrk(argv[i], "\"\\") ? "?" : argv[i]);
    snprintf(rec + n, sizeof(rec) - n, "], \"start_time\": %lld}", (long long)started.tv_sec);
    snprintf(pid_path, sizeof(pid_path), "%s/gateway.pid", home);
    snprintf(lock_path, sizeof(lock_path), "%s/gateway.lock", home);
    /* A stale pair from a killed gateway is replaced. */
    if (write_file(pid_path, rec) < 0 || write_file(lock_path, rec) < 0)
        fprintf(stderr, "hermes: unable to write %s: %s\n", pid_path, strerror(errno));
}

static void watchdog_send(const char *msg);

/* Every exit after start-up: the pid and lock go, .clean_shutdown is left. */
static int finish(int code)
{
    char p[PATH_MAX];
    watchdog_send("STOPPING=1");
    unlink(pid_path);
    unlink(lock_path);
    snprintf(p, sizeof(p), "%s/.clean_shutdown", home);
    if (write_file(p, "") < 0)
        fprintf(stderr, "hermes: unable to write %s: %s\n", p, strerror(errno));
    history("exit status=%d", code);
    return code;
}

/* gateway/run.py _launch_detached_restart_command(): with no supervisor, an
 * in-chat /restart leaves a helper in a session of its own (setsid) that
 * waits for this process to end, up to the drain budget and 5 s, then
 * starts the gateway again; this one exits 0. */
static void spawn_detached_replacement(void)
{
    pid_t parent = getpid();
    pid_t c = fork();
    if (c < 0) {
        fprintf(stderr, "hermes: fork: %s\n", strerror(errno));
        return;
    }
    if (c > 0) {
        waitpid(c, NULL, 0);
        return;
    }
    if (setsid() < 0 || fork() != 0)
        _exit(0);
    int null = open("/dev/null", O_RDWR);
    for (int fd = 0; fd < 1024; fd++)
        if (fd != null)
            close(fd);
    if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
        if (null > 2)
            close(null);
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    long long deadline = mono_ms() + (long long)(drain_timeout_s * 1000.0) + 5000;
    while (kill(parent, 0) == 0 && mono_ms() < deadline)
        usleep(200 * 1000);
    execv(self_exe, saved_argv);
    _exit(127);
}

/* ---- systemd notify -------------------------------------------------------- */

/* gateway/systemd_notify.py: only with gateway.systemd_watchdog_seconds > 0
 * and WATCHDOG_USEC set; no pings after STOPPING=1. */
static int wd_on, wd_stopped;
static long long wd_interval_ms, wd_next_ms;

static void watchdog_send(const char *msg)
{
    const char *a = getenv("NOTIFY_SOCKET");
    if (!wd_on || wd_stopped || !a || !*a)
        return;
    if (!strcmp(msg, "STOPPING=1"))
        wd_stopped = 1;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t n = strlen(a);
    if (n >= sizeof(sa.sun_path))
        return;
    memcpy(sa.sun_path, a, n);
    if (a[0] == '@')
        sa.sun_path[0] = 0;
    int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return;
    if (sendto(s, msg, strlen(msg), 0, (struct sockaddr *)&sa,
               (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n)) < 0)
        fprintf(stderr, "hermes: notify: %s\n", strerror(errno));
    close(s);
}

static int usage(void)
{
    fprintf(stderr, "usage: hermes [-h] {gateway} ...\n"
                    "hermes: error: this stand-in of Hermes Agent runs only `hermes gateway run`\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *base = strrchr(argv[0], '/');
    base = base ? base + 1 : argv[0];
    if (!strcmp(base, "hermes-web-ui"))
        return web_ui_main(argc, argv);

    char vbuf[32], sbuf[32];
    const char *v = knob("HERMES_STANDIN_VERSION", "version", vbuf, sizeof(vbuf));
    if (v && *v)
        version = v;
    const char *sm = knob("HERMES_STANDIN_START_MS", "start_ms", sbuf, sizeof(sbuf));
    long start_ms = sm ? strtol(sm, NULL, 10) : 0;
    if (start_ms < 0 || start_ms > 600000)
        start_ms = 0;

    if (argc < 3 || strcmp(argv[1], "gateway") || strcmp(argv[2], "run"))
        return usage();
    int external = 0;
    int rc = parse_flags(argc, argv, &external);
    if (rc >= 0)
        return rc;
    saved_argv = argv;
    ssize_t sl = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);
    if (sl > 0)
        self_exe[sl] = 0;
    else
        snprintf(self_exe, sizeof(self_exe), "%s", argv[0]);

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

    /* hermes_cli/gateway.py: the flag exports the marker for the gateway. */
    if (external)
        setenv("HERMES_GATEWAY_EXTERNAL_SUPERVISOR", "1", 1);
    supervised = supervisor_marked();

    char err[PATH_MAX + 256];
    if (check_config(err, sizeof(err), &cfg) < 0) {
        fprintf(stderr, "hermes: fatal configuration error: %s (exit %d)\n", err, EXIT_CONFIG);
        history("config error");
        return EXIT_CONFIG;
    }
    const char *dt = getenv("HERMES_RESTART_DRAIN_TIMEOUT");
    if (!dt || !*dt)
        dt = cfg.drain[0] ? cfg.drain : NULL;
    if (dt) {
        char *end;
        double d = strtod(dt, &end);
        if (end != dt && d > 0 && d < 86400)
            drain_timeout_s = d;
    }
    const char *wu = getenv("WATCHDOG_USEC");
    double wds = cfg.watchdog[0] ? strtod(cfg.watchdog, NULL) : 0;
    if (wds > 0 && wu && atoll(wu) > 0) {
        wd_on = 1;
        wd_interval_ms = atoll(wu) / 2000;
        if (wd_interval_ms < 1)
            wd_interval_ms = 1;
    }

    /* The Python start-up: its imports take seconds, before any handler
     * is in place (a signal now has its default effect). */
    if (start_ms > 0) {
        struct timespec ts = {start_ms / 1000, (start_ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
            ;
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
    write_pid_files(argc, argv);
    sync_bundled();
    tirith();
    const char *p = getenv("HERMES_PORT"), *b = getenv("HERMES_BIND");
    int port = p ? atoi(p) : 9119;
    int lfd = listen_on(b && *b ? b : "0.0.0.0", port);
    if (lfd < 0) {
        fprintf(stderr, "hermes: unable to listen on port %d: %s\n", port, strerror(errno));
        return finish(2);
    }
    /* gateway/config.py: the API server is on with API_SERVER_ENABLED or a
     * key; api_server.py connect() refuses to start it without a key of 16
     * characters or more that is no placeholder, or on a port in use, and
     * the gateway runs on without it. */
    int afd = -1;
    api_key = getenv("API_SERVER_KEY");
    if (truthy(getenv("API_SERVER_ENABLED")) || (api_key && *api_key)) {
        static const char *const placeholders[] = {"*", "**", "***", "changeme", "your_api_key",
                                                   "your_api_key_here", "your-api-key",
                                                   "placeholder", "example", "dummy", "null",
                                                   "none"};
        const char *ap = getenv("API_SERVER_PORT"), *ah = getenv("API_SERVER_HOST");
        const char *host = ah && *ah ? ah : "127.0.0.1";
        int placeholder = 0;
        for (size_t i = 0; api_key && i < sizeof(placeholders) / sizeof(placeholders[0]); i++)
            placeholder |= !strcasecmp(api_key, placeholders[i]);
        int want = ap && *ap ? atoi(ap) : 8642;
        if (!api_key || !*api_key) {
            fprintf(stderr, "hermes: WARNING [API Server] Refusing to start: API_SERVER_KEY is "
                            "required for the API server, including loopback-only binds on %s.\n",
                    host);
        } else if (strlen(api_key) < 16 || placeholder) {
            fprintf(stderr, "hermes: WARNING [API Server] Refusing to start: API_SERVER_KEY is a "
                            "placeholder or too short (<16 chars).\n");
        } else if ((afd = listen_on(host, want)) < 0) {
            fprintf(stderr, "hermes: WARNING [API Server] Port %d already in use (%s)\n", want,
                    strerror(errno));
        } else {
            api_port = want;
            printf("hermes: [API Server] API server listening on http://%s:%d\n", host, api_port);
            fflush(stdout);
        }
    }
    scan_skills();
    history("start version=%s skills=%zu api=%d supervised=%d", version, nskills, api_port,
            supervised);
    long long healthy_ms = mono_ms();
    if (wd_on) {
        watchdog_send("READY=1");
        wd_next_ms = mono_ms() + wd_interval_ms;
    }
    for (size_t i = 0; i < MAX_CLIENTS; i++)
        clients[i].fd = -1;

    for (;;) {
        long long now = mono_ms();
        if (draining && now >= drain_min_ms &&
            (turns_in_flight() == 0 || now >= drain_deadline_ms)) {
            history("restart reason=%s interrupted=%u detached=%d", drain_reason,
                    turns_in_flight(), detached_restart);
            if (detached_restart) {
                spawn_detached_replacement();
                return finish(0);
            }
            return finish(EXIT_RESTART);
        }
        if (wd_on && !wd_stopped && now >= wd_next_ms) {
            watchdog_send("WATCHDOG=1");
            wd_next_ms = now + wd_interval_ms;
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
        /* Idle means no timer: a wake-up only while draining or pinging. */
        int timeout = -1;
        if (draining) {
            long long left = drain_deadline_ms - now;
            if (drain_min_ms - now > left)
                left = drain_min_ms - now;
            timeout = left < 0 ? 0 : left > 1000 ? 1000 : (int)left;
        }
        if (wd_on && !wd_stopped) {
            long long left = wd_next_ms - now;
            int t = left < 0 ? 0 : (int)left;
            if (timeout < 0 || t < timeout)
                timeout = t;
        }
        if (poll(pf, n, timeout) < 0) {
            if (errno == EINTR)
                continue;
            return finish(3);
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
                    /* Always the service path, marker or not. */
                    request_restart("signal");
                } else if (si.ssi_signo == SIGINT) {
                    history("stop signal=%u", si.ssi_signo);
                    return finish(0);
                } else {
                    /* Measured on 0.18.2: 1 once start-up has settled, 0
                     * within about a second of the first healthy answer. */
                    history("stop signal=%u", si.ssi_signo);
                    return finish(mono_ms() - healthy_ms < 1000 ? 0 : 1);
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
