/* resume: running the sandbox again after a pause or a snapshot restore.
 * A resume is a table of steps run in order (time, entropy, identity,
 * mounts, network, egress, skills, thaw, on_resume, health), each timed
 * and reported; the steps owned by other modules call each module's
 * re-check. The detectors notice a resume nobody announced (a snapshot
 * restore on a platform that tells the guest nothing): a wall-clock step
 * made from outside, the VM-generation uevent, the system clock falling
 * behind the hardware clock; any other module that notices one calls
 * resume_detected. Part of the sandbox module: it moves the sandbox's
 * state through sandbox_priv.h. */
#ifndef HEARTH_RESUME_H
#define HEARTH_RESUME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "err.h"

struct cJSON;
struct network_cfg;

struct resume_req {
    bool has_time;
    struct timespec time;
    const uint8_t *entropy;
    size_t entropy_len;
    const struct network_cfg *network;  /* validated; NULL: keep the one in force */
};
/* Runs every resume step in order (time, entropy, identity, mounts,
 * network, egress, skills, thaw, on_resume, health) and returns the report, also kept as
 * status.last_resume and emitted as a "resume" event. cause is "host"
 * for sandbox.resume. NULL only when out of memory or a freeze is in
 * progress (err). */
struct cJSON *resume_run(const struct resume_req *r, const char *cause, struct err *err);

/* A restore noticed from inside the guest (cause names how: "vmgenid",
 * "clock_step", or a module's own word for it): runs the resume steps as
 * sandbox.resume does without the host's time, entropy or network.
 * Detections of one restore are run once: while the steps run, and
 * within RESUME_COALESCE_MS of their end (monotonic: time the sandbox
 * ran), a detection only logs. Nothing runs while hearth is stopping.
 * Returns whether the steps ran. */
#define RESUME_COALESCE_MS 1000
bool resume_detected(const char *cause);

/* time.sync: compares and (where allowed) steps the clock. */
struct cJSON *resume_time_sync(const struct timespec *t);

/* Whether a kobject uevent (n bytes) carries NEW_VMGEN_ID: the kernel's
 * VM-generation change after a snapshot restore (6.10 and later). */
bool resume_uevent_is_vmgenid(const char *buf, size_t n);
/* Attaches to a uevent socket the filter that lets only "change@"
 * messages through (the VM-generation change is one): a device or mount
 * added or removed elsewhere then does not wake hearth. 0, or -1 with
 * errno. */
int resume_uevent_filter(int fd);

/* The clock-step watcher's decision: the wall clock's offset from the boot
 * clock moved from ref_offset_ns to offset_ns, by *step_ms (signed); a
 * restore when that is more than threshold_ms either way (never with a
 * threshold of 0). */
bool resume_clock_step_is_resume(int64_t ref_offset_ns, int64_t offset_ns, int64_t threshold_ms,
                                 int64_t *step_ms);

/* The periodic check's decision: the system clock lags the hardware
 * clock (of the given resolution) by more than the threshold. */
bool resume_hw_clock_lags(int64_t lag_ms, int64_t threshold_ms, int64_t resolution_ms);

/* Boot (main.c, after sandbox_setup): starts the detectors the settings
 * allow: the clock-step watcher (clock.detect_step_ms), the uevent socket,
 * the hardware clock check (where hearth may set the clock). */
void resume_detectors_start(void);
/* Adds status.sandbox.detectors (the names of the detectors running;
 * after sandbox_status_json) and status.last_resume (a copy of the last
 * resume's report, or null). */
void resume_status_json(struct cJSON *status);

#endif
