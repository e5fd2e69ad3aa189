/* jsonout: compact JSON text from a cJSON tree, the text every reply,
 * event and state file of hearth is made of. It writes what
 * cJSON_PrintUnformatted writes, except that an integer up to 2^53 is
 * always plain digits (cJSON switches to an exponent for some from 10^15
 * up) and U+0080..U+009F, the C1 controls, are written \u0080..\u009f
 * (cJSON passes them through; see termsafe.h). Its own because cJSON's
 * printer checks each number it prints by reading it back with sscanf,
 * which alone brings musl's whole scanf into the static binary; here a number is read back with strtod, which the
 * parser needs anyway, and an integer, nearly every number hearth sends,
 * is not read back at all. Depends on nothing of hearth's; linked into
 * hearthctl too. */
#ifndef HEARTH_JSONOUT_H
#define HEARTH_JSONOUT_H

#include <stddef.h>

struct cJSON;

/* Room for any number jsonout_number writes, with its NUL. */
#define JSONOUT_NUM_MAX 32

/* The text of item in one allocation of cJSON's allocator (cJSON_free
 * releases it); NULL for a tree holding an item of no JSON type or a raw
 * item without text, for text over INT_MAX bytes, or when memory runs
 * out. */
char *jsonout_print(const struct cJSON *item);

/* d as JSON into buf: "null" for NaN and the infinities, plain digits for
 * an integer up to 2^53 in size, else the shortest of 15 or 17
 * significant digits that reads back as d. Returns the length. */
size_t jsonout_number(double d, char buf[JSONOUT_NUM_MAX]);

#endif
