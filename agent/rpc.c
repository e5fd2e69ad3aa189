#include "rpc.h"
#include "utf8.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

void linebuf_init(struct linebuf *lb, size_t max)
{
    memset(lb, 0, sizeof(*lb));
    lb->max = max;
}

void linebuf_free(struct linebuf *lb)
{
    free(lb->buf);
    memset(lb, 0, sizeof(*lb));
}

size_t linebuf_pending(const struct linebuf *lb) { return lb->len - lb->start; }

void linebuf_shrink(struct linebuf *lb)
{
    if (lb->len != lb->start || lb->cap <= LINEBUF_CHUNK)
        return;
    free(lb->buf);
    lb->buf = NULL;
    lb->cap = lb->len = lb->start = lb->scan = 0;
}

/* The buffer never holds more than one maximal line plus one read chunk,
 * so a peer can make hearth hold at most max + 64 KiB per connection. */
size_t linebuf_space(struct linebuf *lb)
{
    size_t limit = lb->max + 2 + LINEBUF_CHUNK;
    size_t pending = lb->len - lb->start;

    /* Consumed data is dropped once it is half the buffer, fills it, or
     * is all there is: without the last case a short request left less
     * than a chunk behind it and every request doubled the buffer (which
     * linebuf_shrink then freed). */
    if (lb->start > 0 &&
        (lb->start == lb->len || lb->start >= lb->cap / 2 || lb->len == lb->cap)) {
        memmove(lb->buf, lb->buf + lb->start, pending);
        lb->scan -= lb->start;
        lb->len = pending;
        lb->start = 0;
    }
    if (pending >= limit)
        return 0;
    if (lb->cap - lb->len < LINEBUF_CHUNK && lb->cap < limit) {
        size_t ncap = lb->cap ? lb->cap * 2 : LINEBUF_CHUNK;
        if (ncap > limit)
            ncap = limit;
        char *nb = realloc(lb->buf, ncap);
        if (nb) {
            lb->buf = nb;
            lb->cap = ncap;
        }
    }
    return lb->cap - lb->len;
}

char *linebuf_tail(struct linebuf *lb) { return lb->buf + lb->len; }
void linebuf_commit(struct linebuf *lb, size_t n) { lb->len += n; }

int linebuf_append(struct linebuf *lb, const char *data, size_t n)
{
    while (n > 0) {
        size_t room = linebuf_space(lb);
        if (room == 0)
            return -1;
        size_t k = n < room ? n : room;
        memcpy(linebuf_tail(lb), data, k);
        linebuf_commit(lb, k);
        data += k;
        n -= k;
    }
    return 0;
}

int linebuf_next(struct linebuf *lb, const char **line, size_t *len)
{
    if (lb->scan < lb->start)
        lb->scan = lb->start;
    char *nl = lb->len > lb->scan ? memchr(lb->buf + lb->scan, '\n', lb->len - lb->scan) : NULL;
    if (!nl) {
        lb->scan = lb->len;
        return lb->len - lb->start > lb->max ? -1 : 0;
    }
    size_t n = (size_t)(nl - (lb->buf + lb->start));
    if (n > lb->max)
        return -1;
    *line = lb->buf + lb->start;
    *len = n;
    if (n > 0 && lb->buf[lb->start + n - 1] == '\r')
        (*len)--;
    lb->start += n + 1;
    lb->scan = lb->start;
    return 1;
}

void rpc_error_set(struct rpc_error *err, int code, const char *fmt, ...)
{
    va_list ap;
    err->code = code;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof(err->message), fmt, ap);
    va_end(ap);
}

/* Offset of a \u0000 escape in a JSON text, or -1. cJSON decodes into C
 * strings, so everything after a NUL would silently vanish ("ping\u0000x"
 * would be taken as "ping"): such requests are refused instead. */
static long nul_escape_at(const char *s, size_t len)
{
    for (size_t i = 0; i + 6 <= len; i++) {
        if (s[i] != '\\')
            continue;
        if (s[i + 1] == 'u' && s[i + 2] == '0' && s[i + 3] == '0' && s[i + 4] == '0' &&
            s[i + 5] == '0')
            return (long)i;
        i++; /* skip the escaped character, so "\\\\u0000" is not one */
    }
    return -1;
}

static bool is_blank(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
            return false;
    return true;
}

int rpc_parse(const char *line, size_t len, struct rpc_request *req, struct rpc_error *err)
{
    const char *end = NULL;
    cJSON *v;
    long bad;

    memset(req, 0, sizeof(*req));
    err->data = NULL;
    if (is_blank(line, len))
        return 1;
    bad = utf8_invalid_at(line, len);
    if (bad >= 0) {
        rpc_error_set(err, RPC_PARSE_ERROR, "invalid UTF-8 at byte %ld", bad);
        return -1;
    }
    bad = nul_escape_at(line, len);
    if (bad >= 0) {
        rpc_error_set(err, RPC_PARSE_ERROR, "\\u0000 is not accepted (byte %ld)", bad);
        return -1;
    }
    req->root = cJSON_ParseWithLengthOpts(line, len, &end, 0);
    if (!req->root) {
        const char *at = cJSON_GetErrorPtr();
        long off = at && at >= line && at <= line + len ? (long)(at - line) : -1;
        rpc_error_set(err, RPC_PARSE_ERROR, "invalid JSON at byte %ld", off);
        return -1;
    }
    if (end && !is_blank(end, len - (size_t)(end - line))) {
        rpc_error_set(err, RPC_PARSE_ERROR, "trailing data after JSON at byte %ld",
                      (long)(end - line));
        return -1;
    }
    if (cJSON_IsArray(req->root)) {
        rpc_error_set(err, RPC_INVALID_REQUEST, "batch requests are not supported");
        return -1;
    }
    if (!cJSON_IsObject(req->root)) {
        rpc_error_set(err, RPC_INVALID_REQUEST, "request must be a JSON object");
        return -1;
    }
    /* The id is taken first so an otherwise invalid request gets its reply. */
    v = cJSON_GetObjectItemCaseSensitive(req->root, "id");
    if (v) {
        if (!cJSON_IsNumber(v) && !cJSON_IsString(v) && !cJSON_IsNull(v)) {
            rpc_error_set(err, RPC_INVALID_REQUEST, "id: expected number, string or null");
            return -1;
        }
        req->id = v;
    }
    v = cJSON_GetObjectItemCaseSensitive(req->root, "jsonrpc");
    if (!cJSON_IsString(v) || strcmp(v->valuestring, "2.0") != 0) {
        rpc_error_set(err, RPC_INVALID_REQUEST, "jsonrpc: expected \"2.0\"");
        return -1;
    }
    v = cJSON_GetObjectItemCaseSensitive(req->root, "method");
    if (!cJSON_IsString(v) || !v->valuestring[0]) {
        rpc_error_set(err, RPC_INVALID_REQUEST, "method: expected a non-empty string");
        return -1;
    }
    req->method = v->valuestring;
    v = cJSON_GetObjectItemCaseSensitive(req->root, "params");
    if (v && !cJSON_IsObject(v) && !cJSON_IsArray(v) && !cJSON_IsNull(v)) {
        rpc_error_set(err, RPC_INVALID_REQUEST, "params: expected object or array");
        return -1;
    }
    req->params = cJSON_IsNull(v) ? NULL : v;
    for (cJSON *k = req->root->child; k; k = k->next) {
        if (strcmp(k->string, "jsonrpc") && strcmp(k->string, "id") &&
            strcmp(k->string, "method") && strcmp(k->string, "params")) {
            rpc_error_set(err, RPC_INVALID_REQUEST, "%.*s: unknown member", utf8_clip(k->string, 64),
                          k->string);
            return -1;
        }
    }
    return 0;
}

void rpc_request_free(struct rpc_request *req)
{
    cJSON_Delete(req->root);
    memset(req, 0, sizeof(*req));
}

/* The id as JSON text into buf. An integer id, what nearly every client
 * sends, is printed here: cJSON prints every number with "%1.15g" and
 * reads it back with sscanf to check it, which was most of the user time
 * of a ping. Anything else (a string needs escaping) goes through cJSON;
 * *heap is then the text to free. */
static const char *id_text(const cJSON *id, char *buf, size_t n, char **heap)
{
    *heap = NULL;
    if (!id || cJSON_IsNull(id))
        return "null";
    if (cJSON_IsNumber(id)) {
        double d = id->valuedouble;
        if (isfinite(d) && d == trunc(d) && fabs(d) <= 9007199254740992.0 && n >= 24) {
            /* Digits written backwards by hand: printf is a measurable
             * part of a ping in musl. */
            long long v = (long long)d;
            unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
            char *o = buf + n;
            *--o = 0;
            do {
                *--o = (char)('0' + u % 10);
                u /= 10;
            } while (u);
            if (v < 0)
                *--o = '-';
            return o;
        }
    }
    *heap = cJSON_PrintUnformatted(id);
    return *heap;
}

/* {"jsonrpc":"2.0","id":ID,"KEY":BODY} and a newline, for results and
 * errors alike; takes body. NULL when out of memory. */
static char *envelope(const cJSON *id, const char *key, cJSON *body, size_t *len)
{
    char idbuf[24], *idheap;
    const char *idt = id_text(id, idbuf, sizeof(idbuf), &idheap);
    /* An empty object (ping's answer) needs no printer and no buffer. */
    bool empty = body && cJSON_IsObject(body) && !body->child;
    char *btext = empty ? NULL : body ? cJSON_PrintUnformatted(body) : NULL;
    const char *bt = empty ? "{}" : btext;
    cJSON_Delete(body);
    char *line = NULL;
    if (idt && bt) {
        static const char pre[] = "{\"jsonrpc\":\"2.0\",\"id\":";
        size_t li = strlen(idt), lk = strlen(key), lb = strlen(bt);
        size_t n = sizeof(pre) - 1 + li + lk + 4 + lb + 2; /* ,"KEY": BODY }\n */
        line = malloc(n + 1);
        if (line) {
            /* Copied, not printf'd: musl's printf costs a fifth of the
             * pipelined throughput here. */
            char *o = line;
            memcpy(o, pre, sizeof(pre) - 1);
            o += sizeof(pre) - 1;
            memcpy(o, idt, li);
            o += li;
            *o++ = ',';
            *o++ = '"';
            memcpy(o, key, lk);
            o += lk;
            *o++ = '"';
            *o++ = ':';
            memcpy(o, bt, lb);
            o += lb;
            *o++ = '}';
            *o++ = '\n';
            *o = 0;
            *len = n;
        }
    }
    cJSON_free(idheap);
    cJSON_free(btext);
    return line;
}

char *rpc_format_result(const cJSON *id, cJSON *result, size_t *len)
{
    return result ? envelope(id, "result", result, len) : NULL;
}

char *rpc_format_error(const cJSON *id, int code, const char *message, cJSON *data, size_t *len)
{
    cJSON *e = cJSON_CreateObject();
    if (!e) {
        cJSON_Delete(data);
        return NULL;
    }
    cJSON_AddNumberToObject(e, "code", code);
    cJSON_AddStringToObject(e, "message", message);
    if (data)
        cJSON_AddItemToObject(e, "data", data);
    return envelope(id, "error", e, len);
}
