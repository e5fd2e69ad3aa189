/* The harness shared by the targets that drive JSON-RPC method handlers
 * (fuzz_exec, fuzz_files): the input's first byte picks a method from the
 * target's table, the rest is its params (a JSON object); what the
 * handler returns is checked against the promises every method keeps:
 *   - it returns 0 with a result, or -1 with an error code and a message
 *     (no silent failure);
 *   - a -32602 message starts with the name of a parameter the method
 *     takes (every error names its field);
 *   - the result and the message print as valid UTF-8 JSON. */
#ifndef HEARTH_FUZZ_METHOD_H
#define HEARTH_FUZZ_METHOD_H

#include <stdbool.h>

#include <cJSON.h>

#include "fuzz_common.h"
#include "methods.h"
#include "rpc.h"

struct fuzz_method {
    const char *name;
    method_fn fn;
    const char *params; /* the ones it takes, space separated */
};

/* Whether msg starts with one of the names in list (space separated),
 * the name ending at the first of the characters in ends. */
static inline bool fuzz_names_param(const char *msg, const char *list, const char *ends)
{
    size_t n = strcspn(msg, ends);
    if (!msg[n])
        return false;
    for (const char *p = list; *p;) {
        size_t l = strcspn(p, " ");
        if (l == n && strncmp(p, msg, n) == 0)
            return true;
        p += l;
        while (*p == ' ')
            p++;
    }
    return false;
}

/* The method the input picks and its params, or NULL when the rest is
 * not a JSON object: rpc_parse refuses a line that is not UTF-8 before
 * any handler, and a request's params are an object. */
static inline cJSON *fuzz_method_params(const uint8_t *data, size_t size,
                                        const struct fuzz_method *table, size_t n,
                                        const struct fuzz_method **m)
{
    if (size < 1)
        return NULL;
    *m = &table[data[0] % n];
    char *text = fuzz_strndup(data + 1, size - 1);
    if (fuzz_utf8_ref(text, strlen(text)) >= 0) {
        free(text);
        return NULL;
    }
    cJSON *params = cJSON_Parse(text);
    free(text);
    if (!params || !cJSON_IsObject(params)) {
        cJSON_Delete(params);
        return NULL;
    }
    return params;
}

/* Calls m with params and checks what it hands back (a field name in a
 * -32602 message ends at the first of field_ends); frees the result and
 * the error's data, not params. */
static inline void fuzz_method_call(const struct fuzz_method *m, cJSON *params,
                                    const char *field_ends)
{
    struct rpc_error err = {0};
    cJSON *result = NULL;
    int rc = m->fn(NULL, params, &result, &err);
    if (rc == 0) {
        FUZZ_CHECK(result != NULL, "%s returned 0 without a result", m->name);
        char *out = cJSON_PrintUnformatted(result);
        FUZZ_CHECK(out && fuzz_utf8_ref(out, strlen(out)) < 0, "%s: result not UTF-8", m->name);
        cJSON_free(out);
        if (result != rpc_empty_result())
            cJSON_Delete(result);
    } else {
        FUZZ_CHECK(result == NULL, "%s failed but left a result", m->name);
        FUZZ_CHECK(err.code != 0 && err.message[0], "%s failed without an error", m->name);
        FUZZ_CHECK(fuzz_utf8_ref(err.message, strlen(err.message)) < 0, "%s: message not UTF-8",
                   m->name);
        if (err.code == RPC_INVALID_PARAMS)
            FUZZ_CHECK(fuzz_names_param(err.message, m->params, field_ends) ||
                           strstr(err.message, ": unknown parameter"),
                       "%s: \"%s\" names no parameter", m->name, err.message);
        cJSON_Delete(err.data);
    }
}

/* One input: the method it picks called with its params, after
 * prepare (NULL: none) has had them. */
static inline int fuzz_method_run(const uint8_t *data, size_t size,
                                  const struct fuzz_method *table, size_t n,
                                  const char *field_ends, void (*prepare)(cJSON *params))
{
    const struct fuzz_method *m;
    cJSON *params = fuzz_method_params(data, size, table, n, &m);
    if (!params)
        return 0;
    if (prepare)
        prepare(params);
    fuzz_method_call(m, params, field_ends);
    cJSON_Delete(params);
    return 0;
}

#endif
