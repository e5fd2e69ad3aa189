/* activity: whether the sandbox is busy, for a host that pauses idle
 * sandboxes. Busy means some sign of work within activity.idle_ms: a
 * service's CPU (its cgroup leaf's cpu.stat) at or over
 * activity.cpu_percent in a sample, bytes on the network (non-loopback
 * interfaces, both directions) at or over activity.egress_bytes in a
 * sample, a service's output, an open exec session, or a lease a service
 * declared on its NOTIFY_SOCKET (HEARTH_BUSY=<seconds>,
 * HEARTH_BUSY_REASON=<text>; HEARTH_BUSY=0 releases it).
 *
 * CPU and network are sampled only while the answer is wanted: every
 * sample_ms while an event subscriber listens; otherwise, while busy,
 * once at the moment the busy spell would end (the sample spans the
 * spell), and once on the spot when status asks. An idle sandbox nobody
 * watches is never woken by it. Output, exec sessions and leases arrive
 * as calls and need no timer; a lease's expiry has a timer that exists
 * only while a lease holds. Every idle <-> busy change is an "activity"
 * event. */
#ifndef HEARTH_ACTIVITY_H
#define HEARTH_ACTIVITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "notify.h"

struct cJSON;
struct config;
struct service_config;

/* Reads the activity section and each service's activity.lease. */
void activity_setup(const struct config *cfg);
/* How many clients listen to events (control.c); sampling runs while
 * there is one. */
void activity_set_watchers(size_t (*count)(void));
/* A client began listening to events: starts sampling. */
void activity_watch(void);

/* Whether service sc may declare leases (activity.lease), which gives it
 * a NOTIFY_SOCKET. */
bool activity_lease_allowed(const struct service_config *sc);

/* Hooks called by other modules, each cheap (no syscall but the clock):
 * service idx wrote bytes to its captured output; */
void activity_output(size_t idx, size_t bytes);
/* n exec sessions are open now (0 when the last one ended); */
void activity_exec_count(unsigned n);
/* service idx (whose sender service.c has checked) sent HEARTH_BUSY=;
 * reason may be NULL; */
void activity_lease(size_t idx, uint64_t seconds, const char *reason);
/* service idx's main process is gone: its lease ends with it. */
void activity_service_down(size_t idx);

/* status.activity: {busy, since_ms, reasons: [{source, detail,
 * service?}], lease: null | {service, reason, until_ms}, ...}. Samples
 * on the spot when the sampler is not running. */
struct cJSON *activity_json(void);

/* Before a freeze: 0 when no lease holds; else -1 with err naming the
 * service, its reason and the time left, and *data (when given) set to
 * {service, reason, until_ms, left_ms}. */
int activity_freeze_check(struct err *err, struct cJSON **data);

/* ---- the lease rules, by themselves for the unit tests ---- */

struct activity_lease_rules {
    int64_t max_ms;          /* a longer lease is cut to this */
    int64_t interval_ms;     /* least time between two leases of one service */
    size_t reason_max;       /* bytes of reason kept (cut on a character boundary) */
};

struct activity_lease_slot {
    int64_t until_ms;        /* mono ms; 0 = none holds */
    int64_t last_ms;         /* when the last lease was taken */
    bool has_last;
    bool in_burst;           /* refusals are being logged once for the burst */
    int64_t refused_ms;      /* the last refusal */
    char reason[NOTIFY_STATUS_MAX];
    unsigned long taken, refused, capped, released;
};

enum activity_verdict {
    ACTIVITY_LEASE_TAKEN,    /* holds until until_ms */
    ACTIVITY_LEASE_CAPPED,   /* holds, for max_ms instead of what was asked */
    ACTIVITY_LEASE_RELEASED, /* HEARTH_BUSY=0 ended a lease */
    ACTIVITY_LEASE_NONE,     /* HEARTH_BUSY=0 with no lease holding */
    ACTIVITY_LEASE_RATE,     /* refused: too soon after the last one */
};

/* Applies one HEARTH_BUSY=seconds (reason may be NULL) at mono time now
 * to slot under rules. A release is never rate-limited. */
enum activity_verdict activity_lease_judge(const struct activity_lease_rules *r,
                                           struct activity_lease_slot *slot, uint64_t seconds,
                                           const char *reason, int64_t now);

#endif
