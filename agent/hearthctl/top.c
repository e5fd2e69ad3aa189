/* hearthctl top: one row per sandbox from `status` and `metrics` (phase,
 * services running/total, restarts, busy/idle, CPU between refreshes,
 * service memory, the fullest writable mount, egress bytes), redrawn in
 * place on a terminal or printed once. */
#include "fleet.h"
#include "utf8.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>


#define TOP_DEFAULT_TIMEOUT_MS 2000
#define TOP_DEFAULT_DELAY_MS 2000
#define CELL 48 /* one cell, bytes incl. NUL (the target and errors: wider) */
#define WIDE 512

enum { C_TARGET, C_PHASE, C_SVC, C_RESTARTS, C_ACT, C_CPU, C_MEM, C_DISK, C_EGRESS, NCOL };

static const char *const head[NCOL] = {"TARGET", "PHASE", "SVC", "RESTARTS", "ACT",
                                       "CPU",    "MEM",   "DISK", "EGRESS"};

/* What a target keeps between refreshes: the CPU sample a delta needs. */
struct sample {
    bool have;
    double cpu_usec;
    int64_t at_ns;
};

struct row {
    char target[WIDE];
    char cell[NCOL][CELL];
    char failure[WIDE]; /* non-empty: the row is this text after TARGET */
};

struct opts {
    int delay_ms, timeout_ms;
    long iterations; /* 0: until Ctrl-C */
    bool once, json;
    bool redraw; /* a terminal: each frame drawn over the last */
};

/* Guest text into a cell, escaped by the one escaper (print_safe_copy), so a
 * sandbox cannot move the cursor of the host's terminal. */
static void cell_copy(char *dst, size_t n, const char *s)
{
    print_safe_copy(dst, n, s ? s : "");
}

static const cJSON *item(const cJSON *o, const char *k)
{
    return cJSON_GetObjectItemCaseSensitive(o, k);
}

static bool num(const cJSON *o, const char *k, double *v)
{
    const cJSON *j = item(o, k);

    if (!cJSON_IsNumber(j) || !isfinite(j->valuedouble))
        return false;
    *v = j->valuedouble;
    return true;
}

static void fmt_bytes(char *buf, size_t n, double v)
{
    static const char unit[] = "KMGTP";
    int u = -1;

    if (v < 1024) {
        snprintf(buf, n, "%.0fB", v);
        return;
    }
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    snprintf(buf, n, v < 10 ? "%.1f%c" : "%.0f%c", v, unit[u]);
}

/* Bytes through the egress chain, loopback left out: the traffic a
 * sandbox tried to send, allowed or refused. NaN without counters. */
static double egress_bytes(const cJSON *metrics)
{
    const cJSON *ctr = item(item(metrics, "egress"), "counters"), *c;
    double sum = 0, b;
    bool any = false;

    if (!cJSON_IsObject(ctr))
        return NAN;
    cJSON_ArrayForEach(c, ctr) {
        if (!c->string || strcmp(c->string, "loopback") == 0 || strcmp(c->string, "netdev") == 0)
            continue;
        if (num(c, "bytes", &b)) {
            sum += b;
            any = true;
        }
    }
    return any ? sum : NAN;
}

/* The fullest writable mount that has figures; NaN when none. */
static double worst_disk(const cJSON *metrics, bool *low)
{
    const cJSON *m;
    double worst = NAN, p;

    *low = false;
    cJSON_ArrayForEach(m, item(metrics, "mounts")) {
        if (cJSON_IsTrue(item(m, "read_only")) || !num(m, "used_percent", &p))
            continue;
        if (isnan(worst) || p > worst)
            worst = p;
        if (cJSON_IsTrue(item(m, "low")))
            *low = true;
    }
    return worst;
}

/* Service figures summed from metrics; false when none had the figure. */
static bool sum_services(const cJSON *metrics, const char *k, double *out)
{
    const cJSON *s;
    double v;
    bool any = false;

    *out = 0;
    cJSON_ArrayForEach(s, item(metrics, "services")) {
        if (num(s, k, &v)) {
            *out += v;
            any = true;
        }
    }
    return any;
}

struct figures {
    const char *phase;
    int running, total;
    double restarts;
    int busy;          /* -1: no activity in status */
    double cpu_pct;    /* NaN: no delta yet */
    double mem, disk, egress;
    bool has_mem, disk_low;
};

static void figures_of(struct fleet_target *t, const cJSON *st, const cJSON *mx,
                       struct figures *g)
{
    struct sample *s = t->user;
    const cJSON *svc, *sb = item(st, "sandbox"), *act = item(st, "activity");
    const char *sbs = cJSON_IsString(item(sb, "state")) ? item(sb, "state")->valuestring : NULL;
    double v, cpu;

    memset(g, 0, sizeof(*g));
    g->phase = cJSON_IsString(item(st, "phase")) ? item(st, "phase")->valuestring : "?";
    /* A frozen or resuming sandbox says so rather than its phase. */
    if (sbs && strcmp(sbs, "running") != 0)
        g->phase = sbs;
    cJSON_ArrayForEach(svc, item(st, "services")) {
        const cJSON *state = item(svc, "state");

        g->total++;
        if (cJSON_IsString(state) && strcmp(state->valuestring, "running") == 0)
            g->running++;
        if (num(svc, "restarts", &v))
            g->restarts += v;
    }
    g->busy = cJSON_IsBool(item(act, "busy")) ? cJSON_IsTrue(item(act, "busy")) : -1;
    g->cpu_pct = NAN;
    g->mem = g->disk = g->egress = NAN;
    if (!mx)
        return;
    if (sum_services(mx, "cpu_usec", &cpu)) {
        /* CPU over the time between two answers of this target; a
         * counter that went back (hearth restarted) starts again. */
        if (s && s->have && cpu >= s->cpu_usec && t->answered_ns > s->at_ns)
            g->cpu_pct = (cpu - s->cpu_usec) * 1e5 / (double)(t->answered_ns - s->at_ns);
        if (s) {
            s->have = true;
            s->cpu_usec = cpu;
            s->at_ns = t->answered_ns;
        }
    }
    g->has_mem = sum_services(mx, "memory_bytes", &g->mem);
    g->disk = worst_disk(mx, &g->disk_low);
    g->egress = egress_bytes(mx);
}

static void error_text(char *buf, size_t n, const cJSON *err)
{
    const cJSON *m = item(err, "message");
    char msg[WIDE];

    cell_copy(msg, sizeof(msg), cJSON_IsString(m) ? m->valuestring : "(no message)");
    snprintf(buf, n, "error: %s", msg);
}

/* One target's row and its JSON object; returns its exit status. */
static int build_row(struct fleet_target *t, struct row *r, cJSON *jrow)
{
    const cJSON *serr, *merr;
    const cJSON *st = fleet_result(t, 0, &serr), *mx = fleet_result(t, 1, &merr);
    struct figures g;

    memset(r, 0, sizeof(*r));
    cell_copy(r->target, sizeof(r->target), t->spec);
    cJSON_AddStringToObject(jrow, "target", t->spec);
    if (t->fail != FLEET_OK) {
        cJSON_AddBoolToObject(jrow, "answered", false);
        cJSON_AddStringToObject(jrow, "failed", fleet_fail_name(t->fail));
        cJSON_AddStringToObject(jrow, "message", t->why);
        if (t->fail == FLEET_TIMEOUT)
            snprintf(r->failure, sizeof(r->failure), "timeout");
        else
            cell_copy(r->failure, sizeof(r->failure), t->why);
        return EXIT_USAGE;
    }
    cJSON_AddBoolToObject(jrow, "answered", true);
    if (!cJSON_IsObject(st)) {
        if (serr)
            cJSON_AddItemToObject(jrow, "error", cJSON_Duplicate(serr, 1));
        error_text(r->failure, sizeof(r->failure), serr);
        return EXIT_SERVER;
    }
    figures_of(t, st, cJSON_IsObject(mx) ? mx : NULL, &g);
    cell_copy(r->cell[C_PHASE], CELL, g.phase);
    snprintf(r->cell[C_SVC], CELL, "%d/%d", g.running, g.total);
    snprintf(r->cell[C_RESTARTS], CELL, "%.0f", g.restarts);
    snprintf(r->cell[C_ACT], CELL, "%s", g.busy < 0 ? "-" : g.busy ? "busy" : "idle");
    if (isnan(g.cpu_pct))
        snprintf(r->cell[C_CPU], CELL, "%s", mx ? "-" : "?");
    else
        snprintf(r->cell[C_CPU], CELL, "%.1f%%", g.cpu_pct);
    if (g.has_mem)
        fmt_bytes(r->cell[C_MEM], CELL, g.mem);
    else
        snprintf(r->cell[C_MEM], CELL, "%s", mx ? "-" : "?");
    if (isnan(g.disk))
        snprintf(r->cell[C_DISK], CELL, "%s", mx ? "-" : "?");
    else
        snprintf(r->cell[C_DISK], CELL, "%.0f%%%s", g.disk, g.disk_low ? "!" : "");
    if (isnan(g.egress))
        snprintf(r->cell[C_EGRESS], CELL, "%s", mx ? "-" : "?");
    else
        fmt_bytes(r->cell[C_EGRESS], CELL, g.egress);

    cJSON_AddStringToObject(jrow, "phase", g.phase);
    cJSON_AddNumberToObject(jrow, "services_running", g.running);
    cJSON_AddNumberToObject(jrow, "services_total", g.total);
    cJSON_AddNumberToObject(jrow, "restarts", g.restarts);
    if (g.busy < 0)
        cJSON_AddNullToObject(jrow, "busy");
    else
        cJSON_AddBoolToObject(jrow, "busy", g.busy);
#define NUM_OR_NULL(k, v, ok) \
    ((ok) ? (void)cJSON_AddNumberToObject(jrow, k, v) : (void)cJSON_AddNullToObject(jrow, k))
    NUM_OR_NULL("cpu_percent", g.cpu_pct, !isnan(g.cpu_pct));
    NUM_OR_NULL("memory_bytes", g.mem, g.has_mem);
    NUM_OR_NULL("disk_used_percent", g.disk, !isnan(g.disk));
    NUM_OR_NULL("egress_bytes", g.egress, !isnan(g.egress));
#undef NUM_OR_NULL
    if (!mx) {
        /* status answered, metrics did not: the row stands, marked. */
        if (merr)
            cJSON_AddItemToObject(jrow, "metrics_error", cJSON_Duplicate(merr, 1));
        return EXIT_SERVER;
    }
    return 0;
}

static int term_size(int *cols, int *lines)
{
    struct winsize ws;

    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) != 0 || ws.ws_col == 0)
        return -1;
    *cols = ws.ws_col;
    *lines = ws.ws_row;
    return 0;
}

/* A line, cut at the terminal's width; erases the rest of the line on a
 * terminal so a shorter frame leaves nothing of the last one. */
static void put_line(const struct opts *o, int cols, const char *s)
{
    /* The cut falls between characters: half a UTF-8 sequence left at
     * the end could be read as a C1 control by the terminal. */
    if (o->redraw)
        printf("%.*s\033[K\n", utf8_clip(s, (size_t)cols), s);
    else
        printf("%s\n", s);
}

static void print_table(const struct opts *o, struct fleet *f, struct row *rows, size_t answered)
{
    size_t w[NCOL];
    int cols = INT_MAX, lines = INT_MAX;
    size_t shown = f->n, other = 0;
    char line[WIDE * 2 + NCOL * CELL];

    if (o->redraw && term_size(&cols, &lines) != 0)
        cols = 80, lines = 24;
    for (int c = 0; c < NCOL; c++)
        w[c] = strlen(head[c]);
    for (size_t i = 0; i < f->n; i++) {
        w[C_TARGET] = strlen(rows[i].target) > w[C_TARGET] ? strlen(rows[i].target) : w[C_TARGET];
        if (rows[i].failure[0])
            continue;
        for (int c = 1; c < NCOL; c++)
            if (strlen(rows[i].cell[c]) > w[c])
                w[c] = strlen(rows[i].cell[c]);
    }
    for (int c = 1; c < NCOL; c++)
        other += w[c] + 2;
    /* On a terminal the target gives way first: its tail is kept. */
    if (o->redraw && w[C_TARGET] + 2 + other > (size_t)cols)
        w[C_TARGET] = (size_t)cols > other + 2 + 12 ? (size_t)cols - other - 2 : 12;
    if (o->redraw && lines > 4 && shown > (size_t)lines - 4)
        shown = (size_t)lines - 4;

    snprintf(line, sizeof(line), "%zu sandbox%s, %zu answered, %zu not", f->n,
             f->n == 1 ? "" : "es", answered, f->n - answered);
    put_line(o, cols, line);
    put_line(o, cols, "");
    for (size_t i = 0; i <= shown; i++) {
        size_t off = 0;
        const char *tgt = i == 0 ? head[C_TARGET] : rows[i - 1].target;
        size_t tl = strlen(tgt);

        if (i > 0 && tl > w[C_TARGET])
            off += (size_t)snprintf(line, sizeof(line), "...%-*s  ", (int)(w[C_TARGET] - 3),
                                    tgt + tl - (w[C_TARGET] - 3));
        else
            off += (size_t)snprintf(line, sizeof(line), "%-*s  ", (int)w[C_TARGET], tgt);
        if (i > 0 && rows[i - 1].failure[0]) {
            snprintf(line + off, sizeof(line) - off, "%s", rows[i - 1].failure);
        } else {
            for (int c = 1; c < NCOL; c++) {
                const char *s = i == 0 ? head[c] : rows[i - 1].cell[c];
                /* Text left, figures right; the last column unpadded. */
                bool right = c >= C_CPU || c == C_RESTARTS;

                off += (size_t)snprintf(line + off, sizeof(line) - off,
                                        right ? "%*s%s" : "%-*s%s", (int)w[c], s,
                                        c + 1 < NCOL ? "  " : "");
                if (off >= sizeof(line))
                    break;
            }
        }
        /* Trailing blanks of a left-aligned last cell are not wanted. */
        for (size_t e = strlen(line); e > 0 && line[e - 1] == ' '; e--)
            line[e - 1] = '\0';
        put_line(o, cols, line);
    }
    if (shown < f->n) {
        snprintf(line, sizeof(line), "... %zu more (a taller terminal, or --once)", f->n - shown);
        put_line(o, cols, line);
    }
}

/* One refresh: the round, then the frame. Returns the round's exit
 * status, or -1 when interrupted. */
static int refresh(const struct opts *o, struct fleet *f, struct row *rows)
{
    static const struct fleet_call calls[] = {{.method = "status"}, {.method = "metrics"}};
    cJSON *doc = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(doc, "targets");
    size_t answered = 0;
    int rc = 0;

    if (!doc || !arr)
        base_die_oom();
    if (fleet_round(f, calls, 2, o->timeout_ms) != 0) {
        cJSON_Delete(doc);
        return -1;
    }
    for (size_t i = 0; i < f->n; i++) {
        cJSON *jrow = cJSON_CreateObject();
        int one;

        if (!jrow)
            base_die_oom();
        cJSON_AddItemToArray(arr, jrow);
        one = build_row(&f->t[i], &rows[i], jrow);
        if (one != EXIT_USAGE)
            answered++;
        rc = one > rc ? one : rc;
    }
    if (o->json) {
        print_json(doc, false);
    } else {
        if (o->redraw)
            fputs("\033[H", stdout); /* home: the frame is drawn over the last */
        print_table(o, f, rows, answered);
        if (o->redraw)
            fputs("\033[J", stdout); /* and what is below it erased */
    }
    cJSON_Delete(doc);
    fflush(stdout);
    return rc;
}

static int usage_top(const char *fmt, const char *what)
{
    fputs("hearthctl: top: ", stderr);
    fprintf(stderr, fmt, what);
    fputs("\nusage: hearthctl [--connect SPEC]... top [-d SEC] [--once] [-n N] [--timeout-ms MS] [--json]\n",
          stderr);
    return EXIT_USAGE;
}

static const char *opt_arg(int argc, char **argv, int *i, const char *lng, const char *shrt)
{
    size_t l = strlen(lng);

    if (strcmp(argv[*i], lng) == 0 || (shrt && strcmp(argv[*i], shrt) == 0))
        return *i + 1 < argc ? argv[++*i] : "";
    if (strncmp(argv[*i], lng, l) == 0 && argv[*i][l] == '=')
        return argv[*i] + l + 1;
    return NULL;
}

static bool parse_ms(const char *s, double scale, double min, double max, int *out)
{
    char *end;
    double v;

    if (!s || !*s || !(isdigit((unsigned char)s[0]) || s[0] == '.'))
        return false;
    errno = 0;
    v = strtod(s, &end) * scale;
    if (errno || *end || !isfinite(v) || v < min || v > max)
        return false;
    *out = (int)llround(v);
    return true;
}

static int parse_opts(struct opts *o, int argc, char **argv)
{
    for (int i = 0; i < argc; i++) {
        const char *v;

        if (strcmp(argv[i], "--once") == 0) {
            o->once = true;
        } else if (strcmp(argv[i], "--json") == 0 || strcmp(argv[i], "-j") == 0) {
            o->json = true; /* as the global --json */
        } else if ((v = opt_arg(argc, argv, &i, "--delay", "-d"))) {
            if (!parse_ms(v, 1000, 100, 86400000, &o->delay_ms))
                return usage_top("bad -d '%s' (seconds, at least 0.1)", v);
        } else if ((v = opt_arg(argc, argv, &i, "--timeout-ms", NULL))) {
            if (!parse_ms(v, 1, 0, INT_MAX, &o->timeout_ms))
                return usage_top("bad --timeout-ms '%s' (milliseconds, 0 = none)", v);
        } else if ((v = opt_arg(argc, argv, &i, "--iterations", "-n"))) {
            int n;

            if (!parse_ms(v, 1, 1, INT_MAX, &n) || strchr(v, '.'))
                return usage_top("bad -n '%s' (a number of refreshes)", v);
            o->iterations = n;
        } else {
            return usage_top("unexpected argument '%s'", argv[i]);
        }
    }
    return 0;
}

/* Sleeps until the monotonic time at_ns; false when Ctrl-C came. */
static bool sleep_until(int64_t at_ns)
{
    for (;;) {
        int64_t now = mono_ns();

        if (fleet_interrupted())
            return false;
        if (now >= at_ns)
            return true;
        /* poll without fds: a sleep that SIGINT ends (EINTR). */
        poll(NULL, 0, (int)((at_ns - now + 999999) / 1000000));
    }
}

int top_main(struct fleet *f, int timeout_ms, bool json, int argc, char **argv)
{
    struct opts o = {.delay_ms = TOP_DEFAULT_DELAY_MS,
                     .timeout_ms = timeout_ms >= 0 ? timeout_ms : TOP_DEFAULT_TIMEOUT_MS,
                     .json = json};
    struct sample *samples;
    struct row *rows;
    int rc = parse_opts(&o, argc, argv), last = 0;

    if (rc != 0)
        return rc;
    /* Output that is not a terminal gets one table, as --once does,
     * unless -n asks for several (each frame printed in full). */
    if (o.once || (isatty(STDOUT_FILENO) != 1 && o.iterations == 0))
        o.iterations = 1;
    o.redraw = isatty(STDOUT_FILENO) == 1 && !o.json && o.iterations != 1;
    samples = calloc(f->n ? f->n : 1, sizeof(*samples));
    rows = calloc(f->n ? f->n : 1, sizeof(*rows));
    if (!samples || !rows || fleet_catch_sigint() != 0) {
        free(samples);
        free(rows);
        return EXIT_USAGE;
    }
    for (size_t i = 0; i < f->n; i++)
        f->t[i].user = &samples[i];
    if (o.redraw)
        fputs("\033[?25l\033[H\033[2J", stdout); /* no cursor; a clear screen */
    for (long n = 0; o.iterations == 0 || n < o.iterations; n++) {
        int64_t start = mono_ns();

        rc = refresh(&o, f, rows);
        if (rc < 0)
            break;
        last = rc;
        if (o.iterations != 0 && n + 1 >= o.iterations)
            break;
        if (!o.redraw && !o.json)
            putchar('\n'); /* frames one after the other */
        if (!sleep_until(start + (int64_t)o.delay_ms * 1000000))
            break;
    }
    if (o.redraw)
        fputs("\033[?25h", stdout);
    for (size_t i = 0; i < f->n; i++)
        f->t[i].user = NULL;
    free(samples);
    free(rows);
    return last;
}
