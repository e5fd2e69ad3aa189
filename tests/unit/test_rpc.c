/* JSON-RPC framing: partial lines, pipelining, oversize, invalid JSON and
 * wrong member types. */
#include "unit.h"

#include <errno.h>
#include <stdlib.h>

#include <cJSON.h>

#include "linebuf.h"
#include "rpc.h"
#include "utf8.h"

TEST(linebuf_partial_and_pipelined_lines)
{
    struct linebuf lb;
    const char *line;
    size_t len;

    linebuf_init(&lb, 64);
    CHECK_EQ_INT(linebuf_append(&lb, "{\"a\"", 4), 0);
    CHECK_EQ_INT(linebuf_next(&lb, &line, &len), 0);
    CHECK_EQ_INT(linebuf_append(&lb, ":1}\r\nsecond\nthi", 15), 0);
    CHECK_EQ_INT(linebuf_next(&lb, &line, &len), 1);
    CHECK_EQ_INT(len, 7);
    CHECK(memcmp(line, "{\"a\":1}", 7) == 0);
    CHECK_EQ_INT(linebuf_next(&lb, &line, &len), 1);
    CHECK_EQ_INT(len, 6);
    CHECK(memcmp(line, "second", 6) == 0);
    CHECK_EQ_INT(linebuf_next(&lb, &line, &len), 0);
    CHECK_EQ_INT(linebuf_pending(&lb), 3);
    CHECK_EQ_INT(linebuf_append(&lb, "rd\n", 3), 0);
    CHECK_EQ_INT(linebuf_next(&lb, &line, &len), 1);
    CHECK(len == 5 && memcmp(line, "third", 5) == 0);
    linebuf_free(&lb);
}

TEST(linebuf_byte_at_a_time)
{
    struct linebuf lb;
    const char *line;
    size_t len;
    const char *msg = "abc\ndef\n";
    int lines = 0;

    linebuf_init(&lb, 16);
    for (size_t i = 0; msg[i]; i++) {
        CHECK_EQ_INT(linebuf_append(&lb, &msg[i], 1), 0);
        while (linebuf_next(&lb, &line, &len) == 1) {
            CHECK_EQ_INT(len, 3);
            lines++;
        }
    }
    CHECK_EQ_INT(lines, 2);
    linebuf_free(&lb);
}

TEST(linebuf_oversize_line_detected_before_newline)
{
    struct linebuf lb;
    const char *line;
    size_t len;
    char big[100];

    memset(big, 'x', sizeof(big));
    linebuf_init(&lb, 64);
    CHECK_EQ_INT(linebuf_append(&lb, big, 64), 0);
    CHECK_EQ_INT(linebuf_next(&lb, &line, &len), 0); /* exactly max: still fine */
    CHECK_EQ_INT(linebuf_append(&lb, big, 1), 0);
    CHECK_EQ_INT(linebuf_next(&lb, &line, &len), -1);
    linebuf_free(&lb);

    /* A line of exactly max bytes with its newline is accepted. */
    linebuf_init(&lb, 64);
    CHECK_EQ_INT(linebuf_append(&lb, big, 64), 0);
    CHECK_EQ_INT(linebuf_append(&lb, "\n", 1), 0);
    CHECK_EQ_INT(linebuf_next(&lb, &line, &len), 1);
    CHECK_EQ_INT(len, 64);
    linebuf_free(&lb);
}

TEST(linebuf_shrinks_only_when_empty)
{
    struct linebuf lb;
    const char *line;
    size_t len;
    static char big[300000];

    memset(big, 'x', sizeof(big));
    linebuf_init(&lb, sizeof(big));
    CHECK_EQ_INT(linebuf_append(&lb, big, sizeof(big)), 0);
    CHECK(lb.b.cap > LINEBUF_CHUNK);
    /* A partial line is kept whole. */
    linebuf_shrink(&lb);
    CHECK(lb.b.cap > LINEBUF_CHUNK);
    CHECK_EQ_INT(linebuf_pending(&lb), sizeof(big));
    CHECK_EQ_INT(linebuf_append(&lb, "\nab", 3), 0);
    CHECK_EQ_INT(linebuf_next(&lb, &line, &len), 1);
    CHECK_EQ_INT(len, sizeof(big));
    linebuf_shrink(&lb); /* "ab" pending */
    CHECK(lb.b.cap > LINEBUF_CHUNK);
    CHECK_EQ_INT(linebuf_append(&lb, "\n", 1), 0);
    CHECK_EQ_INT(linebuf_next(&lb, &line, &len), 1);
    CHECK_EQ_INT(len, 2);
    CHECK(memcmp(line, "ab", 2) == 0);
    linebuf_shrink(&lb);
    CHECK_EQ_INT(lb.b.cap, 0);
    /* Usable again after shrinking. */
    CHECK_EQ_INT(linebuf_append(&lb, "ping\n", 5), 0);
    CHECK_EQ_INT(linebuf_next(&lb, &line, &len), 1);
    CHECK_EQ_INT(len, 4);
    linebuf_free(&lb);
}

TEST(linebuf_short_requests_keep_one_chunk)
{
    struct linebuf lb;
    const char *line;
    size_t len;

    /* The control loop's pattern: room asked before each read, the line
     * taken, shrink, room asked again. The buffer must not grow (and be
     * freed again) per request. */
    linebuf_init(&lb, 1 << 20);
    for (int i = 0; i < 100; i++) {
        CHECK(linebuf_space(&lb) >= LINEBUF_CHUNK);
        memcpy(linebuf_tail(&lb), "{\"method\":\"ping\"}\n", 18);
        linebuf_commit(&lb, 18);
        CHECK_EQ_INT(linebuf_next(&lb, &line, &len), 1);
        CHECK_EQ_INT(len, 17);
        CHECK_EQ_INT(linebuf_next(&lb, &line, &len), 0);
        linebuf_shrink(&lb);
        CHECK(linebuf_space(&lb) >= LINEBUF_CHUNK);
        CHECK_EQ_INT(lb.b.cap, LINEBUF_CHUNK);
    }
    linebuf_free(&lb);
}

TEST(linebuf_is_bounded)
{
    struct linebuf lb;
    char chunk[4096];
    size_t total = 0;

    memset(chunk, 'y', sizeof(chunk));
    linebuf_init(&lb, 1024);
    while (linebuf_append(&lb, chunk, sizeof(chunk)) == 0 && total < (1u << 24))
        total += sizeof(chunk);
    /* It refuses to grow past one line plus one read chunk. */
    CHECK(total < 1024 + 65536 + 4096);
    CHECK(lb.b.cap <= 1024 + 2 + 65536);
    linebuf_free(&lb);
}

static int parse(const char *s, struct rpc_request *req, struct rpc_error *err)
{
    return rpc_parse(s, strlen(s), req, err);
}

TEST(rpc_parse_valid_request)
{
    struct rpc_request req;
    struct rpc_error err;

    CHECK_EQ_INT(parse("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"status\",\"params\":{\"a\":1}}", &req, &err), 0);
    CHECK_STR(req.method, "status");
    CHECK(req.id && cJSON_IsNumber(req.id) && req.id->valueint == 7);
    CHECK(cJSON_IsObject(req.params));
    rpc_request_free(&req);

    CHECK_EQ_INT(parse("{\"jsonrpc\":\"2.0\",\"method\":\"ping\"}", &req, &err), 0);
    CHECK(req.id == NULL); /* a notification */
    CHECK(req.params == NULL);
    rpc_request_free(&req);

    CHECK_EQ_INT(parse("   \t", &req, &err), 1);
    rpc_request_free(&req);
}

TEST(rpc_parse_errors)
{
    static const struct {
        const char *in;
        int code;
        const char *msg;
        bool has_id;
    } cases[] = {
        {"{bad", RPC_PARSE_ERROR, "invalid JSON", false},
        {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"} x", RPC_PARSE_ERROR, "trailing", false},
        {"[1,2]", RPC_INVALID_REQUEST, "batch", false},
        {"42", RPC_INVALID_REQUEST, "JSON object", false},
        {"{\"id\":1,\"method\":\"ping\"}", RPC_INVALID_REQUEST, "jsonrpc", true},
        {"{\"jsonrpc\":2,\"id\":1,\"method\":\"ping\"}", RPC_INVALID_REQUEST, "jsonrpc", true},
        {"{\"jsonrpc\":\"2.0\",\"id\":1}", RPC_INVALID_REQUEST, "method", true},
        {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\"}", RPC_INVALID_REQUEST, "method", true},
        {"{\"jsonrpc\":\"2.0\",\"id\":[1],\"method\":\"ping\"}", RPC_INVALID_REQUEST, "id", false},
        {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":\"x\"}", RPC_INVALID_REQUEST, "params", true},
        {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"zzz\":1}", RPC_INVALID_REQUEST, "zzz", true},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct rpc_request req;
        struct rpc_error err = {0};
        CHECK_EQ_INT(parse(cases[i].in, &req, &err), -1);
        CHECK_EQ_INT(err.code, cases[i].code);
        CHECK_CONTAINS(err.message, cases[i].msg);
        CHECK_EQ_INT(req.id != NULL, cases[i].has_id);
        rpc_request_free(&req);
    }
}

TEST(rpc_utf8_validation)
{
    CHECK_EQ_INT(utf8_invalid_at("plain", 5), -1);
    CHECK_EQ_INT(utf8_invalid_at("h\xc3\xa9llo", 6), -1);
    CHECK_EQ_INT(utf8_invalid_at("\xf0\x9f\x94\xa5", 4), -1);
    CHECK_EQ_INT(utf8_invalid_at("ab\xff", 3), 2);
    CHECK_EQ_INT(utf8_invalid_at("\xc3", 1), 0);          /* truncated */
    CHECK_EQ_INT(utf8_invalid_at("\xc0\xaf", 2), 0);      /* overlong */
    CHECK_EQ_INT(utf8_invalid_at("\xed\xa0\x80", 3), 0);  /* surrogate */
    CHECK_EQ_INT(utf8_invalid_at("\xf4\x90\x80\x80", 4), 0); /* > U+10FFFF */
    /* Past a long ASCII run (taken 8 bytes at a time): the fault's own
     * offset at each place of a word, and a character cut by the end. */
    char run[40];
    for (int at = 16; at < 24; at++) {
        memset(run, 'a', sizeof(run));
        run[at] = '\xff';
        CHECK_EQ_INT(utf8_invalid_at(run, sizeof(run)), at);
        memcpy(run + at, "\xc3\xa9", 2);
        CHECK_EQ_INT(utf8_invalid_at(run, sizeof(run)), -1);
        CHECK_EQ_INT(utf8_invalid_at(run, (size_t)at + 1), at);
    }
}

TEST(rpc_format_replies)
{
    size_t len;
    cJSON *id = cJSON_CreateNumber(5);
    char *r = rpc_format_result(id, cJSON_CreateObject(), &len);
    CHECK_STR(r, "{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{}}\n");
    CHECK_EQ_INT(len, strlen(r));
    free(r);
    r = rpc_format_error(NULL, RPC_METHOD_NOT_FOUND, "unknown method: x", NULL, &len);
    CHECK_STR(r, "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32601,\"message\":\"unknown method: x\"}}\n");
    free(r);
    cJSON_Delete(id);
}

/* Integer ids are printed by hand, the rest by cJSON: either way the id
 * reads back as the value the client sent. */
TEST(rpc_format_result_echoes_every_kind_of_id)
{
    static const struct {
        const char *id, *want;
    } cases[] = {
        {"0", "0"}, {"-7", "-7"}, {"4294967296", "4294967296"},
        {"9007199254740992", "9007199254740992"}, {"1e3", "1000"},
        {"2.5", "2.5"}, {"1e300", "1e+300"}, {"\"a\\\"b\"", "\"a\\\"b\""}, {"null", "null"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cJSON *id = cJSON_Parse(cases[i].id);
        CHECK(id != NULL);
        cJSON *res = cJSON_CreateObject();
        cJSON_AddNumberToObject(res, "n", 1);
        size_t len = 0;
        char *r = rpc_format_result(id, res, &len);
        char want[128];
        snprintf(want, sizeof(want), "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"n\":1}}\n",
                 cases[i].want);
        CHECK_STR(r, want);
        CHECK_EQ_INT(len, r ? strlen(r) : 0);
        cJSON *back = r ? cJSON_Parse(r) : NULL;
        CHECK(back && cJSON_Compare(cJSON_GetObjectItemCaseSensitive(back, "id"), id, 1));
        cJSON_Delete(back);
        free(r);
        cJSON_Delete(id);
    }
}

TEST(rpc_error_messages_never_cut_a_character)
{
    /* 63 ASCII bytes then a 2-byte character straddling the 64-byte clip. */
    char line[300];
    char name[80];
    memset(name, 'a', 63);
    memcpy(name + 63, "\xc3\xa9", 2);
    name[65] = 0;
    snprintf(line, sizeof(line), "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"%s\":1}", name);
    struct rpc_request req;
    struct rpc_error err = {0};
    CHECK_EQ_INT(rpc_parse(line, strlen(line), &req, &err), -1);
    CHECK_EQ_INT(utf8_invalid_at(err.message, strlen(err.message)), -1);
    CHECK_CONTAINS(err.message, ": unknown member");
    rpc_request_free(&req);
    CHECK_EQ_INT(utf8_clip("ab\xc3\xa9", 3), 2);
    CHECK_EQ_INT(utf8_clip("abc", 64), 3);
}

TEST(rpc_nul_escapes_refused)
{
    struct rpc_request req;
    struct rpc_error err = {0};
    const char *bad = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\\u0000junk\"}";
    CHECK_EQ_INT(rpc_parse(bad, strlen(bad), &req, &err), -1);
    CHECK_EQ_INT(err.code, RPC_PARSE_ERROR);
    CHECK_CONTAINS(err.message, "\\u0000");
    rpc_request_free(&req);
    /* An escaped backslash followed by the text u0000 is an ordinary string. */
    const char *ok = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\\\\u0000\"}";
    CHECK_EQ_INT(rpc_parse(ok, strlen(ok), &req, &err), 0);
    CHECK_STR(req.method, "a\\u0000");
    rpc_request_free(&req);
}

/* cJSON reads a \u without four hex digits as \u0000 and a raw NUL as the
 * end of the string: "a\u00zz-rest" would be taken as "a". Both refused. */
TEST(rpc_truncating_escapes_refused)
{
    static const struct {
        const char *line;
        size_t len;
        const char *why;
    } bad[] = {
        {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\\u00zz-rest\"}", 0, "hex digits"},
        {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\\u0X\"}", 0, "hex digits"},
        {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":{\"k\":\"\\u00\xc9\x98\"}}", 0,
         "hex digits"},
        {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\\u", 0, "hex digits"},
        {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\0rest\"}", 42, "NUL byte"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct rpc_request req;
        struct rpc_error err = {0};
        size_t len = bad[i].len ? bad[i].len : strlen(bad[i].line);
        CHECK_EQ_INT(rpc_parse(bad[i].line, len, &req, &err), -1);
        CHECK_EQ_INT(err.code, RPC_PARSE_ERROR);
        CHECK_CONTAINS(err.message, bad[i].why);
        rpc_request_free(&req);
    }
    /* Upper- and lower-case hex digits are both escapes. */
    struct rpc_request req;
    struct rpc_error err = {0};
    const char *ok = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\\u00E9\\u00e9\"}";
    CHECK_EQ_INT(rpc_parse(ok, strlen(ok), &req, &err), 0);
    CHECK_STR(req.method, "\xc3\xa9\xc3\xa9");
    rpc_request_free(&req);
}

/* The echo a handler returning its params would send: equal texts mean
 * the two parsers read the same id and params. */
static char *echo_reply(const struct rpc_request *req)
{
    cJSON *res = cJSON_CreateObject();
    if (req->params)
        cJSON_AddItemToObject(res, "params", cJSON_Duplicate(req->params, 1));
    size_t len;
    return rpc_format_result(req->id, res, &len);
}

/* Plain envelopes are read without a tree (root stays NULL); everything
 * else goes to the general parser. Either way each line is read exactly
 * as rpc_parse_general reads it. */
TEST(rpc_fast_path_reads_as_the_general_parser)
{
    static const struct {
        const char *in;
        bool fast;
    } cases[] = {
        {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", true},
        {" { \"method\" : \"status\" ,\t\"id\" : \"abc\" , \"jsonrpc\":\"2.0\" } \r", true},
        {"{\"jsonrpc\":\"2.0\",\"id\":-42,\"method\":\"ping\",\"params\":{}}", true},
        {"{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\",\"params\":null}", true},
        {"{\"jsonrpc\":\"2.0\",\"method\":\"ping\"}", true},
        {"{\"jsonrpc\":\"2.0\",\"id\":999999999999999,\"method\":\"version\"}", true},
        {"{\"jsonrpc\":\"2.0\",\"id\":1e3,\"method\":\"ping\"}", false},
        {"{\"jsonrpc\":\"2.0\",\"id\":2.5,\"method\":\"ping\"}", false},
        {"{\"jsonrpc\":\"2.0\",\"id\":-0,\"method\":\"ping\"}", false},
        {"{\"jsonrpc\":\"2.0\",\"id\":01,\"method\":\"ping\"}", false},
        {"{\"jsonrpc\":\"2.0\",\"id\":1234567890123456,\"method\":\"ping\"}", false},
        {"{\"jsonrpc\":\"2.0\",\"id\":\"a\\\"b\",\"method\":\"ping\"}", false},
        {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\\u0069ng\"}", false},
        {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"h\xc3\xa9\"}", false},
        {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"a\":1}}", false},
        {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":[]}", false},
        {"{\"jsonrpc\":\"2.0\",\"id\":1,\"id\":2,\"method\":\"ping\"}", false},
        {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"x\":1}", false},
        {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\"}", false},
        {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}x", false},
        {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",}", false},
        {"{\"jsonrpc\":\"2.0\",\"id\":1}", false},
        {"{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"ping\"}", false},
        {"{\"jsonrpc\":\"2.0\",\"id\":true,\"method\":\"ping\"}", false},
        {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"\x0b}", false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *in = cases[i].in;
        struct rpc_request a, b;
        struct rpc_error ea = {0}, eb = {0};
        int ra = rpc_parse(in, strlen(in), &a, &ea);
        int rb = rpc_parse_general(in, strlen(in), &b, &eb);
        CHECK_EQ_INT(ra, rb);
        CHECK_EQ_INT(ra == 0 && a.root == NULL, cases[i].fast);
        if (ra == 0 && rb == 0) {
            CHECK_STR(a.method, b.method);
            CHECK_EQ_INT(a.id == NULL, b.id == NULL);
            char *x = echo_reply(&a), *y = echo_reply(&b);
            CHECK_STR(x, y);
            free(x);
            free(y);
        } else {
            CHECK_EQ_INT(ea.code, eb.code);
            CHECK_STR(ea.message, eb.message);
        }
        rpc_request_free(&a);
        rpc_request_free(&b);
    }
}

TEST(rpc_error_from_a_struct_err)
{
    struct rpc_error r = {0};
    struct err e;
    err_unable(&e, ENOENT, "open %s", "/x");
    err_wrap(&e, "data");
    CHECK_EQ_INT(rpc_error_from(&r, RPC_INVALID_PARAMS, &e), -1);
    CHECK_EQ_INT(r.code, RPC_INVALID_PARAMS);
    CHECK_STR(r.message, "data: unable to open /x: No such file or directory");
    /* Cut to the reply's bound, still a C string. */
    memset(e.msg, 'a', sizeof(e.msg) - 1);
    e.msg[sizeof(e.msg) - 1] = '\0';
    rpc_error_from(&r, RPC_ERR_FAILED, &e);
    CHECK_EQ_INT(strlen(r.message), sizeof(r.message) - 1);
    /* No carrier: an empty message. */
    rpc_error_from(&r, RPC_ERR_FAILED, NULL);
    CHECK_STR(r.message, "");
}
