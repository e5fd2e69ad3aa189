/* fuzz_rpc: the control protocol's framing and request parser
 * (agent/proto/rpc.c), which sees every byte a control client sends.
 *
 * Input layout, so that mutations steer the framing as well as the text:
 *   byte 0      low nibble: how many split bytes follow (0..15)
 *               high nibble: line limit, 16 << (n % 9), i.e. 16..4096
 *               bytes, small so that overlong lines are reached often
 *   byte 1      bits 5..7: the stream is the payload repeated once
 *               (0..5), 8 times (6) or 32 times (7); bits 0..2: piece
 *               sizes are multiplied by 1 << n. linebuf allocates 64 KiB
 *               at a time, so only a stream longer than that (libFuzzer's
 *               inputs stay near 4 KiB) reaches its growth and compaction
 *               paths; most inputs stay single so the run stays fast
 *   split bytes each one piece size, ((b & 127) + 1) << multiplier; with
 *               bit 7 set the piece goes in through linebuf_space/tail/
 *               commit (the read(2) path), otherwise through
 *               linebuf_append; the list repeats until the stream is used;
 *               without split bytes each copy of the payload is one piece
 *   the rest    the payload
 *
 * Checked beyond the sanitizers:
 *   - the lines linebuf hands out are exactly the stream split at '\n'
 *     (one trailing '\r' cut), in order, none longer than the limit, and
 *     -1 comes only when the pending line really is too long;
 *   - utf8_invalid_at agrees with an independent validator;
 *   - every reply from rpc_format_result/rpc_format_error is one line of
 *     valid UTF-8 JSON with "jsonrpc":"2.0" and an "id", as a client
 *     parsing replies strictly would require;
 *   - rpc_parse (with its fast path for plain envelopes) reads every line
 *     as rpc_parse_general (the tree) does: the same outcome, method, id
 *     and params, and the same error;
 *   - jsonout prints an accepted request's params as cJSON's own printer
 *     does, byte for byte unless the tree holds an integer from 10^15 to
 *     2^53 (plain digits in jsonout) or a C1 control (escaped by jsonout,
 *     never left raw), and then as the same tree (compared member by
 *     member in order: duplicate keys are kept).
 * Each complete line is copied into a buffer of its exact length before
 * rpc_parse, so a read past the line's end is reported by ASan instead of
 * landing in the rest of the linebuf. Only the first 32 lines starting in
 * the first copy of the payload are parsed (the framing checks still see
 * every line): repeats would parse the same text again, and inputs with
 * hundreds of near-identical requests slowed the run tenfold. */
#include "jsonout.h"
#include "linebuf.h"
#include "rpc.h"
#include "utf8.h"

#include <cJSON.h>
#include <math.h>

#include "fuzz_common.h"

static const int known_codes[] = {
    RPC_PARSE_ERROR, RPC_INVALID_REQUEST, RPC_METHOD_NOT_FOUND, RPC_INVALID_PARAMS,
    RPC_INTERNAL_ERROR, RPC_ERR_FAILED, RPC_ERR_BUSY, RPC_ERR_NOT_FOUND, RPC_ERR_STATE,
};

static void check_reply(char *reply, size_t n, const char *what)
{
    FUZZ_CHECK(reply != NULL, "%s returned NULL", what);
    FUZZ_CHECK(n > 1 && n == strlen(reply), "%s: length %zu, strlen %zu", what, n, strlen(reply));
    FUZZ_CHECK(reply[n - 1] == '\n', "%s: reply does not end in a newline", what);
    FUZZ_CHECK(memchr(reply, '\n', n - 1) == NULL, "%s: newline inside the reply: %s", what,
               reply);
    long bad = fuzz_utf8_ref(reply, n - 1);
    FUZZ_CHECK(bad < 0, "%s: reply is not valid UTF-8 at byte %ld: %s", what, bad, reply);

    cJSON *msg = cJSON_ParseWithLength(reply, n - 1);
    FUZZ_CHECK(msg != NULL, "%s: reply is not JSON: %s", what, reply);
    cJSON *v = cJSON_GetObjectItemCaseSensitive(msg, "jsonrpc");
    FUZZ_CHECK(cJSON_IsString(v) && strcmp(v->valuestring, "2.0") == 0,
               "%s: reply lacks jsonrpc 2.0: %s", what, reply);
    FUZZ_CHECK(cJSON_HasObjectItem(msg, "id"), "%s: reply lacks id: %s", what, reply);
    cJSON_Delete(msg);
    free(reply);
}

/* The id and params of a request as the reply a handler echoing its
 * params would send: equal texts mean equal requests for any handler. */
static char *echo(const struct rpc_request *req, size_t *n)
{
    cJSON *result = cJSON_CreateObject();
    if (!result)
        abort();
    if (req->params)
        cJSON_AddItemToObject(result, "params", cJSON_Duplicate(req->params, 1));
    char *reply = rpc_format_result(req->id, result, n);
    if (!reply)
        abort();
    return reply;
}

static void same_as_general(const char *copy, size_t len, int rc, const struct rpc_request *req,
                            const struct rpc_error *err)
{
    struct rpc_request g;
    struct rpc_error gerr;
    memset(&gerr, 0, sizeof(gerr));
    int grc = rpc_parse_general(copy, len, &g, &gerr);
    FUZZ_CHECK(rc == grc, "rpc_parse says %d, rpc_parse_general %d", rc, grc);
    if (rc == 0) {
        FUZZ_CHECK(strcmp(req->method, g.method) == 0, "method \"%s\" vs \"%s\"", req->method,
                   g.method);
        FUZZ_CHECK(!req->id == !g.id, "one read an id, the other none");
        size_t a, b;
        char *ra = echo(req, &a), *rb = echo(&g, &b);
        FUZZ_CHECK(a == b && memcmp(ra, rb, a) == 0, "replies differ: %s vs %s", ra, rb);
        free(ra);
        free(rb);
    } else if (rc < 0) {
        FUZZ_CHECK(err->code == gerr.code && strcmp(err->message, gerr.message) == 0,
                   "errors differ: %d %s vs %d %s", err->code, err->message, gerr.code,
                   gerr.message);
    }
    cJSON_Delete(gerr.data);
    rpc_request_free(&g);
}

/* Whether t holds a number jsonout writes in plain digits where cJSON
 * may use an exponent. */
static bool has_big_integer(const cJSON *t)
{
    for (; t; t = t->next) {
        double d = t->valuedouble, a = d < 0 ? -d : d;
        if (cJSON_IsNumber(t) && a >= 1e15 && a <= 9007199254740992.0 && d == (double)(long long)d)
            return true;
        if (has_big_integer(t->child))
            return true;
    }
    return false;
}

/* Whether s holds a C1 control (U+0080..U+009F), which jsonout escapes
 * and cJSON passes through. */
static bool has_c1_text(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; p && *p; p++)
        if (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)
            return true;
    return false;
}

static bool has_c1(const cJSON *t)
{
    for (; t; t = t->next) {
        if (has_c1_text(t->string) || (cJSON_IsString(t) && has_c1_text(t->valuestring)))
            return true;
        if (has_c1(t->child))
            return true;
    }
    return false;
}

/* Whether a and b are the same tree: the same members in the same order,
 * with the same names, types and values (a number to the bit, so -0 is
 * not 0). Not cJSON_Compare: it finds each member of an object by name,
 * so for an object with a duplicate key ({"z":"a","z":-0}, which
 * cJSON_Parse keeps both of) it compares the second "z" with the first
 * and calls even a tree unequal to itself. */
/* Both printers write a number that is not finite (1e2300 parses as
 * infinity) as null, as JSON has no other spelling for it. */
static int kind(const cJSON *x)
{
    if (cJSON_IsNumber(x) && !isfinite(x->valuedouble))
        return cJSON_NULL;
    return x->type & 0xff;
}

static bool same_tree(const cJSON *a, const cJSON *b)
{
    for (; a && b; a = a->next, b = b->next) {
        if (kind(a) != kind(b) || !a->string != !b->string ||
            (a->string && strcmp(a->string, b->string) != 0))
            return false;
        if (kind(a) == cJSON_Number && (a->valuedouble != b->valuedouble ||
                                  signbit(a->valuedouble) != signbit(b->valuedouble)))
            return false;
        if (cJSON_IsString(a) && strcmp(a->valuestring, b->valuestring) != 0)
            return false;
        if (!same_tree(a->child, b->child))
            return false;
    }
    return !a && !b;
}

static void same_print_as_cjson(const cJSON *t)
{
    char *mine = jsonout_print(t), *theirs = cJSON_PrintUnformatted(t);
    FUZZ_CHECK(mine && theirs, "one printer failed: %s vs %s", mine ? mine : "(null)",
               theirs ? theirs : "(null)");
    bool c1 = has_c1(t);
    FUZZ_CHECK(!has_c1_text(mine), "jsonout left a C1 control raw: %s", mine);
    if (!has_big_integer(t) && !c1) {
        FUZZ_CHECK(strcmp(mine, theirs) == 0, "jsonout wrote %s, cJSON %s", mine, theirs);
    } else {
        cJSON *back = cJSON_Parse(mine);
        /* The item itself, not its siblings: params is the first child. */
        FUZZ_CHECK(back && (back->type & 0xff) == (t->type & 0xff) &&
                       same_tree(back->child, t->child),
                   "jsonout wrote %s for %s", mine, theirs);
        cJSON_Delete(back);
    }
    cJSON_free(mine);
    cJSON_free(theirs);
}

static void handle_line(const char *line, size_t len)
{
    /* Exact-size copy: see the header comment. */
    char *copy = malloc(len ? len : 1);
    struct rpc_request req;
    struct rpc_error err;
    size_t n = 0;
    char *reply;
    int rc;

    if (!copy)
        abort();
    memcpy(copy, line, len);

    FUZZ_CHECK(utf8_invalid_at(copy, len) == fuzz_utf8_ref(copy, len),
               "utf8_invalid_at says %ld, reference says %ld",
               utf8_invalid_at(copy, len), fuzz_utf8_ref(copy, len));

    memset(&err, 0, sizeof(err));
    rc = rpc_parse(copy, len, &req, &err);
    same_as_general(copy, len, rc, &req, &err);
    if (rc == 1) {
        FUZZ_CHECK(req.root == NULL && req.id == NULL, "blank line left a tree behind");
        for (size_t i = 0; i < len; i++)
            FUZZ_CHECK(copy[i] == ' ' || copy[i] == '\t' || copy[i] == '\r',
                       "non-blank line (byte %zu = 0x%02x) reported as blank", i,
                       (unsigned char)copy[i]);
    } else if (rc == 0) {
        FUZZ_CHECK(req.method && req.method[0], "accepted request without method");
        FUZZ_CHECK(fuzz_utf8_ref(copy, len) < 0, "accepted a request that is not UTF-8");
        FUZZ_CHECK(!req.params || cJSON_IsObject(req.params) || cJSON_IsArray(req.params),
                   "params of type %d accepted", req.params->type);
        if (req.params)
            same_print_as_cjson(req.params);
        /* A handler answering with what it was given: the method name
         * and a copy of the params both go back out through the printer. */
        cJSON *result = cJSON_CreateObject();
        cJSON_AddStringToObject(result, "method", req.method);
        if (req.params)
            cJSON_AddItemToObject(result, "params", cJSON_Duplicate(req.params, 1));
        reply = rpc_format_result(req.id, result, &n);
        check_reply(reply, n, "rpc_format_result");
        /* Handlers also fail with the method name in the message (whole:
         * cutting it to a fixed size here could split a character). */
        char *msg = NULL;
        if (asprintf(&msg, "no such method: %s", req.method) < 0)
            abort();
        reply = rpc_format_error(req.id, RPC_METHOD_NOT_FOUND, msg, NULL, &n);
        check_reply(reply, n, "rpc_format_error(method)");
        free(msg);
    } else {
        FUZZ_CHECK(rc == -1, "rpc_parse returned %d", rc);
        bool known = false;
        for (size_t i = 0; i < sizeof(known_codes) / sizeof(known_codes[0]); i++)
            known |= err.code == known_codes[i];
        FUZZ_CHECK(known, "unknown error code %d", err.code);
        FUZZ_CHECK(memchr(err.message, '\0', sizeof(err.message)) != NULL,
                   "error message not terminated");
        FUZZ_CHECK(err.message[0], "empty error message");
        reply = rpc_format_error(req.id, err.code, err.message, err.data, &n);
        check_reply(reply, n, "rpc_format_error");
    }
    rpc_request_free(&req);
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct linebuf lb;
    const uint8_t *splits, *payload;
    uint8_t *stream;
    size_t nsplit, max, plen, slen, reps, mult, fed = 0, pos = 0, si = 0, parsed = 0;

    /* The whole input through the validator too: it is not line-bounded. */
    FUZZ_CHECK(utf8_invalid_at((const char *)data, size) == fuzz_utf8_ref(data, size),
               "utf8_invalid_at says %ld, reference says %ld (whole input)",
               utf8_invalid_at((const char *)data, size), fuzz_utf8_ref(data, size));
    if (size < 2)
        return 0;
    nsplit = data[0] & 15;
    max = (size_t)16 << ((data[0] >> 4) % 9);
    reps = (data[1] >> 5) < 6 ? 1 : (data[1] >> 5) == 6 ? 8 : 32;
    mult = data[1] & 7;
    if (nsplit > size - 2)
        nsplit = size - 2;
    splits = data + 2;
    payload = data + 2 + nsplit;
    plen = size - 2 - nsplit;
    slen = plen * reps;
    stream = malloc(slen ? slen : 1);
    if (!stream)
        abort();
    for (size_t i = 0; i < reps; i++)
        memcpy(stream + i * plen, payload, plen);

    linebuf_init(&lb, max);
    while (fed < slen) {
        uint8_t sb = nsplit ? splits[si++ % nsplit] : 0;
        size_t piece = nsplit ? ((size_t)(sb & 127) + 1) << mult : plen; /* one copy */
        bool via_tail = sb & 128;
        bool closed = false;
        int r;

        /* Long streams are about buffer growth and compaction, not about
         * byte-sized splits (single copies cover those): bigger pieces
         * keep such inputs from dominating the run time. */
        if (reps > 1 && piece < 512)
            piece = 512;
        if (piece > slen - fed)
            piece = slen - fed;
        if (via_tail) {
            while (piece > 0) {
                size_t room = linebuf_space(&lb);
                FUZZ_CHECK(room > 0 || linebuf_pending(&lb) > max,
                           "no room with only %zu bytes pending (max %zu)",
                           linebuf_pending(&lb), max);
                if (room == 0) {
                    closed = true;
                    break;
                }
                size_t k = piece < room ? piece : room;
                memcpy(linebuf_tail(&lb), stream + fed, k);
                linebuf_commit(&lb, k);
                fed += k;
                piece -= k;
            }
        } else {
            if (linebuf_append(&lb, (const char *)stream + fed, piece) < 0)
                closed = true; /* partial appends are not tracked: stop */
            else
                fed += piece;
        }
        if (closed)
            break;

        /* Drain, comparing with the stream split by hand. */
        for (;;) {
            const char *line = NULL;
            size_t len = 0;
            const uint8_t *nl = memchr(stream + pos, '\n', fed - pos);
            size_t raw = nl ? (size_t)(nl - (stream + pos)) : fed - pos;

            r = linebuf_next(&lb, &line, &len);
            if (r == 1) {
                FUZZ_CHECK(nl != NULL, "line returned before its newline arrived");
                FUZZ_CHECK(raw <= max, "line of %zu bytes passed a %zu limit", raw, max);
                size_t want = raw && stream[pos + raw - 1] == '\r' ? raw - 1 : raw;
                FUZZ_CHECK(len == want && memcmp(line, stream + pos, len) == 0,
                           "line at stream offset %zu: got %zu bytes, want %zu", pos, len, want);
                bool first_copy = pos < plen;
                pos += raw + 1;
                FUZZ_CHECK(linebuf_pending(&lb) == fed - pos, "pending %zu, want %zu",
                           linebuf_pending(&lb), fed - pos);
                if (first_copy && parsed++ < 32)
                    handle_line(line, len);
                continue;
            }
            if (r == 0) {
                FUZZ_CHECK(nl == NULL, "complete line at offset %zu not returned", pos);
                FUZZ_CHECK(raw <= max, "pending %zu bytes over the %zu limit not refused", raw,
                           max);
            } else {
                FUZZ_CHECK(r == -1, "linebuf_next returned %d", r);
                FUZZ_CHECK(raw > max, "refused a %zu-byte line under the %zu limit", raw, max);
                closed = true;
            }
            break;
        }
        if (closed)
            break;
    }
    linebuf_free(&lb);
    free(stream);
    return 0;
}
