#include "cidr.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "err.h"

/* Longest textual IPv6 address inet_pton accepts (INET6_ADDRSTRLEN - 1):
 * anything longer cannot be an address, so it is rejected before copying. */
#define ADDR_TEXT_MAX 45

static int fail(struct err *err, const char *reason)
{
    return err_set(err, "%s", reason);
}

/* Strict decimal prefix length: digits only (no sign, no spaces, no
 * leading zeros), so "/+8", "/ 8", "/08" and "/8x" are all refused rather
 * than silently read the way strtoul would. */
static int parse_prefix(const char *p, unsigned max, unsigned *out)
{
    unsigned v = 0;
    size_t n = 0;

    for (; p[n]; n++) {
        if (p[n] < '0' || p[n] > '9' || n >= 3)
            return -1;
        v = v * 10 + (unsigned)(p[n] - '0');
    }
    if (n == 0 || (n > 1 && p[0] == '0') || v > max)
        return -1;
    *out = v;
    return 0;
}

/* Whether any bit at or after bit position prefix is set. */
static bool host_bits_set(const uint8_t *addr, unsigned bytes, unsigned prefix)
{
    for (unsigned i = prefix / 8; i < bytes; i++) {
        uint8_t mask = 0xff;
        if (i == prefix / 8 && prefix % 8)
            mask = (uint8_t)(0xff >> (prefix % 8));
        if (addr[i] & mask)
            return true;
    }
    return false;
}

static void clear_host_bits(uint8_t *addr, unsigned bytes, unsigned prefix)
{
    for (unsigned i = prefix / 8; i < bytes; i++) {
        if (i == prefix / 8 && prefix % 8)
            addr[i] &= (uint8_t)(0xff << (8 - prefix % 8));
        else
            addr[i] = 0;
    }
}

int cidr_parse(const char *s, bool allow_host_bits, struct cidr *out, struct err *err)
{
    char text[ADDR_TEXT_MAX + 1];
    struct cidr c;
    const char *slash;
    size_t alen;
    unsigned bytes, max, prefix;

    if (!s || !*s)
        return fail(err, "empty address");
    memset(&c, 0, sizeof(c));
    slash = strchr(s, '/');
    alen = slash ? (size_t)(slash - s) : strlen(s);
    if (alen == 0)
        return fail(err, "missing address before '/'");
    if (alen > ADDR_TEXT_MAX)
        return fail(err, "address too long");
    memcpy(text, s, alen);
    text[alen] = '\0';

    /* The family is decided by the text: only IPv6 has a ':'. */
    if (memchr(text, ':', alen)) {
        c.family = AF_INET6;
        bytes = 16;
        if (inet_pton(AF_INET6, text, c.addr) != 1)
            return fail(err, "bad IPv6 address");
    } else {
        c.family = AF_INET;
        bytes = 4;
        if (inet_pton(AF_INET, text, c.addr) != 1)
            return fail(err, "bad IPv4 address");
    }
    max = bytes * 8;
    prefix = max;
    if (slash && parse_prefix(slash + 1, max, &prefix) < 0) {
        return err_set(err, "bad prefix length (expected 0..%u)", max);
    }
    if (host_bits_set(c.addr, bytes, prefix)) {
        if (!allow_host_bits) {
            return err_set(err, "host bits set below the /%u prefix", prefix);
        }
        clear_host_bits(c.addr, bytes, prefix);
    }
    c.prefix = (uint8_t)prefix;
    if (out)
        *out = c;
    return 0;
}

void cidr_format(const struct cidr *c, char *buf, size_t len)
{
    char text[INET6_ADDRSTRLEN];

    if (!buf || !len)
        return;
    if (!c || (c->family != AF_INET && c->family != AF_INET6) ||
        !inet_ntop(c->family, c->addr, text, sizeof(text))) {
        buf[0] = '\0';
        return;
    }
    snprintf(buf, len, "%s/%u", text, (unsigned)c->prefix);
}

bool cidr_contains(const struct cidr *a, const struct cidr *b)
{
    unsigned full, rest;

    if (!a || !b || a->family != b->family || a->prefix > b->prefix)
        return false;
    /* Guard the byte loop against a hand-built struct with a bad prefix. */
    if (a->prefix > (a->family == AF_INET ? 32 : 128))
        return false;
    full = a->prefix / 8u;
    rest = a->prefix % 8u;
    if (memcmp(a->addr, b->addr, full) != 0)
        return false;
    if (rest) {
        uint8_t mask = (uint8_t)(0xff << (8 - rest));
        if ((a->addr[full] & mask) != (b->addr[full] & mask))
            return false;
    }
    return true;
}
