/* m_persist: the methods of the persistence modules — mounts.list,
 * skills.list, skills.sync, skills.fork (registered in methods.c). */
#ifndef HEARTH_M_PERSIST_H
#define HEARTH_M_PERSIST_H

#include "methods.h"

int m_mounts_list(struct client *c, struct cJSON *params, struct cJSON **result,
                  struct rpc_error *err);
int m_skills_list(struct client *c, struct cJSON *params, struct cJSON **result,
                  struct rpc_error *err);
int m_skills_sync(struct client *c, struct cJSON *params, struct cJSON **result,
                  struct rpc_error *err);
int m_skills_fork(struct client *c, struct cJSON *params, struct cJSON **result,
                  struct rpc_error *err);

#endif
