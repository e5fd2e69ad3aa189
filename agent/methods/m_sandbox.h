/* m_sandbox: the sandbox.*, time.sync and entropy.add methods (the flows
 * themselves live in init/sandbox/sandbox.c). */
#ifndef HEARTH_M_SANDBOX_H
#define HEARTH_M_SANDBOX_H

#include "methods.h"

int m_sandbox_init(struct client *c, struct cJSON *params, struct cJSON **result,
                   struct rpc_error *err);
int m_sandbox_freeze(struct client *c, struct cJSON *params, struct cJSON **result,
                     struct rpc_error *err);
int m_sandbox_resume(struct client *c, struct cJSON *params, struct cJSON **result,
                     struct rpc_error *err);
int m_time_sync(struct client *c, struct cJSON *params, struct cJSON **result,
                struct rpc_error *err);
int m_entropy_add(struct client *c, struct cJSON *params, struct cJSON **result,
                  struct rpc_error *err);

#endif
