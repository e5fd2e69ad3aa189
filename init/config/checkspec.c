#include "checkspec.h"
#include "err.h"
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
int checkspec_parse_hostport(const char *s, struct sockaddr_storage *ss, socklen_t *sslen,
                             struct err *err)
{
    char host[256];
    uint16_t port;
    size_t hlen;
    int r = netaddr_split_hostport(s, host, sizeof(host), &port);

    if (r < 0)
        return err_set(err, r == -1 ? "bad address \"%s\" (expected HOST:PORT, port 1..65535)"
                                      : "bad address \"%s\" (expected HOST:PORT)", s);
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
    err_set(err,
            "bad address \"%s\" (host must be numeric IPv4, [IPv6] or localhost; names are "
            "not resolved)", s);
    return -1;
}

int checkspec_parse_unix(const char *path, struct sockaddr_un *su, socklen_t *len, struct err *err)
{
    size_t n = strlen(path);

    if (n == 0 || n >= sizeof(su->sun_path))
        return err_set(err, "bad socket path \"%s\" (1..%zu bytes)", path,
                       sizeof(su->sun_path) - 1);
    memset(su, 0, sizeof(*su));
    su->sun_family = AF_UNIX;
    memcpy(su->sun_path, path, n + 1);
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
    return 0;
}

/* A non-negative integer member, or 0 when absent. config.c has checked
 * the types already; this only refuses what would be nonsense here. */
static int get_int(const cJSON *obj, const char *key, int64_t *out, struct err *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    uint64_t u = 0;

    if (v && !jget_uint(v, &u))
        return err_set(err, "%s: expected a non-negative integer", key);
    *out = (int64_t)u;
    return 0;
}

static int copy_target(struct check_spec *spec, const char *key, const cJSON *v, struct err *err)
{
    if (!cJSON_IsString(v) || !v->valuestring[0])
        return err_set(err, "%s: expected a non-empty string", key);
    if (strlen(v->valuestring) >= sizeof(spec->target))
        return err_set(err, "%s: longer than %zu bytes", key, sizeof(spec->target) - 1);
    strcpy(spec->target, v->valuestring);
    return 0;
}

static int parse_exec(struct check_spec *spec, const cJSON *v, struct err *err)
{
    size_t n = 0;
    const cJSON *a;

    if (!cJSON_IsArray(v) || !v->child)
        return err_set(err, "exec: expected a non-empty array of strings");
    cJSON_ArrayForEach(a, v) {
        if (!cJSON_IsString(a))
            return err_set(err, "exec[%zu]: expected string", n);
        if (n == CHECK_ARGV_MAX)
            return err_set(err, "exec: more than %d arguments", CHECK_ARGV_MAX);
        spec->argv_store[n++] = a->valuestring;
    }
    if (!spec->argv_store[0][0])
        return err_set(err, "exec[0]: must not be empty");
    spec->argv_store[n] = NULL;
    spec->argv = spec->argv_store;
    /* For details ("exec NAME: ..."), like the socket kinds' target. */
    snprintf(spec->target, sizeof(spec->target), "%s", spec->argv[0]);
    return 0;
}

int checkspec_from_json(const struct cJSON *obj, struct check_spec *spec, struct err *err)
{
    static const char *const kinds[] = {"tcp",  "unix",   "file",       "exec",
                                        "notify_fd", "http", "notify", "watchdog_ms"};
    const cJSON *which = NULL;
    const char *key = NULL;
    int n = 0;

    memset(spec, 0, sizeof(*spec));
    if (!cJSON_IsObject(obj))
        return err_set(err, "expected an object");
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, kinds[i]);
        if (v) {
            which = v;
            key = kinds[i];
            n++;
        }
    }
    if (n != 1)
        return err_set(err, n ? "only one of tcp, http, unix, file, notify_fd, notify, exec, "
                                  "watchdog_ms may be given"
                                : "needs one of tcp, http, unix, file, notify_fd, notify, exec, "
                                  "watchdog_ms");
    if (get_int(obj, "timeout_ms", &spec->timeout_ms, err) < 0 ||
        get_int(obj, "interval_ms", &spec->interval_ms, err) < 0 ||
        get_int(obj, "failures", &spec->failures, err) < 0)
        return -1;

    if (strcmp(key, "notify_fd") == 0) {
        int64_t fd;
        if (get_int(obj, "notify_fd", &fd, err) < 0)
            return -1;
        if (fd < 3 || fd > 1023)
            return err_set(err, "notify_fd: expected 3..1023");
        spec->notify_fd = (int)fd;
        return 1;
    }
    if (strcmp(key, "notify") == 0) {
        if (!cJSON_IsTrue(which))
            return err_set(err, "notify: expected true");
        spec->notify = true;
        return 1;
    }
    if (strcmp(key, "watchdog_ms") == 0) {
        if (get_int(obj, "watchdog_ms", &spec->watchdog_ms, err) < 0)
            return -1;
        if (spec->watchdog_ms < 1)
            return err_set(err, "watchdog_ms: expected at least 1");
        return 1;
    }
    if (strcmp(key, "exec") == 0) {
        spec->kind = CHECK_EXEC;
        return parse_exec(spec, which, err);
    }
    if (copy_target(spec, key, which, err) < 0)
        return -1;

    struct err why;
    if (strcmp(key, "tcp") == 0) {
        struct sockaddr_storage ss;
        socklen_t len;
        spec->kind = CHECK_TCP;
        if (checkspec_parse_hostport(spec->target, &ss, &len, &why) < 0)
            goto bad;
    } else if (strcmp(key, "http") == 0) {
        struct sockaddr_storage ss;
        socklen_t len;
        char hp[256], path[256];
        spec->kind = CHECK_HTTP;
        if (http_target_split(spec->target, hp, sizeof(hp), path, sizeof(path), &why) < 0 ||
            checkspec_parse_hostport(hp, &ss, &len, &why) < 0)
            goto bad;
    } else if (strcmp(key, "unix") == 0) {
        struct sockaddr_un su;
        socklen_t len;
        spec->kind = CHECK_UNIX;
        if (checkspec_parse_unix(spec->target, &su, &len, &why) < 0)
            goto bad;
    } else {
        spec->kind = CHECK_FILE;
    }
    return 0;
bad:
    err_set(err, "%s: %s", key, why.msg);
    return -1;
}
