#include "rpc.h"
#include "jsonout.h"
#include "utf8.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

void rpc_error_set(struct rpc_error *err, int code, const char *fmt, ...)
{
    va_list ap;
    err->code = code;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof(err->message), fmt, ap);
    va_end(ap);
}

int rpc_error_from(struct rpc_error *err, int code, const struct err *e)
{
    rpc_error_set(err, code, "%s", err_msg(e));
    return -1;
}

static bool is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* Offset of a NUL in a JSON text, raw or escaped, or -1; *what names it.
 * cJSON decodes into C strings, so everything after a NUL would silently
 * vanish ("ping\u0000x" would be taken as "ping"): such requests are
 * refused instead. A \u not followed by four hex digits counts too:
 * cJSON reads it as \u0000 rather than refusing it. */
static long nul_at(const char *s, size_t len, const char **what)
{
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '\0') {
            *what = "a NUL byte";
            return (long)i;
        }
        if (s[i] != '\\' || i + 1 >= len)
            continue;
        if (s[i + 1] == 'u') {
            if (i + 6 > len || !is_hex(s[i + 2]) || !is_hex(s[i + 3]) || !is_hex(s[i + 4]) ||
                !is_hex(s[i + 5])) {
                *what = "a \\u escape without four hex digits";
                return (long)i;
            }
            if (memcmp(s + i + 2, "0000", 4) == 0) {
                *what = "\\u0000";
                return (long)i;
            }
        }
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


/* The fast path. Nearly every request a host sends is a flat envelope of
 * plain ASCII: {"jsonrpc":"2.0","id":7,"method":"status"}, with params
 * absent, null or {}. Such a line is read here in one pass, without the
 * tree, the allocations and the UTF-8 and escape scans of the general
 * path, which were most of the cost of a pipelined request. Anything else
 * (escapes, non-ASCII, other members, duplicates, params with content, a
 * fractional id, odd whitespace) returns false and takes the general
 * path, so every error and every corner keeps one implementation: this
 * only ever accepts a subset of what that path accepts, with the same
 * result. */
/* Small enough to be copied into every use: at -Os the calls cost more
 * than the scanning. */
#define FAST static inline __attribute__((always_inline))

struct fast {
    const char *p, *end;
};

FAST void fast_ws(struct fast *f)
{
    while (f->p < f->end && (*f->p == ' ' || *f->p == '\t' || *f->p == '\r'))
        f->p++;
}

FAST bool fast_char(struct fast *f, char c)
{
    if (f->p >= f->end || *f->p != c)
        return false;
    f->p++;
    return true;
}

/* Byte by byte: musl's memcmp is a call and a loop for a 2 to 7 byte
 * word that the compiler unrolls here. */
FAST bool fast_eq(const char *s, size_t n, const char *word, size_t wn)
{
    if (n != wn)
        return false;
    for (size_t i = 0; i < wn; i++)
        if (s[i] != word[i])
            return false;
    return true;
}

FAST bool fast_lit(struct fast *f, const char *lit, size_t n)
{
    if ((size_t)(f->end - f->p) < n || !fast_eq(f->p, n, lit, n))
        return false;
    f->p += n;
    return true;
}

/* A string of printable ASCII without escapes: *s and *n its text
 * (unterminated, inside the line); false for anything else. */
FAST bool fast_string(struct fast *f, const char **s, size_t *n)
{
    if (!fast_char(f, '"'))
        return false;
    const char *b = f->p;
    for (;;) {
        if (f->p >= f->end)
            return false;
        unsigned char ch = (unsigned char)*f->p;
        if (ch == '"')
            break;
        if (ch < 0x20 || ch > 0x7e || ch == '\\')
            return false;
        f->p++;
    }
    *s = b;
    *n = (size_t)(f->p - b);
    f->p++;
    return true;
}

FAST bool fast_copy(char *out, size_t cap, const char *s, size_t n)
{
    if (n >= cap)
        return false;
    memcpy(out, s, n);
    out[n] = 0;
    return true;
}

/* An integer id that a double holds exactly, with nothing after it that
 * would make it another number (no fraction, no exponent). */
FAST bool fast_int(struct fast *f, double *out)
{
    bool neg = fast_char(f, '-');
    const char *s = f->p;
    unsigned long long v = 0;
    while (f->p < f->end && *f->p >= '0' && *f->p <= '9') {
        v = v * 10 + (unsigned long long)(*f->p - '0');
        f->p++;
    }
    size_t n = (size_t)(f->p - s);
    if (n == 0 || n > 15 || (n > 1 && *s == '0') || (neg && v == 0))
        return false;
    if (f->p < f->end && (*f->p == '.' || *f->p == 'e' || *f->p == 'E'))
        return false;
    *out = neg ? -(double)v : (double)v;
    return true;
}

FAST bool fast_id(struct fast *f, struct rpc_request *req)
{
    cJSON *id = &req->id_store;
    const char *s;
    size_t n;
    *id = (cJSON){ 0 };
    if (fast_lit(f, "null", 4)) {
        /* A request with a null id is answered (with null), unlike one
         * without an id. */
        id->type = cJSON_NULL;
    } else if (f->p < f->end && *f->p == '"') {
        if (!fast_string(f, &s, &n) || !fast_copy(req->id_text, sizeof(req->id_text), s, n))
            return false;
        id->type = cJSON_String;
        id->valuestring = req->id_text;
    } else {
        double d;
        if (!fast_int(f, &d))
            return false;
        id->type = cJSON_Number;
        id->valuedouble = d;
        id->valueint = (int)(d > 2147483647.0 ? 2147483647.0 : d < -2147483648.0 ? -2147483648.0 : d);
    }
    req->id = id;
    return true;
}

static bool parse_fast(const char *line, size_t len, struct rpc_request *req)
{
    struct fast f = { line, line + len };
    enum { JSONRPC = 1, ID = 2, METHOD = 4, PARAMS = 8 };
    unsigned seen = 0;
    const char *k, *s;
    size_t kn, n;

    fast_ws(&f);
    if (!fast_char(&f, '{'))
        return false;
    for (;;) {
        fast_ws(&f);
        if (!fast_string(&f, &k, &kn))
            return false;
        fast_ws(&f);
        if (!fast_char(&f, ':'))
            return false;
        fast_ws(&f);
        unsigned bit = fast_eq(k, kn, "jsonrpc", 7) ? JSONRPC
                     : fast_eq(k, kn, "id", 2)      ? ID
                     : fast_eq(k, kn, "method", 6)  ? METHOD
                     : fast_eq(k, kn, "params", 6)  ? PARAMS : 0;
        if (!bit || (seen & bit))
            return false;
        seen |= bit;
        if (bit == JSONRPC) {
            if (!fast_lit(&f, "\"2.0\"", 5))
                return false;
        } else if (bit == ID) {
            if (!fast_id(&f, req))
                return false;
        } else if (bit == METHOD) {
            if (!fast_string(&f, &s, &n) || n == 0 ||
                !fast_copy(req->method_store, sizeof(req->method_store), s, n))
                return false;
            req->method = req->method_store;
        } else if (!fast_lit(&f, "null", 4)) {
            if (!fast_char(&f, '{'))
                return false;
            fast_ws(&f);
            if (!fast_char(&f, '}'))
                return false;
            /* Given as {}: an empty object, as the general path makes it,
             * so a method sees the same params either way. */
            req->params_store = (cJSON){ .type = cJSON_Object };
            req->params = &req->params_store;
        }
        fast_ws(&f);
        if (fast_char(&f, '}'))
            break;
        if (!fast_char(&f, ','))
            return false;
    }
    fast_ws(&f);
    return f.p == f.end && (seen & (JSONRPC | METHOD)) == (JSONRPC | METHOD);
}

int rpc_parse(const char *line, size_t len, struct rpc_request *req, struct rpc_error *err)
{
    /* Only the pointers: the stores are written whole when used, and
     * clearing them for every request was a visible part of its cost. */
    req->root = req->id = req->params = NULL;
    req->method = NULL;
    err->data = NULL;
    if (parse_fast(line, len, req))
        return 0;
    return rpc_parse_general(line, len, req, err);
}

int rpc_parse_general(const char *line, size_t len, struct rpc_request *req, struct rpc_error *err)
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
    const char *what = NULL;
    bad = nul_at(line, len, &what);
    if (bad >= 0) {
        rpc_error_set(err, RPC_PARSE_ERROR, "%s is not accepted (byte %ld)", what, bad);
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
    req->root = req->id = req->params = NULL;
    req->method = NULL;
}

/* Shared by every empty result: never filled, never freed. */
static cJSON empty_result = { .type = cJSON_Object };

cJSON *rpc_empty_result(void)
{
    return &empty_result;
}

/* The id as JSON text into buf (JSONOUT_NUM_MAX bytes). A number, what
 * nearly every client sends, is written there; anything else (a string
 * needs escaping) is printed whole, and *heap is then the text to free. */
static const char *id_text(const cJSON *id, char *buf, char **heap)
{
    *heap = NULL;
    if (!id || cJSON_IsNull(id))
        return "null";
    if (cJSON_IsNumber(id)) {
        jsonout_number(id->valuedouble, buf);
        return buf;
    }
    *heap = jsonout_print(id);
    return *heap;
}

/* A short copy. At -Os memcpy becomes "rep movsb", whose start-up
 * costs more than the few bytes of an id or a key; a long body goes to
 * memcpy. */
static inline __attribute__((always_inline)) char *put(char *o, const char *s, size_t n)
{
    if (n > 64)
        return (char *)memcpy(o, s, n) + n;
    for (size_t i = 0; i < n; i++)
        o[i] = s[i];
    return o + n;
}

/* {"jsonrpc":"2.0","id":ID,"KEY":BODY} and a newline, for results and
 * errors alike; takes body. Written into buf when it fits (most replies
 * are short, and a malloc and free per reply were a tenth of the cost of
 * a pipelined ping), else malloc'd. NULL when out of memory. */
/* The line itself around a body already in text: copied, not printf'd
 * (musl's printf costs a fifth of the pipelined throughput here). */
static char *frame(const char *idt, const char *key, const char *bt, size_t lb, size_t *len,
                   char *buf, size_t cap)
{
    static const char pre[] = "{\"jsonrpc\":\"2.0\",\"id\":";
    size_t li = strlen(idt), lk = strlen(key);
    size_t n = sizeof(pre) - 1 + li + lk + 4 + lb + 2; /* ,"KEY": BODY }\n */
    char *line = n + 1 <= cap ? buf : malloc(n + 1);
    if (!line)
        return NULL;
    char *o = line;
    o = put(o, pre, sizeof(pre) - 1);
    o = put(o, idt, li);
    *o++ = ',';
    *o++ = '"';
    o = put(o, key, lk);
    *o++ = '"';
    *o++ = ':';
    o = put(o, bt, lb);
    *o++ = '}';
    *o++ = '\n';
    *o = 0;
    *len = n;
    return line;
}

static char *envelope(const cJSON *id, const char *key, cJSON *body, size_t *len, char *buf,
                      size_t cap)
{
    char idbuf[JSONOUT_NUM_MAX], *idheap;
    const char *idt = id_text(id, idbuf, &idheap);
    /* An empty object (ping's answer) needs no printer and no buffer. */
    bool empty = body && cJSON_IsObject(body) && !body->child;
    char *btext = empty ? NULL : body ? jsonout_print(body) : NULL;
    const char *bt = empty ? "{}" : btext;
    if (body != &empty_result)
        cJSON_Delete(body);
    char *line = idt && bt ? frame(idt, key, bt, strlen(bt), len, buf, cap) : NULL;
    cJSON_free(idheap);
    cJSON_free(btext);
    return line;
}

char *rpc_format_result_text(const cJSON *id, const char *json, size_t jlen, size_t *len)
{
    char idbuf[JSONOUT_NUM_MAX], *idheap;
    const char *idt = id_text(id, idbuf, &idheap);
    char *line = idt ? frame(idt, "result", json, jlen, len, NULL, 0) : NULL;
    cJSON_free(idheap);
    return line;
}

char *rpc_format_result(const cJSON *id, cJSON *result, size_t *len)
{
    return rpc_format_result_in(NULL, 0, id, result, len);
}

char *rpc_format_result_in(char *buf, size_t cap, const cJSON *id, cJSON *result, size_t *len)
{
    return result ? envelope(id, "result", result, len, buf, cap) : NULL;
}

char *rpc_format_error(const cJSON *id, int code, const char *message, cJSON *data, size_t *len)
{
    return rpc_format_error_in(NULL, 0, id, code, message, data, len);
}

char *rpc_format_error_in(char *buf, size_t cap, const cJSON *id, int code, const char *message,
                          cJSON *data, size_t *len)
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
    return envelope(id, "error", e, len, buf, cap);
}
