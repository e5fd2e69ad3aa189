#include "http.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "err.h"

enum { PH_STATUS, PH_HEADERS, PH_BODY, PH_DONE };

/* The longest path a target may carry: with the Host header and the fixed
 * text the request stays well under HTTP_REQUEST_MAX. */
#define PATH_MAX_LEN 200

int http_target_split(const char *target, char *hostport, size_t hplen, char *path, size_t plen,
                      struct err *err)
{
    /* The path starts at the first '/' after the port's ':'; a bracketed
     * IPv6 host holds ':' but never '/'. */
    const char *close = target[0] == '[' ? strchr(target, ']') : target;
    const char *slash = close ? strchr(close, '/') : NULL;
    size_t hl = slash ? (size_t)(slash - target) : strlen(target);
    const char *p = slash ? slash : "/";
    size_t pl = strlen(p);

    if (hl == 0 || hl >= hplen)
        return err_set(err, "expected HOST:PORT/PATH");
    if (pl > PATH_MAX_LEN || pl >= plen)
        return err_set(err, "path longer than %d bytes", PATH_MAX_LEN);
    for (size_t i = 0; i < pl; i++) {
        unsigned char ch = (unsigned char)p[i];
        /* What goes on the request line verbatim: a space or a control
         * byte would end or split it. */
        if (ch <= ' ' || ch >= 0x7f)
            return err_set(err, "path byte %zu is a space, a control or a non-ASCII byte "
                           "(percent-encode it)", i);
    }
    memcpy(hostport, target, hl);
    hostport[hl] = 0;
    memcpy(path, p, pl + 1);
    return 0;
}

size_t http_request(char *buf, size_t len, const char *hostport, const char *path)
{
    /* HTTP/1.1 needs Host; "Connection: close" asks the server to end the
     * answer with EOF, so a body without a length still ends. */
    int n = snprintf(buf, len,
                     "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: hearth-probe\r\n"
                     "Accept: */*\r\nConnection: close\r\n\r\n",
                     path, hostport);
    return n < 0 || (size_t)n >= len ? 0 : (size_t)n;
}

int http_status_line(const char *line, size_t len, int *status, char *reason, size_t rlen)
{
    /* "HTTP/1.0 200 OK", "HTTP/1.1 503 Service Unavailable", or with no
     * reason at all ("HTTP/1.1 204"): the reason is optional. */
    if (len < 12 || memcmp(line, "HTTP/1.", 7) != 0 || line[7] < '0' || line[7] > '9' ||
        line[8] != ' ')
        return -1;
    int code = 0;
    for (size_t i = 9; i < 12; i++) {
        if (line[i] < '0' || line[i] > '9')
            return -1;
        code = code * 10 + (line[i] - '0');
    }
    if (code < 100 || code > 599 || (len > 12 && line[12] != ' '))
        return -1;
    *status = code;
    if (reason && rlen) {
        size_t o = 0;
        for (size_t i = 13; i < len && o + 1 < rlen; i++) {
            unsigned char ch = (unsigned char)line[i];
            /* The reason is shown in messages: nothing unprintable. */
            reason[o++] = ch >= ' ' && ch < 0x7f ? (char)ch : '?';
        }
        reason[o] = 0;
    }
    return 0;
}

void http_reader_init(struct http_reader *r)
{
    memset(r, 0, sizeof(*r));
    r->phase = PH_STATUS;
    r->content_length = -1;
}

/* Shows the start of a line that was refused, printable only. */
static void quote_line(const char *s, size_t n, char *out, size_t outlen)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 5 < outlen; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= ' ' && ch < 0x7f && ch != '"' && ch != '\\')
            out[o++] = (char)ch;
        else
            o += (size_t)snprintf(out + o, outlen - o, "\\x%02x", ch);
        if (i + 1 < n && o + 8 >= outlen) {
            memcpy(out + o, "...", 4);
            return;
        }
    }
    out[o] = 0;
}

static int fail(struct http_reader *r, const char *what, const char *line, size_t n)
{
    char q[64];
    if (line) {
        quote_line(line, n, q, sizeof(q));
        snprintf(r->err, sizeof(r->err), "%s \"%s\"", what, q);
    } else {
        snprintf(r->err, sizeof(r->err), "%s", what);
    }
    return -1;
}

/* One header line (without its end of line). Only what decides where the
 * body ends is kept. */
static int header_line(struct http_reader *r, const char *l, size_t n)
{
    const char *colon = memchr(l, ':', n);
    if (!colon || colon == l || l[0] == ' ' || l[0] == '\t')
        return fail(r, "bad header line", l, n);
    size_t kl = (size_t)(colon - l);
    const char *v = colon + 1, *end = l + n;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    if (kl == 14 && strncasecmp(l, "Content-Length", 14) == 0) {
        int64_t cl = 0;
        if (v == end)
            return fail(r, "bad Content-Length", l, n);
        for (const char *p = v; p < end; p++) {
            if (*p < '0' || *p > '9' || cl > (INT64_C(1) << 50))
                return fail(r, "bad Content-Length", l, n);
            cl = cl * 10 + (*p - '0');
        }
        if (r->content_length >= 0 && r->content_length != cl)
            return fail(r, "conflicting Content-Length", l, n);
        r->content_length = cl;
    }
    /* Transfer-Encoding is not decoded: with Connection: close the server
     * ends a chunked answer with EOF, and only the status matters. */
    return 0;
}

/* A complete line: the status line, a header, or the empty line that ends
 * the head. Returns 1 when the head has just ended, 0 to go on, -1. */
static int line_done(struct http_reader *r)
{
    const char *l = r->line;
    size_t n = r->line_len;
    if (n && l[n - 1] == '\r')
        n--;
    r->line_len = 0;
    if (r->phase == PH_STATUS) {
        if (http_status_line(l, n, &r->status, r->reason, sizeof(r->reason)) < 0)
            return fail(r, "bad status line", l, n);
        r->phase = PH_HEADERS;
        return 0;
    }
    if (n)
        return header_line(r, l, n);
    /* An interim answer (100 Continue, 103 Early Hints) is followed by the
     * real one. */
    if (r->status < 200) {
        r->phase = PH_STATUS;
        r->content_length = -1;
        return 0;
    }
    bool bodyless = r->status == 204 || r->status == 304 || r->content_length == 0;
    r->phase = bodyless ? PH_DONE : PH_BODY;
    return 1;
}

enum http_progress http_reader_feed(struct http_reader *r, const char *buf, size_t n,
                                    size_t *used)
{
    size_t i = 0;

    *used = 0;
    if (r->phase == PH_DONE)
        return HTTP_DONE;
    if (r->err[0])
        return HTTP_ERROR;
    while (i < n && (r->phase == PH_STATUS || r->phase == PH_HEADERS)) {
        char ch = buf[i++];
        if (++r->head_bytes > HTTP_HEAD_MAX) {
            fail(r, "status line and headers longer than 16384 bytes", NULL, 0);
            *used = i;
            return HTTP_ERROR;
        }
        if (ch != '\n') {
            if (r->line_len == sizeof(r->line)) {
                fail(r, r->phase == PH_STATUS ? "status line too long" : "header line too long",
                     r->line, 40);
                *used = i;
                return HTTP_ERROR;
            }
            r->line[r->line_len++] = ch;
            continue;
        }
        int rc = line_done(r);
        if (rc < 0) {
            *used = i;
            return HTTP_ERROR;
        }
        if (rc == 1) {
            *used = i;
            return HTTP_STATUS;
        }
    }
    if (r->phase == PH_BODY && i < n) {
        size_t take = n - i;
        if (r->content_length >= 0 && (int64_t)take > r->content_length - (int64_t)r->body_bytes)
            take = (size_t)(r->content_length - (int64_t)r->body_bytes);
        r->body_bytes += take;
        i += take;
    }
    *used = i;
    if (r->phase == PH_BODY &&
        ((r->content_length >= 0 && (int64_t)r->body_bytes >= r->content_length) ||
         r->body_bytes >= HTTP_BODY_MAX))
        r->phase = PH_DONE;
    return r->phase == PH_DONE ? HTTP_DONE : HTTP_MORE;
}

enum http_progress http_reader_eof(struct http_reader *r)
{
    if (r->err[0])
        return HTTP_ERROR;
    if (r->phase == PH_DONE)
        return HTTP_DONE;
    if (r->phase == PH_BODY) {
        if (r->content_length >= 0 && (int64_t)r->body_bytes < r->content_length) {
            snprintf(r->err, sizeof(r->err), "connection closed after %zu of %lld body bytes",
                     r->body_bytes, (long long)r->content_length);
            return HTTP_ERROR;
        }
        r->phase = PH_DONE;
        return HTTP_DONE;
    }
    snprintf(r->err, sizeof(r->err), "%s",
             r->phase == PH_STATUS && r->head_bytes == 0 ? "connection closed without an answer"
             : r->phase == PH_STATUS ? "connection closed inside the status line"
                                     : "connection closed inside the headers");
    return HTTP_ERROR;
}
