/* fuzz_env: env_files parsing (launch_parse_env), which reads files the
 * image or the agent itself may have written.
 *
 * The input is the file's bytes, NULs included; the environment starts
 * with one entry so overriding is exercised too.
 *
 * Checked beyond the sanitizers:
 *   - success: every entry is NAME=VALUE with NAME [A-Za-z_][A-Za-z0-9_]*,
 *     no NAME appears twice, PATH (set before) is still there, overridden
 *     or not, and the input held no NUL byte (which would have cut a
 *     value short);
 *   - failure: -1 with an error that starts with the file name and a line
 *     number (or "out of memory") and is terminated; the environment is
 *     still well formed (entries before the bad line kept). */
#include "launch.h"

#include <ctype.h>

#include "err.h"
#include "fuzz_common.h"

static void check_env(char **env, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const char *e = env[i];
        FUZZ_CHECK(e && (isalpha((unsigned char)e[0]) || e[0] == '_'), "bad name in %.60s", e);
        const char *eq = strchr(e, '=');
        FUZZ_CHECK(eq != NULL, "no = in %.60s", e);
        for (const char *p = e; p < eq; p++)
            FUZZ_CHECK(isalnum((unsigned char)*p) || *p == '_', "bad name byte in %.60s", e);
        for (size_t j = 0; j < i; j++) {
            const char *o = env[j];
            size_t kl = (size_t)(eq - e);
            FUZZ_CHECK(!(strncmp(o, e, kl) == 0 && o[kl] == '='), "%.*s twice", (int)kl, e);
        }
    }
    FUZZ_CHECK(env[n] == NULL, "environment not NULL-terminated");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char **env = calloc(2, sizeof(char *));
    size_t n = 1;
    struct err err;

    if (!env)
        abort();
    env[0] = strdup("PATH=/bin");
    if (!env[0])
        abort();
    memset(err.msg, 'X', sizeof(err.msg));
    int rc = launch_parse_env((const char *)data, size, "/f.env", &env, &n, &err);
    FUZZ_CHECK(rc == 0 || rc == -1, "returned %d", rc);
    check_env(env, n);
    if (rc == 0) {
        FUZZ_CHECK(memchr(data, '\0', size) == NULL, "accepted a NUL byte");
        bool path_set = false;
        for (size_t i = 0; i < n; i++)
            path_set |= strncmp(env[i], "PATH=", 5) == 0;
        FUZZ_CHECK(path_set, "PATH lost");
    } else {
        FUZZ_CHECK(memchr(err.msg, '\0', sizeof(err.msg)) != NULL, "err not terminated");
        FUZZ_CHECK(strncmp(err.msg, "/f.env:", 7) == 0, "err without file name: %s", err.msg);
    }
    for (size_t i = 0; i < n; i++)
        free(env[i]);
    free(env);
    return 0;
}
