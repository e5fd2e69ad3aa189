#include "m_net.h"

#include <cJSON.h>

#include "egress.h"
#include "err.h"
#include "network.h"
#include "params.h"

int m_egress_get(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    if (params_only(params, no_params, err) < 0)
        return -1;
    *result = egress_json();
    return *result ? 0 : -1;
}

/* params is the policy itself, replacing the old one whole: absent
 * fields take their defaults (public on, empty lists, the default local
 * ports). */
int m_egress_set(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    static const char *const known[] = {"allowPublicTraffic", "allowOut", "denyOut",
                                        "deny_local_ports", NULL};
    struct err why;
    cJSON *empty = NULL;

    if (params_only(params, known, err) < 0)
        return -1;
    if (!params)
        params = empty = cJSON_CreateObject();
    int rc = egress_set(params, &why);
    cJSON_Delete(empty);
    if (rc < 0)
        return rpc_error_from(err, rc == -1 ? RPC_INVALID_PARAMS : RPC_ERR_FAILED, &why);
    *result = egress_json();
    return *result ? 0 : -1;
}

/* Verifies the ruleset now (as after a resume) and repairs it. */
int m_egress_check(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    struct err why;
    if (params_only(params, no_params, err) < 0)
        return -1;
    unsigned before = egress_repairs();
    if (egress_recheck(&why) < 0) {
        rpc_error_from(err, RPC_ERR_FAILED, &why);
        return -1;
    }
    cJSON *r = egress_json();
    if (!r)
        return -1;
    cJSON_AddBoolToObject(r, "repaired", egress_repairs() != before);
    *result = r;
    return 0;
}

int m_network_get(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    if (params_only(params, no_params, err) < 0)
        return -1;
    *result = network_json();
    return *result ? 0 : -1;
}

int m_network_check(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    if (params_only(params, no_params, err) < 0)
        return -1;
    *result = network_check_json();
    return *result ? 0 : -1;
}
