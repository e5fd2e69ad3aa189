/* fuzz_base64: the base64 decoder (init/lib/base64.c) behind entropy.add,
 * sandbox.init and sandbox.resume, whose input comes from a control
 * client.
 *
 * The whole input is the text (length-delimited, embedded NULs included),
 * decoded into a 64-byte buffer so the capacity check is reached often.
 *
 * Checked beyond the sanitizers:
 *   - a success never writes past the capacity, and decodes 3 bytes per 4
 *     characters (rounded down) of the input without its padding;
 *   - decoding is canonical: encoding the bytes back gives the input with
 *     any missing padding added, so two texts never decode alike;
 *   - a failure leaves a terminated, non-empty message. */
#include "base64.h"

#include "err.h"
#include "fuzz_common.h"

#define CAP 64

static size_t encode(const uint8_t *in, size_t n, char *out)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)in[i] << 16 | (i + 1 < n ? (unsigned)in[i + 1] << 8 : 0) |
                     (i + 2 < n ? in[i + 2] : 0);
        out[o++] = tab[v >> 18 & 63];
        out[o++] = tab[v >> 12 & 63];
        out[o++] = i + 1 < n ? tab[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? tab[v & 63] : '=';
    }
    return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *out = malloc(CAP); /* heap, so ASan sees any overrun */
    char back[CAP / 3 * 4 + 8];
    struct err err;
    const char *text = (const char *)data;

    if (!out)
        abort();
    memset(err.msg, 'X', sizeof(err.msg));
    long n = base64_decode(text, size, out, CAP, &err);
    if (n < 0) {
        FUZZ_CHECK(n == -1, "returned %ld", n);
        FUZZ_CHECK(memchr(err.msg, '\0', sizeof(err.msg)) && err.msg[0], "bad error message");
        free(out);
        return 0;
    }
    FUZZ_CHECK(n <= CAP, "decoded %ld bytes into %d", n, CAP);
    size_t chars = size;
    while (chars && text[chars - 1] == '=')
        chars--;
    FUZZ_CHECK((size_t)n == chars * 3 / 4, "%zu chars gave %ld bytes", chars, n);
    size_t bl = encode(out, (size_t)n, back);
    FUZZ_CHECK(bl >= chars && memcmp(back, text, chars) == 0, "not canonical");
    for (size_t i = chars; i < bl; i++)
        FUZZ_CHECK(back[i] == '=', "missing data after %zu chars", chars);
    FUZZ_CHECK(size <= bl, "more padding than a group needs");
    free(out);
    return 0;
}
