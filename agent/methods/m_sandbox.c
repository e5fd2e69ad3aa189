#include "m_sandbox.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "activity.h"
#include "control.h"
#include "base64.h"
#include "entropy.h"
#include "envd.h"
#include "err.h"
#include "params.h"
#include "sandbox.h"
#include "schema.h"
#include "sections.h"
#include "shutdown.h"

#define FREEZE_DEFAULT_TIMEOUT_MS 5000
#define FREEZE_MAX_TIMEOUT_MS 600000

/* {sec, nsec} as a timespec; name prefixes the error ("time.nsec: ..."). */
static int parse_time(cJSON *o, const char *name, struct timespec *ts, struct rpc_error *err)
{
    static const char *const known[] = {"sec", "nsec", NULL};
    uint64_t sec = 0, nsec = 0;
    bool has_sec, has_nsec;
    struct rpc_error e = {0};

    if (params_only(o, known, &e) < 0 || param_uint(o, "sec", &sec, &has_sec, &e) < 0 ||
        param_uint(o, "nsec", &nsec, &has_nsec, &e) < 0) {
        rpc_error_set(err, RPC_INVALID_PARAMS, "%s%s%s", name, name[0] ? "." : "", e.message);
        return -1;
    }
    if (!has_sec) {
        rpc_error_set(err, RPC_INVALID_PARAMS, "%s%ssec: required", name, name[0] ? "." : "");
        return -1;
    }
    if (nsec >= 1000000000ULL || sec > (1ULL << 40)) {
        rpc_error_set(err, RPC_INVALID_PARAMS, "%s%s: out of range", name,
                      nsec >= 1000000000ULL ? (name[0] ? ".nsec" : "nsec") : (name[0] ? ".sec" : "sec"));
        return -1;
    }
    ts->tv_sec = (time_t)sec;
    ts->tv_nsec = (long)nsec;
    return 0;
}

/* Base64 member name into buf; *len 0 when absent. */
static int parse_entropy(cJSON *params, const char *name, uint8_t *buf, size_t *len, bool *present,
                         struct rpc_error *err)
{
    const char *s;
    struct err why;

    *len = 0;
    if (param_string(params, name, &s, present, err) < 0)
        return -1;
    if (!*present)
        return 0;
    size_t sl = strlen(s);
    if (sl > (ENTROPY_MAX_BYTES + 2) / 3 * 4) {
        rpc_error_set(err, RPC_INVALID_PARAMS, "%s: more than %d bytes", name, ENTROPY_MAX_BYTES);
        return -1;
    }
    long n = base64_decode(s, sl, buf, ENTROPY_MAX_BYTES, &why);
    if (n <= 0) {
        rpc_error_set(err, RPC_INVALID_PARAMS, "%s: %s", name, n == 0 ? "empty" : why.msg);
        return -1;
    }
    *len = (size_t)n;
    return 0;
}

/* The "time" and "entropy" members sandbox.init and sandbox.resume share:
 * *has_time when time was given, *ent_len 0 without entropy. */
static int parse_time_entropy(cJSON *params, bool *has_time, struct timespec *ts, uint8_t *ent,
                              size_t *ent_len, struct rpc_error *err)
{
    cJSON *t = NULL;
    bool present;

    if (param_object(params, "time", &t, &present, err) < 0)
        return -1;
    if (t) {
        if (parse_time(t, "time", ts, err) < 0)
            return -1;
        *has_time = true;
    }
    return parse_entropy(params, "entropy", ent, ent_len, &present, err);
}

/* sandbox.init's "envd": {"access_token": "..."} ("" clears it), only
 * where the config turned the endpoint on. */
static int parse_envd(cJSON *params, const char **token, struct rpc_error *err)
{
    static const char *const known[] = {"access_token", NULL};
    cJSON *o = NULL;
    bool present = false;
    if (param_object(params, "envd", &o, &present, err) < 0)
        return -1;
    if (!o)
        return 0;
    if (!envd_enabled()) {
        rpc_error_set(err, RPC_INVALID_PARAMS, "envd: the endpoint is off (no envd section in the config)");
        return -1;
    }
    cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "access_token");
    for (cJSON *k = o->child; k; k = k->next) {
        bool ok = false;
        for (const char *const *n = known; *n; n++)
            ok |= strcmp(*n, k->string) == 0;
        if (!ok) {
            rpc_error_set(err, RPC_INVALID_PARAMS, "envd.%.64s: unknown parameter", k->string);
            return -1;
        }
    }
    if (!cJSON_IsString(t)) {
        rpc_error_set(err, RPC_INVALID_PARAMS, "envd.access_token: expected a string");
        return -1;
    }
    size_t n = strlen(t->valuestring);
    bool ok = n < ENVD_TOKEN_MAX;
    for (size_t i = 0; ok && i < n; i++)
        ok = (unsigned char)t->valuestring[i] > 0x20 && (unsigned char)t->valuestring[i] < 0x7f;
    if (!ok) {
        rpc_error_set(err, RPC_INVALID_PARAMS,
                      "envd.access_token: expected at most %d printable ASCII characters without blanks",
                      ENVD_TOKEN_MAX - 1);
        return -1;
    }
    *token = t->valuestring;
    return 0;
}

int m_sandbox_init(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    static const char *const known[] = {"env", "egress", "time", "entropy", "hostname",
                                        "host_mounts", "network", "envd", NULL};
    static uint8_t ent[ENTROPY_MAX_BYTES];
    struct sandbox_init_req r = {0};
    cJSON *o = NULL;
    bool present;
    struct err msg;
    int code;

    if (shutdown_in_progress()) {
        rpc_error_set(err, RPC_ERR_STATE, "shutting down");
        return -1;
    }
    if (params_only(params, known, err) < 0)
        return -1;
    if (param_object(params, "env", &o, &present, err) < 0)
        return -1;
    r.env = o;
    o = NULL;
    if (param_object(params, "egress", &o, &present, err) < 0)
        return -1;
    r.egress = o;
    o = NULL;
    if (param_object(params, "network", &o, &present, err) < 0)
        return -1;
    r.network = o;
    if (param_string(params, "hostname", &r.hostname, &present, err) < 0)
        return -1;
    if (params && cJSON_GetObjectItemCaseSensitive(params, "host_mounts")) {
        r.host_mounts = cJSON_GetObjectItemCaseSensitive(params, "host_mounts");
        if (!cJSON_IsString(r.host_mounts)) {
            rpc_error_set(err, RPC_INVALID_PARAMS, "host_mounts: expected a string holding a JSON array");
            return -1;
        }
    }
    if (parse_time_entropy(params, &r.has_time, &r.time, ent, &r.entropy_len, err) < 0)
        return -1;
    r.entropy = r.entropy_len ? ent : NULL;
    const char *token = NULL;
    if (parse_envd(params, &token, err) < 0)
        return -1;
    cJSON *rep = cJSON_CreateObject();
    if (!rep)
        return -1;
    int rc = sandbox_init(&r, rep, &code, &msg);
    explicit_bzero(ent, sizeof(ent));
    if (rc < 0) {
        cJSON_Delete(rep);
        return rpc_error_from(err, code, &msg);
    }
    if (token) {
        envd_set_token(token);
        cJSON_AddStringToObject(rep, "envd", token[0] ? "access_token set" : "access_token cleared");
    }
    *result = rep;
    return 0;
}

/* One freeze at a time (sandbox_freeze refuses a second), so one slot. */
static struct {
    bool in_handler, done;
    uint64_t ticket;
    cJSON *result, *data;
    char error[200];
} pend;

static void freeze_done(void *ctx, cJSON *result, const char *error, cJSON *data)
{
    if (pend.in_handler) {
        /* Finished before the handler returned: it replies directly. */
        pend.done = true;
        pend.result = result;
        pend.data = data;
        snprintf(pend.error, sizeof(pend.error), "%s", error ? error : "");
        return;
    }
    struct rpc_error e = {0};
    if (!result) {
        rpc_error_set(&e, RPC_ERR_FAILED, "sandbox: unable to freeze: %s", error ? error : "a step failed");
        e.data = data;
    }
    control_complete(pend.ticket, result, &e);
}

int m_sandbox_freeze(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    static const char *const known[] = {"timeout_ms", "force", NULL};
    uint64_t timeout = FREEZE_DEFAULT_TIMEOUT_MS;
    bool present, force = false;
    struct err msg;

    if (params_only(params, known, err) < 0 ||
        param_uint(params, "timeout_ms", &timeout, &present, err) < 0 ||
        param_bool(params, "force", &force, &present, err) < 0)
        return -1;
    if (timeout < 10 || timeout > FREEZE_MAX_TIMEOUT_MS) {
        rpc_error_set(err, RPC_INVALID_PARAMS, "timeout_ms: expected 10 to %d",
                      FREEZE_MAX_TIMEOUT_MS);
        return -1;
    }
    if (shutdown_in_progress()) {
        rpc_error_set(err, RPC_ERR_STATE, "shutting down");
        return -1;
    }
    /* A service declared it is busy (activity.h): the host must say it
     * means to freeze anyway. */
    struct err why;
    cJSON *lease = NULL;
    if (!force && activity_freeze_check(&why, &lease) < 0) {
        rpc_error_from(err, RPC_ERR_STATE, &why);
        err->data = lease;
        return -1;
    }
    pend.in_handler = true;
    pend.done = false;
    int rc = sandbox_freeze((int64_t)timeout, freeze_done, NULL, &msg);
    pend.in_handler = false;
    if (rc < 0) {
        rpc_error_from(err, RPC_ERR_STATE, &msg);
        return -1;
    }
    if (pend.done) {
        if (pend.result) {
            *result = pend.result;
            return 0;
        }
        rpc_error_set(err, RPC_ERR_FAILED, "sandbox: unable to freeze: %s", pend.error);
        err->data = pend.data;
        return -1;
    }
    pend.ticket = control_defer(c);
    return 0;
}

int m_sandbox_resume(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    static const char *const known[] = {"time", "entropy", "network", NULL};
    static uint8_t ent[ENTROPY_MAX_BYTES];
    struct resume_req r = {0};
    struct network_cfg *net = NULL;
    cJSON *o = NULL;
    bool present;
    struct err msg;

    if (params_only(params, known, err) < 0 ||
        param_object(params, "network", &o, &present, err) < 0)
        return -1;
    /* Validated whole before any step runs: a bad network changes nothing. */
    if (o) {
        if (!(net = malloc(sizeof(*net)))) {
            rpc_error_set(err, RPC_ERR_FAILED, "network: out of memory");
            return -1;
        }
        if (sections_network_parse(o, net, &msg) < 0) {
            free(net);
            rpc_error_from(err, RPC_INVALID_PARAMS, &msg);
            return -1;
        }
    }
    if (parse_time_entropy(params, &r.has_time, &r.time, ent, &r.entropy_len, err) < 0) {
        free(net);
        return -1;
    }
    r.entropy = r.entropy_len ? ent : NULL;
    r.network = net;
    *result = resume_run(&r, "host", &msg);
    explicit_bzero(ent, sizeof(ent));
    free(net);
    if (!*result) {
        rpc_error_from(err, RPC_ERR_STATE, &msg);
        return -1;
    }
    return 0;
}

int m_time_sync(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    struct timespec ts;

    if (!params) {
        rpc_error_set(err, RPC_INVALID_PARAMS, "sec: required");
        return -1;
    }
    if (parse_time(params, "", &ts, err) < 0)
        return -1;
    *result = resume_time_sync(&ts);
    return *result ? 0 : -1;
}

int m_entropy_add(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    static const char *const known[] = {"data", NULL};
    static uint8_t ent[ENTROPY_MAX_BYTES];
    size_t len;
    bool present;
    struct err msg;

    if (params_only(params, known, err) < 0 ||
        parse_entropy(params, "data", ent, &len, &present, err) < 0)
        return -1;
    if (!present) {
        rpc_error_set(err, RPC_INVALID_PARAMS, "data: required (base64)");
        return -1;
    }
    int rc = entropy_add(ent, len, &msg);
    explicit_bzero(ent, sizeof(ent));
    if (rc < 0) {
        rpc_error_from(err, RPC_ERR_FAILED, &msg);
        return -1;
    }
    cJSON *r = cJSON_CreateObject();
    if (!r)
        return -1;
    cJSON_AddNumberToObject(r, "bytes", (double)len);
    cJSON_AddBoolToObject(r, "reseeded", 1);
    *result = r;
    return 0;
}
