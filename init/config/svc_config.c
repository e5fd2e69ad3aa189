#include "svc_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>
#include <linux/capability.h>

#include "names.h"

#define BIT(n) (UINT64_C(1) << (n))

/* The container runtimes' default set without NET_RAW: raw and packet
 * sockets send frames the inet egress hook never sees. */
const uint64_t svc_config_default_caps =
    BIT(CAP_CHOWN) | BIT(CAP_DAC_OVERRIDE) | BIT(CAP_FOWNER) | BIT(CAP_FSETID) | BIT(CAP_KILL) |
    BIT(CAP_SETGID) | BIT(CAP_SETUID) | BIT(CAP_SETPCAP) | BIT(CAP_SETFCAP) |
    BIT(CAP_NET_BIND_SERVICE) | BIT(CAP_SYS_CHROOT) | BIT(CAP_AUDIT_WRITE);

static void log_of(const cJSON *lg, struct svc_log_settings *l)
{
    const cJSON *rl = cJSON_GetObjectItemCaseSensitive(lg, "ring_lines");
    const cJSON *fl = cJSON_GetObjectItemCaseSensitive(lg, "file");
    const cJSON *mb = cJSON_GetObjectItemCaseSensitive(lg, "max_bytes");
    const cJSON *kp = cJSON_GetObjectItemCaseSensitive(lg, "keep");

    l->ring_lines = cJSON_IsNumber(rl) ? (size_t)rl->valuedouble : SVC_LOG_RING_LINES_DEFAULT;
    l->file = cJSON_IsString(fl) ? fl->valuestring : NULL;
    l->max_bytes = cJSON_IsNumber(mb) ? (int64_t)mb->valuedouble : SVC_LOG_MAX_BYTES_DEFAULT;
    l->keep = cJSON_IsNumber(kp) ? kp->valueint : SVC_LOG_KEEP_DEFAULT;
}

static void check_of(const cJSON *obj, struct svc_check_settings *c)
{
    if (!obj)
        return;
    c->given = true;
    struct err why = {0};
    int rc = checkspec_from_json(obj, &c->spec, &why);
    snprintf(c->error, sizeof(c->error), "%s", why.msg);
    c->listens = rc == 1;
    if (rc < 0 && !c->error[0])
        snprintf(c->error, sizeof(c->error), "not understood");
    c->interval_ms = c->spec.interval_ms ? c->spec.interval_ms : SVC_HEALTH_INTERVAL_DEFAULT_MS;
    c->failures = c->spec.failures ? (unsigned)c->spec.failures : SVC_HEALTH_FAILURES_DEFAULT;
    /* Only ready has it (the schema refuses it in health): a value above
     * what a counter holds is as good as unlimited. */
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(obj, "attempts");
    if (!cJSON_IsNumber(a))
        c->attempts = SVC_READY_ATTEMPTS_DEFAULT;
    else
        c->attempts = a->valuedouble >= 4294967295.0 ? 0 : (unsigned)a->valuedouble;
}

static void launch_of(const cJSON *j, struct svc_launch_settings *l)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "umask");
    if (cJSON_IsString(v)) {
        l->set_umask = true;
        l->umask = (mode_t)strtoul(v->valuestring, NULL, 8) & 0777;
    } else if (cJSON_IsNumber(v)) {
        l->set_umask = true;
        l->umask = (mode_t)v->valueint & 0777;
    }
    v = cJSON_GetObjectItemCaseSensitive(j, "rlimits");
    for (const cJSON *r = v ? v->child : NULL; r && l->n_rlimits < SVC_RLIMITS_MAX; r = r->next) {
        int res = names_rlimit_number(r->string);
        if (res < 0)
            continue;
        l->rlimits[l->n_rlimits].resource = res;
        l->rlimits[l->n_rlimits].lim = cJSON_IsNumber(r) ? (rlim_t)r->valuedouble : RLIM_INFINITY;
        l->n_rlimits++;
    }
    v = cJSON_GetObjectItemCaseSensitive(j, "oom_score_adj");
    if (cJSON_IsNumber(v)) {
        l->set_oom = true;
        l->oom_score_adj = v->valueint;
    }
    v = cJSON_GetObjectItemCaseSensitive(j, "no_new_privs");
    l->no_new_privs = cJSON_IsBool(v) ? cJSON_IsTrue(v) : true;
}

static uint64_t caps_of(const cJSON *arr)
{
    uint64_t m = 0;
    for (const cJSON *v = arr ? arr->child : NULL; v; v = v->next) {
        int n = cJSON_IsString(v) ? names_cap_number(v->valuestring) : -1;
        if (n >= 0 && n < 64)
            m |= BIT(n);
    }
    return m;
}

static void contain_of(const cJSON *j, struct contain_policy *out)
{
    const cJSON *keep = cJSON_GetObjectItemCaseSensitive(j, "caps_keep");
    const cJSON *iso = cJSON_GetObjectItemCaseSensitive(j, "isolation");
    const cJSON *sc = cJSON_GetObjectItemCaseSensitive(j, "seccomp");

    out->keep_given = keep != NULL;
    out->keep = keep ? caps_of(keep) : svc_config_default_caps;
    out->drop = caps_of(cJSON_GetObjectItemCaseSensitive(j, "caps_drop"));
    out->isolation = !cJSON_IsFalse(iso);
    out->seccomp = !(cJSON_IsString(sc) && strcmp(sc->valuestring, "off") == 0);
    out->ro_root = !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j, "read_only_root"));
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(j, "writable");
    for (const cJSON *v = w ? w->child : NULL; v; v = v->next)
        if (cJSON_IsString(v) && out->n_writable < sizeof(out->writable) / sizeof(out->writable[0]))
            out->writable[out->n_writable++] = v->valuestring;
}

static void secrets_of(const cJSON *arr, struct svc_settings *st)
{
    for (const cJSON *e = arr ? arr->child : NULL; e && st->n_secrets < SVC_SECRETS_MAX; e = e->next) {
        const cJSON *env = cJSON_GetObjectItemCaseSensitive(e, "env");
        const cJSON *file = cJSON_GetObjectItemCaseSensitive(e, "file");
        const cJSON *chars = cJSON_GetObjectItemCaseSensitive(e, "chars");
        if (!cJSON_IsString(env) || !cJSON_IsString(file))
            continue;
        struct svc_secret *x = &st->secrets[st->n_secrets++];
        x->env = env->valuestring;
        x->file = file->valuestring;
        x->chars = cJSON_IsNumber(chars) ? (unsigned)chars->valuedouble : SVC_SECRET_CHARS_DEFAULT;
    }
}

static void fill(const cJSON *obj, struct svc_settings *st)
{
    log_of(cJSON_GetObjectItemCaseSensitive(obj, "log"), &st->log);
    check_of(cJSON_GetObjectItemCaseSensitive(obj, "ready"), &st->ready);
    check_of(cJSON_GetObjectItemCaseSensitive(obj, "health"), &st->health);
    launch_of(obj, &st->launch);
    contain_of(obj, &st->contain);
    secrets_of(cJSON_GetObjectItemCaseSensitive(obj, "secrets"), st);
    st->activity_lease = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(obj, "activity"), "lease"));
}

struct svc_settings *svc_config_build(const cJSON *obj)
{
    struct svc_settings *st = calloc(1, sizeof(*st));
    if (st)
        fill(obj, st);
    return st;
}

const struct svc_settings *svc_config_defaults(void)
{
    static struct svc_settings dflt;
    static bool filled;
    if (!filled) {
        fill(NULL, &dflt); /* every getter finds nothing: the defaults */
        filled = true;
    }
    return &dflt;
}

void svc_config_free(struct svc_settings *st) { free(st); }
