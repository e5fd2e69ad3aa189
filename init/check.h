/* check: one non-blocking probe attempt (tcp connect, HTTP GET answered
 * 2xx, unix connect, file exists, exec exit 0) for service readiness and health. Each attempt has
 * its own monotonic timeout; the result always arrives later from the loop,
 * never from inside check_start. Retrying, intervals and failure counts are
 * the caller's business. */
#ifndef HEARTH_CHECK_H
#define HEARTH_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ev.h>

struct cJSON;

enum check_kind { CHECK_TCP, CHECK_UNIX, CHECK_FILE, CHECK_EXEC, CHECK_HTTP };

/* Most argv entries check_spec_from_json takes from an "exec" array. */
#define CHECK_ARGV_MAX 64
#define CHECK_DEFAULT_TIMEOUT_MS 5000

struct check_spec {
    enum check_kind kind;
    char target[256];    /* "host:port" / "host:port/path" (http) / path */
    char **argv;         /* exec, NULL-terminated, not owned */
    int64_t timeout_ms;  /* one attempt; 0 = CHECK_DEFAULT_TIMEOUT_MS */
    /* Filled by check_spec_from_json; 0 when the key is absent. */
    int64_t interval_ms; /* health only */
    int64_t failures;    /* health only */
    int notify_fd;       /* ready only, when it returns 1 */
    bool notify;         /* ready.notify: READY=1 on NOTIFY_SOCKET (returns 1) */
    int64_t watchdog_ms; /* health.watchdog_ms: WATCHDOG=1 pings (returns 1) */
    /* check_spec_from_json points argv here, at strings of the cJSON tree:
     * the tree must outlive the spec, and a copy of the struct must set
     * argv = copy.argv_store again. check_start copies what it needs. */
    char *argv_store[CHECK_ARGV_MAX + 1];
};

/* Parses a service's "ready" or "health" object (already validated by config.c; see the schema in init/schema_tables.c: ready {tcp|http|unix|file|notify_fd|notify|exec, timeout_ms}, health {tcp|http|unix|exec|watchdog_ms, interval_ms, timeout_ms, failures}) into spec; returns 0, 1 when the object is notify_fd, notify or watchdog_ms (no probe: the service tells, and the caller listens), -1 with err. */
int check_spec_from_json(const struct cJSON *obj, struct check_spec *spec, char *err, size_t errlen);

struct check;  /* one probe in flight */
typedef void (*check_done_fn)(void *ctx, bool ok, const char *detail);

/* Starts one probe attempt on loop; done is called exactly once (success, failure with a short detail like "connect 127.0.0.1:9119: Connection refused", "http 127.0.0.1:8642/health: status 503 Service Unavailable", or "timed out after N ms"), never synchronously from inside check_start. Returns NULL (and calls nothing) only if it could not even start, with detail in err.
 * Once done has been called the check is gone: do not cancel it. */
struct check *check_start(struct ev_loop *loop, const struct check_spec *spec, check_done_fn done, void *ctx, char *err, size_t errlen);

/* Cancels an attempt in flight (done is not called); safe on NULL. An exec
 * probe's process group is killed; its memory is freed when reaped. */
void check_cancel(struct check *c);

#endif
