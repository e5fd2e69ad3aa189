#include "kfile.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

ssize_t kfile_read(const char *path, char *buf, size_t len)
{
    if (len == 0) {
        errno = EINVAL;
        return -1;
    }
    buf[0] = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return -1;
    ssize_t n;
    do
        n = read(fd, buf, len - 1);
    while (n < 0 && errno == EINTR);
    int saved = errno;
    close(fd);
    errno = saved;
    if (n >= 0)
        buf[n] = 0;
    return n;
}

int kfile_write(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return -1;
    size_t len = strlen(text);
    ssize_t w = write(fd, text, len);
    int saved = errno;
    close(fd);
    if (w == (ssize_t)len)
        return 0;
    errno = w < 0 ? saved : EIO;
    return -1;
}
