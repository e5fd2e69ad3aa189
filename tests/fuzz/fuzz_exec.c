/* fuzz_exec: the params of the exec.* methods (agent/methods/m_exec.c), which a
 * host sends and which end up as a process's argv, environment and
 * terminal size.
 *
 * The input's first byte picks the method, the rest is its params (JSON).
 * The process table (agent/exec/execproc.c) is replaced by stubs here, so no
 * input ever forks: they check what the handlers hand over instead.
 *
 * Checked beyond the sanitizers:
 *   - what reaches the table is within the documented limits: argv of
 *     1..EXEC_MAX_ARGV non-NULL strings, NULL-terminated, argv[0]
 *     non-empty, EXEC_MAX_ARGV_BYTES together; env names non-empty and
 *     without '=', EXEC_MAX_ENV of them in EXEC_MAX_ENV_BYTES; rows and
 *     cols only with a tty, 1..65535; input no longer than EXEC_MAX_INPUT;
 *     a signal 1..64;
 *   - what every method promises (fuzz_method.h), a parameter's name in
 *     a message ending at ':', '.' (env.NAME) or '[' (argv[3]). */
#include "m_exec.h"

#include <stdio.h>

#include <cJSON.h>

#include "config.h"
#include "execproc.h"
#include "fuzz_method.h"

static const struct fuzz_method methods[] = {
    {"exec.start", m_exec_start,
     "argv env cwd user group tty rows cols stdin timeout_ms kill_on_disconnect attach "
     "buffer_bytes"},
    {"exec.input", m_exec_input, "id data close"},
    {"exec.resize", m_exec_resize, "id rows cols"},
    {"exec.signal", m_exec_signal, "id signal"},
    {"exec.wait", m_exec_wait, "id timeout_ms"},
    {"exec.list", m_exec_list, ""},
    {"exec.attach", m_exec_attach, "id offset stderr_offset"},
};

/* ---- stubs for the process table ---- */

void exec_limits(size_t *max_processes, size_t *buffer_bytes)
{
    *max_processes = CONFIG_EXEC_MAX_PROCESSES;
    *buffer_bytes = CONFIG_EXEC_BUFFER_BYTES;
}

int exec_start(struct client *c, const struct exec_request *r, struct rpc_error *err)
{
    size_t bytes = 0;
    FUZZ_CHECK(r->argc >= 1 && r->argc <= EXEC_MAX_ARGV, "argc %zu", r->argc);
    FUZZ_CHECK(r->argv[r->argc] == NULL, "argv not NULL-terminated");
    FUZZ_CHECK(r->argv[0][0] != 0, "empty argv[0]");
    for (size_t i = 0; i < r->argc; i++) {
        FUZZ_CHECK(r->argv[i] != NULL, "argv[%zu] NULL", i);
        bytes += strlen(r->argv[i]) + 1;
    }
    FUZZ_CHECK(bytes <= EXEC_MAX_ARGV_BYTES, "argv bytes %zu", bytes);
    bytes = 0;
    FUZZ_CHECK(r->n_env <= EXEC_MAX_ENV, "n_env %zu", r->n_env);
    for (size_t i = 0; i < r->n_env; i++) {
        FUZZ_CHECK(r->env[i].key[0] && !strchr(r->env[i].key, '='), "env name");
        bytes += strlen(r->env[i].key) + strlen(r->env[i].value) + 2;
    }
    FUZZ_CHECK(bytes <= EXEC_MAX_ENV_BYTES, "env bytes %zu", bytes);
    FUZZ_CHECK(!r->cwd || (r->cwd[0] == '/' && strlen(r->cwd) < EXEC_MAX_PATH), "cwd");
    FUZZ_CHECK(!r->user || (r->user[0] && strlen(r->user) < EXEC_MAX_PATH), "user");
    FUZZ_CHECK(!r->group || (r->group[0] && strlen(r->group) < EXEC_MAX_PATH), "group");
    FUZZ_CHECK(r->tty || (!r->rows && !r->cols), "rows/cols without tty");
    FUZZ_CHECK(r->rows <= 65535 && r->cols <= 65535, "size %u x %u", r->rows, r->cols);
    /* A real start defers the reply; here it is refused like a bad user. */
    rpc_error_set(err, RPC_ERR_FAILED, "not started (fuzzing)");
    return -1;
}

int exec_input(struct client *c, uint64_t id, const uint8_t *data, size_t len, bool close_after,
               struct rpc_error *err)
{
    FUZZ_CHECK(len <= EXEC_MAX_INPUT, "input %zu", len);
    FUZZ_CHECK(len == 0 || data != NULL, "input without data");
    FUZZ_CHECK(len > 0 || close_after || data == NULL, "empty input without close");
    return 0;
}

int exec_resize(uint64_t id, unsigned rows, unsigned cols, struct rpc_error *err)
{
    FUZZ_CHECK(rows >= 1 && rows <= 65535 && cols >= 1 && cols <= 65535, "%u x %u", rows, cols);
    return 0;
}

int exec_signal(uint64_t id, int sig, struct rpc_error *err)
{
    FUZZ_CHECK(sig >= 1 && sig <= 64, "signal %d", sig);
    return 0;
}

int exec_wait(struct client *c, uint64_t id, uint64_t timeout_ms, cJSON **result,
              struct rpc_error *err)
{
    FUZZ_CHECK(timeout_ms <= EXEC_WAIT_MAX_MS, "timeout %llu", (unsigned long long)timeout_ms);
    *result = cJSON_CreateObject();
    return *result ? 0 : -1;
}

int exec_attach(struct client *c, uint64_t id, uint64_t off_out, uint64_t off_err,
                cJSON **result, struct rpc_error *err)
{
    *result = cJSON_CreateObject();
    return *result ? 0 : -1;
}

cJSON *exec_list_json(void) { return cJSON_CreateArray(); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_method_run(data, size, methods, sizeof(methods) / sizeof(methods[0]), ":.[",
                           NULL);
}
