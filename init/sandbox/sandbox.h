/* sandbox: the sandbox's own lifecycle around its services — the
 * per-sandbox parameters of sandbox.init (and the "init" phase gate), the
 * clock settings, and the freeze flow. The resume flow and the detectors
 * of a resume nobody announced are resume.h's (declared through this
 * header too, so callers include one).
 *
 * State machine: running -> freezing -> frozen -> (resume) -> running. */
#ifndef HEARTH_SANDBOX_H
#define HEARTH_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "err.h"
#include "resume.h"

struct cJSON;
struct config;

enum sandbox_state { SANDBOX_RUNNING, SANDBOX_FREEZING, SANDBOX_FROZEN, SANDBOX_RESUMING };

const char *sandbox_state_name(enum sandbox_state s);
enum sandbox_state sandbox_state(void);

/* Boot: reads wait_for_init and clock from the config, owns the "init"
 * phase (reached at once unless wait_for_init.enabled), starts the resume
 * detectors. Call after service_init. */
void sandbox_setup(const struct config *cfg);

/* Whether services after "init" are still held for sandbox.init. */
bool sandbox_waiting_for_init(void);

/* Limits of sandbox.init's env. */
#define SANDBOX_ENV_MAX 256
#define SANDBOX_ENV_VALUE_MAX 32768
#define SANDBOX_ENV_TOTAL_MAX (256 * 1024)

struct sandbox_init_req {
    const struct cJSON *env;         /* object of string values, or NULL */
    const struct cJSON *egress;      /* object, or NULL */
    const struct cJSON *host_mounts; /* string item, or NULL */
    const struct cJSON *network;     /* object, as the config's `network`, or NULL */
    const char *hostname;            /* or NULL */
    bool has_time;
    struct timespec time;
    const uint8_t *entropy;          /* decoded; NULL when absent */
    size_t entropy_len;
};

/* Validates everything first (nothing changes on error; err names the
 * field), then applies and marks the "init" phase reached. report gets
 * one member per applied parameter. Returns 0, or -1 with err (code is
 * -32602 for bad input, -32000 when applying failed). */
int sandbox_init(const struct sandbox_init_req *r, struct cJSON *report, int *code, struct err *err);

/* Freeze: syncfs every persistent mount (mounts_sync, in a child, at
 * most half of timeout_ms), freeze the services cgroup and wait for "frozen 1" (the
 * rest of the budget), suspend health/backoff judgement. done() gets the
 * report (owned by the callee) or NULL with an error message (and the
 * report so far in *data). Returns -1 with err when a freeze cannot start
 * (already freezing). */
typedef void (*sandbox_freeze_done)(void *ctx, struct cJSON *result, const char *error,
                                    struct cJSON *data);
int sandbox_freeze(int64_t timeout_ms, sandbox_freeze_done done, void *ctx, struct err *err);

/* Before an orderly stop: thaws a frozen sandbox so services can act on
 * their stop signal. */
void sandbox_thaw_for_shutdown(void);

/* status fields: "sandbox" object, "frozen", "identity"; resume adds its
 * own (resume_status_json). */
void sandbox_status_json(struct cJSON *status);

/* fn runs after sandbox.init has stepped the wall clock: resume's
 * detectors take hearth's own step for no restore (set by
 * resume_detectors_start, so no call runs from here to resume). */
void sandbox_on_clock_set(void (*fn)(void));

/* The clock settings in force (for tests of the decision). */
bool sandbox_clock_allowed(void);
int64_t sandbox_clock_threshold_ms(void);

#endif
