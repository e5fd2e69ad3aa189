/* rpc: newline-delimited JSON-RPC 2.0 framing, independent of any socket.
 * rpc_parse validates one request (a line linebuf.h cut from the stream);
 * rpc_format_* build reply lines. */
#ifndef HEARTH_RPC_H
#define HEARTH_RPC_H

#include <stdbool.h>
#include <stddef.h>

#include <cJSON.h>

#include "err.h"
#include "proto.h"


#define RPC_MAX_LINE PROTO_MAX_REQUEST /* one request, without its newline */

enum rpc_code {
    RPC_PARSE_ERROR = -32700,
    RPC_INVALID_REQUEST = -32600,
    RPC_METHOD_NOT_FOUND = -32601,
    RPC_INVALID_PARAMS = -32602,
    RPC_INTERNAL_ERROR = -32603,
    /* application errors, from -32000 down */
    RPC_ERR_FAILED = -32000,       /* the operation failed; message says why */
    RPC_ERR_BUSY = -32001,         /* too many clients, or shutting down */
    RPC_ERR_NOT_FOUND = -32002,    /* a named object (service, skill) does not exist */
    RPC_ERR_STATE = -32003,        /* not possible in the current state */
};

#define RPC_FAST_TEXT 64 /* longest method or string id the fast path keeps */
struct rpc_request {
    struct cJSON *root;   /* owned; free with rpc_request_free */
    struct cJSON *id;     /* NULL for a notification (no reply) */
    const char *method;
    struct cJSON *params; /* object, array, or NULL when absent */
    /* A plain envelope (see rpc_parse) is read without building a tree:
     * root stays NULL and id and method live here. */
    struct cJSON id_store;
    struct cJSON params_store; /* params given as {} */
    char method_store[RPC_FAST_TEXT];
    char id_text[RPC_FAST_TEXT];
};

struct rpc_error {
    int code;
    char message[256];
    struct cJSON *data;   /* optional, owned until formatted */
};

/* Returns 0 with req filled, or -1 with err set. On -1, req->id may still
 * hold the request's id (an invalid request that had one gets its reply
 * with that id); req->root must be freed either way. A line that is only
 * whitespace returns 1 (nothing to do). */
int rpc_parse(const char *line, size_t len, struct rpc_request *req, struct rpc_error *err);
/* rpc_parse without its fast path for plain envelopes; the tests and the
 * fuzzer check that both read every line the same way. */
int rpc_parse_general(const char *line, size_t len, struct rpc_request *req, struct rpc_error *err);
void rpc_request_free(struct rpc_request *req);

/* Reply lines, newline-terminated, malloc'd. id may be NULL (JSON null).
 * result/data are consumed. Return NULL only when out of memory. */
char *rpc_format_result(const struct cJSON *id, struct cJSON *result, size_t *len);
char *rpc_format_error(const struct cJSON *id, int code, const char *message,
                       struct cJSON *data, size_t *len);
/* An empty object for a result with nothing to say ({}): shared, never
 * to be filled; the formatters know not to free it. */
struct cJSON *rpc_empty_result(void);
/* The same into buf (cap bytes) when the line fits there: the result is
 * then buf itself, which the caller must not free; otherwise malloc'd. */
char *rpc_format_result_in(char *buf, size_t cap, const struct cJSON *id, struct cJSON *result,
                           size_t *len);
char *rpc_format_error_in(char *buf, size_t cap, const struct cJSON *id, int code,
                          const char *message, struct cJSON *data, size_t *len);
/* A result already printed as JSON text (jlen bytes, trusted to be one
 * valid JSON value: printed by hearth's own code, e.g. in a child
 * process), framed without parsing it again. */
char *rpc_format_result_text(const struct cJSON *id, const char *json, size_t jlen, size_t *len);
void rpc_error_set(struct rpc_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The reply's form of a failure a lower layer wrote into e (its message,
 * cut to the reply's 256 bytes). Returns -1, as a handler does. */
int rpc_error_from(struct rpc_error *err, int code, const struct err *e);

#endif
