/* names: the name <-> number tables hearth's config speaks (signals,
 * capabilities, resource limits), the control listen specs, and the quoting
 * of a value for an error message that all of them share. */
#include "names.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>

#include "err.h"
#include "redact.h"

/* Quotes a value for an error message: printable ASCII as is, anything
 * else as \xNN, cut after a bounded length, so a hostile value can neither
 * forge log lines nor crowd the path out of the message. */
const char *names_quote(const char *s, char *buf, size_t n)
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
const char *const names_after_phases[] = {"mounts", "skills", "egress", "network", "init", NULL};

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

int names_signal_number(const char *name)
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
        return names_signal_name((int)v) ? (int)v : -1;
    }
    bare = strncasecmp(name, "SIG", 3) == 0 ? name + 3 : name;
    for (size_t i = 0; i < ARRAY_LEN(signals); i++)
        if (strcasecmp(bare, signals[i].name + 3) == 0)
            return signals[i].num;
    return -1;
}

const char *names_signal_name(int sig)
{
    for (size_t i = 0; i < ARRAY_LEN(signals); i++)
        if (signals[i].num == sig)
            return signals[i].name;
    return NULL;
}

int names_cap_number(const char *name)
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

int names_rlimit_number(const char *name)
{
    if (!name)
        return -1;
    for (size_t i = 0; i < ARRAY_LEN(rlimits); i++)
        if (strcmp(name, rlimits[i].name) == 0)
            return rlimits[i].num;
    return -1;
}

bool names_env_is_secret(const char *name) { return redact_name_is_secret(name); }

/* Strict unsigned decimal: digits only, no sign, no blanks, no leading
 * zeros, value <= max. */
bool names_parse_udec(const char *s, uint64_t max, uint64_t *out)
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

int names_parse_listen(const char *s, struct listen_spec *out, struct err *err)
{
    struct listen_spec l;
    char q[NAMES_QUOTE_MAX];
    struct err scratch;
    const char *rest;
    uint64_t port;

    if (!err)
        err = &scratch;
    memset(&l, 0, sizeof(l));
    if (!s)
        s = "";
    if (strncmp(s, "unix:", 5) == 0 || strncmp(s, "serial:", 7) == 0) {
        l.kind = s[0] == 'u' ? LISTEN_UNIX : LISTEN_SERIAL;
        rest = strchr(s, ':') + 1;
        if (!*rest)
            return err_set(err, "bad listen address %s (empty path)", names_quote(s, q, sizeof(q)));
        if (strlen(rest) >= sizeof(l.path))
            return err_set(err, "bad listen address %s (path longer than %zu bytes)",
                           names_quote(s, q, sizeof(q)), sizeof(l.path) - 1);
        strcpy(l.path, rest);
    } else if (strncmp(s, "vsock:", 6) == 0) {
        l.kind = LISTEN_VSOCK;
        /* 0xffffffff is VMADDR_PORT_ANY, not a port one can listen on. */
        if (!names_parse_udec(s + 6, 0xfffffffeu, &port) || port == 0)
            return err_set(err, "bad listen address %s (vsock port must be 1..4294967294)",
                           names_quote(s, q, sizeof(q)));
        l.port = (uint32_t)port;
    } else {
        return err_set(err,
                       "bad listen address %s (expected unix:PATH, vsock:PORT or serial:PATH)",
                       names_quote(s, q, sizeof(q)));
    }
    if (out)
        *out = l;
    return 0;
}

void names_rlimit_names(char *buf, size_t n)
{
    size_t o = 0;

    if (!n)
        return;
    buf[0] = '\0';
    for (size_t i = 0; i < ARRAY_LEN(rlimits) && o < n; i++)
        o += (size_t)snprintf(buf + o, n - o, "%s%s", i ? ", " : "", rlimits[i].name);
}

bool names_env_valid(const char *name, size_t len)
{
    if (len == 0 || (name[0] >= '0' && name[0] <= '9'))
        return false;
    for (size_t i = 0; i < len; i++) {
        char ch = name[i];
        if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
              ch == '_'))
            return false;
    }
    return true;
}

int names_sysctl_path(const char *root, const char *name, char *buf, size_t len)
{
    size_t n = strlen(name), rl = strlen(root);
    bool start = true;

    if (n == 0 || n > NAMES_SYSCTL_MAX) {
        errno = EINVAL;
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        char ch = name[i];
        if (ch == '.') {
            /* ".." and a leading or trailing dot are empty components. */
            if (start || i + 1 == n) {
                errno = EINVAL;
                return -1;
            }
            start = true;
            continue;
        }
        if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
              ch == '_' || ch == '-')) {
            errno = EINVAL;
            return -1;
        }
        start = false;
    }
    if (rl + 1 + n + 1 > len) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(buf, root, rl);
    buf[rl] = '/';
    for (size_t i = 0; i < n; i++)
        buf[rl + 1 + i] = name[i] == '.' ? '/' : name[i];
    buf[rl + 1 + n] = '\0';
    return 0;
}
