/* config: loads /etc/hearth/hearth.json, validates every key against the
 * schema (schema.h; errors name the JSON path: "services[0].backoff.max_ms:
 * expected integer"), and extracts the typed settings the rest of hearth
 * uses. The defaults of every key are here.
 *
 * The validated cJSON tree is kept (config->json) so config.get can return
 * it (with secrets redacted); the non-service sections are read only in
 * their typed form (sections.h), the per-service ready, health, log, launch
 * and containment settings in theirs (svc_config.h). */
#ifndef HEARTH_CONFIG_H
#define HEARTH_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#include "err.h"
#include "log.h"
#include "proto.h"
#include "names.h"
#include "sections.h"
#include "schema.h"

struct cJSON;

#define CONFIG_DEFAULT_PATH "/etc/hearth/hearth.json"
#define CONFIG_MAX_BYTES (1 << 20)
#define CONFIG_ERR_MAX SCHEMA_ERR_MAX
#define CONFIG_MAX_SERVICES 64
#define CONFIG_MAX_LISTEN 8
/* A service's `writable` paths. */
#define CONFIG_MAX_WRITABLE 16
/* limits.pids_max when unset: a fork bomb ends at this many tasks in its
 * service, far above what an agent and its tools run at once. */
#define CONFIG_PIDS_MAX_DEFAULT 2048
/* control.idle_evict_ms when unset: a client silent this long gives up its
 * slot when all are taken. */
#define CONFIG_IDLE_EVICT_MS 30000
/* control.listen and control.allowed_cids when unset. */
#define CONFIG_DEFAULT_UNIX_LISTEN PROTO_DEFAULT_CONNECT
#define CONFIG_DEFAULT_VSOCK_LISTEN "vsock:1025"
#define CONFIG_DEFAULT_HOST_CID 2u
#define CONFIG_MAX_ALLOWED_CIDS 16
/* A service's backoff and stop keys when unset. */
#define CONFIG_BACKOFF_INITIAL_MS 500
#define CONFIG_BACKOFF_MAX_MS 30000
#define CONFIG_BACKOFF_RESET_MS 60000
#define CONFIG_STOP_TIMEOUT_MS 10000
#define CONFIG_MAX_ENV_VARS 4096
/* network.resolv_conf and an interface's timeout_ms when unset. */
#define CONFIG_RESOLV_CONF "/etc/resolv.conf"
#define CONFIG_IFACE_TIMEOUT_MS 10000
/* A mount's timeout_ms (and a host_mounts entry's), host_mounts_rule's
 * mode and host_root when unset. */
#define CONFIG_MOUNT_TIMEOUT_MS 10000
#define CONFIG_MOUNT_RULE_MODE "tag-per-share"
#define CONFIG_MOUNT_HOST_ROOT "/"
/* skills.marker, skills.depth and skills.timeout_ms when unset (a walk
 * running longer is killed). */
#define CONFIG_SKILLS_MARKER "SKILL.md"
#define CONFIG_SKILLS_DEPTH 2
#define CONFIG_SKILLS_WALK_TIMEOUT_MS 60000
/* clock.check_ms when unset (clock.step_threshold_ms's default is
 * clock.h's CLOCK_DEFAULT_THRESHOLD_MS). */
#define CONFIG_CLOCK_CHECK_MS 30000
/* clock.detect_step_ms when unset: a leap second (exactly 1 s) is not
 * more than it. */
#define CONFIG_CLOCK_DETECT_STEP_MS 1000

enum restart_policy { RESTART_ALWAYS, RESTART_ON_FAILURE, RESTART_NEVER };

struct env_var {
    char *key;
    char *value;
};

struct svc_settings;

struct service_config {
    char *name;
    char **argv;              /* NULL-terminated */
    size_t argc;
    struct env_var *env;
    size_t n_env;
    char **env_files;
    size_t n_env_files;
    char *cwd;                /* NULL = "/" */
    char *user;               /* NULL = current user */
    char *group;
    char **after;             /* service names or phases */
    size_t n_after;
    enum restart_policy restart;
    bool main;
    int64_t backoff_initial_ms; /* default 500 */
    int64_t backoff_max_ms;     /* default 30000 */
    int64_t backoff_reset_ms;   /* default 60000 */
    int stop_signal;            /* default SIGTERM */
    int64_t stop_timeout_ms;    /* default 10000 */
    int *success_exit_codes;    /* default {0} */
    size_t n_success;
    char *on_resume;            /* "none" | "restart" | "restart:SIGxxx" | "signal:SIGxxx"; NULL = none */
    /* restart_force_exit_codes / restart_prevent_exit_codes as bit sets
     * over 0..255 (config_code_in) */
    unsigned char force_exit[32], prevent_exit[32];
    /* limits: written to the service's cgroup leaf before each start;
     * 0 = not set (the leaf's default, "max"). */
    int64_t memory_max, memory_high, pids_max;
    /* limits.tmp_bytes, limits.shm_bytes: the sizes of its private /tmp
     * and /dev/shm; 0 = the guest-wide default (config.limits). */
    int64_t tmp_bytes, shm_bytes;
    struct cJSON *json;         /* this service's validated object */
    /* ready, health, log, launch and containment settings in typed form
     * (svc_config.h), built at load */
    struct svc_settings *settings;
};

/* Defaults of the metrics and resume_file keys. */
#define CONFIG_DISK_LOW_PERCENT 90
#define CONFIG_DISK_OK_GAP 5
#define CONFIG_DISK_CHECK_MS 60000
/* Defaults of the activity keys. */
#define CONFIG_ACTIVITY_IDLE_MS 30000
#define CONFIG_ACTIVITY_SAMPLE_MS 5000
#define CONFIG_ACTIVITY_CPU_PERCENT 5
#define CONFIG_ACTIVITY_EGRESS_BYTES 4096
#define CONFIG_ACTIVITY_OUTPUT_BYTES 1
#define CONFIG_ACTIVITY_LEASE_MAX_MS 3600000
#define CONFIG_ACTIVITY_LEASE_INTERVAL_MS 1000
#define CONFIG_ACTIVITY_LEASE_REASON_MAX 128
#define CONFIG_RESUME_FILE "/run/hearth-news/resume"
/* Defaults of the exec keys: processes at once, output kept per process. */
#define CONFIG_EXEC_MAX_PROCESSES 16
#define CONFIG_EXEC_BUFFER_BYTES (1024 * 1024)
/* How long a files.* call on a share may take in its child process:
 * under hearthctl's own 10 s wait for a reply, so the host sees hearth's
 * error naming the mount rather than its own timeout. */
#define CONFIG_FILES_TIMEOUT_MS 5000

struct config {
    char *hostname;             /* NULL = leave as is */
    enum log_level log_level;
    struct listen_spec listen[CONFIG_MAX_LISTEN];
    size_t n_listen;
    uint32_t allowed_cids[CONFIG_MAX_ALLOWED_CIDS];
    size_t n_allowed_cids;      /* default: 1 entry, CID 2 (the host) */
    int64_t idle_evict_ms;      /* 0 = a silent client keeps its slot */
    char **modules;
    size_t n_modules;
    bool wait_for_init;
    int64_t wait_for_init_timeout_ms;
    bool wait_for_init_fail;    /* wait_for_init.on_timeout is "fail" */
    int clock_set;              /* clock.set: 1, 0, or -1 when unset (then: vm mode only) */
    int64_t clock_step_threshold_ms, clock_check_ms, clock_detect_step_ms;
    struct network_cfg network;
    struct egress_policy egress;
    struct mounts_cfg mounts;
    struct seed_cfg seed;
    struct skills_cfg skills;
    struct metrics_cfg metrics;
    struct exec_cfg exec;
    struct files_cfg files;
    struct envd_cfg envd;
    struct activity_cfg activity;
    /* `limits`: -1 = unset (the default is worked out from the guest's
     * memory when hearth starts, limits.h) */
    struct {
        int64_t memory_reserve, pids_max, tmp_bytes, shm_bytes;
    } limits;
    struct sysctl_cfg sysctl;   /* the operator's sysctls (harden.h applies them) */
    char *resume_file;          /* NULL = not given ("" turns the file off) */
    struct service_config services[CONFIG_MAX_SERVICES];
    size_t n_services;
    struct cJSON *json;         /* the whole validated document */
};

/* Parses and validates text (len bytes). On success returns a new config;
 * on failure returns NULL and writes "path: reason" into err. */
struct config *config_parse(const char *text, size_t len, struct err *err);
/* Reads path (at most CONFIG_MAX_BYTES) and parses it; err names the file
 * on I/O errors. */
struct config *config_load(const char *path, struct err *err);
/* (On failure errno tells why: ENOENT etc. from open/read, EFBIG for an
 * oversize file, EINVAL for a syntax or schema error.) */
/* The built-in config used when no file exists: no services, control on
 * unix:/run/hearth/control.sock and vsock:1025. */
struct config *config_default(struct err *err);
/* What vm mode runs after path was refused: the built-in defaults, with
 * the file's own `control` and `modules` when those two are valid by
 * themselves (*kept says so), so the host still reaches the guest over the
 * channel the image meant. NULL only when out of memory. */
struct config *config_fallback(const char *path, bool *kept);
void config_free(struct config *cfg);

/* Whether exit code (0..255) is in a force_exit / prevent_exit set. */
static inline bool config_code_in(const unsigned char *set, int code)
{
    return code >= 0 && code < 256 && (set[code / 8] >> (code % 8)) & 1;
}
/* A deep copy of the config JSON with secrets replaced by "<redacted>"
 * (redact_json: secret env names, secret flags in argv, registered values
 * and URL passwords anywhere). Caller frees with cJSON_Delete. */
struct cJSON *config_redacted_json(const struct config *cfg);

/* Validates one top-level section on its own ("egress", "host_mounts",
 * "services", ...), as sandbox.init or egress.set receive them
 * (schema_check_section). Returns 0, or -1 with "path: reason" in err. */
int config_check_section(const char *key, const struct cJSON *value, struct err *err);

#endif
