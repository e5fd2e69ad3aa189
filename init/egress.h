/* egress: the outbound policy {allowPublicTraffic, allowOut, denyOut} as
 * the host product states it, enforced with nf_tables (see nft.h). Owns
 * the "egress" phase: services after it start only once a policy is
 * applied and read back, and stay held while applying fails. */
#ifndef HEARTH_EGRESS_H
#define HEARTH_EGRESS_H

#include <stdbool.h>
#include <stddef.h>

#include "sections.h"

struct cJSON;
struct config;

/* Applies a parsed policy as a whole replacement (hearth keeps its own
 * copy). Returns 0, or -2 with the kernel's reason when applying failed
 * (the old policy stands), or -1 when out of memory. */
int egress_apply(const struct egress_policy *p, char *err, size_t errlen);

/* Boot: applies the config's `egress` (if any) with the gateways and
 * DNS servers of `network` always allowed, and marks the phase. */
void egress_boot(const struct config *cfg);

/* Takes the gateways and name servers of net as the addresses the policy
 * always allows (when the network is replaced). With apply, a policy in
 * force is applied again with them at once; else the next apply uses
 * them. Returns 0, or -1 with err when re-applying failed (the old
 * ruleset and list stand). */
int egress_set_always(const struct network_cfg *net, bool apply, char *err, size_t errlen);

/* egress_parse, then egress_apply. Returns 0; -1 with err naming the
 * offending value (nothing applied); or -2 with the kernel's reason when
 * applying failed (the old policy stands). */
int egress_set(const struct cJSON *policy, char *err, size_t errlen);

/* Checks the table is still there and unchanged (generation id first,
 * then a full read-back) and re-applies it if not (egress_repairs counts
 * those). Returns 0 when the policy is in force afterwards, -1 with err
 * otherwise. No-op without a policy. */
int egress_recheck(char *err, size_t errlen);
/* How many repairs recheck has made since boot. */
unsigned egress_repairs(void);

/* {configured, applied, policy, error, generation, repairs, counters}. */
struct cJSON *egress_json(void);

#endif
