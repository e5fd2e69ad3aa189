/* network: the guest's interfaces over rtnetlink. Each configured
 * interface is found by name or by MAC (renamed to its configured name),
 * waited for with a timeout so a hot-plugged NIC is picked up, brought up
 * with its MTU, address and default route; DNS servers go to resolv.conf,
 * written atomically. Owns the "network" phase. */
#ifndef HEARTH_NETWORK_H
#define HEARTH_NETWORK_H

#include <stddef.h>

struct cJSON;
struct config;

/* Starts configuring (never blocks: waiting runs on a loop timer). */
void network_boot(const struct config *cfg);
/* Re-applies link, address and route of configured interfaces (after a
 * resume). Returns 0, or -1 with err naming the interface. */
int network_recheck(char *err, size_t errlen);
/* {interfaces:[{name, state, ifindex, error, ...}], dns, resolv_conf}. */
struct cJSON *network_json(void);
/* Diagnosis per interface: link, carrier, mtu, address, route and the
 * gateway's neighbour state (a probe is sent; its answer shows up in
 * the neighbour state of the next check). */
struct cJSON *network_check_json(void);

#endif
