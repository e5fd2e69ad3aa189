#include "network.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/if_addr.h>
#include <linux/neighbour.h>
#include <linux/rtnetlink.h>

#include <ev.h>
#include <cJSON.h>

#include "config.h"
#include "gates.h"
#include "hearth.h"
#include "log.h"
#include "netlink.h"
#include "safepath.h"

#define MAX_IFACES 16
#define MAX_DNS 8
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
    char name[IFNAMSIZ];
    bool has_mac, has_addr, has_gw, required;
    uint8_t mac[6];
    int fam, gw_fam, prefix, mtu;
    uint8_t addr[16], gw[16];
    char addr_s[64], gw_s[64];
    int64_t deadline;
    enum if_state state;
    int ifindex;
    char error[200];
};

static struct {
    struct iface ifs[MAX_IFACES];
    size_t n;
    char dns[MAX_DNS][64];
    size_t n_dns;
    char resolv[256];
    char resolv_error[200];
    ev_timer timer;             /* the next deadline, or the fallback poll */
    ev_io link_io;              /* RTMGRP_LINK: a link appeared or changed */
} N;
/* Outside N: an initialised N would put all of it in the binary's data. */
static int link_fd = -1;

static uint32_t next_seq(void)
{
    static uint32_t s = 0x7000000;
    return s += 0x1000;
}

static int rt_transact(struct nlbuf *b, char *err, size_t errlen)
{
    int fd = nl_open(NETLINK_ROUTE, err, errlen);
    if (fd < 0)
        return -1;
    int rc = nl_transact(fd, b, err, errlen);
    close(fd);
    return rc < 0 ? -1 : 0;
}

/* ---- links ---- */

struct link_info {
    int want_index;             /* match by index, or */
    const uint8_t *want_mac;    /* by MAC */
    int index;
    unsigned flags;
    int mtu, carrier;
    char name[IFNAMSIZ];
};

static int link_cb(const struct nlmsghdr *h, void *arg)
{
    struct link_info *li = arg;
    const struct nlattr *tb[IFLA_MAX + 1];
    const struct ifinfomsg *ifi;
    if (h->nlmsg_type != RTM_NEWLINK || !(ifi = nl_msg_attrs(h, sizeof(*ifi), tb, IFLA_MAX)))
        return 0;
    bool match = li->want_index ? ifi->ifi_index == li->want_index
                                : tb[IFLA_ADDRESS] && nl_attr_len(tb[IFLA_ADDRESS]) == 6 &&
                                      memcmp(nl_attr_data(tb[IFLA_ADDRESS]), li->want_mac, 6) == 0;
    if (!match || li->index)
        return 0;
    li->index = ifi->ifi_index;
    li->flags = ifi->ifi_flags;
    li->mtu = tb[IFLA_MTU] ? (int)nl_attr_get_u32(tb[IFLA_MTU]) : 0;
    li->carrier = tb[IFLA_CARRIER] ? *(const uint8_t *)nl_attr_data(tb[IFLA_CARRIER]) : -1;
    if (tb[IFLA_IFNAME])
        snprintf(li->name, sizeof(li->name), "%.*s", (int)strnlen(nl_attr_data(tb[IFLA_IFNAME]),
                 nl_attr_len(tb[IFLA_IFNAME])), (const char *)nl_attr_data(tb[IFLA_IFNAME]));
    return 0;
}

static int link_lookup(struct link_info *li, char *err, size_t errlen)
{
    struct nlbuf b;
    struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC};
    int fd = nl_open(NETLINK_ROUTE, err, errlen);
    if (fd < 0)
        return -1;
    nl_init(&b, next_seq());
    nl_msg_begin(&b, RTM_GETLINK, NLM_F_DUMP);
    nl_put(&b, &ifi, sizeof(ifi));
    nl_msg_end(&b);
    int rc = nl_dump(fd, &b, link_cb, li, err, errlen);
    nl_free(&b);
    close(fd);
    return rc < 0 ? -1 : 0;
}

/* up: 1 up, 0 down, -1 leave as is. */
static int link_set(int index, const char *rename, int up, int mtu, char *err, size_t errlen)
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
    int rc = rt_transact(&b, err, errlen);
    nl_free(&b);
    return rc;
}

static int addr_set(const struct iface *f, char *err, size_t errlen)
{
    struct nlbuf b;
    struct ifaddrmsg ifa = {.ifa_family = (uint8_t)f->fam, .ifa_prefixlen = (uint8_t)f->prefix,
                            .ifa_index = (uint32_t)f->ifindex};
    size_t al = f->fam == AF_INET ? 4 : 16;
    nl_init(&b, next_seq());
    nl_msg_begin(&b, RTM_NEWADDR, NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE);
    nl_put(&b, &ifa, sizeof(ifa));
    nl_attr(&b, IFA_LOCAL, f->addr, al);
    nl_attr(&b, IFA_ADDRESS, f->addr, al);
    /* The host assigned this address: no duplicate detection delay. */
    if (f->fam == AF_INET6)
        nl_attr_u32(&b, IFA_FLAGS, IFA_F_NODAD);
    nl_msg_end(&b);
    int rc = rt_transact(&b, err, errlen);
    nl_free(&b);
    return rc;
}

static int route_set(const struct iface *f, char *err, size_t errlen)
{
    struct nlbuf b;
    struct rtmsg rt = {.rtm_family = (uint8_t)f->gw_fam, .rtm_table = RT_TABLE_MAIN,
                       .rtm_protocol = RTPROT_STATIC, .rtm_scope = RT_SCOPE_UNIVERSE,
                       .rtm_type = RTN_UNICAST};
    nl_init(&b, next_seq());
    nl_msg_begin(&b, RTM_NEWROUTE, NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE);
    nl_put(&b, &rt, sizeof(rt));
    nl_attr(&b, RTA_GATEWAY, f->gw, f->gw_fam == AF_INET ? 4 : 16);
    nl_attr_u32(&b, RTA_OIF, (uint32_t)f->ifindex);
    nl_msg_end(&b);
    int rc = rt_transact(&b, err, errlen);
    nl_free(&b);
    return rc;
}

/* One attempt: 0 done, 1 not there yet, -1 failed (error set). */
static int configure(struct iface *f)
{
    char why[160];
    struct link_info li = {0};
    if (f->has_mac)
        li.want_mac = f->mac;
    else if (!(li.want_index = (int)if_nametoindex(f->name)))
        return 1;
    if (link_lookup(&li, why, sizeof(why)) < 0)
        goto fail;
    if (!li.index)
        return 1;
    f->ifindex = li.index;
    if (strcmp(li.name, f->name) != 0) {
        /* A name can only change while the link is down. */
        if ((li.flags & IFF_UP) && link_set(li.index, NULL, 0, 0, why, sizeof(why)) < 0)
            goto fail;
        if (link_set(li.index, f->name, -1, 0, why, sizeof(why)) < 0)
            goto fail;
    }
    if (link_set(li.index, NULL, 1, f->mtu, why, sizeof(why)) < 0)
        goto fail;
    if (f->has_addr && addr_set(f, why, sizeof(why)) < 0)
        goto fail;
    if (f->has_gw && route_set(f, why, sizeof(why)) < 0)
        goto fail;
    return 0;
fail:
    snprintf(f->error, sizeof(f->error), "%s", why);
    return -1;
}

static void on_timer(struct ev_loop *loop, ev_timer *w, int revents);

/* While an interface is missing, hearth waits for the kernel's link
 * notifications and wakes only for one or for the earliest deadline; a
 * NIC that is hot-plugged later is configured as soon as it appears. */
static void settle(void)
{
    bool waiting = false, ok = true;
    int64_t first = INT64_MAX;
    for (size_t i = 0; i < N.n; i++) {
        if (N.ifs[i].state == IF_WAITING) {
            waiting = true;
            if (N.ifs[i].deadline < first)
                first = N.ifs[i].deadline;
        } else if (N.ifs[i].state == IF_FAILED && N.ifs[i].required) {
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
    int64_t now = mono_ms();
    for (size_t i = 0; i < N.n; i++) {
        struct iface *f = &N.ifs[i];
        if (f->state != IF_WAITING)
            continue;
        int rc = configure(f);
        if (rc == 0) {
            f->state = IF_UP;
            f->error[0] = 0;
            log_info("network: %s up (index %d)", f->name, f->ifindex);
        } else if (rc < 0 || now >= f->deadline) {
            if (rc > 0)
                snprintf(f->error, sizeof(f->error), "not found within the timeout");
            f->state = IF_FAILED;
            log_error("network: %s: %s", f->name, f->error);
        }
    }
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
    char why[160];
    int group = RTNLGRP_LINK;
    int fd = nl_open(NETLINK_ROUTE, why, sizeof(why));
    if (fd >= 0 &&
        setsockopt(fd, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &group, sizeof(group)) < 0) {
        snprintf(why, sizeof(why), "joining the link group: %s", strerror(errno));
        close(fd);
        fd = -1;
    }
    if (fd < 0) {
        log_warn("network: no link notifications (%s); polling every %d ms for interfaces", why,
                 POLL_MS);
        return;
    }
    link_fd = fd;
    ev_io_init(&N.link_io, on_link, fd, EV_READ);
    ev_io_start(H.loop, &N.link_io);
}

/* The temp name sits beside resolv.conf, where an agent may have put a
 * FIFO, a link or a directory: it is created O_EXCL beneath the
 * directory's fd (safepath: never followed, never blocking), a stale one
 * is unlinked first (unlink removes a link or FIFO itself), and the
 * rename goes by that fd. */
static int write_resolv(void)
{
    char tmp[300], buf[MAX_DNS * 80], dir[256], why[128];
    const char *slash = strrchr(N.resolv, '/');
    size_t len = 0;
    for (size_t i = 0; i < N.n_dns; i++)
        len += (size_t)snprintf(buf + len, sizeof(buf) - len, "nameserver %s\n", N.dns[i]);
    if (!slash || !slash[1]) {
        errno = EINVAL;
        goto fail;
    }
    snprintf(dir, sizeof(dir), "%.*s", (int)(slash > N.resolv ? slash - N.resolv : 1), N.resolv);
    const char *name = slash + 1;
    snprintf(tmp, sizeof(tmp), "%s.hearth-tmp", name);
    int dfd = safepath_open_abs(dir, O_DIRECTORY, 0, why, sizeof(why));
    if (dfd < 0)
        goto fail_why;
    if (unlinkat(dfd, tmp, 0) < 0 && errno == EISDIR)
        unlinkat(dfd, tmp, AT_REMOVEDIR);
    int fd = safepath_open(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL, 0644, why, sizeof(why));
    if (fd < 0) {
        close(dfd);
        snprintf(N.resolv_error, sizeof(N.resolv_error), "%s: unable to create %s/%s: %s",
                 N.resolv, dir, tmp, why);
        log_error("network: %s", N.resolv_error);
        return -1;
    }
    ssize_t w = write(fd, buf, len);
    if (w != (ssize_t)len || fchmod(fd, 0644) < 0 || fsync(fd) < 0) {
        if (w >= 0 && w != (ssize_t)len)
            errno = EIO;
        int e = errno;
        close(fd);
        unlinkat(dfd, tmp, 0);
        close(dfd);
        errno = e;
        goto fail;
    }
    close(fd);
    /* rename: readers see the old file or the new one, never half. */
    if (renameat(dfd, tmp, dfd, name) < 0) {
        int e = errno;
        unlinkat(dfd, tmp, 0);
        close(dfd);
        errno = e;
        goto fail;
    }
    close(dfd);
    N.resolv_error[0] = 0;
    return 0;
fail_why:
    snprintf(N.resolv_error, sizeof(N.resolv_error), "%s: %s", N.resolv, why);
    log_error("network: %s", N.resolv_error);
    return -1;
fail:
    snprintf(N.resolv_error, sizeof(N.resolv_error), "%s: %s", N.resolv, strerror(errno));
    log_error("network: %s", N.resolv_error);
    return -1;
}

void network_boot(const struct config *cfg)
{
    const struct network_cfg *net = cfg ? &cfg->network : NULL;
    snprintf(N.resolv, sizeof(N.resolv), "%s",
             net && net->resolv[0] ? net->resolv : CONFIG_RESOLV_CONF);
    int64_t now = mono_ms();
    size_t n_ifs = net ? net->n_ifs : 0, n_dns = net ? net->n_dns : 0;

    if (net && net->n_ifs + net->n_dropped > MAX_IFACES)
        log_error("network: more than %d interfaces; the rest are ignored", MAX_IFACES);
    for (size_t i = 0; i < n_ifs && N.n < MAX_IFACES; i++) {
        const struct net_iface_cfg *c = &net->ifs[i];
        struct iface *f = &N.ifs[N.n++];
        memset(f, 0, sizeof(*f));
        memcpy(f->name, c->name, sizeof(f->name));
        f->has_mac = c->has_mac;
        memcpy(f->mac, c->mac, sizeof(f->mac));
        f->has_addr = c->has_addr;
        f->fam = c->fam;
        f->prefix = c->prefix;
        memcpy(f->addr, c->addr, sizeof(f->addr));
        memcpy(f->addr_s, c->addr_s, sizeof(f->addr_s));
        f->has_gw = c->has_gw;
        f->gw_fam = c->gw_fam;
        memcpy(f->gw, c->gw, sizeof(f->gw));
        memcpy(f->gw_s, c->gw_s, sizeof(f->gw_s));
        f->mtu = c->mtu;
        f->required = c->required;
        f->deadline = now + c->timeout_ms;
        f->state = IF_WAITING;
    }
    for (size_t i = 0; i < n_dns && N.n_dns < MAX_DNS; i++)
        snprintf(N.dns[N.n_dns++], sizeof(N.dns[0]), "%s", net->dns[i]);
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

int network_recheck(char *err, size_t errlen)
{
    int rc = 0;
    for (size_t i = 0; i < N.n; i++) {
        struct iface *f = &N.ifs[i];
        if (f->state != IF_UP)
            continue;
        if (configure(f) != 0) {
            snprintf(err, errlen, "%s: %s", f->name, f->error[0] ? f->error : "gone");
            rc = -1;
        }
    }
    if (N.n_dns && write_resolv() < 0 && rc == 0) {
        snprintf(err, errlen, "%s", N.resolv_error);
        rc = -1;
    }
    return rc;
}

cJSON *network_json(void)
{
    cJSON *o = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(o, "interfaces");
    if (!o || !a) {
        cJSON_Delete(o);
        return NULL;
    }
    for (size_t i = 0; i < N.n; i++) {
        const struct iface *f = &N.ifs[i];
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "name", f->name);
        cJSON_AddStringToObject(j, "state", state_names[f->state]);
        cJSON_AddNumberToObject(j, "ifindex", f->ifindex);
        if (f->has_addr)
            cJSON_AddStringToObject(j, "address", f->addr_s);
        if (f->has_gw)
            cJSON_AddStringToObject(j, "gateway", f->gw_s);
        if (f->mtu)
            cJSON_AddNumberToObject(j, "mtu", f->mtu);
        cJSON_AddBoolToObject(j, "required", f->required);
        if (f->error[0])
            cJSON_AddStringToObject(j, "error", f->error);
        cJSON_AddItemToArray(a, j);
    }
    cJSON *d = cJSON_AddArrayToObject(o, "dns");
    for (size_t i = 0; d && i < N.n_dns; i++)
        cJSON_AddItemToArray(d, cJSON_CreateString(N.dns[i]));
    cJSON_AddStringToObject(o, "resolv_conf", N.resolv);
    if (N.resolv_error[0])
        cJSON_AddStringToObject(o, "resolv_conf_error", N.resolv_error);
    return o;
}

/* ---- diagnosis ---- */

struct find {
    const struct iface *f;
    bool found;
    int nud;
};

static int addr_cb(const struct nlmsghdr *h, void *arg)
{
    struct find *q = arg;
    const struct nlattr *tb[IFA_MAX + 1];
    const struct ifaddrmsg *ifa;
    if (h->nlmsg_type != RTM_NEWADDR || !(ifa = nl_msg_attrs(h, sizeof(*ifa), tb, IFA_MAX)) ||
        (int)ifa->ifa_index != q->f->ifindex || ifa->ifa_family != q->f->fam ||
        ifa->ifa_prefixlen != q->f->prefix)
        return 0;
    const struct nlattr *a = tb[IFA_LOCAL] ? tb[IFA_LOCAL] : tb[IFA_ADDRESS];
    size_t al = q->f->fam == AF_INET ? 4 : 16;
    if (a && nl_attr_len(a) == al && memcmp(nl_attr_data(a), q->f->addr, al) == 0)
        q->found = true;
    return 0;
}

static int route_cb(const struct nlmsghdr *h, void *arg)
{
    struct find *q = arg;
    const struct nlattr *tb[RTA_MAX + 1];
    const struct rtmsg *rt;
    if (h->nlmsg_type != RTM_NEWROUTE || !(rt = nl_msg_attrs(h, sizeof(*rt), tb, RTA_MAX)) ||
        rt->rtm_dst_len != 0 || rt->rtm_table != RT_TABLE_MAIN || rt->rtm_family != q->f->gw_fam)
        return 0;
    size_t al = q->f->gw_fam == AF_INET ? 4 : 16;
    if (tb[RTA_GATEWAY] && nl_attr_len(tb[RTA_GATEWAY]) == al &&
        memcmp(nl_attr_data(tb[RTA_GATEWAY]), q->f->gw, al) == 0 &&
        (!tb[RTA_OIF] || (int)nl_attr_get_u32(tb[RTA_OIF]) == q->f->ifindex))
        q->found = true;
    return 0;
}

static int neigh_cb(const struct nlmsghdr *h, void *arg)
{
    struct find *q = arg;
    const struct nlattr *tb[NDA_MAX + 1];
    const struct ndmsg *nd;
    if (h->nlmsg_type != RTM_NEWNEIGH || !(nd = nl_msg_attrs(h, sizeof(*nd), tb, NDA_MAX)) ||
        nd->ndm_ifindex != q->f->ifindex)
        return 0;
    size_t al = q->f->gw_fam == AF_INET ? 4 : 16;
    if (tb[NDA_DST] && nl_attr_len(tb[NDA_DST]) == al && memcmp(nl_attr_data(tb[NDA_DST]), q->f->gw, al) == 0) {
        q->found = true;
        q->nud = nd->ndm_state;
    }
    return 0;
}

static bool dump(uint16_t type, int family, nl_msg_cb cb, struct find *q)
{
    char err[160];
    struct nlbuf b;
    int fd = nl_open(NETLINK_ROUTE, err, sizeof(err));
    if (fd < 0)
        return false;
    nl_init(&b, next_seq());
    nl_msg_begin(&b, type, NLM_F_DUMP);
    /* rtgenmsg-sized headers are accepted by every dump; the family filters. */
    struct ndmsg hdr = {.ndm_family = (uint8_t)family};
    size_t hl = type == RTM_GETADDR ? sizeof(struct ifaddrmsg)
              : type == RTM_GETROUTE ? sizeof(struct rtmsg) : sizeof(struct ndmsg);
    uint8_t raw[sizeof(struct rtmsg) + sizeof(struct ndmsg)] = {0};
    memcpy(raw, &hdr, 1);
    nl_put(&b, raw, hl);
    nl_msg_end(&b);
    int rc = nl_dump(fd, &b, cb, q, err, sizeof(err));
    nl_free(&b);
    close(fd);
    return rc == 0;
}

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
    int s = socket(f->gw_fam, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s < 0)
        return;
    struct sockaddr_storage ss = {0};
    socklen_t sl;
    if (f->gw_fam == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)&ss;
        in->sin_family = AF_INET;
        in->sin_port = htons(9);
        memcpy(&in->sin_addr, f->gw, 4);
        sl = sizeof(*in);
    } else {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(9);
        memcpy(&in6->sin6_addr, f->gw, 16);
        sl = sizeof(*in6);
    }
    if (sendto(s, "", 0, MSG_DONTWAIT, (struct sockaddr *)&ss, sl) < 0 && errno != EAGAIN)
        log_debug("network: probe of %s: %s", f->gw_s, strerror(errno));
    close(s);
}

cJSON *network_check_json(void)
{
    cJSON *o = network_json();
    cJSON *arr = o ? cJSON_GetObjectItemCaseSensitive(o, "interfaces") : NULL, *j;
    size_t i = 0;
    cJSON_ArrayForEach(j, arr) {
        const struct iface *f = &N.ifs[i++];
        char err[160];
        struct link_info li = {.want_index = f->ifindex ? f->ifindex : (int)if_nametoindex(f->name)};
        bool found = li.want_index && link_lookup(&li, err, sizeof(err)) == 0 && li.index;
        cJSON_AddBoolToObject(j, "present", found);
        if (!found)
            continue;
        struct iface cur = *f;
        cur.ifindex = li.index;
        cJSON_AddBoolToObject(j, "link_up", (li.flags & IFF_UP) != 0);
        cJSON_AddBoolToObject(j, "carrier", (li.flags & IFF_LOWER_UP) != 0);
        cJSON_AddNumberToObject(j, "mtu_now", li.mtu);
        if (f->has_addr) {
            struct find q = {.f = &cur};
            dump(RTM_GETADDR, f->fam, addr_cb, &q);
            cJSON_AddBoolToObject(j, "address_present", q.found);
        }
        if (f->has_gw) {
            struct find q = {.f = &cur};
            dump(RTM_GETROUTE, f->gw_fam, route_cb, &q);
            cJSON_AddBoolToObject(j, "default_route", q.found);
            probe(&cur);
            struct find n = {.f = &cur};
            dump(RTM_GETNEIGH, f->gw_fam, neigh_cb, &n);
            cJSON_AddStringToObject(j, "gateway_neighbour", n.found ? nud_name(n.nud) : "none");
        }
    }
    return o;
}
