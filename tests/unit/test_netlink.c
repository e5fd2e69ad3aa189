/* netlink message building and parsing, against layouts recorded with
 * `nft --debug=mnl add table inet hearth`, and the nf_tables policy
 * builder's interval handling. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/rtnetlink.h>

#include "cidr.h"
#include "err.h"
#include "netlink.h"
#include "netroute.h"
#include "nft.h"
#include "unit.h"

TEST(netlink_batch_begin_layout)
{
    /* len 20, type 16, flags REQUEST, seq 7, port 0, nfgenmsg res_id 10. */
    static const uint8_t want[20] = {20, 0, 0, 0, 16, 0, 1, 0, 7, 0, 0, 0,
                                     0,  0, 0, 0, 0,  0, 0, 10};
    struct nlbuf b;
    nl_init(&b, 7);
    nl_batch_begin(&b, NFNL_SUBSYS_NFTABLES);
    CHECK_EQ_INT(b.len, 20);
    CHECK(b.len == 20 && memcmp(b.data, want, 20) == 0);
    CHECK_EQ_INT(b.n_msgs, 0); /* markers are never acked */
    nl_free(&b);
}

TEST(netlink_newtable_layout)
{
    static const uint8_t want[40] = {
        40, 0, 0, 0, 0x00, 0x0a, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, /* header: type 2560 */
        1, 0, 0, 0,                                             /* inet, v0, res 0 */
        11, 0, 1, 0, 'h', 'e', 'a', 'r', 't', 'h', 0, 0,        /* NFTA_TABLE_NAME */
        8, 0, 2, 0, 0, 0, 0, 0};                                /* NFTA_TABLE_FLAGS */
    struct nlbuf b;
    nl_init(&b, 1);
    nl_msg_begin(&b, (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWTABLE, 0);
    nl_put_nfgen(&b, 1, 0);
    nl_attr_str(&b, NFTA_TABLE_NAME, "hearth");
    nl_attr_be32(&b, NFTA_TABLE_FLAGS, 0);
    nl_msg_end(&b);
    CHECK_EQ_INT(b.len, 40);
    CHECK(b.len == 40 && memcmp(b.data, want, 40) == 0);
    CHECK_EQ_INT(b.n_msgs, 1);
    nl_free(&b);
}

TEST(netlink_nested_attributes)
{
    struct nlbuf b;
    nl_init(&b, 1);
    nl_msg_begin(&b, 1, 0);
    size_t outer = nl_nest_begin(&b, 3);
    nl_attr_u8(&b, 1, 0xab);            /* 5 bytes, padded to 8 */
    size_t inner = nl_nest_begin(&b, 2);
    nl_attr_be32(&b, 1, 0x01020304);
    nl_nest_end(&b, inner);
    nl_nest_end(&b, outer);
    nl_msg_end(&b);
    const struct nlattr *o = (const struct nlattr *)(b.data + NLMSG_HDRLEN);
    CHECK_EQ_INT(o->nla_type, 3 | NLA_F_NESTED);
    CHECK_EQ_INT(o->nla_len, 4 + 8 + 4 + 8);
    const struct nlattr *tb[4];
    CHECK_EQ_INT(nl_attr_parse(nl_attr_data(o), nl_attr_len(o), tb, 3), 0);
    CHECK(tb[1] && nl_attr_len(tb[1]) == 1 && *(const uint8_t *)nl_attr_data(tb[1]) == 0xab);
    CHECK(tb[2] != NULL);
    if (tb[2]) {
        const struct nlattr *in[2];
        CHECK_EQ_INT(nl_attr_parse(nl_attr_data(tb[2]), nl_attr_len(tb[2]), in, 1), 0);
        CHECK(in[1] && nl_attr_get_be32(in[1]) == 0x01020304);
    }
    CHECK_EQ_INT(((struct nlmsghdr *)b.data)->nlmsg_len, b.len);
    nl_free(&b);
}

/* One link message as the kernel sends it, in a dump or a notification. */
static void link_message(struct nlbuf *b, uint16_t type, const char *name)
{
    static const uint8_t mac[6] = {0x52, 0x54, 0, 0x12, 0x34, 0x56};
    struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC, .ifi_type = 1 /* ARPHRD_ETHER */,
                            .ifi_index = 3, .ifi_flags = 0x1 /* IFF_UP */};
    nl_init(b, 1);
    nl_msg_begin(b, type, 0);
    nl_put(b, &ifi, sizeof(ifi));
    if (name)
        nl_attr_str(b, IFLA_IFNAME, name);
    nl_attr_u32(b, IFLA_MTU, 1400);
    nl_attr(b, IFLA_ADDRESS, mac, sizeof(mac));
    nl_msg_end(b);
}

TEST(netroute_reads_link_messages_of_dumps_and_notifications)
{
    struct nlbuf b;
    struct nr_link l;
    link_message(&b, RTM_NEWLINK, "eth0");
    CHECK(!b.failed);
    CHECK(nr_link_read((const struct nlmsghdr *)b.data, &l));
    CHECK_EQ_INT(l.index, 3);
    CHECK_EQ_INT(l.type, 1);
    CHECK_EQ_INT(l.flags, 1);
    CHECK_EQ_INT(l.mtu, 1400);
    CHECK(l.has_mac && l.mac[0] == 0x52 && l.mac[5] == 0x56);
    CHECK_STR(l.name, "eth0");
    nl_free(&b);

    link_message(&b, RTM_DELLINK, NULL);
    CHECK(nr_link_read((const struct nlmsghdr *)b.data, &l));
    CHECK_STR(l.name, "");
    nl_free(&b);

    /* An address message is not a link, nor is a header cut short. */
    link_message(&b, RTM_NEWADDR, "eth0");
    CHECK(!nr_link_read((const struct nlmsghdr *)b.data, &l));
    nl_free(&b);
    link_message(&b, RTM_NEWLINK, "eth0");
    ((struct nlmsghdr *)b.data)->nlmsg_len = sizeof(struct nlmsghdr) + 4;
    CHECK(!nr_link_read((const struct nlmsghdr *)b.data, &l));
    nl_free(&b);
}

TEST(netlink_oversize_attribute_fails_the_buffer)
{
    struct nlbuf b;
    char *big = calloc(1, 70000);
    nl_init(&b, 1);
    nl_msg_begin(&b, 1, 0);
    nl_attr(&b, 1, big, 70000);
    CHECK(b.failed);
    nl_free(&b);
    /* A nest that outgrows 16 bits cannot be encoded either. */
    nl_init(&b, 1);
    nl_msg_begin(&b, 1, 0);
    size_t n = nl_nest_begin(&b, 1);
    for (int i = 0; i < 3; i++)
        nl_attr(&b, 2, big, 30000);
    nl_nest_end(&b, n);
    CHECK(b.failed);
    nl_free(&b);
    free(big);
}

TEST(netlink_attr_parse_rejects_bad_lengths)
{
    const struct nlattr *tb[3];
    uint8_t bad1[8] = {2, 0, 1, 0};           /* nla_len below the header */
    uint8_t bad2[8] = {12, 0, 1, 0};          /* longer than the buffer */
    uint8_t ok[8] = {8, 0, 9, 0, 1, 2, 3, 4}; /* unknown type: ignored */
    CHECK_EQ_INT(nl_attr_parse(bad1, sizeof(bad1), tb, 2), -1);
    CHECK_EQ_INT(nl_attr_parse(bad2, sizeof(bad2), tb, 2), -1);
    CHECK_EQ_INT(nl_attr_parse(ok, sizeof(ok), tb, 2), 0);
    CHECK(!tb[0] && !tb[1] && !tb[2]);
}

/* An NLMSG_ERROR as the kernel sends it with NETLINK_CAP_ACK and
 * NETLINK_EXT_ACK: capped echo of the header, then a MSG attribute. */
static size_t make_error(uint8_t *buf, int code, const char *text, bool tlvs)
{
    struct nlmsghdr *h = (struct nlmsghdr *)buf;
    struct nlmsgerr *e = NLMSG_DATA(h);
    size_t len = NLMSG_HDRLEN + sizeof(*e);
    memset(buf, 0, 256);
    h->nlmsg_type = NLMSG_ERROR;
    e->error = code;
    e->msg.nlmsg_len = 40;
    if (tlvs) {
        h->nlmsg_flags = NLM_F_CAPPED | NLM_F_ACK_TLVS;
        struct nlattr *a = (struct nlattr *)(buf + len);
        a->nla_type = NLMSGERR_ATTR_MSG;
        a->nla_len = (uint16_t)(NLA_HDRLEN + strlen(text) + 1);
        memcpy(buf + len + NLA_HDRLEN, text, strlen(text) + 1);
        len += NLA_ALIGN(a->nla_len);
    }
    h->nlmsg_len = (uint32_t)len;
    return len;
}

TEST(netlink_error_and_extended_ack)
{
    uint8_t buf[256];
    struct err msg;
    make_error(buf, 0, "", false);
    CHECK_EQ_INT(nl_parse_error((struct nlmsghdr *)buf, &msg), 0);
    make_error(buf, -ENOENT, "", false);
    CHECK_EQ_INT(nl_parse_error((struct nlmsghdr *)buf, &msg), -ENOENT);
    CHECK_STR(msg.msg, strerror(ENOENT));
    make_error(buf, -EINVAL, "Invalid interval", true);
    CHECK_EQ_INT(nl_parse_error((struct nlmsghdr *)buf, &msg), -EINVAL);
    CHECK_CONTAINS(msg.msg, "Invalid interval");
    /* Truncated: shorter than struct nlmsgerr. */
    ((struct nlmsghdr *)buf)->nlmsg_len = NLMSG_HDRLEN + 2;
    CHECK_EQ_INT(nl_parse_error((struct nlmsghdr *)buf, &msg), -EBADMSG);
    /* A positive "error" is not something the kernel sends. */
    make_error(buf, 5, "", false);
    CHECK_EQ_INT(nl_parse_error((struct nlmsghdr *)buf, &msg), -EBADMSG);
}

static struct nft_expect build(const char *const *allow, size_t n, bool *ok)
{
    struct cidr c[8];
    struct nft_expect exp;
    struct nlbuf b;
    for (size_t i = 0; i < n; i++)
        CHECK_EQ_INT(cidr_parse(allow[i], false, &c[i], NULL), 0);
    struct nft_policy p = {.allow = c, .n_allow = n, .allow_public = true};
    nl_init(&b, 1);
    *ok = nft_build(&p, &b, &exp) == 0;
    /* Every message in the batch parses as a netlink message. */
    size_t left = b.len, msgs = 0;
    for (struct nlmsghdr *h = (struct nlmsghdr *)b.data; NLMSG_OK(h, left); h = NLMSG_NEXT(h, left))
        msgs++;
    CHECK_EQ_INT(left, 0);
    CHECK_EQ_INT(msgs, b.n_msgs + 2);
    nl_free(&b);
    return exp;
}

enum { ALLOW4 = 2, ALLOW6 = 3 };

TEST(nft_intervals_merge_overlaps_and_neighbours)
{
    bool ok;
    static const char *const overlap[] = {"10.0.0.0/8", "10.1.0.0/16", "10.200.3.0/24"};
    struct nft_expect e = build(overlap, 3, &ok);
    CHECK(ok);
    CHECK_EQ_INT(e.n_elems[ALLOW4], 2);          /* one interval: start and end */
    static const char *const adjacent[] = {"10.21.0.0/16", "10.20.0.0/16", "10.30.0.0/16"};
    e = build(adjacent, 3, &ok);
    CHECK_EQ_INT(e.n_elems[ALLOW4], 4);          /* 10.20-10.21 and 10.30 */
    static const char *const all[] = {"0.0.0.0/0", "::/0"};
    e = build(all, 2, &ok);
    CHECK_EQ_INT(e.n_elems[ALLOW4], 1);          /* runs to the top: no end element */
    CHECK_EQ_INT(e.n_elems[ALLOW6], 1);
    static const char *const top[] = {"255.255.255.255", "2001:db8::1"};
    e = build(top, 2, &ok);
    CHECK_EQ_INT(e.n_elems[ALLOW4], 1);
    CHECK_EQ_INT(e.n_elems[ALLOW6], 2);
    CHECK(e.allow_public);
}

TEST(nft_digest_depends_on_contents_not_order)
{
    bool ok;
    static const char *const a[] = {"10.1.0.0/16", "10.3.0.0/16"};
    static const char *const b[] = {"10.3.0.0/16", "10.1.0.0/16"};
    static const char *const c[] = {"10.1.0.0/16", "10.4.0.0/16"};
    struct nft_expect ea = build(a, 2, &ok), eb = build(b, 2, &ok), ec = build(c, 2, &ok);
    CHECK(ea.digest[ALLOW4] == eb.digest[ALLOW4]);
    CHECK(ea.digest[ALLOW4] != ec.digest[ALLOW4]);
}

/* A long list in shuffled order: sorted and merged into the same
 * intervals as the two networks it covers. */
TEST(nft_intervals_of_a_long_shuffled_list)
{
    enum { N = 1000 };
    static struct cidr c[N];
    char text[32];
    size_t n = 0;
    for (int i = 0; i < 256; i++) { /* 10.0.0.0/16 in /24s */
        snprintf(text, sizeof(text), "10.0.%d.0/24", i);
        CHECK_EQ_INT(cidr_parse(text, false, &c[n++], NULL), 0);
    }
    while (n < N) { /* hosts inside 192.168.0.0/16, the /16 itself */
        snprintf(text, sizeof(text), n == 500 ? "192.168.0.0/16" : "192.168.%zu.%zu", n % 256, n / 7);
        CHECK_EQ_INT(cidr_parse(text, false, &c[n++], NULL), 0);
    }
    uint32_t x = 12345;
    for (size_t i = N - 1; i > 0; i--) {
        x = x * 1103515245u + 12345u;
        size_t j = (x >> 8) % (i + 1);
        struct cidr t = c[i];
        c[i] = c[j];
        c[j] = t;
    }
    struct nft_expect e, want;
    struct nlbuf b;
    struct nft_policy p = {.allow = c, .n_allow = N, .allow_public = true};
    nl_init(&b, 1);
    CHECK_EQ_INT(nft_build(&p, &b, &e), 0);
    nl_free(&b);
    struct cidr two[2];
    CHECK_EQ_INT(cidr_parse("192.168.0.0/16", false, &two[0], NULL), 0);
    CHECK_EQ_INT(cidr_parse("10.0.0.0/16", false, &two[1], NULL), 0);
    struct nft_policy q = {.allow = two, .n_allow = 2, .allow_public = true};
    nl_init(&b, 1);
    CHECK_EQ_INT(nft_build(&q, &b, &want), 0);
    nl_free(&b);
    CHECK_EQ_INT(e.n_elems[ALLOW4], 4); /* two intervals: start and end each */
    CHECK(e.digest[ALLOW4] == want.digest[ALLOW4]);
}

/* The replace batch with the netdev layer: both tables in one
 * transaction, each recreated with the owner flag, and one egress-hook
 * chain per interface naming its device. */
TEST(nft_batch_has_owned_tables_and_a_netdev_chain_per_interface)
{
    static const char ifs[2][NFT_IFNAMSIZ] = {"eth0", "eth1"};
    struct cidr c;
    struct nft_expect exp;
    struct nlbuf b;
    CHECK_EQ_INT(cidr_parse("10.0.0.0/8", false, &c, NULL), 0);
    struct nft_policy p = {.deny = &c, .n_deny = 1, .allow_public = true, .owner = true,
                           .netdev = true, .ifaces = ifs, .n_ifaces = 2};
    nl_init(&b, 1);
    CHECK_EQ_INT(nft_build(&p, &b, &exp), 0);
    CHECK(exp.owner && exp.netdev);
    CHECK_EQ_INT(exp.n_ifaces, 2);
    CHECK_STR(exp.ifaces[1], "eth1");
    size_t left = b.len, owned = 0, tables[6] = {0}, hooks = 0, batches = 0;
    for (struct nlmsghdr *h = (struct nlmsghdr *)b.data; NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
        if (h->nlmsg_type == NFNL_MSG_BATCH_BEGIN || h->nlmsg_type == NFNL_MSG_BATCH_END) {
            batches++;
            continue;
        }
        const struct nfgenmsg *g = NLMSG_DATA(h);
        const struct nlattr *tb[NFTA_CHAIN_MAX + 1];
        int type = h->nlmsg_type & 0xff;
        CHECK(nl_msg_attrs(h, sizeof(*g), tb, NFTA_CHAIN_MAX) != NULL);
        if (type == NFT_MSG_NEWTABLE && g->nfgen_family < 6)
            tables[g->nfgen_family]++;
        if (type == NFT_MSG_NEWTABLE && tb[NFTA_TABLE_FLAGS] &&
            nl_attr_get_be32(tb[NFTA_TABLE_FLAGS]) == NFT_TABLE_F_OWNER)
            owned++;
        if (type == NFT_MSG_NEWCHAIN && tb[NFTA_CHAIN_HOOK]) {
            const struct nlattr *hk[NFTA_HOOK_MAX + 1];
            CHECK_EQ_INT(nl_attr_parse(nl_attr_data(tb[NFTA_CHAIN_HOOK]),
                                       nl_attr_len(tb[NFTA_CHAIN_HOOK]), hk, NFTA_HOOK_MAX), 0);
            if (g->nfgen_family == 5) {
                CHECK(hk[NFTA_HOOK_DEV] != NULL);
                CHECK_EQ_INT(nl_attr_get_be32(hk[NFTA_HOOK_HOOKNUM]), 1); /* NF_NETDEV_EGRESS */
                hooks++;
            }
        }
    }
    CHECK_EQ_INT(batches, 2);           /* one transaction */
    CHECK_EQ_INT(tables[1], 2);         /* inet: create-if-missing, then recreate */
    CHECK_EQ_INT(tables[5], 2);         /* netdev: the same */
    CHECK_EQ_INT(owned, 2);             /* only the recreations carry the flag */
    CHECK_EQ_INT(hooks, 2);
    nl_free(&b);
}
