/* hearthctl commands: the table (name, method, a params builder and a
 * human printer), the builders that turn arguments into params, and the
 * usage text made from the table. Adding a method is one builder, one
 * printer, one row. */
#include "ctl.h"
#include "base64.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- builders --------------------------------------------------------- */

/* "--opt VALUE" or "--opt=VALUE" at argv[*i]; NULL if argv[*i] is not it.
 * *missing is set when argv[*i] is the option without its value, and never
 * cleared: a chain of tries over one argument keeps it for its last else
 * (the caller starts it false). */
static const char *opt_value(int argc, char **argv, int *i, const char *lng, const char *shrt,
                             bool *missing)
{
    const char *a = argv[*i];
    size_t l = strlen(lng);

    if (strcmp(a, lng) == 0 || (shrt && strcmp(a, shrt) == 0)) {
        if (*i + 1 >= argc) {
            *missing = true;
            return NULL;
        }
        return argv[++*i];
    }
    if (strncmp(a, lng, l) == 0 && a[l] == '=')
        return a + l + 1;
    if (shrt && strncmp(a, shrt, 2) == 0 && a[2] != '\0')
        return a + 2; /* -n50 */
    return NULL;
}

static bool valid_name(const char *s)
{
    size_t l = strlen(s);

    if (l == 0 || l > 255 || s[0] == '-')
        return false;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return false;
    return true;
}

static int b_service(struct ctl *t, int argc, char **argv, cJSON **params)
{
    if (argc != 1)
        return base_usage_err(t, "%s", argc ? "too many arguments" : "missing service NAME");
    if (!valid_name(argv[0]))
        return base_usage_err(t, "bad service name '%s'", argv[0]);
    t->arg = argv[0];
    /* skills.fork replies once the copy is done, which hearth stops after
     * 120 s: wait that long (and a little more) unless told otherwise. */
    if (strcmp(t->cmd->method, "skills.fork") == 0 && t->timeout_ms > 0 && t->timeout_ms < 122000)
        t->timeout_ms = 122000;
    *params = base_new_object();
    base_add_str(*params, "name", argv[0]);
    return 0;
}

static int b_skill(struct ctl *t, int argc, char **argv, cJSON **params)
{
    if (argc != 1)
        return base_usage_err(t, "%s", argc ? "too many arguments" : "missing skill NAME");
    /* NAME or CATEGORY/NAME; hearth checks the rest (depth, '..'). */
    if (!valid_name(argv[0]) || argv[0][0] == '/')
        return base_usage_err(t, "bad skill name '%s'", argv[0]);
    t->arg = argv[0];
    *params = base_new_object();
    base_add_str(*params, "name", argv[0]);
    return 0;
}

static int b_signal(struct ctl *t, int argc, char **argv, cJSON **params)
{
    char sig[20];
    const char *s;
    size_t o = 0;

    if (argc != 2)
        return base_usage_err(t, "%s", argc > 2 ? "too many arguments" : "need NAME and SIGNAL");
    if (!valid_name(argv[0]))
        return base_usage_err(t, "bad service name '%s'", argv[0]);
    /* Canonical "SIGHUP" from hup, HUP, sighup. */
    s = argv[1];
    if (strncasecmp(s, "SIG", 3) == 0)
        s += 3;
    if (*s == '\0' || strlen(s) > 12 || isdigit((unsigned char)*s))
        return base_usage_err(t, "bad signal '%s' (want a name such as HUP or SIGTERM)", argv[1]);
    memcpy(sig, "SIG", 3);
    o = 3;
    for (; *s; s++) {
        if (!isalnum((unsigned char)*s) && *s != '+' && *s != '-')
            return base_usage_err(t, "bad signal '%s' (want a name such as HUP or SIGTERM)",
                                  argv[1]);
        sig[o++] = (char)toupper((unsigned char)*s);
    }
    sig[o] = '\0';
    t->arg = argv[0];
    *params = base_new_object();
    base_add_str(*params, "name", argv[0]);
    base_add_str(*params, "signal", sig);
    return 0;
}

/* "services restart NAME [SIGNAL]": with a signal, a graceful restart
 * (that signal instead of the stop signal); same params as a signal. */
static int b_restart(struct ctl *t, int argc, char **argv, cJSON **params)
{
    return argc == 2 ? b_signal(t, argc, argv, params) : b_service(t, argc, argv, params);
}

static int b_logs(struct ctl *t, int argc, char **argv, cJSON **params)
{
    const char *name = NULL;
    unsigned long long lines = 0;
    bool have_lines = false, fol = false;

    for (int i = 0; i < argc; i++) {
        bool missing = false;
        const char *v = opt_value(argc, argv, &i, "--lines", "-n", &missing);

        if (missing)
            return base_usage_err(t, "%s needs a number", argv[i]);
        if (v) {
            if (!conn_parse_ulong(v, 1000000000, &lines))
                return base_usage_err(t, "bad line count '%s'", v);
            have_lines = true;
        } else if (strcmp(argv[i], "-f") == 0 || strcmp(argv[i], "--follow") == 0) {
            fol = true;
        } else if (argv[i][0] == '-') {
            return base_usage_err(t, "unknown option '%s'", argv[i]);
        } else if (name) {
            return base_usage_err(t, "unexpected argument '%s'", argv[i]);
        } else {
            name = argv[i];
        }
    }
    if (!name)
        return base_usage_err(t, "%s", "missing service NAME");
    if (!valid_name(name))
        return base_usage_err(t, "bad service name '%s'", name);
    t->arg = name;
    t->follow = fol;
    *params = base_new_object();
    base_add_str(*params, "name", name);
    if (have_lines)
        base_add_num(*params, "lines", (double)lines);
    if (!cJSON_AddBoolToObject(*params, "follow", fol))
        base_die_oom();
    return 0;
}

static int b_events(struct ctl *t, int argc, char **argv, cJSON **params)
{
    *params = base_new_object();
    t->follow = true;
    for (int i = 0; i < argc; i++) {
        bool missing = false;
        unsigned long long seq;
        const char *v = opt_value(argc, argv, &i, "--since", NULL, &missing);

        if (missing || !v) {
            cJSON_Delete(*params);
            if (missing)
                return base_usage_err(t, "%s needs a sequence number", argv[i]);
            return base_usage_err(t, "unexpected argument '%s'", argv[i]);
        }
        /* 2^53: exact in a JSON number. */
        if (!conn_parse_ulong(v, 9007199254740992ULL, &seq)) {
            cJSON_Delete(*params);
            return base_usage_err(t, "bad sequence number '%s'", v);
        }
        cJSON_DeleteItemFromObjectCaseSensitive(*params, "since");
        base_add_num(*params, "since", (double)seq);
    }
    return 0;
}

static int b_shutdown(struct ctl *t, int argc, char **argv, cJSON **params)
{
    t->arg = "poweroff";
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--reboot") == 0)
            t->arg = "reboot";
        else if (strcmp(argv[i], "--poweroff") == 0)
            t->arg = "poweroff";
        else
            return base_usage_err(t, "unexpected argument '%s'", argv[i]);
    }
    *params = base_new_object();
    base_add_str(*params, "action", t->arg);
    return 0;
}

static int b_call(struct ctl *t, int argc, char **argv, cJSON **params)
{
    const char *end = NULL;
    size_t ml;

    if (argc < 1 || argc > 2)
        return base_usage_err(t, "%s", argc ? "too many arguments (quote the JSON)" : "missing METHOD");
    ml = strlen(argv[0]);
    if (ml == 0 || ml > METHOD_MAX || argv[0][0] == '-')
        return base_usage_err(t, "bad method '%s'", argv[0]);
    for (const unsigned char *p = (const unsigned char *)argv[0]; *p; p++)
        if (*p <= ' ' || *p == 0x7f)
            return base_usage_err(t, "bad method '%s'", argv[0]);
    t->method = argv[0];
    if (argc == 1) {
        *params = base_new_object();
        return 0;
    }
    *params = cJSON_ParseWithOpts(argv[1], &end, 1);
    if (!*params) {
        char near[24];

        /* cJSON leaves end NULL on failure; its error pointer says where. */
        end = cJSON_GetErrorPtr();
        print_safe_copy(near, sizeof(near), end && *end ? end : "end of input");
        fprintf(stderr, "hearthctl: call: params are not valid JSON (near '%s')\n", near);
        return EXIT_USAGE;
    }
    if (!cJSON_IsObject(*params) && !cJSON_IsArray(*params)) {
        cJSON_Delete(*params);
        *params = NULL;
        fputs("hearthctl: call: params must be a JSON object or array\n", stderr);
        return EXIT_USAGE;
    }
    return 0;
}

/* ---- sandbox commands ---------------------------------------------------- */

#define ENTROPY_FROM_BYTES 64

/* Up to max bytes of path into buf (*got set). 0, or EXIT_USAGE with the
 * path and the reason printed (open or read failed). */
static int read_upto(const char *path, void *buf, size_t max, size_t *got)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    *got = 0;
    if (fd < 0) {
        fprintf(stderr, "hearthctl: unable to open %s: %s\n", path, strerror(errno));
        return EXIT_USAGE;
    }
    while (*got < max) {
        ssize_t n = read(fd, (char *)buf + *got, max - *got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            fprintf(stderr, "hearthctl: unable to read %s: %s\n", path, strerror(errno));
            close(fd);
            return EXIT_USAGE;
        }
        if (n == 0)
            break;
        *got += (size_t)n;
    }
    close(fd);
    return 0;
}

/* --entropy-from PATH: 64 bytes read from PATH (/dev/urandom), base64. */
static int add_entropy_from(struct ctl *t, cJSON *params, const char *key, const char *path)
{
    unsigned char buf[ENTROPY_FROM_BYTES];
    char enc[ENTROPY_FROM_BYTES / 3 * 4 + 8];
    size_t got;
    int rc = read_upto(path, buf, sizeof(buf), &got);

    if (rc)
        return rc;
    if (got == 0)
        return base_usage_err(t, "no bytes read from '%s'", path);
    base64_encode(buf, got, enc);
    base_add_str(params, key, enc);
    return 0;
}

/* --network FILE: a JSON object (the config's `network` shape), read
 * whole (at most 256 KiB) and sent as params[key]; hearth validates it. */
#define NETWORK_FROM_MAX (256 * 1024)
static int add_json_from(struct ctl *t, cJSON *params, const char *key, const char *path)
{
    char *buf = malloc(NETWORK_FROM_MAX + 1);
    size_t got;

    if (!buf)
        base_die_oom();
    /* One byte more than allowed tells a file that is too large. */
    int rc = read_upto(path, buf, NETWORK_FROM_MAX + 1, &got);
    if (rc) {
        free(buf);
        return rc;
    }
    if (got > NETWORK_FROM_MAX) {
        free(buf);
        return base_usage_err(t, "'%s' is larger than 256 KiB", path);
    }
    cJSON *o = cJSON_ParseWithLength(buf, got);
    free(buf);
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return base_usage_err(t, "'%s' does not hold a JSON object", path);
    }
    cJSON_AddItemToObject(params, key, o);
    return 0;
}

/* --time now|SEC[.FRACTION] as {"sec","nsec"}. */
static int add_time(struct ctl *t, cJSON *params, const char *v)
{
    struct timespec ts;
    unsigned long long sec = 0, nsec = 0;

    if (strcmp(v, "now") == 0) {
        clock_gettime(CLOCK_REALTIME, &ts);
        sec = (unsigned long long)ts.tv_sec;
        nsec = (unsigned long long)ts.tv_nsec;
    } else {
        char whole[24];
        const char *dot = strchr(v, '.');
        size_t wl = dot ? (size_t)(dot - v) : strlen(v);
        if (wl == 0 || wl >= sizeof(whole))
            return base_usage_err(t, "bad time '%s' (want now or seconds since the epoch)", v);
        memcpy(whole, v, wl);
        whole[wl] = '\0';
        if (!conn_parse_ulong(whole, 1ULL << 40, &sec))
            return base_usage_err(t, "bad time '%s' (want now or seconds since the epoch)", v);
        if (dot) {
            size_t digits = 0;
            for (const char *p = dot + 1; *p; p++, digits++) {
                if (!isdigit((unsigned char)*p) || digits >= 9)
                    return base_usage_err(t, "bad time '%s' (at most 9 fraction digits)", v);
                nsec = nsec * 10 + (unsigned)(*p - '0');
            }
            for (; digits < 9; digits++)
                nsec *= 10;
        }
    }
    cJSON *o = base_new_object();
    base_add_num(o, "sec", (double)sec);
    base_add_num(o, "nsec", (double)nsec);
    cJSON_AddItemToObject(params, "time", o);
    return 0;
}

/* The options sandbox.init and sandbox.resume both take (what a sandbox
 * is brought back to): true when argv[*i] is one of them, with the outcome
 * in *rc. */
static bool restore_opt(struct ctl *t, cJSON *p, int argc, char **argv, int *i, bool *missing,
                        int *rc)
{
    const char *v;
    if ((v = opt_value(argc, argv, i, "--time", NULL, missing)))
        *rc = add_time(t, p, v);
    else if ((v = opt_value(argc, argv, i, "--entropy-from", NULL, missing)))
        *rc = add_entropy_from(t, p, "entropy", v);
    else if ((v = opt_value(argc, argv, i, "--network", NULL, missing)))
        *rc = add_json_from(t, p, "network", v);
    else
        return false;
    return true;
}

static int b_init(struct ctl *t, int argc, char **argv, cJSON **params)
{
    cJSON *p = base_new_object(), *env = NULL, *allow = NULL;
    int rc = 0;

    for (int i = 0; i < argc && rc == 0; i++) {
        bool missing = false;
        const char *v;

        if ((v = opt_value(argc, argv, &i, "--env", "-e", &missing))) {
            const char *eq = strchr(v, '=');
            char key[129];
            if (!eq || eq == v || (size_t)(eq - v) >= sizeof(key)) {
                rc = base_usage_err(t, "bad --env '%s' (want KEY=VALUE)", v);
                break;
            }
            memcpy(key, v, (size_t)(eq - v));
            key[eq - v] = '\0';
            if (!env)
                env = cJSON_AddObjectToObject(p, "env");
            if (!env)
                base_die_oom();
            cJSON_DeleteItemFromObjectCaseSensitive(env, key);
            base_add_str(env, key, eq + 1);
        } else if ((v = opt_value(argc, argv, &i, "--allow-out", NULL, &missing))) {
            if (!allow) {
                cJSON *eg = cJSON_AddObjectToObject(p, "egress");
                allow = eg ? cJSON_AddArrayToObject(eg, "allowOut") : NULL;
                if (!allow)
                    base_die_oom();
            }
            cJSON_AddItemToArray(allow, cJSON_CreateString(v));
        } else if ((v = opt_value(argc, argv, &i, "--hostname", NULL, &missing))) {
            base_add_str(p, "hostname", v);
        } else if (restore_opt(t, p, argc, argv, &i, &missing, &rc)) {
            /* done: rc holds its outcome */
        } else if (missing) {
            rc = base_usage_err(t, "%s needs a value", argv[i]);
        } else {
            rc = base_usage_err(t, "unexpected argument '%s'", argv[i]);
        }
    }
    if (rc) {
        cJSON_Delete(p);
        return rc;
    }
    *params = p;
    return 0;
}

static int b_freeze(struct ctl *t, int argc, char **argv, cJSON **params)
{
    unsigned long long ms = 5000;
    bool force = false;

    for (int i = 0; i < argc; i++) {
        bool missing = false;
        if (strcmp(argv[i], "--force") == 0) { /* even while a service holds a lease */
            force = true;
            continue;
        }
        const char *v = opt_value(argc, argv, &i, "--timeout-ms", NULL, &missing);
        if (missing)
            return base_usage_err(t, "%s needs a number", argv[i]);
        if (!v)
            return base_usage_err(t, "unexpected argument '%s'", argv[i]);
        if (!conn_parse_ulong(v, 600000, &ms))
            return base_usage_err(t, "bad timeout '%s' (milliseconds, at most 600000)", v);
    }
    /* The reply comes once the freeze is done: wait a bit longer. */
    if ((unsigned long long)t->timeout_ms < ms + 2000)
        t->timeout_ms = (int)ms + 2000;
    *params = base_new_object();
    base_add_num(*params, "timeout_ms", (double)ms);
    if (force)
        cJSON_AddBoolToObject(*params, "force", true);
    return 0;
}

static int b_resume(struct ctl *t, int argc, char **argv, cJSON **params)
{
    cJSON *p = base_new_object();
    int rc = 0;

    for (int i = 0; i < argc && rc == 0; i++) {
        bool missing = false;
        if (restore_opt(t, p, argc, argv, &i, &missing, &rc))
            continue;
        if (missing)
            rc = base_usage_err(t, "%s needs a value", argv[i]);
        else
            rc = base_usage_err(t, "unexpected argument '%s'", argv[i]);
    }
    if (rc) {
        cJSON_Delete(p);
        return rc;
    }
    *params = p;
    return 0;
}

/* egress set: --allow-out and --deny-out take one or more CIDRs each (up
 * to the next option); the result replaces the whole policy. */
static int b_egress_set(struct ctl *t, int argc, char **argv, cJSON **params)
{
    cJSON *p = base_new_object(), *list = NULL;
    cJSON *allow = cJSON_AddArrayToObject(p, "allowOut");
    cJSON *deny = cJSON_AddArrayToObject(p, "denyOut");
    bool pub = true;

    if (!allow || !deny) {
        cJSON_Delete(p);
        return base_usage_err(t, "%s", "out of memory");
    }
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--allow-out") == 0) {
            list = allow;
        } else if (strcmp(argv[i], "--deny-out") == 0) {
            list = deny;
        } else if (strcmp(argv[i], "--public") == 0) {
            list = NULL;
            if (i + 1 >= argc || (strcmp(argv[i + 1], "on") != 0 && strcmp(argv[i + 1], "off") != 0)) {
                cJSON_Delete(p);
                return base_usage_err(t, "%s", "--public takes on or off");
            }
            pub = strcmp(argv[++i], "on") == 0;
        } else if (list && argv[i][0] != '-') {
            cJSON_AddItemToArray(list, cJSON_CreateString(argv[i]));
        } else {
            cJSON_Delete(p);
            return base_usage_err(t, "unexpected argument '%s'", argv[i]);
        }
    }
    cJSON_AddBoolToObject(p, "allowPublicTraffic", pub);
    *params = p;
    return 0;
}

static int b_metrics(struct ctl *t, int argc, char **argv, cJSON **params)
{
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--prometheus") == 0)
            t->arg = "prometheus";
        else
            return base_usage_err(t, "unexpected argument '%s'", argv[i]);
    }
    *params = base_new_object();
    return 0;
}

/* ---- command table ---------------------------------------------------- */

static const struct cmd cmds[] = {
    {.name = "ping", .method = "ping", .args = "", .help = "check the server, show round-trip time",
     .print = print_ping},
    {.name = "version", .method = "version", .args = "", .help = "server version, protocol, features",
     .print = print_version},
    {.name = "status", .method = "status", .args = "", .help = "sandbox state and services",
     .print = print_status},
    {.name = "services", .method = "services.list", .args = "[list]", .help = "list services",
     .print = print_services},
    {.name = "services list", .method = "services.list", .args = "", .help = "list services",
     .print = print_services, .hidden = true},
    {.name = "services start", .method = "services.start", .args = "NAME",
     .help = "start a service", .build = b_service, .print = print_state},
    {.name = "services stop", .method = "services.stop", .args = "NAME",
     .help = "stop a service", .build = b_service, .print = print_state},
    {.name = "services restart", .method = "services.restart", .args = "NAME [SIGNAL]",
     .help = "restart a service; with SIGNAL (USR1) a graceful restart", .build = b_restart,
     .print = print_state},
    {.name = "services signal", .method = "services.signal", .args = "NAME SIGNAL",
     .help = "send a signal (HUP, SIGTERM, ...)", .build = b_signal, .print = print_state},
    {.name = "logs", .method = "logs.read", .args = "NAME [-n N] [-f]",
     .help = "last N output lines; -f keeps following", .build = b_logs, .print = print_logs,
     .notify = "log", .on_note = print_note_log, .note_by_name = true},
    {.name = "events", .method = "events.subscribe", .args = "[--since SEQ]",
     .help = "follow the event stream", .build = b_events, .print = print_events,
     .notify = "event", .on_note = print_note_event},
    {.name = "mounts", .method = "mounts.list", .args = "",
     .help = "host-shared mounts and seeding", .print = print_mounts},
    {.name = "skills", .method = "skills.list", .args = "[list]",
     .help = "public skills overlay", .print = print_skills},
    {.name = "skills list", .method = "skills.list", .args = "",
     .help = "public skills overlay", .print = print_skills, .hidden = true},
    {.name = "skills sync", .method = "skills.sync", .args = "",
     .help = "reconcile the skills overlay now", .print = print_skills_sync},
    {.name = "skills fork", .method = "skills.fork", .args = "NAME",
     .help = "replace a linked public skill by a private copy", .build = b_skill,
     .print = print_forked},
    {.name = "egress", .method = "egress.get", .args = "[get]", .help = "egress policy and counters",
     .print = print_egress},
    {.name = "egress get", .method = "egress.get", .args = "", .help = "egress policy and counters",
     .print = print_egress, .hidden = true},
    {.name = "egress set", .method = "egress.set",
     .args = "[--allow-out CIDR...] [--deny-out CIDR...] [--public on|off]",
     .help = "replace the egress policy", .build = b_egress_set, .print = print_egress},
    {.name = "egress check", .method = "egress.check", .args = "",
     .help = "verify the ruleset, repair it if changed", .print = print_egress},
    {.name = "network", .method = "network.get", .args = "[check]",
     .help = "interfaces, addresses, DNS (JSON)"},
    {.name = "network check", .method = "network.check", .args = "",
     .help = "link, carrier, address, route, gateway neighbour (JSON)"},
    {.name = "call", .method = NULL, .args = "METHOD [JSON]",
     .help = "call any method; params JSON, default {}", .build = b_call},
    {.name = "init", .method = "sandbox.init",
     .args = "[--env K=V]... [--allow-out CIDR]... [--hostname H] [--time now|SEC] [--entropy-from PATH] [--network FILE]",
     .help = "send the per-sandbox parameters (releases services after init)", .build = b_init,
     .print = print_init},
    {.name = "freeze", .method = "sandbox.freeze", .args = "[--timeout-ms MS] [--force]",
     .help = "sync persistent mounts and freeze the services", .build = b_freeze,
     .print = print_steps},
    {.name = "resume", .method = "sandbox.resume",
     .args = "[--time now|SEC] [--entropy-from PATH] [--network FILE]",
     .help = "run the resume checks and thaw; each step timed", .build = b_resume,
     .print = print_steps},
    {.name = "cp", .method = "files.write", .args = "[--owner UID[:GID]] [--mode MODE] SRC DST",
     .help = "copy a file in or out; sandbox:PATH names the guest side", .build = cp_build,
     .run = cp_run},
    {.name = "exec", .method = "exec.start", .args = "[-i] [-t] [--user U] [--cwd D] [-e K=V] [--no-isolation] -- CMD...",
     .help = "run a command in the sandbox (like docker exec)", .run = exec_run},
    {.name = "metrics", .method = "metrics", .args = "[--prometheus]",
     .help = "memory, mount usage, service cgroups, egress counters (JSON or Prometheus text)",
     .build = b_metrics, .print = print_metrics},
    {.name = "top", .args = "[-d SEC] [--once] [-n N] [--timeout-ms MS]",
     .help = "one row per sandbox, refreshed in place (several --connect or a glob)",
     .fleet = top_main},
    {.name = "shutdown", .method = "system.shutdown", .args = "[--reboot]",
     .help = "power off (or reboot) the sandbox", .build = b_shutdown, .print = print_shutdown},
};

#define NCMDS (sizeof(cmds) / sizeof(cmds[0]))

/* Longest match: "services restart x" picks the two-word entry. */
const struct cmd *commands_find(int argc, char **argv, int *words)
{
    const struct cmd *best = NULL;

    *words = 0;
    for (size_t i = 0; i < NCMDS; i++) {
        const char *sp = strchr(cmds[i].name, ' ');

        if (!sp) {
            if (*words < 1 && strcmp(argv[0], cmds[i].name) == 0) {
                best = &cmds[i];
                *words = 1;
            }
        } else if (argc >= 2 && strlen(argv[0]) == (size_t)(sp - cmds[i].name) &&
                   strncmp(argv[0], cmds[i].name, (size_t)(sp - cmds[i].name)) == 0 &&
                   strcmp(argv[1], sp + 1) == 0) {
            best = &cmds[i];
            *words = 2;
        }
    }
    return best;
}

/* Help text columns: synopsis at 2, description at 33, nothing past 79. */
#define HELP_SYN_COL 2
#define HELP_DESC_COL 33
#define HELP_WIDTH 79

/* Prints words (space-separated) from column col, wrapping at HELP_WIDTH
 * to lines that start at indent; a word longer than a line goes whole.
 * Returns the column after the last word. */
static size_t wrap_words(FILE *f, const char *s, size_t col, size_t indent)
{
    bool first = true;

    while (*s) {
        while (*s == ' ')
            s++;
        size_t n = strcspn(s, " ");

        if (!n)
            break;
        if (!first && col + 1 + n > HELP_WIDTH) {
            fprintf(f, "\n%*s", (int)indent, "");
            col = indent;
        } else if (!first) {
            fputc(' ', f);
            col++;
        }
        fwrite(s, 1, n, f);
        col += n;
        s += n;
        first = false;
    }
    return col;
}

/* One command: its whole synopsis (continued lines indented under its
 * arguments), then its description at HELP_DESC_COL on the same line when
 * the synopsis leaves room, else on the next. */
static void usage_entry(FILE *f, const struct cmd *c)
{
    size_t name_len = strlen(c->name);
    size_t col;

    fprintf(f, "%*s%s", HELP_SYN_COL, "", c->name);
    col = HELP_SYN_COL + name_len;
    if (c->args[0]) {
        fputc(' ', f);
        col = wrap_words(f, c->args, col + 1, HELP_SYN_COL + name_len + 1);
    }
    if (col + 1 <= HELP_DESC_COL) {
        fprintf(f, "%*s", (int)(HELP_DESC_COL - col), "");
    } else {
        fprintf(f, "\n%*s", HELP_DESC_COL, "");
    }
    wrap_words(f, c->help, HELP_DESC_COL, HELP_DESC_COL);
    fputc('\n', f);
}

void commands_usage(FILE *f)
{
    fputs("usage: hearthctl [--connect SPEC] [--json] [--timeout MS] COMMAND [ARGS]\n"
          "       hearthctl --help | --version\n"
          "\n"
          "options:\n"
          "  -c, --connect SPEC  unix:PATH, vsock:CID:PORT or hvsock:UDS:PORT\n"
          "                      (default $HEARTH_CONNECT, else\n"
          "                      " PROTO_DEFAULT_CONNECT ");\n"
          "                      repeat it, or give a comma list or a unix:GLOB, for\n"
          "                      several sandboxes at once\n"
          "  -j, --json          print the raw result as JSON\n"
          "  -t, --timeout MS    bound connect and each reply, 0 = none (default 10000;\n"
          "                      --timeout-ms is the same)\n"
          "  -h, --help          this text\n"
          "  -V, --version       hearthctl's version\n"
          "\n"
          "commands:\n",
          f);
    for (size_t i = 0; i < NCMDS; i++) {
        if (cmds[i].hidden)
            continue;
        usage_entry(f, &cmds[i]);
    }
    fputs("\nexit status: 0 ok, 1 the server returned an error, 2 usage, connection,\n"
          "timeout or protocol error.\n",
          f);
}
