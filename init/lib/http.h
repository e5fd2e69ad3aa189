/* http: the pure half of the HTTP readiness and health probe (ready.http,
 * health.http): the "HOST:PORT/PATH" target, the GET request, and an
 * incremental reader of the response that keeps a bounded amount of it.
 * No I/O here: check.c owns the socket and feeds what it reads. */
#ifndef HEARTH_HTTP_H
#define HEARTH_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* The longest status line or header line kept; a longer one is an error. */
#define HTTP_LINE_MAX 1024
/* Status line and headers together; beyond it the answer is refused. */
#define HTTP_HEAD_MAX 16384
/* Body bytes read (and discarded) after a passing status, at most. */
#define HTTP_BODY_MAX 65536
/* The request, with the longest target the config accepts. */
#define HTTP_REQUEST_MAX 512

/* Splits "HOST:PORT/PATH" at the first '/' after the last ':' of the
 * address part: hostport gets "HOST:PORT", path "/PATH" (just "/" when the
 * target has none). The path must be printable ASCII without spaces; at
 * most 200 bytes. Does not judge HOST or PORT. 0, or -1 with err. */
int http_target_split(const char *target, char *hostport, size_t hplen, char *path, size_t plen,
                      struct err *err);

/* Writes the GET request for hostport (the Host header) and path into buf
 * and returns its length, or 0 when it does not fit. */
size_t http_request(char *buf, size_t len, const char *hostport, const char *path);

/* "HTTP/1.x NNN reason": the status code (100..599) and the reason phrase
 * (copied, cut to fit). -1 when the line is not an HTTP status line. */
int http_status_line(const char *line, size_t len, int *status, char *reason, size_t rlen);

enum http_progress {
    HTTP_MORE,   /* needs more bytes */
    HTTP_STATUS, /* the head is complete: status is known; body may follow */
    HTTP_DONE,   /* the whole answer (or as much of the body as is read) is in */
    HTTP_ERROR,  /* not a valid answer; err says why */
};

struct http_reader {
    int phase;                /* internal: status line, headers, body, done */
    int status;               /* once HTTP_STATUS was returned */
    char reason[64];
    char line[HTTP_LINE_MAX]; /* the line being assembled */
    size_t line_len;
    size_t head_bytes;
    int64_t content_length;   /* -1 when absent */
    size_t body_bytes;
    char err[160];
};

void http_reader_init(struct http_reader *r);
/* Feeds n bytes read from the socket. Returns HTTP_STATUS once, when the
 * head has just become complete (call again with the rest: *used says how
 * much was taken), then HTTP_MORE or HTTP_DONE while the body is drained.
 * Body bytes are counted, never kept. */
enum http_progress http_reader_feed(struct http_reader *r, const char *buf, size_t n,
                                    size_t *used);
/* The peer closed the connection: HTTP_DONE if the answer may end there
 * (a body without a length), HTTP_ERROR with err otherwise. */
enum http_progress http_reader_eof(struct http_reader *r);

#endif
