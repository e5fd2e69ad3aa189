/* cidr: parsing and normalising IPv4/IPv6 addresses and prefixes, as the
 * egress policy accepts them ("10.10.0.0/16", "203.0.113.7", "fc00::/7"). */
#ifndef HEARTH_CIDR_H
#define HEARTH_CIDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct cidr {
    int family;         /* AF_INET or AF_INET6 */
    uint8_t addr[16];   /* network byte order; host bits cleared */
    uint8_t prefix;     /* 0..32 or 0..128 */
};

/* Parses s; a plain address is a /32 or /128. Host bits set under the
 * prefix ("10.1.2.3/8") are an error unless allow_host_bits, in which case
 * they are cleared. Returns 0, or -1 with a reason in err. */
int cidr_parse(const char *s, bool allow_host_bits, struct cidr *out, struct err *err);
/* Formats as "a.b.c.d/p" or "x::/p". buf needs 50 bytes. */
void cidr_format(const struct cidr *c, char *buf, size_t len);
/* Whether a contains b (same family, a's prefix <= b's, b inside a). */
bool cidr_contains(const struct cidr *a, const struct cidr *b);

#endif
