#include "params.h"

#include <string.h>

#include <cJSON.h>

#include "utf8.h"

const char *const no_params[] = {NULL};

int params_only(cJSON *params, const char *const *known, struct rpc_error *err)
{
    for (cJSON *k = params ? params->child : NULL; k; k = k->next) {
        bool ok = false;
        for (const char *const *n = known; *n; n++)
            if (strcmp(k->string, *n) == 0)
                ok = true;
        if (!ok) {
            rpc_error_set(err, RPC_INVALID_PARAMS, "%.*s: unknown parameter", utf8_clip(k->string, 64),
                          k->string);
            return -1;
        }
    }
    return 0;
}

static cJSON *member(cJSON *params, const char *name, bool *present)
{
    cJSON *v = params ? cJSON_GetObjectItemCaseSensitive(params, name) : NULL;
    *present = v != NULL;
    return v;
}

int param_uint(cJSON *params, const char *name, uint64_t *out, bool *present,
               struct rpc_error *err)
{
    cJSON *v = member(params, name, present);
    if (!v)
        return 0;
    /* 2^53 bounds what a double holds exactly; larger would round. */
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 9007199254740992.0 ||
        v->valuedouble != (double)(uint64_t)v->valuedouble) {
        rpc_error_set(err, RPC_INVALID_PARAMS, "%s: expected a non-negative integer", name);
        return -1;
    }
    *out = (uint64_t)v->valuedouble;
    return 0;
}

int param_bool(cJSON *params, const char *name, bool *out, bool *present, struct rpc_error *err)
{
    cJSON *v = member(params, name, present);
    if (!v)
        return 0;
    if (!cJSON_IsBool(v)) {
        rpc_error_set(err, RPC_INVALID_PARAMS, "%s: expected true or false", name);
        return -1;
    }
    *out = cJSON_IsTrue(v);
    return 0;
}

int param_string(cJSON *params, const char *name, const char **out, bool *present,
                 struct rpc_error *err)
{
    cJSON *v = member(params, name, present);
    if (!v)
        return 0;
    if (!cJSON_IsString(v)) {
        rpc_error_set(err, RPC_INVALID_PARAMS, "%s: expected a string", name);
        return -1;
    }
    *out = v->valuestring;
    return 0;
}

int param_object(cJSON *params, const char *name, cJSON **out, bool *present,
                 struct rpc_error *err)
{
    cJSON *v = member(params, name, present);
    if (!v)
        return 0;
    if (!cJSON_IsObject(v)) {
        rpc_error_set(err, RPC_INVALID_PARAMS, "%s: expected an object", name);
        return -1;
    }
    *out = v;
    return 0;
}

int param_array(cJSON *params, const char *name, cJSON **out, bool *present,
                struct rpc_error *err)
{
    cJSON *v = member(params, name, present);
    if (!v)
        return 0;
    if (!cJSON_IsArray(v)) {
        rpc_error_set(err, RPC_INVALID_PARAMS, "%s: expected an array", name);
        return -1;
    }
    *out = v;
    return 0;
}
