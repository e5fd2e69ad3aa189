/* schema_tables: every key hearth's config knows, as one table per
 * object type (DESIGN section 5), the host_mounts string's inner array,
 * which is validated with its own table, and the public checks
 * (schema.h) that run the walker from the top table. The schema's calls
 * run one way: these tables -> the value checks (schema_rules.c) -> the
 * walker and its path helpers (schema.c). */
#include "schema_priv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "config.h"
#include "err.h"
#include "svc_config.h"

/* The schema tables (DESIGN section 5). Leaves first, then the objects
 * that use them. */

static const char *const e_log_level[] = {"error", "warn", "info", "debug", NULL};
static const char *const e_on_timeout[] = {"start", "fail", NULL};
static const char *const e_restart[] = {"always", "on-failure", "never", NULL};
static const char *const e_seccomp[] = {"default", "off", NULL};
static const char *const e_mount_rule[] = {"tag-per-share", "subpath", NULL};
static const char *const e_skills_mode[] = {"links", "external_dirs", NULL};

/* Shorthands so each table row reads as "key: type". Designated
 * initializers keep -Wextra quiet about the unset fields; variadic because
 * compound-literal schemas contain commas. */
#define KEY(n, ...) {.name = (n), .s = (__VA_ARGS__)}
#define REQUIRED(n, ...) {.name = (n), .s = (__VA_ARGS__), .required = true}
#define SCHEMA(...) (&(const struct schema){__VA_ARGS__})
#define STRING(fn) SCHEMA(.kind = K_STRING, .check = (fn))
#define INT(lo, hi) SCHEMA(.kind = K_INT, .min = (lo), .max = (hi))
#define ENUM(list) SCHEMA(.kind = K_ENUM, .names = (list))
#define OBJECT(table, fn) SCHEMA(.kind = K_OBJECT, .keys = (table), .check = (fn))
#define ARRAY(el, lo, hi, fn) \
    SCHEMA(.kind = K_ARRAY, .elem = (el), .min = (lo), .max = (hi), .check = (fn))
#define ANY(fn) SCHEMA(.kind = K_ANY, .check = (fn))

static const struct schema s_bool = {.kind = K_BOOL};
static const struct schema s_str = {.kind = K_STRING};
static const struct schema s_nonempty = {.kind = K_STRING, .min = 1};
static const struct schema s_abspath = {.kind = K_STRING, .check = rule_abspath};
static const struct schema s_ms = {.kind = K_INT, .min = 0, .max = JSON_INT53};
static const struct schema s_ip = {.kind = K_STRING, .check = rule_ip};
static const struct schema s_hostport = {.kind = K_STRING, .check = rule_hostport};
static const struct schema s_http_target = {.kind = K_STRING, .check = rule_http_target};
static const struct schema s_nonempty_array = {.kind = K_ARRAY, .elem = &s_nonempty};
static const struct schema s_abspath_array = {.kind = K_ARRAY, .elem = &s_abspath};
static const struct schema s_argv = {
    .kind = K_ARRAY, .min = 1, .elem = &s_str, .check = rule_argv};
static const struct schema s_cidr_list = {.kind = K_ARRAY, .elem = STRING(rule_cidr_net)};

static const struct key k_log[] = {
    KEY("level", ENUM(e_log_level)),
    {0}};

static const struct key k_control[] = {
    KEY("listen", ARRAY(STRING(rule_listen), 0, CONFIG_MAX_LISTEN, NULL)),
    KEY("allowed_cids", ARRAY(INT(0, 0xffffffffLL), 0, CONFIG_MAX_ALLOWED_CIDS, NULL)),
    KEY("idle_evict_ms", &s_ms),
    {0}};

static const struct key k_wait_for_init[] = {
    KEY("enabled", &s_bool),
    KEY("timeout_ms", &s_ms),
    KEY("on_timeout", ENUM(e_on_timeout)),
    {0}};

static const struct key k_clock[] = {
    KEY("set", &s_bool),
    KEY("step_threshold_ms", &s_ms),
    KEY("check_ms", &s_ms),
    KEY("detect_step_ms", &s_ms),
    {0}};

static const struct key k_metrics[] = {
    KEY("disk_low_percent", INT(0, 100)),
    KEY("disk_ok_percent", INT(0, 99)),
    KEY("disk_check_ms", &s_ms),
    {0}};

/* activity (activity.h): when the sandbox counts as busy, and leases. */
static const struct key k_activity[] = {
    KEY("enabled", &s_bool),
    KEY("idle_ms", INT(1000, JSON_INT53)),
    KEY("sample_ms", INT(100, 3600000)),
    KEY("cpu_percent", INT(1, 100000)),
    KEY("egress_bytes", INT(1, JSON_INT53)),
    KEY("output_bytes", INT(1, JSON_INT53)),
    KEY("lease_max_ms", INT(1000, JSON_INT53)),
    KEY("lease_interval_ms", INT(0, 3600000)),
    KEY("lease_reason_max", INT(1, 255)),
    {0}};

static const struct key k_service_activity[] = {
    KEY("lease", &s_bool),
    {0}};

static const struct key k_exec[] = {
    KEY("max_processes", INT(1, 64)),
    KEY("buffer_bytes", INT(4096, 64 * 1024 * 1024)),
    KEY("allow_uncontained", &s_bool),
    {0}};

static const struct key k_files[] = {
    KEY("timeout_ms", INT(100, 600000)),
    {0}};

/* envd (docs/envd.md): the E2B-compatible endpoint's listener, its
 * default user and directory, its token and its bounds. */
static const struct key k_envd[] = {
    KEY("listen", STRING(rule_envd_listen)),
    KEY("user", STRING(rule_account)),
    KEY("users", SCHEMA(.kind = K_MAP, .max = ENVD_MAX_ALIASES, .elem = STRING(rule_account),
                        .key_check = rule_envd_alias)),
    KEY("cwd", &s_abspath),
    KEY("access_token", STRING(rule_envd_token)),
    KEY("max_header_bytes", INT(1024, 1024 * 1024)),
    KEY("max_connections", INT(1, 1024)),
    KEY("max_streams", INT(1, 1024)),
    KEY("max_upload_bytes", INT(0, JSON_INT53)),
    KEY("watcher_idle_ms", INT(1000, 86400000)),
    {0}};

static const struct key k_interface[] = {
    REQUIRED("name", STRING(rule_ifname)),
    KEY("mac", STRING(rule_mac)),
    KEY("address", STRING(rule_ifaddr)),
    KEY("gateway", &s_ip),
    KEY("mtu", INT(68, 65535)),
    KEY("required", &s_bool),
    KEY("timeout_ms", &s_ms),
    {0}};

/* A route hearth keeps in the main table (RTM_NEWROUTE, replacing). */
static const struct key k_route[] = {
    REQUIRED("to", STRING(rule_route_to)),
    KEY("via", &s_ip),
    REQUIRED("dev", STRING(rule_ifname)),
    KEY("metric", INT(0, 0xffffffffLL)),
    KEY("mtu", INT(68, 65535)),
    {0}};

/* A permanent neighbour entry (RTM_NEWNEIGH, NUD_PERMANENT). */
static const struct key k_neighbour[] = {
    REQUIRED("ip", &s_ip),
    REQUIRED("mac", STRING(rule_mac)),
    REQUIRED("dev", STRING(rule_ifname)),
    {0}};

static const struct key k_network[] = {
    KEY("interfaces", ARRAY(OBJECT(k_interface, NULL), 0, 0, NULL)),
    KEY("routes", ARRAY(OBJECT(k_route, NULL), 0, NETWORK_MAX_ROUTES, NULL)),
    KEY("neighbours", ARRAY(OBJECT(k_neighbour, NULL), 0, NETWORK_MAX_NEIGHS, NULL)),
    KEY("dns", ARRAY(&s_ip, 0, 0, NULL)),
    KEY("resolv_conf", &s_abspath),
    {0}};

static const struct key k_mount[] = {
    KEY("source", &s_nonempty),
    REQUIRED("target", STRING(rule_clean_path)),
    KEY("type", SCHEMA(.kind = K_STRING, .min = 1, .check = rule_fstype)),
    KEY("read_only", &s_bool),
    KEY("options", &s_str),
    KEY("required", &s_bool),
    KEY("timeout_ms", &s_ms),
    KEY("owner", STRING(rule_owner)),
    {0}};

/* The platform's own shape, inside the host_mounts string. */
static const struct key k_host_mount[] = {
    REQUIRED("hostPath", STRING(rule_clean_path)),
    REQUIRED("mountPath", STRING(rule_clean_path)),
    KEY("readOnly", &s_bool),
    {0}};
static const struct schema s_host_mount_list = {
    .kind = K_ARRAY, .elem = OBJECT(k_host_mount, NULL)};

static const struct key k_mount_rule[] = {
    KEY("mode", ENUM(e_mount_rule)),
    KEY("tag", &s_nonempty),
    KEY("host_root", STRING(rule_clean_path)),
    KEY("owner", STRING(rule_owner)),
    {0}};

static const struct key k_seed[] = {
    REQUIRED("target", &s_abspath),
    REQUIRED("from", &s_abspath),
    KEY("unless", &s_nonempty),
    KEY("user", STRING(rule_account)),
    KEY("group", STRING(rule_account)),
    {0}};

static const struct key k_skills[] = {
    KEY("public", &s_abspath),
    KEY("private", &s_abspath),
    KEY("ignore", &s_nonempty_array),
    KEY("poll_ms", &s_ms),
    KEY("marker", STRING(rule_filename)),
    KEY("depth", INT(1, 8)),
    KEY("timeout_ms", INT(100, 3600000)),
    KEY("mode", ENUM(e_skills_mode)),
    KEY("config_yaml", &s_abspath),
    {0}};

static const struct key k_egress[] = {
    KEY("allowPublicTraffic", &s_bool),
    KEY("allowOut", &s_cidr_list),
    KEY("denyOut", &s_cidr_list),
    KEY("deny_local_ports", ARRAY(STRING(rule_local_port), 0, EGRESS_MAX_LOCAL_PORTS, NULL)),
    {0}};

static const struct key k_backoff[] = {
    KEY("initial_ms", &s_ms),
    KEY("max_ms", &s_ms),
    KEY("reset_after_ms", &s_ms),
    {0}};

static const struct key k_ready[] = {
    KEY("tcp", &s_hostport),
    KEY("http", &s_http_target),
    KEY("unix", &s_abspath),
    KEY("file", &s_abspath),
    KEY("notify_fd", INT(3, 1023)),
    KEY("notify", &s_bool),
    KEY("exec", &s_argv),
    KEY("timeout_ms", &s_ms),
    KEY("attempts", INT(0, JSON_INT53)),
    {0}};

static const struct key k_health[] = {
    KEY("tcp", &s_hostport),
    KEY("http", &s_http_target),
    KEY("unix", &s_abspath),
    KEY("exec", &s_argv),
    KEY("watchdog_ms", INT(1, INT64_C(2147483647))),
    KEY("interval_ms", INT(1, JSON_INT53)),
    KEY("timeout_ms", &s_ms),
    KEY("failures", INT(1, JSON_INT53)),
    {0}};

static const struct key k_stop[] = {
    KEY("signal", STRING(rule_signal)),
    KEY("timeout_ms", &s_ms),
    {0}};

static const struct key k_service_log[] = {
    KEY("file", &s_abspath),
    KEY("max_bytes", INT(0, JSON_INT53)),
    KEY("keep", INT(0, 100)),
    KEY("ring_lines", INT(0, 100000)),
    {0}};

/* A page is the least the kernel can account; below 1 MiB no program
 * would start, so such a value is a unit mistake. */
static const struct key k_limits[] = {
    KEY("memory_max", INT(1 << 20, JSON_INT53)),
    KEY("memory_high", INT(1 << 20, JSON_INT53)),
    KEY("pids_max", INT(1, 4194304)),
    KEY("tmp_bytes", INT(1 << 20, JSON_INT53)),
    KEY("shm_bytes", INT(1 << 20, JSON_INT53)),
    {0}};

/* The guest-wide limits: the memory every service together leaves to
 * hearth and the kernel, and the defaults of each service's limits. 0
 * turns the reserve or the default pids.max off. */
static const struct key k_top_limits[] = {
    KEY("memory_reserve", INT(0, JSON_INT53)),
    KEY("pids_max", INT(0, 4194304)),
    KEY("tmp_bytes", INT(1 << 20, JSON_INT53)),
    KEY("shm_bytes", INT(1 << 20, JSON_INT53)),
    {0}};

/* A per-sandbox secret made at a service's start (svc_config.h). */
static const struct key k_secret[] = {
    REQUIRED("env", STRING(rule_env_name)),
    REQUIRED("file", STRING(rule_secret_file)),
    KEY("chars", INT(SVC_SECRET_CHARS_MIN, SVC_SECRET_CHARS_MAX)),
    {0}};

static const struct key k_service[] = {
    REQUIRED("name", STRING(rule_service_name)),
    REQUIRED("argv", &s_argv),
    KEY("env", SCHEMA(.kind = K_MAP, .max = CONFIG_MAX_ENV_VARS, .elem = &s_str,
                      .key_check = rule_env_key)),
    KEY("env_files", &s_abspath_array),
    KEY("secrets", ARRAY(OBJECT(k_secret, NULL), 0, SVC_SECRETS_MAX, NULL)),
    KEY("cwd", &s_abspath),
    KEY("user", &s_nonempty),
    KEY("group", &s_nonempty),
    KEY("umask", ANY(rule_umask)),
    KEY("rlimits", SCHEMA(.kind = K_MAP, .elem = ANY(rule_rlimit_value),
                          .key_check = rule_rlimit_key)),
    KEY("oom_score_adj", INT(-1000, 1000)),
    KEY("after", &s_nonempty_array),
    KEY("restart", ENUM(e_restart)),
    KEY("main", &s_bool),
    KEY("backoff", OBJECT(k_backoff, rule_backoff)),
    KEY("ready", OBJECT(k_ready, rule_ready)),
    KEY("health", OBJECT(k_health, rule_health)),
    KEY("stop", OBJECT(k_stop, NULL)),
    KEY("success_exit_codes", ARRAY(INT(0, 255), 0, 256, NULL)),
    KEY("restart_force_exit_codes", ARRAY(INT(0, 255), 0, 256, NULL)),
    KEY("restart_prevent_exit_codes", ARRAY(INT(0, 255), 0, 256, NULL)),
    KEY("on_resume", STRING(rule_on_resume)),
    KEY("caps_keep", ARRAY(STRING(rule_cap), 0, 0, NULL)),
    KEY("caps_drop", ARRAY(STRING(rule_cap), 0, 0, NULL)),
    KEY("no_new_privs", &s_bool),
    KEY("isolation", &s_bool),
    KEY("seccomp", ENUM(e_seccomp)),
    KEY("read_only_root", &s_bool),
    KEY("writable", ARRAY(&s_abspath, 0, CONFIG_MAX_WRITABLE, NULL)),
    KEY("log", OBJECT(k_service_log, NULL)),
    KEY("limits", OBJECT(k_limits, NULL)),
    KEY("activity", OBJECT(k_service_activity, NULL)),
    {0}};

static const struct key k_top[] = {
    KEY("hostname", STRING(rule_hostname)),
    KEY("log", OBJECT(k_log, NULL)),
    KEY("control", OBJECT(k_control, NULL)),
    KEY("modules", ARRAY(SCHEMA(.kind = K_STRING, .min = 1, .check = rule_module), 0, 0, NULL)),
    KEY("wait_for_init", OBJECT(k_wait_for_init, NULL)),
    KEY("clock", OBJECT(k_clock, NULL)),
    KEY("resume_file", STRING(rule_resume_file)),
    KEY("metrics", OBJECT(k_metrics, rule_metrics)),
    KEY("exec", OBJECT(k_exec, NULL)),
    KEY("files", OBJECT(k_files, NULL)),
    KEY("envd", OBJECT(k_envd, NULL)),
    KEY("activity", OBJECT(k_activity, NULL)),
    KEY("limits", OBJECT(k_top_limits, NULL)),
    KEY("network", OBJECT(k_network, rule_network)),
    KEY("mounts", ARRAY(OBJECT(k_mount, rule_mount), 0, 0, rule_mounts)),
    KEY("host_mounts", STRING(rule_host_mounts)),
    KEY("host_mounts_rule", OBJECT(k_mount_rule, rule_mount_rule)),
    KEY("seed", ARRAY(OBJECT(k_seed, NULL), 0, 0, NULL)),
    KEY("skills", OBJECT(k_skills, rule_skills)),
    KEY("egress", OBJECT(k_egress, NULL)),
    KEY("sysctl", SCHEMA(.kind = K_MAP, .max = SYSCTL_CFG_MAX, .elem = ANY(rule_sysctl_value),
                         .key_check = rule_sysctl_name)),
    KEY("services", ARRAY(OBJECT(k_service, rule_exit_codes), 0, CONFIG_MAX_SERVICES, rule_services)),
    {0}};

const struct schema schema_top = {.kind = K_OBJECT, .keys = k_top, .check = rule_top};

/* host_mounts is a JSON array inside a string (the platform's metadata,
 * passed through verbatim); its entries are validated with their own
 * table and errors continue the outer path: host_mounts[0].mountPath. */
int rule_host_mounts(const cJSON *v, struct vctx *c)
{
    const char *s = v->valuestring;
    struct err reason;
    cJSON *inner;
    size_t len = strlen(s), i;
    int r;

    /* An empty string is how some hosts say "no shares". */
    for (i = 0; i < len && strchr(" \t\r\n", s[i]); i++)
        ;
    if (i == len)
        return 0;
    inner = schema_parse_json(s, len, &reason);
    if (!inner)
        return vfail(c, "bad JSON in string: %s", reason.msg);
    if (!cJSON_IsArray(inner)) {
        cJSON_Delete(inner);
        return vfail(c, "expected a JSON array in the string");
    }
    r = schema_validate(inner, &s_host_mount_list, c);
    cJSON_Delete(inner);
    return r;
}

/* ------------------------------------------------------------------ */
/* Public entry points: the document, or one section, against the top
 * table. They live with the tables, above the walker, so the walker
 * names no table and the tables may call it (host_mounts). */

int schema_check_document(const cJSON *root, struct err *err)
{
    struct vctx c;

    memset(&c, 0, sizeof(c));
    c.err = err;
    return schema_validate(root, &schema_top, &c);
}

int schema_check_section(const char *key, const cJSON *value, struct err *err)
{
    struct err scratch;
    const struct key *k = schema_top.keys;
    struct vctx c;

    if (!err)
        err = &scratch;
    memset(&c, 0, sizeof(c));
    c.err = err;
    if (!key)
        return vfail(&c, "no section named");
    while (k->name && strcmp(k->name, key) != 0)
        k++;
    vpath_key(&c, key);
    if (!k->name)
        return vfail(&c, "unknown key");
    if (!value)
        return vfail(&c, "missing value");
    return schema_validate(value, k->s, &c);
}
