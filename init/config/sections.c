/* sections: the typed forms of the config's non-service sections, each
 * extracted once when the config loads (the schema has checked them) and,
 * for what the host can send again at run time (egress.set, sandbox.init),
 * validated and extracted in one pass by the same code. Kept apart from
 * the modules that act on them so that loading a config needs none of
 * their machinery (netlink, nf_tables, the loop). */
#include "sections.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/socket.h>
#include <netinet/in.h>

#include <cJSON.h>

/* For the defaults only: the sections themselves are checked by schema.c
 * and extracted here, so loading does not call back into config.c. */
#include "config.h"
#include "err.h"
#include "jsonget.h"
#include "jsonout.h"
#include "netaddr.h"
#include "schema.h"

/* ---- egress ---- */

/* Bound on one list: 10,000 is the benchmarked size; far beyond it the
 * batch stops being cheap and the request line limit is near anyway. */
#define EGRESS_MAX_CIDRS 65536

/* Always in denyOut: "internet access" does not cover private ranges,
 * nor shared address space (100.64/10: carrier NAT, and where some clouds
 * keep their metadata service), "this network" (0/8), the benchmarking
 * range (198.18/15), multicast and the reserved 240/4 (with the limited
 * broadcast 255.255.255.255). */
static const char *const default_deny[] = {"10.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16",
                                           "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10",
                                           "0.0.0.0/8", "198.18.0.0/15", "224.0.0.0/4",
                                           "240.0.0.0/4", "fc00::/7", "fe80::/10", "ff00::/8"};

void sections_egress_policy_free(struct egress_policy *p)
{
    free(p->allow);
    free(p->deny);
    cJSON_Delete(p->stated);
    memset(p, 0, sizeof(*p));
}

static int parse_list(const cJSON *arr, const char *key, struct cidr **out, size_t *n,
                      size_t extra, struct err *err)
{
    size_t cnt = arr ? (size_t)cJSON_GetArraySize(arr) : 0;
    if (cnt > EGRESS_MAX_CIDRS)
        return err_set(err, "egress.%s: %zu entries, at most %d", key, cnt, EGRESS_MAX_CIDRS);
    *out = calloc(cnt + extra + 1, sizeof(**out));
    if (!*out)
        return err_set(err, "out of memory");
    *n = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, arr) {
        struct err reason;
        /* Already schema-checked: this only fails on an internal mismatch. */
        if (cidr_parse(it->valuestring, false, &(*out)[*n], &reason) < 0)
            return err_set(err, "egress.%s[%zu]: bad CIDR \"%s\": %s", key, *n, it->valuestring,
                           reason.msg);
        (*n)++;
    }
    return 0;
}

/* What services may not reach on the machine's own addresses when the
 * config says nothing: the platform's envd, which runs commands as root
 * for anyone who connects and has no access token. */
static const struct port_range default_lports[] = {{IPPROTO_TCP, 49983, 49983}};

static void lports_default(struct egress_policy *p)
{
    p->n_lports = sizeof(default_lports) / sizeof(default_lports[0]);
    memcpy(p->lports, default_lports, sizeof(default_lports));
}

/* deny_local_ports, which the schema has checked; absent: the default. */
static int lports_fill(const cJSON *arr, struct egress_policy *p, struct err *err)
{
    const cJSON *it;
    if (!arr) {
        lports_default(p);
        return 0;
    }
    p->n_lports = 0;
    cJSON_ArrayForEach(it, arr) {
        /* Already schema-checked: this only fails on an internal mismatch. */
        if (p->n_lports >= EGRESS_MAX_LOCAL_PORTS || !cJSON_IsString(it) ||
            !netaddr_parse_port_range(it->valuestring, &p->lports[p->n_lports])) {
            return err_set(err, "egress.deny_local_ports[%zu]: bad entry", p->n_lports);
        }
        p->n_lports++;
    }
    return 0;
}

cJSON *sections_egress_lports_json(const struct egress_policy *p)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < p->n_lports; i++) {
        char t[PORT_RANGE_TEXT_MAX];
        netaddr_format_port_range(&p->lports[i], t, sizeof(t));
        cJSON_AddItemToArray(a, cJSON_CreateString(t));
    }
    return a;
}

/* The policy as stored and reported: every field of the platform's
 * present (deny_local_ports is reported on its own, sections_egress_lports_json). */
static cJSON *normalised(const cJSON *policy, bool allow_public)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddBoolToObject(o, "allowPublicTraffic", allow_public);
    static const char *const keys[] = {"allowOut", "denyOut"};
    for (int k = 0; k < 2; k++) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(policy, keys[k]);
        cJSON *copy = a ? cJSON_Duplicate(a, 1) : cJSON_CreateArray();
        if (!copy || !cJSON_AddItemToObject(o, keys[k], copy)) {
            cJSON_Delete(copy);
            cJSON_Delete(o);
            return NULL;
        }
    }
    return o;
}

/* Parses a policy the schema has checked. */
static int egress_fill(const cJSON *policy, struct egress_policy *p, struct err *err)
{
    size_t nd = sizeof(default_deny) / sizeof(default_deny[0]);

    memset(p, 0, sizeof(*p));
    p->present = true;
    p->allow_public = jget_bool_or(policy, "allowPublicTraffic", true);
    if (parse_list(jget(policy, "allowOut"), "allowOut", &p->allow, &p->n_allow, 0, err) < 0 ||
        parse_list(jget(policy, "denyOut"), "denyOut", &p->deny, &p->n_deny, nd, err) < 0 ||
        lports_fill(jget(policy, "deny_local_ports"), p, err) < 0)
        goto fail;
    for (size_t i = 0; i < nd; i++)
        if (cidr_parse(default_deny[i], false, &p->deny[p->n_deny], NULL) == 0)
            p->n_deny++;
    p->stated = normalised(policy, p->allow_public);
    if (!p->stated) {
        err_set(err, "out of memory");
        goto fail;
    }
    return 0;
fail:
    sections_egress_policy_free(p);
    return -1;
}

int sections_egress_parse(const cJSON *policy, struct egress_policy *out, struct err *err)
{
    memset(out, 0, sizeof(*out));
    if (!cJSON_IsObject(policy))
        return err_set(err, "egress: expected object");
    if (schema_check_section("egress", policy, err) < 0)
        return -1;
    return egress_fill(policy, out, err);
}

void sections_egress_extract(const cJSON *policy, struct egress_policy *out)
{
    struct err err;

    memset(out, 0, sizeof(*out));
    if (!policy) {
        /* No policy, but the local ports are closed all the same. */
        lports_default(out);
        return;
    }
    if (egress_fill(policy, out, &err) < 0) {
        out->present = true;
        lports_default(out);
        snprintf(out->error, sizeof(out->error), "%s", err.msg);
    }
}

int sections_egress_policy_copy(struct egress_policy *dst, const struct egress_policy *src)
{
    memset(dst, 0, sizeof(*dst));
    dst->present = src->present;
    dst->allow_public = src->allow_public;
    dst->allow = calloc(src->n_allow + 1, sizeof(*dst->allow));
    dst->deny = calloc(src->n_deny + 1, sizeof(*dst->deny));
    dst->stated = src->stated ? cJSON_Duplicate(src->stated, 1) : NULL;
    if (!dst->allow || !dst->deny || (src->stated && !dst->stated)) {
        sections_egress_policy_free(dst);
        return -1;
    }
    memcpy(dst->allow, src->allow, src->n_allow * sizeof(*dst->allow));
    memcpy(dst->deny, src->deny, src->n_deny * sizeof(*dst->deny));
    dst->n_allow = src->n_allow;
    dst->n_deny = src->n_deny;
    memcpy(dst->lports, src->lports, sizeof(dst->lports));
    dst->n_lports = src->n_lports;
    return 0;
}

/* ---- network ---- */

void sections_network_extract(const cJSON *net, struct network_cfg *out)
{
    const cJSON *it;

    /* The counts here and each entry as it is filled, not the whole: the
     * arrays are 38 KiB, and zeroing them would make every page of the
     * config's fresh calloc resident for a section most configs leave
     * out. */
    out->n_ifs = out->n_dropped = out->n_dns = out->n_routes = out->n_neighs = 0;
    snprintf(out->resolv, sizeof(out->resolv), "%s",
             jget_str_or(net, "resolv_conf", CONFIG_RESOLV_CONF));
    cJSON_ArrayForEach(it, jget(net, "interfaces")) {
        if (out->n_ifs >= NETWORK_CFG_MAX) {
            out->n_dropped++;
            continue;
        }
        struct net_iface_cfg *f = &out->ifs[out->n_ifs++];
        memset(f, 0, sizeof(*f));
        snprintf(f->name, sizeof(f->name), "%s", jget_str_or(it, "name", ""));
        const char *mac = jget_str_or(it, "mac", NULL);
        f->has_mac = mac && netaddr_parse_mac(mac, f->mac);
        const char *addr = jget_str_or(it, "address", NULL);
        if (addr) {
            char a[64];
            snprintf(f->addr_s, sizeof(f->addr_s), "%s", addr);
            snprintf(a, sizeof(a), "%s", addr);
            char *slash = strchr(a, '/');
            if (slash)
                *slash = 0;
            f->has_addr = netaddr_parse_ip(a, &f->fam, f->addr);
            f->prefix = slash ? atoi(slash + 1) : (f->fam == AF_INET ? 32 : 128);
        }
        const char *gw = jget_str_or(it, "gateway", NULL);
        if (gw) {
            snprintf(f->gw_s, sizeof(f->gw_s), "%s", gw);
            f->has_gw = netaddr_parse_ip(gw, &f->gw_fam, f->gw);
        }
        f->mtu = (int)jget_int_or(it, "mtu", 0);
        f->required = jget_bool_or(it, "required", true);
        f->timeout_ms = jget_int_or(it, "timeout_ms", CONFIG_IFACE_TIMEOUT_MS);
    }
    cJSON_ArrayForEach(it, jget(net, "dns")) {
        if (out->n_dns < NETWORK_CFG_MAX && cJSON_IsString(it))
            snprintf(out->dns[out->n_dns++], sizeof(out->dns[0]), "%s", it->valuestring);
    }
    cJSON_ArrayForEach(it, jget(net, "routes")) {
        if (out->n_routes >= NETWORK_MAX_ROUTES)
            break;
        struct net_route_cfg *r = &out->routes[out->n_routes];
        const char *to = jget_str_or(it, "to", ""), *via = jget_str_or(it, "via", NULL);
        memset(r, 0, sizeof(*r));
        snprintf(r->to_s, sizeof(r->to_s), "%s", to);
        snprintf(r->dev, sizeof(r->dev), "%s", jget_str_or(it, "dev", ""));
        if (via) {
            snprintf(r->via_s, sizeof(r->via_s), "%s", via);
            r->has_via = netaddr_parse_ip(via, &r->fam, r->via);
        }
        if (strcmp(to, "default") == 0) {
            if (!r->has_via)
                r->fam = AF_INET;
        } else {
            struct cidr dst;
            if (cidr_parse(to, false, &dst, NULL) < 0)
                continue;
            r->fam = dst.family;
            r->dst_len = dst.prefix;
            memcpy(r->dst, dst.addr, sizeof(r->dst));
        }
        const cJSON *m = jget(it, "metric");
        r->has_metric = cJSON_IsNumber(m);
        r->metric = r->has_metric ? (uint32_t)m->valuedouble : 0;
        r->mtu = (int)jget_int_or(it, "mtu", 0);
        out->n_routes++;
    }
    cJSON_ArrayForEach(it, jget(net, "neighbours")) {
        if (out->n_neighs >= NETWORK_MAX_NEIGHS)
            break;
        struct net_neigh_cfg *n = &out->neighs[out->n_neighs];
        const char *ip = jget_str_or(it, "ip", ""), *mac = jget_str_or(it, "mac", "");
        memset(n, 0, sizeof(*n));
        snprintf(n->ip_s, sizeof(n->ip_s), "%s", ip);
        snprintf(n->dev, sizeof(n->dev), "%s", jget_str_or(it, "dev", ""));
        if (netaddr_parse_ip(ip, &n->fam, n->ip) && netaddr_parse_mac(mac, n->mac))
            out->n_neighs++;
    }
}

int sections_network_parse(const cJSON *net, struct network_cfg *out, struct err *err)
{
    memset(out, 0, sizeof(*out));
    if (schema_check_section("network", net, err) < 0)
        return -1;
    int n_ifs = cJSON_GetArraySize(jget(net, "interfaces"));
    int n_dns = cJSON_GetArraySize(jget(net, "dns"));
    if (n_ifs > NETWORK_USED_IFACES)
        return err_set(err, "network.interfaces: %d entries, at most %d", n_ifs,
                       NETWORK_USED_IFACES);
    if (n_dns > NETWORK_USED_DNS)
        return err_set(err, "network.dns: %d entries, at most %d", n_dns, NETWORK_USED_DNS);
    sections_network_extract(net, out);
    return 0;
}

/* ---- mounts and host_mounts ---- */

/* A copy of obj[key] when it is a string; *oom set when the copy failed. */
static char *dup_member(const cJSON *obj, const char *key, bool *oom)
{
    const char *v = jget_str_or(obj, key, NULL);
    char *d = v ? strdup(v) : NULL;

    if (v && !d)
        *oom = true;
    return d;
}

void sections_host_mounts_free(struct host_mounts_cfg *h)
{
    for (size_t i = 0; i < h->n; i++) {
        free(h->v[i].host_path);
        free(h->v[i].mount_path);
    }
    free(h->v);
    memset(h, 0, sizeof(*h));
}

/* The entries of a checked host_mounts value (string or array); an empty
 * or whitespace string has none. */
static int host_mounts_fill(const cJSON *v, struct host_mounts_cfg *out)
{
    cJSON *parsed = NULL;
    const cJSON *arr = v, *e;
    bool oom = false;

    memset(out, 0, sizeof(*out));
    if (cJSON_IsString(v))
        arr = parsed = cJSON_Parse(v->valuestring);
    if (!cJSON_IsArray(arr)) {
        cJSON_Delete(parsed);
        return 0;
    }
    size_t n = (size_t)cJSON_GetArraySize(arr);
    out->v = calloc(n ? n : 1, sizeof(*out->v));
    if (!out->v) {
        cJSON_Delete(parsed);
        return -1;
    }
    cJSON_ArrayForEach(e, arr) {
        struct host_mount_cfg *h = &out->v[out->n++];
        h->host_path = dup_member(e, "hostPath", &oom);
        h->mount_path = dup_member(e, "mountPath", &oom);
        h->read_only = jget_bool_or(e, "readOnly", false);
    }
    cJSON_Delete(parsed);
    if (oom) {
        sections_host_mounts_free(out);
        return -1;
    }
    return 0;
}

int sections_host_mounts_parse(const cJSON *v, struct host_mounts_cfg *out, struct err *err)
{
    memset(out, 0, sizeof(*out));
    if (cJSON_IsArray(v)) {
        /* Validated in the platform's string form, like the config's. */
        char *text = jsonout_print(v);
        cJSON *str = text ? cJSON_CreateString(text) : NULL;
        int r = str ? schema_check_section("host_mounts", str, err) : -1;
        if (!str)
            err_set(err, "host_mounts: out of memory");
        cJSON_Delete(str);
        cJSON_free(text);
        if (r < 0)
            return -1;
    } else if (schema_check_section("host_mounts", v, err) < 0) {
        return -1;
    }
    if (host_mounts_fill(v, out) < 0)
        return err_set(err, "host_mounts: out of memory");
    return 0;
}

void sections_mounts_cfg_free(struct mounts_cfg *m)
{
    for (size_t i = 0; i < m->n; i++) {
        free(m->v[i].source);
        free(m->v[i].target);
        free(m->v[i].type);
        free(m->v[i].options);
        free(m->v[i].owner);
    }
    free(m->v);
    sections_host_mounts_free(&m->host);
    memset(m, 0, sizeof(*m));
}

int sections_mounts_extract(const cJSON *root, struct mounts_cfg *out)
{
    const cJSON *list = jget(root, "mounts"), *rule = jget(root, "host_mounts_rule"), *e;
    bool oom = false;

    memset(out, 0, sizeof(*out));
    snprintf(out->rule_mode, sizeof(out->rule_mode), "%s",
             jget_str_or(rule, "mode", CONFIG_MOUNT_RULE_MODE));
    snprintf(out->rule_tag, sizeof(out->rule_tag), "%s", jget_str_or(rule, "tag", ""));
    snprintf(out->rule_owner, sizeof(out->rule_owner), "%s", jget_str_or(rule, "owner", ""));
    snprintf(out->rule_root, sizeof(out->rule_root), "%s",
             jget_str_or(rule, "host_root", CONFIG_MOUNT_HOST_ROOT));
    size_t n = list ? (size_t)cJSON_GetArraySize(list) : 0;
    if (n) {
        out->v = calloc(n, sizeof(*out->v));
        if (!out->v)
            return -1;
    }
    cJSON_ArrayForEach(e, list) {
        struct mount_cfg *m = &out->v[out->n++];
        m->source = dup_member(e, "source", &oom);
        m->target = dup_member(e, "target", &oom);
        m->type = dup_member(e, "type", &oom);
        m->options = dup_member(e, "options", &oom);
        m->owner = dup_member(e, "owner", &oom);
        m->read_only = jget_bool_or(e, "read_only", false);
        m->required = jget_bool_or(e, "required", true);
        /* A platform mount without timeout_ms is waited for without a
         * deadline (0: never reported late). */
        bool platform = m->type && strcmp(m->type, "platform") == 0;
        m->timeout_ms = jget_int_or(e, "timeout_ms", platform ? 0 : CONFIG_MOUNT_TIMEOUT_MS);
    }
    if (oom || host_mounts_fill(jget(root, "host_mounts"), &out->host) < 0) {
        sections_mounts_cfg_free(out);
        return -1;
    }
    return 0;
}

/* ---- seed ---- */

void sections_seed_cfg_free(struct seed_cfg *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->v[i].target);
        free(s->v[i].from);
        free(s->v[i].unless);
        free(s->v[i].user);
        free(s->v[i].group);
    }
    free(s->v);
    memset(s, 0, sizeof(*s));
}

int sections_seed_extract(const cJSON *list, struct seed_cfg *out)
{
    const cJSON *e;
    bool oom = false;
    size_t n = list ? (size_t)cJSON_GetArraySize(list) : 0;

    memset(out, 0, sizeof(*out));
    if (!n)
        return 0;
    out->v = calloc(n, sizeof(*out->v));
    if (!out->v)
        return -1;
    cJSON_ArrayForEach(e, list) {
        struct seed_entry *s = &out->v[out->n++];
        s->target = dup_member(e, "target", &oom);
        s->from = dup_member(e, "from", &oom);
        s->unless = dup_member(e, "unless", &oom);
        s->user = dup_member(e, "user", &oom);
        s->group = dup_member(e, "group", &oom);
    }
    if (oom) {
        sections_seed_cfg_free(out);
        return -1;
    }
    return 0;
}

/* ---- skills ---- */

void sections_skills_cfg_free(struct skills_cfg *s)
{
    free(s->pub);
    free(s->priv);
    for (char **p = s->ignore; p && *p; p++)
        free(*p);
    free(s->ignore);
    free(s->marker);
    free(s->config_yaml);
    memset(s, 0, sizeof(*s));
}

int sections_skills_extract(const cJSON *sk, struct skills_cfg *out)
{
    const cJSON *ign = jget(sk, "ignore"), *g;
    bool oom = false;
    size_t n = 0;

    memset(out, 0, sizeof(*out));
    out->pub = dup_member(sk, "public", &oom);
    out->priv = dup_member(sk, "private", &oom);
    out->marker = strdup(jget_str_or(sk, "marker", CONFIG_SKILLS_MARKER));
    out->ignore = calloc((size_t)cJSON_GetArraySize(ign) + 1, sizeof(char *));
    if (!out->marker || !out->ignore)
        oom = true;
    cJSON_ArrayForEach(g, ign) {
        if (out->ignore && !(out->ignore[n++] = strdup(g->valuestring)))
            oom = true;
    }
    out->depth = (int)jget_int_or(sk, "depth", CONFIG_SKILLS_DEPTH);
    out->poll_ms = jget_int_or(sk, "poll_ms", 0);
    out->timeout_ms = jget_int_or(sk, "timeout_ms", CONFIG_SKILLS_WALK_TIMEOUT_MS);
    out->external_dirs = strcmp(jget_str_or(sk, "mode", "links"), "external_dirs") == 0;
    if (out->external_dirs)
        out->config_yaml = dup_member(sk, "config_yaml", &oom);
    if (oom) {
        sections_skills_cfg_free(out);
        return -1;
    }
    return 0;
}

/* ---- metrics ---- */

void sections_metrics_extract(const cJSON *m, struct metrics_cfg *out)
{
    out->disk_low_percent = (int)jget_int_or(m, "disk_low_percent", CONFIG_DISK_LOW_PERCENT);
    out->disk_ok_percent = (int)jget_int_or(
        m, "disk_ok_percent",
        out->disk_low_percent > CONFIG_DISK_OK_GAP ? out->disk_low_percent - CONFIG_DISK_OK_GAP
                                                   : 0);
    out->disk_check_ms = jget_int_or(m, "disk_check_ms", CONFIG_DISK_CHECK_MS);
}

/* ---- activity ---- */

void sections_activity_extract(const cJSON *a, struct activity_cfg *out)
{
    out->enabled = !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(a, "enabled"));
    out->idle_ms = jget_int_or(a, "idle_ms", CONFIG_ACTIVITY_IDLE_MS);
    out->sample_ms = jget_int_or(a, "sample_ms", CONFIG_ACTIVITY_SAMPLE_MS);
    out->cpu_percent = jget_int_or(a, "cpu_percent", CONFIG_ACTIVITY_CPU_PERCENT);
    out->egress_bytes = jget_int_or(a, "egress_bytes", CONFIG_ACTIVITY_EGRESS_BYTES);
    out->output_bytes = jget_int_or(a, "output_bytes", CONFIG_ACTIVITY_OUTPUT_BYTES);
    out->lease_max_ms = jget_int_or(a, "lease_max_ms", CONFIG_ACTIVITY_LEASE_MAX_MS);
    out->lease_interval_ms = jget_int_or(a, "lease_interval_ms", CONFIG_ACTIVITY_LEASE_INTERVAL_MS);
    out->lease_reason_max = jget_int_or(a, "lease_reason_max", CONFIG_ACTIVITY_LEASE_REASON_MAX);
}

/* ---- exec ---- */

void sections_exec_extract(const cJSON *e, struct exec_cfg *out)
{
    out->max_processes = (size_t)jget_int_or(e, "max_processes", CONFIG_EXEC_MAX_PROCESSES);
    out->buffer_bytes = (size_t)jget_int_or(e, "buffer_bytes", CONFIG_EXEC_BUFFER_BYTES);
    out->allow_uncontained = jget_bool_or(e, "allow_uncontained", true);
}

/* ---- files ---- */

void sections_files_extract(const cJSON *f, struct files_cfg *out)
{
    out->timeout_ms = jget_int_or(f, "timeout_ms", CONFIG_FILES_TIMEOUT_MS);
}

/* ---- envd ---- */

void sections_envd_extract(const cJSON *e, struct envd_cfg *out)
{
    struct err err;
    memset(out, 0, sizeof(*out));
    if (!e)
        return;
    out->enabled = true;
    if (netaddr_parse_listen(jget_str_or(e, "listen", ENVD_DEFAULT_LISTEN), out->host,
                             sizeof(out->host), &out->port, &err) < 0)
        netaddr_parse_listen(ENVD_DEFAULT_LISTEN, out->host, sizeof(out->host), &out->port, &err);
    snprintf(out->user, sizeof(out->user), "%s", jget_str_or(e, "user", ENVD_DEFAULT_USER));
    snprintf(out->cwd, sizeof(out->cwd), "%s", jget_str_or(e, "cwd", ""));
    snprintf(out->access_token, sizeof(out->access_token), "%s",
             jget_str_or(e, "access_token", ""));
    const cJSON *item;
    cJSON_ArrayForEach(item, jget(e, "users")) {
        if (out->n_users >= ENVD_MAX_ALIASES || !cJSON_IsString(item))
            break;
        snprintf(out->users[out->n_users].from, ENVD_NAME_MAX, "%s", item->string);
        snprintf(out->users[out->n_users].to, ENVD_NAME_MAX, "%s", item->valuestring);
        out->n_users++;
    }
    out->max_header_bytes = jget_int_or(e, "max_header_bytes", ENVD_DEFAULT_MAX_HEADER_BYTES);
    out->max_connections = jget_int_or(e, "max_connections", ENVD_DEFAULT_MAX_CONNECTIONS);
    out->max_streams = jget_int_or(e, "max_streams", ENVD_DEFAULT_MAX_STREAMS);
    out->watcher_idle_ms = jget_int_or(e, "watcher_idle_ms", ENVD_DEFAULT_WATCHER_IDLE_MS);
    out->max_upload_bytes = jget_int_or(e, "max_upload_bytes", ENVD_DEFAULT_MAX_UPLOAD_BYTES);
}

int sections_sysctl_extract(const cJSON *map, struct sysctl_cfg *out)
{
    const cJSON *item;
    int64_t n;

    memset(out, 0, sizeof(*out));
    size_t count = (size_t)cJSON_GetArraySize(map);
    if (!count)
        return 0;
    out->v = calloc(count, sizeof(*out->v));
    if (!out->v)
        return -1;
    cJSON_ArrayForEach(item, map) {
        struct sysctl_entry *e = &out->v[out->n++];
        char num[32];
        e->name = strdup(item->string);
        if (!e->name)
            return -1;
        if (cJSON_IsString(item)) {
            e->value = strdup(item->valuestring);
        } else if (jget_int(item, &n)) {
            snprintf(num, sizeof(num), "%lld", (long long)n);
            e->value = strdup(num);
        } else {
            continue; /* null: leave the kernel's value */
        }
        if (!e->value)
            return -1;
    }
    return 0;
}

void sections_sysctl_cfg_free(struct sysctl_cfg *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->v[i].name);
        free(s->v[i].value);
    }
    free(s->v);
    s->v = NULL;
    s->n = 0;
}
