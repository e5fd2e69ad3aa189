#include "m_persist.h"

#include <stdio.h>
#include <string.h>

#include <cJSON.h>

#include "control.h"
#include "err.h"
#include "mounts.h"
#include "params.h"
#include "seed.h"
#include "skills.h"

int m_mounts_list(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    if (params_only(params, no_params, err) < 0)
        return -1;
    cJSON *r = mounts_list_json();
    if (!r)
        return -1;
    cJSON_AddItemToObject(r, "seed", seed_to_json());
    cJSON_AddBoolToObject(r, "seeding", seed_running());
    *result = r;
    return 0;
}

/* skills.sync and skills.list walk the directories in a child process
 * (init/skills/skills.c); the reply waits for it (a deferred reply). */
static uint64_t defer_client(void *c)
{
    return control_defer(c);
}

static int refusal_code(const char *msg)
{
    return strstr(msg, "not configured") || strstr(msg, "starts after mounts") ||
                   strstr(msg, "already waiting")
               ? RPC_ERR_STATE
               : RPC_ERR_FAILED;
}

/* A request that takes no params and is answered once the child's walk
 * is done. */
static int skills_call(struct client *c, cJSON *params,
                       int (*request)(skills_defer, void *, skills_reply, struct err *),
                       skills_reply reply, struct rpc_error *err)
{
    struct err msg = {0};

    if (params_only(params, no_params, err) < 0)
        return -1;
    if (request(defer_client, c, reply, &msg) < 0)
        return rpc_error_from(err, refusal_code(msg.msg), &msg);
    return 0;
}

static void list_reply(uint64_t ticket, int rc, const char *msg, cJSON *result)
{
    struct rpc_error e = {0};

    if (rc < 0 || !result) {
        cJSON_Delete(result);
        result = NULL;
        rpc_error_set(&e, RPC_ERR_FAILED, "%s", msg && *msg ? msg : "out of memory");
    }
    control_complete(ticket, result, &e);
}

int m_skills_list(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    return skills_call(c, params, skills_list_request, list_reply, err);
}

/* Entry errors still leave a result worth showing (counts, error); only
 * a reconcile that could not read its directories (or did not finish)
 * fails. */
static void sync_reply(uint64_t ticket, int rc, const char *msg, cJSON *r)
{
    struct rpc_error e = {0};
    const cJSON *errors = cJSON_GetObjectItemCaseSensitive(r, "errors");

    if (!r || (rc < 0 && !(cJSON_IsNumber(errors) && errors->valuedouble > 0))) {
        cJSON_Delete(r);
        r = NULL;
        rpc_error_set(&e, RPC_ERR_FAILED, "%s", msg && *msg ? msg : "out of memory");
    }
    control_complete(ticket, r, &e);
}

int m_skills_sync(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    return skills_call(c, params, skills_sync_request, sync_reply, err);
}

/* One fork at a time (skills_fork refuses a second), so one slot. The
 * copy runs in a child; the reply waits for it (a deferred reply). */
static struct {
    bool in_handler, done;
    int rc;
    uint64_t ticket;
    char name[256];
    char msg[768];
} fork_pend;

static int fork_error_code(const char *msg)
{
    return strncmp(msg, "name:", 5) == 0              ? RPC_INVALID_PARAMS
           : strncmp(msg, "no linked skill", 15) == 0 ? RPC_ERR_NOT_FOUND
           : strstr(msg, "already private")           ? RPC_ERR_STATE
           : strstr(msg, "already in progress")       ? RPC_ERR_STATE
                                                      : RPC_ERR_FAILED;
}

static cJSON *fork_result(const char *name)
{
    cJSON *r = cJSON_CreateObject();
    if (!r)
        return NULL;
    cJSON_AddStringToObject(r, "name", name);
    cJSON_AddBoolToObject(r, "forked", 1);
    return r;
}

static void fork_done(void *ctx, int rc, const char *msg)
{
    if (fork_pend.in_handler) {
        /* Finished before the handler returned: it replies directly. */
        fork_pend.done = true;
        fork_pend.rc = rc;
        snprintf(fork_pend.msg, sizeof(fork_pend.msg), "%s", msg ? msg : "");
        return;
    }
    struct rpc_error e = {0};
    cJSON *r = NULL;
    if (rc == 0)
        r = fork_result(fork_pend.name);
    else
        rpc_error_set(&e, fork_error_code(msg ? msg : ""), "%s", msg && *msg ? msg : "failed");
    control_complete(fork_pend.ticket, r, &e);
}

int m_skills_fork(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    static const char *const known[] = {"name", NULL};
    const char *name = NULL;
    struct err msg = {0};
    bool present;

    if (params_only(params, known, err) < 0 ||
        param_string(params, "name", &name, &present, err) < 0)
        return -1;
    if (!present) {
        rpc_error_set(err, RPC_INVALID_PARAMS, "name: expected a skill name");
        return -1;
    }
    fork_pend.in_handler = true;
    fork_pend.done = false;
    int rc = skills_fork(name, fork_done, NULL, &msg);
    fork_pend.in_handler = false;
    if (rc == 0 && fork_pend.done) {
        rc = fork_pend.rc;
        err_set(&msg, "%s", fork_pend.msg);
    } else if (rc == 0) {
        /* Only now: a second request refused while this copy runs must
         * not rename the reply this one is owed. */
        snprintf(fork_pend.name, sizeof(fork_pend.name), "%s", name);
        fork_pend.ticket = control_defer(c);
        return 0;
    }
    if (rc < 0)
        return rpc_error_from(err, fork_error_code(msg.msg), &msg);
    *result = fork_result(name);
    return *result ? 0 : -1;
}
