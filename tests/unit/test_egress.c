/* egress_apply_fallback: which layer the ruleset goes without when the
 * kernel refuses part of it. Two kinds of fake kernel: a script of
 * answers (an errno and the part of the ruleset refused), and one that
 * reads the real batch nft_build writes and refuses what an older or
 * smaller kernel lacks (an expression's module, the owner flag, the
 * netdev egress hook), naming the message as nl_transact does. */
#include <errno.h>
#include <string.h>

#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>

#include "cidr.h"
#include "egress.h"
#include "err.h"
#include "netaddr.h"
#include "netlink.h"
#include "nft.h"
#include "nft_priv.h"
#include "unit.h"

/* ---- a scripted kernel ---- */

struct answer {
    int rc;
    enum nft_part part;
};

/* What one try asked for. */
struct tried {
    bool netdev, owner, cgroup, outbound, replies;
    size_t n_lports, n_allow, n_ifaces;
};

static struct {
    const struct answer *answers;
    size_t n, at;
    struct tried tries[8];
} S;

static int scripted(const struct nft_policy *np, struct nft_expect *exp, enum nft_part *part,
                    struct err *err)
{
    struct answer a = S.at < S.n ? S.answers[S.at] : (struct answer){0, NFT_PART_UNKNOWN};
    if (S.at < 8)
        S.tries[S.at] = (struct tried){np->netdev, np->owner, np->cgroup, np->outbound,
                                       np->replies, np->n_lports, np->n_allow, np->n_ifaces};
    S.at++;
    memset(exp, 0, sizeof(*exp));
    *part = a.part;
    err_set(err, "answer %zu: %s", S.at, a.rc ? strerror(-a.rc) : "ok");
    return a.rc;
}

static void script(const struct answer *a, size_t n)
{
    memset(&S, 0, sizeof(S));
    S.answers = a;
    S.n = n;
}

static const char ifs[1][NFT_IFNAMSIZ] = {"eth0"};
static struct cidr allow[1];
static const struct port_range envd[2] = {{6, 49983, 49983}, {17, 5353, 5353}};

/* A policy with every layer: owner, netdev, the services cgroup, the
 * replies, and the allowlist beside two local ports. */
static struct nft_policy full(bool outbound)
{
    cidr_parse("10.0.2.100/32", false, &allow[0], NULL);
    return (struct nft_policy){.allow = allow, .n_allow = 1, .allow_public = false,
                               .owner = true, .netdev = outbound, .ifaces = ifs,
                               .n_ifaces = outbound ? 1 : 0, .outbound = outbound,
                               .replies = outbound,
                               .lports = envd, .n_lports = 2, .cgroup = true,
                               .svc_cgid = 1234, .exec_cgid = 1240, .svc_level = 2};
}

TEST(egress_fallback_accepted_at_once_drops_nothing)
{
    static const struct answer a[] = {{0, NFT_PART_UNKNOWN}};
    struct nft_policy np = full(true);
    struct nft_expect exp;
    struct egress_fallback fb;
    struct err why;
    script(a, 1);
    CHECK_EQ_INT(egress_apply_fallback(&np, &exp, scripted, &fb, &why), 0);
    CHECK_EQ_INT(fb.tries, 1);
    CHECK(!fb.netdev && !fb.owner && !fb.cgroup && !fb.lports);
    CHECK(np.netdev && np.owner && np.cgroup);
    CHECK_EQ_INT(np.n_lports, 2);
}

/* No socket cgroupv2 (before 5.13, or nft_socket missing): the ports
 * stay closed, to every process. */
TEST(egress_fallback_cgroup_refused_closes_the_ports_to_everyone)
{
    static const struct answer a[] = {{-ENOENT, NFT_PART_CGROUP}, {0, NFT_PART_UNKNOWN}};
    struct nft_policy np = full(true);
    struct nft_expect exp;
    struct egress_fallback fb;
    struct err why;
    script(a, 2);
    CHECK_EQ_INT(egress_apply_fallback(&np, &exp, scripted, &fb, &why), 0);
    CHECK_EQ_INT(fb.tries, 2);
    CHECK(fb.cgroup && !fb.lports && !fb.netdev && !fb.owner);
    CHECK_CONTAINS(fb.cgroup_error, "answer 1");
    CHECK(S.tries[0].cgroup && !S.tries[1].cgroup);
    /* Everything else as asked. */
    CHECK(S.tries[1].netdev && S.tries[1].owner && S.tries[1].outbound);
    CHECK_EQ_INT(S.tries[1].n_lports, 2);
    CHECK(!np.cgroup);
    CHECK_EQ_INT(np.n_lports, 2);
}

/* Neither the cgroup match nor the local chain: the allowlist is applied
 * without them, never lost. */
TEST(egress_fallback_local_ports_refused_keeps_the_allowlist)
{
    static const struct answer a[] = {
        {-ENOENT, NFT_PART_CGROUP}, {-ENOENT, NFT_PART_LOCAL}, {0, NFT_PART_UNKNOWN}};
    struct nft_policy np = full(true);
    struct nft_expect exp;
    struct egress_fallback fb;
    struct err why;
    script(a, 3);
    CHECK_EQ_INT(egress_apply_fallback(&np, &exp, scripted, &fb, &why), 0);
    CHECK_EQ_INT(fb.tries, 3);
    CHECK(fb.cgroup && fb.lports);
    CHECK_CONTAINS(fb.lports_error, "answer 2");
    CHECK_EQ_INT(S.tries[2].n_lports, 0);
    CHECK(S.tries[2].outbound && S.tries[2].netdev && S.tries[2].owner);
    CHECK_EQ_INT(S.tries[2].n_allow, 1);
    CHECK(np.outbound && !np.allow_public);
    CHECK_EQ_INT(np.n_lports, 0);
}

/* The local chain refused while the cgroup match was accepted (nft_fib
 * missing): straight to going without the local ports, in one step. */
TEST(egress_fallback_local_chain_refused_goes_without_it)
{
    static const struct answer a[] = {{-EOPNOTSUPP, NFT_PART_LOCAL}, {0, NFT_PART_UNKNOWN}};
    struct nft_policy np = full(true);
    struct nft_expect exp;
    struct egress_fallback fb;
    struct err why;
    script(a, 2);
    CHECK_EQ_INT(egress_apply_fallback(&np, &exp, scripted, &fb, &why), 0);
    CHECK_EQ_INT(fb.tries, 2);
    CHECK(fb.lports && !fb.cgroup && !fb.netdev && !fb.owner);
    CHECK(S.tries[1].cgroup && S.tries[1].netdev);
    CHECK_EQ_INT(S.tries[1].n_lports, 0);
}

/* Local ports without an outbound policy: once they go there is nothing
 * to apply, and the refusal is the answer. */
TEST(egress_fallback_local_ports_alone_refused_fails)
{
    static const struct answer a[] = {
        {-ENOENT, NFT_PART_CGROUP}, {-ENOENT, NFT_PART_LOCAL}, {0, NFT_PART_UNKNOWN}};
    struct nft_policy np = full(false);
    struct nft_expect exp;
    struct egress_fallback fb;
    struct err why;
    script(a, 3);
    CHECK_EQ_INT(egress_apply_fallback(&np, &exp, scripted, &fb, &why), -ENOENT);
    CHECK_EQ_INT(fb.tries, 2);
    CHECK(fb.cgroup && fb.lports);
    CHECK_CONTAINS(why.msg, "answer 2");
}

/* Permission is never a reason to weaken: not the cgroup match, not the
 * netdev chains. */
TEST(egress_fallback_eperm_is_final)
{
    static const struct answer a[] = {{-EPERM, NFT_PART_CGROUP}, {0, NFT_PART_UNKNOWN}};
    static const struct answer b[] = {{-EPERM, NFT_PART_UNKNOWN}, {0, NFT_PART_UNKNOWN}};
    struct nft_policy np = full(true);
    struct nft_expect exp;
    struct egress_fallback fb;
    struct err why;
    script(a, 2);
    CHECK_EQ_INT(egress_apply_fallback(&np, &exp, scripted, &fb, &why), -EPERM);
    CHECK_EQ_INT(fb.tries, 1);
    CHECK(np.cgroup && np.netdev && np.owner);
    CHECK_EQ_INT(np.n_lports, 2);
    script(b, 2);
    CHECK_EQ_INT(egress_apply_fallback(&np, &exp, scripted, &fb, &why), -EPERM);
    CHECK_EQ_INT(fb.tries, 1);
    CHECK(np.netdev);
}

/* A refusal of the policy itself (its sets or rules) is final too. */
TEST(egress_fallback_base_refusal_is_final)
{
    static const struct answer a[] = {{-EINVAL, NFT_PART_BASE}, {0, NFT_PART_UNKNOWN}};
    struct nft_policy np = full(true);
    struct nft_expect exp;
    struct egress_fallback fb;
    struct err why;
    script(a, 2);
    CHECK_EQ_INT(egress_apply_fallback(&np, &exp, scripted, &fb, &why), -EINVAL);
    CHECK_EQ_INT(fb.tries, 1);
    CHECK(np.cgroup && np.netdev && np.owner);
    CHECK_EQ_INT(np.n_lports, 2);
}

/* The owner flag goes for EOPNOTSUPP or EINVAL on the table, nothing
 * else; the netdev chains for any refusal of theirs. */
TEST(egress_fallback_owner_and_netdev_only_for_their_own_refusals)
{
    static const struct answer a[] = {{-EOPNOTSUPP, NFT_PART_TABLE},
                                      {-EOPNOTSUPP, NFT_PART_NETDEV},
                                      {0, NFT_PART_UNKNOWN}};
    static const struct answer b[] = {{-ENOENT, NFT_PART_TABLE}, {0, NFT_PART_UNKNOWN}};
    struct nft_policy np = full(true);
    struct nft_expect exp;
    struct egress_fallback fb;
    struct err why;
    script(a, 3);
    CHECK_EQ_INT(egress_apply_fallback(&np, &exp, scripted, &fb, &why), 0);
    CHECK_EQ_INT(fb.tries, 3);
    CHECK(fb.owner && fb.netdev && !fb.cgroup && !fb.lports);
    CHECK(!S.tries[1].owner && S.tries[1].netdev);
    CHECK(!S.tries[2].netdev);
    CHECK_EQ_INT(S.tries[2].n_ifaces, 0);
    CHECK_CONTAINS(fb.netdev_error, "answer 2");
    CHECK(np.cgroup);
    CHECK_EQ_INT(np.n_lports, 2);
    np = full(true);
    script(b, 2);
    CHECK_EQ_INT(egress_apply_fallback(&np, &exp, scripted, &fb, &why), -ENOENT);
    CHECK(np.owner && !fb.owner);
}

/* The replies refused (a kernel without ct mark or route realms): the
 * policy goes without them and keeps every other layer; answers to a
 * forbidden peer then obey the allowlist, as before there were any. */
TEST(egress_fallback_replies_refused_keeps_everything_else)
{
    static const struct answer a[] = {{-EOPNOTSUPP, NFT_PART_REPLIES}, {0, NFT_PART_UNKNOWN}};
    static const struct answer b[] = {{-EPERM, NFT_PART_REPLIES}, {0, NFT_PART_UNKNOWN}};
    struct nft_policy np = full(true);
    struct nft_expect exp;
    struct egress_fallback fb;
    struct err why;
    script(a, 2);
    CHECK_EQ_INT(egress_apply_fallback(&np, &exp, scripted, &fb, &why), 0);
    CHECK_EQ_INT(fb.tries, 2);
    CHECK(fb.replies && !fb.netdev && !fb.owner && !fb.cgroup && !fb.lports);
    CHECK_CONTAINS(fb.replies_error, "answer 1");
    CHECK(S.tries[0].replies && !S.tries[1].replies);
    CHECK(S.tries[1].netdev && S.tries[1].owner && S.tries[1].cgroup && S.tries[1].outbound);
    CHECK_EQ_INT(S.tries[1].n_lports, 2);
    /* Permission is final here too. */
    np = full(true);
    script(b, 2);
    CHECK_EQ_INT(egress_apply_fallback(&np, &exp, scripted, &fb, &why), -EPERM);
    CHECK(np.replies && !fb.replies);
}

/* A refusal no message is known for (the send or the read failed)
 * takes the first two steps only: never the local ports. */
TEST(egress_fallback_unknown_refusal_never_touches_the_local_ports)
{
    static const struct answer a[] = {{-EOPNOTSUPP, NFT_PART_UNKNOWN},
                                      {-EOPNOTSUPP, NFT_PART_UNKNOWN},
                                      {-EOPNOTSUPP, NFT_PART_UNKNOWN},
                                      {0, NFT_PART_UNKNOWN}};
    struct nft_policy np = full(true);
    struct nft_expect exp;
    struct egress_fallback fb;
    struct err why;
    script(a, 4);
    CHECK_EQ_INT(egress_apply_fallback(&np, &exp, scripted, &fb, &why), -EOPNOTSUPP);
    CHECK_EQ_INT(fb.tries, 3);
    CHECK(fb.netdev && fb.owner && !fb.cgroup && !fb.lports);
    CHECK(np.cgroup);
    CHECK_EQ_INT(np.n_lports, 2);
}

/* A kernel that goes on refusing the same part: each layer goes once,
 * then the ladder ends. */
TEST(egress_fallback_ends_when_the_same_part_is_refused_again)
{
    static const struct answer a[] = {{-ENOENT, NFT_PART_CGROUP}, {-ENOENT, NFT_PART_CGROUP},
                                      {-ENOENT, NFT_PART_CGROUP}, {0, NFT_PART_UNKNOWN}};
    struct nft_policy np = full(true);
    struct nft_expect exp;
    struct egress_fallback fb;
    struct err why;
    script(a, 4);
    CHECK_EQ_INT(egress_apply_fallback(&np, &exp, scripted, &fb, &why), -ENOENT);
    CHECK_EQ_INT(fb.tries, 2);
}

/* ---- a kernel that reads the batch ---- */

/* What the fake kernel lacks. */
static struct {
    bool no_socket, no_fib, no_owner, no_egress_hook;
    bool no_ct_mark, no_realm;      /* CONFIG_NF_CONNTRACK_MARK, CONFIG_IP_ROUTE_CLASSID */
    unsigned calls;
} K;

static bool has_expr(const struct nlattr *list, const char *name)
{
    const void *p = nl_attr_data(list);
    size_t len = nl_attr_len(list);
    bool bad = false;
    for (const struct nlattr *el = nl_attr_next(p, len, NULL, &bad); el;
         el = nl_attr_next(p, len, el, &bad)) {
        const struct nlattr *ex[NFTA_EXPR_MAX + 1];
        if (nl_attr_parse(nl_attr_data(el), nl_attr_len(el), ex, NFTA_EXPR_MAX) == 0 &&
            ex[NFTA_EXPR_NAME] && strcmp(nl_attr_data(ex[NFTA_EXPR_NAME]), name) == 0)
            return true;
    }
    return false;
}

/* An expression named name whose key attribute (NFTA_CT_KEY,
 * NFTA_META_KEY: both 2) is key. */
static bool has_keyed(const struct nlattr *list, const char *name, uint32_t key)
{
    const void *p = nl_attr_data(list);
    size_t len = nl_attr_len(list);
    bool bad = false;
    for (const struct nlattr *el = nl_attr_next(p, len, NULL, &bad); el;
         el = nl_attr_next(p, len, el, &bad)) {
        const struct nlattr *ex[NFTA_EXPR_MAX + 1], *d[NFTA_CT_MAX + 1];
        if (nl_attr_parse(nl_attr_data(el), nl_attr_len(el), ex, NFTA_EXPR_MAX) == 0 &&
            ex[NFTA_EXPR_NAME] && ex[NFTA_EXPR_DATA] && strcmp(nl_attr_data(ex[NFTA_EXPR_NAME]), name) == 0 &&
            nl_attr_parse(nl_attr_data(ex[NFTA_EXPR_DATA]), nl_attr_len(ex[NFTA_EXPR_DATA]), d,
                          NFTA_CT_MAX) == 0 && d[NFTA_CT_KEY] && nl_attr_get_be32(d[NFTA_CT_KEY]) == key)
            return true;
    }
    return false;
}

/* The errno this kernel answers message h with: 0 when accepted. */
static int refuses(const struct nlmsghdr *h)
{
    const struct nfgenmsg *g = NLMSG_DATA(h);
    int type = h->nlmsg_type & 0xff;
    const struct nlattr *tb[NFTA_RULE_MAX + 1];
    if (h->nlmsg_type == NFNL_MSG_BATCH_BEGIN || h->nlmsg_type == NFNL_MSG_BATCH_END)
        return 0;
    if (type == NFT_MSG_NEWTABLE) {
        const struct nlattr *t[NFTA_TABLE_MAX + 1];
        if (nl_msg_attrs(h, sizeof(*g), t, NFTA_TABLE_MAX) && t[NFTA_TABLE_FLAGS] && K.no_owner &&
            nl_attr_get_be32(t[NFTA_TABLE_FLAGS]) & NFT_TABLE_F_OWNER)
            return -EOPNOTSUPP;
    }
    if (type == NFT_MSG_NEWCHAIN && g->nfgen_family == 5 && K.no_egress_hook) {
        const struct nlattr *c[NFTA_CHAIN_MAX + 1];
        if (nl_msg_attrs(h, sizeof(*g), c, NFTA_CHAIN_MAX) && c[NFTA_CHAIN_HOOK])
            return -EOPNOTSUPP;
    }
    if (type == NFT_MSG_NEWRULE && nl_msg_attrs(h, sizeof(*g), tb, NFTA_RULE_MAX) &&
        tb[NFTA_RULE_EXPRESSIONS]) {
        /* An expression whose module is missing (kernel.modprobe empty:
         * nothing loads it on demand). */
        if ((K.no_socket && has_expr(tb[NFTA_RULE_EXPRESSIONS], "socket")) ||
            (K.no_fib && has_expr(tb[NFTA_RULE_EXPRESSIONS], "fib")))
            return -ENOENT;
        /* A key the kernel was built without. */
        if ((K.no_ct_mark && has_keyed(tb[NFTA_RULE_EXPRESSIONS], "ct", NFT_CT_MARK)) ||
            (K.no_realm && has_keyed(tb[NFTA_RULE_EXPRESSIONS], "meta", NFT_META_RTCLASSID)))
            return -EOPNOTSUPP;
    }
    return 0;
}

static int kernel(const struct nft_policy *np, struct nft_expect *exp, enum nft_part *part,
                  struct err *err)
{
    struct nlbuf b;
    struct nft_expect e;
    int rc = 0;
    K.calls++;
    nl_init(&b, 100 * K.calls);
    CHECK_EQ_INT(nft_build(np, &b, &e), 0);
    size_t left = b.len;
    for (struct nlmsghdr *h = (struct nlmsghdr *)b.data; NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
        int r = refuses(h);
        if (r && !rc) {
            /* As nl_transact leaves it: the first refused message. */
            rc = r;
            b.refused = true;
            b.refused_seq = h->nlmsg_seq;
        }
    }
    *part = nft_refused_part(&b);
    err_set(err, "%s", rc ? strerror(-rc) : "");
    nl_free(&b);
    if (rc == 0)
        *exp = e;
    return rc;
}

static void kernel_lacks(bool socket, bool fib, bool owner, bool egress_hook)
{
    K = (typeof(K)){socket, fib, owner, egress_hook, false, false, 0};
}

/* A kernel built without ct mark, or without route realms (the netdev
 * replies rule): either way the replies go, in both layers, and nothing
 * else does; the rules are those of a policy without them. */
TEST(egress_fallback_on_a_kernel_without_ct_mark_or_route_realms)
{
    for (int lacks = 0; lacks < 2; lacks++) {
        struct nft_policy np = full(true);
        struct nft_expect exp;
        struct egress_fallback fb;
        struct err why;
        kernel_lacks(false, false, false, false);
        K.no_ct_mark = lacks == 0;
        K.no_realm = lacks == 1;
        CHECK_EQ_INT(egress_apply_fallback(&np, &exp, kernel, &fb, &why), 0);
        CHECK_EQ_INT(fb.tries, 2);
        CHECK(fb.replies && !fb.netdev && !fb.owner && !fb.cgroup && !fb.lports);
        CHECK_STR(fb.replies_error, strerror(EOPNOTSUPP));
        CHECK(!exp.replies && exp.netdev && exp.owner && exp.outbound);
        CHECK_EQ_INT(exp.n_local, 4);
        const char *names[NFT_MAX_RULES];
        size_t n = nft_rule_names(false, &exp, names);
        CHECK_EQ_INT(n, 14);
        CHECK_STR(names[1], "loopback");
        CHECK_STR(names[2], "established");
        CHECK_STR(names[3], "ndp");
        n = nft_rule_names(true, &exp, names);
        CHECK_STR(names[2], "ndp");
    }
}

TEST(egress_fallback_on_a_kernel_without_nft_socket)
{
    struct nft_policy np = full(true);
    struct nft_expect exp;
    struct egress_fallback fb;
    struct err why;
    kernel_lacks(true, false, false, false);
    CHECK_EQ_INT(egress_apply_fallback(&np, &exp, kernel, &fb, &why), 0);
    CHECK_EQ_INT(fb.tries, 2);
    CHECK(fb.cgroup && !fb.lports && !fb.netdev && !fb.owner);
    CHECK_STR(fb.cgroup_error, strerror(ENOENT));
    /* The chain as applied: no exec rule (no cgroup to tell it by), the
     * fib check, both ports; the policy whole, owned, with netdev. */
    CHECK_EQ_INT(exp.n_local, 3);
    CHECK_STR(exp.local[0], "not-local");
    CHECK_STR(exp.local[1], "tcp:49983");
    CHECK_STR(exp.local[2], "udp:5353");
    CHECK(exp.outbound && exp.owner && exp.netdev);
    CHECK_EQ_INT(exp.n_elems[2], 2); /* allow4: the one address */
}

TEST(egress_fallback_on_a_kernel_without_nft_fib)
{
    struct nft_policy np = full(true);
    struct nft_expect exp;
    struct egress_fallback fb;
    struct err why;
    kernel_lacks(false, true, false, false);
    CHECK_EQ_INT(egress_apply_fallback(&np, &exp, kernel, &fb, &why), 0);
    CHECK_EQ_INT(fb.tries, 2);
    CHECK(fb.lports && !fb.cgroup);
    CHECK_EQ_INT(exp.n_local, 0);
    CHECK(exp.outbound && exp.owner && exp.netdev);
    CHECK_EQ_INT(exp.n_elems[2], 2);
}

TEST(egress_fallback_on_a_kernel_without_either)
{
    struct nft_policy np = full(true);
    struct nft_expect exp;
    struct egress_fallback fb;
    struct err why;
    kernel_lacks(true, true, false, false);
    CHECK_EQ_INT(egress_apply_fallback(&np, &exp, kernel, &fb, &why), 0);
    CHECK_EQ_INT(fb.tries, 3);
    CHECK(fb.cgroup && fb.lports && !fb.netdev && !fb.owner);
    CHECK_EQ_INT(exp.n_local, 0);
    CHECK(exp.outbound && exp.netdev);
    /* Local ports alone: nothing is left, the refusal is the answer. */
    np = full(false);
    kernel_lacks(true, true, false, false);
    CHECK_EQ_INT(egress_apply_fallback(&np, &exp, kernel, &fb, &why), -ENOENT);
    CHECK_EQ_INT(fb.tries, 2);
    CHECK(fb.lports);
}

/* A 5.10 kernel: no owner flag (5.12), no socket cgroupv2 (5.13), no
 * netdev egress hook (5.16). Each goes once, in the order the batch
 * meets them; the local ports stay closed, to every process. */
TEST(egress_fallback_on_an_old_kernel_goes_layer_by_layer)
{
    struct nft_policy np = full(true);
    struct nft_expect exp;
    struct egress_fallback fb;
    struct err why;
    kernel_lacks(true, false, true, true);
    CHECK_EQ_INT(egress_apply_fallback(&np, &exp, kernel, &fb, &why), 0);
    CHECK_EQ_INT(fb.tries, 4);
    CHECK(fb.owner && fb.cgroup && fb.netdev && !fb.lports);
    CHECK(!exp.owner && !exp.netdev && exp.outbound);
    CHECK_EQ_INT(exp.n_local, 3);
}

/* ---- which part a message is ---- */

/* Whether the batch's "local-ports" rule reads `meta mark != mark`. */
static bool jump_skips_mark(const struct nlbuf *b, uint32_t mark)
{
    size_t left = b->len;
    for (const struct nlmsghdr *h = (const void *)b->data; NLMSG_OK(h, left);
         h = NLMSG_NEXT(h, left)) {
        const struct nlattr *tb[NFTA_RULE_MAX + 1];
        if ((h->nlmsg_type & 0xff) != NFT_MSG_NEWRULE ||
            !nl_msg_attrs(h, sizeof(struct nfgenmsg), tb, NFTA_RULE_MAX) || !tb[NFTA_RULE_USERDATA] ||
            strcmp((const char *)nl_attr_data(tb[NFTA_RULE_USERDATA]) + 2, "local-ports") != 0)
            continue;
        const void *p = nl_attr_data(tb[NFTA_RULE_EXPRESSIONS]);
        size_t len = nl_attr_len(tb[NFTA_RULE_EXPRESSIONS]);
        bool bad = false, meta_mark = false;
        for (const struct nlattr *el = nl_attr_next(p, len, NULL, &bad); el;
             el = nl_attr_next(p, len, el, &bad)) {
            const struct nlattr *ex[NFTA_EXPR_MAX + 1], *d[NFTA_CMP_MAX + 1];
            if (nl_attr_parse(nl_attr_data(el), nl_attr_len(el), ex, NFTA_EXPR_MAX) < 0 ||
                !ex[NFTA_EXPR_DATA])
                continue;
            const char *name = nl_attr_data(ex[NFTA_EXPR_NAME]);
            if (nl_attr_parse(nl_attr_data(ex[NFTA_EXPR_DATA]), nl_attr_len(ex[NFTA_EXPR_DATA]), d,
                              NFTA_CMP_MAX) < 0)
                continue;
            if (strcmp(name, "meta") == 0)
                meta_mark = d[NFTA_META_KEY] && nl_attr_get_be32(d[NFTA_META_KEY]) == NFT_META_MARK;
            if (strcmp(name, "cmp") == 0 && meta_mark && d[NFTA_CMP_OP] && d[NFTA_CMP_DATA] &&
                nl_attr_get_be32(d[NFTA_CMP_OP]) == NFT_CMP_NEQ) {
                const struct nlattr *v[NFTA_DATA_MAX + 1];
                if (nl_attr_parse(nl_attr_data(d[NFTA_CMP_DATA]), nl_attr_len(d[NFTA_CMP_DATA]), v,
                                  NFTA_DATA_MAX) == 0 && v[NFTA_DATA_VALUE] &&
                    nl_attr_len(v[NFTA_DATA_VALUE]) == 4 &&
                    memcmp(nl_attr_data(v[NFTA_DATA_VALUE]), &mark, 4) == 0)
                    return true;
            }
        }
    }
    return false;
}

TEST(nft_parts_of_a_batch)
{
    struct nft_policy np = full(true);
    struct nft_expect exp;
    struct nlbuf b;
    size_t count[8] = {0};
    nl_init(&b, 1);
    CHECK_EQ_INT(nft_build(&np, &b, &exp), 0);
    size_t left = b.len;
    uint32_t cgroup_seq = 0;
    for (struct nlmsghdr *h = (struct nlmsghdr *)b.data; NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
        if (h->nlmsg_type == NFNL_MSG_BATCH_BEGIN || h->nlmsg_type == NFNL_MSG_BATCH_END)
            continue;
        enum nft_part p = nft_msg_part(h);
        CHECK(p != NFT_PART_UNKNOWN);
        count[p]++;
        if (p == NFT_PART_CGROUP && !cgroup_seq)
            cgroup_seq = h->nlmsg_seq;
    }
    /* The two inet table messages and the recreation. */
    CHECK_EQ_INT(count[NFT_PART_TABLE], 3);
    /* The exec rule and the output chain's jump. */
    CHECK_EQ_INT(count[NFT_PART_CGROUP], 2);
    /* The chain, not-local, one rule per port. */
    CHECK_EQ_INT(count[NFT_PART_LOCAL], 4);
    CHECK(count[NFT_PART_NETDEV] > 3);
    CHECK(count[NFT_PART_BASE] > 10);
    /* The inbound chain and its two rules, the output chain's unstamp
     * and replies, and the netdev chain's replies (not the netdev
     * layer's to lose). */
    CHECK_EQ_INT(count[NFT_PART_REPLIES], 6);
    /* nft_refused_part finds the message by its number. */
    CHECK_EQ_INT(nft_refused_part(&b), NFT_PART_UNKNOWN);
    b.refused = true;
    b.refused_seq = cgroup_seq;
    CHECK_EQ_INT(nft_refused_part(&b), NFT_PART_CGROUP);
    b.refused_seq = 1;  /* the batch begin: not a part */
    CHECK_EQ_INT(nft_refused_part(&b), NFT_PART_UNKNOWN);
    b.refused_seq = 99999;
    CHECK_EQ_INT(nft_refused_part(&b), NFT_PART_UNKNOWN);
    nl_free(&b);

    /* Without the cgroup match the jump is the local ports' own, and
     * passes over hearth's own probes by their mark. */
    np.cgroup = false;
    np.own_mark = 0x48525448u;
    memset(count, 0, sizeof(count));
    nl_init(&b, 1);
    CHECK_EQ_INT(nft_build(&np, &b, &exp), 0);
    left = b.len;
    for (struct nlmsghdr *h = (struct nlmsghdr *)b.data; NLMSG_OK(h, left); h = NLMSG_NEXT(h, left))
        if (h->nlmsg_type != NFNL_MSG_BATCH_BEGIN && h->nlmsg_type != NFNL_MSG_BATCH_END)
            count[nft_msg_part(h)]++;
    CHECK_EQ_INT(count[NFT_PART_CGROUP], 0);
    CHECK_EQ_INT(count[NFT_PART_LOCAL], 5);
    CHECK_EQ_INT(count[NFT_PART_REPLIES], 6);
    CHECK(jump_skips_mark(&b, 0x48525448u));
    nl_free(&b);
    np.own_mark = 0;
    nl_init(&b, 1);
    CHECK_EQ_INT(nft_build(&np, &b, &exp), 0);
    CHECK(!jump_skips_mark(&b, 0x48525448u));
    nl_free(&b);
}

/* Where the replies sit: after loopback and the machine's own
 * established connections, before everything that reads an address; in
 * the netdev chain before the sets too. Without an outbound policy there
 * are none, whatever the flag says. */
TEST(nft_replies_rules_in_order)
{
    struct nft_policy np = full(true);
    struct nft_expect exp;
    struct nlbuf b;
    const char *names[NFT_MAX_RULES];
    nl_init(&b, 1);
    CHECK_EQ_INT(nft_build(&np, &b, &exp), 0);
    nl_free(&b);
    CHECK(exp.replies);
    size_t n = nft_rule_names(false, &exp, names);
    CHECK_EQ_INT(n, 16);
    static const char *const want[] = {"local-ports", "unstamp", "loopback", "established",
                                       "replies", "ndp", "always4"};
    for (size_t i = 0; i < 7; i++)
        CHECK_STR(names[i], want[i]);
    n = nft_rule_names(true, &exp, names);
    CHECK_EQ_INT(n, 11);
    CHECK_STR(names[1], "qinq");
    CHECK_STR(names[2], "replies");
    CHECK_STR(names[3], "ndp");
    CHECK_STR(nft_inbound_rules[0], "unstamp");
    CHECK_STR(nft_inbound_rules[1], "connections");
    np = full(false);
    np.replies = true;
    nl_init(&b, 1);
    CHECK_EQ_INT(nft_build(&np, &b, &exp), 0);
    size_t left = b.len, replies = 0;
    for (struct nlmsghdr *h = (struct nlmsghdr *)b.data; NLMSG_OK(h, left); h = NLMSG_NEXT(h, left))
        if (h->nlmsg_type != NFNL_MSG_BATCH_BEGIN && h->nlmsg_type != NFNL_MSG_BATCH_END &&
            nft_msg_part(h) == NFT_PART_REPLIES)
            replies++;
    nl_free(&b);
    CHECK(!exp.replies);
    CHECK_EQ_INT(replies, 0);
    CHECK_EQ_INT(nft_rule_names(false, &exp, names), 1);
}
