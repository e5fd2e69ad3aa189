#include "lines.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

int lines_each(const char *path, char *buf, size_t len,
               int (*fn)(char *line, bool whole, void *ctx), void *ctx)
{
    if (len < 2) {
        errno = EINVAL;
        return -1;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    /* buf[off, have) is text read and not yet handed out (a line of len - 1
     * bytes and its newline fill it, the newline becoming the NUL); skipping: the
     * tail of an overlong line is being read past. */
    size_t off = 0, have = 0;
    bool skipping = false, eof = false;
    int rc = 0;
    while (rc == 0) {
        char *line = buf + off, *nl = memchr(line, '\n', have - off);
        if (!nl && !eof) {
            /* Room first: the partial line to the front. */
            memmove(buf, line, have - off);
            have -= off;
            off = 0;
            if (have < len) {
                ssize_t r = read(fd, buf + have, len - have);
                if (r < 0 && errno == EINTR)
                    continue;
                if (r < 0) {
                    int e = errno;
                    close(fd);
                    errno = e;
                    return -1;
                }
                eof = r == 0;
                have += (size_t)r;
                continue;
            }
            line = buf;
        }
        if (!nl && have == off)
            break; /* the end, after a last line with its newline */
        /* A full buffer without a newline: a line of len - 1 bytes and a
         * NUL would not hold it; its head goes out, cut. */
        size_t n = nl ? (size_t)(nl - line) : have - off;
        bool whole = (nl || eof) && n < len;
        size_t used = nl ? n + 1 : n;
        if (n == len)
            n = len - 1;
        line[n] = 0;
        if (!skipping)
            rc = fn(line, whole, ctx);
        /* A line cut at the buffer: its rest is dropped up to the next
         * newline, not read as lines of its own. */
        skipping = !whole;
        off += used;
    }
    close(fd);
    return rc;
}
