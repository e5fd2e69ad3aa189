/* network: the guest's interfaces over rtnetlink (netroute.h). Each
 * configured interface is found by name or by MAC (renamed to its
 * configured name), waited for with a timeout so a hot-plugged NIC is
 * picked up, brought up with its MTU, address, default route, routes and
 * permanent neighbour entries; DNS servers go to resolv.conf, written
 * atomically. The configuration can be replaced at run time and is
 * verified and repaired after every resume. Owns the "network" phase. */
#ifndef HEARTH_NETWORK_H
#define HEARTH_NETWORK_H

#include <stddef.h>

#include "err.h"

struct cJSON;
struct config;
struct network_cfg;

/* Starts configuring (never blocks: waiting runs on a loop timer). */
void network_boot(const struct config *cfg);

/* Makes cfg the configuration in force (sandbox.init, sandbox.resume's
 * network): what hearth set for the old one and cfg lacks (addresses on
 * the links it configured, routes, neighbour entries) is removed, and
 * cfg's interfaces wait to be found again; network_verify then applies
 * them. report (may be NULL) gets "removed": ["eth0: address ..."] (a
 * removal the kernel refused is listed with its reason and logged; one
 * already gone is not listed). */
void network_replace(const struct network_cfg *cfg, struct cJSON *report);

enum { NETWORK_OK, NETWORK_REPAIRED, NETWORK_SKIPPED, NETWORK_FAILED };
/* Checks every configured interface against the kernel (one dump each of
 * links, addresses, routes and, when configured, neighbours): found (by
 * MAC, else by name), name, up, MTU, address, routes, neighbours,
 * carrier; and resolv.conf's content. Repairs what differs. report (may
 * be NULL) gets "interfaces": [{name, ifindex, found, result, repairs,
 * error}] and "resolv_conf"; detail one line naming each interface with
 * what was done or why it failed. Returns one of the values above. */
int network_verify(struct cJSON *report, struct err *detail);
/* {interfaces:[{name, state, ifindex, error, ...}], dns, resolv_conf}. */
struct cJSON *network_json(void);
/* Diagnosis per interface: link, carrier, mtu, address, route and the
 * gateway's neighbour state (a probe is sent; its answer shows up in
 * the neighbour state of the next check). */
struct cJSON *network_check_json(void);

#endif
