#include "nft.h"
#include "nft_priv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/rtnetlink.h>

/* Elements per NEWSETELEM message: keeps each nest far below 64 KiB. */
#define ELEMS_PER_MSG 1024
/* ct state bits: 1 << (IP_CT_ESTABLISHED + 1) | 1 << (IP_CT_RELATED + 1),
 * and 1 << (IP_CT_NEW + 1). */
#define CT_EST_REL 0x6u
#define CT_NEW 0x8u
/* ARPHRD_LOOPBACK: meta iiftype of lo, whatever its name. */
#define IFTYPE_LOOPBACK 772

const char *const nft_set_names[N_SETS] = {"always4", "always6", "allow4",
                                           "allow6", "deny4", "deny6"};

struct range {
    uint8_t lo[16], hi[16];   /* inclusive, big-endian */
};

uint64_t nft_elem_digest(const uint8_t *p, size_t n, uint32_t flags)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    h = (h ^ (flags & 0xff)) * 1099511628211ull;
    return h;
}

/* A heap sort of ranges by their first kl bytes of lo: in place, with no
 * allocation, and n log n steps for any length (nothing bounds a list the
 * host sends but the request's size). Not qsort: its comparator would
 * need the key length in a global, and musl's qsort is 2 KiB of binary
 * for this one call. */
static void sift_down(struct range *r, size_t root, size_t n, size_t kl)
{
    for (size_t c; (c = 2 * root + 1) < n; root = c) {
        if (c + 1 < n && memcmp(r[c + 1].lo, r[c].lo, kl) > 0)
            c++;
        if (memcmp(r[root].lo, r[c].lo, kl) >= 0)
            return;
        struct range t = r[root];
        r[root] = r[c];
        r[c] = t;
    }
}

static void sort_ranges(struct range *r, size_t n, size_t kl)
{
    for (size_t i = n / 2; i-- > 0;)
        sift_down(r, i, n, kl);
    for (size_t end = n; end-- > 1;) {
        struct range t = r[0];
        r[0] = r[end];
        r[end] = t;
        sift_down(r, 0, end, kl);
    }
}

/* x + 1 in place; returns false on wrap (x was all ones). */
static bool inc(uint8_t *x, size_t n)
{
    for (size_t i = n; i-- > 0;)
        if (++x[i] != 0)
            return true;
    return false;
}

/* Sorted, merged ranges of one family from cidrs: overlapping or
 * adjacent networks become one interval, as the kernel refuses overlaps. */
static struct range *ranges_of(const struct cidr *c, size_t n, int family, size_t *out_n)
{
    size_t kl = family == AF_INET ? 4 : 16, m = 0;
    struct range *r = calloc(n ? n : 1, sizeof(*r));
    if (!r)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (c[i].family != family)
            continue;
        memcpy(r[m].lo, c[i].addr, kl);
        memcpy(r[m].hi, c[i].addr, kl);
        for (size_t bit = c[i].prefix; bit < kl * 8; bit++)
            r[m].hi[bit / 8] |= (uint8_t)(0x80 >> (bit % 8));
        m++;
    }
    sort_ranges(r, m, kl);
    size_t w = 0;
    for (size_t i = 0; i < m; i++) {
        if (w > 0) {
            uint8_t next[16];
            memcpy(next, r[w - 1].hi, kl);
            bool wrapped = !inc(next, kl);
            if (wrapped || memcmp(r[i].lo, next, kl) <= 0) {
                if (memcmp(r[i].hi, r[w - 1].hi, kl) > 0)
                    memcpy(r[w - 1].hi, r[i].hi, kl);
                continue;
            }
        }
        r[w++] = r[i];
    }
    *out_n = w;
    return r;
}

static void put_elem(struct nlbuf *b, const uint8_t *key, size_t kl, bool end)
{
    size_t e = nl_nest_begin(b, NFTA_LIST_ELEM);
    size_t k = nl_nest_begin(b, NFTA_SET_ELEM_KEY);
    nl_attr(b, NFTA_DATA_VALUE, key, kl);
    nl_nest_end(b, k);
    if (end)
        nl_attr_be32(b, NFTA_SET_ELEM_FLAGS, NFT_SET_ELEM_INTERVAL_END);
    nl_nest_end(b, e);
}

/* The table being built: inet (the output chain) or netdev (the egress
 * chains). Both have the same sets, each under its own set ids. */
static uint8_t cur_family = NFPROTO_INET_;

static uint32_t set_id(int idx)
{
    return (uint32_t)idx + 1 + (cur_family == NFPROTO_NETDEV_ ? 16 : 0);
}

static void begin(struct nlbuf *b, uint16_t type, uint16_t flags)
{
    nl_msg_begin(b, MSG(type), NLM_F_ACK | flags);
    nl_put_nfgen(b, cur_family, 0);
}

/* The sorted, merged ranges of every set, computed once per batch and
 * written into both tables. */
struct set_ranges {
    struct range *r[N_SETS];
    size_t n[N_SETS];
};

static void build_set(struct nlbuf *b, int idx, const struct set_ranges *sr,
                      struct nft_expect *exp)
{
    int family = idx % 2 == 0 ? AF_INET : AF_INET6;
    size_t kl = family == AF_INET ? 4 : 16, nr = sr->n[idx];
    const struct range *r = sr->r[idx];

    begin(b, NFT_MSG_NEWSET, NLM_F_CREATE);
    nl_attr_str(b, NFTA_SET_TABLE, NFT_TABLE);
    nl_attr_str(b, NFTA_SET_NAME, nft_set_names[idx]);
    nl_attr_be32(b, NFTA_SET_FLAGS, NFT_SET_INTERVAL);
    nl_attr_be32(b, NFTA_SET_KEY_TYPE, family == AF_INET ? 7 : 8); /* ipv4_addr, ipv6_addr */
    nl_attr_be32(b, NFTA_SET_KEY_LEN, (uint32_t)kl);
    nl_attr_be32(b, NFTA_SET_ID, set_id(idx));
    nl_msg_end(b);

    exp->n_elems[idx] = 0;
    exp->digest[idx] = 0;
    size_t in_msg = ELEMS_PER_MSG, list = 0;
    for (size_t i = 0; i < nr; i++) {
        uint8_t end[16];
        memcpy(end, r[i].hi, kl);
        bool has_end = inc(end, kl);
        if (in_msg + 2 > ELEMS_PER_MSG) {
            if (in_msg != ELEMS_PER_MSG || i > 0) {
                nl_nest_end(b, list);
                nl_msg_end(b);
            }
            begin(b, NFT_MSG_NEWSETELEM, NLM_F_CREATE);
            nl_attr_str(b, NFTA_SET_ELEM_LIST_TABLE, NFT_TABLE);
            nl_attr_str(b, NFTA_SET_ELEM_LIST_SET, nft_set_names[idx]);
            nl_attr_be32(b, NFTA_SET_ELEM_LIST_SET_ID, set_id(idx));
            list = nl_nest_begin(b, NFTA_SET_ELEM_LIST_ELEMENTS);
            in_msg = 0;
        }
        put_elem(b, r[i].lo, kl, false);
        exp->n_elems[idx]++;
        exp->digest[idx] += nft_elem_digest(r[i].lo, kl, 0);
        in_msg++;
        if (has_end) {
            put_elem(b, end, kl, true);
            exp->n_elems[idx]++;
            exp->digest[idx] += nft_elem_digest(end, kl, NFT_SET_ELEM_INTERVAL_END);
            in_msg++;
        }
    }
    if (nr > 0) {
        nl_nest_end(b, list);
        nl_msg_end(b);
    }
}

/* ---- expressions ---- */

static size_t expr_begin(struct nlbuf *b, const char *name, size_t *data)
{
    size_t e = nl_nest_begin(b, NFTA_LIST_ELEM);
    nl_attr_str(b, NFTA_EXPR_NAME, name);
    *data = nl_nest_begin(b, NFTA_EXPR_DATA);
    return e;
}

static void expr_end(struct nlbuf *b, size_t e, size_t data)
{
    nl_nest_end(b, data);
    nl_nest_end(b, e);
}

static void e_meta(struct nlbuf *b, uint32_t key)
{
    size_t d, e = expr_begin(b, "meta", &d);
    nl_attr_be32(b, NFTA_META_KEY, key);
    nl_attr_be32(b, NFTA_META_DREG, NFT_REG_1);
    expr_end(b, e, d);
}

static void e_cmp(struct nlbuf *b, uint32_t op, const void *v, size_t len)
{
    size_t d, e = expr_begin(b, "cmp", &d);
    nl_attr_be32(b, NFTA_CMP_SREG, NFT_REG_1);
    nl_attr_be32(b, NFTA_CMP_OP, op);
    size_t n = nl_nest_begin(b, NFTA_CMP_DATA);
    nl_attr(b, NFTA_DATA_VALUE, v, len);
    nl_nest_end(b, n);
    expr_end(b, e, d);
}

static void e_payload_daddr(struct nlbuf *b, int family)
{
    size_t d, e = expr_begin(b, "payload", &d);
    nl_attr_be32(b, NFTA_PAYLOAD_DREG, NFT_REG_1);
    nl_attr_be32(b, NFTA_PAYLOAD_BASE, NFT_PAYLOAD_NETWORK_HEADER);
    nl_attr_be32(b, NFTA_PAYLOAD_OFFSET, family == AF_INET ? 16 : 24);
    nl_attr_be32(b, NFTA_PAYLOAD_LEN, family == AF_INET ? 4 : 16);
    expr_end(b, e, d);
}

static void e_lookup(struct nlbuf *b, int idx)
{
    size_t d, e = expr_begin(b, "lookup", &d);
    nl_attr_str(b, NFTA_LOOKUP_SET, nft_set_names[idx]);
    nl_attr_be32(b, NFTA_LOOKUP_SREG, NFT_REG_1);
    nl_attr_be32(b, NFTA_LOOKUP_SET_ID, set_id(idx));
    expr_end(b, e, d);
}

/* reg1 = (reg1 & mask) ^ xor, over 4 bytes: clears, sets or keeps bits
 * of a mark (host order on both sides). */
static void e_bitwise(struct nlbuf *b, uint32_t mask, uint32_t xor)
{
    size_t d, e = expr_begin(b, "bitwise", &d);
    nl_attr_be32(b, NFTA_BITWISE_SREG, NFT_REG_1);
    nl_attr_be32(b, NFTA_BITWISE_DREG, NFT_REG_1);
    nl_attr_be32(b, NFTA_BITWISE_LEN, 4);
    size_t n = nl_nest_begin(b, NFTA_BITWISE_MASK);
    nl_attr(b, NFTA_DATA_VALUE, &mask, 4);
    nl_nest_end(b, n);
    n = nl_nest_begin(b, NFTA_BITWISE_XOR);
    nl_attr(b, NFTA_DATA_VALUE, &xor, 4);
    nl_nest_end(b, n);
    expr_end(b, e, d);
}

static void e_ct(struct nlbuf *b, uint32_t key)
{
    size_t d, e = expr_begin(b, "ct", &d);
    nl_attr_be32(b, NFTA_CT_DREG, NFT_REG_1);
    nl_attr_be32(b, NFTA_CT_KEY, key);
    expr_end(b, e, d);
}

/* ct state has one of the bits of mask. */
static void e_ct_state(struct nlbuf *b, uint32_t mask)
{
    uint32_t zero = 0;
    e_ct(b, NFT_CT_STATE);
    e_bitwise(b, mask, 0);
    e_cmp(b, NFT_CMP_NEQ, &zero, 4);
}

/* ct direction is dir (IP_CT_DIR_ORIGINAL 0, IP_CT_DIR_REPLY 1). */
static void e_ct_direction(struct nlbuf *b, uint8_t dir)
{
    e_ct(b, NFT_CT_DIRECTION);
    e_cmp(b, NFT_CMP_EQ, &dir, 1);
}

/* The connection's mark has NFT_REPLY_BIT: it came in through an
 * interface. */
static void e_ct_inbound(struct nlbuf *b)
{
    uint32_t zero = 0;
    e_ct(b, NFT_CT_MARK);
    e_bitwise(b, NFT_REPLY_BIT, 0);
    e_cmp(b, NFT_CMP_NEQ, &zero, 4);
}

/* ct mark set ct mark | NFT_REPLY_BIT (the connection's other bits kept). */
static void e_ct_mark_inbound(struct nlbuf *b)
{
    e_ct(b, NFT_CT_MARK);
    e_bitwise(b, ~NFT_REPLY_BIT, NFT_REPLY_BIT);
    size_t d, e = expr_begin(b, "ct", &d);
    nl_attr_be32(b, NFTA_CT_KEY, NFT_CT_MARK);
    nl_attr_be32(b, NFTA_CT_SREG, NFT_REG_1);
    expr_end(b, e, d);
}

/* meta mark set meta mark with NFT_REPLY_BIT set (on) or cleared (off),
 * the packet's other bits kept. */
static void e_mark_stamp(struct nlbuf *b, bool on)
{
    e_meta(b, NFT_META_MARK);
    e_bitwise(b, ~NFT_REPLY_BIT, on ? NFT_REPLY_BIT : 0);
    size_t d, e = expr_begin(b, "meta", &d);
    nl_attr_be32(b, NFTA_META_KEY, NFT_META_MARK);
    nl_attr_be32(b, NFTA_META_SREG, NFT_REG_1);
    expr_end(b, e, d);
}

/* The packet carries NFT_REPLY_BIT and a route (skb_dst): it came down
 * the IP stack, through the inet output chain that set the bit. Neither
 * part alone will do: a packet socket with NET_RAW can mark its frames
 * (SO_MARK), but they never get a route. `meta rtclassid` reads the
 * route's realm, and ends the rule when there is no route; any realm
 * passes (>= 0). */
static void e_stamped(struct nlbuf *b)
{
    uint32_t zero = 0;
    e_meta(b, NFT_META_RTCLASSID);
    e_cmp(b, NFT_CMP_GTE, &zero, 4);
    e_meta(b, NFT_META_MARK);
    e_bitwise(b, NFT_REPLY_BIT, 0);
    e_cmp(b, NFT_CMP_NEQ, &zero, 4);
}

static void e_counter(struct nlbuf *b)
{
    size_t d, e = expr_begin(b, "counter", &d);
    nl_attr_be64(b, NFTA_COUNTER_BYTES, 0);
    nl_attr_be64(b, NFTA_COUNTER_PACKETS, 0);
    expr_end(b, e, d);
}

/* accept, drop, or a jump to chain. */
static void e_verdict(struct nlbuf *b, int code, const char *chain)
{
    size_t d, e = expr_begin(b, "immediate", &d);
    nl_attr_be32(b, NFTA_IMMEDIATE_DREG, NFT_REG_VERDICT);
    size_t n = nl_nest_begin(b, NFTA_IMMEDIATE_DATA);
    size_t v = nl_nest_begin(b, NFTA_DATA_VERDICT);
    nl_attr_be32(b, NFTA_VERDICT_CODE, (uint32_t)code);
    if (chain)
        nl_attr_str(b, NFTA_VERDICT_CHAIN, chain);
    nl_nest_end(b, v);
    nl_nest_end(b, n);
    expr_end(b, e, d);
}

static void e_accept(struct nlbuf *b)
{
    e_verdict(b, NF_ACCEPT, NULL);
}

static void e_payload(struct nlbuf *b, uint32_t base, uint32_t off, uint32_t len)
{
    size_t d, e = expr_begin(b, "payload", &d);
    nl_attr_be32(b, NFTA_PAYLOAD_DREG, NFT_REG_1);
    nl_attr_be32(b, NFTA_PAYLOAD_BASE, base);
    nl_attr_be32(b, NFTA_PAYLOAD_OFFSET, off);
    nl_attr_be32(b, NFTA_PAYLOAD_LEN, len);
    expr_end(b, e, d);
}

/* TCP gets a reset; everything else ICMP(v6) admin-prohibited, so a
 * refused connect fails at once instead of timing out. */
static void e_reject(struct nlbuf *b, bool tcp)
{
    size_t d, e = expr_begin(b, "reject", &d);
    nl_attr_be32(b, NFTA_REJECT_TYPE, tcp ? NFT_REJECT_TCP_RST : NFT_REJECT_ICMPX_UNREACH);
    nl_attr_u8(b, NFTA_REJECT_ICMP_CODE, tcp ? 0 : NFT_REJECT_ICMPX_ADMIN_PROHIBITED);
    expr_end(b, e, d);
}

static void e_l4proto_tcp(struct nlbuf *b)
{
    uint8_t tcp = 6;
    e_meta(b, NFT_META_L4PROTO);
    e_cmp(b, NFT_CMP_EQ, &tcp, 1);
}

static void e_daddr_in(struct nlbuf *b, int idx)
{
    uint8_t proto = idx % 2 == 0 ? NFPROTO_IPV4 : NFPROTO_IPV6;
    e_meta(b, NFT_META_NFPROTO);
    e_cmp(b, NFT_CMP_EQ, &proto, 1);
    e_payload_daddr(b, idx % 2 == 0 ? AF_INET : AF_INET6);
    e_lookup(b, idx);
}

/* ICMPv6 router/neighbour discovery (types 133..137) is link-local
 * plumbing, not egress: without it a guest with public traffic off could
 * not even resolve its gateway. */
static void e_ndp(struct nlbuf *b)
{
    uint8_t v6 = NFPROTO_IPV6, icmp6 = 58, lo = 133, hi = 137;
    e_meta(b, NFT_META_NFPROTO);
    e_cmp(b, NFT_CMP_EQ, &v6, 1);
    e_meta(b, NFT_META_L4PROTO);
    e_cmp(b, NFT_CMP_EQ, &icmp6, 1);
    size_t d, e = expr_begin(b, "payload", &d);
    nl_attr_be32(b, NFTA_PAYLOAD_DREG, NFT_REG_1);
    nl_attr_be32(b, NFTA_PAYLOAD_BASE, NFT_PAYLOAD_TRANSPORT_HEADER);
    nl_attr_be32(b, NFTA_PAYLOAD_OFFSET, 0);
    nl_attr_be32(b, NFTA_PAYLOAD_LEN, 1);
    expr_end(b, e, d);
    e_cmp(b, NFT_CMP_GTE, &lo, 1);
    e_cmp(b, NFT_CMP_LTE, &hi, 1);
}

/* The socket's cgroup at level (its ancestor there, or itself) is, or is
 * not, the cgroup id. A packet without a full socket does not match. */
static void e_cgroup_is(struct nlbuf *b, uint32_t level, uint64_t id, uint32_t op)
{
    size_t d, e = expr_begin(b, "socket", &d);
    nl_attr_be32(b, NFTA_SOCKET_KEY, NFT_SOCKET_CGROUPV2);
    nl_attr_be32(b, NFTA_SOCKET_DREG, NFT_REG_1);
    nl_attr_be32(b, NFTA_SOCKET_LEVEL, level);
    expr_end(b, e, d);
    e_cmp(b, op, &id, sizeof(id));   /* the kernel's u64, host order */
}

/* The destination is not an address of this machine: `fib daddr type
 * != local`. Covers 127.0.0.0/8 and ::1 as well as every address of the
 * namespace's interfaces, whatever they are now. */
static void e_daddr_not_local(struct nlbuf *b)
{
    uint32_t local = RTN_LOCAL;
    size_t d, e = expr_begin(b, "fib", &d);
    nl_attr_be32(b, NFTA_FIB_DREG, NFT_REG_1);
    nl_attr_be32(b, NFTA_FIB_RESULT, NFT_FIB_RESULT_ADDRTYPE);
    nl_attr_be32(b, NFTA_FIB_FLAGS, NFTA_FIB_F_DADDR);
    expr_end(b, e, d);
    e_cmp(b, NFT_CMP_NEQ, &local, sizeof(local));
}

static void put_userdata_name(struct nlbuf *b, const char *name)
{
    /* nftnl's comment TLV (type 0), so `nft list` shows the name too. */
    uint8_t ud[2 + 32];
    size_t len = strlen(name) + 1;
    ud[0] = 0;
    ud[1] = (uint8_t)len;
    memcpy(ud + 2, name, len);
    nl_attr(b, NFTA_RULE_USERDATA, ud, 2 + len);
}

enum rule_kind { R_LOCAL_JUMP, R_UNSTAMP, R_LOOPBACK, R_ESTABLISHED, R_REPLIES, R_NDP, R_SET_ACCEPT,
                 R_SET_REJECT_TCP, R_SET_REJECT, R_PUBLIC_ACCEPT, R_PUBLIC_REJECT_TCP,
                 R_PUBLIC_REJECT };

struct rule {
    enum rule_kind kind;
    int set;
    const char *name;
};

/* The rules in order; returns how many. The local ports come first:
 * before "loopback", which accepts everything to lo. */
static size_t rule_list(const struct nft_expect *exp, struct rule out[NFT_MAX_RULES])
{
    size_t n = 0;
    bool allow_public = exp->allow_public;
    if (exp->n_local)
        out[n++] = (struct rule){R_LOCAL_JUMP, -1, "local-ports"};
    if (!exp->outbound)
        return n;
    if (exp->replies)
        out[n++] = (struct rule){R_UNSTAMP, -1, "unstamp"};
    out[n++] = (struct rule){R_LOOPBACK, -1, "loopback"};
    out[n++] = (struct rule){R_ESTABLISHED, -1, "established"};
    if (exp->replies)
        out[n++] = (struct rule){R_REPLIES, -1, "replies"};
    out[n++] = (struct rule){R_NDP, -1, "ndp"};
    out[n++] = (struct rule){R_SET_ACCEPT, S_ALWAYS4, "always4"};
    out[n++] = (struct rule){R_SET_ACCEPT, S_ALWAYS6, "always6"};
    out[n++] = (struct rule){R_SET_ACCEPT, S_ALLOW4, "allow4"};
    out[n++] = (struct rule){R_SET_ACCEPT, S_ALLOW6, "allow6"};
    out[n++] = (struct rule){R_SET_REJECT_TCP, S_DENY4, "deny4-tcp"};
    out[n++] = (struct rule){R_SET_REJECT, S_DENY4, "deny4"};
    out[n++] = (struct rule){R_SET_REJECT_TCP, S_DENY6, "deny6-tcp"};
    out[n++] = (struct rule){R_SET_REJECT, S_DENY6, "deny6"};
    if (allow_public) {
        out[n++] = (struct rule){R_PUBLIC_ACCEPT, -1, "public"};
    } else {
        out[n++] = (struct rule){R_PUBLIC_REJECT_TCP, -1, "public-tcp"};
        out[n++] = (struct rule){R_PUBLIC_REJECT, -1, "public"};
    }
    return n;
}

static void build_rule(struct nlbuf *b, const struct rule *r, const struct nft_policy *p)
{
    begin(b, NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND);
    nl_attr_str(b, NFTA_RULE_TABLE, NFT_TABLE);
    nl_attr_str(b, NFTA_RULE_CHAIN, NFT_CHAIN);
    size_t list = nl_nest_begin(b, NFTA_RULE_EXPRESSIONS);
    switch (r->kind) {
    case R_LOCAL_JUMP:
        /* Without the services cgroup every socket is matched but
         * hearth's own probes (marked): failing closed costs the host's
         * exec sessions and the platform's local clients the listed
         * ports, not a service's readiness check of one. */
        if (p->cgroup) {
            e_cgroup_is(b, p->svc_level, p->svc_cgid, NFT_CMP_EQ);
        } else if (p->own_mark) {
            e_meta(b, NFT_META_MARK);
            e_cmp(b, NFT_CMP_NEQ, &p->own_mark, sizeof(p->own_mark));
        }
        e_counter(b);
        e_verdict(b, NFT_JUMP, NFT_LOCAL_CHAIN);
        nl_nest_end(b, list);
        put_userdata_name(b, r->name);
        nl_msg_end(b);
        return;
    case R_UNSTAMP:
        /* Only the replies rule below may leave the bit on a packet: a
         * service's own mark (SO_MARK, with NET_RAW or NET_ADMIN) loses
         * it here. No counter: it sees every packet. */
        e_mark_stamp(b, false);
        nl_nest_end(b, list);
        put_userdata_name(b, r->name);
        nl_msg_end(b);
        return;
    case R_LOOPBACK: {
        char lo[16] = "lo";
        e_meta(b, NFT_META_OIFNAME);
        e_cmp(b, NFT_CMP_EQ, lo, sizeof(lo));
        break;
    }
    case R_ESTABLISHED:
        /* With the replies rule, only what this machine's own
         * connections send on: a reply goes out only for a connection
         * that came in through an interface (below). */
        if (p->replies)
            e_ct_direction(b, 0);
        e_ct_state(b, CT_EST_REL);
        break;
    case R_REPLIES:
        /* The answers of a connection opened from outside: a peer the
         * allowlist forbids may still connect in (the platform's proxy,
         * podman's gateway), and gets its answers. The bit on the packet
         * tells the netdev chains, which have no conntrack. */
        e_ct_direction(b, 1);
        e_ct_state(b, CT_EST_REL);
        e_ct_inbound(b);
        e_mark_stamp(b, true);
        break;
    case R_NDP:
        e_ndp(b);
        break;
    case R_SET_ACCEPT:
    case R_SET_REJECT:
        e_daddr_in(b, r->set);
        break;
    case R_SET_REJECT_TCP:
        e_daddr_in(b, r->set);
        e_l4proto_tcp(b);
        break;
    case R_PUBLIC_REJECT_TCP:
        e_l4proto_tcp(b);
        break;
    case R_PUBLIC_ACCEPT:
    case R_PUBLIC_REJECT:
        break;
    }
    e_counter(b);
    if (r->kind == R_LOOPBACK || r->kind == R_ESTABLISHED || r->kind == R_REPLIES || r->kind == R_NDP ||
        r->kind == R_SET_ACCEPT || r->kind == R_PUBLIC_ACCEPT)
        e_accept(b);
    else
        e_reject(b, r->kind == R_SET_REJECT_TCP || r->kind == R_PUBLIC_REJECT_TCP);
    nl_nest_end(b, list);
    put_userdata_name(b, r->name);
    nl_msg_end(b);
}

/* ---- the netdev egress chains ----
 * They see every frame an interface sends, packet sockets' included, so
 * everything is read from the frame itself: the Ethernet type at byte 12
 * and the addresses behind a 14-byte header. skb->protocol and the
 * network header offset come from the sender of a raw frame and could
 * lie. There is no conntrack at this hook (the kernel refuses ct
 * expressions in the netdev family): nothing is "established", and the
 * answers to connections from outside are known by what the output
 * chain left on them (e_stamped). */

#define ETH_TYPE_OFF 12
#define ETH_HLEN_ 14

enum nd_kind { ND_ETHERTYPE_DROP, ND_REPLIES, ND_NDP, ND_SET_ACCEPT, ND_SET_DROP,
               ND_PUBLIC_ACCEPT, ND_PUBLIC_DROP };

struct nd_rule {
    enum nd_kind kind;
    int set;                  /* or the ether type: dropped (ETHERTYPE_DROP), the only
                               * one let through (PUBLIC_DROP) */
    const char *name;
};

static size_t nd_rule_list(bool allow_public, bool replies, struct nd_rule out[16])
{
    size_t n = 0;
    /* VLAN-tagged frames carry their IP header elsewhere; hearth
     * configures no VLANs (offloaded tags of a VLAN device are not in the
     * frame and pass as plain IP). */
    out[n++] = (struct nd_rule){ND_ETHERTYPE_DROP, 0x8100, "vlan"};
    out[n++] = (struct nd_rule){ND_ETHERTYPE_DROP, 0x88a8, "qinq"};
    /* What the inet chain accepted as the answer of a connection from
     * outside: judged there, with conntrack, which this hook lacks. */
    if (replies)
        out[n++] = (struct nd_rule){ND_REPLIES, -1, "replies"};
    out[n++] = (struct nd_rule){ND_NDP, -1, "ndp"};
    out[n++] = (struct nd_rule){ND_SET_ACCEPT, S_ALWAYS4, "always4"};
    out[n++] = (struct nd_rule){ND_SET_ACCEPT, S_ALWAYS6, "always6"};
    out[n++] = (struct nd_rule){ND_SET_ACCEPT, S_ALLOW4, "allow4"};
    out[n++] = (struct nd_rule){ND_SET_ACCEPT, S_ALLOW6, "allow6"};
    out[n++] = (struct nd_rule){ND_SET_DROP, S_DENY4, "deny4"};
    out[n++] = (struct nd_rule){ND_SET_DROP, S_DENY6, "deny6"};
    if (allow_public) {
        out[n++] = (struct nd_rule){ND_PUBLIC_ACCEPT, -1, "public"};
    } else {
        /* Everything but ARP: a packet socket can send any ether type
         * (PPPoE, MPLS, ...), and one that carries IP to a router would
         * otherwise pass a closed policy. */
        out[n++] = (struct nd_rule){ND_PUBLIC_DROP, 0x0806, "public"};
    }
    return n;
}

static void e_ethertype(struct nlbuf *b, uint16_t type)
{
    uint8_t v[2] = {(uint8_t)(type >> 8), (uint8_t)type};
    e_payload(b, NFT_PAYLOAD_LL_HEADER, ETH_TYPE_OFF, 2);
    e_cmp(b, NFT_CMP_EQ, v, 2);
}

static void build_nd_rule(struct nlbuf *b, const struct nd_rule *r)
{
    begin(b, NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND);
    nl_attr_str(b, NFTA_RULE_TABLE, NFT_TABLE);
    nl_attr_str(b, NFTA_RULE_CHAIN, NFT_ND_CHAIN);
    size_t list = nl_nest_begin(b, NFTA_RULE_EXPRESSIONS);
    bool v4 = r->set >= 0 && r->set % 2 == 0;
    switch (r->kind) {
    case ND_ETHERTYPE_DROP:
        e_ethertype(b, (uint16_t)r->set);
        break;
    case ND_REPLIES:
        e_stamped(b);
        break;
    case ND_PUBLIC_DROP: {
        uint8_t v[2] = {(uint8_t)(r->set >> 8), (uint8_t)r->set};
        e_payload(b, NFT_PAYLOAD_LL_HEADER, ETH_TYPE_OFF, 2);
        e_cmp(b, NFT_CMP_NEQ, v, 2);
        break;
    }
    case ND_NDP: {
        uint8_t icmp6 = 58, lo = 133, hi = 137;
        e_ethertype(b, 0x86dd);
        e_payload(b, NFT_PAYLOAD_LL_HEADER, ETH_HLEN_ + 6, 1);
        e_cmp(b, NFT_CMP_EQ, &icmp6, 1);
        e_payload(b, NFT_PAYLOAD_LL_HEADER, ETH_HLEN_ + 40, 1);
        e_cmp(b, NFT_CMP_GTE, &lo, 1);
        e_cmp(b, NFT_CMP_LTE, &hi, 1);
        break;
    }
    case ND_SET_ACCEPT:
    case ND_SET_DROP:
        e_ethertype(b, v4 ? 0x0800 : 0x86dd);
        e_payload(b, NFT_PAYLOAD_LL_HEADER, ETH_HLEN_ + (v4 ? 16 : 24), v4 ? 4 : 16);
        e_lookup(b, r->set);
        break;
    case ND_PUBLIC_ACCEPT:
        break;
    }
    e_counter(b);
    bool drop = r->kind == ND_ETHERTYPE_DROP || r->kind == ND_SET_DROP || r->kind == ND_PUBLIC_DROP;
    e_verdict(b, drop ? NF_DROP : NF_ACCEPT, NULL);
    nl_nest_end(b, list);
    put_userdata_name(b, r->name);
    nl_msg_end(b);
}

void nft_nd_chain_name(const char *ifname, char *out, size_t outlen)
{
    snprintf(out, outlen, "egress-%s", ifname);
}

/* A base chain on one interface's egress hook (kernel 5.16+) whose only
 * rule jumps to the shared policy chain. */
static void build_nd_base(struct nlbuf *b, const char *ifname)
{
    char name[32];
    nft_nd_chain_name(ifname, name, sizeof(name));
    begin(b, NFT_MSG_NEWCHAIN, NLM_F_CREATE);
    nl_attr_str(b, NFTA_CHAIN_TABLE, NFT_TABLE);
    nl_attr_str(b, NFTA_CHAIN_NAME, name);
    size_t h = nl_nest_begin(b, NFTA_CHAIN_HOOK);
    nl_attr_be32(b, NFTA_HOOK_HOOKNUM, NF_NETDEV_EGRESS);
    nl_attr_be32(b, NFTA_HOOK_PRIORITY, 0);
    nl_attr_str(b, NFTA_HOOK_DEV, ifname);
    nl_nest_end(b, h);
    nl_attr_be32(b, NFTA_CHAIN_POLICY, NF_ACCEPT);
    nl_attr_str(b, NFTA_CHAIN_TYPE, "filter");
    nl_msg_end(b);

    begin(b, NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND);
    nl_attr_str(b, NFTA_RULE_TABLE, NFT_TABLE);
    nl_attr_str(b, NFTA_RULE_CHAIN, name);
    size_t list = nl_nest_begin(b, NFTA_RULE_EXPRESSIONS);
    e_verdict(b, NFT_JUMP, NFT_ND_CHAIN);
    nl_nest_end(b, list);
    put_userdata_name(b, "jump");
    nl_msg_end(b);
}

/* ---- the local ports chain ---- */

static void local_rule_begin(struct nlbuf *b, size_t *list)
{
    begin(b, NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND);
    nl_attr_str(b, NFTA_RULE_TABLE, NFT_TABLE);
    nl_attr_str(b, NFTA_RULE_CHAIN, NFT_LOCAL_CHAIN);
    *list = nl_nest_begin(b, NFTA_RULE_EXPRESSIONS);
}

static void local_rule_end(struct nlbuf *b, size_t list, const char *name)
{
    nl_nest_end(b, list);
    put_userdata_name(b, name);
    nl_msg_end(b);
}

/* The chain's rule names into exp, in the order build_local writes them. */
static void local_names(const struct nft_policy *p, struct nft_expect *exp)
{
    size_t n = 0;
    exp->n_local = 0;
    if (p->n_lports == 0)
        return;
    if (p->cgroup && p->exec_cgid)
        snprintf(exp->local[n++], NFT_RULE_NAME_MAX, "exec");
    snprintf(exp->local[n++], NFT_RULE_NAME_MAX, "not-local");
    for (size_t i = 0; i < p->n_lports && i < NFT_MAX_LPORTS; i++)
        netaddr_format_port_range(&p->lports[i], exp->local[n++], NFT_RULE_NAME_MAX);
    exp->n_local = n;
}

/* A regular chain the output chain jumps to for the services' sockets:
 * exec sessions (the host's hands) and traffic that leaves the machine
 * return at once; a listed port on the machine itself is rejected. */
static void build_local(struct nlbuf *b, const struct nft_policy *p)
{
    size_t list;
    begin(b, NFT_MSG_NEWCHAIN, NLM_F_CREATE);
    nl_attr_str(b, NFTA_CHAIN_TABLE, NFT_TABLE);
    nl_attr_str(b, NFTA_CHAIN_NAME, NFT_LOCAL_CHAIN);
    nl_msg_end(b);

    if (p->cgroup && p->exec_cgid) {
        local_rule_begin(b, &list);
        e_cgroup_is(b, p->svc_level + 1, p->exec_cgid, NFT_CMP_EQ);
        e_counter(b);
        e_verdict(b, NFT_RETURN, NULL);
        local_rule_end(b, list, "exec");
    }
    local_rule_begin(b, &list);
    e_daddr_not_local(b);
    e_counter(b);
    e_verdict(b, NFT_RETURN, NULL);
    local_rule_end(b, list, "not-local");

    for (size_t i = 0; i < p->n_lports && i < NFT_MAX_LPORTS; i++) {
        const struct port_range *r = &p->lports[i];
        char name[NFT_RULE_NAME_MAX];
        uint8_t proto = r->proto;
        uint8_t lo[2] = {(uint8_t)(r->lo >> 8), (uint8_t)r->lo};
        uint8_t hi[2] = {(uint8_t)(r->hi >> 8), (uint8_t)r->hi};
        local_rule_begin(b, &list);
        e_meta(b, NFT_META_L4PROTO);
        e_cmp(b, NFT_CMP_EQ, &proto, 1);
        /* The destination port: bytes 2-3 of both headers, big-endian,
         * so cmp's byte order is the numbers' order. */
        e_payload(b, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2);
        if (r->lo == r->hi) {
            e_cmp(b, NFT_CMP_EQ, lo, 2);
        } else {
            e_cmp(b, NFT_CMP_GTE, lo, 2);
            e_cmp(b, NFT_CMP_LTE, hi, 2);
        }
        e_counter(b);
        size_t d, e = expr_begin(b, "reject", &d);
        bool tcp = proto == IPPROTO_TCP;
        nl_attr_be32(b, NFTA_REJECT_TYPE, tcp ? NFT_REJECT_TCP_RST : NFT_REJECT_ICMPX_UNREACH);
        nl_attr_u8(b, NFTA_REJECT_ICMP_CODE, tcp ? 0 : NFT_REJECT_ICMPX_PORT_UNREACH);
        expr_end(b, e, d);
        netaddr_format_port_range(r, name, sizeof(name));
        local_rule_end(b, list, name);
    }
}

/* ---- the inbound chain ----
 * Which connections came in from outside: the first packet of one that
 * arrives through an interface other than lo marks its conntrack entry
 * (ct mark |= NFT_REPLY_BIT), and only such a connection's answers pass
 * the replies rules. Not lo: with NET_RAW a service can write a packet
 * from any address into lo's receive path (a packet socket on lo), or
 * send one to the machine's own address from a forged source (a raw
 * socket), and so open a connection that looks as if a forbidden peer
 * had opened it. Prerouting, so forwarded packets pass here too: their
 * NFT_REPLY_BIT (set by whoever wrote them into lo or a link of the
 * machine's own) is cleared before they can reach the netdev chains. */
const char *const nft_inbound_rules[NFT_INBOUND_RULES] = {"unstamp", "connections"};

static void build_inbound(struct nlbuf *b)
{
    begin(b, NFT_MSG_NEWCHAIN, NLM_F_CREATE);
    nl_attr_str(b, NFTA_CHAIN_TABLE, NFT_TABLE);
    nl_attr_str(b, NFTA_CHAIN_NAME, NFT_IN_CHAIN);
    size_t h = nl_nest_begin(b, NFTA_CHAIN_HOOK);
    nl_attr_be32(b, NFTA_HOOK_HOOKNUM, NF_INET_PRE_ROUTING);
    nl_attr_be32(b, NFTA_HOOK_PRIORITY, 0);
    nl_nest_end(b, h);
    nl_attr_be32(b, NFTA_CHAIN_POLICY, NF_ACCEPT);
    nl_attr_str(b, NFTA_CHAIN_TYPE, "filter");
    nl_msg_end(b);

    for (int i = 0; i < NFT_INBOUND_RULES; i++) {
        begin(b, NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND);
        nl_attr_str(b, NFTA_RULE_TABLE, NFT_TABLE);
        nl_attr_str(b, NFTA_RULE_CHAIN, NFT_IN_CHAIN);
        size_t list = nl_nest_begin(b, NFTA_RULE_EXPRESSIONS);
        if (i == 0) {
            /* No counter: it sees every packet. */
            e_mark_stamp(b, false);
        } else {
            uint16_t lo = IFTYPE_LOOPBACK;   /* the kernel's u16, host order */
            e_meta(b, NFT_META_IIFTYPE);
            e_cmp(b, NFT_CMP_NEQ, &lo, sizeof(lo));
            e_ct_state(b, CT_NEW);
            e_ct_mark_inbound(b);
            e_counter(b);
        }
        nl_nest_end(b, list);
        put_userdata_name(b, nft_inbound_rules[i]);
        nl_msg_end(b);
    }
}

/* Create-if-missing (no flags: an existing table keeps its own), delete,
 * create: replaces whatever is there (or nothing) inside the one
 * transaction, as `nft -f` does. The new table is owned by the socket
 * that sends the batch when owner is set: from then on only that socket
 * can change or delete it, and the kernel removes it when the socket
 * closes. */
static void table_replace(struct nlbuf *b, bool owner)
{
    begin(b, NFT_MSG_NEWTABLE, NLM_F_CREATE);
    nl_attr_str(b, NFTA_TABLE_NAME, NFT_TABLE);
    nl_msg_end(b);
    begin(b, NFT_MSG_DELTABLE, 0);
    nl_attr_str(b, NFTA_TABLE_NAME, NFT_TABLE);
    nl_msg_end(b);
    begin(b, NFT_MSG_NEWTABLE, NLM_F_CREATE);
    nl_attr_str(b, NFTA_TABLE_NAME, NFT_TABLE);
    if (owner)
        nl_attr_be32(b, NFTA_TABLE_FLAGS, NFT_TABLE_F_OWNER);
    nl_msg_end(b);
}

static void free_ranges(struct set_ranges *sr)
{
    for (int i = 0; i < N_SETS; i++)
        free(sr->r[i]);
}

int nft_build(const struct nft_policy *p, struct nlbuf *b, struct nft_expect *exp)
{
    struct set_ranges sr = {0};
    const struct cidr *src[3] = {p->always, p->allow, p->deny};
    size_t cnt[3] = {p->n_always, p->n_allow, p->n_deny};

    memset(exp, 0, sizeof(*exp));
    exp->allow_public = p->allow_public;
    exp->owner = p->owner;
    exp->netdev = p->netdev;
    exp->outbound = p->outbound;
    exp->replies = p->outbound && p->replies;
    local_names(p, exp);
    for (int i = 0; i < N_SETS; i++) {
        sr.r[i] = ranges_of(src[i / 2], cnt[i / 2], i % 2 == 0 ? AF_INET : AF_INET6, &sr.n[i]);
        if (!sr.r[i]) {
            free_ranges(&sr);
            b->failed = true;
            return -1;
        }
    }
    nl_batch_begin(b, NFNL_SUBSYS_NFTABLES);
    cur_family = NFPROTO_INET_;
    table_replace(b, p->owner);

    begin(b, NFT_MSG_NEWCHAIN, NLM_F_CREATE);
    nl_attr_str(b, NFTA_CHAIN_TABLE, NFT_TABLE);
    nl_attr_str(b, NFTA_CHAIN_NAME, NFT_CHAIN);
    size_t h = nl_nest_begin(b, NFTA_CHAIN_HOOK);
    nl_attr_be32(b, NFTA_HOOK_HOOKNUM, NF_INET_LOCAL_OUT);
    nl_attr_be32(b, NFTA_HOOK_PRIORITY, 0);
    nl_nest_end(b, h);
    nl_attr_be32(b, NFTA_CHAIN_POLICY, NF_ACCEPT);
    nl_attr_str(b, NFTA_CHAIN_TYPE, "filter");
    nl_msg_end(b);

    for (int i = 0; i < N_SETS; i++)
        build_set(b, i, &sr, exp);
    /* Before the rule that jumps to it. */
    if (exp->n_local)
        build_local(b, p);
    if (exp->replies)
        build_inbound(b);

    struct rule rules[NFT_MAX_RULES];
    size_t nr = rule_list(exp, rules);
    for (size_t i = 0; i < nr; i++)
        build_rule(b, &rules[i], p);

    if (p->netdev) {
        /* The same policy below the IP stack, in the same transaction. */
        struct nft_expect nd;
        cur_family = NFPROTO_NETDEV_;
        table_replace(b, p->owner);
        for (int i = 0; i < N_SETS; i++)
            build_set(b, i, &sr, &nd);
        begin(b, NFT_MSG_NEWCHAIN, NLM_F_CREATE);
        nl_attr_str(b, NFTA_CHAIN_TABLE, NFT_TABLE);
        nl_attr_str(b, NFTA_CHAIN_NAME, NFT_ND_CHAIN);
        nl_msg_end(b);
        struct nd_rule ndr[16];
        size_t nn = nd_rule_list(p->allow_public, exp->replies, ndr);
        for (size_t i = 0; i < nn; i++)
            build_nd_rule(b, &ndr[i]);
        for (size_t i = 0; i < p->n_ifaces && i < NFT_MAX_IFACES; i++) {
            build_nd_base(b, p->ifaces[i]);
            snprintf(exp->ifaces[exp->n_ifaces++], NFT_IFNAMSIZ, "%s", p->ifaces[i]);
        }
        cur_family = NFPROTO_INET_;
    }
    nl_batch_end(b, NFNL_SUBSYS_NFTABLES);
    free_ranges(&sr);
    return b->failed ? -1 : 0;
}

/* Whether an attribute holds the string s (with its NUL, as written). */
static bool attr_is(const struct nlattr *a, const char *s)
{
    return a && nl_attr_len(a) == strlen(s) + 1 && memcmp(nl_attr_data(a), s, strlen(s) + 1) == 0;
}

/* A rule with an expression named name in its list. */
static bool rule_has_expr(const struct nlattr *list, const char *name)
{
    const void *p = nl_attr_data(list);
    size_t len = nl_attr_len(list);
    bool bad = false;
    for (const struct nlattr *el = nl_attr_next(p, len, NULL, &bad); el;
         el = nl_attr_next(p, len, el, &bad)) {
        const struct nlattr *ex[NFTA_EXPR_MAX + 1];
        if (nl_attr_parse(nl_attr_data(el), nl_attr_len(el), ex, NFTA_EXPR_MAX) == 0 &&
            attr_is(ex[NFTA_EXPR_NAME], name))
            return true;
    }
    return false;
}

/* The rule's name as put_userdata_name wrote it. */
static bool rule_named(const struct nlattr *ud, const char *name)
{
    size_t n = strlen(name) + 1;
    if (!ud || nl_attr_len(ud) != n + 2)
        return false;
    const uint8_t *u = nl_attr_data(ud);
    return u[0] == 0 && u[1] == n && memcmp(u + 2, name, n) == 0;
}

/* A rule of the replies: the inbound chain's, the output chain's two
 * and the netdev chain's one (what a kernel without ct mark or route
 * realms refuses). */
static bool replies_rule(const struct nlattr *const tb[])
{
    return attr_is(tb[NFTA_RULE_CHAIN], NFT_IN_CHAIN) || rule_named(tb[NFTA_RULE_USERDATA], "unstamp") ||
           rule_named(tb[NFTA_RULE_USERDATA], "replies");
}

enum nft_part nft_msg_part(const struct nlmsghdr *h)
{
    /* The batch markers are no part of the ruleset (the kernel names the
     * batch's begin when it could not take the batch at all). */
    if (h->nlmsg_len < NLMSG_LENGTH(sizeof(struct nfgenmsg)) ||
        h->nlmsg_type >> 8 != NFNL_SUBSYS_NFTABLES)
        return NFT_PART_UNKNOWN;
    const struct nfgenmsg *g = NLMSG_DATA(h);
    bool netdev = g->nfgen_family == NFPROTO_NETDEV_;
    switch (h->nlmsg_type) {
    case MSG(NFT_MSG_NEWTABLE):
    case MSG(NFT_MSG_DELTABLE):
        return netdev ? NFT_PART_NETDEV : NFT_PART_TABLE;
    case MSG(NFT_MSG_NEWCHAIN): {
        const struct nlattr *tb[NFTA_CHAIN_MAX + 1];
        if (netdev)
            return NFT_PART_NETDEV;
        if (nl_msg_attrs(h, sizeof(struct nfgenmsg), tb, NFTA_CHAIN_MAX) &&
            attr_is(tb[NFTA_CHAIN_NAME], NFT_LOCAL_CHAIN))
            return NFT_PART_LOCAL;
        if (nl_msg_attrs(h, sizeof(struct nfgenmsg), tb, NFTA_CHAIN_MAX) &&
            attr_is(tb[NFTA_CHAIN_NAME], NFT_IN_CHAIN))
            return NFT_PART_REPLIES;
        return NFT_PART_BASE;
    }
    case MSG(NFT_MSG_NEWRULE): {
        const struct nlattr *tb[NFTA_RULE_MAX + 1];
        if (!nl_msg_attrs(h, sizeof(struct nfgenmsg), tb, NFTA_RULE_MAX))
            return netdev ? NFT_PART_NETDEV : NFT_PART_UNKNOWN;
        /* Before the netdev family: the netdev chain's replies rule is
         * the replies' to go without, not the netdev layer's. */
        if (replies_rule(tb))
            return NFT_PART_REPLIES;
        if (netdev)
            return NFT_PART_NETDEV;
        if (tb[NFTA_RULE_EXPRESSIONS] && rule_has_expr(tb[NFTA_RULE_EXPRESSIONS], "socket"))
            return NFT_PART_CGROUP;
        if (attr_is(tb[NFTA_RULE_CHAIN], NFT_LOCAL_CHAIN) ||
            rule_named(tb[NFTA_RULE_USERDATA], "local-ports"))
            return NFT_PART_LOCAL;
        return NFT_PART_BASE;
    }
    default:
        return netdev ? NFT_PART_NETDEV : NFT_PART_BASE;
    }
}

enum nft_part nft_refused_part(const struct nlbuf *b)
{
    if (!b->refused || !b->data)
        return NFT_PART_UNKNOWN;
    for (size_t off = 0; off + sizeof(struct nlmsghdr) <= b->len;) {
        const struct nlmsghdr *h = (const struct nlmsghdr *)(b->data + off);
        if (h->nlmsg_len < sizeof(*h) || h->nlmsg_len > b->len - off)
            break;
        if (h->nlmsg_seq == b->refused_seq)
            return nft_msg_part(h);
        off += NLMSG_ALIGN(h->nlmsg_len);
    }
    return NFT_PART_UNKNOWN;
}

size_t nft_rule_names(bool netdev, const struct nft_expect *exp, const char *out[NFT_MAX_RULES])
{
    size_t n;
    if (netdev) {
        struct nd_rule r[16];
        n = nd_rule_list(exp->allow_public, exp->replies, r);
        for (size_t i = 0; i < n; i++)
            out[i] = r[i].name;
    } else {
        struct rule r[NFT_MAX_RULES];
        n = rule_list(exp, r);
        for (size_t i = 0; i < n; i++)
            out[i] = r[i].name;
    }
    return n;
}
