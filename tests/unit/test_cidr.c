#include "unit.h"

#include <stdio.h>

#include <arpa/inet.h>
#include <sys/socket.h>

#include "cidr.h"
#include "err.h"

static int parse(const char *s, bool host_bits, struct cidr *out, char *err)
{
    struct err e = {0};
    int r = cidr_parse(s, host_bits, out, &e);
    if (err)
        snprintf(err, 128, "%s", e.msg);
    return r;
}

/* Formats s after parsing (host bits allowed), or "ERR: reason". */
static const char *roundtrip(const char *s, char *buf, size_t len)
{
    struct cidr c;
    struct err err;

    if (cidr_parse(s, true, &c, &err) < 0)
        snprintf(buf, len, "ERR: %s", err.msg);
    else
        cidr_format(&c, buf, len);
    return buf;
}

TEST(cidr_ipv4_network)
{
    struct cidr c;
    char err[128] = "";

    CHECK_EQ_INT(parse("10.10.0.0/16", false, &c, err), 0);
    CHECK_EQ_INT(c.family, AF_INET);
    CHECK_EQ_INT(c.prefix, 16);
    CHECK_EQ_INT(c.addr[0], 10);
    CHECK_EQ_INT(c.addr[1], 10);
    CHECK_EQ_INT(c.addr[2], 0);
    CHECK_EQ_INT(c.addr[3], 0);

    CHECK_EQ_INT(parse("0.0.0.0/0", false, &c, err), 0);
    CHECK_EQ_INT(c.prefix, 0);
    CHECK_EQ_INT(parse("172.16.0.0/12", false, &c, err), 0);
    CHECK_EQ_INT(c.prefix, 12);
}

TEST(cidr_plain_address_is_host_prefix)
{
    struct cidr c;
    char err[128];

    CHECK_EQ_INT(parse("203.0.113.7", false, &c, err), 0);
    CHECK_EQ_INT(c.family, AF_INET);
    CHECK_EQ_INT(c.prefix, 32);
    CHECK_EQ_INT(c.addr[3], 7);

    CHECK_EQ_INT(parse("::1", false, &c, err), 0);
    CHECK_EQ_INT(c.family, AF_INET6);
    CHECK_EQ_INT(c.prefix, 128);
    CHECK_EQ_INT(c.addr[15], 1);
}

TEST(cidr_ipv6)
{
    struct cidr c;
    char err[128];

    CHECK_EQ_INT(parse("fc00::/7", false, &c, err), 0);
    CHECK_EQ_INT(c.family, AF_INET6);
    CHECK_EQ_INT(c.prefix, 7);
    CHECK_EQ_INT(c.addr[0], 0xfc);
    CHECK_EQ_INT(parse("fe80::/10", false, &c, err), 0);
    CHECK_EQ_INT(c.prefix, 10);
    CHECK_EQ_INT(parse("::/0", false, &c, err), 0);
    CHECK_EQ_INT(c.prefix, 0);
    CHECK_EQ_INT(parse("2001:db8::/32", false, &c, err), 0);
    CHECK_EQ_INT(parse("::ffff:10.0.0.0/104", false, &c, err), 0);
    CHECK_EQ_INT(parse("fc00::/129", false, &c, err), -1);
    CHECK_CONTAINS(err, "0..128");
}

TEST(cidr_rejects_junk)
{
    static const char *const bad[] = {
        "",
        "/8",
        "10.0.0.0/",
        "10.0.0.0/33",
        "10.0.0.0/+8",
        "10.0.0.0/-1",
        "10.0.0.0/ 8",
        "10.0.0.0/8 ",
        "10.0.0.0/8x",
        "10.0.0.0/08",
        "10.0.0.0/8/8",
        "10.0.0.0/1000",
        "+10.0.0.0/8",
        " 10.0.0.0/8",
        "10.0.0/8",
        "10.0.0.256",
        "10.0.0.0.0",
        "abc",
        "fe80::1%eth0",
        "fc00:::/7",
        "1:2:3:4:5:6:7:8:9",
        "0000:0000:0000:0000:0000:0000:0000:0000:0000/64",
    };
    struct cidr c;
    struct err err;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err.msg[0] = '\0';
        if (cidr_parse(bad[i], true, &c, &err) != -1) {
            fprintf(stderr, "  accepted \"%s\"\n", bad[i]);
            unit_failures++;
        }
        CHECK(err.msg[0] != '\0');
    }
    CHECK_EQ_INT(cidr_parse(NULL, true, &c, &err), -1);
    CHECK_STR(err.msg, "empty address");
    CHECK_EQ_INT(cidr_parse("10.0.0.0/33", false, &c, &err), -1);
    CHECK_STR(err.msg, "bad prefix length (expected 0..32)");
    CHECK_EQ_INT(cidr_parse("10.0.0.300/8", false, &c, &err), -1);
    CHECK_STR(err.msg, "bad IPv4 address");
    CHECK_EQ_INT(cidr_parse("fc00:::/7", false, &c, &err), -1);
    CHECK_STR(err.msg, "bad IPv6 address");
    /* A NULL err buffer is allowed. */
    CHECK_EQ_INT(cidr_parse("junk", false, &c, NULL), -1);
}

TEST(cidr_host_bits)
{
    struct cidr c;
    char err[128], buf[64];

    CHECK_EQ_INT(parse("10.1.2.3/8", false, &c, err), -1);
    CHECK_STR(err, "host bits set below the /8 prefix");
    CHECK_EQ_INT(parse("10.1.2.3/8", true, &c, err), 0);
    cidr_format(&c, buf, sizeof(buf));
    CHECK_STR(buf, "10.0.0.0/8");

    CHECK_EQ_INT(parse("1.0.0.0/0", false, &c, err), -1);
    /* /12 boundaries: 172.16-31 is one network, 172.32 starts the next. */
    CHECK_EQ_INT(parse("172.31.0.0/12", false, &c, err), -1);
    CHECK_EQ_INT(parse("172.32.0.0/12", false, &c, err), 0);
    CHECK_EQ_INT(parse("169.254.68.6/30", false, &c, err), -1);
    CHECK_EQ_INT(parse("169.254.68.6/30", true, &c, err), 0);
    cidr_format(&c, buf, sizeof(buf));
    CHECK_STR(buf, "169.254.68.4/30");

    CHECK_EQ_INT(parse("fc00::1/7", false, &c, err), -1);
    CHECK_EQ_INT(parse("fe80::/9", false, &c, err), 0);
    CHECK_EQ_INT(parse("fe80::/8", false, &c, err), -1);
    CHECK_EQ_INT(parse("fc00::1/7", true, &c, err), 0);
    cidr_format(&c, buf, sizeof(buf));
    CHECK_STR(buf, "fc00::/7");
}

TEST(cidr_contains)
{
    struct cidr a, b;
    char err[128];

    CHECK_EQ_INT(parse("10.0.0.0/8", false, &a, err), 0);
    CHECK_EQ_INT(parse("10.10.0.0/16", false, &b, err), 0);
    CHECK(cidr_contains(&a, &b));
    CHECK(!cidr_contains(&b, &a));
    CHECK(cidr_contains(&a, &a));

    CHECK_EQ_INT(parse("11.0.0.0/8", false, &b, err), 0);
    CHECK(!cidr_contains(&a, &b));

    /* Prefixes that do not end on a byte boundary. */
    CHECK_EQ_INT(parse("172.16.0.0/12", false, &a, err), 0);
    CHECK_EQ_INT(parse("172.31.255.255", false, &b, err), 0);
    CHECK(cidr_contains(&a, &b));
    CHECK_EQ_INT(parse("172.32.0.0", false, &b, err), 0);
    CHECK(!cidr_contains(&a, &b));
    CHECK_EQ_INT(parse("172.15.255.255", false, &b, err), 0);
    CHECK(!cidr_contains(&a, &b));

    CHECK_EQ_INT(parse("0.0.0.0/0", false, &a, err), 0);
    CHECK(cidr_contains(&a, &b));

    /* Families never mix. */
    CHECK_EQ_INT(parse("::/0", false, &b, err), 0);
    CHECK(!cidr_contains(&a, &b));
    CHECK(!cidr_contains(&b, &a));

    CHECK_EQ_INT(parse("fc00::/7", false, &b, err), 0);
    CHECK_EQ_INT(parse("::/0", false, &a, err), 0);
    CHECK(cidr_contains(&a, &b));
    CHECK_EQ_INT(parse("fd12:3456::1", false, &a, err), 0);
    CHECK(cidr_contains(&b, &a));
    CHECK_EQ_INT(parse("fe80::1", false, &a, err), 0);
    CHECK(!cidr_contains(&b, &a));

    CHECK(!cidr_contains(NULL, &a));
    CHECK(!cidr_contains(&a, NULL));
}

TEST(cidr_format)
{
    char buf[64];
    struct cidr c;

    CHECK_STR(roundtrip("10.10.0.0/16", buf, sizeof(buf)), "10.10.0.0/16");
    CHECK_STR(roundtrip("203.0.113.7", buf, sizeof(buf)), "203.0.113.7/32");
    CHECK_STR(roundtrip("fc00::/7", buf, sizeof(buf)), "fc00::/7");
    CHECK_STR(roundtrip("::1", buf, sizeof(buf)), "::1/128");
    CHECK_STR(roundtrip("2001:0db8:0000::/32", buf, sizeof(buf)), "2001:db8::/32");
    CHECK_STR(roundtrip("FE80::/10", buf, sizeof(buf)), "fe80::/10");
    CHECK_STR(roundtrip("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", buf, sizeof(buf)),
              "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128");

    /* A short buffer is truncated, still terminated. */
    cidr_parse("10.10.0.0/16", false, &c, NULL);
    memset(buf, 'x', sizeof(buf));
    cidr_format(&c, buf, 6);
    CHECK_STR(buf, "10.10");

    /* A struct with no valid family formats as "". */
    memset(&c, 0, sizeof(c));
    cidr_format(&c, buf, sizeof(buf));
    CHECK_STR(buf, "");
}
