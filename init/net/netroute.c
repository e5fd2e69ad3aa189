#include "netroute.h"

#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <linux/if_addr.h>
#include <linux/neighbour.h>
#include <linux/rtnetlink.h>

#include "err.h"
#include "netlink.h"

static uint32_t next_seq(void)
{
    static uint32_t s = 0x6000000;
    return s += 0x1000;
}

static size_t alen(int fam)
{
    return fam == AF_INET ? 4 : 16;
}

/* Copies attribute a into out when it is an address of fam's length. */
static bool get_addr(const struct nlattr *a, int fam, uint8_t *out)
{
    if (!a || nl_attr_len(a) != alen(fam))
        return false;
    memcpy(out, nl_attr_data(a), alen(fam));
    return true;
}

/* ---- dumps ---- */

bool nr_link_read(const struct nlmsghdr *h, struct nr_link *l)
{
    const struct nlattr *tb[IFLA_MAX + 1];
    const struct ifinfomsg *ifi;
    if ((h->nlmsg_type != RTM_NEWLINK && h->nlmsg_type != RTM_DELLINK) ||
        !(ifi = nl_msg_attrs(h, sizeof(*ifi), tb, IFLA_MAX)))
        return false;
    memset(l, 0, sizeof(*l));
    l->index = ifi->ifi_index;
    l->flags = ifi->ifi_flags;
    l->type = ifi->ifi_type;
    l->mtu = tb[IFLA_MTU] && nl_attr_len(tb[IFLA_MTU]) >= 4 ? (int)nl_attr_get_u32(tb[IFLA_MTU]) : 0;
    if (tb[IFLA_ADDRESS] && nl_attr_len(tb[IFLA_ADDRESS]) == 6) {
        l->has_mac = true;
        memcpy(l->mac, nl_attr_data(tb[IFLA_ADDRESS]), 6);
    }
    if (tb[IFLA_IFNAME])
        snprintf(l->name, sizeof(l->name), "%.*s",
                 (int)strnlen(nl_attr_data(tb[IFLA_IFNAME]), nl_attr_len(tb[IFLA_IFNAME])),
                 (const char *)nl_attr_data(tb[IFLA_IFNAME]));
    return true;
}

struct each_link {
    nr_link_fn cb;
    void *arg;
};

static int each_link_cb(const struct nlmsghdr *h, void *arg)
{
    struct each_link *e = arg;
    struct nr_link l;
    if (h->nlmsg_type == RTM_NEWLINK && nr_link_read(h, &l))
        e->cb(&l, e->arg);
    return 0;
}

static void snap_link(const struct nr_link *l, void *arg)
{
    struct nr_snap *s = arg;
    if (s->n_links < NR_MAX_LINKS)
        s->links[s->n_links++] = *l;
}

static int addr_cb(const struct nlmsghdr *h, void *arg)
{
    struct nr_snap *s = arg;
    const struct nlattr *tb[IFA_MAX + 1];
    const struct ifaddrmsg *ifa;
    if (h->nlmsg_type != RTM_NEWADDR || !(ifa = nl_msg_attrs(h, sizeof(*ifa), tb, IFA_MAX)) ||
        s->n_addrs >= NR_MAX_ADDRS)
        return 0;
    struct nr_addr *a = &s->addrs[s->n_addrs];
    memset(a, 0, sizeof(*a));
    a->index = (int)ifa->ifa_index;
    a->fam = ifa->ifa_family;
    a->prefix = ifa->ifa_prefixlen;
    /* IFA_LOCAL is the address itself; on a point-to-point link
     * IFA_ADDRESS is the peer's. */
    if (get_addr(tb[IFA_LOCAL] ? tb[IFA_LOCAL] : tb[IFA_ADDRESS], a->fam, a->addr))
        s->n_addrs++;
    return 0;
}

static int route_cb(const struct nlmsghdr *h, void *arg)
{
    struct nr_snap *s = arg;
    const struct nlattr *tb[RTA_MAX + 1];
    const struct rtmsg *rt;
    if (h->nlmsg_type != RTM_NEWROUTE || !(rt = nl_msg_attrs(h, sizeof(*rt), tb, RTA_MAX)) ||
        s->n_routes >= NR_MAX_ROUTES || rt->rtm_type != RTN_UNICAST)
        return 0;
    uint32_t table = tb[RTA_TABLE] && nl_attr_len(tb[RTA_TABLE]) >= 4
                         ? nl_attr_get_u32(tb[RTA_TABLE]) : rt->rtm_table;
    if (table != RT_TABLE_MAIN)
        return 0;
    struct nr_route *r = &s->routes[s->n_routes];
    memset(r, 0, sizeof(*r));
    r->fam = rt->rtm_family;
    r->dst_len = rt->rtm_dst_len;
    if (r->dst_len && !get_addr(tb[RTA_DST], r->fam, r->dst))
        return 0;
    r->has_gw = get_addr(tb[RTA_GATEWAY], r->fam, r->gw);
    r->oif = tb[RTA_OIF] && nl_attr_len(tb[RTA_OIF]) >= 4 ? (int)nl_attr_get_u32(tb[RTA_OIF]) : 0;
    r->metric = tb[RTA_PRIORITY] && nl_attr_len(tb[RTA_PRIORITY]) >= 4
                    ? nl_attr_get_u32(tb[RTA_PRIORITY]) : 0;
    if (tb[RTA_METRICS]) {
        const struct nlattr *mx[RTAX_MAX + 1];
        if (nl_attr_parse(nl_attr_data(tb[RTA_METRICS]), nl_attr_len(tb[RTA_METRICS]), mx,
                          RTAX_MAX) == 0 && mx[RTAX_MTU] && nl_attr_len(mx[RTAX_MTU]) >= 4)
            r->mtu = (int)nl_attr_get_u32(mx[RTAX_MTU]);
    }
    s->n_routes++;
    return 0;
}

static int neigh_cb(const struct nlmsghdr *h, void *arg)
{
    struct nr_snap *s = arg;
    const struct nlattr *tb[NDA_MAX + 1];
    const struct ndmsg *nd;
    if (h->nlmsg_type != RTM_NEWNEIGH || !(nd = nl_msg_attrs(h, sizeof(*nd), tb, NDA_MAX)) ||
        s->n_neighs >= NR_MAX_NEIGHS)
        return 0;
    struct nr_neigh *n = &s->neighs[s->n_neighs];
    memset(n, 0, sizeof(*n));
    n->index = nd->ndm_ifindex;
    n->fam = nd->ndm_family;
    n->state = nd->ndm_state;
    if (!get_addr(tb[NDA_DST], n->fam, n->ip))
        return 0;
    if (tb[NDA_LLADDR] && nl_attr_len(tb[NDA_LLADDR]) == 6) {
        n->has_mac = true;
        memcpy(n->mac, nl_attr_data(tb[NDA_LLADDR]), 6);
    }
    s->n_neighs++;
    return 0;
}

/* One dump request: hdr is the family header (its family byte 0 asks
 * for every family). */
static int dump(int fd, uint16_t type, const void *hdr, size_t hl, nl_msg_cb cb, void *arg,
                struct err *err)
{
    struct nlbuf b;
    nl_init(&b, next_seq());
    nl_msg_begin(&b, type, NLM_F_DUMP);
    nl_put(&b, hdr, hl);
    nl_msg_end(&b);
    int rc = nl_dump(fd, &b, cb, arg, err);
    nl_free(&b);
    return rc < 0 ? -1 : 0;
}

int nr_each_link(int fd, nr_link_fn cb, void *arg, struct err *err)
{
    struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC};
    struct each_link e = {cb, arg};
    return dump(fd, RTM_GETLINK, &ifi, sizeof(ifi), each_link_cb, &e, err);
}

int nr_dump_links(int fd, struct nr_snap *s, struct err *err)
{
    s->n_links = 0;
    return nr_each_link(fd, snap_link, s, err);
}

int nr_dump_addrs(int fd, struct nr_snap *s, struct err *err)
{
    struct ifaddrmsg ifa = {.ifa_family = AF_UNSPEC};
    s->n_addrs = 0;
    return dump(fd, RTM_GETADDR, &ifa, sizeof(ifa), addr_cb, s, err);
}

int nr_dump_routes(int fd, struct nr_snap *s, struct err *err)
{
    struct rtmsg rt = {.rtm_family = AF_UNSPEC};
    s->n_routes = 0;
    return dump(fd, RTM_GETROUTE, &rt, sizeof(rt), route_cb, s, err);
}

int nr_dump_neighs(int fd, struct nr_snap *s, struct err *err)
{
    struct ndmsg nd = {.ndm_family = AF_UNSPEC};
    s->n_neighs = 0;
    return dump(fd, RTM_GETNEIGH, &nd, sizeof(nd), neigh_cb, s, err);
}

/* ---- lookups ---- */

const struct nr_link *nr_link_by_mac(const struct nr_snap *s, const uint8_t mac[6])
{
    for (size_t i = 0; i < s->n_links; i++)
        if (s->links[i].has_mac && memcmp(s->links[i].mac, mac, 6) == 0)
            return &s->links[i];
    return NULL;
}

const struct nr_link *nr_link_by_name(const struct nr_snap *s, const char *name)
{
    for (size_t i = 0; i < s->n_links; i++)
        if (strcmp(s->links[i].name, name) == 0)
            return &s->links[i];
    return NULL;
}

const struct nr_link *nr_link_by_index(const struct nr_snap *s, int index)
{
    for (size_t i = 0; i < s->n_links; i++)
        if (s->links[i].index == index)
            return &s->links[i];
    return NULL;
}

bool nr_has_addr(const struct nr_snap *s, int index, int fam, const uint8_t *addr, int prefix)
{
    for (size_t i = 0; i < s->n_addrs; i++) {
        const struct nr_addr *a = &s->addrs[i];
        if (a->index == index && a->fam == fam && a->prefix == prefix &&
            memcmp(a->addr, addr, alen(fam)) == 0)
            return true;
    }
    return false;
}

uint32_t nr_metric(int fam, uint32_t m)
{
    return fam == AF_INET6 && m == 0 ? 1024 : m;
}

bool nr_has_route(const struct nr_snap *s, const struct nr_route *want)
{
    uint32_t metric = nr_metric(want->fam, want->metric);
    for (size_t i = 0; i < s->n_routes; i++) {
        const struct nr_route *r = &s->routes[i];
        if (r->fam != want->fam || r->dst_len != want->dst_len || r->metric != metric ||
            (want->dst_len && memcmp(r->dst, want->dst, alen(r->fam)) != 0) ||
            (want->oif && r->oif != want->oif) || r->has_gw != want->has_gw ||
            (want->has_gw && memcmp(r->gw, want->gw, alen(r->fam)) != 0) ||
            (want->mtu && r->mtu != want->mtu))
            continue;
        return true;
    }
    return false;
}

bool nr_has_neigh(const struct nr_snap *s, int index, int fam, const uint8_t *ip,
                  const uint8_t mac[6])
{
    for (size_t i = 0; i < s->n_neighs; i++) {
        const struct nr_neigh *n = &s->neighs[i];
        if (n->index == index && n->fam == fam && memcmp(n->ip, ip, alen(fam)) == 0)
            return (n->state & NUD_PERMANENT) && n->has_mac && memcmp(n->mac, mac, 6) == 0;
    }
    return false;
}

/* ---- changes ---- */

static int transact(int fd, struct nlbuf *b, struct err *err)
{
    int rc = nl_transact(fd, b, err);
    nl_free(b);
    return rc < 0 ? rc : 0;
}

int nr_link_set(int fd, int index, const char *rename, int up, int mtu, struct err *err)
{
    struct nlbuf b;
    struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC, .ifi_index = index,
                            .ifi_change = up >= 0 ? IFF_UP : 0, .ifi_flags = up > 0 ? IFF_UP : 0};
    nl_init(&b, next_seq());
    nl_msg_begin(&b, RTM_NEWLINK, NLM_F_ACK);
    nl_put(&b, &ifi, sizeof(ifi));
    if (rename)
        nl_attr_str(&b, IFLA_IFNAME, rename);
    if (mtu > 0)
        nl_attr_u32(&b, IFLA_MTU, (uint32_t)mtu);
    nl_msg_end(&b);
    return transact(fd, &b, err);
}

int nr_addr_set(int fd, bool add, int index, int fam, const uint8_t *addr, int prefix, struct err *err)
{
    struct nlbuf b;
    struct ifaddrmsg ifa = {.ifa_family = (uint8_t)fam, .ifa_prefixlen = (uint8_t)prefix,
                            .ifa_index = (uint32_t)index};
    nl_init(&b, next_seq());
    nl_msg_begin(&b, add ? RTM_NEWADDR : RTM_DELADDR,
                 NLM_F_ACK | (add ? NLM_F_CREATE | NLM_F_REPLACE : 0));
    nl_put(&b, &ifa, sizeof(ifa));
    nl_attr(&b, IFA_LOCAL, addr, alen(fam));
    nl_attr(&b, IFA_ADDRESS, addr, alen(fam));
    /* The host assigned this address: no duplicate detection delay. */
    if (add && fam == AF_INET6)
        nl_attr_u32(&b, IFA_FLAGS, IFA_F_NODAD);
    nl_msg_end(&b);
    return transact(fd, &b, err);
}

int nr_route_set(int fd, bool add, const struct nr_route *r, struct err *err)
{
    struct nlbuf b;
    struct rtmsg rt = {.rtm_family = (uint8_t)r->fam, .rtm_dst_len = (uint8_t)r->dst_len,
                       .rtm_table = RT_TABLE_MAIN, .rtm_protocol = RTPROT_STATIC,
                       .rtm_scope = r->has_gw ? RT_SCOPE_UNIVERSE : RT_SCOPE_LINK,
                       .rtm_type = RTN_UNICAST};
    nl_init(&b, next_seq());
    nl_msg_begin(&b, add ? RTM_NEWROUTE : RTM_DELROUTE,
                 NLM_F_ACK | (add ? NLM_F_CREATE | NLM_F_REPLACE : 0));
    nl_put(&b, &rt, sizeof(rt));
    if (r->dst_len)
        nl_attr(&b, RTA_DST, r->dst, alen(r->fam));
    if (r->has_gw)
        nl_attr(&b, RTA_GATEWAY, r->gw, alen(r->fam));
    nl_attr_u32(&b, RTA_OIF, (uint32_t)r->oif);
    nl_attr_u32(&b, RTA_PRIORITY, nr_metric(r->fam, r->metric));
    if (add && r->mtu > 0) {
        size_t m = nl_nest_begin(&b, RTA_METRICS);
        nl_attr_u32(&b, RTAX_MTU, (uint32_t)r->mtu);
        nl_nest_end(&b, m);
    }
    nl_msg_end(&b);
    return transact(fd, &b, err);
}

int nr_neigh_set(int fd, bool add, int index, int fam, const uint8_t *ip, const uint8_t mac[6],
                 struct err *err)
{
    struct nlbuf b;
    struct ndmsg nd = {.ndm_family = (uint8_t)fam, .ndm_ifindex = index,
                       .ndm_state = NUD_PERMANENT};
    nl_init(&b, next_seq());
    nl_msg_begin(&b, add ? RTM_NEWNEIGH : RTM_DELNEIGH,
                 NLM_F_ACK | (add ? NLM_F_CREATE | NLM_F_REPLACE : 0));
    nl_put(&b, &nd, sizeof(nd));
    nl_attr(&b, NDA_DST, ip, alen(fam));
    if (add)
        nl_attr(&b, NDA_LLADDR, mac, 6);
    nl_msg_end(&b);
    return transact(fd, &b, err);
}
