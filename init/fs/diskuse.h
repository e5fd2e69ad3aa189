/* diskuse: how full each configured mount is (statvfs), and the
 * disk.low / disk.ok events for the writable ones.
 *
 * statvfs on a network or host-shared filesystem (9p, virtio-fs) whose
 * server has stalled blocks in the kernel for as long as the server
 * wants; PID 1 must not. So every probe runs in a child process that
 * statvfs's the mounted targets one after the other and writes a fixed
 * record per target into a pipe; the loop waits for it with a deadline
 * (DISKUSE_DEADLINE_MS). At the deadline the child is killed, the records
 * that arrived are used, the target it was stuck on is marked hung and
 * left out of later probes until that child is finally reaped (so stuck
 * children never pile up), and from then on is probed after the others
 * (so one stalled mount does not hide the figures of the rest).
 *
 * The check behind disk.low runs on metrics calls and, while the check is
 * enabled and at least one writable mount is mounted, on a timer of
 * metrics.disk_check_ms on the shared grid (a wake-up, a fork and a
 * SIGCHLD per period; none at all without such a mount). */
#ifndef HEARTH_DISKUSE_H
#define HEARTH_DISKUSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cJSON;
struct config;

#define DISKUSE_DEADLINE_MS 2000
/* Callers that may wait on one probe at once (metrics requests). */
#define DISKUSE_WAITERS_MAX 32

/* Reads the metrics section (thresholds, period). */
void diskuse_setup(const struct config *cfg);
/* After a mount pass (the set of mounted targets changed): arms or stops
 * the periodic check. */
void diskuse_rearm(void);

/* Starts a probe, or joins the one under way; fn(ctx) runs once its
 * results are in, always from the loop, never from inside this call.
 * Returns 0 when fn will be called; without fn, 1 when there was nothing
 * to probe; -1 when too many callers wait (see diskuse_can_wait). */
typedef void (*diskuse_done_fn)(void *ctx);
/* Whether one more caller may wait on a probe. */
bool diskuse_can_wait(void);
int diskuse_probe(diskuse_done_fn fn, void *ctx);

/* The last results: an array of {target, type, read_only, mounted,
 * bytes_total, bytes_used, bytes_free, bytes_avail, inodes_total,
 * inodes_used, inodes_free, used_percent, low} or {..., error}. */
struct cJSON *diskuse_json(void);

/* {low_percent, ok_percent, check_ms, timer}. */
struct cJSON *diskuse_settings_json(void);

/* The used percentage as df computes it (used / (used + available)),
 * the larger of the bytes and inodes figures; exposed for unit tests. */
double diskuse_percent(uint64_t blocks, uint64_t bfree, uint64_t bavail, uint64_t files,
                       uint64_t ffree);

#endif
