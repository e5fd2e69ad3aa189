/* netroute: rtnetlink for the guest's interfaces. A snapshot of the
 * kernel's links, addresses, main-table routes and neighbour entries,
 * each read by one dump request (so checking every configured interface
 * costs three or four dumps, not a request per interface and item), and
 * the requests that change them: link up/down, name and MTU, an address,
 * a route (RTM_NEWROUTE with NLM_F_REPLACE), a permanent neighbour entry.
 * Every call takes the caller's NETLINK_ROUTE socket (nl_open), so one
 * check or repair pass opens one. Its prefix is the short nr_. */
#ifndef HEARTH_NETROUTE_H
#define HEARTH_NETROUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* What a snapshot keeps; beyond these an entry is not seen (a check then
 * reports it missing and sets it again, which the kernel takes as a
 * replacement: harmless). */
#define NR_MAX_LINKS 256
#define NR_MAX_ADDRS 512
#define NR_MAX_ROUTES 512
#define NR_MAX_NEIGHS 512

struct nr_link {
    int index, mtu;
    unsigned flags;             /* IFF_UP, IFF_LOWER_UP (carrier), ... */
    unsigned short type;        /* ARPHRD_ETHER, ARPHRD_LOOPBACK, ... */
    bool has_mac;
    uint8_t mac[6];
    char name[16];
};

struct nr_addr {
    int index, fam, prefix;
    uint8_t addr[16];
};

/* A unicast route of the main table (the form a route is also set in). */
struct nr_route {
    int fam, dst_len, oif, mtu;     /* mtu 0: none */
    uint8_t dst[16], gw[16];
    bool has_gw;
    uint32_t metric;
};

struct nr_neigh {
    int index, fam;
    uint16_t state;             /* NUD_* */
    bool has_mac;
    uint8_t ip[16], mac[6];
};

struct nr_snap {
    struct nr_link links[NR_MAX_LINKS];
    struct nr_addr addrs[NR_MAX_ADDRS];
    struct nr_route routes[NR_MAX_ROUTES];
    struct nr_neigh neighs[NR_MAX_NEIGHS];
    size_t n_links, n_addrs, n_routes, n_neighs;
};

struct nlmsghdr;

/* Reads one link message, a dump's or a notification's (RTM_NEWLINK or
 * RTM_DELLINK), into l; false for any other message or a short one. An
 * absent name reads as "". */
bool nr_link_read(const struct nlmsghdr *h, struct nr_link *l);

/* One link dump, with no bound on the count: cb sees each link in the
 * kernel's order (for a caller that keeps only some, and counts the
 * rest). Returns 0, or -1 with err. */
typedef void (*nr_link_fn)(const struct nr_link *l, void *arg);
int nr_each_link(int fd, nr_link_fn cb, void *arg, struct err *err);

/* Each dump replaces its part of s. Returns 0, or -1 with err. */
int nr_dump_links(int fd, struct nr_snap *s, struct err *err);
int nr_dump_addrs(int fd, struct nr_snap *s, struct err *err);
int nr_dump_routes(int fd, struct nr_snap *s, struct err *err);
int nr_dump_neighs(int fd, struct nr_snap *s, struct err *err);

const struct nr_link *nr_link_by_mac(const struct nr_snap *s, const uint8_t mac[6]);
const struct nr_link *nr_link_by_name(const struct nr_snap *s, const char *name);
const struct nr_link *nr_link_by_index(const struct nr_snap *s, int index);
bool nr_has_addr(const struct nr_snap *s, int index, int fam, const uint8_t *addr, int prefix);
/* A route equal to r in every field r sets (gw only when has_gw, mtu
 * only when non-zero). */
bool nr_has_route(const struct nr_snap *s, const struct nr_route *r);
/* A permanent entry for ip on index with this link address. */
bool nr_has_neigh(const struct nr_snap *s, int index, int fam, const uint8_t *ip,
                  const uint8_t mac[6]);
/* The effective metric the kernel gives a route set with metric m
 * (IPv6 turns 0 into 1024). */
uint32_t nr_metric(int fam, uint32_t m);

/* The changes return 0, or the negative errno with the kernel's reason
 * in err (a deletion of what is already gone is -ESRCH, -ENOENT,
 * -EADDRNOTAVAIL or -ENODEV). */
/* up: 1 up, 0 down, -1 leave as is; rename NULL and mtu 0 leave those. */
int nr_link_set(int fd, int index, const char *rename, int up, int mtu, struct err *err);
/* Adds (replacing an equal one; IPv6 without duplicate detection) or
 * deletes an address. */
int nr_addr_set(int fd, bool add, int index, int fam, const uint8_t *addr, int prefix, struct err *err);
/* Adds (NLM_F_REPLACE) or deletes a main-table route; without a gateway
 * it is a link-scope route. */
int nr_route_set(int fd, bool add, const struct nr_route *r, struct err *err);
/* Adds (NUD_PERMANENT, replacing) or deletes a neighbour entry. */
int nr_neigh_set(int fd, bool add, int index, int fam, const uint8_t *ip, const uint8_t mac[6],
                 struct err *err);

#endif
