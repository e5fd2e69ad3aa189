/* base64: standard base64 (RFC 4648 alphabet) for bytes carried in JSON:
 * entropy and secrets from the host, file chunks both ways. Shared by
 * hearth and hearthctl. */
#ifndef HEARTH_BASE64_H
#define HEARTH_BASE64_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* Room base64_encode needs for n bytes, its NUL included. */
#define BASE64_ENCODED_SIZE(n) (((n) + 2) / 3 * 4 + 1)

/* Encodes n bytes into out (BASE64_ENCODED_SIZE(n) bytes), padded, NUL
 * terminated. */
void base64_encode(const uint8_t *in, size_t n, char *out);

/* Decodes in (padding optional, no whitespace) into out (outcap bytes).
 * Returns the decoded length, or -1 with a reason in err ("invalid base64
 * at offset 7"); err may be NULL with errlen 0. */
long base64_decode(const char *in, size_t inlen, uint8_t *out, size_t outcap, struct err *err);

#endif
