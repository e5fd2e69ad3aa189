/* The pure half of the HTTP probe: targets, requests and the response
 * reader, fed whole and byte by byte. */
#include <string.h>

#include "http.h"
#include "err.h"
#include "unit.h"

/* Feeds s in pieces of step bytes; returns the first status reached
 * after the head (HTTP_STATUS is remembered in *status_seen). */
static enum http_progress feed_all(struct http_reader *r, const char *s, size_t step,
                                   bool *status_seen)
{
    size_t n = strlen(s), off = 0;
    enum http_progress pr = HTTP_MORE;

    *status_seen = false;
    while (off < n) {
        size_t len = n - off < step ? n - off : step, used;
        const char *p = s + off;
        do {
            pr = http_reader_feed(r, p, len, &used);
            p += used;
            len -= used;
            off += used;
            if (pr == HTTP_STATUS)
                *status_seen = true;
            if (pr == HTTP_ERROR || pr == HTTP_DONE)
                return pr;
        } while (len || pr == HTTP_STATUS);
    }
    return pr;
}

TEST(http_status_line_parsing)
{
    int st = 0;
    char reason[64];

    CHECK_EQ_INT(http_status_line("HTTP/1.1 200 OK", 15, &st, reason, sizeof(reason)), 0);
    CHECK_EQ_INT(st, 200);
    CHECK_STR(reason, "OK");
    CHECK_EQ_INT(http_status_line("HTTP/1.0 503 Service Unavailable", 32, &st, reason,
                                  sizeof(reason)), 0);
    CHECK_EQ_INT(st, 503);
    CHECK_STR(reason, "Service Unavailable");
    CHECK_EQ_INT(http_status_line("HTTP/1.1 204", 12, &st, reason, sizeof(reason)), 0);
    CHECK_EQ_INT(st, 204);
    CHECK_STR(reason, "");
    CHECK_EQ_INT(http_status_line("HTTP/1.1 2000 OK", 16, &st, reason, sizeof(reason)), -1);
    CHECK_EQ_INT(http_status_line("HTTP/1.1 099 X", 14, &st, reason, sizeof(reason)), -1);
    CHECK_EQ_INT(http_status_line("HTTP/1.1 600 X", 14, &st, reason, sizeof(reason)), -1);
    CHECK_EQ_INT(http_status_line("HTTP/2 200 OK", 13, &st, reason, sizeof(reason)), -1);
    CHECK_EQ_INT(http_status_line("SSH-2.0-OpenSSH", 15, &st, reason, sizeof(reason)), -1);
    CHECK_EQ_INT(http_status_line("HTTP/1.1 2x0 OK", 15, &st, reason, sizeof(reason)), -1);
    CHECK_EQ_INT(http_status_line("HTTP/1.1", 8, &st, reason, sizeof(reason)), -1);
    /* An unprintable reason is shown safely. */
    CHECK_EQ_INT(http_status_line("HTTP/1.1 200 O\x01K", 16, &st, reason, sizeof(reason)), 0);
    CHECK_STR(reason, "O?K");
}

TEST(http_target_split_and_request)
{
    char hp[256], path[256], req[HTTP_REQUEST_MAX];
    struct err err;

    CHECK_EQ_INT(http_target_split("127.0.0.1:8642/health", hp, sizeof(hp), path, sizeof(path),
                                   &err), 0);
    CHECK_STR(hp, "127.0.0.1:8642");
    CHECK_STR(path, "/health");
    CHECK_EQ_INT(http_target_split("[::1]:80", hp, sizeof(hp), path, sizeof(path), &err), 0);
    CHECK_STR(hp, "[::1]:80");
    CHECK_STR(path, "/");
    CHECK_EQ_INT(http_target_split("/x", hp, sizeof(hp), path, sizeof(path), &err), -1);
    CHECK_EQ_INT(http_target_split("h:1/a\tb", hp, sizeof(hp), path, sizeof(path), &err), -1);
    CHECK_CONTAINS(err.msg, "path byte 2");
    char longp[300] = "h:1/";
    memset(longp + 4, 'a', 250);
    longp[254] = 0;
    CHECK_EQ_INT(http_target_split(longp, hp, sizeof(hp), path, sizeof(path), &err), -1);
    CHECK_CONTAINS(err.msg, "path longer than");
    size_t n = http_request(req, sizeof(req), "127.0.0.1:8642", "/health");
    CHECK(n > 0);
    CHECK_STR(req, "GET /health HTTP/1.1\r\nHost: 127.0.0.1:8642\r\nUser-Agent: hearth-probe\r\n"
                   "Accept: */*\r\nConnection: close\r\n\r\n");
    CHECK_EQ_INT((int)http_request(req, 10, "127.0.0.1:8642", "/health"), 0);
}

TEST(http_reader_answers)
{
    static const size_t steps[] = {1, 3, 4096};
    for (size_t k = 0; k < sizeof(steps) / sizeof(steps[0]); k++) {
        struct http_reader r;
        bool seen;

        http_reader_init(&r);
        CHECK_EQ_INT(feed_all(&r, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", steps[k],
                              &seen), HTTP_DONE);
        CHECK(seen);
        CHECK_EQ_INT(r.status, 200);
        CHECK_EQ_INT((int)r.body_bytes, 5);

        /* No length: the body ends at EOF. */
        http_reader_init(&r);
        CHECK_EQ_INT(feed_all(&r, "HTTP/1.0 200 OK\nServer: x\n\nsome body", steps[k], &seen),
                     HTTP_MORE);
        CHECK(seen);
        CHECK_EQ_INT(http_reader_eof(&r), HTTP_DONE);

        http_reader_init(&r);
        CHECK_EQ_INT(feed_all(&r, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n",
                              steps[k], &seen), HTTP_DONE);
        CHECK_EQ_INT(r.status, 503);
        CHECK_STR(r.reason, "Service Unavailable");

        /* An interim 100 is skipped. */
        http_reader_init(&r);
        CHECK_EQ_INT(feed_all(&r, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
                              steps[k], &seen), HTTP_DONE);
        CHECK_EQ_INT(r.status, 204);

        http_reader_init(&r);
        CHECK_EQ_INT(feed_all(&r, "garbage\r\n", steps[k], &seen), HTTP_ERROR);
        CHECK_STR(r.err, "bad status line \"garbage\"");

        http_reader_init(&r);
        CHECK_EQ_INT(feed_all(&r, "HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", steps[k], &seen),
                     HTTP_ERROR);
        CHECK_CONTAINS(r.err, "bad header line");

        http_reader_init(&r);
        CHECK_EQ_INT(feed_all(&r, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                              steps[k], &seen), HTTP_ERROR);
        CHECK_CONTAINS(r.err, "conflicting Content-Length");

        /* Closed early. */
        http_reader_init(&r);
        CHECK_EQ_INT(http_reader_eof(&r), HTTP_ERROR);
        CHECK_STR(r.err, "connection closed without an answer");
        http_reader_init(&r);
        feed_all(&r, "HTTP/1.1 20", steps[k], &seen);
        CHECK_EQ_INT(http_reader_eof(&r), HTTP_ERROR);
        CHECK_STR(r.err, "connection closed inside the status line");
        http_reader_init(&r);
        feed_all(&r, "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc", steps[k], &seen);
        CHECK_EQ_INT(http_reader_eof(&r), HTTP_ERROR);
        CHECK_CONTAINS(r.err, "after 3 of 9 body bytes");
    }
}

TEST(http_reader_bounds)
{
    struct http_reader r;
    static char big[HTTP_HEAD_MAX + 64];
    bool seen;

    /* A status line that never ends. */
    memset(big, 'A', sizeof(big) - 1);
    big[sizeof(big) - 1] = 0;
    http_reader_init(&r);
    CHECK_EQ_INT(feed_all(&r, big, 4096, &seen), HTTP_ERROR);
    CHECK_CONTAINS(r.err, "status line too long");

    /* Endless short headers. */
    size_t o = (size_t)snprintf(big, sizeof(big), "HTTP/1.1 200 OK\r\n");
    while (o + 8 < sizeof(big) - 1)
        o += (size_t)snprintf(big + o, sizeof(big) - o, "X: y\r\n");
    http_reader_init(&r);
    CHECK_EQ_INT(feed_all(&r, big, 4096, &seen), HTTP_ERROR);
    CHECK_CONTAINS(r.err, "longer than 16384 bytes");

    /* A body past the bound is counted to the bound, then done. */
    http_reader_init(&r);
    CHECK_EQ_INT(feed_all(&r, "HTTP/1.1 200 OK\r\n\r\n", 64, &seen), HTTP_MORE);
    size_t total = 0, used;
    enum http_progress pr = HTTP_MORE;
    memset(big, 'b', 4096);
    while (pr == HTTP_MORE && total < 10 * HTTP_BODY_MAX) {
        pr = http_reader_feed(&r, big, 4096, &used);
        total += used;
    }
    CHECK_EQ_INT(pr, HTTP_DONE);
    CHECK_EQ_INT((int)r.body_bytes, HTTP_BODY_MAX);
}
