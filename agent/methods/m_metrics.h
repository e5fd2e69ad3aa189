/* m_metrics: the metrics method — guest memory, mount usage (diskuse),
 * per-service cgroup figures, egress counters and hearth's own footprint,
 * in one reply (registered in methods.c). */
#ifndef HEARTH_M_METRICS_H
#define HEARTH_M_METRICS_H

#include "methods.h"

int m_metrics(struct client *c, struct cJSON *params, struct cJSON **result,
              struct rpc_error *err);

#endif
