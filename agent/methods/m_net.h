/* m_net: the egress.* and network.* control methods. */
#ifndef HEARTH_M_NET_H
#define HEARTH_M_NET_H

#include "rpc.h"

struct client;
struct cJSON;

int m_egress_get(struct client *c, struct cJSON *params, struct cJSON **result, struct rpc_error *err);
int m_egress_check(struct client *c, struct cJSON *params, struct cJSON **result, struct rpc_error *err);
int m_network_get(struct client *c, struct cJSON *params, struct cJSON **result, struct rpc_error *err);
int m_network_check(struct client *c, struct cJSON *params, struct cJSON **result, struct rpc_error *err);
int m_egress_set(struct client *c, struct cJSON *params, struct cJSON **result, struct rpc_error *err);

#endif
