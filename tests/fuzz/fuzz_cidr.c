/* fuzz_cidr: the CIDR parser (init/lib/cidr.c) behind the egress policy,
 * config validation and egress.set, where the text comes from the host
 * platform or a control client.
 *
 * The input holds two strings separated by the first '\n' (a missing
 * second string is empty); each is a NUL-terminated heap copy, parsed
 * with allow_host_bits false and true.
 *
 * Checked beyond the sanitizers:
 *   - the strict parse succeeds only if the permissive one does, with the
 *     same result; a permissive result has no host bits and a prefix
 *     within the family's width;
 *   - cidr_format fits the documented 50 bytes and its text parses back
 *     (strictly) to the same value;
 *   - cidr_contains is reflexive, and mutual containment means equality;
 *     a network contains the host-bits-cleared form of any address it
 *     contains;
 *   - err is a terminated, non-empty message on failure. */
#include "cidr.h"

#include <sys/socket.h>

#include "err.h"
#include "fuzz_common.h"

static bool same(const struct cidr *a, const struct cidr *b)
{
    return a->family == b->family && a->prefix == b->prefix &&
           memcmp(a->addr, b->addr, sizeof(a->addr)) == 0;
}

static void check_clean(const struct cidr *c, const char *s)
{
    unsigned bytes = c->family == AF_INET ? 4 : 16;
    FUZZ_CHECK(c->family == AF_INET || c->family == AF_INET6, "family %d for %s", c->family, s);
    FUZZ_CHECK(c->prefix <= bytes * 8, "prefix %u for %s", (unsigned)c->prefix, s);
    for (unsigned bit = c->prefix; bit < 128; bit++)
        FUZZ_CHECK(!(c->addr[bit / 8] & (0x80 >> (bit % 8))), "bit %u set in %s", bit, s);
}

/* Returns whether s parsed (permissively) into *out. */
static bool parse_both(const char *s, struct cidr *out)
{
    struct cidr strict, loose;
    struct err err;
    struct err err2;
    int rs, rl;

    memset(err.msg, 'X', sizeof(err.msg));
    memset(err2.msg, 'X', sizeof(err2.msg));
    rs = cidr_parse(s, false, &strict, &err);
    rl = cidr_parse(s, true, &loose, &err2);
    FUZZ_CHECK(rs == 0 || rs == -1, "cidr_parse returned %d", rs);
    FUZZ_CHECK(rl == 0 || rl == -1, "cidr_parse returned %d", rl);
    if (rs < 0)
        FUZZ_CHECK(memchr(err.msg, '\0', sizeof(err.msg)) && err.msg[0], "bad err for strict %s", s);
    if (rl < 0) {
        FUZZ_CHECK(memchr(err2.msg, '\0', sizeof(err2.msg)) && err2.msg[0], "bad err for %s", s);
        FUZZ_CHECK(rs < 0, "strict accepted what permissive refused: %s", s);
        return false;
    }
    if (rs == 0)
        FUZZ_CHECK(same(&strict, &loose), "strict and permissive differ for %s", s);
    check_clean(&loose, s);

    /* A NULL out and NULL err must be accepted too. */
    FUZZ_CHECK(cidr_parse(s, true, NULL, NULL) == 0, "parse with NULL out failed: %s", s);

    char text[50];
    cidr_format(&loose, text, sizeof(text));
    FUZZ_CHECK(text[0] && strlen(text) < sizeof(text), "format of %s: %s", s, text);
    struct cidr back;
    struct err err3;
    FUZZ_CHECK(cidr_parse(text, false, &back, &err3) == 0,
               "formatted %s (from %s) does not parse: %s", text, s, err3.msg);
    FUZZ_CHECK(same(&back, &loose), "formatted %s (from %s) parses to another value", text, s);
    /* A short buffer truncates, never overruns (ASan watches the end). */
    char small[6];
    cidr_format(&loose, small, sizeof(small));
    FUZZ_CHECK(memchr(small, '\0', sizeof(small)) != NULL, "short format not terminated");

    FUZZ_CHECK(cidr_contains(&loose, &loose), "%s does not contain itself", s);
    *out = loose;
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nl = memchr(data, '\n', size);
    size_t n1 = nl ? (size_t)(nl - data) : size;
    char *s1 = fuzz_strndup(data, n1);
    char *s2 = nl ? fuzz_strndup(nl + 1, size - n1 - 1) : fuzz_strndup(data, 0);
    struct cidr a, b;
    bool ok1 = parse_both(s1, &a), ok2 = parse_both(s2, &b);

    if (ok1 && ok2) {
        bool ab = cidr_contains(&a, &b), ba = cidr_contains(&b, &a);
        if (ab && ba)
            FUZZ_CHECK(same(&a, &b), "%s and %s contain each other but differ", s1, s2);
        if (ab)
            FUZZ_CHECK(a.family == b.family && a.prefix <= b.prefix,
                       "%s contains %s across family or prefix", s1, s2);
        /* Widening b to a's prefix keeps it inside a exactly when a
         * contains b. */
        if (a.family == b.family && a.prefix <= b.prefix) {
            struct cidr w = b;
            w.prefix = a.prefix;
            for (unsigned bit = w.prefix; bit < 128; bit++)
                w.addr[bit / 8] &= (uint8_t)~(0x80 >> (bit % 8));
            FUZZ_CHECK(ab == same(&w, &a), "%s / %s: contains=%d but widened equal=%d", s1, s2,
                       ab, same(&w, &a));
        }
    }
    free(s1);
    free(s2);
    return 0;
}
