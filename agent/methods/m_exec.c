#include "m_exec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "base64.h"
#include "config.h"
#include "err.h"
#include "execproc.h"
#include "params.h"

static int param_id(cJSON *params, uint64_t *id, struct rpc_error *err)
{
    bool present = false;
    if (param_uint(params, "id", id, &present, err) < 0)
        return -1;
    if (!present) {
        rpc_error_set(err, RPC_INVALID_PARAMS, "id: required");
        return -1;
    }
    return 0;
}

static int param_range(cJSON *params, const char *name, uint64_t lo, uint64_t hi, uint64_t *out,
                       struct rpc_error *err)
{
    bool present = false;
    if (param_uint(params, name, out, &present, err) < 0)
        return -1;
    if (present && (*out < lo || *out > hi)) {
        rpc_error_set(err, RPC_INVALID_PARAMS, "%s: expected %llu..%llu", name,
                      (unsigned long long)lo, (unsigned long long)hi);
        return -1;
    }
    return 0;
}

/* A short string (cwd, user, group): non-empty, bounded, no NUL. */
static int param_short(cJSON *params, const char *name, bool absolute, const char **out,
                       struct rpc_error *err)
{
    bool present = false;
    if (param_string(params, name, out, &present, err) < 0)
        return -1;
    if (!present)
        return 0;
    size_t n = strlen(*out);
    if (n == 0 || n >= EXEC_MAX_PATH) {
        rpc_error_set(err, RPC_INVALID_PARAMS, "%s: expected 1..%d bytes", name, EXEC_MAX_PATH - 1);
        return -1;
    }
    if (absolute && (*out)[0] != '/') {
        rpc_error_set(err, RPC_INVALID_PARAMS, "%s: expected an absolute path", name);
        return -1;
    }
    return 0;
}

int m_exec_start(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    static const char *const known[] = {"argv", "env", "cwd", "user", "group", "tty", "rows",
                                        "cols", "stdin", "timeout_ms", "kill_on_disconnect",
                                        "attach", "buffer_bytes", "isolation", NULL};
    struct exec_request r = {.attach = true};
    cJSON *argv = NULL, *env = NULL;
    bool present, isolation = true;
    uint64_t rows = 0, cols = 0, bufsz = 0;
    int rc = -1;

    if (params_only(params, known, err) < 0 || param_array(params, "argv", &argv, &present, err) < 0 ||
        param_object(params, "env", &env, &present, err) < 0 ||
        param_short(params, "cwd", true, &r.cwd, err) < 0 ||
        param_short(params, "user", false, &r.user, err) < 0 ||
        param_short(params, "group", false, &r.group, err) < 0 ||
        param_bool(params, "tty", &r.tty, &present, err) < 0 ||
        param_range(params, "rows", 1, 65535, &rows, err) < 0 ||
        param_range(params, "cols", 1, 65535, &cols, err) < 0 ||
        param_bool(params, "stdin", &r.stdin_open, &present, err) < 0 ||
        param_range(params, "timeout_ms", 0, EXEC_WAIT_MAX_MS, &r.timeout_ms, err) < 0 ||
        param_bool(params, "kill_on_disconnect", &r.kill_on_disconnect, &present, err) < 0 ||
        param_bool(params, "attach", &r.attach, &present, err) < 0 ||
        param_uint(params, "buffer_bytes", &bufsz, &present, err) < 0 ||
        param_bool(params, "isolation", &isolation, &present, err) < 0)
        return -1;
    r.uncontained = !isolation;
    if (!argv) {
        rpc_error_set(err, RPC_INVALID_PARAMS, "argv: required");
        return -1;
    }
    int argc = cJSON_GetArraySize(argv);
    if (argc < 1 || argc > EXEC_MAX_ARGV) {
        rpc_error_set(err, RPC_INVALID_PARAMS, "argv: expected 1..%d strings, got %d",
                      EXEC_MAX_ARGV, argc);
        return -1;
    }
    if ((rows || cols) && !r.tty) {
        rpc_error_set(err, RPC_INVALID_PARAMS, "%s: only with tty", rows ? "rows" : "cols");
        return -1;
    }
    r.rows = (unsigned)rows;
    r.cols = (unsigned)cols;
    r.buffer_bytes = bufsz;
    size_t total = 0, i = 0;
    int n_env = env ? cJSON_GetArraySize(env) : 0;
    if (n_env > EXEC_MAX_ENV) {
        rpc_error_set(err, RPC_INVALID_PARAMS, "env: %d variables, over the limit of %d", n_env,
                      EXEC_MAX_ENV);
        return -1;
    }
    r.argv = calloc((size_t)argc + 1, sizeof(char *));
    r.env = calloc((size_t)n_env + 1, sizeof(*r.env));
    if (!r.argv || !r.env) {
        rpc_error_set(err, RPC_INTERNAL_ERROR, "out of memory");
        goto out;
    }
    cJSON *a;
    cJSON_ArrayForEach(a, argv) {
        if (!cJSON_IsString(a) || (i == 0 && !a->valuestring[0])) {
            rpc_error_set(err, RPC_INVALID_PARAMS, "argv[%zu]: expected a %sstring", i,
                          i == 0 ? "non-empty " : "");
            goto out;
        }
        total += strlen(a->valuestring) + 1;
        if (total > EXEC_MAX_ARGV_BYTES) {
            rpc_error_set(err, RPC_INVALID_PARAMS, "argv: over the limit of %d bytes",
                          EXEC_MAX_ARGV_BYTES);
            goto out;
        }
        r.argv[i++] = a->valuestring;
    }
    r.argc = i;
    total = 0;
    i = 0;
    cJSON_ArrayForEach(a, env) {
        if (!cJSON_IsString(a)) {
            /* The name is not echoed: it may be long, and cut it may not
             * be UTF-8 any more. */
            rpc_error_set(err, RPC_INVALID_PARAMS, "env: variable %zu: expected a string value", i);
            goto out;
        }
        if (!a->string[0] || strchr(a->string, '=')) {
            rpc_error_set(err, RPC_INVALID_PARAMS, "env: variable %zu: bad name (empty or with '=')",
                          i);
            goto out;
        }
        total += strlen(a->string) + strlen(a->valuestring) + 2;
        if (total > EXEC_MAX_ENV_BYTES) {
            rpc_error_set(err, RPC_INVALID_PARAMS, "env: over the limit of %d bytes",
                          EXEC_MAX_ENV_BYTES);
            goto out;
        }
        r.env[i].key = a->string;
        r.env[i].value = a->valuestring;
        i++;
    }
    r.n_env = i;
    rc = exec_start(c, &r, err);
out:
    free(r.argv);
    free(r.env);
    return rc;
}

int m_exec_input(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    static const char *const known[] = {"id", "data", "close", NULL};
    const char *data = NULL;
    bool present, close_after = false;
    uint64_t id;
    struct err berr;

    if (params_only(params, known, err) < 0 || param_id(params, &id, err) < 0 ||
        param_string(params, "data", &data, &present, err) < 0 ||
        param_bool(params, "close", &close_after, &present, err) < 0)
        return -1;
    if (!data && !close_after) {
        rpc_error_set(err, RPC_INVALID_PARAMS, "data: required unless close is true");
        return -1;
    }
    size_t dlen = data ? strlen(data) : 0;
    uint8_t *buf = NULL;
    long n = 0;
    if (dlen) {
        /* A request line is at most 1 MiB, so this is too. */
        size_t cap = dlen / 4 * 3 + 3;
        if (cap > EXEC_MAX_INPUT) {
            rpc_error_set(err, RPC_INVALID_PARAMS, "data: over the limit of %d bytes",
                          EXEC_MAX_INPUT);
            return -1;
        }
        if (!(buf = malloc(cap))) {
            rpc_error_set(err, RPC_INTERNAL_ERROR, "out of memory");
            return -1;
        }
        n = base64_decode(data, dlen, buf, cap, &berr);
        if (n < 0) {
            free(buf);
            err_wrap(&berr, "data");
            return rpc_error_from(err, RPC_INVALID_PARAMS, &berr);
        }
    }
    int r = exec_input(c, id, buf, (size_t)n, close_after, err);
    free(buf);
    if (r < 0)
        return -1;
    if (r == 0)
        *result = rpc_empty_result();
    return 0;
}

int m_exec_resize(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    static const char *const known[] = {"id", "rows", "cols", NULL};
    uint64_t id, rows = 0, cols = 0;

    if (params_only(params, known, err) < 0 || param_id(params, &id, err) < 0 ||
        param_range(params, "rows", 1, 65535, &rows, err) < 0 ||
        param_range(params, "cols", 1, 65535, &cols, err) < 0)
        return -1;
    if (!rows || !cols) {
        rpc_error_set(err, RPC_INVALID_PARAMS, "%s: required", rows ? "cols" : "rows");
        return -1;
    }
    if (exec_resize(id, (unsigned)rows, (unsigned)cols, err) < 0)
        return -1;
    *result = rpc_empty_result();
    return 0;
}

int m_exec_signal(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    static const char *const known[] = {"id", "signal", NULL};
    uint64_t id;

    if (params_only(params, known, err) < 0 || param_id(params, &id, err) < 0)
        return -1;
    cJSON *v = cJSON_GetObjectItemCaseSensitive(params, "signal");
    int sig = -1;
    if (cJSON_IsString(v))
        sig = names_signal_number(v->valuestring);
    else if (cJSON_IsNumber(v) && v->valuedouble >= 1 && v->valuedouble < 65)
        sig = v->valueint;
    if (sig <= 0) {
        rpc_error_set(err, RPC_INVALID_PARAMS,
                      "signal: %s a signal name like \"SIGINT\" or a number 1..64",
                      v ? "expected" : "required:");
        return -1;
    }
    if (exec_signal(id, sig, err) < 0)
        return -1;
    *result = rpc_empty_result();
    return 0;
}

int m_exec_wait(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    static const char *const known[] = {"id", "timeout_ms", NULL};
    uint64_t id, timeout = EXEC_WAIT_DEFAULT_MS;

    if (params_only(params, known, err) < 0 || param_id(params, &id, err) < 0 ||
        param_range(params, "timeout_ms", 0, EXEC_WAIT_MAX_MS, &timeout, err) < 0)
        return -1;
    return exec_wait(c, id, timeout, result, err);
}

int m_exec_list(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    if (params_only(params, no_params, err) < 0)
        return -1;
    size_t max_procs, bufsz;
    exec_limits(&max_procs, &bufsz);
    cJSON *r = cJSON_CreateObject();
    cJSON *list = exec_list_json();
    if (!r || !list) {
        cJSON_Delete(r);
        cJSON_Delete(list);
        return -1;
    }
    cJSON_AddItemToObject(r, "processes", list);
    cJSON_AddNumberToObject(r, "max_processes", (double)max_procs);
    cJSON_AddNumberToObject(r, "buffer_bytes", (double)bufsz);
    *result = r;
    return 0;
}

int m_exec_attach(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    static const char *const known[] = {"id", "offset", "stderr_offset", NULL};
    uint64_t id, off = 0, eoff = 0;
    bool present;

    if (params_only(params, known, err) < 0 || param_id(params, &id, err) < 0 ||
        param_uint(params, "offset", &off, &present, err) < 0 ||
        param_uint(params, "stderr_offset", &eoff, &present, err) < 0)
        return -1;
    return exec_attach(c, id, off, eoff, result, err);
}
