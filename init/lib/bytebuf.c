#include "bytebuf.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

size_t bytebuf_grown_cap(size_t cap, size_t first, size_t need, size_t limit)
{
    size_t c = cap ? cap : first;
    /* Doubling clamped at each step, so a large limit cannot overflow. */
    while (c < need && c < limit)
        c = c > limit / 2 ? limit : c * 2;
    return c < limit ? c : limit;
}

int bytebuf_resize(struct bytebuf *b, size_t cap)
{
    if (cap < b->len)
        return -1;
    char *nb = realloc(b->data, cap ? cap : 1);
    if (!nb)
        return -1;
    b->data = nb;
    b->cap = cap;
    return 0;
}

void bytebuf_compact(struct bytebuf *b)
{
    if (b->off == 0)
        return;
    memmove(b->data, b->data + b->off, b->len - b->off);
    b->len -= b->off;
    b->off = 0;
}

void bytebuf_put(struct bytebuf *b, const void *p, size_t n)
{
    if (n == 0)
        return;
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

void bytebuf_release(struct bytebuf *b)
{
    free(b->data);
    b->data = NULL;
    b->off = b->len = b->cap = 0;
}

int bytebuf_write(int fd, struct bytebuf *b)
{
    while (b->off < b->len) {
        ssize_t n = write(fd, b->data + b->off, b->len - b->off);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                return 0;
            return -1;
        }
        b->off += (size_t)n;
    }
    return 1;
}
