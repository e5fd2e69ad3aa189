/* egress: the outbound policy {allowPublicTraffic, allowOut, denyOut} as
 * the host product states it, enforced with nf_tables (see nft.h). Owns
 * the "egress" phase: services after it start only once a policy is
 * applied and read back, and stay held while applying fails. */
#ifndef HEARTH_EGRESS_H
#define HEARTH_EGRESS_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"
#include "nft.h"
#include "sections.h"

struct cJSON;
struct config;

/* Applies a parsed policy as a whole replacement (hearth keeps its own
 * copy). Returns 0, or -2 with the kernel's reason when applying failed
 * (the old policy stands), or -1 when out of memory. */
int egress_apply(const struct egress_policy *p, struct err *err);

/* Boot: applies the config's `egress` (if any) with the gateways and
 * DNS servers of `network` always allowed, and marks the phase. */
void egress_boot(const struct config *cfg);

/* Takes the gateways and name servers of net as the addresses the policy
 * always allows (when the network is replaced). With apply, a policy in
 * force is applied again with them at once; else the next apply uses
 * them. Returns 0, or -1 with err when re-applying failed (the old
 * ruleset and list stand). */
int egress_set_always(const struct network_cfg *net, bool apply, struct err *err);

/* sections_egress_parse, then egress_apply. Returns 0; -1 with err naming the
 * offending value (nothing applied); or -2 with the kernel's reason when
 * applying failed (the old policy stands). */
int egress_set(const struct cJSON *policy, struct err *err);

/* Checks the table is still there and unchanged (generation id first,
 * then a full read-back) and re-applies it if not (egress_repairs counts
 * those). Returns 0 when the policy is in force afterwards, -1 with err
 * otherwise. No-op without a policy. */
int egress_recheck(struct err *err);
/* How many repairs recheck has made since boot. */
unsigned egress_repairs(void);

/* One transaction, as nft_apply: 0, or the kernel's negative errno with
 * the part of the ruleset it refused. */
typedef int (*egress_apply_fn)(const struct nft_policy *np, struct nft_expect *exp,
                               enum nft_part *part, struct err *err);

/* What egress_apply_fallback went without, with the kernel's reason. */
struct egress_fallback {
    bool netdev;        /* the netdev chains */
    bool owner;         /* the tables' owner flag */
    bool cgroup;        /* the services cgroup match: the ports closed to every process */
    bool lports;        /* the local ports altogether */
    bool replies;       /* the answers to connections from outside */
    char netdev_error[200], cgroup_error[200], lports_error[200], replies_error[200];
    unsigned tries;
};

/* Applies np with apply, going without what the kernel refuses, one
 * layer at a time and only the layer the refused message belongs to:
 * the netdev chains; the owner flag (EOPNOTSUPP or EINVAL on the
 * table); the services cgroup match of the local ports (then they are
 * closed to every process); the local ports altogether (the outbound
 * policy is applied without them); the replies to connections from
 * outside (then their answers obey the allowlist). A refusal whose message is not
 * known takes the first two steps only; EPERM and a refusal of the
 * policy itself are final. np is left as applied, fb says what went.
 * Returns 0, or the last refusal (negative errno) with why; also when
 * the local ports were all there was to apply and they went. */
int egress_apply_fallback(struct nft_policy *np, struct nft_expect *exp, egress_apply_fn apply,
                          struct egress_fallback *fb, struct err *err);

/* {configured, applied, policy, error, generation, repairs, counters}. */
struct cJSON *egress_json(void);

#endif
