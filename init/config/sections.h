/* sections: the typed forms of the config's non-service sections
 * (egress, network, ...), with their extraction from validated JSON. Each
 * module that acts on a section reads it from here through struct config,
 * never from the JSON. */
#ifndef HEARTH_SECTIONS_H
#define HEARTH_SECTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cidr.h"
#include "err.h"
#include "netaddr.h"

struct cJSON;

/* An egress policy, parsed once: the lists as CIDRs (denyOut with the
 * always-denied ranges after the stated ones), and the policy as stated
 * with every field present, for reports. */
/* egress.deny_local_ports: at most this many entries. */
#define EGRESS_MAX_LOCAL_PORTS 16

struct egress_policy {
    bool present;               /* a policy was given */
    /* Local ports services may not reach (deny_local_ports, or its
     * default when the key or the whole section is absent). */
    struct port_range lports[EGRESS_MAX_LOCAL_PORTS];
    size_t n_lports;
    bool allow_public;          /* allowPublicTraffic, default true */
    struct cidr *allow, *deny;
    size_t n_allow, n_deny;
    struct cJSON *stated;       /* {allowPublicTraffic, allowOut, denyOut} */
    char error[256];            /* a given policy that could not be parsed: why */
};

/* Validates a policy (the `egress` schema, then the bounds of the lists)
 * and parses it into out, in one pass: what egress.set and sandbox.init
 * use. Returns 0, or -1 with err naming the field (out is then empty). */
int sections_egress_parse(const struct cJSON *policy, struct egress_policy *out, struct err *err);
/* The config's `egress` section, which the schema has checked (NULL:
 * absent); a policy past the bounds keeps its reason in out->error. */
void sections_egress_extract(const struct cJSON *policy, struct egress_policy *out);
void sections_egress_policy_free(struct egress_policy *p);
/* deny_local_ports in its canonical text, as a JSON array (NULL when out
 * of memory). */
struct cJSON *sections_egress_lports_json(const struct egress_policy *p);
/* A deep copy (0), or -1 when out of memory (dst is then empty). */
int sections_egress_policy_copy(struct egress_policy *dst, const struct egress_policy *src);

/* How many interfaces and DNS servers the config keeps (network.c
 * configures the first 16 interfaces and writes the first 8 servers; the
 * egress policy always allows every gateway and server kept). */
#define NETWORK_CFG_MAX 64

/* One `network.interfaces` entry, parsed. */
struct net_iface_cfg {
    char name[16];
    bool has_mac, has_addr, has_gw, required;
    uint8_t mac[6];
    int fam, gw_fam, prefix, mtu;   /* mtu 0 = leave as is */
    uint8_t addr[16], gw[16];
    char addr_s[64], gw_s[64];      /* as stated */
    int64_t timeout_ms;
};

/* What network.c acts on: the first 16 interfaces and 8 name servers
 * of the config (a longer list is logged); sandbox.init and
 * sandbox.resume refuse more. */
#define NETWORK_USED_IFACES 16
#define NETWORK_USED_DNS 8
/* Bounds of `routes` and `neighbours` (the schema refuses more). */
#define NETWORK_MAX_ROUTES 64
#define NETWORK_MAX_NEIGHS 64

/* One `network.routes` entry, parsed ("default" is a /0 of via's family,
 * IPv4 without via). */
struct net_route_cfg {
    int fam, dst_len;
    uint8_t dst[16];
    bool has_via, has_metric;
    uint8_t via[16];
    uint32_t metric;
    int mtu;                        /* 0 = none */
    char dev[16];
    char to_s[64], via_s[64];       /* as stated */
};

/* One `network.neighbours` entry, parsed. */
struct net_neigh_cfg {
    int fam;
    uint8_t ip[16], mac[6];
    char dev[16];
    char ip_s[64];
};

/* The `network` section, parsed. */
struct network_cfg {
    /* the counts first, on one page with the rest of the config */
    size_t n_ifs, n_dropped;        /* entries beyond NETWORK_CFG_MAX */
    size_t n_dns, n_routes, n_neighs;
    char resolv[256];
    struct net_iface_cfg ifs[NETWORK_CFG_MAX];
    char dns[NETWORK_CFG_MAX][64];
    struct net_route_cfg routes[NETWORK_MAX_ROUTES];
    struct net_neigh_cfg neighs[NETWORK_MAX_NEIGHS];
};

/* Extracts a `network` section the schema has checked (NULL: absent),
 * with the defaults of config.h. Entries past n_ifs, n_dns, n_routes and
 * n_neighs are left as they were (not cleared). */
void sections_network_extract(const struct cJSON *net, struct network_cfg *out);
/* Validates a `network` object as sandbox.init and sandbox.resume
 * receive it (the schema, then at most NETWORK_USED_IFACES interfaces
 * and NETWORK_USED_DNS servers) and extracts it, in one pass. Returns 0,
 * or -1 with err naming the field ("network.interfaces[1].mac: ..."). */
int sections_network_parse(const struct cJSON *net, struct network_cfg *out, struct err *err);

/* One `mounts` entry, parsed (NULL strings: not given). */
struct mount_cfg {
    char *source, *target, *type, *options;
    char *owner;                /* "USER" or "USER:GROUP" (NULL: left as it is) */
    bool read_only, required;
    int64_t timeout_ms;
};

/* One `host_mounts` entry (the platform's shape). */
struct host_mount_cfg {
    char *host_path, *mount_path;
    bool read_only;
};

struct host_mounts_cfg {
    struct host_mount_cfg *v;
    size_t n;
};

/* `mounts`, `host_mounts_rule` and `host_mounts`, parsed. */
struct mounts_cfg {
    struct mount_cfg *v;
    size_t n;
    char rule_mode[16], rule_tag[256], rule_root[512];
    char rule_owner[160];       /* host_mounts_rule.owner, "" when not given */
    struct host_mounts_cfg host;
};

/* Validates host_mounts (the platform's JSON array string, or from
 * sandbox.init the array itself, checked in its string form) and parses
 * it, in one pass. Returns 0, or -1 with err naming the field. */
int sections_host_mounts_parse(const struct cJSON *v, struct host_mounts_cfg *out, struct err *err);
void sections_host_mounts_free(struct host_mounts_cfg *h);
/* The three sections from a checked config. Returns 0, or -1 when out
 * of memory. */
int sections_mounts_extract(const struct cJSON *root, struct mounts_cfg *out);
void sections_mounts_cfg_free(struct mounts_cfg *m);

/* One `seed` entry (unless, user and group NULL when not given). */
struct seed_entry {
    char *target, *from, *unless;
    char *user, *group;         /* who owns what the seeding makes */
};

struct seed_cfg {
    struct seed_entry *v;
    size_t n;
};

/* `seed` from a checked config (NULL: absent). 0, or -1 out of memory. */
int sections_seed_extract(const struct cJSON *list, struct seed_cfg *out);
void sections_seed_cfg_free(struct seed_cfg *s);

/* `skills`: the overlay is on when both public and private are given. */
struct skills_cfg {
    char *pub, *priv;           /* NULL when not given */
    char **ignore;              /* NULL-terminated; never NULL once extracted */
    char *marker;
    int depth;
    int64_t poll_ms, timeout_ms;
    bool external_dirs; /* mode "external_dirs": no links, Hermes's config lists public */
    char *config_yaml;  /* that mode's config.yaml; NULL otherwise */
};

/* `skills` from a checked config (NULL: absent), with the defaults of
 * config.h. 0, or -1 out of memory. */
int sections_skills_extract(const struct cJSON *sk, struct skills_cfg *out);
void sections_skills_cfg_free(struct skills_cfg *s);

/* `metrics`: the disk thresholds and the check period. */
struct metrics_cfg {
    int disk_low_percent, disk_ok_percent;
    int64_t disk_check_ms;
};

/* `metrics` from a checked config (NULL: absent), with the defaults. */
void sections_metrics_extract(const struct cJSON *m, struct metrics_cfg *out);

/* `activity`: when the sandbox counts as busy, and the lease rules. */
struct activity_cfg {
    bool enabled;
    int64_t idle_ms, sample_ms, cpu_percent, egress_bytes, output_bytes;
    int64_t lease_max_ms, lease_interval_ms, lease_reason_max;
};

/* `activity` from a checked config (NULL: absent), with the defaults. */
void sections_activity_extract(const struct cJSON *a, struct activity_cfg *out);

/* `exec`: the limits of processes started by the host. */
struct exec_cfg {
    size_t max_processes, buffer_bytes;
    bool allow_uncontained; /* exec.start may ask for "isolation": false */
};

/* `exec` from a checked config (NULL: absent), with the defaults. */
void sections_exec_extract(const struct cJSON *e, struct exec_cfg *out);

/* `files`: the files.* methods' deadline on shares. */
struct files_cfg {
    int64_t timeout_ms;
};

/* `files` from a checked config (NULL: absent), with the defaults. */
void sections_files_extract(const struct cJSON *f, struct files_cfg *out);

/* `envd`: the E2B-compatible endpoint (docs/envd.md). Present means on. */
#define ENVD_DEFAULT_LISTEN "tcp:0.0.0.0:49983"
#define ENVD_DEFAULT_USER "root"
#define ENVD_DEFAULT_MAX_HEADER_BYTES 16384
#define ENVD_DEFAULT_MAX_CONNECTIONS 64
#define ENVD_DEFAULT_MAX_STREAMS 32
#define ENVD_DEFAULT_MAX_UPLOAD_BYTES (1024LL * 1024 * 1024)
#define ENVD_DEFAULT_WATCHER_IDLE_MS 300000
#define ENVD_MAX_ALIASES 32
#define ENVD_NAME_MAX 64
#define ENVD_TOKEN_MAX 256
struct envd_cfg {
    bool enabled;
    char host[64];              /* numeric IPv4 or IPv6 address, brackets cut */
    uint16_t port;
    char user[ENVD_NAME_MAX];   /* the user of a call that names none */
    char cwd[256];              /* "" = the user's home */
    char access_token[ENVD_TOKEN_MAX]; /* "" = none */
    struct {
        char from[ENVD_NAME_MAX], to[ENVD_NAME_MAX];
    } users[ENVD_MAX_ALIASES];  /* user names the SDK sends -> image accounts */
    size_t n_users;
    int64_t max_header_bytes, max_connections, max_streams, max_upload_bytes;
    int64_t watcher_idle_ms;    /* a polling watcher nobody polls this long goes */
};

/* `envd` from a checked config (NULL: absent, off), with the defaults. */
void sections_envd_extract(const struct cJSON *e, struct envd_cfg *out);

/* `sysctl`: the operator's sysctls, each a name (validated: see
 * names_sysctl_path) and the text to write, or NULL for "leave the
 * kernel's value" (null in the config). */
#define SYSCTL_CFG_MAX 64
#define SYSCTL_VALUE_MAX 255
struct sysctl_entry {
    char *name, *value;
};

struct sysctl_cfg {
    struct sysctl_entry *v;
    size_t n;
};

/* `sysctl` from a checked config (NULL: absent); an integer becomes its
 * decimal text. 0, or -1 out of memory. */
int sections_sysctl_extract(const struct cJSON *map, struct sysctl_cfg *out);
void sections_sysctl_cfg_free(struct sysctl_cfg *s);

#endif
