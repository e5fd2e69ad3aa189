/* netaddr: IP, MAC and HOST:PORT text (see netaddr.h). */
#include "netaddr.h"

#include <stdio.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "err.h"
#include "names.h"

bool netaddr_parse_ip(const char *s, int *family, uint8_t *out)
{
    uint8_t scratch[16];

    if (!out)
        out = scratch;
    if (inet_pton(AF_INET, s, out) == 1)
        *family = AF_INET;
    else if (inet_pton(AF_INET6, s, out) == 1)
        *family = AF_INET6;
    else
        return false;
    return true;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)(c | 0x20);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

bool netaddr_parse_mac(const char *s, uint8_t *mac)
{
    if (strlen(s) != 17)
        return false;
    for (int i = 0; i < 6; i++) {
        int hi = hex_digit(s[3 * i]), lo = hex_digit(s[3 * i + 1]);
        if (hi < 0 || lo < 0 || (i < 5 && s[3 * i + 2] != ':'))
            return false;
        if (mac)
            mac[i] = (uint8_t)(hi * 16 + lo);
    }
    return true;
}

int netaddr_split_hostport(const char *s, char *host, size_t hl, uint16_t *port)
{
    const char *colon = strrchr(s, ':');
    uint64_t p;
    size_t n;

    if (!colon || !names_parse_udec(colon + 1, 65535, &p) || p == 0)
        return -1;
    n = (size_t)(colon - s);
    if (n == 0 || n >= hl)
        return -2;
    memcpy(host, s, n);
    host[n] = '\0';
    *port = (uint16_t)p;
    return 0;
}

int netaddr_parse_listen(const char *s, char *host, size_t hl, uint16_t *port, struct err *err)
{
    unsigned char buf[16];
    if (strncmp(s, "tcp:", 4) != 0)
        return err_set(err, "expected \"tcp:ADDRESS:PORT\"");
    if (netaddr_split_hostport(s + 4, host, hl, port) < 0)
        return err_set(err, "expected \"tcp:ADDRESS:PORT\" (port 1..65535)");
    size_t n = strlen(host);
    if (host[0] == '[' && n > 2 && host[n - 1] == ']') {
        memmove(host, host + 1, n - 2);
        host[n - 2] = 0;
        if (inet_pton(AF_INET6, host, buf) == 1)
            return 0;
    } else if (inet_pton(AF_INET, host, buf) == 1) {
        return 0;
    }
    return err_set(err, "expected a numeric address (\"0.0.0.0\", \"127.0.0.1\", \"[::]\")");
}

bool netaddr_parse_port_range(const char *s, struct port_range *out)
{
    char num[16];
    uint64_t lo, hi;
    uint8_t proto;

    if (strncmp(s, "tcp:", 4) == 0)
        proto = IPPROTO_TCP;
    else if (strncmp(s, "udp:", 4) == 0)
        proto = IPPROTO_UDP;
    else
        return false;
    s += 4;
    const char *dash = strchr(s, '-');
    size_t n = dash ? (size_t)(dash - s) : strlen(s);
    if (n == 0 || n >= sizeof(num))
        return false;
    memcpy(num, s, n);
    num[n] = 0;
    if (!names_parse_udec(num, 65535, &lo) || lo == 0)
        return false;
    hi = lo;
    if (dash && (!names_parse_udec(dash + 1, 65535, &hi) || hi < lo))
        return false;
    if (out)
        *out = (struct port_range){proto, (uint16_t)lo, (uint16_t)hi};
    return true;
}

void netaddr_format_port_range(const struct port_range *r, char *out, size_t outlen)
{
    const char *p = r->proto == IPPROTO_UDP ? "udp" : "tcp";
    if (r->lo == r->hi)
        snprintf(out, outlen, "%s:%u", p, r->lo);
    else
        snprintf(out, outlen, "%s:%u-%u", p, r->lo, r->hi);
}
