/* schema_priv: what the walker (schema.c), the value checks
 * (schema_rules.c) and the tables (schema_tables.c) share. Not for other
 * modules: they use schema.h. The tables call the checks and the walker;
 * the checks call only the walker's path helpers; the walker is handed
 * its table and names none. */
#ifndef HEARTH_SCHEMA_PRIV_H
#define HEARTH_SCHEMA_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jsonget.h"
#include "names.h"
#include "schema.h"

#include <cJSON.h>

/* The JSON path being validated and the output buffer. */
struct vctx {
    char path[SCHEMA_ERR_MAX];
    size_t len;
    struct err *err;
};

/* Appends to the path and returns the previous length, which vpath_pop
 * restores. A path too long for the buffer is truncated, never overrun. */
size_t vpath_append(struct vctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
size_t vpath_key(struct vctx *c, const char *key);
size_t vpath_index(struct vctx *c, size_t i);
void vpath_pop(struct vctx *c, size_t old);
/* Writes "<path>: <reason>" and returns -1 so checks can `return vfail(...)`. */
int vfail(struct vctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool name_in_list(const char *s, const char *const *list);

enum kind {
    K_STRING, /* min/max bound the length; max 0 = unbounded */
    K_INT,    /* integral JSON number within min..max */
    K_BOOL,
    K_ENUM,   /* string, one of names */
    K_OBJECT, /* keys from the table; unknown keys are errors */
    K_ARRAY,  /* elements of elem; min/max bound the count */
    K_MAP,    /* free-form keys (key_check), values of elem */
    K_ANY,    /* check does all the work (values of more than one type) */
};

struct schema;
typedef int (*check_fn)(const cJSON *v, struct vctx *c);

struct key {
    const char *name;
    const struct schema *s;
    bool required;
};

struct schema {
    enum kind kind;
    int64_t min, max;
    const struct key *keys;
    const struct schema *elem;
    const char *const *names;
    check_fn check;     /* after the type checks passed */
    check_fn key_check; /* K_MAP: called per entry, path at the map */
};

/* Checks v against s, the path in c naming v. */
int schema_validate(const cJSON *v, const struct schema *s, struct vctx *c);
/* The whole document (schema_tables.c, for its entry points). */
extern const struct schema schema_top;

/* Value checks (schema_rules.c). */
int rule_abspath(const cJSON *v, struct vctx *c);
int rule_filename(const cJSON *v, struct vctx *c);
int rule_account(const cJSON *v, struct vctx *c);
int rule_owner(const cJSON *v, struct vctx *c);
int rule_clean_path(const cJSON *v, struct vctx *c);
int rule_hostname(const cJSON *v, struct vctx *c);
int rule_listen(const cJSON *v, struct vctx *c);
int rule_envd_listen(const cJSON *v, struct vctx *c);
int rule_envd_alias(const cJSON *item, struct vctx *c);
int rule_envd_token(const cJSON *v, struct vctx *c);
int rule_module(const cJSON *v, struct vctx *c);
int rule_ifname(const cJSON *v, struct vctx *c);
int rule_mac(const cJSON *v, struct vctx *c);
int rule_ifaddr(const cJSON *v, struct vctx *c);
int rule_ip(const cJSON *v, struct vctx *c);
int rule_cidr_net(const cJSON *v, struct vctx *c);
int rule_local_port(const cJSON *v, struct vctx *c);
int rule_route_to(const cJSON *v, struct vctx *c);
int rule_network(const cJSON *v, struct vctx *c);
int rule_fstype(const cJSON *v, struct vctx *c);
int rule_service_name(const cJSON *v, struct vctx *c);
int rule_argv(const cJSON *v, struct vctx *c);
int rule_env_key(const cJSON *item, struct vctx *c);
int rule_env_name(const cJSON *v, struct vctx *c);
int rule_secret_file(const cJSON *v, struct vctx *c);
int rule_umask(const cJSON *v, struct vctx *c);
int rule_rlimit_key(const cJSON *item, struct vctx *c);
int rule_rlimit_value(const cJSON *v, struct vctx *c);
int rule_hostport(const cJSON *v, struct vctx *c);
int rule_http_target(const cJSON *v, struct vctx *c);
int rule_signal(const cJSON *v, struct vctx *c);
int rule_on_resume(const cJSON *v, struct vctx *c);
int rule_cap(const cJSON *v, struct vctx *c);
int rule_backoff(const cJSON *v, struct vctx *c);
int rule_ready(const cJSON *v, struct vctx *c);
int rule_health(const cJSON *v, struct vctx *c);
int rule_exit_codes(const cJSON *svc, struct vctx *c);
int rule_mount(const cJSON *v, struct vctx *c);
int rule_mounts(const cJSON *arr, struct vctx *c);
int rule_mount_rule(const cJSON *v, struct vctx *c);
int rule_metrics(const cJSON *v, struct vctx *c);
int rule_skills(const cJSON *v, struct vctx *c);
int rule_resume_file(const cJSON *v, struct vctx *c);
int rule_sysctl_name(const cJSON *item, struct vctx *c);
int rule_sysctl_value(const cJSON *v, struct vctx *c);
int rule_top(const cJSON *root, struct vctx *c);
int rule_services(const cJSON *arr, struct vctx *c);
/* host_mounts: a JSON array inside a string (schema_tables.c). */
int rule_host_mounts(const cJSON *v, struct vctx *c);

#endif
