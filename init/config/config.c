/* config: loads hearth.json, has schema.c validate it, and extracts the
 * typed settings the rest of hearth uses; the defaults of every key live
 * here (config.h). Extraction runs only on a tree that already validated,
 * so it never has to re-check types. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cJSON.h>

#include "clock.h"
#include "err.h"
#include "jsonget.h"
#include "jsonout.h"
#include "redact.h"
#include "schema.h"
#include "svc_config.h"

_Static_assert(SVC_WRITABLE_MAX >= CONFIG_MAX_WRITABLE, "every writable path is kept");

/* ------------------------------------------------------------------ */
/* Extraction into struct config (the tree is known valid here). */

struct builder {
    bool oom;
};

static char *dup_str(struct builder *b, const char *s)
{
    char *d;

    if (!s)
        return NULL;
    d = strdup(s);
    if (!d)
        b->oom = true;
    return d;
}

static char *dup_opt(struct builder *b, const cJSON *obj, const char *key)
{
    const cJSON *v = jget(obj, key);
    return cJSON_IsString(v) ? dup_str(b, v->valuestring) : NULL;
}

/* A NULL-terminated copy of an array of strings; *n counts the entries. */
static char **dup_list(struct builder *b, const cJSON *arr, size_t *n)
{
    const cJSON *item;
    char **out;
    size_t count, i = 0;

    *n = 0;
    if (!arr)
        return NULL;
    count = (size_t)cJSON_GetArraySize(arr);
    out = calloc(count + 1, sizeof(*out));
    if (!out) {
        b->oom = true;
        return NULL;
    }
    *n = count;
    cJSON_ArrayForEach(item, arr)
        out[i++] = dup_str(b, item->valuestring);
    return out;
}

static void free_list(char **list, size_t n)
{
    if (!list)
        return;
    for (size_t i = 0; i < n; i++)
        free(list[i]);
    free(list);
}

static void build_service(struct builder *b, struct service_config *s, cJSON *obj)
{
    const cJSON *env = jget(obj, "env"), *codes = jget(obj, "success_exit_codes");
    const cJSON *backoff = jget(obj, "backoff"), *stop = jget(obj, "stop");
    const cJSON *restart = jget(obj, "restart"), *item;

    s->json = obj;
    s->name = dup_opt(b, obj, "name");
    s->argv = dup_list(b, jget(obj, "argv"), &s->argc);
    if (env) {
        size_t n = (size_t)cJSON_GetArraySize(env), i = 0;
        s->env = calloc(n ? n : 1, sizeof(*s->env));
        if (!s->env) {
            b->oom = true;
        } else {
            s->n_env = n;
            cJSON_ArrayForEach(item, env) {
                s->env[i].key = dup_str(b, item->string);
                s->env[i].value = dup_str(b, item->valuestring);
                i++;
            }
        }
    }
    s->env_files = dup_list(b, jget(obj, "env_files"), &s->n_env_files);
    s->cwd = dup_opt(b, obj, "cwd");
    s->user = dup_opt(b, obj, "user");
    s->group = dup_opt(b, obj, "group");
    s->after = dup_list(b, jget(obj, "after"), &s->n_after);
    s->restart = RESTART_ALWAYS;
    if (restart && strcmp(restart->valuestring, "on-failure") == 0)
        s->restart = RESTART_ON_FAILURE;
    else if (restart && strcmp(restart->valuestring, "never") == 0)
        s->restart = RESTART_NEVER;
    s->main = cJSON_IsTrue(jget(obj, "main"));
    s->backoff_initial_ms = jget_int_or(backoff, "initial_ms", CONFIG_BACKOFF_INITIAL_MS);
    s->backoff_max_ms = jget_int_or(backoff, "max_ms", CONFIG_BACKOFF_MAX_MS);
    s->backoff_reset_ms = jget_int_or(backoff, "reset_after_ms", CONFIG_BACKOFF_RESET_MS);
    s->stop_signal = SIGTERM;
    if (jget(stop, "signal"))
        s->stop_signal = names_signal_number(jget(stop, "signal")->valuestring);
    s->stop_timeout_ms = jget_int_or(stop, "timeout_ms", CONFIG_STOP_TIMEOUT_MS);
    const cJSON *limits = jget(obj, "limits");
    s->memory_max = jget_int_or(limits, "memory_max", 0);
    s->memory_high = jget_int_or(limits, "memory_high", 0);
    s->pids_max = jget_int_or(limits, "pids_max", 0);
    s->tmp_bytes = jget_int_or(limits, "tmp_bytes", 0);
    s->shm_bytes = jget_int_or(limits, "shm_bytes", 0);
    s->n_success = codes ? (size_t)cJSON_GetArraySize(codes) : 1;
    s->success_exit_codes = calloc(s->n_success ? s->n_success : 1, sizeof(int));
    if (!s->success_exit_codes) {
        b->oom = true;
        s->n_success = 0;
    } else if (codes) {
        size_t i = 0;
        cJSON_ArrayForEach(item, codes)
            s->success_exit_codes[i++] = item->valueint;
    }
    s->on_resume = dup_opt(b, obj, "on_resume");
    cJSON_ArrayForEach(item, jget(obj, "restart_force_exit_codes"))
        s->force_exit[item->valueint / 8] |= (unsigned char)(1u << (item->valueint % 8));
    cJSON_ArrayForEach(item, jget(obj, "restart_prevent_exit_codes"))
        s->prevent_exit[item->valueint / 8] |= (unsigned char)(1u << (item->valueint % 8));
    s->settings = svc_config_build(obj);
    if (!s->settings)
        b->oom = true;
}

static void add_listen(struct config *cfg, const char *s)
{
    struct err reason;

    if (cfg->n_listen < CONFIG_MAX_LISTEN &&
        names_parse_listen(s, &cfg->listen[cfg->n_listen], &reason) == 0)
        cfg->n_listen++;
}

static struct config *build(cJSON *root, struct err *err)
{
    struct config *cfg = calloc(1, sizeof(*cfg));
    struct builder b = {false};
    const cJSON *control = jget(root, "control"), *wait = jget(root, "wait_for_init");
    const cJSON *level = jget(jget(root, "log"), "level");
    const cJSON *listen = jget(control, "listen"), *cids = jget(control, "allowed_cids");
    cJSON *svc;
    const cJSON *item;

    if (!cfg) {
        cJSON_Delete(root);
        err_set(err, "out of memory");
        return NULL;
    }
    cfg->json = root;
    cfg->hostname = dup_opt(&b, root, "hostname");
    cfg->log_level = HLOG_INFO;
    if (level)
        log_level_parse(level->valuestring, &cfg->log_level);
    if (listen) {
        cJSON_ArrayForEach(item, listen)
            add_listen(cfg, item->valuestring);
    } else {
        add_listen(cfg, CONFIG_DEFAULT_UNIX_LISTEN);
        add_listen(cfg, CONFIG_DEFAULT_VSOCK_LISTEN);
    }
    if (cids) {
        cJSON_ArrayForEach(item, cids) {
            int64_t v = 0;
            jget_int(item, &v);
            cfg->allowed_cids[cfg->n_allowed_cids++] = (uint32_t)v;
        }
    } else {
        cfg->allowed_cids[0] = CONFIG_DEFAULT_HOST_CID;
        cfg->n_allowed_cids = 1;
    }
    cfg->modules = dup_list(&b, jget(root, "modules"), &cfg->n_modules);
    cfg->idle_evict_ms = jget_int_or(control, "idle_evict_ms", CONFIG_IDLE_EVICT_MS);
    cfg->wait_for_init = cJSON_IsTrue(jget(wait, "enabled"));
    cfg->wait_for_init_timeout_ms = jget_int_or(wait, "timeout_ms", 0);
    cfg->wait_for_init_fail = strcmp(jget_str_or(wait, "on_timeout", ""), "fail") == 0;
    const cJSON *clk = jget(root, "clock"), *set = jget(clk, "set");
    cfg->clock_set = cJSON_IsBool(set) ? cJSON_IsTrue(set) : -1;
    cfg->clock_step_threshold_ms = jget_int_or(clk, "step_threshold_ms", CLOCK_DEFAULT_THRESHOLD_MS);
    cfg->clock_check_ms = jget_int_or(clk, "check_ms", CONFIG_CLOCK_CHECK_MS);
    cfg->clock_detect_step_ms = jget_int_or(clk, "detect_step_ms", CONFIG_CLOCK_DETECT_STEP_MS);
    sections_network_extract(jget(root, "network"), &cfg->network);
    sections_egress_extract(jget(root, "egress"), &cfg->egress);
    if (sections_mounts_extract(root, &cfg->mounts) < 0 || sections_seed_extract(jget(root, "seed"), &cfg->seed) < 0 ||
        sections_skills_extract(jget(root, "skills"), &cfg->skills) < 0 ||
        sections_sysctl_extract(jget(root, "sysctl"), &cfg->sysctl) < 0)
        b.oom = true;
    sections_metrics_extract(jget(root, "metrics"), &cfg->metrics);
    sections_exec_extract(jget(root, "exec"), &cfg->exec);
    sections_files_extract(jget(root, "files"), &cfg->files);
    sections_envd_extract(jget(root, "envd"), &cfg->envd);
    sections_activity_extract(jget(root, "activity"), &cfg->activity);
    const cJSON *lim = jget(root, "limits");
    cfg->limits.memory_reserve = jget_int_or(lim, "memory_reserve", -1);
    cfg->limits.pids_max = jget_int_or(lim, "pids_max", CONFIG_PIDS_MAX_DEFAULT);
    cfg->limits.tmp_bytes = jget_int_or(lim, "tmp_bytes", -1);
    cfg->limits.shm_bytes = jget_int_or(lim, "shm_bytes", -1);
    cfg->resume_file = dup_opt(&b, root, "resume_file");
    cJSON_ArrayForEach(svc, cJSON_GetObjectItemCaseSensitive(root, "services"))
        build_service(&b, &cfg->services[cfg->n_services++], svc);
    if (b.oom) {
        config_free(cfg);
        err_set(err, "out of memory");
        return NULL;
    }
    return cfg;
}

/* ------------------------------------------------------------------ */
/* Public entry points. */

struct config *config_parse(const char *text, size_t len, struct err *err)
{
    struct err scratch;
    cJSON *root;

    /* Callers that do not want the message still get a valid buffer. */
    if (!err)
        err = &scratch;
    err->msg[0] = '\0';
    if (!text)
        len = 0;
    if (len > CONFIG_MAX_BYTES) {
        err_set(err, "document larger than %d bytes", CONFIG_MAX_BYTES);
        return NULL;
    }
    root = schema_parse_json(text ? text : "", len, err);
    if (!root)
        return NULL;
    if (schema_check_document(root, err) < 0) {
        cJSON_Delete(root);
        return NULL;
    }
    return build(root, err);
}

int config_check_section(const char *key, const struct cJSON *value, struct err *err)
{
    return schema_check_section(key, value, err);
}

/* The file's bytes (at most CONFIG_MAX_BYTES, NUL-terminated, *lenp of
 * them) in a buffer the caller frees; NULL with err and errno set. */
static char *read_config_file(const char *path, size_t *lenp, struct err *err)
{
    struct stat st;
    char *buf;
    size_t len = 0;
    int fd, saved;

    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        saved = errno;
        err_set(err, "%s: %s", path, strerror(saved));
        errno = saved;
        return NULL;
    }
    /* Refuse early when the size is known; /proc-like files report 0 and
     * are bounded by the read loop instead. */
    memset(&st, 0, sizeof(st));
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > CONFIG_MAX_BYTES) {
        close(fd);
        err_set(err, "%s: larger than %d bytes", path, CONFIG_MAX_BYTES);
        errno = EFBIG;
        return NULL;
    }
    /* Sized from fstat (plus one byte to see EOF, or a file grown since),
     * growing as needed up to the limit: a 1 MiB buffer for every config
     * costs an mmap and an munmap at each boot. */
    size_t cap = S_ISREG(st.st_mode) && st.st_size > 0 ? (size_t)st.st_size + 2 : 16384;
    buf = malloc(cap);
    if (!buf) {
        close(fd);
        err_set(err, "%s: %s", path, strerror(ENOMEM));
        errno = ENOMEM;
        return NULL;
    }
    /* One byte past the limit tells "exactly 1 MiB" from "more". */
    while (len <= CONFIG_MAX_BYTES) {
        if (len + 1 >= cap) {
            size_t ncap = cap * 2 > CONFIG_MAX_BYTES + 2 ? CONFIG_MAX_BYTES + 2 : cap * 2;
            char *nb = realloc(buf, ncap);
            if (!nb) {
                free(buf);
                close(fd);
                err_set(err, "%s: %s", path, strerror(ENOMEM));
                errno = ENOMEM;
                return NULL;
            }
            buf = nb;
            cap = ncap;
        }
        ssize_t n = read(fd, buf + len, cap - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            saved = errno;
            err_set(err, "%s: %s", path, strerror(saved));
            free(buf);
            close(fd);
            errno = saved;
            return NULL;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    if (len > CONFIG_MAX_BYTES) {
        free(buf);
        err_set(err, "%s: larger than %d bytes", path, CONFIG_MAX_BYTES);
        errno = EFBIG;
        return NULL;
    }
    buf[len] = 0;
    *lenp = len;
    return buf;
}

struct config *config_load(const char *path, struct err *err)
{
    struct err scratch;
    struct config *cfg;
    size_t len;

    if (!err)
        err = &scratch;
    if (!path)
        path = CONFIG_DEFAULT_PATH;
    char *buf = read_config_file(path, &len, err);
    if (!buf)
        return NULL;
    cfg = config_parse(buf, len, err);
    free(buf);
    if (!cfg)
        errno = EINVAL;
    return cfg;
}

struct config *config_fallback(const char *path, bool *kept)
{
    struct err err;
    struct config *cfg = NULL;
    size_t len;

    *kept = false;
    char *buf = read_config_file(path, &len, &err);
    cJSON *doc = buf ? cJSON_ParseWithLength(buf, len) : NULL;
    free(buf);
    if (cJSON_IsObject(doc)) {
        /* Only the two keys that decide whether the host can reach the
         * guest: the listeners, and the modules their drivers may be. */
        cJSON *part = cJSON_CreateObject();
        static const char *const keep[] = {"control", "modules"};
        for (size_t i = 0; part && i < sizeof(keep) / sizeof(keep[0]); i++) {
            cJSON *v = cJSON_DetachItemFromObjectCaseSensitive(doc, keep[i]);
            if (v)
                cJSON_AddItemToObject(part, keep[i], v);
        }
        char *text = part && part->child ? jsonout_print(part) : NULL;
        if (text) {
            cfg = config_parse(text, strlen(text), &err);
            *kept = cfg != NULL;
            cJSON_free(text);
        }
        cJSON_Delete(part);
    }
    cJSON_Delete(doc);
    return cfg ? cfg : config_default(&err);
}

struct config *config_default(struct err *err)
{
    return config_parse("{}", 2, err);
}

void config_free(struct config *cfg)
{
    if (!cfg)
        return;
    for (size_t i = 0; i < cfg->n_services; i++) {
        struct service_config *s = &cfg->services[i];
        free(s->name);
        free_list(s->argv, s->argc);
        for (size_t j = 0; j < s->n_env; j++) {
            free(s->env[j].key);
            free(s->env[j].value);
        }
        free(s->env);
        free_list(s->env_files, s->n_env_files);
        free(s->cwd);
        free(s->user);
        free(s->group);
        free_list(s->after, s->n_after);
        free(s->success_exit_codes);
        free(s->on_resume);
        svc_config_free(s->settings);
    }
    sections_egress_policy_free(&cfg->egress);
    sections_mounts_cfg_free(&cfg->mounts);
    sections_seed_cfg_free(&cfg->seed);
    sections_skills_cfg_free(&cfg->skills);
    free(cfg->resume_file);
    free(cfg->hostname);
    free_list(cfg->modules, cfg->n_modules);
    sections_sysctl_cfg_free(&cfg->sysctl);
    cJSON_Delete(cfg->json);
    free(cfg);
}

struct cJSON *config_redacted_json(const struct config *cfg)
{
    cJSON *copy;

    if (!cfg || !cfg->json)
        return NULL;
    copy = cJSON_Duplicate(cfg->json, 1);
    /* The envd access token is a secret whatever its length. */
    cJSON *envd = cJSON_GetObjectItemCaseSensitive(copy, "envd");
    if (envd && cJSON_GetObjectItemCaseSensitive(envd, "access_token"))
        cJSON_ReplaceItemInObjectCaseSensitive(envd, "access_token",
                                               cJSON_CreateString("<redacted>"));
    /* Env values by name, flags in argv and exec, registered values and
     * URL passwords in every string (see redact.h). */
    redact_json(copy);
    return copy;
}
