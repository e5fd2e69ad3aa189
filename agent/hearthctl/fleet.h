/* hearthctl_fleet: several sandboxes at once. The targets of --connect
 * (repeated, comma lists, unix socket globs) and rounds of calls made
 * to all of them in parallel: every connect started without waiting,
 * one poll() over all sockets, each target bounded by the same
 * deadline, so a stuck sandbox costs the round its deadline and never
 * more. Connections that answered stay open for the next round. */
#ifndef HEARTHCTL_FLEET_H
#define HEARTHCTL_FLEET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctl.h"

#define FLEET_CALLS_MAX 4     /* requests per target and round */
#define FLEET_TARGETS_MAX 4096

enum fleet_fail {
    FLEET_OK,       /* every call of the round answered (result or error) */
    FLEET_TIMEOUT,  /* the deadline passed first */
    FLEET_CONNECT,  /* the connect (or hybrid vsock handshake) failed */
    FLEET_IO,       /* the connection broke or closed */
    FLEET_PROTO,    /* a reply that is not JSON-RPC */
};

struct fleet_call {
    const char *method;
    const struct cJSON *params; /* NULL: {} */
};

struct fleet_target {
    char *spec;
    /* Outcome of the last round. */
    enum fleet_fail fail;
    char why[256];                         /* the failure, for people */
    struct cJSON *reply[FLEET_CALLS_MAX];  /* whole reply messages */
    double rtt_ms;                         /* send to the last reply */
    int64_t answered_ns;                   /* CLOCK_MONOTONIC of the last reply */
    void *user;                            /* the caller's per-target state */
    /* Connection state, owned by hearthctl_fleet.c. */
    struct ctl_addr addr;
    int addr_errno;
    int fd, state;
    bool reused;       /* kept open from an earlier round */
    bool got_bytes;    /* something arrived in this round */
    int64_t retry_ns;  /* full unix backlog: when to try again */
    char *out;
    size_t out_len, out_off;
    struct linebuf in;
    double next_id, ids[FLEET_CALLS_MAX];
    size_t ncalls, answered;
    int64_t sent_ns;
};

struct fleet {
    struct fleet_target *t;
    size_t n, cap;
    size_t given; /* specs given, before glob expansion */
    bool multi;   /* several specs given, or a glob matched */
};

/* Adds a --connect argument: a comma-separated list of specs; a unix:
 * spec with * ? or [ is expanded (sorted) to the sockets it matches, and
 * kept as it is when it matches nothing (its connect then says so).
 * 0, or -1 after printing why. */
int fleet_add(struct fleet *f, const char *arg);

/* One round: calls[] sent to every target (pipelined on one
 * connection), replies read until all answered or timeout_ms (0: none)
 * passes. Each target's fail/why/reply[] describe its outcome. -1 when
 * interrupted by SIGINT (after fleet_catch_sigint), else 0. */
int fleet_round(struct fleet *f, const struct fleet_call *calls, size_t ncalls, int timeout_ms);

/* The result of call i of the last round, or NULL with *error set to
 * the server's error object (NULL too when the target failed). */
const struct cJSON *fleet_result(const struct fleet_target *t, size_t i,
                                 const struct cJSON **error);

/* "timeout", "connect", "io", "protocol" ("ok" for FLEET_OK). */
const char *fleet_fail_name(enum fleet_fail f);

/* SIGINT ends a round early (poll returns EINTR); fleet_interrupted()
 * says whether it came. */
int fleet_catch_sigint(void);
bool fleet_interrupted(void);

/* A one-call command against every target: "== SPEC ==" and the
 * printer's output per target in order (failures on stderr), or with
 * json one array of {target, result} / {target, error} / {target,
 * failed, message}. Exit status: 2 when a target did not answer, else 1
 * when one answered with an error, else the printers' worst. */
typedef int (*fleet_print_fn)(void *ctx, const struct fleet_target *t,
                              const struct cJSON *result);
int fleet_call_print(struct fleet *f, const char *method, const struct cJSON *params,
                     int timeout_ms, bool json, fleet_print_fn print, void *ctx);

/* main's path for a one-call command (t built, params its params,
 * consumed) when several targets were given: fleet_call_print with the
 * command's printer; the targets are freed. */
int fleet_run_one(struct ctl *t, struct fleet *f, cJSON *params);

void fleet_free(struct fleet *f);


#endif
