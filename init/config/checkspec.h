/* checkspec: what one check is (tcp, http, unix, file, exec, or one the
 * service answers itself: notify_fd, notify, watchdog_ms), parsed from a
 * service's "ready" or "health" object, and the address parsers the probe
 * shares. Depends on nothing of hearth's, so the config can be typed with
 * it when it loads. */
#ifndef HEARTH_CHECKSPEC_H
#define HEARTH_CHECKSPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "err.h"

struct cJSON;

enum check_kind { CHECK_TCP, CHECK_UNIX, CHECK_FILE, CHECK_EXEC, CHECK_HTTP };

/* Most argv entries checkspec_from_json takes from an "exec" array. */
#define CHECK_ARGV_MAX 64
#define CHECK_DEFAULT_TIMEOUT_MS 5000

struct check_spec {
    enum check_kind kind;
    char target[256];    /* "host:port" / "host:port/path" (http) / path */
    char **argv;         /* exec, NULL-terminated, not owned */
    int64_t timeout_ms;  /* one attempt; 0 = CHECK_DEFAULT_TIMEOUT_MS */
    /* Filled by checkspec_from_json; 0 when the key is absent. */
    int64_t interval_ms; /* health only */
    int64_t failures;    /* health only */
    int notify_fd;       /* ready only, when it returns 1 */
    bool notify;         /* ready.notify: READY=1 on NOTIFY_SOCKET (returns 1) */
    int64_t watchdog_ms; /* health.watchdog_ms: WATCHDOG=1 pings (returns 1) */
    /* checkspec_from_json points argv here, at strings of the cJSON tree:
     * the tree must outlive the spec, and a copy of the struct must set
     * argv = copy.argv_store again. check_start copies what it needs. */
    char *argv_store[CHECK_ARGV_MAX + 1];
};

/* Parses a service's "ready" or "health" object (already validated by config.c; see the schema in init/config/schema_tables.c: ready {tcp|http|unix|file|notify_fd|notify|exec, timeout_ms, attempts (read by svc_config.c)}, health {tcp|http|unix|exec|watchdog_ms, interval_ms, timeout_ms, failures}) into spec; returns 0, 1 when the object is notify_fd, notify or watchdog_ms (no probe: the service tells, and the caller listens), -1 with err. */
int checkspec_from_json(const struct cJSON *obj, struct check_spec *spec, struct err *err);

/* "a.b.c.d:port", "[v6]:port" or "localhost:port" into a socket address
 * (names are not resolved); -1 with err. */
int checkspec_parse_hostport(const char *s, struct sockaddr_storage *ss, socklen_t *sslen, struct err *err);
/* A unix socket path into a socket address; -1 with err. */
int checkspec_parse_unix(const char *path, struct sockaddr_un *su, socklen_t *len, struct err *err);

#endif
