/* modules: finit_module(2) with dependencies from modules.dep. */
#include "modules.h"

#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "err.h"
#include "lines.h"
#include "log.h"

#define MAX_RESULTS 64
#define LINE_MAX_LEN 8192

struct result {
    char name[64];
    const char *state;
    char error[160];
};

static struct result results[MAX_RESULTS];
static size_t nresults;

/* Module names compare with '-' and '_' as one character, as the kernel's
 * module loader does. */
static bool name_eq(const char *a, size_t alen, const char *b)
{
    size_t blen = strlen(b);
    if (alen != blen)
        return false;
    for (size_t i = 0; i < alen; i++) {
        char x = a[i] == '-' ? '_' : a[i];
        char y = b[i] == '-' ? '_' : b[i];
        if (x != y)
            return false;
    }
    return true;
}

/* The module name of "kernel/fs/9p/9p.ko[.xz]": "9p". */
static void path_module(const char *path, size_t len, const char **name, size_t *nlen)
{
    const char *s = path;
    for (size_t i = 0; i < len; i++)
        if (path[i] == '/')
            s = path + i + 1;
    const char *e = path + len;
    const char *ko = NULL;
    for (const char *p = s; p + 3 <= e; p++)
        if (!strncmp(p, ".ko", 3) && (p + 3 == e || p[3] == '.'))
            ko = p;
    *name = s;
    *nlen = (size_t)((ko ? ko : e) - s);
}

struct each {
    int (*fn)(char *line, void *ctx);
    void *ctx;
};

/* An over-long line is skipped whole, never half-parsed. */
static int each_whole(char *line, bool whole, void *ctx)
{
    struct each *w = ctx;
    return whole ? w->fn(line, w->ctx) : 0;
}

/* Calls FN on each line of FILE (a bounded buffer); FN returning non-zero
 * stops the walk with that value. */
static int each_line(const char *file, int (*fn)(char *line, void *ctx), void *ctx)
{
    char *line = malloc(LINE_MAX_LEN);
    if (!line) {
        errno = ENOMEM;
        return -1;
    }
    struct each w = {fn, ctx};
    int rc = lines_each(file, line, LINE_MAX_LEN, each_whole, &w), e = errno;
    free(line);
    errno = e;
    return rc;
}

struct find {
    const char *name;
    const char *dir;
    char (*paths)[256];
    size_t max, n;
    int status; /* 0 none, 1 found, -1 too many */
};

static int add_path(struct find *f, const char *rel, size_t len)
{
    if (f->n >= f->max)
        return -1;
    /* Relative entries are under DIR; depmod writes absolute ones for
     * modules outside it. */
    bool abs = len && rel[0] == '/';
    int w = snprintf(f->paths[f->n], sizeof(f->paths[0]), "%s%s%.*s", abs ? "" : f->dir,
                     abs ? "" : "/", (int)len, rel);
    if (w < 0 || (size_t)w >= sizeof(f->paths[0]))
        return -1;
    f->n++;
    return 0;
}

/* "kernel/a.ko: kernel/b.ko kernel/c.ko": modprobe loads the list right to
 * left (c, b), then a. */
static int on_dep_line(char *line, void *ctx)
{
    struct find *f = ctx;
    char *colon = strchr(line, ':');
    if (!colon)
        return 0;
    const char *mn;
    size_t ml;
    path_module(line, (size_t)(colon - line), &mn, &ml);
    if (!name_eq(mn, ml, f->name))
        return 0;
    const char *tok[MODULES_MAX_DEPS];
    size_t toklen[MODULES_MAX_DEPS], nt = 0;
    char *p = colon + 1;
    while (*p) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (!*p)
            break;
        char *s = p;
        while (*p && *p != ' ' && *p != '\t')
            p++;
        if (nt == MODULES_MAX_DEPS) {
            f->status = -1;
            return 1;
        }
        tok[nt] = s;
        toklen[nt++] = (size_t)(p - s);
    }
    for (size_t i = nt; i > 0; i--)
        if (add_path(f, tok[i - 1], toklen[i - 1]) < 0) {
            f->status = -1;
            return 1;
        }
    if (add_path(f, line, (size_t)(colon - line)) < 0) {
        f->status = -1;
        return 1;
    }
    f->status = 1;
    return 1;
}

static int on_builtin_line(char *line, void *ctx)
{
    const char *mn;
    size_t ml;
    path_module(line, strlen(line), &mn, &ml);
    return name_eq(mn, ml, ctx) ? 1 : 0;
}

int modules_resolve(const char *dir, const char *name, char paths[][256], size_t max,
                    struct err *err)
{
    char file[300];
    struct find f = {.name = name, .dir = dir, .paths = paths, .max = max};

    snprintf(file, sizeof(file), "%s/modules.dep", dir);
    int rc = each_line(file, on_dep_line, &f);
    if (rc < 0 && errno != ENOENT)
        return err_unable(err, errno, "read %s", file);
    if (f.status == 1)
        return (int)f.n;
    if (f.status < 0)
        return err_set(err, "more than %zu dependencies in %s", max - 1, file);
    snprintf(file, sizeof(file), "%s/modules.builtin", dir);
    if (each_line(file, on_builtin_line, (void *)name) == 1)
        return 0;
    return err_set(err, "not found in %s/modules.dep", dir);
}

static int on_proc_modules(char *line, void *ctx)
{
    const char *name = ctx;
    size_t l = strcspn(line, " ");
    return name_eq(line, l, name) ? 1 : 0;
}

static bool is_loaded(const char *name)
{
    return each_line("/proc/modules", on_proc_modules, (void *)name) == 1;
}

/* Loads one file; EEXIST (loaded meanwhile, or a dependency two modules
 * share) is success. */
static int load_file(const char *path, struct err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return err_unable(err, errno, "open %s", path);
    long rc = syscall(SYS_finit_module, fd, "", 0);
    int e = errno;
    close(fd);
    if (rc < 0 && e != EEXIST)
        return err_unable(err, e, "load %s", path);
    return 0;
}

static struct result *result_add(const char *name)
{
    if (nresults == MAX_RESULTS)
        return NULL;
    struct result *r = &results[nresults++];
    memset(r, 0, sizeof(*r));
    snprintf(r->name, sizeof(r->name), "%s", name);
    return r;
}

int modules_load(const char *dir, char *const *names, size_t n)
{
    char defdir[256];
    struct utsname u;
    int failed = 0;

    nresults = 0;
    if (!n)
        return 0;
    if (!dir) {
        if (uname(&u) < 0) {
            log_error("modules: unable to read the kernel release (uname): %s", strerror(errno));
            return (int)n;
        }
        snprintf(defdir, sizeof(defdir), "/lib/modules/%s", u.release);
        dir = defdir;
    }
    char (*paths)[256] = malloc(sizeof(*paths) * (MODULES_MAX_DEPS + 1));
    if (!paths) {
        log_error("modules: unable to load modules: out of memory");
        return (int)n;
    }
    for (size_t i = 0; i < n; i++) {
        struct result tmp, *r = result_add(names[i]);
        if (!r)
            r = &tmp;
        struct err err = {0};
        if (is_loaded(names[i])) {
            r->state = "present";
            continue;
        }
        int np = modules_resolve(dir, names[i], paths, MODULES_MAX_DEPS + 1, &err);
        if (np == 0) {
            r->state = "builtin";
            continue;
        }
        int ok = np > 0;
        for (int k = 0; ok && k < np; k++)
            if (load_file(paths[k], &err) < 0)
                ok = 0;
        if (ok) {
            r->state = "loaded";
            log_info("module %s loaded (%d file%s)", names[i], np, np == 1 ? "" : "s");
        } else {
            r->state = "failed";
            snprintf(r->error, sizeof(r->error), "%s", err.msg);
            log_error("module %s: %s", names[i], err.msg);
            failed++;
        }
    }
    free(paths);
    return failed;
}

cJSON *modules_json(void)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < nresults; i++) {
        cJSON *o = cJSON_CreateObject();
        if (!o)
            break;
        cJSON_AddStringToObject(o, "name", results[i].name);
        cJSON_AddStringToObject(o, "state", results[i].state);
        if (results[i].error[0])
            cJSON_AddStringToObject(o, "error", results[i].error);
        cJSON_AddItemToArray(a, o);
    }
    return a;
}
