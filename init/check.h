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

#include "checkspec.h"

struct check;  /* one probe in flight */
typedef void (*check_done_fn)(void *ctx, bool ok, const char *detail);

/* Starts one probe attempt on loop; done is called exactly once (success, failure with a short detail like "unable to connect to 127.0.0.1:9119: Connection refused", "http 127.0.0.1:8642/health: status 503 Service Unavailable", or "timed out after N ms"), never synchronously from inside check_start. Returns NULL (and calls nothing) only if it could not even start, with detail in err.
 * Once done has been called the check is gone: do not cancel it. */
struct check *check_start(struct ev_loop *loop, const struct check_spec *spec, check_done_fn done, void *ctx, char *err, size_t errlen);

/* Cancels an attempt in flight (done is not called); safe on NULL. An exec
 * probe's process group is killed; its memory is freed when reaped. */
void check_cancel(struct check *c);

#endif
