/* jsonget: reading members of a cJSON object that the schema already
 * checked, with a default for what is absent. NULL objects read as empty,
 * so a missing section needs no test of its own. Its prefix is the short
 * jget. */
#ifndef HEARTH_JSONGET_H
#define HEARTH_JSONGET_H

#include <stdbool.h>
#include <stdint.h>

struct cJSON;

/* Integers beyond 2^53 are not exact in a JSON double: they are the
 * ceiling for "no upper bound". */
#define JSON_INT53 (INT64_C(1) << 53)

/* obj[key] (case-sensitive), or NULL when obj is NULL or lacks it. */
const struct cJSON *jget(const struct cJSON *obj, const char *key);
/* Whether v is a finite number without a fraction. */
bool jget_integral(const struct cJSON *v);
/* An integral number within +-2^53 (where doubles are exact) into *out. */
bool jget_int(const struct cJSON *v, int64_t *out);
/* A non-negative integral number up to 2^53 into *out: what a count or a
 * duration read from a peer or a check may be. */
bool jget_uint(const struct cJSON *v, uint64_t *out);
/* obj[key] as an integer, or dflt when absent or not an integer. */
int64_t jget_int_or(const struct cJSON *obj, const char *key, int64_t dflt);
/* obj[key] as a string, or dflt when absent or not a string. */
const char *jget_str_or(const struct cJSON *obj, const char *key, const char *dflt);
/* obj[key] as a boolean, or dflt when absent or not a boolean. */
bool jget_bool_or(const struct cJSON *obj, const char *key, bool dflt);

#endif
