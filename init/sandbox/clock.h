/* clock: the wall clock after a pause or restore. Stepping is a decision
 * (how far off, whether hearth may set the clock) followed by an action;
 * the two are split so tests drive the decision through injected clock
 * operations and never touch the machine's real clock. */
#ifndef HEARTH_CLOCK_H
#define HEARTH_CLOCK_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

struct cJSON;

#define CLOCK_DEFAULT_THRESHOLD_MS 50

/* The clock operations: real ones by default (CLOCK_REALTIME). */
struct clock_ops {
    int (*get)(struct timespec *now);
    int (*set)(const struct timespec *to);
};
/* Replaces the operations (NULL restores the real ones); for unit tests. */
void clock_set_ops(const struct clock_ops *ops);

enum clock_action {
    CLOCK_IN_SYNC,     /* within the threshold: nothing done */
    CLOCK_STEPPED,     /* clock_settime done */
    CLOCK_NOT_ALLOWED, /* off, but this mode may not set the clock: reported only */
    CLOCK_ERROR,       /* reading or setting failed (error says why) */
};

struct clock_result {
    enum clock_action action;
    int64_t offset_ns; /* target - system clock before any step */
    char error[96];
};

/* Compares the system clock with target and steps it when the difference
 * exceeds threshold_ms and allowed is true. Returns 0, or -1 on
 * CLOCK_ERROR. */
int clock_sync(const struct timespec *target, bool allowed, int64_t threshold_ms,
               struct clock_result *r);
const char *clock_action_name(enum clock_action a);
/* {"action": "stepped", "offset_ms": 1234.5[, "error": ...]} */
struct cJSON *clock_result_json(const struct clock_result *r);

/* Reads the hardware clock: /dev/ptp0 (nanoseconds) where present, else
 * /dev/rtc0 (whole seconds, assumed UTC). *source is "ptp0" or "rtc0";
 * *resolution_ms how coarse it is. Returns 0, or -1 with errno (ENODEV
 * when neither exists). */
int clock_hw_read(struct timespec *hw, const char **source, int64_t *resolution_ms);
/* Whether any hardware clock exists (decides if a periodic check runs). */
bool clock_hw_present(void);

/* Nanosecond difference a - b. */
int64_t clock_diff_ns(const struct timespec *a, const struct timespec *b);

#endif
