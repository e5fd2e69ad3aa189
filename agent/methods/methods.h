/* methods: the control protocol's method table. Each handler gets the
 * params (object or NULL), fills *result or err, and returns 0 / -1. */
#ifndef HEARTH_METHODS_H
#define HEARTH_METHODS_H

#include "rpc.h"

struct client;
struct cJSON;

typedef int (*method_fn)(struct client *c, struct cJSON *params, struct cJSON **result,
                         struct rpc_error *err);

struct method {
    const char *name;
    method_fn fn;
};

const struct method *methods_find(const char *name);
/* Names of all methods, for version.features. */
struct cJSON *methods_names_json(void);

/* Dispatches one request line for client c and returns the reply line
 * (NULL for a notification with no reply): buf when it fits in cap bytes,
 * else malloc'd, for the caller to free. Never fails silently: out of
 * memory becomes an internal error reply where possible. */
char *methods_handle_line(struct client *c, const char *line, size_t len, size_t *outlen,
                          char *buf, size_t cap);

#endif
