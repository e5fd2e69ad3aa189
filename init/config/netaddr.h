/* netaddr: the textual network addresses hearth reads (an IP address, a
 * MAC address, "HOST:PORT"), parsed one way for the config checks and for
 * the modules that use them. No name resolution: a resolver would block. */
#ifndef HEARTH_NETADDR_H
#define HEARTH_NETADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* An IPv4 or IPv6 address (no prefix). *family gets AF_INET or AF_INET6
 * and out (16 bytes, may be NULL) the address in network byte order. */
bool netaddr_parse_ip(const char *s, int *family, uint8_t *out);
/* "xx:xx:xx:xx:xx:xx", two hex digits a byte, either case. mac may be
 * NULL to only check. */
bool netaddr_parse_mac(const char *s, uint8_t *mac);
/* Splits "HOST:PORT" at the last ':' into host (brackets of "[v6]" kept)
 * and a strict decimal port 1..65535. Returns 0; -1 when the port is
 * missing or bad; -2 when the host is empty or longer than hl - 1. */
int netaddr_split_hostport(const char *s, char *host, size_t hl, uint16_t *port);
/* "tcp:ADDR:PORT" with a numeric address ("[v6]" for IPv6) into host and
 * port (envd.listen); -1 with why in err. */
int netaddr_parse_listen(const char *s, char *host, size_t hl, uint16_t *port, struct err *err);

/* A protocol and an inclusive range of ports: "tcp:PORT", "udp:PORT",
 * "tcp:LOW-HIGH" (1..65535, LOW <= HIGH, strict decimal). */
struct port_range {
    uint8_t proto;              /* IPPROTO_TCP or IPPROTO_UDP */
    uint16_t lo, hi;
};
#define PORT_RANGE_TEXT_MAX 16  /* "tcp:65535-65535" and its NUL */
bool netaddr_parse_port_range(const char *s, struct port_range *out);
/* The canonical text: "tcp:49983", "udp:1000-2000". */
void netaddr_format_port_range(const struct port_range *r, char *out, size_t outlen);

#endif
