/* nft: the egress ruleset in nf_tables, built and read back over netlink
 * (no libnftnl). Table "inet hearth": one output-hook chain with
 * interval sets per family and rules in the policy's order:
 *   (replies) meta mark &= ~NFT_REPLY_BIT;
 *   oifname "lo" accept;
 *   ct state established,related (replies: ct direction original) accept;
 *   (replies) ct direction reply ct state established,related
 *             ct mark & NFT_REPLY_BIT: meta mark |= NFT_REPLY_BIT, accept;
 *   icmpv6 router/neighbour discovery accept;
 *   daddr @always4/6 accept; daddr @allow4/6 accept;
 *   daddr @deny4/6 reject (tcp reset, else icmpx admin-prohibited);
 *   public: accept, or reject everything.
 * With replies, a prerouting chain "inbound" clears NFT_REPLY_BIT from
 * every packet's mark and sets it in the conntrack mark of each new
 * connection that arrives through an interface other than lo (see
 * build_inbound in nft.c).
 * Table "netdev hearth" (optional): the same sets, an "allowlist" chain with
 * the same order read from the Ethernet frame (VLAN-tagged frames
 * dropped, deny and public-off drop, no conntrack; with replies, a packet
 * with a route and NFT_REPLY_BIT in its mark, which only the output
 * chain's replies rule leaves there, is accepted before the sets), and an
 * egress-hook chain per interface, "egress-<ifname>", jumping to it:
 * packet sockets bypass the inet hooks, not these. Both tables are replaced in one
 * transaction, through one netlink socket kept open for hearth's life;
 * with owner set they are owned by it (NFT_TABLE_F_OWNER, 5.12+): no
 * other process can change or delete them, and they go when hearth does.
 * Every rule counts but the two "unstamp" ones (they see every packet);
 * its nftnl-style comment names it for the counters.
 *
 * Local ports: the output chain's first rule sends what a socket of the
 * services cgroup sends (`socket cgroupv2`) to chain "localports": exec
 * sessions (the "@exec" directory below it) return; so does anything not
 * addressed to the machine itself (`fib daddr type local`: 127.0.0.0/8,
 * ::1 and every address of the namespace's interfaces); the listed ports
 * are rejected (tcp reset, icmpx port-unreachable). Without the services
 * cgroup (none, or the kernel refuses the match) the rule sends every
 * socket there but those carrying own_mark (`meta mark != M`): hearth's
 * own probes. Without an outbound policy the output chain holds that one
 * rule alone. */
#ifndef HEARTH_NFT_H
#define HEARTH_NFT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cidr.h"
#include "err.h"
#include "netaddr.h"
#include "netlink.h"

#define NFT_TABLE "hearth"
#define NFT_CHAIN "output"
#define NFT_ND_CHAIN "allowlist"
#define NFT_MAX_IFACES 16
#define NFT_IFNAMSIZ 16
#define NFT_LOCAL_CHAIN "localports"
#define NFT_MAX_LPORTS 16
#define NFT_RULE_NAME_MAX 32
#define NFT_IN_CHAIN "inbound"
/* The bit hearth owns in both marks: in a connection's (ct mark), "it
 * came in through an interface"; in a packet's (meta mark), "the output
 * chain let it out as such a connection's answer". */
#define NFT_REPLY_BIT 0x10000000u

struct cJSON;

struct nft_policy {
    const struct cidr *always, *allow, *deny;   /* mixed families */
    size_t n_always, n_allow, n_deny;
    bool allow_public;
    bool owner;                                 /* NFT_TABLE_F_OWNER */
    bool netdev;                                /* build the netdev table */
    const char (*ifaces)[NFT_IFNAMSIZ];         /* its egress chains */
    size_t n_ifaces;
    bool outbound;                              /* the rules above; else only local ports */
    bool replies;                               /* with outbound: answers to connections from
                                                 * outside pass (the inbound chain, the replies
                                                 * rules) */
    /* The local ports services may not reach (none: no chain). */
    const struct port_range *lports;
    size_t n_lports;
    bool cgroup;                                /* match the services cgroup (else every socket) */
    uint64_t svc_cgid, exec_cgid;               /* exec_cgid 0: no exec directory */
    uint32_t svc_level;
    /* Without cgroup: sockets with this mark (hearth's own probes) are
     * not matched; 0: every socket is. */
    uint32_t own_mark;
};

/* What the verifier expects to find: per set, the element count and an
 * order-independent digest of its elements. */
struct nft_expect {
    uint32_t n_elems[6];
    uint64_t digest[6];
    bool allow_public;
    bool owner, netdev;
    char ifaces[NFT_MAX_IFACES][NFT_IFNAMSIZ];
    size_t n_ifaces;
    bool outbound;
    bool replies;
    /* The localports chain's rule names, in order (none: no chain). */
    char local[NFT_MAX_LPORTS + 2][NFT_RULE_NAME_MAX];
    size_t n_local;
};

/* Builds the whole replace transaction (batch begin, table create,
 * delete, recreate, chain, sets, elements, rules, batch end) into b, and
 * what a read-back must show into exp. Returns 0 or -1 (b->failed). */
int nft_build(const struct nft_policy *p, struct nlbuf *b, struct nft_expect *exp);

/* The part of the ruleset a message of the batch belongs to: what a
 * refusal by the kernel says about which layer to go without. */
enum nft_part {
    NFT_PART_UNKNOWN,   /* no message named: the send or the read failed */
    NFT_PART_TABLE,     /* the inet table itself (its owner flag) */
    NFT_PART_BASE,      /* the output chain, the sets, the policy's rules */
    NFT_PART_CGROUP,    /* a rule matching the socket's cgroup (socket cgroupv2) */
    NFT_PART_LOCAL,     /* the localports chain, its rules, the jump to it */
    NFT_PART_NETDEV,    /* anything of the netdev table but its replies rule */
    NFT_PART_REPLIES,   /* the inbound chain, the replies and unstamp rules (ct mark, route realm) */
};

/* Which part the batch message h (as nft_build writes it) belongs to. */
enum nft_part nft_msg_part(const struct nlmsghdr *h);

/* The part of the message nl_transact found refused in b
 * (b->refused_seq); NFT_PART_UNKNOWN when none was. */
enum nft_part nft_refused_part(const struct nlbuf *b);

/* Applies p in one transaction: on any error the old ruleset stands.
 * Returns 0, or a negative errno (the kernel's, from the first message
 * it refused) with the reason in err and, when part is not NULL, that
 * message's part. */
int nft_apply(const struct nft_policy *p, struct nft_expect *exp, enum nft_part *part, struct err *err);

/* Reads the table back and compares it with exp (rule order and names,
 * set contents). Returns 0 when it matches, 1 when it differs or is gone
 * (err says how), -1 when it could not be read. */
int nft_verify(const struct nft_expect *exp, struct err *err);

/* The ruleset generation id: any change anywhere bumps it. Read through
 * the owner socket, like every read here. */
int nft_genid(uint32_t *out, struct err *err);

/* {"rule-name": {"packets": N, "bytes": N}, ..., "netdev": {...},
 * "localports": {...}, "inbound": {...}} (the netdev policy chain's when
 * exp->netdev, the localports chain's when it has one, the inbound
 * chain's with replies), or NULL with err. */
struct cJSON *nft_counters_json(const struct nft_expect *exp, struct err *err);

#endif
