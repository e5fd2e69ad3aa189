/* fuzz_http: the HTTP probe's response reader and status-line parser
 * (init/lib/http.c), which read whatever a service (or anything listening on
 * its port) answers.
 *
 * The first input byte picks the piece size (1..256) the rest is fed in,
 * as reads of a socket would split it; the same bytes are also fed whole,
 * and the target split runs on the input as a string.
 *
 * Checked beyond the sanitizers:
 *   - feed never reports using more than it was given, and HTTP_STATUS
 *     comes at most once, with a status 200..599 (interim 1xx skipped);
 *   - the result does not depend on how the bytes were split;
 *   - bounds hold: head bytes <= HTTP_HEAD_MAX, body bytes <= HTTP_BODY_MAX
 *     and <= Content-Length when one was given;
 *   - err and reason are terminated and printable ASCII;
 *   - an accepted target splits into pieces that join back into it. */
#include "http.h"

#include "err.h"
#include "fuzz_common.h"

struct outcome {
    enum http_progress last;
    int status;
    size_t body;
};

static void printable(const char *s, size_t cap, const char *what)
{
    FUZZ_CHECK(memchr(s, 0, cap) != NULL, "%s not terminated", what);
    for (const char *p = s; *p; p++)
        FUZZ_CHECK(*p >= 0x20 && *p < 0x7f, "unprintable byte 0x%02x in %s", (unsigned char)*p,
                   what);
}

static struct outcome run(const uint8_t *data, size_t size, size_t step)
{
    struct http_reader r;
    struct outcome o = {HTTP_MORE, 0, 0};
    size_t off = 0;
    int statuses = 0;

    http_reader_init(&r);
    while (off < size && o.last != HTTP_ERROR && o.last != HTTP_DONE) {
        size_t len = size - off < step ? size - off : step;
        do {
            size_t used = 0;
            o.last = http_reader_feed(&r, (const char *)data + off, len, &used);
            FUZZ_CHECK(used <= len, "used %zu of %zu", used, len);
            off += used;
            len -= used;
            if (o.last == HTTP_STATUS) {
                statuses++;
                FUZZ_CHECK(statuses == 1, "HTTP_STATUS twice");
                FUZZ_CHECK(r.status >= 200 && r.status <= 599, "status %d", r.status);
            }
        } while (len && o.last != HTTP_ERROR && o.last != HTTP_DONE);
    }
    if (o.last == HTTP_MORE || o.last == HTTP_STATUS)
        o.last = http_reader_eof(&r);
    FUZZ_CHECK(r.head_bytes <= HTTP_HEAD_MAX + 1, "head %zu", r.head_bytes);
    FUZZ_CHECK(r.body_bytes <= HTTP_BODY_MAX, "body %zu", r.body_bytes);
    FUZZ_CHECK(r.content_length < 0 || (int64_t)r.body_bytes <= r.content_length,
               "body %zu past Content-Length %lld", r.body_bytes, (long long)r.content_length);
    printable(r.err, sizeof(r.err), "err");
    printable(r.reason, sizeof(r.reason), "reason");
    if (o.last == HTTP_ERROR)
        FUZZ_CHECK(r.err[0], "error without a reason");
    o.status = o.last == HTTP_ERROR ? 0 : r.status;
    o.body = r.body_bytes;
    return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t step = (size_t)data[0] + 1;
    struct outcome a = run(data + 1, size - 1, step);
    struct outcome b = run(data + 1, size - 1, size);
    FUZZ_CHECK(a.last == b.last && a.status == b.status && a.body == b.body,
               "split at %zu: %d/%d/%zu whole: %d/%d/%zu", step, a.last, a.status, a.body, b.last,
               b.status, b.body);

    int st;
    char reason[64];
    if (http_status_line((const char *)data + 1, size - 1, &st, reason, sizeof(reason)) == 0) {
        FUZZ_CHECK(st >= 100 && st <= 599, "status %d", st);
        printable(reason, sizeof(reason), "reason");
    }

    char *s = fuzz_strndup(data + 1, size - 1);
    char hp[256], path[256], joined[600];
    struct err err;
    if (http_target_split(s, hp, sizeof(hp), path, sizeof(path), &err) == 0) {
        FUZZ_CHECK(path[0] == '/', "path %s", path);
        snprintf(joined, sizeof(joined), "%s%s", hp, strcmp(path, "/") == 0 && !strchr(s + strlen(hp), '/') ? "" : path);
        FUZZ_CHECK(strcmp(joined, s) == 0, "%s split as %s + %s", s, hp, path);
        char req[HTTP_REQUEST_MAX];
        FUZZ_CHECK(http_request(req, sizeof(req), hp, path) > 0, "request for %s does not fit", s);
    } else {
        printable(err.msg, sizeof(err.msg), "err");
    }
    free(s);
    return 0;
}
