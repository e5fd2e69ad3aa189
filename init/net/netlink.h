/* netlink: a small in-tree netlink layer shared by rtnetlink and
 * nf_tables code. A growable message buffer with nested attributes and
 * nfnetlink batch framing, a non-blocking socket, and reply parsing that
 * reports the kernel's extended ack text (NLMSGERR_ATTR_MSG). Its prefix
 * is the short nl_. */
#ifndef HEARTH_NETLINK_H
#define HEARTH_NETLINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/netlink.h>

#include "err.h"

/* Upper bound of one buffer: a 10,000-CIDR policy is about 0.5 MiB. */
#define NL_BUF_MAX (16u << 20)

struct nlbuf {
    uint8_t *data;
    size_t len, cap;
    bool failed;        /* out of memory or over NL_BUF_MAX: nothing is sent */
    size_t msg_start;   /* offset of the message being built */
    uint32_t first_seq; /* the first message's sequence number */
    uint32_t seq;       /* next sequence number */
    uint32_t n_msgs;    /* messages started (each asks for an ack) */
    /* Set by nl_transact: the sequence number of the first message the
     * kernel refused, so a caller can tell which part of a batch it was. */
    bool refused;
    uint32_t refused_seq;
};

void nl_init(struct nlbuf *b, uint32_t first_seq);
void nl_free(struct nlbuf *b);
/* Starts a message; ack adds NLM_F_ACK. Returns its sequence number. */
uint32_t nl_msg_begin(struct nlbuf *b, uint16_t type, uint16_t flags);
/* Appends raw bytes to the current message (a family header). */
void nl_put(struct nlbuf *b, const void *p, size_t len);
/* nfnetlink header (struct nfgenmsg) for family and resource id. */
void nl_put_nfgen(struct nlbuf *b, uint8_t family, uint16_t res_id);
void nl_msg_end(struct nlbuf *b);
void nl_attr(struct nlbuf *b, uint16_t type, const void *p, size_t len);
void nl_attr_str(struct nlbuf *b, uint16_t type, const char *s);
void nl_attr_u8(struct nlbuf *b, uint16_t type, uint8_t v);
void nl_attr_u32(struct nlbuf *b, uint16_t type, uint32_t v);     /* host order */
void nl_attr_be32(struct nlbuf *b, uint16_t type, uint32_t v);    /* v in host order, stored big-endian */
void nl_attr_be64(struct nlbuf *b, uint16_t type, uint64_t v);
/* Nested attributes: begin returns the offset end needs. A nest over
 * 64 KiB cannot be encoded and marks the buffer failed. */
size_t nl_nest_begin(struct nlbuf *b, uint16_t type);
void nl_nest_end(struct nlbuf *b, size_t off);
/* nfnetlink batch framing (NFNL_MSG_BATCH_BEGIN/END for subsys). */
void nl_batch_begin(struct nlbuf *b, uint16_t subsys);
void nl_batch_end(struct nlbuf *b, uint16_t subsys);

/* Attribute walking: fills tb[0..max] with pointers into the payload
 * (NULL when absent); unknown types above max are ignored. Returns -1 on
 * a malformed attribute stream. */
int nl_attr_parse(const void *p, size_t len, const struct nlattr **tb, int max);
/* Walks an attribute stream (a nested list's payload, say): the attribute
 * after prev, the first when prev is NULL; NULL at the end, or when the
 * stream is malformed, which also sets *bad. */
const struct nlattr *nl_attr_next(const void *p, size_t len, const struct nlattr *prev, bool *bad);
/* A received message's family header (hdrlen bytes: nfgenmsg, ifinfomsg,
 * ...) with its attributes parsed into tb[0..max]; NULL when the message
 * is too short or its attributes are malformed. */
const void *nl_msg_attrs(const struct nlmsghdr *h, size_t hdrlen, const struct nlattr **tb, int max);
const void *nl_attr_data(const struct nlattr *a);
size_t nl_attr_len(const struct nlattr *a);
uint32_t nl_attr_get_u32(const struct nlattr *a);
uint32_t nl_attr_get_be32(const struct nlattr *a);
uint64_t nl_attr_get_be64(const struct nlattr *a);

/* Reads the error out of one NLMSG_ERROR message: returns 0 for an ack,
 * the negative errno otherwise, with the kernel's text (extended ack) or
 * strerror in msg. -EBADMSG when the message is malformed. */
int nl_parse_error(const struct nlmsghdr *h, struct err *err);

/* A netlink socket of protocol (NETLINK_NETFILTER, NETLINK_ROUTE),
 * non-blocking, close-on-exec, with extended acks and large buffers.
 * Returns the fd or -1 with err. */
int nl_open(int protocol, struct err *err);

/* Sends the buffer and collects every ack: returns 0 when all n_msgs
 * were acked, else the first error (negative errno) with its text in
 * err, and the refused message's sequence number in b->refused_seq
 * (b->refused false when no message was refused: a send or read
 * failure). Replies are already queued when sendmsg returns (the kernel runs
 * netlink requests in the sender's context), so reading never waits. */
int nl_transact(int fd, struct nlbuf *b, struct err *err);

/* Runs a dump request already in b (one message with NLM_F_DUMP) and
 * calls cb for each reply message until NLMSG_DONE. cb returns <0 to
 * stop with that error. */
typedef int (*nl_msg_cb)(const struct nlmsghdr *h, void *arg);
int nl_dump(int fd, struct nlbuf *b, nl_msg_cb cb, void *arg, struct err *err);

#endif
