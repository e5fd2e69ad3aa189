/* bytebuf: a growable run of bytes consumed from the front: the storage
 * under rpc.c's line reader, each control client's output queue, a child
 * job's result, an exec process's pending stdin and hearthctl exec's
 * requests. It keeps no bound of its own: each owner passes its limit to
 * bytebuf_grown_cap and checks its budget before bytebuf_resize, because
 * they grow differently on purpose (by read chunks up to one line, to
 * what a queue must hold under a budget shared by all clients, up to a
 * job's result limit). */
#ifndef HEARTH_BYTEBUF_H
#define HEARTH_BYTEBUF_H

#include <stddef.h>

struct bytebuf {
    char *data;
    size_t off; /* first unconsumed byte */
    size_t len; /* end of the bytes held */
    size_t cap;
};

static inline size_t bytebuf_pending(const struct bytebuf *b) { return b->len - b->off; }
static inline char *bytebuf_head(const struct bytebuf *b) { return b->data + b->off; }
static inline char *bytebuf_tail(const struct bytebuf *b) { return b->data + b->len; }
static inline size_t bytebuf_room(const struct bytebuf *b) { return b->cap - b->len; }

/* The capacity a buffer of cap grows to so that it holds need bytes:
 * first when it has none yet, else doubled as often as needed, never
 * past limit (so the result may be short of need: the caller checks). */
size_t bytebuf_grown_cap(size_t cap, size_t first, size_t need, size_t limit);
/* Reallocates to exactly cap bytes (at least len). Returns 0, or -1 when
 * memory is short, with the buffer as it was. */
int bytebuf_resize(struct bytebuf *b, size_t cap);
/* Moves the unconsumed bytes to the front. */
void bytebuf_compact(struct bytebuf *b);
/* Copies n bytes in after the held ones; they must fit (bytebuf_room). */
void bytebuf_put(struct bytebuf *b, const void *p, size_t n);
/* Frees the storage: empty, no capacity. */
void bytebuf_release(struct bytebuf *b);
/* Writes the unconsumed bytes to a non-blocking fd as far as it takes
 * them now, consuming what it took. Returns 1 when all are written, 0
 * when the rest must wait until fd is writable, -1 on an error (errno). */
int bytebuf_write(int fd, struct bytebuf *b);

#endif
