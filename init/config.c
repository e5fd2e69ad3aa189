/* config: schema validation and typed extraction of hearth.json.
 *
 * Validation is table driven: every object type has a static table of its
 * keys, each pointing at a schema (type, bounds, sub-table, element schema,
 * enum names, extra check). One walker applies the tables, so every key
 * the product knows is listed in exactly one place, and every error names
 * its JSON path. Extraction into struct config runs only on a tree that
 * already validated, so it never has to re-check types. */
#include "config.h"
#include "http.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <sys/socket.h>

#include <cJSON.h>

#include "cidr.h"
#include "proto.h"
#include "redact.h"
#include "svc_config.h"

/* Integers beyond 2^53 are not exact in a JSON double: they are the
 * ceiling for "no upper bound". */
#define INT53 (INT64_C(1) << 53)

#define DEFAULT_UNIX_LISTEN PROTO_DEFAULT_CONNECT
#define DEFAULT_VSOCK_LISTEN "vsock:1025"
#define DEFAULT_HOST_CID 2u
#define MAX_ALLOWED_CIDS (sizeof(((struct config *)0)->allowed_cids) / sizeof(uint32_t))
#define DEFAULT_BACKOFF_INITIAL_MS 500
#define DEFAULT_BACKOFF_MAX_MS 30000
#define DEFAULT_BACKOFF_RESET_MS 60000
#define DEFAULT_STOP_TIMEOUT_MS 10000
#define MAX_ENV_VARS 4096
#define QUOTE_MAX 96

/* ------------------------------------------------------------------ */
/* Error context: the JSON path being validated and the output buffer. */

struct vctx {
    char path[CONFIG_ERR_MAX];
    size_t len;
    char *err;
    size_t errlen;
};

static size_t path_append(struct vctx *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Appends to the path and returns the previous length, which path_pop
 * restores. A path too long for the buffer is truncated, never overrun. */
static size_t path_append(struct vctx *c, const char *fmt, ...)
{
    size_t old = c->len;
    size_t room = sizeof(c->path) - c->len;
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(c->path + c->len, room, fmt, ap);
    va_end(ap);
    if (n < 0)
        c->path[c->len] = '\0';
    else if ((size_t)n >= room)
        c->len = sizeof(c->path) - 1;
    else
        c->len += (size_t)n;
    return old;
}

static size_t path_key(struct vctx *c, const char *key)
{
    return c->len ? path_append(c, ".%s", key) : path_append(c, "%s", key);
}

static size_t path_index(struct vctx *c, size_t i)
{
    return path_append(c, "[%zu]", i);
}

static void path_pop(struct vctx *c, size_t old)
{
    c->len = old;
    c->path[old] = '\0';
}

static int verr(struct vctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Writes "<path>: <reason>" and returns -1 so checks can `return verr(...)`. */
static int verr(struct vctx *c, const char *fmt, ...)
{
    char reason[CONFIG_ERR_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(reason, sizeof(reason), fmt, ap);
    va_end(ap);
    snprintf(c->err, c->errlen, "%s: %s", c->len ? c->path : "(root)", reason);
    return -1;
}

/* Quotes a value for an error message: printable ASCII as is, anything
 * else as \xNN, cut after a bounded length, so a hostile value can neither
 * forge log lines nor crowd the path out of the message. */
static const char *quote(const char *s, char *buf, size_t n)
{
    size_t o = 0;
    const size_t limit = n - 6; /* room for "\xNN", '"' and NUL */

    buf[o++] = '"';
    for (; *s && o < limit; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch < 0x20 || ch >= 0x7f || ch == '"' || ch == '\\')
            o += (size_t)snprintf(buf + o, n - o, "\\x%02x", ch);
        else
            buf[o++] = (char)ch;
    }
    if (*s && o + 4 < n) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o++] = '"';
    buf[o] = '\0';
    return buf;
}

/* ------------------------------------------------------------------ */
/* Small lookups shared by validation and the public helpers. */

struct name_num {
    const char *name;
    int num;
};

static const struct name_num signals[] = {
    {"SIGHUP", SIGHUP},     {"SIGINT", SIGINT},       {"SIGQUIT", SIGQUIT},
    {"SIGILL", SIGILL},     {"SIGTRAP", SIGTRAP},     {"SIGABRT", SIGABRT},
    {"SIGBUS", SIGBUS},     {"SIGFPE", SIGFPE},       {"SIGKILL", SIGKILL},
    {"SIGUSR1", SIGUSR1},   {"SIGSEGV", SIGSEGV},     {"SIGUSR2", SIGUSR2},
    {"SIGPIPE", SIGPIPE},   {"SIGALRM", SIGALRM},     {"SIGTERM", SIGTERM},
#ifdef SIGSTKFLT
    {"SIGSTKFLT", SIGSTKFLT},
#endif
    {"SIGCHLD", SIGCHLD},   {"SIGCONT", SIGCONT},     {"SIGSTOP", SIGSTOP},
    {"SIGTSTP", SIGTSTP},   {"SIGTTIN", SIGTTIN},     {"SIGTTOU", SIGTTOU},
    {"SIGURG", SIGURG},     {"SIGXCPU", SIGXCPU},     {"SIGXFSZ", SIGXFSZ},
    {"SIGVTALRM", SIGVTALRM}, {"SIGPROF", SIGPROF},   {"SIGWINCH", SIGWINCH},
    {"SIGIO", SIGIO},       {"SIGPWR", SIGPWR},       {"SIGSYS", SIGSYS},
    /* Aliases after the canonical names, so number -> name finds those. */
    {"SIGIOT", SIGABRT},    {"SIGPOLL", SIGIO},       {"SIGCLD", SIGCHLD},
};

/* Linux capability numbers are ABI: listed here so the build needs no
 * kernel header. Index = capability number. */
static const char *const capabilities[] = {
    "CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL",
    "SETGID", "SETUID", "SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE",
    "NET_BROADCAST", "NET_ADMIN", "NET_RAW", "IPC_LOCK", "IPC_OWNER",
    "SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT",
    "SYS_ADMIN", "SYS_BOOT", "SYS_NICE", "SYS_RESOURCE", "SYS_TIME",
    "SYS_TTY_CONFIG", "MKNOD", "LEASE", "AUDIT_WRITE", "AUDIT_CONTROL",
    "SETFCAP", "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG", "WAKE_ALARM",
    "BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF", "CHECKPOINT_RESTORE",
};

static const struct name_num rlimits[] = {
    {"as", RLIMIT_AS},           {"core", RLIMIT_CORE},
    {"cpu", RLIMIT_CPU},         {"data", RLIMIT_DATA},
    {"fsize", RLIMIT_FSIZE},     {"locks", RLIMIT_LOCKS},
    {"memlock", RLIMIT_MEMLOCK}, {"msgqueue", RLIMIT_MSGQUEUE},
    {"nice", RLIMIT_NICE},       {"nofile", RLIMIT_NOFILE},
    {"nproc", RLIMIT_NPROC},     {"rss", RLIMIT_RSS},
    {"rtprio", RLIMIT_RTPRIO},   {"rttime", RLIMIT_RTTIME},
    {"sigpending", RLIMIT_SIGPENDING}, {"stack", RLIMIT_STACK},
};

/* Services may wait for these lifecycle phases as well as for each other. */
const char *const config_after_phases[] = {"mounts", "skills", "egress", "network", "init", NULL};

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

int config_signal_number(const char *name)
{
    const char *bare;

    if (!name || !*name)
        return -1;
    if (name[0] >= '0' && name[0] <= '9') {
        char *end;
        long v;
        errno = 0;
        v = strtol(name, &end, 10);
        if (errno || *end || v <= 0 || v > 64)
            return -1;
        return config_signal_name((int)v) ? (int)v : -1;
    }
    bare = strncasecmp(name, "SIG", 3) == 0 ? name + 3 : name;
    for (size_t i = 0; i < ARRAY_LEN(signals); i++)
        if (strcasecmp(bare, signals[i].name + 3) == 0)
            return signals[i].num;
    return -1;
}

const char *config_signal_name(int sig)
{
    for (size_t i = 0; i < ARRAY_LEN(signals); i++)
        if (signals[i].num == sig)
            return signals[i].name;
    return NULL;
}

int config_cap_number(const char *name)
{
    const char *bare;

    if (!name)
        return -1;
    bare = strncasecmp(name, "CAP_", 4) == 0 ? name + 4 : name;
    for (size_t i = 0; i < ARRAY_LEN(capabilities); i++)
        if (strcasecmp(bare, capabilities[i]) == 0)
            return (int)i;
    return -1;
}

int config_rlimit_number(const char *name)
{
    if (!name)
        return -1;
    for (size_t i = 0; i < ARRAY_LEN(rlimits); i++)
        if (strcmp(name, rlimits[i].name) == 0)
            return rlimits[i].num;
    return -1;
}

bool config_env_is_secret(const char *name) { return redact_name_is_secret(name); }

static bool in_list(const char *s, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(s, *list) == 0)
            return true;
    return false;
}

/* Strict unsigned decimal: digits only, no sign, no blanks, no leading
 * zeros, value <= max. */
static bool parse_udec(const char *s, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;

    if (!*s || (s[0] == '0' && s[1]))
        return false;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return false;
        v = v * 10 + (uint64_t)(*s - '0');
        if (v > max)
            return false;
    }
    *out = v;
    return true;
}

int config_parse_listen(const char *s, struct listen_spec *out, char *err, size_t errlen)
{
    struct listen_spec l;
    char q[QUOTE_MAX];
    char scratch[CONFIG_ERR_MAX];
    const char *rest;
    uint64_t port;

    if (!err || !errlen) {
        err = scratch;
        errlen = sizeof(scratch);
    }
    memset(&l, 0, sizeof(l));
    if (!s)
        s = "";
    if (strncmp(s, "unix:", 5) == 0 || strncmp(s, "serial:", 7) == 0) {
        l.kind = s[0] == 'u' ? LISTEN_UNIX : LISTEN_SERIAL;
        rest = strchr(s, ':') + 1;
        if (!*rest) {
            snprintf(err, errlen, "bad listen address %s (empty path)", quote(s, q, sizeof(q)));
            return -1;
        }
        if (strlen(rest) >= sizeof(l.path)) {
            snprintf(err, errlen, "bad listen address %s (path longer than %zu bytes)",
                     quote(s, q, sizeof(q)), sizeof(l.path) - 1);
            return -1;
        }
        strcpy(l.path, rest);
    } else if (strncmp(s, "vsock:", 6) == 0) {
        l.kind = LISTEN_VSOCK;
        /* 0xffffffff is VMADDR_PORT_ANY, not a port one can listen on. */
        if (!parse_udec(s + 6, 0xfffffffeu, &port) || port == 0) {
            snprintf(err, errlen, "bad listen address %s (vsock port must be 1..4294967294)",
                     quote(s, q, sizeof(q)));
            return -1;
        }
        l.port = (uint32_t)port;
    } else {
        snprintf(err, errlen,
                 "bad listen address %s (expected unix:PATH, vsock:PORT or serial:PATH)",
                 quote(s, q, sizeof(q)));
        return -1;
    }
    if (out)
        *out = l;
    return 0;
}

/* ------------------------------------------------------------------ */
/* Schema description. */

enum kind {
    K_STRING, /* min/max bound the length; max 0 = unbounded */
    K_INT,    /* integral JSON number within min..max */
    K_BOOL,
    K_ENUM,   /* string, one of names */
    K_OBJECT, /* keys from the table; unknown keys are errors */
    K_ARRAY,  /* elements of elem; min/max bound the count */
    K_MAP,    /* free-form keys (key_check), values of elem */
    K_ANY,    /* check does all the work (values of more than one type) */
};

struct schema;
typedef int (*check_fn)(const cJSON *v, struct vctx *c);

struct key {
    const char *name;
    const struct schema *s;
    bool required;
};

/* Designated initializers keep -Wextra quiet about the unset fields;
 * variadic because compound-literal schemas contain commas. */
#define KEY(n, ...) {.name = (n), .s = (__VA_ARGS__)}
#define REQUIRED(n, ...) {.name = (n), .s = (__VA_ARGS__), .required = true}

struct schema {
    enum kind kind;
    int64_t min, max;
    const struct key *keys;
    const struct schema *elem;
    const char *const *names;
    check_fn check;     /* after the type checks passed */
    check_fn key_check; /* K_MAP: called per entry, path at the map */
};

static bool json_integral(const cJSON *v)
{
    return cJSON_IsNumber(v) && isfinite(v->valuedouble) && v->valuedouble == trunc(v->valuedouble);
}

/* An integral number within +-2^53, where doubles are exact. */
static bool json_int(const cJSON *v, int64_t *out)
{
    if (!json_integral(v) || fabs(v->valuedouble) > (double)INT53)
        return false;
    *out = (int64_t)v->valuedouble;
    return true;
}

static const cJSON *get(const cJSON *obj, const char *key)
{
    return obj ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
}

static int validate(const cJSON *v, const struct schema *s, struct vctx *c);

static int expect_enum(const struct schema *s, struct vctx *c)
{
    char list[256];
    size_t o = 0;

    list[0] = '\0';
    for (const char *const *n = s->names; *n && o < sizeof(list); n++)
        o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%s", n == s->names ? "" : ", ", *n);
    return verr(c, "expected one of %s", list);
}

/* A key appearing twice in one object: cJSON keeps both, so the second
 * would be silently ignored by lookups. */
static bool duplicate_before(const cJSON *obj, const cJSON *item)
{
    for (const cJSON *p = obj->child; p && p != item; p = p->next)
        if (strcmp(p->string, item->string) == 0)
            return true;
    return false;
}

static int validate_object(const cJSON *v, const struct schema *s, struct vctx *c)
{
    const cJSON *item;
    size_t old;

    if (!cJSON_IsObject(v))
        return verr(c, "expected object");
    cJSON_ArrayForEach(item, v) {
        const struct key *k = s->keys;
        while (k->name && strcmp(k->name, item->string) != 0)
            k++;
        old = path_key(c, item->string);
        if (!k->name)
            return verr(c, "unknown key");
        if (duplicate_before(v, item))
            return verr(c, "duplicate key");
        if (validate(item, k->s, c) < 0)
            return -1;
        path_pop(c, old);
    }
    for (const struct key *k = s->keys; k->name; k++) {
        if (k->required && !get(v, k->name)) {
            path_key(c, k->name);
            return verr(c, "missing required key");
        }
    }
    return 0;
}

static int validate(const cJSON *v, const struct schema *s, struct vctx *c)
{
    const cJSON *item;
    int64_t n;
    size_t i, old;

    switch (s->kind) {
    case K_STRING:
        if (!cJSON_IsString(v))
            return verr(c, "expected string");
        n = (int64_t)strlen(v->valuestring);
        if (n < s->min)
            return verr(c, "must not be empty");
        if (s->max && n > s->max)
            return verr(c, "longer than %lld bytes", (long long)s->max);
        break;
    case K_INT:
        if (!json_integral(v))
            return verr(c, "expected integer");
        if (!json_int(v, &n))
            return verr(c, "integer out of range");
        if (n < s->min || n > s->max) {
            if (s->max == INT53)
                return verr(c, n < s->min ? "must be >= %lld" : "too large (limit %lld)",
                            (long long)(n < s->min ? s->min : s->max));
            return verr(c, "must be between %lld and %lld", (long long)s->min,
                        (long long)s->max);
        }
        break;
    case K_BOOL:
        if (!cJSON_IsBool(v))
            return verr(c, "expected boolean");
        break;
    case K_ENUM:
        if (!cJSON_IsString(v) || !in_list(v->valuestring, s->names))
            return expect_enum(s, c);
        break;
    case K_OBJECT:
        if (validate_object(v, s, c) < 0)
            return -1;
        break;
    case K_ARRAY:
        if (!cJSON_IsArray(v))
            return verr(c, "expected array");
        n = cJSON_GetArraySize(v);
        if (n < s->min)
            return s->min == 1 ? verr(c, "must not be empty")
                               : verr(c, "needs at least %lld entries", (long long)s->min);
        if (s->max && n > s->max)
            return verr(c, "at most %lld entries", (long long)s->max);
        i = 0;
        cJSON_ArrayForEach(item, v) {
            old = path_index(c, i++);
            if (validate(item, s->elem, c) < 0)
                return -1;
            path_pop(c, old);
        }
        break;
    case K_MAP:
        if (!cJSON_IsObject(v))
            return verr(c, "expected object");
        if (s->max && cJSON_GetArraySize(v) > s->max)
            return verr(c, "at most %lld entries", (long long)s->max);
        cJSON_ArrayForEach(item, v) {
            char q[QUOTE_MAX];
            if (duplicate_before(v, item))
                return verr(c, "duplicate key %s", quote(item->string, q, sizeof(q)));
            if (s->key_check && s->key_check(item, c) < 0)
                return -1;
            old = path_key(c, item->string);
            if (validate(item, s->elem, c) < 0)
                return -1;
            path_pop(c, old);
        }
        break;
    case K_ANY:
        break;
    }
    return s->check ? s->check(v, c) : 0;
}

/* ------------------------------------------------------------------ */
/* Value checks. Each runs after its schema's type check passed. */

static int check_abspath(const cJSON *v, struct vctx *c)
{
    char q[QUOTE_MAX];

    if (v->valuestring[0] != '/')
        return verr(c, "expected an absolute path, got %s", quote(v->valuestring, q, sizeof(q)));
    return 0;
}

/* A file name (skills.marker): one component, so the marker test stays
 * one lookup inside each entry and can never name a path elsewhere. */
static int check_filename(const cJSON *v, struct vctx *c)
{
    char q[QUOTE_MAX];
    const char *s = v->valuestring;

    if (!*s || strchr(s, '/') || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
        return verr(c, "expected a file name (no '/'), got %s", quote(s, q, sizeof(q)));
    return 0;
}

/* An absolute path without "." or ".." components or doubled slashes:
 * host-supplied paths are mapped onto guest paths (host_mounts subpath
 * mode), so they must not be able to climb out of where they point. */
static int check_clean_path(const cJSON *v, struct vctx *c)
{
    const char *s = v->valuestring;
    char q[QUOTE_MAX];

    if (check_abspath(v, c) < 0)
        return -1;
    for (const char *p = s; *p; p++) {
        if (*p != '/')
            continue;
        if (p[1] == '/' || (p[1] == '.' && (p[2] == '/' || !p[2])) ||
            (p[1] == '.' && p[2] == '.' && (p[3] == '/' || !p[3])))
            return verr(c, "path %s must not contain '.', '..' or '//' components",
                        quote(s, q, sizeof(q)));
    }
    return 0;
}

static bool is_name_char(char ch, const char *extra)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           (ch && strchr(extra, ch));
}

static bool all_name_chars(const char *s, const char *extra)
{
    for (; *s; s++)
        if (!is_name_char(*s, extra))
            return false;
    return true;
}

static int check_hostname(const cJSON *v, struct vctx *c)
{
    const char *s = v->valuestring;
    char q[QUOTE_MAX];

    /* RFC 1123 characters; no empty label, no label starting with '-'. */
    bool ok = *s && strlen(s) <= 64 && all_name_chars(s, "-.") && s[0] != '.' &&
              !strstr(s, "..") && s[strlen(s) - 1] != '.' && s[0] != '-' && !strstr(s, ".-");
    if (!ok)
        return verr(c, "bad hostname %s (letters, digits, '-' and '.', at most 64 bytes)",
                    quote(s, q, sizeof(q)));
    return 0;
}

static int check_listen(const cJSON *v, struct vctx *c)
{
    char reason[CONFIG_ERR_MAX];

    if (config_parse_listen(v->valuestring, NULL, reason, sizeof(reason)) < 0)
        return verr(c, "%s", reason);
    return 0;
}

static int check_module(const cJSON *v, struct vctx *c)
{
    char q[QUOTE_MAX];

    if (!all_name_chars(v->valuestring, "_-"))
        return verr(c, "bad module name %s", quote(v->valuestring, q, sizeof(q)));
    return 0;
}

static int check_ifname(const cJSON *v, struct vctx *c)
{
    const char *s = v->valuestring;
    char q[QUOTE_MAX];

    /* The kernel's rules: < IFNAMSIZ, no '/', no blanks, not "." or "..". */
    bool ok = *s && strlen(s) < 16 && strcmp(s, ".") && strcmp(s, "..");
    for (const char *p = s; ok && *p; p++)
        if (*p == '/' || *p == ':' || (unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f)
            ok = false;
    if (!ok)
        return verr(c, "bad interface name %s", quote(s, q, sizeof(q)));
    return 0;
}

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

static int check_mac(const cJSON *v, struct vctx *c)
{
    const char *s = v->valuestring;
    char q[QUOTE_MAX];
    bool ok = strlen(s) == 17;

    for (int i = 0; ok && i < 17; i++)
        ok = (i % 3 == 2) ? s[i] == ':' : hexval(s[i]) >= 0;
    if (!ok)
        return verr(c, "bad MAC address %s (expected xx:xx:xx:xx:xx:xx)", quote(s, q, sizeof(q)));
    return 0;
}

/* An interface address: a prefix with host bits, "169.254.68.6/30". */
static int check_ifaddr(const cJSON *v, struct vctx *c)
{
    char reason[128], q[QUOTE_MAX];

    if (cidr_parse(v->valuestring, true, NULL, reason, sizeof(reason)) < 0)
        return verr(c, "bad address %s: %s", quote(v->valuestring, q, sizeof(q)), reason);
    return 0;
}

static bool is_ip(const char *s)
{
    unsigned char buf[16];

    return inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1;
}

static int check_ip(const cJSON *v, struct vctx *c)
{
    char q[QUOTE_MAX];

    if (!is_ip(v->valuestring))
        return verr(c, "bad IP address %s", quote(v->valuestring, q, sizeof(q)));
    return 0;
}

/* A policy network: host bits are refused, with the network the operator
 * probably meant, since "10.1.2.3/8" usually hides a typo. */
static int check_cidr_net(const cJSON *v, struct vctx *c)
{
    char reason[128], q[QUOTE_MAX], fixed[64];
    struct cidr net;

    if (cidr_parse(v->valuestring, false, NULL, reason, sizeof(reason)) == 0)
        return 0;
    if (cidr_parse(v->valuestring, true, &net, NULL, 0) == 0) {
        cidr_format(&net, fixed, sizeof(fixed));
        return verr(c, "bad CIDR %s: %s (did you mean %s?)", quote(v->valuestring, q, sizeof(q)),
                    reason, fixed);
    }
    return verr(c, "bad CIDR %s: %s", quote(v->valuestring, q, sizeof(q)), reason);
}

static int check_fstype(const cJSON *v, struct vctx *c)
{
    char q[QUOTE_MAX];

    if (!all_name_chars(v->valuestring, "_.-"))
        return verr(c, "bad filesystem type %s", quote(v->valuestring, q, sizeof(q)));
    return 0;
}

static bool valid_service_name(const char *s)
{
    return *s && strlen(s) <= 64 && all_name_chars(s, "_.-");
}

static int check_service_name(const cJSON *v, struct vctx *c)
{
    char q[QUOTE_MAX];

    if (!valid_service_name(v->valuestring))
        return verr(c, "bad service name %s (expected [A-Za-z0-9_.-]{1,64})",
                    quote(v->valuestring, q, sizeof(q)));
    if (in_list(v->valuestring, config_after_phases))
        return verr(c, "%s is reserved (a phase name)", quote(v->valuestring, q, sizeof(q)));
    return 0;
}

static int check_argv(const cJSON *v, struct vctx *c)
{
    if (!v->child->valuestring[0]) {
        path_index(c, 0);
        return verr(c, "must not be empty");
    }
    return 0;
}

static int check_env_key(const cJSON *item, struct vctx *c)
{
    const char *s = item->string;
    char q[QUOTE_MAX];

    if (!*s || (s[0] >= '0' && s[0] <= '9') || !all_name_chars(s, "_"))
        return verr(c, "bad environment variable name %s", quote(s, q, sizeof(q)));
    return 0;
}

/* umask: an octal string ("022") or the integer value (18). */
static int check_umask(const cJSON *v, struct vctx *c)
{
    int64_t n;

    if (cJSON_IsString(v)) {
        const char *s = v->valuestring;
        size_t len = strlen(s);
        bool ok = len >= 1 && len <= 4;
        for (size_t i = 0; ok && i < len; i++)
            ok = s[i] >= '0' && s[i] <= '7';
        if (ok && strtol(s, NULL, 8) <= 0777)
            return 0;
    } else if (json_int(v, &n)) {
        if (n >= 0 && n <= 0777)
            return 0;
    }
    return verr(c, "expected an octal string such as \"022\" or an integer 0..511");
}

static int check_rlimit_key(const cJSON *item, struct vctx *c)
{
    char q[QUOTE_MAX], list[256];
    size_t o = 0;

    if (config_rlimit_number(item->string) >= 0)
        return 0;
    for (size_t i = 0; i < ARRAY_LEN(rlimits); i++)
        o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%s", i ? ", " : "", rlimits[i].name);
    return verr(c, "unknown resource limit %s (expected one of %s)",
                quote(item->string, q, sizeof(q)), list);
}

static int check_rlimit_value(const cJSON *v, struct vctx *c)
{
    int64_t n;

    if (cJSON_IsString(v) && strcmp(v->valuestring, "unlimited") == 0)
        return 0;
    if (json_int(v, &n) && n >= 0)
        return 0;
    return verr(c, "expected an integer >= 0 or \"unlimited\"");
}

/* "host:port": an IPv4 address, [IPv6] or a host name, and port 1..65535. */
static int check_hostport(const cJSON *v, struct vctx *c)
{
    const char *s = v->valuestring;
    const char *colon = strrchr(s, ':');
    char host[256], q[QUOTE_MAX];
    uint64_t port;
    size_t hlen;
    bool ok;

    if (!colon || !parse_udec(colon + 1, 65535, &port) || port == 0)
        return verr(c, "bad address %s (expected HOST:PORT, port 1..65535)",
                    quote(s, q, sizeof(q)));
    hlen = (size_t)(colon - s);
    if (hlen == 0 || hlen >= sizeof(host))
        return verr(c, "bad address %s (expected HOST:PORT)", quote(s, q, sizeof(q)));
    memcpy(host, s, hlen);
    host[hlen] = '\0';
    if (host[0] == '[') {
        unsigned char buf[16];
        ok = hlen > 2 && host[hlen - 1] == ']';
        if (ok) {
            host[hlen - 1] = '\0';
            ok = inet_pton(AF_INET6, host + 1, buf) == 1;
        }
    } else {
        ok = !strchr(host, ':') && (is_ip(host) || all_name_chars(host, "-."));
    }
    if (!ok)
        return verr(c, "bad address %s (expected HOST:PORT; IPv6 as [ADDR]:PORT)",
                    quote(s, q, sizeof(q)));
    return 0;
}

/* "HOST:PORT/PATH" (ready.http, health.http): the address part by the
 * same rules as tcp, the path as http.c will put it on the request line. */
static int check_http_target(const cJSON *v, struct vctx *c)
{
    char hp[256], path[256], why[160];
    char q[QUOTE_MAX];

    if (http_target_split(v->valuestring, hp, sizeof(hp), path, sizeof(path), why,
                          sizeof(why)) < 0)
        return verr(c, "bad target %s: %s", quote(v->valuestring, q, sizeof(q)), why);
    cJSON tmp;
    memset(&tmp, 0, sizeof(tmp));
    tmp.type = cJSON_String;
    tmp.valuestring = hp;
    return check_hostport(&tmp, c);
}

static int check_signal(const cJSON *v, struct vctx *c)
{
    char q[QUOTE_MAX];

    if (config_signal_number(v->valuestring) < 0)
        return verr(c, "unknown signal %s", quote(v->valuestring, q, sizeof(q)));
    return 0;
}

static int check_on_resume(const cJSON *v, struct vctx *c)
{
    const char *s = v->valuestring;
    char q[QUOTE_MAX];

    if (strcmp(s, "none") == 0 || strcmp(s, "restart") == 0)
        return 0;
    if (strncmp(s, "signal:", 7) == 0 || strncmp(s, "restart:", 8) == 0) {
        const char *sig = strchr(s, ':') + 1;
        if (config_signal_number(sig) > 0)
            return 0;
        return verr(c, "unknown signal %s", quote(sig, q, sizeof(q)));
    }
    return verr(c, "expected none, restart, restart:SIGNAME or signal:SIGNAME");
}

static int check_cap(const cJSON *v, struct vctx *c)
{
    char q[QUOTE_MAX];

    if (config_cap_number(v->valuestring) < 0)
        return verr(c, "unknown capability %s", quote(v->valuestring, q, sizeof(q)));
    return 0;
}

static int64_t int_or(const cJSON *obj, const char *key, int64_t def)
{
    int64_t n;
    return json_int(get(obj, key), &n) ? n : def;
}

/* Checked with the defaults filled in: "initial_ms": 40000 alone exceeds
 * the default max. */
static int check_backoff(const cJSON *v, struct vctx *c)
{
    int64_t initial = int_or(v, "initial_ms", DEFAULT_BACKOFF_INITIAL_MS);
    int64_t max = int_or(v, "max_ms", DEFAULT_BACKOFF_MAX_MS);

    if (initial > max) {
        if (get(v, "initial_ms")) {
            path_key(c, "initial_ms");
            return verr(c, "must not exceed max_ms (%lld)", (long long)max);
        }
        path_key(c, "max_ms");
        return verr(c, "must not be below initial_ms (%lld)", (long long)initial);
    }
    return 0;
}

static int one_of(const cJSON *v, struct vctx *c, const char *const *keys, const char *text)
{
    int n = 0;

    for (; *keys; keys++)
        n += get(v, *keys) != NULL;
    if (n == 0)
        return verr(c, "needs one of %s", text);
    if (n > 1)
        return verr(c, "only one of %s may be given", text);
    return 0;
}

static int check_ready(const cJSON *v, struct vctx *c)
{
    static const char *const keys[] = {"tcp",    "http", "unix", "file", "notify_fd",
                                       "notify", "exec", NULL};
    const cJSON *n = get(v, "notify");
    if (n && !cJSON_IsTrue(n)) {
        path_key(c, "notify");
        return verr(c, "only true is meaningful (leave ready out instead)");
    }
    return one_of(v, c, keys, "tcp, http, unix, file, notify_fd, notify, exec");
}

static int check_health(const cJSON *v, struct vctx *c)
{
    static const char *const keys[] = {"tcp", "http", "unix", "exec", "watchdog_ms", NULL};
    if (one_of(v, c, keys, "tcp, http, unix, exec, watchdog_ms") < 0)
        return -1;
    /* The service pings; hearth probes nothing, so there is no interval
     * or probe time to give. */
    if (get(v, "watchdog_ms")) {
        static const char *const probe_only[] = {"interval_ms", "timeout_ms", NULL};
        for (const char *const *k = probe_only; *k; k++) {
            if (get(v, *k)) {
                path_key(c, *k);
                return verr(c, "not used with watchdog_ms (a missed ping is the failure)");
            }
        }
    }
    return 0;
}

/* A code cannot both force a restart and prevent one: which rule won
 * would be a guess. */
static int check_exit_codes(const cJSON *svc, struct vctx *c)
{
    const cJSON *force = get(svc, "restart_force_exit_codes"), *a, *b;
    size_t i = 0;

    cJSON_ArrayForEach(a, get(svc, "restart_prevent_exit_codes")) {
        cJSON_ArrayForEach(b, force) {
            if (a->valueint == b->valueint) {
                path_append(c, ".restart_prevent_exit_codes[%zu]", i);
                return verr(c, "%d is also in restart_force_exit_codes", a->valueint);
            }
        }
        i++;
    }
    return 0;
}

static int check_mount(const cJSON *v, struct vctx *c)
{
    const cJSON *type = get(v, "type");

    /* Only tmpfs has a meaningful default source. */
    if (!get(v, "source") && !(type && strcmp(type->valuestring, "tmpfs") == 0)) {
        path_key(c, "source");
        return verr(c, "missing required key (only tmpfs mounts may omit it)");
    }
    return 0;
}

static int check_mount_rule(const cJSON *v, struct vctx *c)
{
    const cJSON *mode = get(v, "mode");

    if (mode && strcmp(mode->valuestring, "subpath") == 0 && !get(v, "tag")) {
        path_key(c, "tag");
        return verr(c, "missing required key (needed by mode subpath)");
    }
    return 0;
}

/* Whether path lies at or below root (component-wise: "/data/sharedx"
 * is not under "/data/shared"). */
static bool path_under(const char *path, const char *root)
{
    size_t n = strlen(root);

    while (n > 1 && root[n - 1] == '/')
        n--;
    if (n == 1 && root[0] == '/')
        return true;
    return strncmp(path, root, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

static int check_host_mounts(const cJSON *v, struct vctx *c);

/* Whole-document checks across sections: in subpath mode every host
 * share must lie under the host directory the shared tag exports. */
/* metrics: disk.ok must lie below disk.low, or the two would flap. */
static int check_metrics(const cJSON *v, struct vctx *c)
{
    const cJSON *low = get(v, "disk_low_percent"), *ok = get(v, "disk_ok_percent");
    int64_t l = CONFIG_DISK_LOW_PERCENT, o;

    if (low)
        json_int(low, &l);
    if (!ok || l == 0)
        return 0;
    json_int(ok, &o);
    if (o >= l) {
        path_key(c, "disk_ok_percent");
        return verr(c, "must be below disk_low_percent (%lld)", (long long)l);
    }
    return 0;
}

/* resume_file: "" turns it off; otherwise a clean absolute path that
 * does not lie in a control socket's directory, which services see as an
 * empty directory (contain.c), so they could never read it there. */
static int check_resume_file(const cJSON *v, struct vctx *c)
{
    if (!v->valuestring[0])
        return 0;
    return check_clean_path(v, c);
}

static int check_resume_dir(const cJSON *root, struct vctx *c)
{
    const cJSON *rf = get(root, "resume_file"), *listen = get(get(root, "control"), "listen");
    const char *file = rf ? rf->valuestring : CONFIG_RESUME_FILE;
    const char *slash = strrchr(file, '/');
    const cJSON *item;
    char q[QUOTE_MAX];

    if (!file[0] || !slash || slash == file)
        return 0;
    size_t dl = (size_t)(slash - file);
    for (int i = 0; listen ? (item = cJSON_GetArrayItem(listen, i)) != NULL : i == 0; i++) {
        const char *spec = listen ? item->valuestring : DEFAULT_UNIX_LISTEN;
        if (strncmp(spec, "unix:", 5) != 0)
            continue;
        const char *sock = spec + 5, *ss = strrchr(sock, '/');
        if (ss && (size_t)(ss - sock) == dl && strncmp(sock, file, dl) == 0) {
            path_key(c, "resume_file");
            return verr(c, "%s lies in the directory of the control socket %s, which services "
                        "cannot see", quote(file, q, sizeof(q)), sock);
        }
    }
    return 0;
}

static int check_top(const cJSON *root, struct vctx *c)
{
    const cJSON *rule = get(root, "host_mounts_rule"), *hm = get(root, "host_mounts");
    const cJSON *mode = get(rule, "mode"), *host_root = get(rule, "host_root"), *item;
    char q[QUOTE_MAX], q2[QUOTE_MAX];
    cJSON *inner;
    size_t i = 0;
    int r = 0;

    if (check_resume_dir(root, c) < 0)
        return -1;
    if (!hm || !host_root || !mode || strcmp(mode->valuestring, "subpath") != 0)
        return 0;
    inner = cJSON_Parse(hm->valuestring);
    cJSON_ArrayForEach(item, inner) {
        const char *hp = get(item, "hostPath")->valuestring;
        if (!path_under(hp, host_root->valuestring)) {
            path_append(c, "host_mounts[%zu].hostPath", i);
            r = verr(c, "%s is not under host_mounts_rule.host_root %s", quote(hp, q, sizeof(q)),
                     quote(host_root->valuestring, q2, sizeof(q2)));
            break;
        }
        i++;
    }
    cJSON_Delete(inner);
    return r;
}

static int service_index(const cJSON *services, const char *name)
{
    const cJSON *svc;
    int i = 0;

    cJSON_ArrayForEach(svc, services) {
        if (strcmp(get(svc, "name")->valuestring, name) == 0)
            return i;
        i++;
    }
    return -1;
}

/* Depth-first search for a cycle through "after" edges. On finding one,
 * stack[from..depth) holds it. Depth is bounded by CONFIG_MAX_SERVICES. */
static int find_cycle(int i, int n, bool adj[][CONFIG_MAX_SERVICES], unsigned char *color,
                      int *stack, int depth, int *from)
{
    color[i] = 1;
    stack[depth] = i;
    for (int j = 0; j < n; j++) {
        if (!adj[i][j])
            continue;
        if (color[j] == 1) {
            for (int k = 0; k <= depth; k++)
                if (stack[k] == j)
                    *from = k;
            return depth + 1;
        }
        if (color[j] == 0) {
            int r = find_cycle(j, n, adj, color, stack, depth + 1, from);
            if (r)
                return r;
        }
    }
    color[i] = 2;
    return 0;
}

/* Checks that need the whole services array: unique names, one main
 * service at most, "after" names that exist, and no dependency cycle. */
static int check_services(const cJSON *arr, struct vctx *c)
{
    bool adj[CONFIG_MAX_SERVICES][CONFIG_MAX_SERVICES];
    unsigned char color[CONFIG_MAX_SERVICES];
    int stack[CONFIG_MAX_SERVICES + 1];
    const cJSON *svc, *a, *main_svc = NULL;
    char q[QUOTE_MAX];
    int n = 0, main_idx = -1;

    memset(adj, 0, sizeof(adj));
    cJSON_ArrayForEach(svc, arr) {
        const char *name = get(svc, "name")->valuestring;
        const cJSON *m = get(svc, "main");
        size_t old = path_index(c, (size_t)n);
        int first = service_index(arr, name);

        if (first != n) {
            path_key(c, "name");
            return verr(c, "duplicate service name %s (also services[%d])",
                        quote(name, q, sizeof(q)), first);
        }
        if (cJSON_IsTrue(m)) {
            if (main_svc) {
                path_key(c, "main");
                return verr(c, "only one service may be main (services[%d] already is)",
                            main_idx);
            }
            main_svc = svc;
            main_idx = n;
        }
        path_pop(c, old);
        n++;
    }
    for (int i = 0; i < n; i++) {
        size_t old, k = 0;
        svc = cJSON_GetArrayItem(arr, i);
        old = path_index(c, (size_t)i);
        cJSON_ArrayForEach(a, get(svc, "after")) {
            const char *dep = a->valuestring;
            int j = service_index(arr, dep);
            size_t old2 = path_append(c, ".after[%zu]", k++);
            if (j == i)
                return verr(c, "a service cannot wait for itself");
            if (j < 0 && !in_list(dep, config_after_phases))
                return verr(c,
                            "unknown service or phase %s (phases: mounts, skills, egress, "
                            "network, init)",
                            quote(dep, q, sizeof(q)));
            if (j >= 0)
                adj[i][j] = true;
            path_pop(c, old2);
        }
        path_pop(c, old);
    }
    memset(color, 0, sizeof(color));
    for (int i = 0; i < n; i++) {
        int from = 0, len;
        if (color[i])
            continue;
        len = find_cycle(i, n, adj, color, stack, 0, &from);
        if (len) {
            char chain[CONFIG_ERR_MAX];
            size_t o = 0;
            for (int k = from; k <= len && o < sizeof(chain); k++) {
                int idx = k < len ? stack[k] : stack[from];
                o += (size_t)snprintf(chain + o, sizeof(chain) - o, "%s%s", k > from ? " -> " : "",
                                      get(cJSON_GetArrayItem(arr, idx), "name")->valuestring);
            }
            path_index(c, (size_t)stack[from]);
            path_key(c, "after");
            return verr(c, "dependency cycle: %s", chain);
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* The schema tables (DESIGN section 5). Leaves first, then the objects
 * that use them. */

static const char *const e_log_level[] = {"error", "warn", "info", "debug", NULL};
static const char *const e_on_timeout[] = {"start", "fail", NULL};
static const char *const e_restart[] = {"always", "on-failure", "never", NULL};
static const char *const e_seccomp[] = {"default", "off", NULL};
static const char *const e_mount_rule[] = {"tag-per-share", "subpath", NULL};

/* Shorthands so each table row reads as "key: type". */
#define SCHEMA(...) (&(const struct schema){__VA_ARGS__})
#define STRING(fn) SCHEMA(.kind = K_STRING, .check = (fn))
#define INT(lo, hi) SCHEMA(.kind = K_INT, .min = (lo), .max = (hi))
#define ENUM(list) SCHEMA(.kind = K_ENUM, .names = (list))
#define OBJECT(table, fn) SCHEMA(.kind = K_OBJECT, .keys = (table), .check = (fn))
#define ARRAY(el, lo, hi, fn) \
    SCHEMA(.kind = K_ARRAY, .elem = (el), .min = (lo), .max = (hi), .check = (fn))
#define ANY(fn) SCHEMA(.kind = K_ANY, .check = (fn))

static const struct schema s_bool = {.kind = K_BOOL};
static const struct schema s_str = {.kind = K_STRING};
static const struct schema s_nonempty = {.kind = K_STRING, .min = 1};
static const struct schema s_abspath = {.kind = K_STRING, .check = check_abspath};
static const struct schema s_ms = {.kind = K_INT, .min = 0, .max = INT53};
static const struct schema s_ip = {.kind = K_STRING, .check = check_ip};
static const struct schema s_hostport = {.kind = K_STRING, .check = check_hostport};
static const struct schema s_http_target = {.kind = K_STRING, .check = check_http_target};
static const struct schema s_nonempty_array = {.kind = K_ARRAY, .elem = &s_nonempty};
static const struct schema s_abspath_array = {.kind = K_ARRAY, .elem = &s_abspath};
static const struct schema s_argv = {
    .kind = K_ARRAY, .min = 1, .elem = &s_str, .check = check_argv};
static const struct schema s_cidr_list = {.kind = K_ARRAY, .elem = STRING(check_cidr_net)};

static const struct key k_log[] = {
    KEY("level", ENUM(e_log_level)),
    {0}};

static const struct key k_control[] = {
    KEY("listen", ARRAY(STRING(check_listen), 0, CONFIG_MAX_LISTEN, NULL)),
    KEY("allowed_cids", ARRAY(INT(0, 0xffffffffLL), 0, MAX_ALLOWED_CIDS, NULL)),
    KEY("idle_evict_ms", &s_ms),
    {0}};

static const struct key k_wait_for_init[] = {
    KEY("enabled", &s_bool),
    KEY("timeout_ms", &s_ms),
    KEY("on_timeout", ENUM(e_on_timeout)),
    {0}};

static const struct key k_clock[] = {
    KEY("set", &s_bool),
    KEY("step_threshold_ms", &s_ms),
    KEY("check_ms", &s_ms),
    {0}};

static const struct key k_metrics[] = {
    KEY("disk_low_percent", INT(0, 100)),
    KEY("disk_ok_percent", INT(0, 99)),
    KEY("disk_check_ms", &s_ms),
    {0}};

static const struct key k_interface[] = {
    REQUIRED("name", STRING(check_ifname)),
    KEY("mac", STRING(check_mac)),
    KEY("address", STRING(check_ifaddr)),
    KEY("gateway", &s_ip),
    KEY("mtu", INT(68, 65535)),
    KEY("required", &s_bool),
    KEY("timeout_ms", &s_ms),
    {0}};

static const struct key k_network[] = {
    KEY("interfaces", ARRAY(OBJECT(k_interface, NULL), 0, 0, NULL)),
    KEY("dns", ARRAY(&s_ip, 0, 0, NULL)),
    KEY("resolv_conf", &s_abspath),
    {0}};

static const struct key k_mount[] = {
    KEY("source", &s_nonempty),
    REQUIRED("target", STRING(check_clean_path)),
    KEY("type", SCHEMA(.kind = K_STRING, .min = 1, .check = check_fstype)),
    KEY("read_only", &s_bool),
    KEY("options", &s_str),
    KEY("required", &s_bool),
    KEY("timeout_ms", &s_ms),
    {0}};

/* The platform's own shape, inside the host_mounts string. */
static const struct key k_host_mount[] = {
    REQUIRED("hostPath", STRING(check_clean_path)),
    REQUIRED("mountPath", STRING(check_clean_path)),
    KEY("readOnly", &s_bool),
    {0}};
static const struct schema s_host_mount_list = {
    .kind = K_ARRAY, .elem = OBJECT(k_host_mount, NULL)};

static const struct key k_mount_rule[] = {
    KEY("mode", ENUM(e_mount_rule)),
    KEY("tag", &s_nonempty),
    KEY("host_root", STRING(check_clean_path)),
    {0}};

static const struct key k_seed[] = {
    REQUIRED("target", &s_abspath),
    REQUIRED("from", &s_abspath),
    KEY("unless", &s_nonempty),
    {0}};

static const struct key k_skills[] = {
    KEY("public", &s_abspath),
    KEY("private", &s_abspath),
    KEY("ignore", &s_nonempty_array),
    KEY("poll_ms", &s_ms),
    KEY("marker", STRING(check_filename)),
    KEY("depth", INT(1, 8)),
    KEY("timeout_ms", INT(100, 3600000)),
    {0}};

static const struct key k_egress[] = {
    KEY("allowPublicTraffic", &s_bool),
    KEY("allowOut", &s_cidr_list),
    KEY("denyOut", &s_cidr_list),
    {0}};

static const struct key k_backoff[] = {
    KEY("initial_ms", &s_ms),
    KEY("max_ms", &s_ms),
    KEY("reset_after_ms", &s_ms),
    {0}};

static const struct key k_ready[] = {
    KEY("tcp", &s_hostport),
    KEY("http", &s_http_target),
    KEY("unix", &s_abspath),
    KEY("file", &s_abspath),
    KEY("notify_fd", INT(3, 1023)),
    KEY("notify", &s_bool),
    KEY("exec", &s_argv),
    KEY("timeout_ms", &s_ms),
    {0}};

static const struct key k_health[] = {
    KEY("tcp", &s_hostport),
    KEY("http", &s_http_target),
    KEY("unix", &s_abspath),
    KEY("exec", &s_argv),
    KEY("watchdog_ms", INT(1, INT64_C(2147483647))),
    KEY("interval_ms", INT(1, INT53)),
    KEY("timeout_ms", &s_ms),
    KEY("failures", INT(1, INT53)),
    {0}};

static const struct key k_stop[] = {
    KEY("signal", STRING(check_signal)),
    KEY("timeout_ms", &s_ms),
    {0}};

static const struct key k_service_log[] = {
    KEY("file", &s_abspath),
    KEY("max_bytes", INT(0, INT53)),
    KEY("keep", INT(0, 100)),
    KEY("ring_lines", INT(0, 100000)),
    {0}};

/* A page is the least the kernel can account; below 1 MiB no program
 * would start, so such a value is a unit mistake. */
static const struct key k_limits[] = {
    KEY("memory_max", INT(1 << 20, INT53)),
    KEY("memory_high", INT(1 << 20, INT53)),
    KEY("pids_max", INT(1, 4194304)),
    {0}};

static const struct key k_service[] = {
    REQUIRED("name", STRING(check_service_name)),
    REQUIRED("argv", &s_argv),
    KEY("env", SCHEMA(.kind = K_MAP, .max = MAX_ENV_VARS, .elem = &s_str,
                      .key_check = check_env_key)),
    KEY("env_files", &s_abspath_array),
    KEY("cwd", &s_abspath),
    KEY("user", &s_nonempty),
    KEY("group", &s_nonempty),
    KEY("umask", ANY(check_umask)),
    KEY("rlimits", SCHEMA(.kind = K_MAP, .elem = ANY(check_rlimit_value),
                          .key_check = check_rlimit_key)),
    KEY("oom_score_adj", INT(-1000, 1000)),
    KEY("after", &s_nonempty_array),
    KEY("restart", ENUM(e_restart)),
    KEY("main", &s_bool),
    KEY("backoff", OBJECT(k_backoff, check_backoff)),
    KEY("ready", OBJECT(k_ready, check_ready)),
    KEY("health", OBJECT(k_health, check_health)),
    KEY("stop", OBJECT(k_stop, NULL)),
    KEY("success_exit_codes", ARRAY(INT(0, 255), 0, 256, NULL)),
    KEY("restart_force_exit_codes", ARRAY(INT(0, 255), 0, 256, NULL)),
    KEY("restart_prevent_exit_codes", ARRAY(INT(0, 255), 0, 256, NULL)),
    KEY("on_resume", STRING(check_on_resume)),
    KEY("caps_keep", ARRAY(STRING(check_cap), 0, 0, NULL)),
    KEY("caps_drop", ARRAY(STRING(check_cap), 0, 0, NULL)),
    KEY("no_new_privs", &s_bool),
    KEY("isolation", &s_bool),
    KEY("seccomp", ENUM(e_seccomp)),
    KEY("log", OBJECT(k_service_log, NULL)),
    KEY("limits", OBJECT(k_limits, NULL)),
    {0}};

static const struct key k_top[] = {
    KEY("hostname", STRING(check_hostname)),
    KEY("log", OBJECT(k_log, NULL)),
    KEY("control", OBJECT(k_control, NULL)),
    KEY("modules", ARRAY(SCHEMA(.kind = K_STRING, .min = 1, .check = check_module), 0, 0, NULL)),
    KEY("wait_for_init", OBJECT(k_wait_for_init, NULL)),
    KEY("clock", OBJECT(k_clock, NULL)),
    KEY("resume_file", STRING(check_resume_file)),
    KEY("metrics", OBJECT(k_metrics, check_metrics)),
    KEY("network", OBJECT(k_network, NULL)),
    KEY("mounts", ARRAY(OBJECT(k_mount, check_mount), 0, 0, NULL)),
    KEY("host_mounts", STRING(check_host_mounts)),
    KEY("host_mounts_rule", OBJECT(k_mount_rule, check_mount_rule)),
    KEY("seed", ARRAY(OBJECT(k_seed, NULL), 0, 0, NULL)),
    KEY("skills", OBJECT(k_skills, NULL)),
    KEY("egress", OBJECT(k_egress, NULL)),
    KEY("services", ARRAY(OBJECT(k_service, check_exit_codes), 0, CONFIG_MAX_SERVICES, check_services)),
    {0}};

static const struct schema s_top = {.kind = K_OBJECT, .keys = k_top, .check = check_top};

/* ------------------------------------------------------------------ */
/* JSON text handling. */

static void line_col(const char *text, size_t off, size_t *line, size_t *col)
{
    size_t l = 1, start = 0;

    for (size_t i = 0; i < off; i++) {
        if (text[i] == '\n') {
            l++;
            start = i + 1;
        }
    }
    *line = l;
    *col = off - start + 1;
}

static void syntax_error(const char *text, size_t off, const char *what, char *out, size_t outlen)
{
    size_t line, col;

    line_col(text, off, &line, &col);
    snprintf(out, outlen, "syntax error at byte %zu (line %zu, column %zu)%s%s", off, line, col,
             what ? ": " : "", what ? what : "");
}

/* cJSON accepts raw control characters inside strings and turns \u0000
 * into an early end of string; both would let a value differ from what
 * the operator sees, so they are refused. The text already parsed, so a
 * small scanner suffices. Returns the offending offset or -1. */
static long bad_string_byte(const char *text, size_t len, const char **what)
{
    bool in_str = false;

    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)text[i];
        if (!in_str) {
            in_str = ch == '"';
            continue;
        }
        if (ch == '"') {
            in_str = false;
        } else if (ch < 0x20) {
            *what = "control character in string";
            return (long)i;
        } else if (ch == '\\' && i + 1 < len) {
            if (text[i + 1] == 'u' && i + 5 < len && memcmp(text + i + 2, "0000", 4) == 0) {
                *what = "\\u0000 in string";
                return (long)i;
            }
            i++;
        }
    }
    return -1;
}

/* Parses exactly len bytes of JSON: trailing data is an error, as is
 * anything cJSON would silently reinterpret. reason gets the syntax error
 * with byte offset and line. */
static cJSON *parse_json(const char *text, size_t len, char *reason, size_t rlen)
{
    const char *end = NULL, *what = NULL;
    cJSON *root;
    size_t off;
    long bad;

    for (off = 0; off < len && strchr(" \t\r\n", text[off]) && text[off]; off++)
        ;
    if (off == len) {
        syntax_error(text, off, "empty document", reason, rlen);
        return NULL;
    }
    root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) {
        off = end && end >= text ? (size_t)(end - text) : 0;
        syntax_error(text, off, NULL, reason, rlen);
        return NULL;
    }
    off = (size_t)(end - text);
    while (off < len && strchr(" \t\r\n", text[off]) && text[off])
        off++;
    if (off < len) {
        cJSON_Delete(root);
        syntax_error(text, off, "unexpected data after the JSON value", reason, rlen);
        return NULL;
    }
    bad = bad_string_byte(text, len, &what);
    if (bad >= 0) {
        cJSON_Delete(root);
        syntax_error(text, (size_t)bad, what, reason, rlen);
        return NULL;
    }
    return root;
}

/* host_mounts is a JSON array inside a string (the platform's metadata,
 * passed through verbatim); its entries are validated with their own
 * table and errors continue the outer path: host_mounts[0].mountPath. */
static int check_host_mounts(const cJSON *v, struct vctx *c)
{
    const char *s = v->valuestring;
    char reason[CONFIG_ERR_MAX];
    cJSON *inner;
    size_t len = strlen(s), i;
    int r;

    /* An empty string is how some hosts say "no shares". */
    for (i = 0; i < len && strchr(" \t\r\n", s[i]); i++)
        ;
    if (i == len)
        return 0;
    inner = parse_json(s, len, reason, sizeof(reason));
    if (!inner)
        return verr(c, "bad JSON in string: %s", reason);
    if (!cJSON_IsArray(inner)) {
        cJSON_Delete(inner);
        return verr(c, "expected a JSON array in the string");
    }
    r = validate(inner, &s_host_mount_list, c);
    cJSON_Delete(inner);
    return r;
}

/* ------------------------------------------------------------------ */
/* Extraction into struct config (the tree is known valid here). */

struct builder {
    bool oom;
};

static char *dup_str(struct builder *b, const char *s)
{
    char *d;

    if (!s)
        return NULL;
    d = strdup(s);
    if (!d)
        b->oom = true;
    return d;
}

static char *dup_opt(struct builder *b, const cJSON *obj, const char *key)
{
    const cJSON *v = get(obj, key);
    return cJSON_IsString(v) ? dup_str(b, v->valuestring) : NULL;
}

/* A NULL-terminated copy of an array of strings; *n counts the entries. */
static char **dup_list(struct builder *b, const cJSON *arr, size_t *n)
{
    const cJSON *item;
    char **out;
    size_t count, i = 0;

    *n = 0;
    if (!arr)
        return NULL;
    count = (size_t)cJSON_GetArraySize(arr);
    out = calloc(count + 1, sizeof(*out));
    if (!out) {
        b->oom = true;
        return NULL;
    }
    *n = count;
    cJSON_ArrayForEach(item, arr)
        out[i++] = dup_str(b, item->valuestring);
    return out;
}

static void free_list(char **list, size_t n)
{
    if (!list)
        return;
    for (size_t i = 0; i < n; i++)
        free(list[i]);
    free(list);
}

static void build_service(struct builder *b, struct service_config *s, cJSON *obj)
{
    const cJSON *env = get(obj, "env"), *codes = get(obj, "success_exit_codes");
    const cJSON *backoff = get(obj, "backoff"), *stop = get(obj, "stop");
    const cJSON *restart = get(obj, "restart"), *item;

    s->json = obj;
    s->name = dup_opt(b, obj, "name");
    s->argv = dup_list(b, get(obj, "argv"), &s->argc);
    if (env) {
        size_t n = (size_t)cJSON_GetArraySize(env), i = 0;
        s->env = calloc(n ? n : 1, sizeof(*s->env));
        if (!s->env) {
            b->oom = true;
        } else {
            s->n_env = n;
            cJSON_ArrayForEach(item, env) {
                s->env[i].key = dup_str(b, item->string);
                s->env[i].value = dup_str(b, item->valuestring);
                i++;
            }
        }
    }
    s->env_files = dup_list(b, get(obj, "env_files"), &s->n_env_files);
    s->cwd = dup_opt(b, obj, "cwd");
    s->user = dup_opt(b, obj, "user");
    s->group = dup_opt(b, obj, "group");
    s->after = dup_list(b, get(obj, "after"), &s->n_after);
    s->restart = RESTART_ALWAYS;
    if (restart && strcmp(restart->valuestring, "on-failure") == 0)
        s->restart = RESTART_ON_FAILURE;
    else if (restart && strcmp(restart->valuestring, "never") == 0)
        s->restart = RESTART_NEVER;
    s->main = cJSON_IsTrue(get(obj, "main"));
    s->backoff_initial_ms = int_or(backoff, "initial_ms", DEFAULT_BACKOFF_INITIAL_MS);
    s->backoff_max_ms = int_or(backoff, "max_ms", DEFAULT_BACKOFF_MAX_MS);
    s->backoff_reset_ms = int_or(backoff, "reset_after_ms", DEFAULT_BACKOFF_RESET_MS);
    s->stop_signal = SIGTERM;
    if (get(stop, "signal"))
        s->stop_signal = config_signal_number(get(stop, "signal")->valuestring);
    s->stop_timeout_ms = int_or(stop, "timeout_ms", DEFAULT_STOP_TIMEOUT_MS);
    const cJSON *limits = get(obj, "limits");
    s->memory_max = int_or(limits, "memory_max", 0);
    s->memory_high = int_or(limits, "memory_high", 0);
    s->pids_max = int_or(limits, "pids_max", 0);
    s->n_success = codes ? (size_t)cJSON_GetArraySize(codes) : 1;
    s->success_exit_codes = calloc(s->n_success ? s->n_success : 1, sizeof(int));
    if (!s->success_exit_codes) {
        b->oom = true;
        s->n_success = 0;
    } else if (codes) {
        size_t i = 0;
        cJSON_ArrayForEach(item, codes)
            s->success_exit_codes[i++] = item->valueint;
    }
    s->on_resume = dup_opt(b, obj, "on_resume");
    cJSON_ArrayForEach(item, get(obj, "restart_force_exit_codes"))
        s->force_exit[item->valueint / 8] |= (unsigned char)(1u << (item->valueint % 8));
    cJSON_ArrayForEach(item, get(obj, "restart_prevent_exit_codes"))
        s->prevent_exit[item->valueint / 8] |= (unsigned char)(1u << (item->valueint % 8));
    s->settings = svc_settings_build(obj);
    if (!s->settings)
        b->oom = true;
}

static void add_listen(struct config *cfg, const char *s)
{
    char reason[CONFIG_ERR_MAX];

    if (cfg->n_listen < CONFIG_MAX_LISTEN &&
        config_parse_listen(s, &cfg->listen[cfg->n_listen], reason, sizeof(reason)) == 0)
        cfg->n_listen++;
}

static struct config *build(cJSON *root, char *err, size_t errlen)
{
    struct config *cfg = calloc(1, sizeof(*cfg));
    struct builder b = {false};
    const cJSON *control = get(root, "control"), *wait = get(root, "wait_for_init");
    const cJSON *level = get(get(root, "log"), "level");
    const cJSON *listen = get(control, "listen"), *cids = get(control, "allowed_cids");
    cJSON *svc;
    const cJSON *item;

    if (!cfg) {
        cJSON_Delete(root);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    cfg->json = root;
    cfg->hostname = dup_opt(&b, root, "hostname");
    cfg->log_level = HLOG_INFO;
    if (level)
        log_level_parse(level->valuestring, &cfg->log_level);
    if (listen) {
        cJSON_ArrayForEach(item, listen)
            add_listen(cfg, item->valuestring);
    } else {
        add_listen(cfg, DEFAULT_UNIX_LISTEN);
        add_listen(cfg, DEFAULT_VSOCK_LISTEN);
    }
    if (cids) {
        cJSON_ArrayForEach(item, cids) {
            int64_t v = 0;
            json_int(item, &v);
            cfg->allowed_cids[cfg->n_allowed_cids++] = (uint32_t)v;
        }
    } else {
        cfg->allowed_cids[0] = DEFAULT_HOST_CID;
        cfg->n_allowed_cids = 1;
    }
    cfg->modules = dup_list(&b, get(root, "modules"), &cfg->n_modules);
    cfg->idle_evict_ms = int_or(control, "idle_evict_ms", CONFIG_IDLE_EVICT_MS);
    cfg->wait_for_init = cJSON_IsTrue(get(wait, "enabled"));
    cfg->wait_for_init_timeout_ms = int_or(wait, "timeout_ms", 0);
    cJSON_ArrayForEach(svc, cJSON_GetObjectItemCaseSensitive(root, "services"))
        build_service(&b, &cfg->services[cfg->n_services++], svc);
    if (b.oom) {
        config_free(cfg);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    return cfg;
}

/* ------------------------------------------------------------------ */
/* Public entry points. */

struct config *config_parse(const char *text, size_t len, char *err, size_t errlen)
{
    char scratch[CONFIG_ERR_MAX];
    struct vctx c;
    cJSON *root;

    /* Callers that do not want the message still get a valid buffer. */
    if (!err || !errlen) {
        err = scratch;
        errlen = sizeof(scratch);
    }
    err[0] = '\0';
    if (!text)
        len = 0;
    if (len > CONFIG_MAX_BYTES) {
        snprintf(err, errlen, "document larger than %d bytes", CONFIG_MAX_BYTES);
        return NULL;
    }
    root = parse_json(text ? text : "", len, err, errlen);
    if (!root)
        return NULL;
    memset(&c, 0, sizeof(c));
    c.err = err;
    c.errlen = errlen;
    if (validate(root, &s_top, &c) < 0) {
        cJSON_Delete(root);
        return NULL;
    }
    return build(root, err, errlen);
}

int config_check_section(const char *key, const struct cJSON *value, char *err, size_t errlen)
{
    char scratch[CONFIG_ERR_MAX];
    const struct key *k = k_top;
    struct vctx c;

    if (!err || !errlen) {
        err = scratch;
        errlen = sizeof(scratch);
    }
    memset(&c, 0, sizeof(c));
    c.err = err;
    c.errlen = errlen;
    if (!key)
        return verr(&c, "no section named");
    while (k->name && strcmp(k->name, key) != 0)
        k++;
    path_key(&c, key);
    if (!k->name)
        return verr(&c, "unknown key");
    if (!value)
        return verr(&c, "missing value");
    return validate(value, k->s, &c);
}

/* The file's bytes (at most CONFIG_MAX_BYTES, NUL-terminated, *lenp of
 * them) in a buffer the caller frees; NULL with err and errno set. */
static char *read_config_file(const char *path, size_t *lenp, char *err, size_t errlen)
{
    struct stat st;
    char *buf;
    size_t len = 0;
    int fd, saved;

    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        saved = errno;
        snprintf(err, errlen, "%s: %s", path, strerror(saved));
        errno = saved;
        return NULL;
    }
    /* Refuse early when the size is known; /proc-like files report 0 and
     * are bounded by the read loop instead. */
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > CONFIG_MAX_BYTES) {
        close(fd);
        snprintf(err, errlen, "%s: larger than %d bytes", path, CONFIG_MAX_BYTES);
        errno = EFBIG;
        return NULL;
    }
    buf = malloc(CONFIG_MAX_BYTES + 1);
    if (!buf) {
        close(fd);
        snprintf(err, errlen, "%s: %s", path, strerror(ENOMEM));
        errno = ENOMEM;
        return NULL;
    }
    /* One byte past the limit tells "exactly 1 MiB" from "more". */
    while (len <= CONFIG_MAX_BYTES) {
        ssize_t n = read(fd, buf + len, CONFIG_MAX_BYTES + 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            saved = errno;
            snprintf(err, errlen, "%s: %s", path, strerror(saved));
            free(buf);
            close(fd);
            errno = saved;
            return NULL;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    if (len > CONFIG_MAX_BYTES) {
        free(buf);
        snprintf(err, errlen, "%s: larger than %d bytes", path, CONFIG_MAX_BYTES);
        errno = EFBIG;
        return NULL;
    }
    buf[len] = 0;
    *lenp = len;
    return buf;
}

struct config *config_load(const char *path, char *err, size_t errlen)
{
    char scratch[CONFIG_ERR_MAX];
    struct config *cfg;
    size_t len;

    if (!err || !errlen) {
        err = scratch;
        errlen = sizeof(scratch);
    }
    if (!path)
        path = CONFIG_DEFAULT_PATH;
    char *buf = read_config_file(path, &len, err, errlen);
    if (!buf)
        return NULL;
    cfg = config_parse(buf, len, err, errlen);
    free(buf);
    if (!cfg)
        errno = EINVAL;
    return cfg;
}

struct config *config_fallback(const char *path, bool *kept)
{
    char err[CONFIG_ERR_MAX];
    struct config *cfg = NULL;
    size_t len;

    *kept = false;
    char *buf = read_config_file(path, &len, err, sizeof(err));
    cJSON *doc = buf ? cJSON_ParseWithLength(buf, len) : NULL;
    free(buf);
    if (cJSON_IsObject(doc)) {
        /* Only the two keys that decide whether the host can reach the
         * guest: the listeners, and the modules their drivers may be. */
        cJSON *part = cJSON_CreateObject();
        static const char *const keep[] = {"control", "modules"};
        for (size_t i = 0; part && i < sizeof(keep) / sizeof(keep[0]); i++) {
            cJSON *v = cJSON_DetachItemFromObjectCaseSensitive(doc, keep[i]);
            if (v)
                cJSON_AddItemToObject(part, keep[i], v);
        }
        char *text = part && part->child ? cJSON_PrintUnformatted(part) : NULL;
        if (text) {
            cfg = config_parse(text, strlen(text), err, sizeof(err));
            *kept = cfg != NULL;
            cJSON_free(text);
        }
        cJSON_Delete(part);
    }
    cJSON_Delete(doc);
    return cfg ? cfg : config_default(err, sizeof(err));
}

struct config *config_default(char *err, size_t errlen)
{
    return config_parse("{}", 2, err, errlen);
}

void config_free(struct config *cfg)
{
    if (!cfg)
        return;
    for (size_t i = 0; i < cfg->n_services; i++) {
        struct service_config *s = &cfg->services[i];
        free(s->name);
        free_list(s->argv, s->argc);
        for (size_t j = 0; j < s->n_env; j++) {
            free(s->env[j].key);
            free(s->env[j].value);
        }
        free(s->env);
        free_list(s->env_files, s->n_env_files);
        free(s->cwd);
        free(s->user);
        free(s->group);
        free_list(s->after, s->n_after);
        free(s->success_exit_codes);
        free(s->on_resume);
        svc_settings_free(s->settings);
    }
    free(cfg->hostname);
    free_list(cfg->modules, cfg->n_modules);
    cJSON_Delete(cfg->json);
    free(cfg);
}

struct cJSON *config_redacted_json(const struct config *cfg)
{
    cJSON *copy;

    if (!cfg || !cfg->json)
        return NULL;
    copy = cJSON_Duplicate(cfg->json, 1);
    /* Env values by name, flags in argv and exec, registered values and
     * URL passwords in every string (see redact.h). */
    redact_json(copy);
    return copy;
}
