#include "checkspec.h"
#include "http.h"
#include "jsonget.h"
#include "netaddr.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stddef.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cJSON.h>

/* ---- parsing ---- */

/* "a.b.c.d:port", "[v6]:port" or "localhost:port". Names are not resolved:
 * a resolver would block the loop, and a sandbox probe is local anyway. */
int check_parse_hostport(const char *s, struct sockaddr_storage *ss, socklen_t *sslen,
                         char *err, size_t errlen)
{
    char host[256];
    uint16_t port;
    size_t hlen;
    int r = netaddr_split_hostport(s, host, sizeof(host), &port);

    if (r < 0) {
        snprintf(err, errlen, r == -1 ? "bad address \"%s\" (expected HOST:PORT, port 1..65535)"
                                      : "bad address \"%s\" (expected HOST:PORT)", s);
        return -1;
    }
    hlen = strlen(host);
    memset(ss, 0, sizeof(*ss));
    if (host[0] == '[') {
        struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;
        if (hlen < 3 || host[hlen - 1] != ']')
            goto bad;
        host[hlen - 1] = '\0';
        if (inet_pton(AF_INET6, host + 1, &sin6->sin6_addr) != 1)
            goto bad;
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons(port);
        *sslen = sizeof(*sin6);
        return 0;
    }
    struct sockaddr_in *sin = (struct sockaddr_in *)ss;
    if (strcasecmp(host, "localhost") == 0)
        sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    else if (inet_pton(AF_INET, host, &sin->sin_addr) != 1)
        goto bad;
    sin->sin_family = AF_INET;
    sin->sin_port = htons(port);
    *sslen = sizeof(*sin);
    return 0;
bad:
    snprintf(err, errlen,
             "bad address \"%s\" (host must be numeric IPv4, [IPv6] or localhost; names are "
             "not resolved)", s);
    return -1;
}

int check_parse_unix(const char *path, struct sockaddr_un *su, socklen_t *len, char *err,
                     size_t errlen)
{
    size_t n = strlen(path);

    if (n == 0 || n >= sizeof(su->sun_path)) {
        snprintf(err, errlen, "bad socket path \"%s\" (1..%zu bytes)", path,
                 sizeof(su->sun_path) - 1);
        return -1;
    }
    memset(su, 0, sizeof(*su));
    su->sun_family = AF_UNIX;
    memcpy(su->sun_path, path, n + 1);
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
    return 0;
}

/* A non-negative integer member, or 0 when absent. config.c has checked
 * the types already; this only refuses what would be nonsense here. */
static int get_int(const cJSON *obj, const char *key, int64_t *out, char *err, size_t errlen)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    uint64_t u = 0;

    if (v && !jget_uint(v, &u)) {
        snprintf(err, errlen, "%s: expected a non-negative integer", key);
        return -1;
    }
    *out = (int64_t)u;
    return 0;
}

static int copy_target(struct check_spec *spec, const char *key, const cJSON *v, char *err,
                       size_t errlen)
{
    if (!cJSON_IsString(v) || !v->valuestring[0]) {
        snprintf(err, errlen, "%s: expected a non-empty string", key);
        return -1;
    }
    if (strlen(v->valuestring) >= sizeof(spec->target)) {
        snprintf(err, errlen, "%s: longer than %zu bytes", key, sizeof(spec->target) - 1);
        return -1;
    }
    strcpy(spec->target, v->valuestring);
    return 0;
}

static int parse_exec(struct check_spec *spec, const cJSON *v, char *err, size_t errlen)
{
    size_t n = 0;
    const cJSON *a;

    if (!cJSON_IsArray(v) || !v->child) {
        snprintf(err, errlen, "exec: expected a non-empty array of strings");
        return -1;
    }
    cJSON_ArrayForEach(a, v) {
        if (!cJSON_IsString(a)) {
            snprintf(err, errlen, "exec[%zu]: expected string", n);
            return -1;
        }
        if (n == CHECK_ARGV_MAX) {
            snprintf(err, errlen, "exec: more than %d arguments", CHECK_ARGV_MAX);
            return -1;
        }
        spec->argv_store[n++] = a->valuestring;
    }
    if (!spec->argv_store[0][0]) {
        snprintf(err, errlen, "exec[0]: must not be empty");
        return -1;
    }
    spec->argv_store[n] = NULL;
    spec->argv = spec->argv_store;
    /* For details ("exec NAME: ..."), like the socket kinds' target. */
    snprintf(spec->target, sizeof(spec->target), "%s", spec->argv[0]);
    return 0;
}

int check_spec_from_json(const struct cJSON *obj, struct check_spec *spec, char *err,
                         size_t errlen)
{
    static const char *const kinds[] = {"tcp",  "unix",   "file",       "exec",
                                        "notify_fd", "http", "notify", "watchdog_ms"};
    const cJSON *which = NULL;
    const char *key = NULL;
    int n = 0;

    memset(spec, 0, sizeof(*spec));
    if (!cJSON_IsObject(obj)) {
        snprintf(err, errlen, "expected an object");
        return -1;
    }
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, kinds[i]);
        if (v) {
            which = v;
            key = kinds[i];
            n++;
        }
    }
    if (n != 1) {
        snprintf(err, errlen, n ? "only one of tcp, http, unix, file, notify_fd, notify, exec, "
                                  "watchdog_ms may be given"
                                : "needs one of tcp, http, unix, file, notify_fd, notify, exec, "
                                  "watchdog_ms");
        return -1;
    }
    if (get_int(obj, "timeout_ms", &spec->timeout_ms, err, errlen) < 0 ||
        get_int(obj, "interval_ms", &spec->interval_ms, err, errlen) < 0 ||
        get_int(obj, "failures", &spec->failures, err, errlen) < 0)
        return -1;

    if (strcmp(key, "notify_fd") == 0) {
        int64_t fd;
        if (get_int(obj, "notify_fd", &fd, err, errlen) < 0)
            return -1;
        if (fd < 3 || fd > 1023) {
            snprintf(err, errlen, "notify_fd: expected 3..1023");
            return -1;
        }
        spec->notify_fd = (int)fd;
        return 1;
    }
    if (strcmp(key, "notify") == 0) {
        if (!cJSON_IsTrue(which)) {
            snprintf(err, errlen, "notify: expected true");
            return -1;
        }
        spec->notify = true;
        return 1;
    }
    if (strcmp(key, "watchdog_ms") == 0) {
        if (get_int(obj, "watchdog_ms", &spec->watchdog_ms, err, errlen) < 0)
            return -1;
        if (spec->watchdog_ms < 1) {
            snprintf(err, errlen, "watchdog_ms: expected at least 1");
            return -1;
        }
        return 1;
    }
    if (strcmp(key, "exec") == 0) {
        spec->kind = CHECK_EXEC;
        return parse_exec(spec, which, err, errlen);
    }
    if (copy_target(spec, key, which, err, errlen) < 0)
        return -1;

    char why[300];
    if (strcmp(key, "tcp") == 0) {
        struct sockaddr_storage ss;
        socklen_t len;
        spec->kind = CHECK_TCP;
        if (check_parse_hostport(spec->target, &ss, &len, why, sizeof(why)) < 0)
            goto bad;
    } else if (strcmp(key, "http") == 0) {
        struct sockaddr_storage ss;
        socklen_t len;
        char hp[256], path[256];
        spec->kind = CHECK_HTTP;
        if (http_target_split(spec->target, hp, sizeof(hp), path, sizeof(path), why,
                              sizeof(why)) < 0 ||
            check_parse_hostport(hp, &ss, &len, why, sizeof(why)) < 0)
            goto bad;
    } else if (strcmp(key, "unix") == 0) {
        struct sockaddr_un su;
        socklen_t len;
        spec->kind = CHECK_UNIX;
        if (check_parse_unix(spec->target, &su, &len, why, sizeof(why)) < 0)
            goto bad;
    } else {
        spec->kind = CHECK_FILE;
    }
    return 0;
bad:
    snprintf(err, errlen, "%s: %s", key, why);
    return -1;
}
