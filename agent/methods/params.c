#include "params.h"

#include <string.h>

#include <cJSON.h>

#include "jsonget.h"
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
    /* 2^53 bounds what a double holds exactly; larger would round. */
    if (v && !jget_uint(v, out)) {
        rpc_error_set(err, RPC_INVALID_PARAMS, "%s: expected a non-negative integer", name);
        return -1;
    }
    return 0;
}

/* The member when present and of the wanted type (is); *v is NULL when
 * it is absent, and -1 comes with err naming the member and the type. */
static int typed(cJSON *params, const char *name, cJSON_bool (*is)(const cJSON *),
                 const char *what, cJSON **v, bool *present, struct rpc_error *err)
{
    *v = member(params, name, present);
    if (*v && !is(*v)) {
        rpc_error_set(err, RPC_INVALID_PARAMS, "%s: expected %s", name, what);
        return -1;
    }
    return 0;
}

int param_bool(cJSON *params, const char *name, bool *out, bool *present, struct rpc_error *err)
{
    cJSON *v;
    if (typed(params, name, cJSON_IsBool, "true or false", &v, present, err) < 0)
        return -1;
    if (v)
        *out = cJSON_IsTrue(v);
    return 0;
}

int param_string(cJSON *params, const char *name, const char **out, bool *present,
                 struct rpc_error *err)
{
    cJSON *v;
    if (typed(params, name, cJSON_IsString, "a string", &v, present, err) < 0)
        return -1;
    if (v)
        *out = v->valuestring;
    return 0;
}

/* An object or array member: *out is left alone when it is absent. */
static int node(cJSON *params, const char *name, cJSON_bool (*is)(const cJSON *),
                const char *what, cJSON **out, bool *present, struct rpc_error *err)
{
    cJSON *v;
    if (typed(params, name, is, what, &v, present, err) < 0)
        return -1;
    if (v)
        *out = v;
    return 0;
}

int param_object(cJSON *params, const char *name, cJSON **out, bool *present,
                 struct rpc_error *err)
{
    return node(params, name, cJSON_IsObject, "an object", out, present, err);
}

int param_array(cJSON *params, const char *name, cJSON **out, bool *present,
                struct rpc_error *err)
{
    return node(params, name, cJSON_IsArray, "an array", out, present, err);
}
