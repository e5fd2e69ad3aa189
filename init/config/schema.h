/* schema: validation of a config document, or of one top-level section
 * (as sandbox.init or egress.set receive them), against the tables of
 * every key hearth knows. Errors name the JSON path:
 * "services[0].backoff.max_ms: expected integer". */
#ifndef HEARTH_SCHEMA_H
#define HEARTH_SCHEMA_H

#include <stddef.h>

#include "err.h"

struct cJSON;

#define SCHEMA_ERR_MAX 512

/* Parses exactly len bytes of JSON: trailing data, raw control characters
 * in strings and \u0000 are errors. NULL with "syntax error at byte N
 * (line L, column C)..." in reason. */
struct cJSON *schema_parse_json(const char *text, size_t len, struct err *err);
/* Validates a whole document. 0, or -1 with "path: reason" in err. */
int schema_check_document(const struct cJSON *root, struct err *err);
/* Validates one top-level section on its own ("egress", "host_mounts",
 * "services", ...); errors name the path from key ("egress.allowOut[0]:
 * bad CIDR ..."). 0, or -1 with "path: reason" in err. */
int schema_check_section(const char *key, const struct cJSON *value, struct err *err);

#endif
