/* fuzz_netlink: the parsing half of init/net/netlink.c — what hearth does with
 * the bytes the kernel sends back (acks, extended-ack errors, dumped
 * attributes, nested attributes). The input is one received datagram,
 * copied to an exactly sized heap buffer and walked the way nl_transact
 * and nl_dump walk it.
 *
 * Checked beyond the sanitizers:
 *   - nl_attr_parse only hands out attributes that lie wholly inside the
 *     span it was given, each of the type of its slot, and nested spans
 *     parse the same way;
 *   - nl_parse_error returns 0, a negative errno in range or -EBADMSG, and
 *     always leaves a terminated message (non-empty on error). */
#include "netlink.h"

#include <errno.h>
#include <linux/netlink.h>

#include "err.h"
#include "fuzz_common.h"

#define MAXT 32

static void check_attrs(const uint8_t *p, size_t len, int depth)
{
    const struct nlattr *tb[MAXT + 1];
    if (nl_attr_parse(p, len, tb, MAXT) < 0)
        return;
    for (int t = 0; t <= MAXT; t++) {
        const struct nlattr *a = tb[t];
        if (!a)
            continue;
        const uint8_t *q = (const uint8_t *)a;
        FUZZ_CHECK(q >= p && q + NLA_HDRLEN <= p + len, "attr %d header outside its span", t);
        FUZZ_CHECK((a->nla_type & NLA_TYPE_MASK) == t, "attr in slot %d has type %d", t,
                   a->nla_type & NLA_TYPE_MASK);
        size_t dl = nl_attr_len(a);
        const uint8_t *d = nl_attr_data(a);
        FUZZ_CHECK(d + dl <= p + len, "attr %d data runs %zu bytes past its span", t,
                   (size_t)(d + dl - (p + len)));
        /* Touch every byte ASan can see; read the fixed-size getters only
         * where the attribute is big enough, as callers do. */
        volatile uint8_t sum = 0;
        for (size_t i = 0; i < dl; i++)
            sum += d[i];
        if (dl >= 4) {
            (void)nl_attr_get_u32(a);
            (void)nl_attr_get_be32(a);
        }
        if (dl >= 8)
            (void)nl_attr_get_be64(a);
        if (depth < 4)
            check_attrs(d, dl, depth + 1);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf)
        abort();
    memcpy(buf, data, size);
    int n = (int)size;
    for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, n); h = NLMSG_NEXT(h, n)) {
        if (h->nlmsg_type == NLMSG_ERROR) {
            struct err msg;
            memset(msg.msg, 'x', sizeof(msg.msg));
            int e = nl_parse_error(h, &msg);
            FUZZ_CHECK(memchr(msg.msg, 0, sizeof(msg.msg)) != NULL, "error message not terminated");
            FUZZ_CHECK(e == 0 || e == -EBADMSG || (e < 0 && e >= -4095), "code %d", e);
            FUZZ_CHECK(e == 0 || msg.msg[0], "empty message for %d", e);
            continue;
        }
        /* Dumped objects: a 4-byte nfgenmsg (or a larger rtnetlink
         * header) and then attributes; try both offsets. */
        size_t plen = h->nlmsg_len - NLMSG_HDRLEN;
        const uint8_t *pl = NLMSG_DATA(h);
        if (plen >= 4)
            check_attrs(pl + 4, plen - 4, 0);
        if (plen >= 16)
            check_attrs(pl + 16, plen - 16, 0);
    }
    free(buf);
    return 0;
}
