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
#include <sys/types.h>

#include <ev.h>

#include "checkspec.h"
#include "err.h"

struct check;  /* one probe in flight */
struct launch_plan;
typedef void (*check_done_fn)(void *ctx, bool ok, const char *detail);

/* Where and as whom an exec probe runs: never as hearth itself, but as
 * the service it probes. plan is the plan the service's main process
 * started with (launch.h: identity, capabilities, seccomp filter,
 * no_new_privs, environment); the probe is born in leaf (NULL or "": no
 * cgroups) by clone3, joins the namespaces of pid (the service's main
 * process; contain_join_open) and enters cwd. The plan's join fields are
 * set for the fork and cleared again inside check_start. */
struct check_exec {
    struct launch_plan *plan;
    const char *cwd;
    const char *leaf;
    pid_t pid;
};

/* Starts one probe attempt on loop; exec needs how (any other kind
 * ignores it: the socket and file probes run in hearth and only connect
 * or stat). done is called exactly once (success, failure with a short detail like "unable to connect to 127.0.0.1:9119: Connection refused", "http 127.0.0.1:8642/health: status 503 Service Unavailable", or "timed out after N ms"), never synchronously from inside check_start. Returns NULL (and calls nothing) only if it could not even start, with detail in err.
 * Once done has been called the check is gone: do not cancel it. */
struct check *check_start(struct ev_loop *loop, const struct check_spec *spec,
                          const struct check_exec *how, check_done_fn done, void *ctx, struct err *err);

/* The mark (SO_MARK) every tcp and http probe's socket carries from now
 * on; 0: none. The local ports rule that cannot tell the services by
 * their cgroup tells hearth's own probes by it. */
void check_set_mark(uint32_t mark);

/* Cancels an attempt in flight (done is not called); safe on NULL. An exec
 * probe's process group is killed; its memory is freed when reaped. */
void check_cancel(struct check *c);

#endif
