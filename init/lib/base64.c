#include "base64.h"

#include "err.h"

#include <stdio.h>

void base64_encode(const uint8_t *in, size_t n, char *out)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0, i = 0;

    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        out[o++] = tab[v >> 18 & 63];
        out[o++] = tab[v >> 12 & 63];
        out[o++] = tab[v >> 6 & 63];
        out[o++] = tab[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0);
        out[o++] = tab[v >> 18 & 63];
        out[o++] = tab[v >> 12 & 63];
        out[o++] = i + 1 < n ? tab[v >> 6 & 63] : '=';
        out[o++] = '=';
    }
    out[o] = '\0';
}

static int b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

long base64_decode(const char *in, size_t inlen, uint8_t *out, size_t outcap, struct err *err)
{
    uint32_t acc = 0;
    int bits = 0;
    size_t n = 0, pad = 0, i;

    for (i = 0; i < inlen; i++) {
        unsigned char c = (unsigned char)in[i];
        if (c == '=') {
            pad++;
            continue;
        }
        int v = b64_value(c);
        if (v < 0 || pad)
            return err_set(err, "invalid base64 at offset %zu", i);
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (n >= outcap)
                return err_set(err, "more than %zu bytes", outcap);
            out[n++] = (uint8_t)(acc >> bits);
        }
    }
    /* 6 leftover bits cannot come from whole bytes; padding at most 2 and
     * only where it completes a group of 4. */
    size_t chars = inlen - pad;
    if (bits >= 6 || pad > 2 || (pad && (chars + pad) % 4 != 0) ||
        (acc & ((1u << bits) - 1)) != 0) {
        return err_set(err, "invalid base64 (truncated or bad padding)");
    }
    return (long)n;
}
