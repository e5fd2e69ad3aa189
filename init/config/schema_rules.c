/* schema_rules: the value checks the schema tables point at, each run
 * after its schema's type check passed, and the checks that need more
 * than one value (a whole service, the services array, the document). */
#include "schema_priv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <sys/socket.h>

#include <cJSON.h>

#include "cidr.h"
#include "config.h"
#include "err.h"
#include "http.h"
#include "names.h"
#include "netaddr.h"
#include "pathname.h"

int rule_abspath(const cJSON *v, struct vctx *c)
{
    char q[NAMES_QUOTE_MAX];

    if (v->valuestring[0] != '/')
        return vfail(c, "expected an absolute path, got %s", names_quote(v->valuestring, q, sizeof(q)));
    return 0;
}

/* A file name (skills.marker): one component, so the marker test stays
 * one lookup inside each entry and can never name a path elsewhere. */
int rule_filename(const cJSON *v, struct vctx *c)
{
    char q[NAMES_QUOTE_MAX];
    const char *s = v->valuestring;

    if (!*s || strchr(s, '/') || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
        return vfail(c, "expected a file name (no '/'), got %s", names_quote(s, q, sizeof(q)));
    return 0;
}

/* A user or group as /etc/passwd and /etc/group name one (or a number):
 * a name that could never be in those files (':', '/', ',', blanks,
 * control characters) or is longer than any of them is a mistake. The
 * name is resolved later, through the boot snapshot (accounts.h). */
#define ACCOUNT_NAME_MAX 64
static bool account_name_ok(const char *s, size_t n)
{
    if (n == 0 || n > ACCOUNT_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch <= ' ' || ch == 0x7f || ch == ':' || ch == '/' || ch == ',')
            return false;
    }
    return true;
}

int rule_account(const cJSON *v, struct vctx *c)
{
    char q[NAMES_QUOTE_MAX];
    const char *s = v->valuestring;

    if (!account_name_ok(s, strlen(s)))
        return vfail(c, "expected a user or group name (at most %d characters, no ':', '/', ',' "
                     "or blanks), got %s", ACCOUNT_NAME_MAX, names_quote(s, q, sizeof(q)));
    return 0;
}

/* "USER" or "USER:GROUP". */
int rule_owner(const cJSON *v, struct vctx *c)
{
    char q[NAMES_QUOTE_MAX];
    const char *s = v->valuestring, *colon = strchr(s, ':');
    size_t un = colon ? (size_t)(colon - s) : strlen(s);

    if (!account_name_ok(s, un) || (colon && !account_name_ok(colon + 1, strlen(colon + 1))))
        return vfail(c, "expected \"USER\" or \"USER:GROUP\" (names or numbers, no '/', ',' "
                     "or blanks), got %s", names_quote(s, q, sizeof(q)));
    return 0;
}

/* An absolute path without "." or ".." components or doubled slashes:
 * host-supplied paths are mapped onto guest paths (host_mounts subpath
 * mode), so they must not be able to climb out of where they point. */
int rule_clean_path(const cJSON *v, struct vctx *c)
{
    const char *s = v->valuestring;
    char q[NAMES_QUOTE_MAX];

    if (rule_abspath(v, c) < 0)
        return -1;
    for (const char *p = s; *p; p++) {
        if (*p != '/')
            continue;
        if (p[1] == '/' || (p[1] == '.' && (p[2] == '/' || !p[2])) ||
            (p[1] == '.' && p[2] == '.' && (p[3] == '/' || !p[3])))
            return vfail(c, "path %s must not contain '.', '..' or '//' components",
                        names_quote(s, q, sizeof(q)));
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

int rule_hostname(const cJSON *v, struct vctx *c)
{
    const char *s = v->valuestring;
    char q[NAMES_QUOTE_MAX];

    /* RFC 1123 characters; no empty label, no label starting with '-'. */
    bool ok = *s && strlen(s) <= 64 && all_name_chars(s, "-.") && s[0] != '.' &&
              !strstr(s, "..") && s[strlen(s) - 1] != '.' && s[0] != '-' && !strstr(s, ".-");
    if (!ok)
        return vfail(c, "bad hostname %s (letters, digits, '-' and '.', at most 64 bytes)",
                    names_quote(s, q, sizeof(q)));
    return 0;
}

int rule_listen(const cJSON *v, struct vctx *c)
{
    struct err reason;

    if (names_parse_listen(v->valuestring, NULL, &reason) < 0)
        return vfail(c, "%s", reason.msg);
    return 0;
}

int rule_envd_listen(const cJSON *v, struct vctx *c)
{
    char host[64], q[NAMES_QUOTE_MAX];
    struct err reason;
    uint16_t port;

    if (netaddr_parse_listen(v->valuestring, host, sizeof(host), &port, &reason) < 0)
        return vfail(c, "%s, got %s", reason.msg, names_quote(v->valuestring, q, sizeof(q)));
    return 0;
}

/* envd.users: the name the SDK sends is a user name too. */
int rule_envd_alias(const cJSON *item, struct vctx *c)
{
    char q[NAMES_QUOTE_MAX];
    const char *s = item->string;

    if (!account_name_ok(s, strlen(s)) || strlen(s) >= ENVD_NAME_MAX)
        return vfail(c, "bad user name %s", names_quote(s, q, sizeof(q)));
    return 0;
}

/* A token travels in an HTTP header: printable ASCII, no blanks. */
int rule_envd_token(const cJSON *v, struct vctx *c)
{
    const char *s = v->valuestring;
    size_t n = strlen(s);

    if (n == 0 || n >= ENVD_TOKEN_MAX)
        return vfail(c, "expected 1..%d characters", ENVD_TOKEN_MAX - 1);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
            return vfail(c, "expected printable ASCII without blanks (an HTTP header value)");
    return 0;
}

int rule_module(const cJSON *v, struct vctx *c)
{
    char q[NAMES_QUOTE_MAX];

    if (!all_name_chars(v->valuestring, "_-"))
        return vfail(c, "bad module name %s", names_quote(v->valuestring, q, sizeof(q)));
    return 0;
}

int rule_ifname(const cJSON *v, struct vctx *c)
{
    const char *s = v->valuestring;
    char q[NAMES_QUOTE_MAX];

    /* The kernel's rules: < IFNAMSIZ, no '/', no blanks, not "." or "..". */
    bool ok = *s && strlen(s) < 16 && strcmp(s, ".") && strcmp(s, "..");
    for (const char *p = s; ok && *p; p++)
        if (*p == '/' || *p == ':' || (unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f)
            ok = false;
    if (!ok)
        return vfail(c, "bad interface name %s", names_quote(s, q, sizeof(q)));
    return 0;
}

int rule_mac(const cJSON *v, struct vctx *c)
{
    const char *s = v->valuestring;
    char q[NAMES_QUOTE_MAX];

    if (!netaddr_parse_mac(s, NULL))
        return vfail(c, "bad MAC address %s (expected xx:xx:xx:xx:xx:xx)", names_quote(s, q, sizeof(q)));
    return 0;
}

/* An interface address: a prefix with host bits, "169.254.68.6/30". */
int rule_ifaddr(const cJSON *v, struct vctx *c)
{
    char q[NAMES_QUOTE_MAX];
    struct err reason;

    if (cidr_parse(v->valuestring, true, NULL, &reason) < 0)
        return vfail(c, "bad address %s: %s", names_quote(v->valuestring, q, sizeof(q)), reason.msg);
    return 0;
}

static bool is_ip(const char *s)
{
    int family;

    return netaddr_parse_ip(s, &family, NULL);
}

int rule_ip(const cJSON *v, struct vctx *c)
{
    char q[NAMES_QUOTE_MAX];

    if (!is_ip(v->valuestring))
        return vfail(c, "bad IP address %s", names_quote(v->valuestring, q, sizeof(q)));
    return 0;
}

/* A policy network: host bits are refused, with the network the operator
 * probably meant, since "10.1.2.3/8" usually hides a typo. */
int rule_cidr_net(const cJSON *v, struct vctx *c)
{
    char q[NAMES_QUOTE_MAX], fixed[64];
    struct err reason;
    struct cidr net;

    if (cidr_parse(v->valuestring, false, NULL, &reason) == 0)
        return 0;
    if (cidr_parse(v->valuestring, true, &net, NULL) == 0) {
        cidr_format(&net, fixed, sizeof(fixed));
        return vfail(c, "bad CIDR %s: %s (did you mean %s?)", names_quote(v->valuestring, q, sizeof(q)),
                    reason.msg, fixed);
    }
    return vfail(c, "bad CIDR %s: %s", names_quote(v->valuestring, q, sizeof(q)), reason.msg);
}

/* An egress.deny_local_ports entry. */
int rule_local_port(const cJSON *v, struct vctx *c)
{
    char q[NAMES_QUOTE_MAX];
    if (netaddr_parse_port_range(v->valuestring, NULL))
        return 0;
    return vfail(c, "bad local port %s (expected tcp:PORT, udp:PORT, tcp:LOW-HIGH or udp:LOW-HIGH, "
                 "ports 1-65535)", names_quote(v->valuestring, q, sizeof(q)));
}

/* A route's destination: a network (host bits refused, as in a policy)
 * or "default". */
int rule_route_to(const cJSON *v, struct vctx *c)
{
    if (strcmp(v->valuestring, "default") == 0)
        return 0;
    return rule_cidr_net(v, c);
}

static int ip_family(const char *s)
{
    int fam = 0;
    return netaddr_parse_ip(s, &fam, NULL) ? fam : 0;
}

/* Whether dev names one of the section's interfaces. */
static bool iface_listed(const cJSON *net, const char *dev)
{
    const cJSON *it;
    cJSON_ArrayForEach(it, jget(net, "interfaces"))
        if (strcmp(jget(it, "name")->valuestring, dev) == 0)
            return true;
    return false;
}

/* "dev" of entry i of list (routes, neighbours) must name an interface. */
static int check_dev(const cJSON *net, const cJSON *entry, const char *list, size_t i,
                     struct vctx *c)
{
    char q[NAMES_QUOTE_MAX];
    const char *dev = jget(entry, "dev")->valuestring;

    if (iface_listed(net, dev))
        return 0;
    vpath_append(c, ".%s[%zu].dev", list, i);
    return vfail(c, "%s is not the name of one of network.interfaces", names_quote(dev, q, sizeof(q)));
}

/* What the tables cannot say: names and MACs are unique among the
 * interfaces, routes and neighbours are on listed interfaces, and a
 * route's gateway is of its destination's family. */
int rule_network(const cJSON *net, struct vctx *c)
{
    const cJSON *it, *jt;
    char q[NAMES_QUOTE_MAX];
    size_t i = 0;

    cJSON_ArrayForEach(it, jget(net, "interfaces")) {
        const char *name = jget(it, "name")->valuestring;
        const cJSON *mac = jget(it, "mac");
        size_t j = 0;
        cJSON_ArrayForEach(jt, jget(net, "interfaces")) {
            if (j == i)
                break;
            const cJSON *jmac = jget(jt, "mac");
            if (strcmp(jget(jt, "name")->valuestring, name) == 0) {
                vpath_append(c, ".interfaces[%zu].name", i);
                return vfail(c, "%s is also interfaces[%zu]", names_quote(name, q, sizeof(q)), j);
            }
            uint8_t a[6], b[6];
            if (mac && jmac && netaddr_parse_mac(mac->valuestring, a) &&
                netaddr_parse_mac(jmac->valuestring, b) && memcmp(a, b, 6) == 0) {
                vpath_append(c, ".interfaces[%zu].mac", i);
                return vfail(c, "%s is also the MAC of interfaces[%zu]",
                             names_quote(mac->valuestring, q, sizeof(q)), j);
            }
            j++;
        }
        i++;
    }
    i = 0;
    cJSON_ArrayForEach(it, jget(net, "routes")) {
        if (check_dev(net, it, "routes", i, c) < 0)
            return -1;
        const char *to = jget(it, "to")->valuestring;
        const cJSON *via = jget(it, "via");
        if (via && strcmp(to, "default") != 0) {
            struct cidr dst;
            if (cidr_parse(to, false, &dst, NULL) == 0 && dst.family != ip_family(via->valuestring)) {
                vpath_append(c, ".routes[%zu].via", i);
                return vfail(c, "%s is not of the family of \"to\" %s",
                             names_quote(via->valuestring, q, sizeof(q)),
                             dst.family == AF_INET ? "(IPv4)" : "(IPv6)");
            }
        }
        i++;
    }
    i = 0;
    cJSON_ArrayForEach(it, jget(net, "neighbours")) {
        if (check_dev(net, it, "neighbours", i, c) < 0)
            return -1;
        i++;
    }
    return 0;
}

int rule_fstype(const cJSON *v, struct vctx *c)
{
    char q[NAMES_QUOTE_MAX];

    if (!all_name_chars(v->valuestring, "_.-"))
        return vfail(c, "bad filesystem type %s", names_quote(v->valuestring, q, sizeof(q)));
    return 0;
}

static bool valid_service_name(const char *s)
{
    return *s && strlen(s) <= 64 && all_name_chars(s, "_.-");
}

int rule_service_name(const cJSON *v, struct vctx *c)
{
    char q[NAMES_QUOTE_MAX];

    if (!valid_service_name(v->valuestring))
        return vfail(c, "bad service name %s (expected [A-Za-z0-9_.-]{1,64})",
                    names_quote(v->valuestring, q, sizeof(q)));
    if (name_in_list(v->valuestring, names_after_phases))
        return vfail(c, "%s is reserved (a phase name)", names_quote(v->valuestring, q, sizeof(q)));
    return 0;
}

int rule_argv(const cJSON *v, struct vctx *c)
{
    if (!v->child->valuestring[0]) {
        vpath_index(c, 0);
        return vfail(c, "must not be empty");
    }
    return 0;
}

int rule_env_key(const cJSON *item, struct vctx *c)
{
    const char *s = item->string;
    char q[NAMES_QUOTE_MAX];

    if (!names_env_valid(s, strlen(s)))
        return vfail(c, "bad environment variable name %s", names_quote(s, q, sizeof(q)));
    return 0;
}

/* secrets[].env: the variable's name as a value. */
int rule_env_name(const cJSON *v, struct vctx *c)
{
    char q[NAMES_QUOTE_MAX];

    if (!names_env_valid(v->valuestring, strlen(v->valuestring)))
        return vfail(c, "bad environment variable name %s", names_quote(v->valuestring, q, sizeof(q)));
    return 0;
}

/* secrets[].file: a clean absolute path naming a file (not "/", no
 * trailing slash), short enough to be opened. */
int rule_secret_file(const cJSON *v, struct vctx *c)
{
    const char *s = v->valuestring;
    size_t n = strlen(s);
    char q[NAMES_QUOTE_MAX];

    if (rule_clean_path(v, c) < 0)
        return -1;
    if (n < 2 || s[n - 1] == '/')
        return vfail(c, "expected the path of a file, got %s", names_quote(s, q, sizeof(q)));
    if (n >= 1024)
        return vfail(c, "path is too long (%zu bytes, at most 1023)", n);
    return 0;
}

/* umask: an octal string ("022") or the integer value (18). */
int rule_umask(const cJSON *v, struct vctx *c)
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
    } else if (jget_int(v, &n)) {
        if (n >= 0 && n <= 0777)
            return 0;
    }
    return vfail(c, "expected an octal string such as \"022\" or an integer 0..511");
}

int rule_rlimit_key(const cJSON *item, struct vctx *c)
{
    char q[NAMES_QUOTE_MAX], list[256];

    if (names_rlimit_number(item->string) >= 0)
        return 0;
    names_rlimit_names(list, sizeof(list));
    return vfail(c, "unknown resource limit %s (expected one of %s)",
                names_quote(item->string, q, sizeof(q)), list);
}

int rule_rlimit_value(const cJSON *v, struct vctx *c)
{
    int64_t n;

    if (cJSON_IsString(v) && strcmp(v->valuestring, "unlimited") == 0)
        return 0;
    if (jget_int(v, &n) && n >= 0)
        return 0;
    return vfail(c, "expected an integer >= 0 or \"unlimited\"");
}

/* A sysctl name maps to a file under /proc/sys (names_sysctl_path), so
 * a name that could leave it ("..", "/") is refused here, at load. */
int rule_sysctl_name(const cJSON *item, struct vctx *c)
{
    char q[NAMES_QUOTE_MAX], path[NAMES_SYSCTL_MAX + 16];

    if (names_sysctl_path("", item->string, path, sizeof(path)) == 0)
        return 0;
    return vfail(c, "bad sysctl name %s (expected letters, digits, '_' and '-' in parts joined "
                    "by single dots, at most %d characters)",
                 names_quote(item->string, q, sizeof(q)), NAMES_SYSCTL_MAX);
}

/* A sysctl value is written as one line: a string (tabs allowed, as in
 * "0\t0"), an integer, or null for "leave the kernel's value". */
int rule_sysctl_value(const cJSON *v, struct vctx *c)
{
    int64_t n;

    if (cJSON_IsNull(v) || jget_int(v, &n))
        return 0;
    if (!cJSON_IsString(v))
        return vfail(c, "expected a string, an integer or null");
    if (strlen(v->valuestring) > SYSCTL_VALUE_MAX)
        return vfail(c, "longer than %d bytes", SYSCTL_VALUE_MAX);
    for (const char *p = v->valuestring; *p; p++)
        if ((unsigned char)*p < 0x20 && *p != '\t')
            return vfail(c, "must not contain a newline or another control character");
    return 0;
}

/* "host:port": an IPv4 address, [IPv6] or a host name, and port 1..65535. */
int rule_hostport(const cJSON *v, struct vctx *c)
{
    const char *s = v->valuestring;
    char host[256], q[NAMES_QUOTE_MAX];
    uint16_t port;
    size_t hlen;
    bool ok;
    int r = netaddr_split_hostport(s, host, sizeof(host), &port);

    if (r == -1)
        return vfail(c, "bad address %s (expected HOST:PORT, port 1..65535)",
                    names_quote(s, q, sizeof(q)));
    if (r < 0)
        return vfail(c, "bad address %s (expected HOST:PORT)", names_quote(s, q, sizeof(q)));
    hlen = strlen(host);
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
        return vfail(c, "bad address %s (expected HOST:PORT; IPv6 as [ADDR]:PORT)",
                    names_quote(s, q, sizeof(q)));
    return 0;
}

/* "HOST:PORT/PATH" (ready.http, health.http): the address part by the
 * same rules as tcp, the path as http.c will put it on the request line. */
int rule_http_target(const cJSON *v, struct vctx *c)
{
    char hp[256], path[256];
    struct err why;
    char q[NAMES_QUOTE_MAX];

    if (http_target_split(v->valuestring, hp, sizeof(hp), path, sizeof(path), &why) < 0)
        return vfail(c, "bad target %s: %s", names_quote(v->valuestring, q, sizeof(q)), why.msg);
    cJSON tmp;
    memset(&tmp, 0, sizeof(tmp));
    tmp.type = cJSON_String;
    tmp.valuestring = hp;
    return rule_hostport(&tmp, c);
}

int rule_signal(const cJSON *v, struct vctx *c)
{
    char q[NAMES_QUOTE_MAX];

    if (names_signal_number(v->valuestring) < 0)
        return vfail(c, "unknown signal %s", names_quote(v->valuestring, q, sizeof(q)));
    return 0;
}

int rule_on_resume(const cJSON *v, struct vctx *c)
{
    const char *s = v->valuestring;
    char q[NAMES_QUOTE_MAX];

    if (strcmp(s, "none") == 0 || strcmp(s, "restart") == 0)
        return 0;
    if (strncmp(s, "signal:", 7) == 0 || strncmp(s, "restart:", 8) == 0) {
        const char *sig = strchr(s, ':') + 1;
        if (names_signal_number(sig) > 0)
            return 0;
        return vfail(c, "unknown signal %s", names_quote(sig, q, sizeof(q)));
    }
    return vfail(c, "expected none, restart, restart:SIGNAME or signal:SIGNAME");
}

int rule_cap(const cJSON *v, struct vctx *c)
{
    char q[NAMES_QUOTE_MAX];

    if (names_cap_number(v->valuestring) < 0)
        return vfail(c, "unknown capability %s", names_quote(v->valuestring, q, sizeof(q)));
    return 0;
}

/* Checked with the defaults filled in: "initial_ms": 40000 alone exceeds
 * the default max. */
int rule_backoff(const cJSON *v, struct vctx *c)
{
    int64_t initial = jget_int_or(v, "initial_ms", CONFIG_BACKOFF_INITIAL_MS);
    int64_t max = jget_int_or(v, "max_ms", CONFIG_BACKOFF_MAX_MS);

    if (initial > max) {
        if (jget(v, "initial_ms")) {
            vpath_key(c, "initial_ms");
            return vfail(c, "must not exceed max_ms (%lld)", (long long)max);
        }
        vpath_key(c, "max_ms");
        return vfail(c, "must not be below initial_ms (%lld)", (long long)initial);
    }
    return 0;
}

static int one_of(const cJSON *v, struct vctx *c, const char *const *keys, const char *text)
{
    int n = 0;

    for (; *keys; keys++)
        n += jget(v, *keys) != NULL;
    if (n == 0)
        return vfail(c, "needs one of %s", text);
    if (n > 1)
        return vfail(c, "only one of %s may be given", text);
    return 0;
}

int rule_ready(const cJSON *v, struct vctx *c)
{
    static const char *const keys[] = {"tcp",    "http", "unix", "file", "notify_fd",
                                       "notify", "exec", NULL};
    const cJSON *n = jget(v, "notify");
    if (n && !cJSON_IsTrue(n)) {
        vpath_key(c, "notify");
        return vfail(c, "only true is meaningful (leave ready out instead)");
    }
    return one_of(v, c, keys, "tcp, http, unix, file, notify_fd, notify, exec");
}

int rule_health(const cJSON *v, struct vctx *c)
{
    static const char *const keys[] = {"tcp", "http", "unix", "exec", "watchdog_ms", NULL};
    if (one_of(v, c, keys, "tcp, http, unix, exec, watchdog_ms") < 0)
        return -1;
    /* The service pings; hearth probes nothing, so there is no interval
     * or probe time to give. */
    if (jget(v, "watchdog_ms")) {
        static const char *const probe_only[] = {"interval_ms", "timeout_ms", NULL};
        for (const char *const *k = probe_only; *k; k++) {
            if (jget(v, *k)) {
                vpath_key(c, *k);
                return vfail(c, "not used with watchdog_ms (a missed ping is the failure)");
            }
        }
    }
    return 0;
}

/* A code cannot both force a restart and prevent one: which rule won
 * would be a guess. */
int rule_exit_codes(const cJSON *svc, struct vctx *c)
{
    const cJSON *force = jget(svc, "restart_force_exit_codes"), *a, *b;
    size_t i = 0;

    cJSON_ArrayForEach(a, jget(svc, "restart_prevent_exit_codes")) {
        cJSON_ArrayForEach(b, force) {
            if (a->valueint == b->valueint) {
                vpath_append(c, ".restart_prevent_exit_codes[%zu]", i);
                return vfail(c, "%d is also in restart_force_exit_codes", a->valueint);
            }
        }
        i++;
    }
    return 0;
}

int rule_mount(const cJSON *v, struct vctx *c)
{
    const cJSON *type = jget(v, "type");

    /* A platform mount is made by someone else: hearth only watches for
     * it, so nothing about how to mount it has a meaning. */
    if (type && strcmp(type->valuestring, "platform") == 0) {
        static const char *const not_here[] = {"source", "options", "read_only"};
        for (size_t i = 0; i < sizeof(not_here) / sizeof(not_here[0]); i++) {
            if (jget(v, not_here[i])) {
                vpath_key(c, not_here[i]);
                return vfail(c, "not allowed in a platform mount (the platform makes it; "
                                "hearth only waits for it)");
            }
        }
        const cJSON *t = jget(v, "timeout_ms");
        int64_t ms;
        if (t && jget_int(t, &ms) && ms < 1) {
            vpath_key(c, "timeout_ms");
            return vfail(c, "must be at least 1 in a platform mount (leave it out to wait "
                            "without a deadline)");
        }
        const cJSON *target = jget(v, "target");
        if (target && strcmp(target->valuestring, "/") == 0) {
            vpath_key(c, "target");
            return vfail(c, "a platform mount cannot be at / (it is always mounted)");
        }
        return 0;
    }
    /* Only tmpfs has a meaningful default source. */
    if (!jget(v, "source") && !(type && strcmp(type->valuestring, "tmpfs") == 0)) {
        vpath_key(c, "source");
        return vfail(c, "missing required key (only tmpfs mounts may omit it)");
    }
    /* The owner is set on the mount's root after mounting: a read-only
     * mount refuses it. */
    const cJSON *ro = jget(v, "read_only");
    if (jget(v, "owner") && cJSON_IsTrue(ro)) {
        vpath_key(c, "owner");
        return vfail(c, "a read-only mount cannot be given an owner");
    }
    return 0;
}

/* A platform mount's target is the platform's: another entry there
 * would be mounted over it (or under it) and read as its replacement. */
int rule_mounts(const cJSON *arr, struct vctx *c)
{
    const cJSON *e, *f;
    size_t i = 0;

    cJSON_ArrayForEach(e, arr) {
        const cJSON *type = jget(e, "type");
        if (type && strcmp(type->valuestring, "platform") == 0) {
            const char *t = jget(e, "target")->valuestring;
            size_t j = 0;
            cJSON_ArrayForEach(f, arr) {
                if (f != e && strcmp(jget(f, "target")->valuestring, t) == 0) {
                    char q[NAMES_QUOTE_MAX];
                    vpath_index(c, j);
                    vpath_key(c, "target");
                    return vfail(c, "%s is the target of the platform mount mounts[%zu]",
                                 names_quote(t, q, sizeof(q)), i);
                }
                j++;
            }
        }
        i++;
    }
    return 0;
}

int rule_mount_rule(const cJSON *v, struct vctx *c)
{
    const cJSON *mode = jget(v, "mode");

    if (mode && strcmp(mode->valuestring, "subpath") == 0 && !jget(v, "tag")) {
        vpath_key(c, "tag");
        return vfail(c, "missing required key (needed by mode subpath)");
    }
    return 0;
}

/* metrics: disk.ok must lie below disk.low, or the two would flap. */
int rule_metrics(const cJSON *v, struct vctx *c)
{
    const cJSON *low = jget(v, "disk_low_percent"), *ok = jget(v, "disk_ok_percent");
    int64_t l = CONFIG_DISK_LOW_PERCENT, o;

    if (low)
        jget_int(low, &l);
    if (!ok || l == 0)
        return 0;
    jget_int(ok, &o);
    if (o >= l) {
        vpath_key(c, "disk_ok_percent");
        return vfail(c, "must be below disk_low_percent (%lld)", (long long)l);
    }
    return 0;
}

/* skills: mode "external_dirs" edits Hermes's config.yaml, so it needs
 * the file's path. */
int rule_skills(const cJSON *v, struct vctx *c)
{
    const cJSON *mode = jget(v, "mode");

    if (mode && strcmp(mode->valuestring, "external_dirs") == 0 && !jget(v, "config_yaml")) {
        vpath_key(c, "config_yaml");
        return vfail(c, "required when mode is \"external_dirs\" (Hermes's config.yaml)");
    }
    return 0;
}

/* resume_file: "" turns it off; otherwise a clean absolute path that
 * does not lie in a control socket's directory, which services see as an
 * empty directory (contain.c), so they could never read it there. */
int rule_resume_file(const cJSON *v, struct vctx *c)
{
    if (!v->valuestring[0])
        return 0;
    return rule_clean_path(v, c);
}

static int rule_resume_dir(const cJSON *root, struct vctx *c)
{
    const cJSON *rf = jget(root, "resume_file"), *listen = jget(jget(root, "control"), "listen");
    const char *file = rf ? rf->valuestring : CONFIG_RESUME_FILE;
    const char *slash = strrchr(file, '/');
    const cJSON *item;
    char q[NAMES_QUOTE_MAX];

    if (!file[0] || !slash || slash == file)
        return 0;
    size_t dl = (size_t)(slash - file);
    for (int i = 0; listen ? (item = cJSON_GetArrayItem(listen, i)) != NULL : i == 0; i++) {
        const char *spec = listen ? item->valuestring : CONFIG_DEFAULT_UNIX_LISTEN;
        if (strncmp(spec, "unix:", 5) != 0)
            continue;
        const char *sock = spec + 5, *ss = strrchr(sock, '/');
        if (ss && (size_t)(ss - sock) == dl && strncmp(sock, file, dl) == 0) {
            vpath_key(c, "resume_file");
            return vfail(c, "%s lies in the directory of the control socket %s, which services "
                        "cannot see", names_quote(file, q, sizeof(q)), sock);
        }
    }
    return 0;
}

/* Whole-document checks across sections: the resume file's directory,
 * and in subpath mode every host share must lie under the host directory
 * the shared tag exports. */
int rule_top(const cJSON *root, struct vctx *c)
{
    const cJSON *rule = jget(root, "host_mounts_rule"), *hm = jget(root, "host_mounts");
    const cJSON *mode = jget(rule, "mode"), *host_root = jget(rule, "host_root"), *item;
    char q[NAMES_QUOTE_MAX], q2[NAMES_QUOTE_MAX];
    cJSON *inner;
    size_t i = 0;
    int r = 0;

    if (rule_resume_dir(root, c) < 0)
        return -1;
    if (!hm || !host_root || !mode || strcmp(mode->valuestring, "subpath") != 0)
        return 0;
    inner = cJSON_Parse(hm->valuestring);
    cJSON_ArrayForEach(item, inner) {
        const char *hp = jget(item, "hostPath")->valuestring;
        if (!pathname_at_or_under(hp, host_root->valuestring)) {
            vpath_append(c, "host_mounts[%zu].hostPath", i);
            r = vfail(c, "%s is not under host_mounts_rule.host_root %s", names_quote(hp, q, sizeof(q)),
                     names_quote(host_root->valuestring, q2, sizeof(q2)));
            break;
        }
        i++;
    }
    cJSON_Delete(inner);
    return r;
}

static int named_service_index(const cJSON *services, const char *name)
{
    const cJSON *svc;
    int i = 0;

    cJSON_ArrayForEach(svc, services) {
        if (strcmp(jget(svc, "name")->valuestring, name) == 0)
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
int rule_services(const cJSON *arr, struct vctx *c)
{
    bool adj[CONFIG_MAX_SERVICES][CONFIG_MAX_SERVICES];
    unsigned char color[CONFIG_MAX_SERVICES];
    int stack[CONFIG_MAX_SERVICES + 1];
    const cJSON *svc, *a, *main_svc = NULL;
    char q[NAMES_QUOTE_MAX];
    int n = 0, main_idx = -1;

    memset(adj, 0, sizeof(adj));
    cJSON_ArrayForEach(svc, arr) {
        const char *name = jget(svc, "name")->valuestring;
        const cJSON *m = jget(svc, "main");
        size_t old = vpath_index(c, (size_t)n);
        int first = named_service_index(arr, name);

        if (first != n) {
            vpath_key(c, "name");
            return vfail(c, "duplicate service name %s (also services[%d])",
                        names_quote(name, q, sizeof(q)), first);
        }
        if (cJSON_IsTrue(m)) {
            if (main_svc) {
                vpath_key(c, "main");
                return vfail(c, "only one service may be main (services[%d] already is)",
                            main_idx);
            }
            main_svc = svc;
            main_idx = n;
        }
        vpath_pop(c, old);
        n++;
    }
    for (int i = 0; i < n; i++) {
        size_t old, k = 0;
        svc = cJSON_GetArrayItem(arr, i);
        old = vpath_index(c, (size_t)i);
        cJSON_ArrayForEach(a, jget(svc, "after")) {
            const char *dep = a->valuestring;
            int j = named_service_index(arr, dep);
            size_t old2 = vpath_append(c, ".after[%zu]", k++);
            if (j == i)
                return vfail(c, "a service cannot wait for itself");
            if (j < 0 && !name_in_list(dep, names_after_phases))
                return vfail(c,
                            "unknown service or phase %s (phases: mounts, skills, egress, "
                            "network, init)",
                            names_quote(dep, q, sizeof(q)));
            if (j >= 0)
                adj[i][j] = true;
            vpath_pop(c, old2);
        }
        vpath_pop(c, old);
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
                                      jget(cJSON_GetArrayItem(arr, idx), "name")->valuestring);
            }
            vpath_index(c, (size_t)stack[from]);
            vpath_key(c, "after");
            return vfail(c, "dependency cycle: %s", chain);
        }
    }
    return 0;
}