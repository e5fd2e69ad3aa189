#include "envd_wire.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base64.h"
#include "err.h"

#define FAIL(st, ...)                                                                              \
    do {                                                                                           \
        *status = (st);                                                                            \
        err_set(why, __VA_ARGS__);                                                                \
        return -1;                                                                                 \
    } while (0)

static bool is_tchar(unsigned char ch)
{
    return isalnum(ch) || (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

/* A strict non-negative decimal below 2^53 (no sign, no blanks). */
static int parse_dec(const char *s, size_t n, int64_t *out)
{
    int64_t v = 0;
    if (n == 0 || n > 16)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 0;
}

static bool token_has(const char *v, size_t n, const char *word)
{
    size_t wl = strlen(word);
    for (size_t i = 0; i + wl <= n; i++) {
        if (strncasecmp(v + i, word, wl) != 0)
            continue;
        bool start = i == 0 || v[i - 1] == ',' || v[i - 1] == ' ' || v[i - 1] == '\t';
        bool end = i + wl == n || v[i + wl] == ',' || v[i + wl] == ' ' || v[i + wl] == '\t' ||
                   v[i + wl] == ';';
        if (start && end)
            return true;
    }
    return false;
}

static void copy_value(char *dst, size_t cap, const char *v, size_t n)
{
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, v, n);
    dst[n] = 0;
}

long wire_parse_head(const char *buf, size_t len, size_t max, struct http_req *r, int *status,
                     struct err *why)
{
    const char *end = NULL;
    size_t scan = len < max ? len : max;

    for (size_t i = 3; i < scan; i++)
        if (buf[i] == '\n' && buf[i - 1] == '\r' && buf[i - 2] == '\n' && buf[i - 3] == '\r') {
            end = buf + i + 1;
            break;
        }
    if (!end) {
        if (len >= max)
            FAIL(431, "request head over %zu bytes", max);
        /* A client that sends a bare LF line ending would wait for ever. */
        if (memchr(buf, '\n', len) && !memmem(buf, len, "\r\n", 2))
            FAIL(400, "lines must end with CRLF");
        return 0;
    }
    memset(r, 0, sizeof(*r));
    r->content_length = -1;
    r->timeout_ms = -1;
    /* Request line: METHOD SP TARGET SP HTTP/1.x CRLF */
    const char *p = buf, *eol = memmem(buf, (size_t)(end - buf), "\r\n", 2);
    const char *sp1 = memchr(p, ' ', (size_t)(eol - p));
    if (!sp1 || sp1 == p || (size_t)(sp1 - p) >= sizeof(r->method))
        FAIL(400, "bad request line");
    for (const char *q = p; q < sp1; q++)
        if (!is_tchar((unsigned char)*q))
            FAIL(400, "bad method");
    memcpy(r->method, p, (size_t)(sp1 - p));
    const char *t = sp1 + 1, *sp2 = memchr(t, ' ', (size_t)(eol - t));
    if (!sp2 || sp2 == t)
        FAIL(400, "bad request line");
    if ((size_t)(sp2 - t) >= sizeof(r->target))
        FAIL(414, "request target over %d bytes", HTTP_MAX_TARGET - 1);
    if (*t != '/')
        FAIL(400, "expected an origin-form target (\"/path?query\")");
    for (const char *q = t; q < sp2; q++)
        if ((unsigned char)*q <= 0x20 || (unsigned char)*q >= 0x7f)
            FAIL(400, "bad character in the request target");
    memcpy(r->target, t, (size_t)(sp2 - t));
    const char *ver = sp2 + 1;
    size_t vlen = (size_t)(eol - ver);
    if (vlen == 8 && memcmp(ver, "HTTP/1.1", 8) == 0)
        r->http10 = false;
    else if (vlen == 8 && memcmp(ver, "HTTP/1.0", 8) == 0)
        r->http10 = r->close = true;
    else
        FAIL(505, "only HTTP/1.1 and HTTP/1.0");

    bool has_cl = false, has_te = false;
    unsigned nh = 0;
    for (p = eol + 2; p < end - 2; p = eol + 2) {
        eol = memmem(p, (size_t)(end - p), "\r\n", 2);
        if (!eol)
            FAIL(400, "bad header line");
        if (++nh > HTTP_MAX_HEADERS)
            FAIL(431, "more than %d header lines", HTTP_MAX_HEADERS);
        const char *colon = memchr(p, ':', (size_t)(eol - p));
        if (!colon || colon == p)
            FAIL(400, "bad header line");
        for (const char *q = p; q < colon; q++)
            if (!is_tchar((unsigned char)*q))
                FAIL(400, "bad header name");
        size_t nl = (size_t)(colon - p);
        const char *v = colon + 1, *ve = eol;
        while (v < ve && (*v == ' ' || *v == '\t'))
            v++;
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
            ve--;
        for (const char *q = v; q < ve; q++)
            if ((unsigned char)*q < 0x20 && *q != '\t')
                FAIL(400, "bad character in a header value");
        size_t n = (size_t)(ve - v);
#define IS(name) (nl == sizeof(name) - 1 && strncasecmp(p, name, nl) == 0)
        if (IS("Content-Length")) {
            int64_t cl;
            if (parse_dec(v, n, &cl) < 0 || (has_cl && cl != r->content_length))
                FAIL(400, "bad Content-Length");
            has_cl = true;
            r->content_length = cl;
        } else if (IS("Transfer-Encoding")) {
            /* Only "chunked" alone: anything else cannot be framed. */
            if (has_te || n != 7 || strncasecmp(v, "chunked", 7) != 0)
                FAIL(501, "unsupported Transfer-Encoding");
            has_te = r->chunked = true;
        } else if (IS("Connection")) {
            if (token_has(v, n, "close"))
                r->close = true;
            else if (token_has(v, n, "keep-alive") && r->http10)
                r->close = false;
        } else if (IS("Expect")) {
            if (n == 12 && strncasecmp(v, "100-continue", 12) == 0)
                r->expect_continue = true;
            else
                FAIL(417, "unsupported Expect");
        } else if (IS("Content-Type")) {
            copy_value(r->content_type, sizeof(r->content_type), v, n);
        } else if (IS("Content-Encoding")) {
            copy_value(r->content_encoding, sizeof(r->content_encoding), v, n);
        } else if (IS("X-Access-Token")) {
            if (n >= sizeof(r->token))
                FAIL(400, "X-Access-Token too long");
            copy_value(r->token, sizeof(r->token), v, n);
            r->has_token = true;
        } else if (IS("Connect-Timeout-Ms")) {
            if (parse_dec(v, n, &r->timeout_ms) < 0)
                FAIL(400, "bad Connect-Timeout-Ms");
        } else if (IS("Keepalive-Ping-Interval")) {
            if (parse_dec(v, n, &r->keepalive_s) < 0 || r->keepalive_s > 86400)
                FAIL(400, "bad Keepalive-Ping-Interval");
        } else if (IS("Authorization")) {
            /* "Basic base64(user:)": a user selector, no password. */
            if (n > 6 && strncasecmp(v, "Basic ", 6) == 0) {
                uint8_t dec[96];
                struct err err;
                long dl = base64_decode(v + 6, n - 6, dec, sizeof(dec) - 1, &err);
                if (dl < 0)
                    FAIL(400, "bad Authorization: %s", err.msg);
                const uint8_t *c = memchr(dec, ':', (size_t)dl);
                size_t ul = c ? (size_t)(c - dec) : (size_t)dl;
                if (ul >= sizeof(r->basic_user) || memchr(dec, 0, (size_t)dl))
                    FAIL(400, "bad Authorization user");
                memcpy(r->basic_user, dec, ul);
                r->basic_user[ul] = 0;
                r->has_basic = true;
            }
        }
#undef IS
    }
    if (has_cl && has_te)
        FAIL(400, "both Content-Length and Transfer-Encoding");
    return (long)(end - buf);
}

enum { CS_SIZE, CS_EXT, CS_SIZE_LF, CS_DATA, CS_DATA_CR, CS_DATA_LF, CS_TRAILER, CS_TRAILER_LF,
       CS_DONE };

int wire_chunked_next(struct chunked *c, const char *in, size_t n, size_t *used, size_t *data_off,
                      size_t *data_len)
{
    size_t i = 0;
    while (i < n) {
        char ch = in[i];
        switch (c->state) {
        case CS_SIZE:
            if (isxdigit((unsigned char)ch)) {
                if (c->left >> 56)
                    return CHUNK_ERROR;
                c->left = c->left * 16 + (uint64_t)(isdigit((unsigned char)ch)
                                                        ? ch - '0'
                                                        : (tolower((unsigned char)ch) - 'a' + 10));
                if (++c->line > 16)
                    return CHUNK_ERROR;
            } else if (c->line && (ch == ';' || ch == ' ' || ch == '\t')) {
                c->state = CS_EXT;
            } else if (c->line && ch == '\r') {
                c->state = CS_SIZE_LF;
            } else {
                return CHUNK_ERROR;
            }
            i++;
            break;
        case CS_EXT:
            if (ch == '\r')
                c->state = CS_SIZE_LF;
            else if (++c->line > 1024 || (unsigned char)ch < 0x20)
                return CHUNK_ERROR;
            i++;
            break;
        case CS_SIZE_LF:
            if (ch != '\n')
                return CHUNK_ERROR;
            i++;
            c->line = 0;
            c->state = c->left ? CS_DATA : CS_TRAILER;
            break;
        case CS_DATA: {
            size_t k = n - i < c->left ? n - i : (size_t)c->left;
            *data_off = i;
            *data_len = k;
            c->left -= k;
            if (!c->left)
                c->state = CS_DATA_CR;
            *used = i + k;
            return CHUNK_DATA;
        }
        case CS_DATA_CR:
            if (ch != '\r')
                return CHUNK_ERROR;
            c->state = CS_DATA_LF;
            i++;
            break;
        case CS_DATA_LF:
            if (ch != '\n')
                return CHUNK_ERROR;
            c->state = CS_SIZE;
            c->line = 0;
            i++;
            break;
        case CS_TRAILER:
            /* Trailer lines are skipped; an empty one ends the body. */
            if (ch == '\r') {
                c->state = CS_TRAILER_LF;
            } else if (++c->line > 4096 || ch == '\n') {
                return CHUNK_ERROR;
            }
            i++;
            break;
        case CS_TRAILER_LF:
            if (ch != '\n')
                return CHUNK_ERROR;
            i++;
            if (c->line == 0) {
                c->state = CS_DONE;
                *used = i;
                return CHUNK_DONE;
            }
            c->line = 0;
            c->state = CS_TRAILER;
            break;
        default:
            *used = i;
            return CHUNK_DONE;
        }
    }
    *used = i;
    return c->state == CS_DONE ? CHUNK_DONE : CHUNK_NEED;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)tolower((unsigned char)c);
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

int wire_query_get(const char *query, const char *key, char *out, size_t outlen)
{
    size_t kl = strlen(key);
    for (const char *p = query; p && *p;) {
        const char *amp = strchr(p, '&');
        const char *e = amp ? amp : p + strlen(p);
        const char *eq = memchr(p, '=', (size_t)(e - p));
        const char *ke = eq ? eq : e;
        if ((size_t)(ke - p) == kl && memcmp(p, key, kl) == 0) {
            size_t o = 0;
            for (const char *v = eq ? eq + 1 : e; v < e; v++) {
                int ch = (unsigned char)*v;
                if (ch == '+') {
                    ch = ' ';
                } else if (ch == '%') {
                    if (e - v < 3 || hexval(v[1]) < 0 || hexval(v[2]) < 0)
                        return -1;
                    ch = hexval(v[1]) * 16 + hexval(v[2]);
                    v += 2;
                }
                if (ch == 0 || o + 1 >= outlen)
                    return -1;
                out[o++] = (char)ch;
            }
            out[o] = 0;
            return 1;
        }
        p = amp ? amp + 1 : NULL;
    }
    return 0;
}

long wire_connect_envelope(const uint8_t *buf, size_t n, size_t max, uint8_t *flags, size_t *msg_len)
{
    if (n < 5)
        return 0;
    uint32_t len = (uint32_t)buf[1] << 24 | (uint32_t)buf[2] << 16 | (uint32_t)buf[3] << 8 | buf[4];
    if (len > max)
        return -1;
    if (n - 5 < len)
        return 0;
    *flags = buf[0];
    *msg_len = len;
    return (long)len + 5;
}

int wire_multipart_init(struct multipart *m, const char *ct)
{
    memset(m, 0, sizeof(*m));
    const char *b = strcasestr(ct, "boundary=");
    if (!b)
        return -1;
    b += 9;
    char bound[72];
    size_t n = 0;
    if (*b == '"') {
        for (b++; *b && *b != '"'; b++)
            if (n < 71)
                bound[n++] = *b;
            else
                return -1;
        if (*b != '"')
            return -1;
    } else {
        for (; *b && *b != ';' && *b != ' ' && *b != '\t'; b++)
            if (n < 71)
                bound[n++] = *b;
            else
                return -1;
    }
    if (n == 0 || n > 70)
        return -1;
    memcpy(m->delim, "\r\n--", 4);
    memcpy(m->delim + 4, bound, n);
    m->dlen = n + 4;
    return 0;
}

enum { MS_PREAMBLE, MS_AFTER_DELIM, MS_HEADERS, MS_BODY, MS_END };

/* name="..." or filename="..." in a Content-Disposition value. */
static void disposition_param(const char *v, size_t n, const char *key, char *out, size_t cap)
{
    size_t kl = strlen(key);
    out[0] = 0;
    for (size_t i = 0; i + kl + 1 < n; i++) {
        if ((i == 0 || v[i - 1] == ';' || v[i - 1] == ' ') && strncasecmp(v + i, key, kl) == 0 &&
            v[i + kl] == '=') {
            const char *s = v + i + kl + 1, *e = v + n;
            size_t o = 0;
            if (s < e && *s == '"') {
                for (s++; s < e && *s != '"'; s++)
                    if (o + 1 < cap)
                        out[o++] = *s;
            } else {
                for (; s < e && *s != ';'; s++)
                    if (o + 1 < cap)
                        out[o++] = *s;
            }
            out[o] = 0;
            return;
        }
    }
}

int wire_multipart_next(struct multipart *m, const char *buf, size_t n, bool eof, size_t *used)
{
    *used = 0;
    switch (m->state) {
    case MS_PREAMBLE: {
        /* The first delimiter may open the body without its CRLF. */
        const char *d = m->delim + 2;
        size_t dl = m->dlen - 2;
        const char *at = memmem(buf, n, d, dl);
        if (!at) {
            if (eof)
                return MP_ERROR;
            /* Keep what could be the start of the delimiter. */
            *used = n > dl ? n - dl : 0;
            return MP_NEED;
        }
        *used = (size_t)(at - buf) + dl;
        m->state = MS_AFTER_DELIM;
        return MP_NEED;
    }
    case MS_AFTER_DELIM:
        if (n < 2)
            return eof ? MP_ERROR : MP_NEED;
        if (buf[0] == '-' && buf[1] == '-') {
            m->state = MS_END;
            *used = 2;
            return MP_DONE;
        }
        if (buf[0] == '\r' && buf[1] == '\n') {
            m->state = MS_HEADERS;
            *used = 2;
            return MP_NEED;
        }
        return MP_ERROR;
    case MS_HEADERS: {
        const char *e = memmem(buf, n, "\r\n\r\n", 4);
        size_t hl;
        if (n >= 2 && buf[0] == '\r' && buf[1] == '\n') {
            e = buf - 2; /* no header lines at all */
            hl = 2;
        } else if (!e) {
            if (n > 16384 || eof)
                return MP_ERROR;
            return MP_NEED;
        } else {
            hl = (size_t)(e - buf) + 4;
        }
        m->name[0] = m->filename[0] = 0;
        for (const char *p = buf; p < e + 2;) {
            const char *le = memmem(p, (size_t)(e + 2 - p), "\r\n", 2);
            if (!le)
                break;
            if ((size_t)(le - p) > 20 && strncasecmp(p, "Content-Disposition:", 20) == 0) {
                disposition_param(p + 20, (size_t)(le - p - 20), "name", m->name, sizeof(m->name));
                disposition_param(p + 20, (size_t)(le - p - 20), "filename", m->filename,
                                  sizeof(m->filename));
            }
            p = le + 2;
        }
        *used = hl;
        m->state = MS_BODY;
        return MP_PART;
    }
    case MS_BODY: {
        const char *at = memmem(buf, n, m->delim, m->dlen);
        if (at == buf) {
            *used = m->dlen;
            m->state = MS_AFTER_DELIM;
            return MP_PART_END;
        }
        if (at) {
            *used = (size_t)(at - buf);
            return MP_DATA;
        }
        if (eof)
            return MP_ERROR;
        /* Everything but a tail that may begin the delimiter is data. */
        if (n >= m->dlen) {
            *used = n - (m->dlen - 1);
            return MP_DATA;
        }
        return MP_NEED;
    }
    default:
        *used = n; /* the epilogue */
        return MP_DONE;
    }
}
