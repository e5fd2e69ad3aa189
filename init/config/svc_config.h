/* svc_config: the sections of a service that only the supervisor and the
 * code around a start read (ready, health, log, the launch settings umask,
 * rlimits, oom_score_adj and no_new_privs, and containment), taken from the
 * validated JSON once when the config loads into typed form, with their
 * defaults in one place. config.c builds one per service
 * (service_config.settings); nothing reads those sections from JSON after. */
#ifndef HEARTH_SVC_CONFIG_H
#define HEARTH_SVC_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "checkspec.h"

struct cJSON;

/* log.ring_lines, log.max_bytes, log.keep: the last 1000 lines kept in
 * memory; a log file rotated at 10 MiB, three kept. */
#define SVC_LOG_RING_LINES_DEFAULT 1000
#define SVC_LOG_MAX_BYTES_DEFAULT (10 * 1024 * 1024)
#define SVC_LOG_KEEP_DEFAULT 3
/* health.interval_ms, health.failures */
#define SVC_HEALTH_INTERVAL_DEFAULT_MS 10000
#define SVC_HEALTH_FAILURES_DEFAULT 3
/* ready.attempts: consecutive starts that never become ready before the
 * service is failed (systemd's StartLimitBurst is 5 as well); 0 = no
 * limit, and no limit without a ready section. */
#define SVC_READY_ATTEMPTS_DEFAULT 5
#define SVC_RLIMITS_MAX 16
/* writable: as many as the schema allows (CONFIG_MAX_WRITABLE) */
#define SVC_WRITABLE_MAX 16

/* secrets: per service, at most this many; a key of chars characters
 * (default 48, 32 to 256) from a 64-letter alphabet, 6 bits each. */
#define SVC_SECRETS_MAX 8
#define SVC_SECRET_CHARS_MIN 32
#define SVC_SECRET_CHARS_MAX 256
#define SVC_SECRET_CHARS_DEFAULT 48

/* One secrets[] entry: the variable env, kept as a NAME=value line in
 * file, made at a start when neither the environment nor the file has it
 * (svc_spawn.c, secretfile.h). The strings point into the config's JSON. */
struct svc_secret {
    const char *env;
    const char *file;
    unsigned chars;
};

struct svc_log_settings {
    size_t ring_lines;
    const char *file;         /* NULL = no file; points into the config's JSON */
    int64_t max_bytes;
    int keep;
};

/* A ready or health check. */
struct svc_check_settings {
    bool given;               /* the section is present */
    bool listens;             /* notify_fd, notify or watchdog_ms: no probe */
    char error[160];          /* why a given section was not usable ("" = it is) */
    /* spec.argv points at spec.argv_store: a copy must point it again */
    struct check_spec spec;
    int64_t interval_ms;      /* health: with its default */
    unsigned failures;        /* health: with its default */
    unsigned attempts;        /* ready: with its default; 0 = unlimited */
};

struct svc_launch_settings {
    bool set_umask;
    mode_t umask;
    struct { int resource; rlim_t lim; } rlimits[SVC_RLIMITS_MAX];
    size_t n_rlimits;
    bool set_oom;
    int oom_score_adj;
    bool no_new_privs;        /* default true */
};

/* What a service's config asks for, before the user is known. */
struct contain_policy {
    bool keep_given;   /* caps_keep present */
    uint64_t keep;     /* caps_keep (or the default for a root service) */
    uint64_t drop;     /* caps_drop */
    bool isolation;    /* default true */
    bool seccomp;      /* "default" (true) or "off" */
    bool ro_root;      /* read_only_root, default true */
    /* writable: paths the service may write besides the writable mounts
     * (they point into the config's JSON) */
    const char *writable[SVC_WRITABLE_MAX];
    size_t n_writable;
};

/* The capability set a root service keeps by default (named for
 * contain.c, which applies it). */
extern const uint64_t svc_config_default_caps;

struct svc_settings {
    struct svc_log_settings log;
    struct svc_check_settings ready, health;
    struct svc_launch_settings launch;
    struct contain_policy contain;
    bool activity_lease;      /* activity.lease: may declare itself busy */
    struct svc_secret secrets[SVC_SECRETS_MAX];
    size_t n_secrets;
};

/* Extracts the settings from a validated service object (the strings stay
 * in obj, which must outlive them). Returns NULL when out of memory. */
struct svc_settings *svc_config_build(const struct cJSON *obj);
void svc_config_free(struct svc_settings *st);
/* The settings of a service whose config says nothing (every default): for
 * a service_config made by hand rather than loaded (an exec.start process),
 * whose settings are NULL. */
const struct svc_settings *svc_config_defaults(void);

#endif
