/* Shared helpers for the libFuzzer targets in tests/fuzz.
 *
 * Sanitizers only catch memory and UB errors; the targets also check what
 * each API promises (round trips, bounded output, valid UTF-8 in replies).
 * A broken promise aborts with a message naming it, so libFuzzer saves
 * the input as a crash artifact like any other failure. */
#ifndef HEARTH_FUZZ_COMMON_H
#define HEARTH_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_CHECK(cond, ...)                                                  \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "\n%s:%d: invariant broken: %s\n  ", __FILE__,    \
                    __LINE__, #cond);                                          \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
            abort();                                                           \
        }                                                                      \
    } while (0)

/* A NUL-terminated heap copy of exactly n bytes plus the NUL, so reading
 * past the terminator is caught by ASan. Embedded NULs end the string
 * early, as they would for any C caller. */
static inline char *fuzz_strndup(const uint8_t *data, size_t n)
{
    char *s = malloc(n + 1);
    if (!s)
        abort();
    memcpy(s, data, n);
    s[n] = '\0';
    return s;
}

/* Independent UTF-8 check written from the table of well-formed byte
 * sequences in the Unicode standard (chapter 3), deliberately in a
 * different style from utf8_invalid_at, which it is compared with.
 * Returns the offset of the first byte of the first ill-formed sequence,
 * or -1 when all of s is well formed. */
static inline long fuzz_utf8_ref(const void *buf, size_t len)
{
    const unsigned char *s = buf;
    size_t i = 0;

    while (i < len) {
        unsigned char b = s[i];
        unsigned char lo = 0x80, hi = 0xbf; /* range of the second byte */
        size_t n;                          /* continuation bytes */

        if (b <= 0x7f) {
            i++;
            continue;
        }
        if (b >= 0xc2 && b <= 0xdf) {
            n = 1;
        } else if (b == 0xe0) {
            n = 2, lo = 0xa0;
        } else if ((b >= 0xe1 && b <= 0xec) || b == 0xee || b == 0xef) {
            n = 2;
        } else if (b == 0xed) {
            n = 2, hi = 0x9f;
        } else if (b == 0xf0) {
            n = 3, lo = 0x90;
        } else if (b >= 0xf1 && b <= 0xf3) {
            n = 3;
        } else if (b == 0xf4) {
            n = 3, hi = 0x8f;
        } else {
            return (long)i;
        }
        if (len - i <= n)
            return (long)i;
        if (s[i + 1] < lo || s[i + 1] > hi)
            return (long)i;
        for (size_t k = 2; k <= n; k++)
            if (s[i + k] < 0x80 || s[i + k] > 0xbf)
                return (long)i;
        i += n + 1;
    }
    return -1;
}

#endif
