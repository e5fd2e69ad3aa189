#include "m_persist.h"

#include <string.h>

#include <cJSON.h>

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

int m_skills_list(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    char msg[512] = "";

    if (params_only(params, no_params, err) < 0)
        return -1;
    *result = skills_list_json(msg, sizeof(msg));
    if (!*result && msg[0]) {
        rpc_error_set(err, RPC_ERR_STATE, "%s", msg);
        return -1;
    }
    return *result ? 0 : -1;
}

int m_skills_sync(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    char msg[512] = "";

    if (params_only(params, no_params, err) < 0)
        return -1;
    if (!skills_enabled()) {
        rpc_error_set(err, RPC_ERR_STATE,
                      "the skills overlay is not configured (skills.public, skills.private)");
        return -1;
    }
    /* Entry errors still leave a result worth showing (counts, error);
     * only a reconcile that could not read its directories fails. */
    int rc = skills_sync("sync", msg, sizeof(msg));
    if (rc < 0 && strstr(msg, "starts after mounts")) {
        rpc_error_set(err, RPC_ERR_STATE, "%s", msg);
        return -1;
    }
    cJSON *r = skills_last_json();
    if (!r)
        return -1;
    const cJSON *errors = cJSON_GetObjectItemCaseSensitive(r, "errors");
    if (rc < 0 && !(cJSON_IsNumber(errors) && errors->valuedouble > 0)) {
        cJSON_Delete(r);
        rpc_error_set(err, RPC_ERR_FAILED, "%s", msg);
        return -1;
    }
    *result = r;
    return 0;
}

int m_skills_fork(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    static const char *const known[] = {"name", NULL};
    const char *name = NULL;
    char msg[768] = "";
    bool present;

    if (params_only(params, known, err) < 0 ||
        param_string(params, "name", &name, &present, err) < 0)
        return -1;
    if (!present) {
        rpc_error_set(err, RPC_INVALID_PARAMS, "name: expected a skill name");
        return -1;
    }
    if (skills_fork(name, msg, sizeof(msg)) < 0) {
        int code = strncmp(msg, "name:", 5) == 0            ? RPC_INVALID_PARAMS
                   : strncmp(msg, "no linked skill", 15) == 0 ? RPC_ERR_NOT_FOUND
                   : strstr(msg, "already private")           ? RPC_ERR_STATE
                                                              : RPC_ERR_FAILED;
        rpc_error_set(err, code, "%s", msg);
        return -1;
    }
    cJSON *r = cJSON_CreateObject();
    if (!r)
        return -1;
    cJSON_AddStringToObject(r, "name", name);
    cJSON_AddBoolToObject(r, "forked", 1);
    *result = r;
    return 0;
}
