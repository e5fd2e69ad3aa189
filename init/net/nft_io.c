/* nft_io: the ruleset's one owner socket. The transaction that applies
 * a batch nft.c built, and everything read back through the same socket:
 * verification against the expectation, the generation id, the rule
 * counters. nft.c stays socket-free, so the unit tests read the batch
 * it builds. */
#include "nft.h"
#include "err.h"
#include "nft_priv.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>

#include <cJSON.h>

static uint32_t seq_base(void)
{
    static uint32_t s = 1;
    s += 0x10000;
    return s;
}

/* The one socket every change goes through, open for hearth's life: the
 * tables it creates are owned by it. */
static int owner_fd = -1;

static int sock(struct err *err)
{
    if (owner_fd < 0)
        owner_fd = nl_open(NETLINK_NETFILTER, err);
    return owner_fd;
}

int nft_apply(const struct nft_policy *p, struct nft_expect *exp, enum nft_part *part, struct err *err)
{
    struct nlbuf b;
    struct nft_expect e;
    if (part)
        *part = NFT_PART_UNKNOWN;
    nl_init(&b, seq_base());
    if (nft_build(p, &b, &e) < 0) {
        err_set(err, "policy too large to encode");
        nl_free(&b);
        return -E2BIG;
    }
    int fd = sock(err);
    if (fd < 0) {
        nl_free(&b);
        return -EIO;
    }
    int rc = nl_transact(fd, &b, err);
    if (rc < 0 && part)
        *part = nft_refused_part(&b);
    nl_free(&b);
    if (rc < 0)
        return rc;
    *exp = e;
    return 0;
}

/* ---- read back ---- */

struct readback {
    char names[NFT_MAX_RULES][NFT_RULE_NAME_MAX];
    size_t n_rules;
    bool overflow;
    uint32_t n_elems;
    uint64_t digest;
    cJSON *counters;
};

static int rule_cb(const struct nlmsghdr *h, void *arg)
{
    struct readback *rb = arg;
    const struct nlattr *tb[NFTA_RULE_MAX + 1];
    if (!nl_msg_attrs(h, sizeof(struct nfgenmsg), tb, NFTA_RULE_MAX))
        return -EBADMSG;
    char name[32] = "?";
    if (tb[NFTA_RULE_USERDATA] && nl_attr_len(tb[NFTA_RULE_USERDATA]) >= 3) {
        const uint8_t *u = nl_attr_data(tb[NFTA_RULE_USERDATA]);
        size_t l = u[1] < nl_attr_len(tb[NFTA_RULE_USERDATA]) - 2 ? u[1]
                                                                   : nl_attr_len(tb[NFTA_RULE_USERDATA]) - 2;
        snprintf(name, sizeof(name), "%.*s", (int)strnlen((const char *)u + 2, l), u + 2);
    }
    if (rb->n_rules < NFT_MAX_RULES)
        snprintf(rb->names[rb->n_rules], sizeof(rb->names[0]), "%s", name);
    else
        rb->overflow = true;
    rb->n_rules++;
    if (!rb->counters || !tb[NFTA_RULE_EXPRESSIONS])
        return 0;
    const void *p = nl_attr_data(tb[NFTA_RULE_EXPRESSIONS]);
    size_t len = nl_attr_len(tb[NFTA_RULE_EXPRESSIONS]);
    bool bad = false;
    for (const struct nlattr *el = nl_attr_next(p, len, NULL, &bad); el;
         el = nl_attr_next(p, len, el, &bad)) {
        const struct nlattr *ex[NFTA_EXPR_MAX + 1];
        if (nl_attr_parse(nl_attr_data(el), nl_attr_len(el), ex, NFTA_EXPR_MAX) == 0 &&
            ex[NFTA_EXPR_NAME] && ex[NFTA_EXPR_DATA] &&
            strncmp(nl_attr_data(ex[NFTA_EXPR_NAME]), "counter", nl_attr_len(ex[NFTA_EXPR_NAME])) == 0) {
            const struct nlattr *ct[NFTA_COUNTER_MAX + 1];
            if (nl_attr_parse(nl_attr_data(ex[NFTA_EXPR_DATA]), nl_attr_len(ex[NFTA_EXPR_DATA]), ct,
                              NFTA_COUNTER_MAX) == 0 && ct[NFTA_COUNTER_PACKETS] && ct[NFTA_COUNTER_BYTES]) {
                cJSON *o = cJSON_CreateObject();
                cJSON_AddNumberToObject(o, "packets", (double)nl_attr_get_be64(ct[NFTA_COUNTER_PACKETS]));
                cJSON_AddNumberToObject(o, "bytes", (double)nl_attr_get_be64(ct[NFTA_COUNTER_BYTES]));
                cJSON_AddItemToObject(rb->counters, name, o);
            }
        }
    }
    return bad ? -EBADMSG : 0;
}

static int elem_cb(const struct nlmsghdr *h, void *arg)
{
    struct readback *rb = arg;
    const struct nlattr *tb[NFTA_SET_ELEM_LIST_MAX + 1];
    if (!nl_msg_attrs(h, sizeof(struct nfgenmsg), tb, NFTA_SET_ELEM_LIST_MAX))
        return -EBADMSG;
    if (!tb[NFTA_SET_ELEM_LIST_ELEMENTS])
        return 0;
    const void *p = nl_attr_data(tb[NFTA_SET_ELEM_LIST_ELEMENTS]);
    size_t len = nl_attr_len(tb[NFTA_SET_ELEM_LIST_ELEMENTS]);
    bool bad = false;
    for (const struct nlattr *el = nl_attr_next(p, len, NULL, &bad); el;
         el = nl_attr_next(p, len, el, &bad)) {
        const struct nlattr *e[NFTA_SET_ELEM_MAX + 1], *k[NFTA_DATA_MAX + 1];
        if (nl_attr_parse(nl_attr_data(el), nl_attr_len(el), e, NFTA_SET_ELEM_MAX) < 0 ||
            !e[NFTA_SET_ELEM_KEY] ||
            nl_attr_parse(nl_attr_data(e[NFTA_SET_ELEM_KEY]), nl_attr_len(e[NFTA_SET_ELEM_KEY]), k,
                          NFTA_DATA_MAX) < 0 || !k[NFTA_DATA_VALUE])
            return -EBADMSG;
        uint32_t flags = e[NFTA_SET_ELEM_FLAGS] ? nl_attr_get_be32(e[NFTA_SET_ELEM_FLAGS]) : 0;
        rb->n_elems++;
        rb->digest += nft_elem_digest(nl_attr_data(k[NFTA_DATA_VALUE]), nl_attr_len(k[NFTA_DATA_VALUE]),
                          flags & NFT_SET_ELEM_INTERVAL_END);
    }
    return bad ? -EBADMSG : 0;
}

static int dump_rules(int fd, uint8_t family, const char *chain, struct readback *rb, struct err *err)
{
    struct nlbuf b;
    nl_init(&b, seq_base());
    nl_msg_begin(&b, MSG(NFT_MSG_GETRULE), NLM_F_DUMP);
    nl_put_nfgen(&b, family, 0);
    nl_attr_str(&b, NFTA_RULE_TABLE, NFT_TABLE);
    nl_attr_str(&b, NFTA_RULE_CHAIN, chain);
    nl_msg_end(&b);
    int rc = nl_dump(fd, &b, rule_cb, rb, err);
    nl_free(&b);
    return rc;
}

/* Checks one chain's rule names in order: 0, 1 (differs or gone, err
 * says how) or -1. */
static int verify_chain(int fd, uint8_t family, const char *chain, const char *const *names,
                        size_t nr, struct err *err)
{
    struct readback rb = {0};
    const char *fam = family == NFPROTO_NETDEV_ ? "netdev" : "inet";
    int rc = dump_rules(fd, family, chain, &rb, err);
    if (rc == -ENOENT) {
        err_set(err, "table %s %s or its chain %s is gone", fam, NFT_TABLE, chain);
        return 1;
    }
    if (rc < 0)
        return -1;
    if (rb.n_rules != nr || rb.overflow) {
        err_set(err, "chain %s %s has %zu rules, expected %zu", fam, chain, rb.n_rules, nr);
        return 1;
    }
    for (size_t i = 0; i < nr; i++)
        if (strcmp(rb.names[i], names[i]) != 0) {
            err_set(err, "chain %s %s: rule %zu is %s, expected %s", fam, chain, i,
                    rb.names[i], names[i]);
            return 1;
        }
    return 0;
}

static int verify_sets(int fd, uint8_t family, const struct nft_expect *exp, struct err *err)
{
    const char *fam = family == NFPROTO_NETDEV_ ? "netdev" : "inet";
    for (int s = 0; s < N_SETS; s++) {
        struct readback eb = {0};
        struct nlbuf b;
        nl_init(&b, seq_base());
        nl_msg_begin(&b, MSG(NFT_MSG_GETSETELEM), NLM_F_DUMP);
        nl_put_nfgen(&b, family, 0);
        nl_attr_str(&b, NFTA_SET_ELEM_LIST_TABLE, NFT_TABLE);
        nl_attr_str(&b, NFTA_SET_ELEM_LIST_SET, nft_set_names[s]);
        nl_msg_end(&b);
        int rc = nl_dump(fd, &b, elem_cb, &eb, err);
        nl_free(&b);
        if (rc == -ENOENT) {
            err_set(err, "set %s %s is gone", fam, nft_set_names[s]);
            return 1;
        }
        if (rc < 0)
            return -1;
        if (eb.n_elems != exp->n_elems[s] || eb.digest != exp->digest[s]) {
            err_set(err, "set %s %s has %u elements (expected %u) or different contents",
                    fam, nft_set_names[s], eb.n_elems, exp->n_elems[s]);
            return 1;
        }
    }
    return 0;
}

int nft_verify(const struct nft_expect *exp, struct err *err)
{
    const char *names[NFT_MAX_RULES];
    size_t nr = nft_rule_names(false, exp, names);
    int fd = sock(err);
    if (fd < 0)
        return -1;
    int v = verify_chain(fd, NFPROTO_INET_, NFT_CHAIN, names, nr, err);
    if (v == 0)
        v = verify_sets(fd, NFPROTO_INET_, exp, err);
    if (v == 0 && exp->n_local) {
        const char *local[NFT_MAX_LPORTS + 2];
        for (size_t i = 0; i < exp->n_local; i++)
            local[i] = exp->local[i];
        v = verify_chain(fd, NFPROTO_INET_, NFT_LOCAL_CHAIN, local, exp->n_local, err);
    }
    if (v == 0 && exp->replies)
        v = verify_chain(fd, NFPROTO_INET_, NFT_IN_CHAIN, nft_inbound_rules, NFT_INBOUND_RULES, err);
    if (v != 0 || !exp->netdev)
        return v;
    nr = nft_rule_names(true, exp, names);
    v = verify_chain(fd, NFPROTO_NETDEV_, NFT_ND_CHAIN, names, nr, err);
    if (v == 0)
        v = verify_sets(fd, NFPROTO_NETDEV_, exp, err);
    static const char *const jump[] = {"jump"};
    for (size_t i = 0; v == 0 && i < exp->n_ifaces; i++) {
        char chain[32];
        nft_nd_chain_name(exp->ifaces[i], chain, sizeof(chain));
        v = verify_chain(fd, NFPROTO_NETDEV_, chain, jump, 1, err);
    }
    return v;
}

static int gen_cb(const struct nlmsghdr *h, void *arg)
{
    const struct nlattr *tb[NFTA_GEN_MAX + 1];
    if (!nl_msg_attrs(h, sizeof(struct nfgenmsg), tb, NFTA_GEN_MAX))
        return -EBADMSG;
    if (tb[NFTA_GEN_ID])
        *(uint32_t *)arg = nl_attr_get_be32(tb[NFTA_GEN_ID]);
    return 0;
}

int nft_genid(uint32_t *out, struct err *err)
{
    struct nlbuf b;
    int fd = sock(err);
    if (fd < 0)
        return -1;
    nl_init(&b, seq_base());
    nl_msg_begin(&b, MSG(NFT_MSG_GETGEN), NLM_F_ACK);
    nl_put_nfgen(&b, AF_UNSPEC, 0);
    nl_msg_end(&b);
    *out = 0;
    int rc = nl_dump(fd, &b, gen_cb, out, err);
    nl_free(&b);
    return rc < 0 ? -1 : 0;
}

/* One more chain's counters, under key, when it can be read. */
static void add_chain_counters(int fd, cJSON *to, uint8_t family, const char *chain,
                               const char *key, struct err *err)
{
    struct readback rb = {0};
    rb.counters = cJSON_CreateObject();
    if (rb.counters && dump_rules(fd, family, chain, &rb, err) == 0)
        cJSON_AddItemToObject(to, key, rb.counters);
    else
        cJSON_Delete(rb.counters);
}

cJSON *nft_counters_json(const struct nft_expect *exp, struct err *err)
{
    struct readback rb = {0};
    rb.counters = cJSON_CreateObject();
    if (!rb.counters) {
        err_set(err, "out of memory");
        return NULL;
    }
    int fd = sock(err);
    if (fd < 0) {
        cJSON_Delete(rb.counters);
        return NULL;
    }
    int rc = dump_rules(fd, NFPROTO_INET_, NFT_CHAIN, &rb, err);
    if (rc < 0) {
        cJSON_Delete(rb.counters);
        return NULL;
    }
    /* The frames the egress chains counted, under "netdev". */
    if (exp->netdev)
        add_chain_counters(fd, rb.counters, NFPROTO_NETDEV_, NFT_ND_CHAIN, "netdev", err);
    if (exp->n_local)
        add_chain_counters(fd, rb.counters, NFPROTO_INET_, NFT_LOCAL_CHAIN, NFT_LOCAL_CHAIN, err);
    if (exp->replies)
        add_chain_counters(fd, rb.counters, NFPROTO_INET_, NFT_IN_CHAIN, NFT_IN_CHAIN, err);
    return rb.counters;
}
