#include "sha256.h"

#include <stdbool.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t ror(uint32_t x, unsigned n)
{
    return x >> n | x << (32 - n);
}

static void compress(uint32_t h[8], const uint8_t *p)
{
    uint32_t w[64], a, b, c, d, e, f, g, k;

    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = k + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
        uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        k = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += k;
}

#if defined(__x86_64__)
/* The same compression on the CPU's SHA extensions (SHA-NI: most x86
 * since 2017), several times the speed of the portable rounds: a file
 * copy hashes every byte on both sides. h holds A..H; the instructions
 * want them as ABEF and CDGH. Each step is 4 rounds; from the fifth on,
 * the step's 4 schedule words come from the previous 16 (msg1 / msg2). */
__attribute__((target("sha,sse4.1,ssse3"))) static void compress_ni(uint32_t h[8], const uint8_t *p,
                                                                      size_t blocks)
{
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
    __m128i t = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[0]), 0xb1); /* CDAB */
    __m128i s1 = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[4]), 0x1b); /* HGFE */
    __m128i s0 = _mm_alignr_epi8(t, s1, 8);                                        /* ABEF */
    s1 = _mm_blend_epi16(s1, t, 0xf0);                                             /* CDGH */

    for (; blocks; blocks--, p += 64) {
        __m128i a0 = s0, a1 = s1, m[4];
        for (int j = 0; j < 16; j++) {
            __m128i *w = &m[j & 3];
            if (j < 4) {
                *w = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * j)), bswap);
            } else {
                __m128i x = _mm_sha256msg1_epu32(*w, m[(j + 1) & 3]);
                x = _mm_add_epi32(x, _mm_alignr_epi8(m[(j + 3) & 3], m[(j + 2) & 3], 4));
                *w = _mm_sha256msg2_epu32(x, m[(j + 3) & 3]);
            }
            __m128i k = _mm_add_epi32(*w, _mm_loadu_si128((const __m128i *)&K[4 * j]));
            s1 = _mm_sha256rnds2_epu32(s1, s0, k);
            s0 = _mm_sha256rnds2_epu32(s0, s1, _mm_shuffle_epi32(k, 0x0e));
        }
        s0 = _mm_add_epi32(s0, a0);
        s1 = _mm_add_epi32(s1, a1);
    }
    t = _mm_shuffle_epi32(s0, 0x1b);                    /* FEBA */
    s1 = _mm_shuffle_epi32(s1, 0xb1);                   /* DCHG */
    _mm_storeu_si128((__m128i *)&h[0], _mm_blend_epi16(t, s1, 0xf0)); /* DCBA */
    _mm_storeu_si128((__m128i *)&h[4], _mm_alignr_epi8(s1, t, 8));    /* HGFE */
}

/* Asked of the CPU once: SHA (leaf 7 EBX bit 29), SSE4.1 and SSSE3
 * (leaf 1 ECX bits 19 and 9). */
static bool have_ni(void)
{
    static int have = -1;
    if (have < 0) {
        unsigned a, b, c, d;
        have = __get_cpuid(1, &a, &b, &c, &d) && (c >> 19 & 1) && (c >> 9 & 1) &&
               __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b >> 29 & 1);
    }
    return have;
}
#endif

/* blocks whole 64-byte blocks at p. */
static void compress_blocks(uint32_t h[8], const uint8_t *p, size_t blocks)
{
#if defined(__x86_64__)
    if (have_ni()) {
        compress_ni(h, p, blocks);
        return;
    }
#endif
    for (; blocks; blocks--, p += 64)
        compress(h, p);
}

void sha256_init(struct sha256 *s)
{
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, iv, sizeof(iv));
    s->bytes = 0;
    s->fill = 0;
}

void sha256_update(struct sha256 *s, const void *data, size_t len)
{
    const uint8_t *p = data;

    s->bytes += len;
    if (s->fill) {
        size_t take = 64 - s->fill < len ? 64 - s->fill : len;
        memcpy(s->block + s->fill, p, take);
        s->fill += take, p += take, len -= take;
        if (s->fill < 64)
            return;
        compress_blocks(s->h, s->block, 1);
        s->fill = 0;
    }
    compress_blocks(s->h, p, len / 64);
    p += len / 64 * 64;
    len %= 64;
    memcpy(s->block, p, len);
    s->fill = len;
}

void sha256_final(struct sha256 *s, uint8_t out[32])
{
    uint64_t bits = s->bytes * 8;

    s->block[s->fill++] = 0x80;
    if (s->fill > 56) {
        memset(s->block + s->fill, 0, 64 - s->fill);
        compress_blocks(s->h, s->block, 1);
        s->fill = 0;
    }
    memset(s->block + s->fill, 0, 56 - s->fill);
    for (int i = 0; i < 8; i++)
        s->block[56 + i] = (uint8_t)(bits >> (56 - 8 * i));
    compress_blocks(s->h, s->block, 1);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(s->h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(s->h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(s->h[i] >> 8);
        out[4 * i + 3] = (uint8_t)s->h[i];
    }
}

void sha256_hex(struct sha256 *s, char out[65])
{
    static const char hx[] = "0123456789abcdef";
    uint8_t d[32];

    sha256_final(s, d);
    for (int i = 0; i < 32; i++) {
        out[2 * i] = hx[d[i] >> 4];
        out[2 * i + 1] = hx[d[i] & 15];
    }
    out[64] = '\0';
}
