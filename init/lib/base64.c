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

/* Each alphabet character's value plus one; 0 for anything else. */
static const uint8_t dec1[256] = {
    ['A'] = 1, ['B'] = 2, ['C'] = 3, ['D'] = 4, ['E'] = 5, ['F'] = 6, ['G'] = 7, ['H'] = 8,
    ['I'] = 9, ['J'] = 10, ['K'] = 11, ['L'] = 12, ['M'] = 13, ['N'] = 14, ['O'] = 15, ['P'] = 16,
    ['Q'] = 17, ['R'] = 18, ['S'] = 19, ['T'] = 20, ['U'] = 21, ['V'] = 22, ['W'] = 23, ['X'] = 24,
    ['Y'] = 25, ['Z'] = 26, ['a'] = 27, ['b'] = 28, ['c'] = 29, ['d'] = 30, ['e'] = 31, ['f'] = 32,
    ['g'] = 33, ['h'] = 34, ['i'] = 35, ['j'] = 36, ['k'] = 37, ['l'] = 38, ['m'] = 39, ['n'] = 40,
    ['o'] = 41, ['p'] = 42, ['q'] = 43, ['r'] = 44, ['s'] = 45, ['t'] = 46, ['u'] = 47, ['v'] = 48,
    ['w'] = 49, ['x'] = 50, ['y'] = 51, ['z'] = 52, ['0'] = 53, ['1'] = 54, ['2'] = 55, ['3'] = 56,
    ['4'] = 57, ['5'] = 58, ['6'] = 59, ['7'] = 60, ['8'] = 61, ['9'] = 62, ['+'] = 63, ['/'] = 64,
};

static int b64_value(unsigned char c)
{
    return dec1[c] - 1;
}

long base64_decode(const char *in, size_t inlen, uint8_t *out, size_t outcap, struct err *err)
{
    uint32_t acc = 0;
    int bits = 0;
    size_t n = 0, pad = 0, i = 0;

    /* Whole groups of 4 valid characters, 3 bytes each, while they fit:
     * the bulk of a file chunk. The first group with padding, a bad
     * character or no room left is done by the loop below one character
     * at a time, which owns every error (the state between groups is
     * nothing pending, the same as at the start). */
    for (; i + 4 <= inlen && n + 3 <= outcap; i += 4) {
        const unsigned char *g = (const unsigned char *)in + i;
        unsigned a = dec1[g[0]], b = dec1[g[1]], c = dec1[g[2]], d = dec1[g[3]];
        if (!a || !b || !c || !d)
            break;
        uint32_t v = (a - 1) << 18 | (b - 1) << 12 | (c - 1) << 6 | (d - 1);
        out[n] = (uint8_t)(v >> 16);
        out[n + 1] = (uint8_t)(v >> 8);
        out[n + 2] = (uint8_t)v;
        n += 3;
    }
    for (; i < inlen; i++) {
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
