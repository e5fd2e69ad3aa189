#include "utf8.h"

#include <stdint.h>
#include <string.h>

long utf8_invalid_at(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        /* ASCII, 8 bytes at a time: no byte with its top bit set. */
        uint64_t w;
        while (i + 8 <= len && (memcpy(&w, p + i, 8), (w & 0x8080808080808080ULL) == 0))
            i += 8;
        if (i >= len)
            break;
        unsigned c = p[i];
        size_t need;
        unsigned min;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xe0) == 0xc0) {
            need = 1, min = 0x80, c &= 0x1f;
        } else if ((c & 0xf0) == 0xe0) {
            need = 2, min = 0x800, c &= 0x0f;
        } else if ((c & 0xf8) == 0xf0) {
            need = 3, min = 0x10000, c &= 0x07;
        } else {
            return (long)i;
        }
        if (i + need >= len)
            return (long)i;
        for (size_t k = 1; k <= need; k++) {
            if ((p[i + k] & 0xc0) != 0x80)
                return (long)i;
            c = (c << 6) | (p[i + k] & 0x3f);
        }
        /* overlong forms, surrogates, beyond U+10FFFF */
        if (c < min || (c >= 0xd800 && c <= 0xdfff) || c > 0x10ffff)
            return (long)i;
        i += need + 1;
    }
    return -1;
}

int utf8_clip(const char *s, size_t max)
{
    size_t n = strnlen(s, max + 1);
    if (n <= max)
        return (int)n;
    n = max;
    /* Back up over continuation bytes so no character is cut in half. */
    while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
        n--;
    return (int)n;
}
