#include "linebuf.h"

#include <string.h>

void linebuf_init(struct linebuf *lb, size_t max)
{
    memset(lb, 0, sizeof(*lb));
    lb->max = max;
}

void linebuf_free(struct linebuf *lb)
{
    bytebuf_release(&lb->b);
    memset(lb, 0, sizeof(*lb));
}

size_t linebuf_pending(const struct linebuf *lb) { return bytebuf_pending(&lb->b); }

void linebuf_shrink(struct linebuf *lb)
{
    if (bytebuf_pending(&lb->b) != 0 || lb->b.cap <= LINEBUF_CHUNK)
        return;
    bytebuf_release(&lb->b);
    lb->scan = 0;
}

/* The buffer never holds more than one maximal line plus one read chunk,
 * so a peer can make hearth hold at most max + 64 KiB per connection. */
size_t linebuf_space(struct linebuf *lb)
{
    struct bytebuf *b = &lb->b;
    size_t limit = lb->max + 2 + LINEBUF_CHUNK;

    /* Consumed data is dropped once it is half the buffer, fills it, or
     * is all there is: without the last case a short request left less
     * than a chunk behind it and every request doubled the buffer (which
     * linebuf_shrink then freed). */
    if (b->off > 0 && (b->off == b->len || b->off >= b->cap / 2 || b->len == b->cap)) {
        lb->scan -= b->off;
        bytebuf_compact(b);
    }
    if (bytebuf_pending(b) >= limit)
        return 0;
    /* A failed growth only means less room this time. */
    if (bytebuf_room(b) < LINEBUF_CHUNK && b->cap < limit)
        (void)bytebuf_resize(b, bytebuf_grown_cap(b->cap, LINEBUF_CHUNK, b->cap + 1, limit));
    return bytebuf_room(b);
}

char *linebuf_tail(struct linebuf *lb) { return bytebuf_tail(&lb->b); }
void linebuf_commit(struct linebuf *lb, size_t n) { lb->b.len += n; }

int linebuf_append(struct linebuf *lb, const char *data, size_t n)
{
    while (n > 0) {
        size_t room = linebuf_space(lb);
        if (room == 0)
            return -1;
        size_t k = n < room ? n : room;
        bytebuf_put(&lb->b, data, k);
        data += k;
        n -= k;
    }
    return 0;
}

int linebuf_next(struct linebuf *lb, const char **line, size_t *len)
{
    struct bytebuf *b = &lb->b;
    if (lb->scan < b->off)
        lb->scan = b->off;
    char *nl = b->len > lb->scan ? memchr(b->data + lb->scan, '\n', b->len - lb->scan) : NULL;
    if (!nl) {
        lb->scan = b->len;
        return bytebuf_pending(b) > lb->max ? -1 : 0;
    }
    size_t n = (size_t)(nl - bytebuf_head(b));
    if (n > lb->max)
        return -1;
    *line = bytebuf_head(b);
    *len = n;
    if (n > 0 && b->data[b->off + n - 1] == '\r')
        (*len)--;
    b->off += n + 1;
    lb->scan = b->off;
    return 1;
}
