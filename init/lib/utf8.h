/* utf8: validating and clipping UTF-8, for every place where bytes from a
 * peer or a service end up in JSON (requests, error messages, log lines). */
#ifndef HEARTH_UTF8_H
#define HEARTH_UTF8_H

#include <stddef.h>

/* Index of the first byte that breaks UTF-8 (bad lead, truncated or bad
 * continuation, overlong form, surrogate, beyond U+10FFFF), or -1. */
long utf8_invalid_at(const char *s, size_t len);
/* Length of s cut to at most max bytes on a character boundary, for
 * "%.*s" when echoing client text into messages: a cut in the middle of a
 * UTF-8 sequence would make the reply invalid. */
int utf8_clip(const char *s, size_t max);

#endif
