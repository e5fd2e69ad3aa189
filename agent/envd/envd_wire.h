/* envd_wire: the wire formats the envd role process reads (agent/
 * envd_role.c), as pure functions over bytes it has buffered, so they are
 * unit- and fuzz-tested apart from any socket: an HTTP/1.1 request head,
 * a chunked body, a query string, a Connect envelope and a multipart
 * body. Every length is bounded by the caller's maximum; nothing
 * allocates. */
#ifndef HEARTH_ENVD_WIRE_H
#define HEARTH_ENVD_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define HTTP_MAX_TARGET 8192
#define HTTP_MAX_HEADERS 100

struct http_req {
    char method[16];
    char target[HTTP_MAX_TARGET]; /* origin-form: path, then '?' and the query */
    bool http10;
    bool close;                   /* the client asked to close after this one */
    bool chunked;
    int64_t content_length;       /* -1: none given */
    bool expect_continue;
    char content_type[160];
    char content_encoding[32];
    char basic_user[64];          /* the user of "Authorization: Basic b64(user:)" */
    bool has_basic;
    char token[256];              /* X-Access-Token */
    bool has_token;
    int64_t timeout_ms;           /* Connect-Timeout-Ms; -1: none */
    int64_t keepalive_s;          /* Keepalive-Ping-Interval; 0: none */
};

/* Parses a request head at the start of buf[0..len). Returns its length
 * (through the blank line) with r filled; 0 when more bytes are needed
 * (and len is under max); -1 when it is malformed or longer than max,
 * with the HTTP status to answer (400, 413, 414, 431, 501, 505) and why. */
long wire_parse_head(const char *buf, size_t len, size_t max, struct http_req *r, int *status,
                     struct err *err);

/* A chunked request body, decoded as it arrives. */
struct chunked {
    int state;
    uint64_t left;  /* bytes left in the chunk being read */
    unsigned line;  /* bytes of the size or trailer line so far */
};
enum { CHUNK_NEED = 0, CHUNK_DATA = 1, CHUNK_DONE = 2, CHUNK_ERROR = -1 };
/* Reads in[0..n): *used bytes are consumed. CHUNK_DATA: the data is
 * in[*data_off .. *data_off + *data_len) (within the used bytes);
 * CHUNK_NEED: all of in was consumed (framing only) and more is needed;
 * CHUNK_DONE: the last chunk and the trailers were read. */
int wire_chunked_next(struct chunked *c, const char *in, size_t n, size_t *used, size_t *data_off,
                      size_t *data_len);

/* The value of key in a query string ("a=1&b=%2F"), percent-decoded ('+'
 * is a space). 1 found, 0 absent, -1 malformed or longer than outlen - 1
 * or holding a NUL. */
int wire_query_get(const char *query, const char *key, char *out, size_t outlen);

/* A Connect envelope: flags, a 4-byte big-endian length, the message.
 * Returns the envelope's whole size when buf holds it all, 0 when more is
 * needed, -1 when its length is over max. */
long wire_connect_envelope(const uint8_t *buf, size_t n, size_t max, uint8_t *flags, size_t *msg_len);

/* multipart/form-data, read as it arrives. */
struct multipart {
    char delim[80];   /* "\r\n--" BOUNDARY */
    size_t dlen;
    int state;
    char name[64];
    char filename[1024];
};
enum { MP_NEED = 0, MP_PART, MP_DATA, MP_PART_END, MP_DONE, MP_ERROR = -1 };
/* The boundary from a Content-Type's parameters; -1 when there is none
 * usable (RFC 2046: 1..70 characters). */
int wire_multipart_init(struct multipart *m, const char *content_type);
/* Reads buf[0..n) (eof: nothing more comes). *used: bytes to drop from
 * the front. MP_PART: a part's headers were read (name, filename);
 * MP_DATA: buf[0 .. *used) is the part's data; MP_PART_END, MP_DONE (the
 * closing delimiter; the epilogue is ignored). */
int wire_multipart_next(struct multipart *m, const char *buf, size_t n, bool eof, size_t *used);

#endif
