/* linebuf: a byte stream cut into bounded lines, socket-free (the
 * framing of the protocol's newline-delimited JSON, at both ends). */
#ifndef HEARTH_LINEBUF_H
#define HEARTH_LINEBUF_H

#include <stddef.h>

#include "bytebuf.h"

#define LINEBUF_CHUNK 65536     /* a linebuf grows by reads of this size */

struct linebuf {
    struct bytebuf b; /* its off is the first unconsumed byte */
    size_t scan;      /* newline search resumes here */
    size_t max;       /* longest line accepted */
};

void linebuf_init(struct linebuf *lb, size_t max);
void linebuf_free(struct linebuf *lb);
/* Room left for appending (after compaction); 0 means: stop reading. */
size_t linebuf_space(struct linebuf *lb);
/* Pointer to append at; at most linebuf_space() bytes, then commit. */
char *linebuf_tail(struct linebuf *lb);
void linebuf_commit(struct linebuf *lb, size_t n);
int linebuf_append(struct linebuf *lb, const char *data, size_t n);
/* Returns 1 with the next complete line (newline and trailing \r cut,
 * valid until the next linebuf call), 0 when none is complete yet, -1 when
 * the pending line is already longer than max (the stream is unusable). */
int linebuf_next(struct linebuf *lb, const char **line, size_t *len);
size_t linebuf_pending(const struct linebuf *lb);
/* With nothing pending, gives back a buffer that grew past one chunk (a
 * large request must not pin its memory for the connection's life). */
void linebuf_shrink(struct linebuf *lb);

#endif
