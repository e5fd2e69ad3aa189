#include "methods.h"
#include "err.h"
#include "utf8.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>

#include "activity.h"
#include "control.h"
#include "envd.h"
#include "events.h"
#include "gates.h"
#include "hearth.h"
#include "kfile.h"
#include "guestlimits.h"
#include "log.h"
#include "harden.h"
#include "modules.h"
#include "m_files.h"
#include "m_exec.h"
#include "m_persist.h"
#include "mounts.h"
#include "m_metrics.h"
#include "m_net.h"
#include "m_sandbox.h"
#include "params.h"
#include "reaper.h"
#include "redact.h"
#include "sandbox.h"
#include "service.h"
#include "skills.h"
#include "shutdown.h"

#define PROTOCOL_VERSION 1


/* ---- methods ---- */

static int m_ping(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    /* Unknown parameters are errors for every method, ping included. */
    if (params && params->child && params_only(params, no_params, err) < 0)
        return -1;
    *result = rpc_empty_result();
    return 0;
}

static int m_version(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    if (params_only(params, no_params, err) < 0)
        return -1;
    cJSON *r = cJSON_CreateObject();
    if (!r)
        return -1;
    cJSON_AddStringToObject(r, "version", HEARTH_VERSION);
    cJSON_AddNumberToObject(r, "protocol", PROTOCOL_VERSION);
    cJSON *f = cJSON_AddArrayToObject(r, "features");
    static const char *const features[] = {"unix", "vsock", "serial", "events", "files", "exec", NULL};
    for (const char *const *p = features; f && *p; p++)
        cJSON_AddItemToArray(f, cJSON_CreateString(*p));
    cJSON_AddItemToObject(r, "methods", methods_names_json());
    *result = r;
    return 0;
}

/* hearth's own resident memory and voluntary context switches (its
 * wake-ups), so the host can watch its overhead. -1 when unknown. */
static void self_usage(long *rss_kib, long *wakeups)
{
    char buf[4096];
    *rss_kib = *wakeups = -1;
    if (kfile_read("/proc/self/status", buf, sizeof(buf)) <= 0)
        return;
    const char *p = strstr(buf, "VmRSS:");
    if (p)
        *rss_kib = strtol(p + 6, NULL, 10);
    p = strstr(buf, "\nvoluntary_ctxt_switches:");
    if (p)
        *wakeups = strtol(p + 25, NULL, 10);
}

static int m_status(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    char host[65] = "";
    if (params_only(params, no_params, err) < 0)
        return -1;
    cJSON *r = cJSON_CreateObject();
    if (!r)
        return -1;
    gethostname(host, sizeof(host) - 1);
    cJSON_AddStringToObject(r, "version", HEARTH_VERSION);
    cJSON_AddStringToObject(r, "mode", hearth_mode_name(H.mode));
    cJSON_AddStringToObject(r, "phase", hearth_phase_name(H.phase));
    cJSON_AddStringToObject(r, "hostname", host);
    cJSON_AddNumberToObject(r, "uptime_ms", (double)(mono_ms() - H.boot_mono_ms));
    cJSON_AddNumberToObject(r, "pid", getpid());
    long rss, wakeups;
    self_usage(&rss, &wakeups);
    cJSON_AddNumberToObject(r, "rss_kib", (double)rss);
    cJSON_AddNumberToObject(r, "wakeups", (double)wakeups);
    cJSON *boot = cJSON_AddObjectToObject(r, "boot");
    if (boot) {
        cJSON_AddNumberToObject(boot, "hearth_start_us", (double)H.boot_us);
        cJSON_AddNumberToObject(boot, "modules_us", (double)H.modules_us);
        cJSON_AddNumberToObject(boot, "running_us", (double)(H.running_us - H.boot_us));
        if (H.first_exec_us)
            cJSON_AddNumberToObject(boot, "first_exec_us", (double)(H.first_exec_us - H.boot_us));
    }
    cJSON_AddNumberToObject(r, "clients", (double)control_client_count());
    cJSON_AddNumberToObject(r, "orphans_reaped", (double)reaper_orphans());
    cJSON_AddNumberToObject(r, "event_seq", (double)events_last_seq());
    cJSON_AddStringToObject(r, "config", H.config_path);
    if (H.config_error[0])
        cJSON_AddStringToObject(r, "config_error", H.config_error);
    cJSON_AddItemToObject(r, "control", control_listeners_json());
    cJSON_AddItemToObject(r, "modules", modules_json());
    cJSON_AddItemToObject(r, "sysctl", harden_json());
    char oom[16];
    if (kfile_read("/proc/self/oom_score_adj", oom, sizeof(oom)) > 0)
        cJSON_AddNumberToObject(r, "oom_score_adj", (double)strtol(oom, NULL, 10));
    cJSON_AddItemToObject(r, "phases", gates_json());
    cJSON_AddItemToObject(r, "mounts", mounts_status_json());
    /* The overlay's last run, so a failed one (an unreadable share, a
     * config.yaml hearth cannot edit) shows without a skills.list. */
    if (skills_enabled())
        cJSON_AddItemToObject(r, "skills", skills_last_json());
    cJSON_AddItemToObject(r, "limits", guestlimits_status_json());
    cJSON_AddItemToObject(r, "services", service_list_json());
    sandbox_status_json(r);
    resume_status_json(r);
    cJSON_AddItemToObject(r, "activity", activity_json());
    cJSON *envd = envd_status_json();
    if (envd)
        cJSON_AddItemToObject(r, "envd", envd);
    /* Errors and paths in status may quote a secret (a URL password, a
     * value from sandbox.init or an env file). */
    redact_json(r);
    *result = r;
    return 0;
}

static int m_config_get(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    if (params_only(params, no_params, err) < 0)
        return -1;
    *result = config_redacted_json(H.cfg);
    return 0;
}

static int m_services_list(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    if (params_only(params, no_params, err) < 0)
        return -1;
    cJSON *r = cJSON_CreateObject();
    if (!r)
        return -1;
    cJSON_AddItemToObject(r, "phases", gates_json());
    cJSON_AddItemToObject(r, "services", service_list_json());
    redact_json(r);
    *result = r;
    return 0;
}

static int m_events_subscribe(struct client *c, cJSON *params, cJSON **result,
                              struct rpc_error *err)
{
    static const char *const known[] = {"since", NULL};
    uint64_t since = 0;
    bool present;

    if (params_only(params, known, err) < 0 || param_uint(params, "since", &since, &present, err) < 0)
        return -1;
    cJSON *r = cJSON_CreateObject();
    if (!r)
        return -1;
    cJSON_AddBoolToObject(r, "subscribed", 1);
    cJSON_AddNumberToObject(r, "seq", (double)events_last_seq());
    /* Without "since" only new events flow; with it, kept ones replay. */
    control_subscribe_after_reply(c, present ? since : UINT64_MAX);
    *result = r;
    return 0;
}

static int m_system_shutdown(struct client *c, cJSON *params, cJSON **result,
                             struct rpc_error *err)
{
    static const char *const known[] = {"action", NULL};
    enum shutdown_action a = H.mode == MODE_VM ? SHUTDOWN_POWEROFF : SHUTDOWN_EXIT;

    if (params_only(params, known, err) < 0)
        return -1;
    cJSON *v = params ? cJSON_GetObjectItemCaseSensitive(params, "action") : NULL;
    if (v) {
        if (!cJSON_IsString(v) ||
            (strcmp(v->valuestring, "poweroff") && strcmp(v->valuestring, "reboot"))) {
            rpc_error_set(err, RPC_INVALID_PARAMS, "action: expected \"poweroff\" or \"reboot\"");
            return -1;
        }
        if (strcmp(v->valuestring, "reboot") == 0)
            a = H.mode == MODE_VM ? SHUTDOWN_REBOOT : SHUTDOWN_EXIT;
    }
    char why[128];
    snprintf(why, sizeof(why), "system.shutdown from %s", control_client_peer(c));
    shutdown_request(a, why);
    cJSON *r = cJSON_CreateObject();
    if (!r)
        return -1;
    cJSON_AddBoolToObject(r, "shutting_down", 1);
    cJSON_AddStringToObject(r, "action", shutdown_action_name(a));
    *result = r;
    return 0;
}

/* The "name" parameter every services.* method takes; err names it. */
static int param_service(cJSON *params, int *idx, struct rpc_error *err)
{
    cJSON *v = params ? cJSON_GetObjectItemCaseSensitive(params, "name") : NULL;
    if (!cJSON_IsString(v)) {
        rpc_error_set(err, RPC_INVALID_PARAMS, "name: expected a service name");
        return -1;
    }
    *idx = service_index(v->valuestring);
    if (*idx < 0) {
        rpc_error_set(err, RPC_ERR_NOT_FOUND, "no service named %.*s", utf8_clip(v->valuestring, 64),
                      v->valuestring);
        return -1;
    }
    return 0;
}

/* "signal": a name ("SIGUSR1") or a number 1-64. *sig is left as it is
 * when the member is absent; -1 with the error when it is present but is
 * not a signal. */
static int param_signal(cJSON *params, int *sig, struct rpc_error *err)
{
    cJSON *v = cJSON_GetObjectItemCaseSensitive(params, "signal");
    if (!v)
        return 0;
    int n = -1;
    if (cJSON_IsString(v))
        n = names_signal_number(v->valuestring);
    else if (cJSON_IsNumber(v) && v->valuedouble >= 1 && v->valuedouble < 65)
        n = v->valueint;
    if (n <= 0) {
        rpc_error_set(err, RPC_INVALID_PARAMS, "signal: expected a signal name like \"SIGUSR1\"");
        return -1;
    }
    *sig = n;
    return 0;
}

/* What a services.start/stop/restart answers: the name and the state now. */
static int service_reply(cJSON *params, int idx, cJSON **result)
{
    cJSON *r = cJSON_CreateObject();
    if (!r)
        return -1;
    cJSON_AddStringToObject(r, "name", cJSON_GetObjectItemCaseSensitive(params, "name")->valuestring);
    cJSON_AddStringToObject(r, "state", service_state_of(idx));
    *result = r;
    return 0;
}

static int service_op(cJSON *params, cJSON **result, struct rpc_error *err,
                      int (*op)(int, struct err *))
{
    static const char *const known[] = {"name", NULL};
    struct err msg = {0};
    int idx;

    if (params_only(params, known, err) < 0 || param_service(params, &idx, err) < 0)
        return -1;
    if (op(idx, &msg) < 0)
        return rpc_error_from(err, RPC_ERR_FAILED, &msg);
    return service_reply(params, idx, result);
}

static int m_services_start(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    if (shutdown_in_progress()) {
        rpc_error_set(err, RPC_ERR_STATE, "shutting down");
        return -1;
    }
    return service_op(params, result, err, service_start);
}

static int m_services_stop(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    return service_op(params, result, err, service_stop);
}

/* "signal" (optional) makes it a graceful restart: that signal instead of
 * stop.signal, then started again at once (service_restart_signal). */
static int m_services_restart(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    static const char *const known[] = {"name", "signal", NULL};
    struct err msg = {0};
    int idx, sig = 0;

    if (shutdown_in_progress()) {
        rpc_error_set(err, RPC_ERR_STATE, "shutting down");
        return -1;
    }
    if (params_only(params, known, err) < 0 || param_service(params, &idx, err) < 0 ||
        param_signal(params, &sig, err) < 0)
        return -1;
    if (service_restart_signal(idx, sig, &msg) < 0) {
        rpc_error_from(err, RPC_ERR_FAILED, &msg);
        return -1;
    }
    return service_reply(params, idx, result);
}

static int m_services_signal(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    static const char *const known[] = {"name", "signal", NULL};
    struct err msg = {0};
    int idx, sig = -1;

    if (params_only(params, known, err) < 0 || param_service(params, &idx, err) < 0 ||
        param_signal(params, &sig, err) < 0)
        return -1;
    if (sig <= 0) {
        rpc_error_set(err, RPC_INVALID_PARAMS, "signal: required");
        return -1;
    }
    if (service_signal(idx, sig, &msg) < 0) {
        rpc_error_from(err, RPC_ERR_STATE, &msg);
        return -1;
    }
    cJSON *r = cJSON_CreateObject();
    if (!r)
        return -1;
    cJSON_AddStringToObject(r, "name", cJSON_GetObjectItemCaseSensitive(params, "name")->valuestring);
    cJSON_AddStringToObject(r, "signal", names_signal_name(sig) ? names_signal_name(sig) : "?");
    cJSON_AddStringToObject(r, "state", service_state_of(idx));
    *result = r;
    return 0;
}

static int m_logs_read(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    static const char *const known[] = {"name", "lines", "follow", NULL};
    uint64_t lines = 100;
    bool present;
    int idx;

    if (params_only(params, known, err) < 0 || param_service(params, &idx, err) < 0 ||
        param_uint(params, "lines", &lines, &present, err) < 0)
        return -1;
    cJSON *f = cJSON_GetObjectItemCaseSensitive(params, "follow");
    if (f && !cJSON_IsBool(f)) {
        rpc_error_set(err, RPC_INVALID_PARAMS, "follow: expected true or false");
        return -1;
    }
    cJSON *r = cJSON_CreateObject();
    if (!r)
        return -1;
    cJSON_AddItemToObject(r, "lines", service_logs_json(idx, (size_t)lines));
    if (cJSON_IsTrue(f))
        control_follow(c, (size_t)idx);
    *result = r;
    return 0;
}

static const struct method methods[] = {
    {"ping", m_ping},
    {"version", m_version},
    {"status", m_status},
    {"config.get", m_config_get},
    {"services.list", m_services_list},
    {"services.start", m_services_start},
    {"services.stop", m_services_stop},
    {"services.restart", m_services_restart},
    {"services.signal", m_services_signal},
    {"logs.read", m_logs_read},
    {"events.subscribe", m_events_subscribe},
    {"mounts.list", m_mounts_list},
    {"skills.list", m_skills_list},
    {"skills.sync", m_skills_sync},
    {"skills.fork", m_skills_fork},
    {"egress.get", m_egress_get},
    {"egress.set", m_egress_set},
    {"egress.check", m_egress_check},
    {"network.get", m_network_get},
    {"network.check", m_network_check},
    {"system.shutdown", m_system_shutdown},
    {"sandbox.init", m_sandbox_init},
    {"sandbox.freeze", m_sandbox_freeze},
    {"sandbox.resume", m_sandbox_resume},
    {"time.sync", m_time_sync},
    {"entropy.add", m_entropy_add},
    {"files.stat", m_files_stat},
    {"files.list", m_files_list},
    {"files.read", m_files_read},
    {"files.hash", m_files_hash},
    {"files.write", m_files_write},
    {"files.rename", m_files_rename},
    {"files.mkdir", m_files_mkdir},
    {"files.remove", m_files_remove},
    {"envd.watch", envd_method_watch},
    {"envd.init", envd_method_init},
    {"metrics", m_metrics},
    {"exec.start", m_exec_start},
    {"exec.input", m_exec_input},
    {"exec.resize", m_exec_resize},
    {"exec.signal", m_exec_signal},
    {"exec.wait", m_exec_wait},
    {"exec.list", m_exec_list},
    {"exec.attach", m_exec_attach},
};

const struct method *methods_find(const char *name)
{
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
        if (strcmp(methods[i].name, name) == 0)
            return &methods[i];
    return NULL;
}

cJSON *methods_names_json(void)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < sizeof(methods) / sizeof(methods[0]); i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(methods[i].name));
    return a;
}

char *methods_handle_line(struct client *c, const char *line, size_t len, size_t *outlen,
                          char *buf, size_t cap)
{
    struct rpc_request req;
    struct rpc_error err;
    char *reply = NULL;

    /* Not "= {0}": clearing the whole message for every request costs
     * more than parsing a ping. */
    err.code = 0;
    err.message[0] = 0;
    err.data = NULL;
    int rc = rpc_parse(line, len, &req, &err);

    if (rc == 1)
        return NULL;
    if (rc < 0) {
        /* An invalid request is answered even without an id (with null). */
        reply = rpc_format_error_in(buf, cap, req.id, err.code, err.message, NULL, outlen);
        rpc_request_free(&req);
        return reply;
    }
    const struct method *m = methods_find(req.method);
    /* A link of hearth's own role process calls only what it is given. */
    if (m && !control_may_call(c, req.method))
        m = NULL;
    cJSON *result = NULL;
    int rcm = -1;
    if (!m) {
        rpc_error_set(&err, RPC_METHOD_NOT_FOUND, "unknown method: %.*s", utf8_clip(req.method, 128),
                      req.method);
    } else if (req.params && !cJSON_IsObject(req.params)) {
        rpc_error_set(&err, RPC_INVALID_PARAMS, "params: expected object");
    } else if ((rcm = m->fn(c, req.params, &result, &err)) == 0 && result) {
        err.code = 0;
    } else if (rcm == 0 && control_is_deferring(c)) {
        /* Answered later by control_complete, with this id. */
        control_defer_id(c, req.id ? cJSON_Duplicate(req.id, 1) : NULL);
        rpc_request_free(&req);
        *outlen = 0;
        return NULL;
    } else if (err.code == 0) {
        if (result != rpc_empty_result())
            cJSON_Delete(result);
        result = NULL;
        rpc_error_set(&err, RPC_INTERNAL_ERROR, "%s: out of memory", req.method);
    }
    if (!req.id) {
        /* A notification: done, nothing to say back. */
        if (result != rpc_empty_result())
            cJSON_Delete(result);
        cJSON_Delete(err.data);
        rpc_request_free(&req);
        return NULL;
    }
    if (err.code == 0)
        reply = rpc_format_result_in(buf, cap, req.id, result, outlen);
    else
        reply = rpc_format_error_in(buf, cap, req.id, err.code, err.message, err.data, outlen);
    if (!reply)
        reply = rpc_format_error_in(buf, cap, req.id, RPC_INTERNAL_ERROR, "out of memory", NULL,
                                    outlen);
    rpc_request_free(&req);
    return reply;
}
