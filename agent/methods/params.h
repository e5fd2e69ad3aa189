/* params: reading JSON-RPC params. Every error names the parameter
 * ("timeout_ms: expected a non-negative integer") and sets -32602. */
#ifndef HEARTH_PARAMS_H
#define HEARTH_PARAMS_H

#include <stdbool.h>
#include <stdint.h>

#include "rpc.h"

struct cJSON;

/* For methods that take no params. */
extern const char *const no_params[];

/* Refuses members a method does not know (known is NULL-terminated), so a
 * typo is an error rather than a silently ignored option. */
int params_only(struct cJSON *params, const char *const *known, struct rpc_error *err);

/* Each getter leaves *out alone and sets *present false when the member is
 * absent; returns -1 with err when it is present with the wrong type. */
int param_uint(struct cJSON *params, const char *name, uint64_t *out, bool *present,
               struct rpc_error *err);
int param_bool(struct cJSON *params, const char *name, bool *out, bool *present,
               struct rpc_error *err);
/* *out points into params (valid while params lives). */
int param_string(struct cJSON *params, const char *name, const char **out, bool *present,
                 struct rpc_error *err);
/* An object or array member, type-checked; *out points into params. */
int param_object(struct cJSON *params, const char *name, struct cJSON **out, bool *present,
                 struct rpc_error *err);
int param_array(struct cJSON *params, const char *name, struct cJSON **out, bool *present,
                struct rpc_error *err);

#endif
