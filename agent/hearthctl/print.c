/* hearthctl output: guest text escaped for a host terminal, the service
 * and mount tables, and one printer per command for its human form (the
 * --json form is the reply as it is). */
#include "ctl.h"
#include "prom.h"
#include "termsafe.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The same into a bounded buffer; a cut text ends in "...". */
void print_safe_copy(char *dst, size_t n, const char *s)
{
    size_t len = strlen(s);

    if (termsafe_copy(dst, n, s, len, 0) >= n && n >= 4) {
        termsafe_copy(dst, n - 3, s, len, 0);
        strcat(dst, "...");
    }
}

const char *print_jstr(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

    return cJSON_IsString(v) && v->valuestring ? v->valuestring : NULL;
}

bool print_jnum(const cJSON *obj, const char *key, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return false;
    *out = v->valuedouble;
    return true;
}

/* An integer-valued JSON number as text, or "-". */
static void fmt_int(char *buf, size_t n, const cJSON *obj, const char *key)
{
    double d;

    if (print_jnum(obj, key, &d) && fabs(d) < 9e15)
        snprintf(buf, n, "%lld", (long long)d);
    else
        snprintf(buf, n, "-");
}

/* 850ms, 12s, 3m12s, 2h05m, 3d04h. */
static void fmt_duration(char *buf, size_t n, double ms)
{
    unsigned long long s;

    if (!isfinite(ms) || ms < 0 || ms > 1e15) {
        snprintf(buf, n, "-");
        return;
    }
    if (ms < 1000) {
        snprintf(buf, n, "%llums", (unsigned long long)ms);
        return;
    }
    s = (unsigned long long)(ms / 1000);
    if (s < 60)
        snprintf(buf, n, "%llus", s);
    else if (s < 3600)
        snprintf(buf, n, "%llum%02llus", s / 60, s % 60);
    else if (s < 86400)
        snprintf(buf, n, "%lluh%02llum", s / 3600, (s / 60) % 60);
    else
        snprintf(buf, n, "%llud%02lluh", s / 86400, (s / 3600) % 24);
}

/* ---- output ----------------------------------------------------------- */

int print_flush_stdout(void)
{
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "hearthctl: unable to write output: %s\n", strerror(errno));
        return EXIT_USAGE;
    }
    return 0;
}

/* --json, and the replies without a printer of their own: JSON escapes
 * everything but the C1 controls and broken UTF-8, which cJSON passes as
 * they are; termsafe_json escapes those too, so the text is as safe to
 * print as the human forms. */
int print_json(const cJSON *j, bool pretty)
{
    char *s = pretty ? cJSON_Print(j) : cJSON_PrintUnformatted(j);
    char *safe = s ? termsafe_json(s) : NULL;

    if (!safe)
        base_die_oom();
    fputs(safe, stdout);
    fputc('\n', stdout);
    cJSON_free(s);
    free(safe);
    return 0;
}

enum { COL_NAME, COL_STATE, COL_PID, COL_RESTARTS, COL_EXIT, COL_HEALTH, COL_SINCE, NCOLS };

static const char *const col_head[NCOLS] = {"NAME",      "STATE",  "PID", "RESTARTS",
                                            "LAST-EXIT", "HEALTH", "SINCE"};

/* SINCE: since_ms is how long the service has been in its state. */
static void service_cells(const cJSON *svc, char cells[NCOLS][CELL_MAX])
{
    const char *name = print_jstr(svc, "name"), *state = print_jstr(svc, "state");
    const cJSON *ex = cJSON_GetObjectItemCaseSensitive(svc, "last_exit");
    double pid, since, code;

    print_safe_copy(cells[COL_NAME], CELL_MAX, name ? name : "?");
    print_safe_copy(cells[COL_STATE], CELL_MAX, state ? state : "?");
    if (print_jnum(svc, "pid", &pid) && pid > 0 && pid < 1e10)
        snprintf(cells[COL_PID], CELL_MAX, "%lld", (long long)pid);
    else
        snprintf(cells[COL_PID], CELL_MAX, "-");
    fmt_int(cells[COL_RESTARTS], CELL_MAX, svc, "restarts");
    if (cJSON_IsObject(ex) && print_jstr(ex, "signal"))
        print_safe_copy(cells[COL_EXIT], CELL_MAX, print_jstr(ex, "signal"));
    else if (cJSON_IsObject(ex) && print_jnum(ex, "code", &code) && fabs(code) < 1e10)
        snprintf(cells[COL_EXIT], CELL_MAX, "exit %lld", (long long)code);
    else
        snprintf(cells[COL_EXIT], CELL_MAX, "-");
    /* HEALTH: the health check's status, "-" for a service without one. */
    const char *hs = print_jstr(cJSON_GetObjectItemCaseSensitive(svc, "health"), "status");
    print_safe_copy(cells[COL_HEALTH], CELL_MAX, hs ? hs : "-");
    if (!print_jnum(svc, "since_ms", &since) || since < 0)
        snprintf(cells[COL_SINCE], CELL_MAX, "-");
    else
        fmt_duration(cells[COL_SINCE], CELL_MAX, since);
}

static void print_row(const size_t *width, const char *const *cells)
{
    for (int i = 0; i + 1 < NCOLS; i++)
        printf("%-*s  ", (int)width[i], cells[i]);
    printf("%s\n", cells[NCOLS - 1]);
}

/* Two passes over the array (widths, then rows) instead of storing rows:
 * the number of services is not bounded here. */
static void print_service_table(const cJSON *services)
{
    size_t width[NCOLS];
    char cells[NCOLS][CELL_MAX];
    const cJSON *svc;
    int rows = 0;

    for (int i = 0; i < NCOLS; i++)
        width[i] = strlen(col_head[i]);
    if (cJSON_IsArray(services)) {
        cJSON_ArrayForEach(svc, services)
        {
            if (!cJSON_IsObject(svc))
                continue;
            service_cells(svc, cells);
            for (int i = 0; i < NCOLS; i++)
                if (strlen(cells[i]) > width[i])
                    width[i] = strlen(cells[i]);
            rows++;
        }
    }
    if (rows == 0) {
        puts("no services");
        return;
    }
    print_row(width, col_head);
    cJSON_ArrayForEach(svc, services)
    {
        const char *row[NCOLS];

        if (!cJSON_IsObject(svc))
            continue;
        service_cells(svc, cells);
        for (int i = 0; i < NCOLS; i++)
            row[i] = cells[i];
        print_row(width, row);
    }
}

/* After the table, one line per privileged service with its reasons: a
 * service that can undo the sandbox's setup should not hide in a column. */
static void print_privileged(const cJSON *services)
{
    const cJSON *svc;

    if (!cJSON_IsArray(services))
        return;
    cJSON_ArrayForEach(svc, services)
    {
        const cJSON *why = cJSON_GetObjectItemCaseSensitive(svc, "privileged_reasons");
        const cJSON *r;
        char name[CELL_MAX];
        bool first = true;

        if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(svc, "privileged")))
            continue;
        print_safe_copy(name, sizeof(name), print_jstr(svc, "name") ? print_jstr(svc, "name") : "?");
        printf("privileged: %s", name);
        cJSON_ArrayForEach(r, why)
        {
            char text[CELL_MAX];
            if (!cJSON_IsString(r))
                continue;
            print_safe_copy(text, sizeof(text), r->valuestring);
            printf("%s%s", first ? " (" : ", ", text);
            first = false;
        }
        puts(first ? "" : ")");
    }
}

/* A notification value: bare when it is a plain word, else JSON. */
static void put_value(const cJSON *v)
{
    char *s;

    if (cJSON_IsString(v) && v->valuestring && v->valuestring[0]) {
        bool plain = true;

        for (const unsigned char *p = (const unsigned char *)v->valuestring; *p; p++)
            if (*p <= ' ' || *p == '"' || *p == '=' || *p == '\\' || *p == 0x7f)
                plain = false;
        if (plain && termsafe_clean(v->valuestring, strlen(v->valuestring), 0)) {
            fputs(v->valuestring, stdout);
            return;
        }
    }
    s = cJSON_PrintUnformatted(v);
    if (!s)
        base_die_oom();
    base_put_safe(stdout, s);
    cJSON_free(s);
}

static void print_log_line(const cJSON *l)
{
    const char *wall = print_jstr(l, "wall"), *stream = print_jstr(l, "stream"), *text = print_jstr(l, "line");
    double tms;

    if (wall)
        base_put_safe(stdout, wall);
    else if (print_jnum(l, "t_ms", &tms))
        printf("+%.3fs", tms / 1000);
    else
        fputc('-', stdout);
    fputc(' ', stdout);
    base_put_safe(stdout, stream ? stream : "-");
    fputc(' ', stdout);
    /* The body keeps its tabs, as the service wrote them. */
    base_put_text(stdout, text ? text : "", TERMSAFE_TAB);
    fputc('\n', stdout);
}

/* ---- printers --------------------------------------------------------- */

int print_ping(struct ctl *t, const cJSON *res)
{
    printf("pong (%.3f ms)\n", t->rtt_ms);
    return 0;
}

int print_version(struct ctl *t, const cJSON *res)
{
    const char *ver = print_jstr(res, "version");
    const cJSON *feat = cJSON_GetObjectItemCaseSensitive(res, "features");
    const cJSON *f;
    double proto;
    int n = 0;

    fputs("hearth ", stdout);
    base_put_safe(stdout, ver ? ver : "?");
    if (print_jnum(res, "protocol", &proto) && fabs(proto) < 1e10)
        printf(" (protocol %lld)", (long long)proto);
    fputs("\nfeatures:", stdout);
    if (cJSON_IsArray(feat)) {
        cJSON_ArrayForEach(f, feat)
        {
            if (!cJSON_IsString(f))
                continue;
            fputc(' ', stdout);
            base_put_safe(stdout, f->valuestring);
            n++;
        }
    }
    puts(n ? "" : " none");
    return 0;
}

int print_status(struct ctl *t, const cJSON *res)
{
    static const char *const keys[] = {"hostname", "mode", "phase"};
    double up, clients;
    bool have_up = print_jnum(res, "uptime_ms", &up);
    const char *ver = print_jstr(res, "version");
    char d[32];

    fputs("hearth ", stdout);
    base_put_safe(stdout, ver ? ver : "?");
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        const char *v = print_jstr(res, keys[i]);

        printf("  %s ", keys[i]);
        base_put_safe(stdout, v ? v : "?");
    }
    if (have_up) {
        fmt_duration(d, sizeof(d), up);
        printf("  uptime %s", d);
    }
    if (print_jnum(res, "clients", &clients) && clients >= 0 && clients < 1e10)
        printf("  clients %lld", (long long)clients);
    const char *sb = print_jstr(cJSON_GetObjectItemCaseSensitive(res, "sandbox"), "state");
    if (sb) {
        fputs("  sandbox ", stdout);
        base_put_safe(stdout, sb);
    }
    const cJSON *lr = cJSON_GetObjectItemCaseSensitive(res, "last_resume");
    const char *cause = print_jstr(lr, "cause");
    double lr_ms;
    if (cause && print_jnum(lr, "total_ms", &lr_ms)) {
        fputs("\nlast resume: ", stdout);
        base_put_safe(stdout, cause);
        printf(", %.3f ms%s", lr_ms, cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(lr, "ok"))
                                         ? ", a step failed" : "");
        /* The identity that resume drew: what tells this copy apart. */
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(res, "identity");
        const char *iid = print_jstr(id, "instance_id");
        double gen;
        if (iid && print_jnum(id, "generation", &gen) && gen >= 0 && gen < 1e15) {
            printf(", generation %lld, instance ", (long long)gen);
            base_put_safe(stdout, iid);
        }
    }
    fputs("\n", stdout);
    /* A required mount that failed holds services back: say so up front. */
    const cJSON *mounts = cJSON_GetObjectItemCaseSensitive(res, "mounts");
    double failed;
    if (print_jnum(mounts, "failed", &failed) && failed > 0 && failed < 1e6) {
        const char *merr = print_jstr(mounts, "error");
        printf("mounts: %lld required failed: ", (long long)failed);
        base_put_safe(stdout, merr ? merr : "?");
        fputc('\n', stdout);
    }
    /* So do the platform's mounts that are not there yet. */
    const cJSON *wf = cJSON_GetObjectItemCaseSensitive(mounts, "waiting_for"), *w, *l;
    cJSON_ArrayForEach(w, wf) {
        if (!cJSON_IsString(w))
            continue;
        bool late = false;
        cJSON_ArrayForEach(l, cJSON_GetObjectItemCaseSensitive(mounts, "late"))
            late |= cJSON_IsString(l) && strcmp(l->valuestring, w->valuestring) == 0;
        fputs("mounts: waiting for the platform to mount ", stdout);
        base_put_safe(stdout, w->valuestring);
        fputs(late ? " (late)\n" : "\n", stdout);
    }
    /* And those there whose root is still being given its owner. */
    cJSON_ArrayForEach(w, cJSON_GetObjectItemCaseSensitive(mounts, "owning")) {
        if (!cJSON_IsString(w))
            continue;
        fputs("mounts: giving ", stdout);
        base_put_safe(stdout, w->valuestring);
        fputs(" its owner (the share has not answered yet)\n", stdout);
    }
    fputc('\n', stdout);
    print_service_table(cJSON_GetObjectItemCaseSensitive(res, "services"));
    print_privileged(cJSON_GetObjectItemCaseSensitive(res, "services"));
    return 0;
}

int print_services(struct ctl *t, const cJSON *res)
{
    print_service_table(cJSON_GetObjectItemCaseSensitive(res, "services"));
    print_privileged(cJSON_GetObjectItemCaseSensitive(res, "services"));
    return 0;
}

int print_state(struct ctl *t, const cJSON *res)
{
    const char *state = print_jstr(res, "state");

    base_put_safe(stdout, state ? state : "ok");
    fputc('\n', stdout);
    return 0;
}

int print_logs(struct ctl *t, const cJSON *res)
{
    const cJSON *lines = cJSON_GetObjectItemCaseSensitive(res, "lines"), *l;

    if (cJSON_IsArray(lines)) {
        cJSON_ArrayForEach(l, lines)
        {
            if (cJSON_IsObject(l))
                print_log_line(l);
        }
    }
    return 0;
}

int print_events(struct ctl *t, const cJSON *res)
{
    return 0; /* the subscription reply carries nothing to show */
}

int print_shutdown(struct ctl *t, const cJSON *res)
{
    /* The action hearth will take: a container exits whatever was asked. */
    const char *a = print_jstr(res, "action");
    fputs("shutting down (", stdout);
    base_put_safe(stdout, a ? a : t->arg);
    fputs(")\n", stdout);
    return 0;
}

#define PATH_CELL 4096 /* mount paths are shown whole, not cut like names */

static void print_mount_row(const char *target, const char *type, const char *src,
                            const char *state, const char *err, int wt, int wy, int wsrc)
{
    printf("%-*s  %-*s  %-*s  %s", wt, target, wy, type, wsrc, src, state);
    if (err && *err) {
        fputs("  ", stdout);
        base_put_safe(stdout, err);
    }
    fputc('\n', stdout);
}

static void mount_cells(const cJSON *m, char c[3][PATH_CELL])
{
    print_safe_copy(c[0], PATH_CELL, print_jstr(m, "target") ? print_jstr(m, "target") : "?");
    print_safe_copy(c[1], PATH_CELL, print_jstr(m, "type") ? print_jstr(m, "type") : "?");
    /* A platform mount has no source of hearth's: what is mounted there. */
    const char *src = print_jstr(m, "source") ? print_jstr(m, "source") : print_jstr(m, "mounted_from");
    print_safe_copy(c[2], PATH_CELL, src ? src : "");
}

int print_mounts(struct ctl *t, const cJSON *res)
{
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(res, "mounts"), *m;
    int w[3] = {6, 4, 6}, rows = 0;
    static char c[3][PATH_CELL];

    cJSON_ArrayForEach(m, list) {
        mount_cells(m, c);
        for (int i = 0; i < 3; i++)
            if ((int)strlen(c[i]) > w[i])
                w[i] = (int)strlen(c[i]);
        rows++;
    }
    if (!rows) {
        puts("no mounts");
        return 0;
    }
    print_mount_row("TARGET", "TYPE", "SOURCE", "STATE", NULL, w[0], w[1], w[2]);
    cJSON_ArrayForEach(m, list) {
        char state[CELL_MAX];
        const cJSON *ro = cJSON_GetObjectItemCaseSensitive(m, "read_only");
        mount_cells(m, c);
        print_safe_copy(state, 32, print_jstr(m, "state") ? print_jstr(m, "state") : "?");
        if (cJSON_IsTrue(ro))
            strcat(state, " (ro)");
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "late")))
            strcat(state, " (late)");
        print_mount_row(c[0], c[1], c[2], state, print_jstr(m, "error"), w[0], w[1], w[2]);
    }
    return 0;
}

static void print_names(const char *label, const cJSON *arr)
{
    const cJSON *n;
    int count = cJSON_GetArraySize(arr), shown = 0;

    printf("%-9s %d", label, count);
    cJSON_ArrayForEach(n, arr) {
        /* A path, or a skill {path, name[, by]}: its path, the name
         * when it is not the directory's, and what wins over it. */
        const char *path = cJSON_IsString(n) ? n->valuestring : print_jstr(n, "path");
        const char *name = print_jstr(n, "name"), *by = print_jstr(n, "by");
        if (!path)
            continue;
        /* A few names tell the story; --json has them all. */
        if (shown++ == 8) {
            fputs(" ...", stdout);
            break;
        }
        fputs(shown == 1 ? ": " : " ", stdout);
        base_put_safe(stdout, path);
        const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
        if (name && strcmp(name, base) != 0) {
            fputs(" (", stdout);
            base_put_safe(stdout, name);
            fputc(')', stdout);
        }
        if (by) {
            fputs(" <- ", stdout);
            base_put_safe(stdout, by);
        }
    }
    fputc('\n', stdout);
}

static void print_sync(const cJSON *last)
{
    double runs = 0, v;
    const char *trig = print_jstr(last, "trigger"), *err = print_jstr(last, "error");

    print_jnum(last, "runs", &runs);
    if (runs <= 0) {
        puts("last sync: never");
    } else {
        fputs("last sync: ", stdout);
        base_put_safe(stdout, trig ? trig : "?");
        static const char *const keys[] = {"linked", "created", "removed", "shadowed",
                                           "clashes", "ignored", "errors"};
        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
            if (print_jnum(last, keys[i], &v) && v >= 0 && v < 1e10)
                printf(", %s %lld", keys[i], (long long)v);
        if (print_jnum(last, "duration_us", &v) && v >= 0 && v < 1e12)
            printf(" in %.3f ms", v / 1000.0);
        fputc('\n', stdout);
    }
    if (err) {
        fputs("error: ", stdout);
        base_put_safe(stdout, err);
        fputc('\n', stdout);
    }
}

int print_skills(struct ctl *t, const cJSON *res)
{
    const char *pub = print_jstr(res, "public_dir"), *priv = print_jstr(res, "private_dir");

    fputs("public   ", stdout);
    base_put_safe(stdout, pub ? pub : "?");
    fputs("\nprivate  ", stdout);
    base_put_safe(stdout, priv ? priv : "?");
    fputc('\n', stdout);
    print_names("public", cJSON_GetObjectItemCaseSensitive(res, "public"));
    print_names("linked", cJSON_GetObjectItemCaseSensitive(res, "linked"));
    print_names("shadowed", cJSON_GetObjectItemCaseSensitive(res, "shadowed"));
    if (cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(res, "clashes")) > 0)
        print_names("clashes", cJSON_GetObjectItemCaseSensitive(res, "clashes"));
    print_names("private", cJSON_GetObjectItemCaseSensitive(res, "private"));
    print_names("ignored", cJSON_GetObjectItemCaseSensitive(res, "ignored"));
    print_sync(cJSON_GetObjectItemCaseSensitive(res, "last"));
    return 0;
}

int print_skills_sync(struct ctl *t, const cJSON *res)
{
    print_sync(res);
    return 0;
}

int print_forked(struct ctl *t, const cJSON *res)
{
    fputs("forked ", stdout);
    base_put_safe(stdout, t->arg ? t->arg : "?");
    puts(": now a private copy");
    return 0;
}

void print_note_event(struct ctl *t, const cJSON *p)
{
    const char *type = print_jstr(p, "type");
    const cJSON *kv;
    double seq;

    if (print_jnum(p, "seq", &seq) && fabs(seq) < 9e15)
        printf("%lld ", (long long)seq);
    else
        fputs("- ", stdout);
    base_put_safe(stdout, type ? type : "?");
    cJSON_ArrayForEach(kv, p)
    {
        if (!kv->string || strcmp(kv->string, "seq") == 0 || strcmp(kv->string, "type") == 0)
            continue;
        fputc(' ', stdout);
        base_put_safe(stdout, kv->string);
        fputc('=', stdout);
        put_value(kv);
    }
    fputc('\n', stdout);
}

void print_note_log(struct ctl *t, const cJSON *p)
{
    print_log_line(p);
}

/* A freeze or resume report: one line per step, then the total. */
int print_steps(struct ctl *t, const cJSON *res)
{
    const cJSON *steps = cJSON_GetObjectItemCaseSensitive(res, "steps"), *s;
    double total = 0;

    cJSON_ArrayForEach(s, steps) {
        const char *name = print_jstr(s, "name"), *result = print_jstr(s, "result"), *d = print_jstr(s, "detail");
        double ms = 0;
        char nb[32], rb[16];
        print_jnum(s, "ms", &ms);
        print_safe_copy(nb, sizeof(nb), name ? name : "?");
        print_safe_copy(rb, sizeof(rb), result ? result : "?");
        printf("%-10s %-8s %8.3f ms", nb, rb, ms);
        if (d) {
            fputs("  ", stdout);
            base_put_safe(stdout, d);
        }
        fputc('\n', stdout);
    }
    print_jnum(res, "total_ms", &total);
    printf("total %.3f ms", total);
    const char *st = print_jstr(res, "state");
    if (st) {
        fputs(", sandbox ", stdout);
        base_put_safe(stdout, st);
    }
    fputc('\n', stdout);
    return 0;
}

int print_init(struct ctl *t, const cJSON *res)
{
    const cJSON *v;

    cJSON_ArrayForEach(v, res) {
        char *txt = cJSON_IsString(v) ? NULL : cJSON_PrintUnformatted(v);
        base_put_safe(stdout, v->string ? v->string : "?");
        fputs(": ", stdout);
        base_put_safe(stdout, txt ? txt : (v->valuestring ? v->valuestring : ""));
        fputc('\n', stdout);
        free(txt);
    }
    return 0;
}

static void put_cidrs(const char *label, const cJSON *arr)
{
    const cJSON *it;
    printf("%-10s", label);
    if (!cJSON_GetArraySize(arr))
        fputs(" -", stdout);
    cJSON_ArrayForEach(it, arr) {
        if (cJSON_IsString(it)) {
            putchar(' ');
            base_put_safe(stdout, it->valuestring);
        }
    }
    putchar('\n');
}

/* One row per rule counter; nested objects that are not counters (the
 * netdev chains' table) are skipped. */
static void p_counters(const cJSON *ctr, const char *head)
{
    const cJSON *it;
    printf("%-12s %12s %14s\n", head, "PACKETS", "BYTES");
    cJSON_ArrayForEach(it, ctr) {
        const cJSON *pk = cJSON_GetObjectItemCaseSensitive(it, "packets");
        const cJSON *by = cJSON_GetObjectItemCaseSensitive(it, "bytes");
        if (!cJSON_IsNumber(pk))
            continue;
        char name[33];
        print_safe_copy(name, sizeof(name), it->string ? it->string : "?");
        printf("%-12s %12.0f %14.0f\n", name, pk->valuedouble,
               cJSON_IsNumber(by) ? by->valuedouble : 0);
    }
}

int print_egress(struct ctl *t, const cJSON *res)
{
    const cJSON *pol = cJSON_GetObjectItemCaseSensitive(res, "policy");
    const cJSON *ctr = cJSON_GetObjectItemCaseSensitive(res, "counters"), *it;
    const char *err = print_jstr(res, "error");

    if (!pol) {
        puts("no egress policy");
        return 0;
    }
    printf("applied   %s\n", cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res, "applied")) ? "yes" : "no");
    if (err) {
        fputs("error     ", stdout);
        base_put_safe(stdout, err);
        putchar('\n');
    }
    printf("public    %s\n",
           cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(pol, "allowPublicTraffic")) ? "on" : "off");
    put_cidrs("allowOut", cJSON_GetObjectItemCaseSensitive(pol, "allowOut"));
    put_cidrs("denyOut", cJSON_GetObjectItemCaseSensitive(pol, "denyOut"));
    put_cidrs("always", cJSON_GetObjectItemCaseSensitive(res, "alwaysAllowed"));
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res, "repaired")))
        puts("repaired  yes (the ruleset had changed)");
    const cJSON *lay = cJSON_GetObjectItemCaseSensitive(res, "layers");
    if (lay) {
        const cJSON *nd = cJSON_GetObjectItemCaseSensitive(lay, "netdev");
        printf("layers    inet %s, owner %s, watch %s, replies %s, netdev",
               cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(lay, "inet")) ? "yes" : "no",
               cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(lay, "owner")) ? "yes" : "no",
               cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(lay, "watch")) ? "yes" : "no",
               cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(lay, "replies")) ? "yes" : "no");
        if (cJSON_GetArraySize(nd) == 0)
            fputs(" -", stdout);
        cJSON_ArrayForEach(it, nd) {
            putchar(' ');
            base_put_safe(stdout, cJSON_GetStringValue(it) ? cJSON_GetStringValue(it) : "?");
        }
        putchar('\n');
    }
    if (ctr) {
        p_counters(ctr, "RULE");
        const cJSON *nd = cJSON_GetObjectItemCaseSensitive(ctr, "netdev");
        if (cJSON_IsObject(nd))
            p_counters(nd, "NETDEV RULE");
    }
    return 0;
}

/* JSON by default (the reply as it is); --prometheus: the exposition
 * format a node exporter's textfile collector or a scraper reads. */
int print_metrics(struct ctl *t, const cJSON *res)
{
    if (t->arg && strcmp(t->arg, "prometheus") == 0) {
        if (prom_write(stdout, res) < 0)
            return base_bad_reply(t, "metrics: expected an object");
        return 0;
    }
    return print_json(res, true);
}
