/* fuzz_envd: what the envd role process reads from the network
 * (agent/envd/envd_wire.c): the HTTP request head, chunked bodies, query
 * strings, Connect envelopes and multipart bodies.
 *
 * The first input byte picks the piece size (1..256) that chunked and
 * multipart bodies are fed in, as reads of a socket would split them.
 *
 * Checked beyond the sanitizers:
 *   - a head is accepted only whole (its length ends in a blank line,
 *     within max), or refused with a status 400..505 and a terminated
 *     reason; the fields it fills are terminated;
 *   - the chunked decoder never reports more than it was given, its data
 *     spans lie within what it used, and the data does not depend on how
 *     the bytes were split;
 *   - an envelope's length never exceeds the buffer or the maximum;
 *   - multipart data spans lie within the buffer, and the part data does
 *     not depend on the split;
 *   - a query value is terminated and within its buffer. */
#include "envd_wire.h"

#include <stdlib.h>

#include "err.h"
#include "fuzz_common.h"

static void terminated(const char *s, size_t cap, const char *what)
{
    FUZZ_CHECK(memchr(s, 0, cap) != NULL, "%s not terminated", what);
}

/* Decodes data as a chunked body in pieces of step; returns the bytes of
 * data (malloc'd) and the outcome. */
static uint8_t *dechunk(const uint8_t *data, size_t size, size_t step, size_t *outlen, int *end)
{
    struct chunked c = {0};
    uint8_t *out = malloc(size + 1);
    size_t o = 0, off = 0;
    int r = CHUNK_NEED;
    /* Bytes not yet consumed stay for the next call, as a connection's
     * buffer holds them. */
    size_t have = 0;
    while (r != CHUNK_ERROR && r != CHUNK_DONE) {
        size_t add = size - off - have < step ? size - off - have : step;
        have += add;
        if (!have)
            break;
        size_t used = 0, doff = 0, dlen = 0;
        r = wire_chunked_next(&c, (const char *)data + off, have, &used, &doff, &dlen);
        FUZZ_CHECK(used <= have, "used %zu of %zu", used, have);
        if (r == CHUNK_DATA) {
            FUZZ_CHECK(doff + dlen <= used, "span %zu+%zu past used %zu", doff, dlen, used);
            memcpy(out + o, data + off + doff, dlen);
            o += dlen;
        }
        off += used;
        have -= used;
        if (r == CHUNK_NEED && !add && !used)
            break;
    }
    *outlen = o;
    *end = r;
    return out;
}

static uint8_t *parts(const uint8_t *data, size_t size, size_t step, const char *ctype,
                      size_t *outlen, int *end)
{
    struct multipart m;
    uint8_t *out = malloc(size + 64);
    size_t o = 0, off = 0, have = 0;
    int r = MP_NEED;
    *outlen = 0;
    *end = MP_ERROR;
    if (wire_multipart_init(&m, ctype) < 0) {
        free(out);
        return NULL;
    }
    for (int guard = 0; guard < 1000000; guard++) {
        size_t add = size - off - have < step ? size - off - have : step;
        have += add;
        bool eof = off + have == size;
        size_t used = 0;
        r = wire_multipart_next(&m, (const char *)data + off, have, eof, &used);
        FUZZ_CHECK(used <= have, "multipart used %zu of %zu", used, have);
        if (r == MP_ERROR || r == MP_DONE)
            break;
        if (r == MP_DATA) {
            memcpy(out + o, data + off, used);
            o += used;
        } else if (r == MP_PART) {
            terminated(m.name, sizeof(m.name), "name");
            terminated(m.filename, sizeof(m.filename), "filename");
            out[o++] = '|';
        }
        off += used;
        have -= used;
        if (r == MP_NEED && !used && eof)
            break;
    }
    *outlen = o;
    *end = r;
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t step = (size_t)data[0] + 1;
    data++;
    size--;

    /* The head, with a maximum the input cannot always fill. */
    static struct http_req req;
    int status = 0;
    struct err why;
    size_t max = 64 + (size_t)(step * 16);
    long hl = wire_parse_head((const char *)data, size, max, &req, &status, &why);
    if (hl > 0) {
        FUZZ_CHECK((size_t)hl <= size && (size_t)hl <= max, "head %ld", hl);
        FUZZ_CHECK(hl >= 4 && !memcmp(data + hl - 4, "\r\n\r\n", 4), "head without a blank line");
        terminated(req.method, sizeof(req.method), "method");
        terminated(req.target, sizeof(req.target), "target");
        terminated(req.content_type, sizeof(req.content_type), "content_type");
        terminated(req.basic_user, sizeof(req.basic_user), "basic_user");
        terminated(req.token, sizeof(req.token), "token");
        FUZZ_CHECK(req.target[0] == '/', "target %s", req.target);
        FUZZ_CHECK(!(req.chunked && req.content_length >= 0), "both framings");
        const char *q = strchr(req.target, '?');
        char val[64];
        int r = wire_query_get(q ? q + 1 : "", "path", val, sizeof(val));
        if (r == 1)
            terminated(val, sizeof(val), "query value");
    } else if (hl < 0) {
        FUZZ_CHECK(status >= 400 && status <= 505, "status %d", status);
        terminated(why.msg, sizeof(why.msg), "why");
    }

    /* The same bytes as a chunked body, split two ways. */
    size_t l1, l2;
    int e1, e2;
    uint8_t *d1 = dechunk(data, size, step, &l1, &e1);
    uint8_t *d2 = dechunk(data, size, size ? size : 1, &l2, &e2);
    if (e1 == CHUNK_DONE && e2 == CHUNK_DONE)
        FUZZ_CHECK(l1 == l2 && !memcmp(d1, d2, l1), "chunked data depends on the split");
    FUZZ_CHECK((e1 == CHUNK_ERROR) == (e2 == CHUNK_ERROR), "chunked error depends on the split");
    free(d1);
    free(d2);

    /* As Connect envelopes, one after the other. */
    for (size_t off = 0; off < size;) {
        uint8_t flags;
        size_t ml;
        long n = wire_connect_envelope(data + off, size - off, 4096, &flags, &ml);
        if (n <= 0)
            break;
        FUZZ_CHECK((size_t)n == ml + 5 && ml <= 4096 && off + (size_t)n <= size, "envelope %ld", n);
        off += (size_t)n;
    }

    /* As a multipart body with a fixed boundary, split two ways. */
    const char *ct = "multipart/form-data; boundary=XyZ";
    uint8_t *p1 = parts(data, size, step, ct, &l1, &e1);
    uint8_t *p2 = parts(data, size, size ? size : 1, ct, &l2, &e2);
    if (e1 == MP_DONE && e2 == MP_DONE)
        FUZZ_CHECK(l1 == l2 && !memcmp(p1, p2, l1), "multipart data depends on the split");
    free(p1);
    free(p2);
    return 0;
}
