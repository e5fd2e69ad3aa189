#include "egress.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/capability.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/rtnetlink.h>

#include <cJSON.h>
#include <ev.h>

#include "cgroup.h"
#include "check.h"
#include "cidr.h"
#include "config.h"
#include "err.h"
#include "events.h"
#include "gates.h"
#include "hearth.h"
#include "log.h"
#include "netlink.h"
#include "netroute.h"
#include "nft.h"

/* The mark of hearth's own probe sockets, which the local ports rule
 * lets pass when it cannot tell the services by their cgroup ("HRTH"). */
#define OWN_MARK 0x48525448u

#ifndef ARPHRD_ETHER
#define ARPHRD_ETHER 1
#endif
#ifndef IFF_LOOPBACK
#define IFF_LOOPBACK 0x8
#endif

static struct {
    struct egress_policy pol;   /* as last applied (or attempted at boot) */
    bool applied;
    char error[256];
    struct nft_expect exp;
    uint32_t genid;
    /* Every gateway and name server the network config can keep: none is
     * ever dropped from the list the policy always allows. */
    struct cidr always[2 * NETWORK_CFG_MAX];
    size_t n_always;
    unsigned repairs;
    int64_t verified_ms;        /* monotonic ms of the last read-back that matched */
    char netdev_error[200];     /* why the netdev layer is not in force */
    size_t n_uncovered;         /* Ethernet interfaces past NFT_MAX_IFACES */
    bool netdev_refused;        /* the last apply went without it: the kernel said no */
    bool lp_cgroup;             /* the local ports match the services cgroup alone */
    char lp_scope[240];         /* why they do not (closed to every process) */
    char lp_refused[240];       /* why the kernel's refusal left them out of the ruleset */
    char lp_note[160];          /* why the local ports are not enforced at all */
    char replies_error[240];    /* why answers to connections from outside obey the allowlist */
    ev_io nft_io, link_io;
} E;
/* Outside E: an initialised E would put all of it in the binary's data.
 * The notification sockets, -1 when closed. */
static int nft_watch = -1, link_watch = -1;

static int reapply(const char *why);

/* Whether p leaves anything to enforce: an outbound policy, or (with or
 * without one) local ports closed to services. */
static bool enforcing(const struct egress_policy *p)
{
    return p->present || p->n_lports > 0;
}

/* The phase is the outbound policy's: local ports alone never hold it. */
static void gate_close(void)
{
    if (E.pol.present)
        gate_set("egress", false);
}
static void watch_start(void);

struct link_list {
    char names[NFT_MAX_IFACES][NFT_IFNAMSIZ];
    size_t n, extra;
};

/* What the netdev layer covers: a named Ethernet interface. Non-Ethernet
 * links (tun, wireguard) get no netdev chain: their frames have no
 * Ethernet header to read, and what a tunnel sends on leaves through the
 * IP stack, past the inet chain. */
static bool netdev_link(const struct nr_link *l)
{
    return l->type == ARPHRD_ETHER && !(l->flags & IFF_LOOPBACK) && l->name[0];
}

static void list_link(const struct nr_link *nl, void *arg)
{
    struct link_list *l = arg;
    if (!netdev_link(nl))
        return;
    if (l->n == NFT_MAX_IFACES) {
        l->extra++;
        return;
    }
    snprintf(l->names[l->n++], NFT_IFNAMSIZ, "%s", nl->name);
}

/* Every Ethernet interface there is now, configured or not: a packet
 * socket can send on any of them. */
static int list_links(struct link_list *l, struct err *err)
{
    memset(l, 0, sizeof(*l));
    int fd = nl_open(NETLINK_ROUTE, err);
    if (fd < 0)
        return -1;
    int rc = nr_each_link(fd, list_link, l, err);
    close(fd);
    return rc;
}

/* The notifications of hearth's own transactions are of no interest, and
 * for a large policy the kernel would build one per set element: the
 * ruleset watch leaves its group while hearth writes. */
static void watch_membership(bool on)
{
    int group = NFNLGRP_NFTABLES;
    if (nft_watch >= 0 &&
        setsockopt(nft_watch, SOL_NETLINK, on ? NETLINK_ADD_MEMBERSHIP : NETLINK_DROP_MEMBERSHIP,
                   &group, sizeof(group)) < 0)
        log_warn("egress: unable to %s the nf_tables notification group: %s",
                 on ? "join" : "leave", strerror(errno));
}

enum fallback_step { STEP_NONE, STEP_NETDEV, STEP_OWNER, STEP_CGROUP, STEP_LPORTS, STEP_REPLIES };

/* What to go without after a refusal, from the part of the ruleset the
 * refused message belongs to: only that layer, and only one still in
 * np, so the ladder ends. A refusal for permission (hearth lacks
 * NET_ADMIN, another socket owns a table of that name) is final: nothing
 * is weakened. A message not known (the send or the read failed) keeps
 * the order kernels were first met with: netdev, then owner. */
static enum fallback_step fallback_step(const struct nft_policy *np, int rc, enum nft_part part)
{
    bool unsupported = rc == -EOPNOTSUPP || rc == -EINVAL;
    if (rc == -EPERM)
        return STEP_NONE;
    switch (part) {
    case NFT_PART_NETDEV:
        return np->netdev ? STEP_NETDEV : STEP_NONE;
    case NFT_PART_TABLE:
        return unsupported && np->owner ? STEP_OWNER : STEP_NONE;
    case NFT_PART_CGROUP:
        return np->cgroup && np->n_lports ? STEP_CGROUP : STEP_NONE;
    case NFT_PART_LOCAL:
        return np->n_lports ? STEP_LPORTS : STEP_NONE;
    case NFT_PART_REPLIES:
        return np->replies ? STEP_REPLIES : STEP_NONE;
    case NFT_PART_UNKNOWN:
        if (np->netdev)
            return STEP_NETDEV;
        return unsupported && np->owner ? STEP_OWNER : STEP_NONE;
    case NFT_PART_BASE:
        break;
    }
    return STEP_NONE;
}

int egress_apply_fallback(struct nft_policy *np, struct nft_expect *exp, egress_apply_fn apply,
                          struct egress_fallback *fb, struct err *err)
{
    memset(fb, 0, sizeof(*fb));
    for (;;) {
        enum nft_part part = NFT_PART_UNKNOWN;
        fb->tries++;
        int rc = apply(np, exp, &part, err);
        if (rc == 0)
            return 0;
        switch (fallback_step(np, rc, part)) {
        case STEP_NONE:
            return rc;
        case STEP_NETDEV:
            fb->netdev = true;
            snprintf(fb->netdev_error, sizeof(fb->netdev_error), "%s", err->msg);
            np->netdev = false;
            np->n_ifaces = 0;
            log_warn("egress: the kernel refuses the netdev egress chains (%s); trying without", err->msg);
            break;
        case STEP_OWNER:
            fb->owner = true;
            np->owner = false;
            log_warn("egress: the kernel refuses owned tables (%s); trying without: other "
                     "processes with CAP_NET_ADMIN can change them (changes are repaired when "
                     "noticed)", err->msg);
            break;
        case STEP_CGROUP:
            fb->cgroup = true;
            snprintf(fb->cgroup_error, sizeof(fb->cgroup_error), "%s", err->msg);
            np->cgroup = false;
            log_warn("egress: the kernel refuses the socket cgroup match (%s); trying with the "
                     "local ports closed to every process", err->msg);
            break;
        case STEP_LPORTS:
            fb->lports = true;
            snprintf(fb->lports_error, sizeof(fb->lports_error), "%s", err->msg);
            np->lports = NULL;
            np->n_lports = 0;
            /* Local ports were all there was: nothing is left to apply. */
            if (!np->outbound)
                return rc;
            log_warn("egress: the kernel refuses the local ports rules (%s); applying the policy "
                     "without them", err->msg);
            break;
        case STEP_REPLIES:
            /* Closed, not open: without them an answer to a forbidden
             * peer that connected in is dropped, as any packet to it. */
            fb->replies = true;
            snprintf(fb->replies_error, sizeof(fb->replies_error), "%s", err->msg);
            np->replies = false;
            log_warn("egress: the kernel refuses the rules for answers to connections from outside "
                     "(%s); applying the policy without them: a peer the policy forbids gets no "
                     "answer", err->msg);
            break;
        }
    }
}

/* A container started without NET_ADMIN is the usual reason nf_tables
 * refuses: say so, since "Operation not permitted" alone does not. */
static bool lacks_net_admin(void)
{
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
    struct __user_cap_data_struct d[2];
    if (syscall(SYS_capget, &h, d) < 0)
        return false;
    return !(d[CAP_NET_ADMIN / 32].effective & (1u << (CAP_NET_ADMIN % 32)));
}

static int apply_parsed(const struct egress_policy *p, struct err *err)
{
    struct link_list links;
    struct err why;
    struct nft_policy np = {.always = E.always, .n_always = E.n_always,
                            .allow = p->allow, .n_allow = p->n_allow,
                            .deny = p->deny, .n_deny = p->n_deny,
                            .allow_public = p->allow_public, .owner = true,
                            .outbound = p->present, .replies = p->present,
                            .lports = p->lports, .n_lports = p->n_lports,
                            .own_mark = OWN_MARK};
    if (!p->present) {
        np.always = NULL;
        np.n_always = 0;
        np.allow_public = true;
    }
    /* Without the services cgroup every socket is matched (fail closed). */
    np.cgroup = cgroup_services_match(&np.svc_cgid, &np.svc_level, &np.exec_cgid) == 0;
    if (np.n_lports && !np.cgroup)
        log_warn("egress: no services cgroup: the local ports are closed to every process");
    /* What describes the ruleset in force changes only if this applies. */
    char old_error[sizeof(E.netdev_error)];
    size_t old_uncovered = E.n_uncovered;
    bool old_refused = E.netdev_refused;
    memcpy(old_error, E.netdev_error, sizeof(old_error));
    E.netdev_error[0] = 0;
    if (!p->present) {
        /* Local ports only: nothing leaves through a netdev chain. */
        links.n = links.extra = 0;
    } else if (list_links(&links, &why) < 0) {
        snprintf(E.netdev_error, sizeof(E.netdev_error), "unable to list interfaces: %s", why.msg);
        links.n = links.extra = 0;
    } else if (links.n == 0) {
        snprintf(E.netdev_error, sizeof(E.netdev_error), "no Ethernet interface");
    }
    E.n_uncovered = links.extra;
    if (links.extra)
        log_warn("egress: %zu Ethernet interfaces beyond the first %d have no netdev chain",
                 links.extra, NFT_MAX_IFACES);
    np.netdev = links.n > 0;
    np.ifaces = (const char (*)[NFT_IFNAMSIZ])links.names;
    np.n_ifaces = links.n;

    struct nft_expect exp;
    struct egress_fallback fb;
    bool no_cgroup = np.n_lports && !np.cgroup;
    E.netdev_refused = false;
    watch_membership(false);
    int rc = egress_apply_fallback(&np, &exp, nft_apply, &fb, &why);
    watch_membership(true);
    if (rc < 0) {
        memcpy(E.netdev_error, old_error, sizeof(old_error));
        E.n_uncovered = old_uncovered;
        E.netdev_refused = old_refused;
        if (fb.lports && !np.outbound)
            err_set(err, "the kernel refuses the local ports rules: %s", fb.lports_error);
        else
            err_set(err, "unable to apply the ruleset: %s%s", why.msg,
                    lacks_net_admin() ? " (hearth lacks CAP_NET_ADMIN: a container needs --cap-add NET_ADMIN)"
                                      : "");
        return -1;
    }
    if (fb.netdev) {
        E.netdev_refused = true;
        snprintf(E.netdev_error, sizeof(E.netdev_error), "refused by the kernel: %s", fb.netdev_error);
    }
    /* The generation first: a change after it, even during the read-back,
     * is a new generation and is looked at again. */
    uint32_t g = 0;
    if (nft_genid(&g, &why) < 0)
        g = 0;
    int v = nft_verify(&exp, &why);
    if (v != 0)
        return err_set(err, "read-back after apply: %s", why.msg);
    E.exp = exp;
    E.genid = g;
    E.verified_ms = mono_ms();
    E.lp_cgroup = np.cgroup;
    check_set_mark(exp.n_local && !np.cgroup ? OWN_MARK : 0);
    E.lp_scope[0] = E.lp_refused[0] = 0;
    E.replies_error[0] = 0;
    if (fb.replies)
        snprintf(E.replies_error, sizeof(E.replies_error), "refused by the kernel: %s",
                 fb.replies_error);
    if (fb.lports)
        snprintf(E.lp_refused, sizeof(E.lp_refused), "refused by the kernel: %s; the egress "
                 "policy is applied without them", fb.lports_error);
    else if (fb.cgroup)
        snprintf(E.lp_scope, sizeof(E.lp_scope), "the kernel refuses the socket cgroup match: "
                 "%s; the ports are closed to every process", fb.cgroup_error);
    else if (no_cgroup)
        snprintf(E.lp_scope, sizeof(E.lp_scope), "no services cgroup; the ports are closed to "
                 "every process");
    return 0;
}

/* Why the ports src lists are not closed to services, or NULL when they
 * are (or none are listed). */
static const char *lp_error(const struct egress_policy *src)
{
    if (src->n_lports == 0)
        return NULL;
    if (E.lp_note[0])
        return E.lp_note;
    if (E.applied)
        return E.lp_refused[0] ? E.lp_refused : NULL;
    return E.error[0] ? E.error : NULL;
}

static void emit(void)
{
    cJSON *ev = cJSON_CreateObject();
    if (!ev)
        return;
    cJSON_AddBoolToObject(ev, "applied", E.applied && E.pol.present);
    cJSON_AddBoolToObject(ev, "local_ports", E.applied && E.exp.n_local > 0);
    if (E.error[0])
        cJSON_AddStringToObject(ev, "error", E.error);
    const char *lpe = lp_error(&E.pol);
    if (lpe)
        cJSON_AddStringToObject(ev, "local_ports_error", lpe);
    events_emit("egress", ev);
}

int egress_apply(const struct egress_policy *p, struct err *err)
{
    struct egress_policy copy;
    if (sections_egress_policy_copy(&copy, p) < 0)
        return err_set(err, "out of memory");
    int rc = apply_parsed(&copy, err);
    if (rc < 0) {
        /* The kernel kept the old ruleset; so does our state, except at
         * boot where there is no old policy and the phase stays closed. */
        sections_egress_policy_free(&copy);
        if (!E.pol.present)
            snprintf(E.error, sizeof(E.error), "%s", err->msg);
        log_warn("egress: %s", err->msg);
        return -2;
    }
    sections_egress_policy_free(&E.pol);
    E.pol = copy;
    E.applied = true;
    watch_start();
    E.error[0] = 0;
    E.lp_note[0] = 0;
    log_info(E.pol.present ? "egress policy applied" : "egress: local ports closed to services");
    gate_set("egress", true);
    /* Local ports closed at boot change nothing the host was told. */
    if (E.pol.present)
        emit();
    return 0;
}

int egress_set(const cJSON *policy, struct err *err)
{
    struct egress_policy p;
    if (sections_egress_parse(policy, &p, err) < 0)
        return -1;
    int rc = egress_apply(&p, err);
    sections_egress_policy_free(&p);
    return rc;
}

static void add_always(const char *ip)
{
    if (ip && E.n_always < sizeof(E.always) / sizeof(E.always[0]) &&
        cidr_parse(ip, false, &E.always[E.n_always], NULL) == 0)
        E.n_always++;
}

static void set_always(const struct network_cfg *net)
{
    E.n_always = 0;
    for (size_t i = 0; i < net->n_ifs; i++)
        if (net->ifs[i].gw_s[0])
            add_always(net->ifs[i].gw_s);
    for (size_t i = 0; i < net->n_dns; i++)
        add_always(net->dns[i]);
}

int egress_set_always(const struct network_cfg *net, bool apply, struct err *err)
{
    struct cidr old[sizeof(E.always) / sizeof(E.always[0])];
    size_t n_old = E.n_always;
    memcpy(old, E.always, sizeof(old));
    set_always(net);
    if (n_old == E.n_always && memcmp(old, E.always, n_old * sizeof(old[0])) == 0)
        return 0;
    log_info("egress: the network's gateways and name servers changed");
    if (!apply || !E.pol.present || !E.applied)
        return 0;
    int rc = apply_parsed(&E.pol, err);
    if (rc < 0) {
        /* The old ruleset stands, and with it the old list. */
        memcpy(E.always, old, sizeof(old));
        E.n_always = n_old;
        log_warn("egress: unable to re-apply for the new network: %s", err->msg);
        return -1;
    }
    emit();
    return 0;
}

void egress_boot(const struct config *cfg)
{
    if (!cfg) {
        gate_set("egress", true);
        return;
    }
    set_always(&cfg->network);

    const struct egress_policy *pol = &cfg->egress;
    if (!pol->present) {
        /* No outbound policy: the phase is open. The local ports are
         * closed all the same, where hearth can. */
        gate_set("egress", true);
        if (pol->n_lports == 0)
            return;
        if (lacks_net_admin()) {
            snprintf(E.lp_note, sizeof(E.lp_note), "not enforced: hearth lacks CAP_NET_ADMIN");
            log_info("egress: local ports %s", E.lp_note);
            return;
        }
        struct err err;
        watch_start();
        if (egress_apply(pol, &err) < 0) {
            if (sections_egress_policy_copy(&E.pol, pol) < 0)
                log_warn("egress: unable to keep the local ports for a retry: out of memory");
            snprintf(E.error, sizeof(E.error), "%s", err.msg);
            log_error("egress: local ports not closed to services: %s", err.msg);
            emit();
        }
        return;
    }
    watch_start();
    struct err err;
    int rc = -1;
    if (pol->error[0])
        err_set(&err, "%s", pol->error);
    else
        rc = egress_apply(pol, &err);
    if (rc < 0) {
        /* Fail closed: keep what we tried so recheck can retry it. */
        if (!pol->error[0] && sections_egress_policy_copy(&E.pol, pol) < 0)
            log_warn("egress: unable to keep the policy for a retry: out of memory");
        snprintf(E.error, sizeof(E.error), "%s", err.msg);
        log_error("egress: %s; services after egress held", err.msg);
        gate_set("egress", false);
        emit();
    }
}

int egress_recheck(struct err *err)
{
    struct err why;
    if (!enforcing(&E.pol))
        return 0;
    if (E.applied) {
        uint32_t g = 0;
        if (nft_genid(&g, &why) == 0 && g == E.genid && g != 0)
            return 0;
        int v = nft_verify(&E.exp, &why);
        if (v == 0) {
            E.genid = g;
            E.verified_ms = mono_ms();
            return 0;
        }
        log_warn("egress: ruleset changed behind hearth (%s); re-applying", why.msg);
    }
    int rc = apply_parsed(&E.pol, err);
    if (rc < 0) {
        E.applied = false;
        snprintf(E.error, sizeof(E.error), "%s", err->msg);
        gate_close();
        emit();
        return -1;
    }
    E.repairs++;
    E.applied = true;
    E.error[0] = 0;
    gate_set("egress", true);
    emit();
    return 0;
}

/* Re-applies the policy in force (interfaces came or went). */
static int reapply(const char *why)
{
    struct err err;
    if (!E.pol.present || !E.applied)
        return 0;
    log_info("egress: %s; re-applying", why);
    int rc = apply_parsed(&E.pol, &err);
    if (rc < 0) {
        /* The old ruleset stands (one transaction): still applied. */
        log_warn("egress: unable to re-apply: %s", err.msg);
        return -1;
    }
    emit();
    return 0;
}

/* Drains a notification socket. Returns 1 when anything arrived (or was
 * lost: ENOBUFS), 0 when nothing, -1 when the socket broke. */
static int drain(int fd, void (*each)(const struct nlmsghdr *h, void *arg), void *arg)
{
    char buf[8192];
    int any = 0;
    for (;;) {
        ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n > 0) {
            any = 1;
            if (each)
                for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n);
                     h = NLMSG_NEXT(h, n))
                    each(h, arg);
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == ENOBUFS) {
            any = 1;
            continue;
        }
        if (n < 0 && errno == EAGAIN)
            return any;
        return -1;
    }
}

static void watch_close(int *fd, ev_io *io, const char *what)
{
    log_warn("egress: unable to read %s notifications: %s; checked again only on resume or "
             "egress.check", what, strerror(errno));
    ev_io_stop(H.loop, io);
    close(*fd);
    *fd = -1;
}

/* Any ruleset change in the namespace: the generation tells hearth's own
 * (already verified) from others'; anything else is read back and, if
 * hearth's tables differ, repaired. No timer: an idle sandbox never
 * wakes for this. */
static void on_nft(struct ev_loop *loop, ev_io *w, int revents)
{
    struct err err;
    int r = drain(nft_watch, NULL, NULL);
    if (r < 0)
        watch_close(&nft_watch, &E.nft_io, "nf_tables");
    if (r != 0 && egress_recheck(&err) < 0)
        log_error("egress: unable to repair the changed ruleset: %s", err.msg);
}

struct link_change {
    bool changed;
    char name[NFT_IFNAMSIZ];
};

static bool covered(const char *name)
{
    for (size_t i = 0; i < E.exp.n_ifaces; i++)
        if (strcmp(E.exp.ifaces[i], name) == 0)
            return true;
    return false;
}

/* A new (or renamed) Ethernet interface without a chain, or a covered one
 * gone, changes what the netdev layer must hold. */
static void link_msg(const struct nlmsghdr *h, void *arg)
{
    struct link_change *c = arg;
    struct nr_link l;
    if (!nr_link_read(h, &l) || !netdev_link(&l))
        return;
    bool has = covered(l.name);
    /* A kernel that refused the netdev chains would refuse them again on
     * every link change: the next egress.set tries anew. */
    if ((h->nlmsg_type == RTM_NEWLINK && !has && E.exp.n_ifaces < NFT_MAX_IFACES &&
         !E.netdev_refused) ||
        (h->nlmsg_type == RTM_DELLINK && has)) {
        c->changed = true;
        snprintf(c->name, sizeof(c->name), "%s", l.name);
    }
}

static void on_link(struct ev_loop *loop, ev_io *w, int revents)
{
    struct link_change c = {0};
    int r = drain(link_watch, link_msg, &c);
    if (r < 0)
        watch_close(&link_watch, &E.link_io, "link");
    if (c.changed) {
        char why[64];
        snprintf(why, sizeof(why), "interface %s came or went", c.name);
        reapply(why);
    }
}

static int watch_open(int protocol, int group, ev_io *io, void (*cb)(struct ev_loop *, ev_io *, int))
{
    struct err why;
    int fd = nl_open(protocol, &why);
    if (fd >= 0 && setsockopt(fd, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &group, sizeof(group)) < 0) {
        err_unable(&why, errno, "join group %d", group);
        close(fd);
        fd = -1;
    }
    if (fd < 0) {
        log_warn("egress: unable to watch %s notifications: %s; changes are noticed on resume "
                 "or egress.check only", protocol == NETLINK_ROUTE ? "link" : "nf_tables", why.msg);
        return -1;
    }
    ev_io_init(io, cb, fd, EV_READ);
    ev_io_start(H.loop, io);
    return fd;
}

/* The watches run once there is a policy to keep (at boot, or with the
 * first egress.set). */
static void watch_start(void)
{
    if (!H.loop)
        return;
    if (nft_watch < 0 && !ev_is_active(&E.nft_io))
        nft_watch = watch_open(NETLINK_NETFILTER, NFNLGRP_NFTABLES, &E.nft_io, on_nft);
    if (link_watch < 0 && !ev_is_active(&E.link_io))
        link_watch = watch_open(NETLINK_ROUTE, RTNLGRP_LINK, &E.link_io, on_link);
}

unsigned egress_repairs(void)
{
    return E.repairs;
}

cJSON *egress_json(void)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddBoolToObject(o, "configured", E.pol.present);
    cJSON_AddBoolToObject(o, "applied", E.applied && E.pol.present);
    if (E.pol.stated)
        cJSON_AddItemToObject(o, "policy", cJSON_Duplicate(E.pol.stated, 1));
    if (E.error[0])
        cJSON_AddStringToObject(o, "error", E.error);
    cJSON_AddNumberToObject(o, "generation", E.genid);
    cJSON_AddNumberToObject(o, "repairs", E.repairs);
    cJSON *always = cJSON_AddArrayToObject(o, "alwaysAllowed");
    for (size_t i = 0; always && i < E.n_always; i++) {
        char buf[64];
        cidr_format(&E.always[i], buf, sizeof(buf));
        cJSON_AddItemToArray(always, cJSON_CreateString(buf));
    }
    cJSON *layers = cJSON_AddObjectToObject(o, "layers");
    if (layers) {
        cJSON_AddBoolToObject(layers, "inet", E.applied);
        cJSON *nd = cJSON_AddArrayToObject(layers, "netdev");
        for (size_t i = 0; nd && E.applied && E.exp.netdev && i < E.exp.n_ifaces; i++)
            cJSON_AddItemToArray(nd, cJSON_CreateString(E.exp.ifaces[i]));
        if (E.applied && E.netdev_error[0])
            cJSON_AddStringToObject(layers, "netdev_error", E.netdev_error);
        if (E.n_uncovered)
            cJSON_AddNumberToObject(layers, "netdev_uncovered", (double)E.n_uncovered);
        cJSON_AddBoolToObject(layers, "owner", E.applied && E.exp.owner);
        cJSON_AddBoolToObject(layers, "replies", E.applied && E.exp.replies);
        if (E.applied && E.pol.present && E.replies_error[0])
            cJSON_AddStringToObject(layers, "replies_error", E.replies_error);
        cJSON_AddBoolToObject(layers, "watch", nft_watch >= 0);
    }
    cJSON *lp = cJSON_AddObjectToObject(o, "local_ports");
    if (lp) {
        /* What is closed, or would be: the config's list until a policy
         * with its own is applied. */
        const struct egress_policy *src = enforcing(&E.pol) ? &E.pol
                                          : H.cfg ? &H.cfg->egress : &E.pol;
        cJSON *deny = sections_egress_lports_json(src);
        if (deny)
            cJSON_AddItemToObject(lp, "deny", deny);
        cJSON_AddBoolToObject(lp, "applied", E.applied && E.exp.n_local > 0);
        bool closed = E.applied && E.exp.n_local > 0;
        cJSON_AddBoolToObject(lp, "services_only", closed && E.lp_cgroup);
        if (closed && !E.lp_cgroup && E.lp_scope[0])
            cJSON_AddStringToObject(lp, "services_only_error", E.lp_scope);
        const char *lpe = lp_error(src);
        if (lpe)
            cJSON_AddStringToObject(lp, "error", lpe);
    }
    if (E.verified_ms)
        cJSON_AddNumberToObject(o, "verified_ms_ago", (double)(mono_ms() - E.verified_ms));
    if (E.applied) {
        struct err why;
        cJSON *c = nft_counters_json(&E.exp, &why);
        if (c)
            cJSON_AddItemToObject(o, "counters", c);
        else
            cJSON_AddStringToObject(o, "counters_error", why.msg);
    }
    return o;
}
