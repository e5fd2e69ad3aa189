/* lines: a text file read line by line through one caller-given buffer
 * (/proc/self/mountinfo, modules.dep), with plain read(2): no stdio, and
 * a bound on memory whatever the file holds. */
#ifndef HEARTH_LINES_H
#define HEARTH_LINES_H

#include <stdbool.h>
#include <stddef.h>

/* Calls fn with each line of path, its newline replaced by a NUL, and
 * whole true. A line longer than len - 1 bytes comes once, as its first
 * len - 1 bytes with whole false, and its rest is skipped. A non-zero
 * return from fn stops the walk and is returned. Returns 0 at the end of
 * the file, or -1 with errno when it cannot be opened or read. */
int lines_each(const char *path, char *buf, size_t len,
               int (*fn)(char *line, bool whole, void *ctx), void *ctx);

#endif
