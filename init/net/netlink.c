#include "netlink.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <linux/netfilter/nfnetlink.h>

#include "err.h"

#ifndef NETLINK_EXT_ACK
#define NETLINK_EXT_ACK 11
#endif
#ifndef NETLINK_CAP_ACK
#define NETLINK_CAP_ACK 10
#endif

#define RECV_BUF (64u * 1024)
/* Stop reading after this many messages: a bound on a misbehaving dump. */
#define DUMP_MAX_MSGS 1000000

void nl_init(struct nlbuf *b, uint32_t first_seq)
{
    memset(b, 0, sizeof(*b));
    b->first_seq = b->seq = first_seq;
}

void nl_free(struct nlbuf *b)
{
    free(b->data);
    memset(b, 0, sizeof(*b));
}

static uint8_t *reserve(struct nlbuf *b, size_t n)
{
    if (b->failed)
        return NULL;
    if (n > NL_BUF_MAX || b->len > NL_BUF_MAX - n) {
        b->failed = true;
        return NULL;
    }
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n)
            cap *= 2;
        uint8_t *d = realloc(b->data, cap);
        if (!d) {
            b->failed = true;
            return NULL;
        }
        b->data = d;
        b->cap = cap;
    }
    uint8_t *p = b->data + b->len;
    memset(p, 0, NLMSG_ALIGN(n));
    return p;
}

static void append(struct nlbuf *b, const void *p, size_t len)
{
    size_t al = NLMSG_ALIGN(len);
    uint8_t *d = reserve(b, al);
    if (!d)
        return;
    if (len)
        memcpy(d, p, len);
    b->len += al;
}

uint32_t nl_msg_begin(struct nlbuf *b, uint16_t type, uint16_t flags)
{
    struct nlmsghdr h = {.nlmsg_len = 0, .nlmsg_type = type,
                         .nlmsg_flags = NLM_F_REQUEST | flags, .nlmsg_seq = b->seq};
    b->msg_start = b->len;
    append(b, &h, sizeof(h));
    b->n_msgs++;
    return b->seq++;
}

void nl_put(struct nlbuf *b, const void *p, size_t len)
{
    append(b, p, len);
}

void nl_put_nfgen(struct nlbuf *b, uint8_t family, uint16_t res_id)
{
    struct nfgenmsg g = {.nfgen_family = family, .version = NFNETLINK_V0,
                         .res_id = htons(res_id)};
    append(b, &g, sizeof(g));
}

void nl_msg_end(struct nlbuf *b)
{
    if (b->failed)
        return;
    struct nlmsghdr *h = (struct nlmsghdr *)(b->data + b->msg_start);
    h->nlmsg_len = (uint32_t)(b->len - b->msg_start);
}

void nl_attr(struct nlbuf *b, uint16_t type, const void *p, size_t len)
{
    if (len > 0xffff - NLA_HDRLEN) {
        b->failed = true;
        return;
    }
    struct nlattr a = {.nla_len = (uint16_t)(NLA_HDRLEN + len), .nla_type = type};
    uint8_t *d = reserve(b, NLA_HDRLEN + NLA_ALIGN(len));
    if (!d)
        return;
    memcpy(d, &a, sizeof(a));
    if (len)
        memcpy(d + NLA_HDRLEN, p, len);
    b->len += NLA_HDRLEN + NLA_ALIGN(len);
}

void nl_attr_str(struct nlbuf *b, uint16_t type, const char *s)
{
    nl_attr(b, type, s, strlen(s) + 1);
}

void nl_attr_u8(struct nlbuf *b, uint16_t type, uint8_t v)
{
    nl_attr(b, type, &v, 1);
}

void nl_attr_u32(struct nlbuf *b, uint16_t type, uint32_t v)
{
    nl_attr(b, type, &v, 4);
}

void nl_attr_be32(struct nlbuf *b, uint16_t type, uint32_t v)
{
    uint32_t be = htonl(v);
    nl_attr(b, type, &be, 4);
}

void nl_attr_be64(struct nlbuf *b, uint16_t type, uint64_t v)
{
    uint8_t be[8];
    for (int i = 0; i < 8; i++)
        be[i] = (uint8_t)(v >> (56 - 8 * i));
    nl_attr(b, type, be, 8);
}

size_t nl_nest_begin(struct nlbuf *b, uint16_t type)
{
    size_t off = b->len;
    nl_attr(b, type | NLA_F_NESTED, NULL, 0);
    return off;
}

void nl_nest_end(struct nlbuf *b, size_t off)
{
    if (b->failed)
        return;
    size_t n = b->len - off;
    if (n > 0xffff) {
        b->failed = true;
        return;
    }
    ((struct nlattr *)(b->data + off))->nla_len = (uint16_t)n;
}

static void batch_msg(struct nlbuf *b, uint16_t type, uint16_t subsys)
{
    nl_msg_begin(b, type, 0);
    b->n_msgs--; /* batch markers are never acked */
    nl_put_nfgen(b, AF_UNSPEC, subsys);
    nl_msg_end(b);
}

void nl_batch_begin(struct nlbuf *b, uint16_t subsys)
{
    batch_msg(b, NFNL_MSG_BATCH_BEGIN, subsys);
}

void nl_batch_end(struct nlbuf *b, uint16_t subsys)
{
    batch_msg(b, NFNL_MSG_BATCH_END, subsys);
}

const struct nlattr *nl_attr_next(const void *p, size_t len, const struct nlattr *prev, bool *bad)
{
    const uint8_t *start = p, *end = start + len;
    const uint8_t *q = prev ? (const uint8_t *)prev + NLA_ALIGN(prev->nla_len) : start;

    /* The last attribute's padding may be missing: stepping past the end
     * is the end, not an error. */
    if (q >= end)
        return NULL;
    const struct nlattr *a = (const struct nlattr *)q;
    if ((size_t)(end - q) < NLA_HDRLEN || a->nla_len < NLA_HDRLEN ||
        a->nla_len > (size_t)(end - q)) {
        *bad = true;
        return NULL;
    }
    return a;
}

int nl_attr_parse(const void *p, size_t len, const struct nlattr **tb, int max)
{
    bool bad = false;

    for (int i = 0; i <= max; i++)
        tb[i] = NULL;
    for (const struct nlattr *a = nl_attr_next(p, len, NULL, &bad); a;
         a = nl_attr_next(p, len, a, &bad)) {
        int t = a->nla_type & NLA_TYPE_MASK;
        if (t <= max)
            tb[t] = a;
    }
    return bad ? -1 : 0;
}

const void *nl_msg_attrs(const struct nlmsghdr *h, size_t hdrlen, const struct nlattr **tb, int max)
{
    size_t off = NLMSG_LENGTH(NLMSG_ALIGN(hdrlen));
    if (h->nlmsg_len < off ||
        nl_attr_parse((const uint8_t *)h + off, h->nlmsg_len - off, tb, max) < 0)
        return NULL;
    return NLMSG_DATA(h);
}

const void *nl_attr_data(const struct nlattr *a)
{
    return (const uint8_t *)a + NLA_HDRLEN;
}

size_t nl_attr_len(const struct nlattr *a)
{
    return a->nla_len - NLA_HDRLEN;
}

uint32_t nl_attr_get_u32(const struct nlattr *a)
{
    uint32_t v = 0;
    if (nl_attr_len(a) >= 4)
        memcpy(&v, nl_attr_data(a), 4);
    return v;
}

uint32_t nl_attr_get_be32(const struct nlattr *a)
{
    return ntohl(nl_attr_get_u32(a));
}

uint64_t nl_attr_get_be64(const struct nlattr *a)
{
    const uint8_t *d = nl_attr_data(a);
    uint64_t v = 0;
    if (nl_attr_len(a) < 8)
        return 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | d[i];
    return v;
}

int nl_parse_error(const struct nlmsghdr *h, struct err *err)
{
    if (err)
        err->msg[0] = 0;
    if (h->nlmsg_len < NLMSG_HDRLEN + sizeof(struct nlmsgerr)) {
        err_set(err, "truncated netlink error message");
        return -EBADMSG;
    }
    const struct nlmsgerr *e = NLMSG_DATA(h);
    int code = e->error;
    if (code > 0 || code < -4095) {
        err_set(err, "bad netlink error code %d", code);
        return -EBADMSG;
    }
    if (code == 0)
        return 0;
    /* Extended ack: TLVs follow the echoed header (capped: header only)
     * when the kernel set NLM_F_ACK_TLVS. */
    if (h->nlmsg_flags & NLM_F_ACK_TLVS) {
        size_t off = NLMSG_HDRLEN + sizeof(*e);
        if (!(h->nlmsg_flags & NLM_F_CAPPED))
            off += NLMSG_ALIGN(e->msg.nlmsg_len) - NLMSG_HDRLEN;
        if (off < h->nlmsg_len) {
            const struct nlattr *tb[NLMSGERR_ATTR_MSG + 1];
            if (nl_attr_parse((const uint8_t *)h + off, h->nlmsg_len - off, tb,
                              NLMSGERR_ATTR_MSG) == 0 && tb[NLMSGERR_ATTR_MSG]) {
                const char *s = nl_attr_data(tb[NLMSGERR_ATTR_MSG]);
                size_t n = strnlen(s, nl_attr_len(tb[NLMSGERR_ATTR_MSG]));
                err_set(err, "%s: %.*s", strerror(-code), (int)n, s);
                return code;
            }
        }
    }
    err_set(err, "%s", strerror(-code));
    return code;
}

int nl_open(int protocol, struct err *err)
{
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, protocol);
    if (fd < 0)
        return err_unable(err, errno, "open a netlink socket");
    int one = 1, big = 8 << 20;
    /* Best effort: without them errors are shorter and big policies may
     * need several tries, but nothing is wrong. */
    setsockopt(fd, SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof(one));
    setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof(one));
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big)) < 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big)) < 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
    struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        err_unable(err, errno, "bind the netlink socket");
        close(fd);
        return -1;
    }
    return fd;
}

static int send_buf(int fd, struct nlbuf *b, struct err *err)
{
    if (b->failed) {
        err_set(err, "unable to build the netlink message: too large or out of memory");
        return -ENOMEM;
    }
    struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
    ssize_t n;
    do
        n = sendto(fd, b->data, b->len, 0, (struct sockaddr *)&sa, sizeof(sa));
    while (n < 0 && errno == EINTR);
    if (n < 0) {
        int e = errno;
        err_unable(err, e, "send to netlink");
        return -e;
    }
    if ((size_t)n != b->len) {
        err_set(err, "unable to send to netlink: short write");
        return -EIO;
    }
    return 0;
}

/* Whether h answers one of the messages in b: a reply left over from an
 * earlier request, or a notification, on a socket kept open must not be
 * taken for this request's. */
static bool answers(const struct nlbuf *b, const struct nlmsghdr *h)
{
    return h->nlmsg_seq - b->first_seq < b->seq - b->first_seq;
}

/* One datagram, or -errno. EAGAIN means the kernel had nothing more. */
static ssize_t recv_one(int fd, uint8_t *buf, size_t len)
{
    ssize_t n;
    do
        n = recv(fd, buf, len, MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    return n < 0 ? -errno : n;
}

int nl_transact(int fd, struct nlbuf *b, struct err *err)
{
    uint32_t acked = 0;
    int first_err = 0;
    uint8_t *buf;

    b->refused = false;
    int rc = send_buf(fd, b, err);
    if (rc < 0)
        return rc;
    buf = malloc(RECV_BUF);
    if (!buf) {
        err_set(err, "out of memory");
        return -ENOMEM;
    }
    /* Errors arrive for failing messages and acks for the others; after
     * the first error the kernel aborts the batch and acks no more. */
    while (acked < b->n_msgs) {
        ssize_t n = recv_one(fd, buf, RECV_BUF);
        if (n < 0) {
            if (!first_err) {
                err_set(err, "netlink: %u of %u replies missing (%s)",
                        b->n_msgs - acked, b->n_msgs, strerror((int)-n));
                first_err = n == -EAGAIN ? -ETIMEDOUT : (int)n;
            }
            break;
        }
        for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n);
             h = NLMSG_NEXT(h, n)) {
            if (h->nlmsg_type != NLMSG_ERROR || !answers(b, h))
                continue;
            struct err msg;
            int e = nl_parse_error(h, &msg);
            acked++;
            if (e < 0 && !first_err) {
                first_err = e;
                b->refused = true;
                b->refused_seq = h->nlmsg_seq;
                err_set(err, "%s", msg.msg);
            }
        }
        if (first_err)
            break;
    }
    /* Drain whatever else is queued so the next request starts clean. */
    while (recv_one(fd, buf, RECV_BUF) > 0)
        ;
    free(buf);
    return first_err;
}

int nl_dump(int fd, struct nlbuf *b, nl_msg_cb cb, void *arg, struct err *err)
{
    int rc = send_buf(fd, b, err);
    if (rc < 0)
        return rc;
    uint8_t *buf = malloc(RECV_BUF);
    if (!buf) {
        err_set(err, "out of memory");
        return -ENOMEM;
    }
    size_t count = 0;
    rc = 0;
    for (;;) {
        ssize_t n = recv_one(fd, buf, RECV_BUF);
        if (n < 0) {
            err_unable(err, (int)-n, "read the netlink dump");
            rc = n == -EAGAIN ? -ETIMEDOUT : (int)n;
            goto out;
        }
        for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n);
             h = NLMSG_NEXT(h, n)) {
            if (!answers(b, h))
                continue;
            if (++count > DUMP_MAX_MSGS) {
                err_set(err, "unable to read the netlink dump: too many messages");
                rc = -E2BIG;
                goto out;
            }
            if (h->nlmsg_type == NLMSG_DONE)
                goto out;
            if (h->nlmsg_type == NLMSG_ERROR) {
                struct err msg;
                int e = nl_parse_error(h, &msg);
                if (e < 0) {
                    err_set(err, "%s", msg.msg);
                    rc = e;
                }
                /* An ack ends a plain (non-dump) request such as GETGEN. */
                goto out;
            }
            if (!rc) {
                int r = cb(h, arg);
                if (r < 0) {
                    err_set(err, "unable to read the netlink dump: bad reply");
                    rc = r;
                }
            }
        }
    }
out:
    while (recv_one(fd, buf, RECV_BUF) > 0)
        ;
    free(buf);
    return rc;
}
