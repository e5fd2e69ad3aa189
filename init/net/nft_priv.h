/* What nft.c (the batch: sets, rules, chains) shares with nft_io.c (the
 * owner socket: apply, read back, verify, counters): the set and rule
 * names both sides must agree on, and the element digest. */
#ifndef HEARTH_NFT_PRIV_H
#define HEARTH_NFT_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NFPROTO_INET_ 1
#define NFPROTO_NETDEV_ 5
#define MSG(t) ((uint16_t)((NFNL_SUBSYS_NFTABLES << 8) | (t)))

enum { S_ALWAYS4, S_ALWAYS6, S_ALLOW4, S_ALLOW6, S_DENY4, S_DENY6, N_SETS };
extern const char *const nft_set_names[N_SETS];

/* One set element's share of a set's order-independent digest: its key
 * and whether it ends an interval. */
uint64_t nft_elem_digest(const uint8_t *p, size_t n, uint32_t flags);

/* The most rules a chain of hearth's has (and the read-back keeps). */
#define NFT_MAX_RULES 24

struct nft_expect;
/* The rule names of the inet output chain, or of the netdev policy
 * chain, in order; returns how many. */
size_t nft_rule_names(bool netdev, const struct nft_expect *exp, const char *out[NFT_MAX_RULES]);

/* The inbound chain's rule names, in order. */
#define NFT_INBOUND_RULES 2
extern const char *const nft_inbound_rules[NFT_INBOUND_RULES];

/* "egress-<ifname>": an interface's netdev base chain. */
void nft_nd_chain_name(const char *ifname, char *out, size_t outlen);

#endif
