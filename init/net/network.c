#include "network.h"

#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/neighbour.h>
#include <linux/rtnetlink.h>

#include <ev.h>
#include <cJSON.h>

#include "config.h"
#include "err.h"
#include "gates.h"
#include "hearth.h"
#include "log.h"
#include "netaddr.h"
#include "netlink.h"
#include "netroute.h"
#include "resolvconf.h"

#define MAX_IFACES NETWORK_USED_IFACES
#define MAX_DNS NETWORK_USED_DNS
_Static_assert(MAX_DNS <= RESOLVCONF_MAX, "resolv.conf takes every server kept");
/* The gateways' default routes, then `routes`. */
#define MAX_ROUTES (MAX_IFACES + NETWORK_MAX_ROUTES)
/* Without a link-event socket (netlink refused it) the wait falls back
 * to looking this often. */
#define POLL_MS 50
/* glibc's net/if.h (unlike linux/if.h, which clashes with it) lacks it. */
#ifndef IFF_LOWER_UP
#define IFF_LOWER_UP 0x10000
#endif

enum if_state { IF_WAITING, IF_UP, IF_FAILED };
static const char *const state_names[] = {"waiting", "up", "failed"};

struct iface {
    struct net_iface_cfg c;
    int64_t deadline;
    enum if_state state;
    int ifindex;
    /* Not found by its MAC since this configuration came: a MAC just
     * handed over names the NIC to wait for, not the link that has the
     * name now (the old NIC, or whatever took its place). */
    bool mac_only;
    char error[200];
};

/* The counts and small fields apart from the arrays: an idle hearth with
 * no network section writes the former at boot, and each would dirty a
 * page of its own if it sat after an array of several kilobytes. */
static struct {
    size_t n;
    size_t n_routes, n_gw_routes;   /* the first n_gw_routes come from gateways */
    size_t n_neighs;
    size_t n_dns;
    char resolv[256];
    char resolv_error[200];
    ev_timer timer;             /* the next deadline, or the fallback poll */
    ev_io link_io;              /* RTMGRP_LINK: a link appeared or changed */
} N;
static struct {
    struct iface ifs[MAX_IFACES];
    struct net_route_cfg routes[MAX_ROUTES];
    struct net_neigh_cfg neighs[NETWORK_MAX_NEIGHS];
    char dns[MAX_DNS][64];
} NA;
/* Outside N: an initialised N would put all of it in the binary's data. */
static int link_fd = -1;
/* The kernel's view, read afresh by each pass (one dump of each kind). */
static struct nr_snap snap;

static size_t alen(int fam) { return fam == AF_INET ? 4 : 16; }

static void mac_text(const uint8_t *m, char out[24])
{
    snprintf(out, 24, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
}

/* Takes cfg as the configuration in force: interfaces waiting (each
 * with its deadline from now), the gateways' default routes ahead of the
 * stated routes, neighbours, name servers. */
static void load(const struct network_cfg *net)
{
    int64_t now = mono_ms();
    size_t n_ifs = net ? net->n_ifs : 0;

    N.n = N.n_routes = N.n_gw_routes = N.n_neighs = N.n_dns = 0;
    snprintf(N.resolv, sizeof(N.resolv), "%s",
             net && net->resolv[0] ? net->resolv : CONFIG_RESOLV_CONF);
    N.resolv_error[0] = 0;
    if (!net)
        return;
    if (net->n_ifs + net->n_dropped > MAX_IFACES)
        log_error("network: more than %d interfaces; the rest are ignored", MAX_IFACES);
    for (size_t i = 0; i < n_ifs && N.n < MAX_IFACES; i++) {
        struct iface *f = &NA.ifs[N.n++];
        memset(f, 0, sizeof(*f));
        f->c = net->ifs[i];
        f->deadline = now + f->c.timeout_ms;
        f->state = IF_WAITING;
        f->mac_only = f->c.has_mac;
        if (f->c.has_gw) {
            struct net_route_cfg *r = &NA.routes[N.n_routes++];
            memset(r, 0, sizeof(*r));
            r->fam = f->c.gw_fam;
            r->has_via = true;
            memcpy(r->via, f->c.gw, sizeof(r->via));
            memcpy(r->dev, f->c.name, sizeof(r->dev));
            snprintf(r->to_s, sizeof(r->to_s), "default");
            memcpy(r->via_s, f->c.gw_s, sizeof(r->via_s));
        }
    }
    N.n_gw_routes = N.n_routes;
    for (size_t i = 0; i < net->n_routes && N.n_routes < MAX_ROUTES; i++)
        NA.routes[N.n_routes++] = net->routes[i];
    for (size_t i = 0; i < net->n_neighs && N.n_neighs < NETWORK_MAX_NEIGHS; i++)
        NA.neighs[N.n_neighs++] = net->neighs[i];
    if (net->n_dns > MAX_DNS)
        log_error("network: more than %d name servers; the rest are ignored", MAX_DNS);
    for (size_t i = 0; i < net->n_dns && N.n_dns < MAX_DNS; i++)
        snprintf(NA.dns[N.n_dns++], sizeof(NA.dns[0]), "%s", net->dns[i]);
}

static void route_form(const struct net_route_cfg *c, int oif, struct nr_route *r)
{
    memset(r, 0, sizeof(*r));
    r->fam = c->fam;
    r->dst_len = c->dst_len;
    memcpy(r->dst, c->dst, sizeof(r->dst));
    r->has_gw = c->has_via;
    memcpy(r->gw, c->via, sizeof(r->gw));
    r->oif = oif;
    r->metric = c->metric;
    r->mtu = c->mtu;
}

static void route_text(const struct net_route_cfg *c, char *buf, size_t len)
{
    snprintf(buf, len, "%s%s%s", c->to_s, c->has_via ? " via " : "", c->has_via ? c->via_s : "");
}

/* ---- one pass over an interface ---- */

/* What a pass found and did, for the resume report and sandbox.init's
 * reply: per interface a JSON entry with its repairs, and one line of
 * detail ("eth0: address 10.0.2.15/24 was missing; added"). NULL at boot,
 * where the same steps are only logged. */
struct pass {
    cJSON *entry;               /* the interface's entry, or NULL */
    cJSON *repairs;
    char *detail;
    size_t dl, dlen;
    int n_repairs;
};

static void detail_add(struct pass *p, const char *name, const char *text)
{
    if (!p || !p->detail || p->dlen >= p->dl)
        return;
    int n = snprintf(p->detail + p->dlen, p->dl - p->dlen, "%s%s: %s", p->dlen ? "; " : "", name,
                     text);
    if (n > 0)
        p->dlen = p->dlen + (size_t)n < p->dl ? p->dlen + (size_t)n : p->dl - 1;
}

static void repaired(struct pass *p, const struct iface *f, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void repaired(struct pass *p, const struct iface *f, const char *fmt, ...)
{
    char text[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (!p) {
        log_debug("network: %s: %s", f->c.name, text);
        return;
    }
    log_info("network: %s: %s", f->c.name, text);
    p->n_repairs++;
    if (!p->repairs && p->entry)
        p->repairs = cJSON_AddArrayToObject(p->entry, "repairs");
    if (p->repairs)
        cJSON_AddItemToArray(p->repairs, cJSON_CreateString(text));
    detail_add(p, f->c.name, text);
}

enum sync_rc { SYNC_OK, SYNC_MISSING, SYNC_FAILED };

/* Makes one interface as configured, from the snapshot: found by MAC
 * (or by name; after a resume by name too when no link has the MAC, once
 * the MAC was found before), named, up, MTU, address, its routes and
 * neighbours. Only what differs is changed. With a pass (after a resume,
 * sandbox.init) each change is reported and a link without carrier is a
 * failure. */
static enum sync_rc sync_iface(int fd, struct iface *f, struct pass *p)
{
    char m1[24], m2[24];
    struct err why;
    const struct nr_link *l = f->c.has_mac ? nr_link_by_mac(&snap, f->c.mac) : NULL;
    bool by_name = false;
    if (!l && (!f->c.has_mac || (p && !f->mac_only))) {
        l = nr_link_by_name(&snap, f->c.name);
        by_name = f->c.has_mac && l;
    }
    if (!l)
        return SYNC_MISSING;
    f->ifindex = l->index;
    if (!by_name)
        f->mac_only = false;
    if (p && p->entry) {
        cJSON_AddNumberToObject(p->entry, "ifindex", l->index);
        cJSON_AddStringToObject(p->entry, "found", f->c.has_mac && !by_name ? "by MAC" : "by name");
    }
    if (by_name) {
        mac_text(f->c.mac, m1);
        mac_text(l->mac, m2);
        log_warn("network: %s: no link has MAC %s; the link named so (MAC %s) is used", f->c.name,
                 m1, m2);
        if (p && p->entry)
            cJSON_AddStringToObject(p->entry, "mac_now", m2);
    }
    bool up = l->flags & IFF_UP, relink = false;
    if (strcmp(l->name, f->c.name) != 0) {
        const struct nr_link *other = nr_link_by_name(&snap, f->c.name);
        if (other) {
            snprintf(f->error, sizeof(f->error), "the name is taken by link %d (%s is link %d)",
                     other->index, l->name, l->index);
            return SYNC_FAILED;
        }
        /* A name can only change while the link is down. */
        if ((up && nr_link_set(fd, l->index, NULL, 0, 0, &why) < 0) ||
            nr_link_set(fd, l->index, f->c.name, -1, 0, &why) < 0) {
            snprintf(f->error, sizeof(f->error), "unable to rename %s: %s", l->name, why.msg);
            return SYNC_FAILED;
        }
        repaired(p, f, "was named %s; renamed", l->name);
        up = false;
    }
    int mtu = f->c.mtu > 0 && l->mtu != f->c.mtu ? f->c.mtu : 0;
    if (!up || mtu) {
        if (nr_link_set(fd, l->index, NULL, 1, mtu, &why) < 0) {
            snprintf(f->error, sizeof(f->error), "unable to %s: %s", mtu ? "set the MTU" : "bring it up",
                     why.msg);
            return SYNC_FAILED;
        }
        if (!up && !(l->flags & IFF_UP))
            repaired(p, f, "link was down; brought up");
        if (mtu)
            repaired(p, f, "MTU was %d; set to %d", l->mtu, mtu);
        relink = true;
    }
    if (f->c.has_addr && !nr_has_addr(&snap, l->index, f->c.fam, f->c.addr, f->c.prefix)) {
        if (nr_addr_set(fd, true, l->index, f->c.fam, f->c.addr, f->c.prefix, &why) < 0) {
            snprintf(f->error, sizeof(f->error), "unable to add address %s: %s", f->c.addr_s, why.msg);
            return SYNC_FAILED;
        }
        repaired(p, f, "address %s was missing; added", f->c.addr_s);
    }
    for (size_t i = 0; i < N.n_routes; i++) {
        const struct net_route_cfg *c = &NA.routes[i];
        struct nr_route r;
        char text[140];
        if (strcmp(c->dev, f->c.name) != 0)
            continue;
        route_form(c, l->index, &r);
        if (nr_has_route(&snap, &r))
            continue;
        route_text(c, text, sizeof(text));
        if (nr_route_set(fd, true, &r, &why) < 0) {
            snprintf(f->error, sizeof(f->error), "unable to add route %s: %s", text, why.msg);
            return SYNC_FAILED;
        }
        repaired(p, f, "route %s was missing; added", text);
    }
    for (size_t i = 0; i < N.n_neighs; i++) {
        const struct net_neigh_cfg *c = &NA.neighs[i];
        if (strcmp(c->dev, f->c.name) != 0 || nr_has_neigh(&snap, l->index, c->fam, c->ip, c->mac))
            continue;
        if (nr_neigh_set(fd, true, l->index, c->fam, c->ip, c->mac, &why) < 0) {
            snprintf(f->error, sizeof(f->error), "unable to set neighbour %s: %s", c->ip_s, why.msg);
            return SYNC_FAILED;
        }
        repaired(p, f, "neighbour %s was missing or not permanent; set", c->ip_s);
    }
    if (p) {
        unsigned flags = l->flags;
        /* Bringing a link up gives it its carrier at once when the other
         * end is there (virtio, veth): look again before judging. */
        if (relink) {
            const struct nr_link *now;
            int idx = l->index;
            flags = nr_dump_links(fd, &snap, &why) == 0 &&
                            (now = nr_link_by_index(&snap, idx)) ? now->flags : 0;
        }
        if (!(flags & IFF_LOWER_UP)) {
            snprintf(f->error, sizeof(f->error), "no carrier");
            return SYNC_FAILED;
        }
    }
    return SYNC_OK;
}

/* One socket and the snapshot a pass needs (neighbours only when some
 * are configured). Returns the fd, or -1 with err. */
static int snapshot(struct err *err)
{
    int fd = nl_open(NETLINK_ROUTE, err);
    if (fd < 0)
        return -1;
    if (nr_dump_links(fd, &snap, err) < 0 || nr_dump_addrs(fd, &snap, err) < 0 ||
        nr_dump_routes(fd, &snap, err) < 0 ||
        (N.n_neighs && nr_dump_neighs(fd, &snap, err) < 0)) {
        close(fd);
        return -1;
    }
    if (!N.n_neighs)
        snap.n_neighs = 0;
    return fd;
}

/* ---- waiting for interfaces ---- */

static void on_timer(struct ev_loop *loop, ev_timer *w, int revents);

/* While an interface is missing, hearth waits for the kernel's link
 * notifications and wakes only for one or for the earliest deadline; a
 * NIC that is hot-plugged later is configured as soon as it appears. */
static void settle(void)
{
    bool waiting = false, ok = true;
    int64_t first = INT64_MAX;
    for (size_t i = 0; i < N.n; i++) {
        if (NA.ifs[i].state == IF_WAITING) {
            waiting = true;
            if (NA.ifs[i].deadline < first)
                first = NA.ifs[i].deadline;
        } else if (NA.ifs[i].state == IF_FAILED && NA.ifs[i].c.required) {
            ok = false;
        }
    }
    ev_timer_stop(H.loop, &N.timer);
    if (waiting) {
        int64_t ms = first - mono_ms();
        if (link_fd < 0 && ms > POLL_MS)
            ms = POLL_MS;
        ev_timer_init(&N.timer, on_timer, ms > 0 ? (double)ms / 1000.0 : 0., 0.);
        ev_timer_start(H.loop, &N.timer);
        gate_set("network", false);
        return;
    }
    if (link_fd >= 0) {
        ev_io_stop(H.loop, &N.link_io);
        close(link_fd);
        link_fd = -1;
    }
    gate_set("network", ok);
}

static void attempt_all(void)
{
    struct err why;
    int64_t now = mono_ms();
    int fd = snapshot(&why);
    for (size_t i = 0; i < N.n; i++) {
        struct iface *f = &NA.ifs[i];
        if (f->state != IF_WAITING)
            continue;
        enum sync_rc rc = SYNC_FAILED;
        if (fd < 0)
            snprintf(f->error, sizeof(f->error), "unable to read the links: %s", why.msg);
        else
            rc = sync_iface(fd, f, NULL);
        if (rc == SYNC_OK) {
            f->state = IF_UP;
            f->error[0] = 0;
            log_info("network: %s up (index %d)", f->c.name, f->ifindex);
        } else if (rc == SYNC_FAILED || now >= f->deadline) {
            if (rc == SYNC_MISSING)
                snprintf(f->error, sizeof(f->error), "not found within the timeout");
            f->state = IF_FAILED;
            log_error("network: %s: %s", f->c.name, f->error);
        }
    }
    if (fd >= 0)
        close(fd);
    settle();
}

static void on_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
    attempt_all();
}

static void on_link(struct ev_loop *loop, ev_io *w, int revents)
{
    char buf[8192];
    ssize_t n;
    bool any = false;
    /* What changed does not matter: each wait looks the interface up
     * afresh, so the notifications are only drained. */
    for (;;) {
        n = recv(link_fd, buf, sizeof(buf), 0);
        if (n > 0) {
            any = true;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == ENOBUFS) {
            any = true; /* notifications were dropped: look anyway */
            continue;
        }
        break;
    }
    if (n == 0 || (n < 0 && errno != EAGAIN)) {
        log_warn("network: link notifications lost (%s); polling every %d ms",
                 n == 0 ? "socket closed" : strerror(errno), POLL_MS);
        ev_io_stop(loop, w);
        close(link_fd);
        link_fd = -1;
    }
    if (any || link_fd < 0)
        attempt_all();
}

static void link_watch_open(void)
{
    struct err why;
    int group = RTNLGRP_LINK;
    if (link_fd >= 0)
        return;
    int fd = nl_open(NETLINK_ROUTE, &why);
    if (fd >= 0 &&
        setsockopt(fd, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &group, sizeof(group)) < 0) {
        err_set(&why, "joining the link group: %s", strerror(errno));
        close(fd);
        fd = -1;
    }
    if (fd < 0) {
        log_warn("network: no link notifications (%s); polling every %d ms for interfaces", why.msg,
                 POLL_MS);
        return;
    }
    link_fd = fd;
    ev_io_init(&N.link_io, on_link, fd, EV_READ);
    ev_io_start(H.loop, &N.link_io);
}

/* ---- resolv.conf ---- */

/* An unwritable resolv.conf is reported, not fatal: the interfaces work
 * without it. */
static int write_resolv(void)
{
    struct err why;
    if (resolvconf_write(N.resolv, NA.dns, N.n_dns, &why) < 0) {
        snprintf(N.resolv_error, sizeof(N.resolv_error), "%s", why.msg);
        log_error("network: %s", N.resolv_error);
        return -1;
    }
    N.resolv_error[0] = 0;
    return 0;
}

/* ---- boot, replacement, verification ---- */

void network_boot(const struct config *cfg)
{
    load(cfg ? &cfg->network : NULL);
    if (N.n_dns)
        write_resolv();
    if (!N.n) {
        gate_set("network", true);
        return;
    }
    /* Subscribed before the first look, so a link that appears in
     * between is not missed. */
    link_watch_open();
    attempt_all();
}

/* Whether the new configuration puts the old interface's address on the
 * same link: same name and address, and no MAC naming another NIC (the
 * old NIC would keep a duplicate of the new one's address). */
static bool new_has_addr(const struct network_cfg *net, const struct iface *f, int idx)
{
    const struct nr_link *l = nr_link_by_index(&snap, idx);
    for (size_t i = 0; i < net->n_ifs && i < MAX_IFACES; i++) {
        const struct net_iface_cfg *c = &net->ifs[i];
        if (strcmp(c->name, f->c.name) == 0 && c->has_addr && c->fam == f->c.fam &&
            c->prefix == f->c.prefix && memcmp(c->addr, f->c.addr, alen(c->fam)) == 0)
            return !c->has_mac || (l && l->has_mac && memcmp(l->mac, c->mac, 6) == 0);
    }
    return false;
}

static bool same_route(const struct net_route_cfg *a, const struct net_route_cfg *b)
{
    return a->fam == b->fam && a->dst_len == b->dst_len && strcmp(a->dev, b->dev) == 0 &&
           memcmp(a->dst, b->dst, alen(a->fam)) == 0 && a->has_via == b->has_via &&
           (!a->has_via || memcmp(a->via, b->via, alen(a->fam)) == 0) &&
           nr_metric(a->fam, a->metric) == nr_metric(b->fam, b->metric) && a->mtu == b->mtu;
}

static bool new_has_route(const struct network_cfg *net, const struct net_route_cfg *r)
{
    for (size_t i = 0; i < net->n_ifs && i < MAX_IFACES; i++) {
        const struct net_iface_cfg *c = &net->ifs[i];
        if (c->has_gw && strcmp(c->name, r->dev) == 0 && r->dst_len == 0 && r->has_via &&
            !r->has_metric && r->mtu == 0 && c->gw_fam == r->fam &&
            memcmp(c->gw, r->via, alen(r->fam)) == 0)
            return true;
    }
    for (size_t i = 0; i < net->n_routes; i++)
        if (same_route(&net->routes[i], r))
            return true;
    return false;
}

static bool new_has_neigh(const struct network_cfg *net, const struct net_neigh_cfg *n)
{
    for (size_t i = 0; i < net->n_neighs; i++) {
        const struct net_neigh_cfg *c = &net->neighs[i];
        if (strcmp(c->dev, n->dev) == 0 && c->fam == n->fam &&
            memcmp(c->ip, n->ip, alen(c->fam)) == 0 && memcmp(c->mac, n->mac, 6) == 0)
            return true;
    }
    return false;
}

/* The link an old interface was configured on, if it is still there. */
static int old_index(const char *name)
{
    for (size_t i = 0; i < N.n; i++)
        if (strcmp(NA.ifs[i].c.name, name) == 0 && NA.ifs[i].ifindex &&
            nr_link_by_index(&snap, NA.ifs[i].ifindex))
            return NA.ifs[i].ifindex;
    return 0;
}

static bool gone(int rc)
{
    return rc == -ESRCH || rc == -ENOENT || rc == -EADDRNOTAVAIL || rc == -ENODEV;
}

static void removed(cJSON *arr, const char *name, const char *what, const char *text, int rc,
                    const char *why)
{
    char line[300];
    if (rc < 0 && gone(rc))
        return;
    snprintf(line, sizeof(line), "%s: %s %s%s%s", name, what, text, rc < 0 ? ": " : "",
             rc < 0 ? why : "");
    if (rc < 0)
        log_warn("network: unable to remove %s", line);
    else
        log_info("network: removed %s", line);
    if (arr)
        cJSON_AddItemToArray(arr, cJSON_CreateString(line));
}

void network_replace(const struct network_cfg *net, cJSON *report)
{
    char text[140];
    struct err why;
    cJSON *arr = report ? cJSON_AddArrayToObject(report, "removed") : NULL;
    int fd = nl_open(NETLINK_ROUTE, &why);
    if (fd >= 0 && nr_dump_links(fd, &snap, &why) < 0) {
        close(fd);
        fd = -1;
    }
    if (fd < 0) {
        log_warn("network: unable to read the links: %s; what the old configuration set stays", why.msg);
    } else {
        /* What hearth set for the old configuration and the new one lacks,
         * on the links it set it on (an unplugged NIC took it along), in
         * the reverse order of setting it: an address taken away first
         * would take the routes through it along unreported. */
        for (size_t i = 0; i < N.n_neighs; i++) {
            const struct net_neigh_cfg *c = &NA.neighs[i];
            int idx = old_index(c->dev);
            if (!idx || new_has_neigh(net, c))
                continue;
            int rc = nr_neigh_set(fd, false, idx, c->fam, c->ip, c->mac, &why);
            removed(arr, c->dev, "neighbour", c->ip_s, rc, why.msg);
        }
        for (size_t i = 0; i < N.n_routes; i++) {
            const struct net_route_cfg *c = &NA.routes[i];
            int idx = old_index(c->dev);
            if (!idx || new_has_route(net, c))
                continue;
            struct nr_route r;
            route_form(c, idx, &r);
            route_text(c, text, sizeof(text));
            removed(arr, c->dev, "route", text, nr_route_set(fd, false, &r, &why), why.msg);
        }
        for (size_t i = 0; i < N.n; i++) {
            const struct iface *f = &NA.ifs[i];
            int idx = old_index(f->c.name);
            if (!f->c.has_addr || !idx || new_has_addr(net, f, idx))
                continue;
            int rc = nr_addr_set(fd, false, idx, f->c.fam, f->c.addr, f->c.prefix, &why);
            removed(arr, f->c.name, "address", f->c.addr_s, rc, why.msg);
        }
        close(fd);
    }
    load(net);
    log_info("network: configuration replaced (%zu interface%s)", N.n, N.n == 1 ? "" : "s");
    if (N.n)
        link_watch_open();
}

int network_verify(cJSON *report, struct err *detail)
{
    struct err why;
    struct pass p = {.detail = detail->msg, .dl = sizeof(detail->msg)};
    int failed = 0;

    detail->msg[0] = 0;
    if (!N.n && !N.n_dns) {
        /* A replacement without interfaces settles the phase too. */
        settle();
        err_set(detail, "no network configured");
        return NETWORK_SKIPPED;
    }
    cJSON *arr = report ? cJSON_AddArrayToObject(report, "interfaces") : NULL;
    int fd = N.n ? snapshot(&why) : -1;
    if (N.n && fd < 0) {
        err_set(detail, "unable to read the links: %s", why.msg);
        return NETWORK_FAILED;
    }
    int64_t now = mono_ms();
    for (size_t i = 0; i < N.n; i++) {
        struct iface *f = &NA.ifs[i];
        p.entry = cJSON_CreateObject();
        p.repairs = NULL;
        if (p.entry)
            cJSON_AddStringToObject(p.entry, "name", f->c.name);
        int before = p.n_repairs;
        enum sync_rc rc = sync_iface(fd, f, &p);
        const char *result = "ok";
        if (rc == SYNC_OK) {
            f->state = IF_UP;
            f->error[0] = 0;
            if (p.n_repairs > before)
                result = "repaired";
        } else if (rc == SYNC_MISSING && f->state == IF_WAITING && now < f->deadline) {
            result = "waiting";
            err_set(&why, "not found yet (waiting up to %lld ms more)",
                    (long long)(f->deadline - now));
            detail_add(&p, f->c.name, why.msg);
        } else {
            if (rc == SYNC_MISSING)
                snprintf(f->error, sizeof(f->error), "not found");
            f->state = IF_FAILED;
            result = "failed";
            failed++;
            detail_add(&p, f->c.name, f->error);
            log_warn("network: %s: %s", f->c.name, f->error);
        }
        if (p.entry) {
            cJSON_AddStringToObject(p.entry, "result", result);
            if (rc != SYNC_OK && f->state == IF_FAILED)
                cJSON_AddStringToObject(p.entry, "error", f->error);
            if (arr)
                cJSON_AddItemToArray(arr, p.entry);
            else
                cJSON_Delete(p.entry);
        }
    }
    if (fd >= 0)
        close(fd);
    if (N.n_dns) {
        const char *r = "ok";
        if (!resolvconf_matches(N.resolv, NA.dns, N.n_dns)) {
            r = write_resolv() == 0 ? "rewritten" : "failed";
            if (*r == 'f') {
                failed++;
                detail_add(&p, "resolv.conf", N.resolv_error);
            } else {
                p.n_repairs++;
                detail_add(&p, "resolv.conf", "differed; rewritten");
            }
        }
        if (report)
            cJSON_AddStringToObject(report, "resolv_conf", r);
    }
    settle();
    if (failed)
        return NETWORK_FAILED;
    if (!p.dlen)
        err_set(detail, "%zu interface%s in order", N.n, N.n == 1 ? "" : "s");
    return p.n_repairs ? NETWORK_REPAIRED : NETWORK_OK;
}

cJSON *network_json(void)
{
    cJSON *o = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(o, "interfaces");
    if (!o || !a) {
        cJSON_Delete(o);
        return NULL;
    }
    for (size_t i = 0; i < N.n; i++) {
        const struct iface *f = &NA.ifs[i];
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "name", f->c.name);
        if (f->c.has_mac) {
            char m[24];
            mac_text(f->c.mac, m);
            cJSON_AddStringToObject(j, "mac", m);
        }
        cJSON_AddStringToObject(j, "state", state_names[f->state]);
        cJSON_AddNumberToObject(j, "ifindex", f->ifindex);
        if (f->c.has_addr)
            cJSON_AddStringToObject(j, "address", f->c.addr_s);
        if (f->c.has_gw)
            cJSON_AddStringToObject(j, "gateway", f->c.gw_s);
        if (f->c.mtu)
            cJSON_AddNumberToObject(j, "mtu", f->c.mtu);
        cJSON_AddBoolToObject(j, "required", f->c.required);
        if (f->error[0])
            cJSON_AddStringToObject(j, "error", f->error);
        cJSON_AddItemToArray(a, j);
    }
    if (N.n_routes > N.n_gw_routes) {
        cJSON *ra = cJSON_AddArrayToObject(o, "routes");
        for (size_t i = N.n_gw_routes; ra && i < N.n_routes; i++) {
            const struct net_route_cfg *r = &NA.routes[i];
            cJSON *j = cJSON_CreateObject();
            cJSON_AddStringToObject(j, "to", r->to_s);
            if (r->has_via)
                cJSON_AddStringToObject(j, "via", r->via_s);
            cJSON_AddStringToObject(j, "dev", r->dev);
            if (r->has_metric)
                cJSON_AddNumberToObject(j, "metric", r->metric);
            if (r->mtu)
                cJSON_AddNumberToObject(j, "mtu", r->mtu);
            cJSON_AddItemToArray(ra, j);
        }
    }
    if (N.n_neighs) {
        cJSON *na = cJSON_AddArrayToObject(o, "neighbours");
        for (size_t i = 0; na && i < N.n_neighs; i++) {
            char m[24];
            cJSON *j = cJSON_CreateObject();
            mac_text(NA.neighs[i].mac, m);
            cJSON_AddStringToObject(j, "ip", NA.neighs[i].ip_s);
            cJSON_AddStringToObject(j, "mac", m);
            cJSON_AddStringToObject(j, "dev", NA.neighs[i].dev);
            cJSON_AddItemToArray(na, j);
        }
    }
    cJSON *d = cJSON_AddArrayToObject(o, "dns");
    for (size_t i = 0; d && i < N.n_dns; i++)
        cJSON_AddItemToArray(d, cJSON_CreateString(NA.dns[i]));
    cJSON_AddStringToObject(o, "resolv_conf", N.resolv);
    if (N.resolv_error[0])
        cJSON_AddStringToObject(o, "resolv_conf_error", N.resolv_error);
    return o;
}

/* ---- diagnosis ---- */

static const char *nud_name(int s)
{
    if (s & NUD_REACHABLE) return "reachable";
    if (s & NUD_STALE) return "stale";
    if (s & NUD_DELAY) return "delay";
    if (s & NUD_PROBE) return "probe";
    if (s & NUD_INCOMPLETE) return "incomplete";
    if (s & NUD_FAILED) return "failed";
    if (s & NUD_PERMANENT) return "permanent";
    if (s & NUD_NOARP) return "noarp";
    return "none";
}

/* Sending one datagram to the discard port makes the kernel resolve the
 * gateway's link address (ARP or neighbour solicitation) in the
 * background; nothing here waits for it. */
static void probe(const struct iface *f)
{
    int s = socket(f->c.gw_fam, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s < 0)
        return;
    struct sockaddr_storage ss = {0};
    socklen_t sl;
    if (f->c.gw_fam == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)&ss;
        in->sin_family = AF_INET;
        in->sin_port = htons(9);
        memcpy(&in->sin_addr, f->c.gw, 4);
        sl = sizeof(*in);
    } else {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(9);
        memcpy(&in6->sin6_addr, f->c.gw, 16);
        sl = sizeof(*in6);
    }
    if (sendto(s, "", 0, MSG_DONTWAIT, (struct sockaddr *)&ss, sl) < 0 && errno != EAGAIN)
        log_debug("network: probe of %s: %s", f->c.gw_s, strerror(errno));
    close(s);
}

cJSON *network_check_json(void)
{
    struct err why;
    cJSON *o = network_json();
    cJSON *arr = o ? cJSON_GetObjectItemCaseSensitive(o, "interfaces") : NULL, *j;
    int fd = N.n ? snapshot(&why) : -1;
    bool neighs = fd >= 0 && nr_dump_neighs(fd, &snap, &why) == 0;
    if (fd >= 0)
        close(fd);
    if (N.n && fd < 0 && o)
        cJSON_AddStringToObject(o, "error", why.msg);
    size_t i = 0;
    cJSON_ArrayForEach(j, arr) {
        const struct iface *f = &NA.ifs[i++];
        /* As a resume's check finds it: by MAC, else by name. */
        const struct nr_link *l = fd >= 0 && f->c.has_mac ? nr_link_by_mac(&snap, f->c.mac) : NULL;
        if (!l && fd >= 0)
            l = nr_link_by_name(&snap, f->c.name);
        cJSON_AddBoolToObject(j, "present", l != NULL);
        if (!l)
            continue;
        if (l->has_mac) {
            char m[24];
            mac_text(l->mac, m);
            cJSON_AddStringToObject(j, "mac_now", m);
        }
        cJSON_AddBoolToObject(j, "link_up", (l->flags & IFF_UP) != 0);
        cJSON_AddBoolToObject(j, "carrier", (l->flags & IFF_LOWER_UP) != 0);
        cJSON_AddNumberToObject(j, "mtu_now", l->mtu);
        if (f->c.has_addr)
            cJSON_AddBoolToObject(j, "address_present",
                                  nr_has_addr(&snap, l->index, f->c.fam, f->c.addr, f->c.prefix));
        if (f->c.has_gw) {
            struct nr_route r = {.fam = f->c.gw_fam, .has_gw = true, .oif = l->index};
            memcpy(r.gw, f->c.gw, sizeof(r.gw));
            cJSON_AddBoolToObject(j, "default_route", nr_has_route(&snap, &r));
            probe(f);
            int nud = -1;
            for (size_t k = 0; neighs && k < snap.n_neighs; k++)
                if (snap.neighs[k].index == l->index && snap.neighs[k].fam == f->c.gw_fam &&
                    memcmp(snap.neighs[k].ip, f->c.gw, alen(f->c.gw_fam)) == 0)
                    nud = snap.neighs[k].state;
            cJSON_AddStringToObject(j, "gateway_neighbour", nud < 0 ? "none" : nud_name(nud));
        }
    }
    return o;
}
