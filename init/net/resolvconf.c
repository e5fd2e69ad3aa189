#include "resolvconf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"
#include "safepath.h"

static size_t text(const char (*dns)[64], size_t n, char *buf, size_t cap)
{
    size_t len = 0;
    for (size_t i = 0; i < n && i < RESOLVCONF_MAX && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "nameserver %s\n", dns[i]);
    return len < cap ? len : cap - 1;
}

/* The temp name sits beside resolv.conf, where an agent may have put a
 * FIFO, a link or a directory: it is created O_EXCL beneath the
 * directory's fd (safepath: never followed, never blocking), a stale one
 * is unlinked first (unlink removes a link or FIFO itself), and the
 * rename goes by that fd. */
int resolvconf_write(const char *path, const char (*dns)[64], size_t n, struct err *err)
{
    char tmp[300], buf[RESOLVCONF_MAX * 80], dir[256];
    struct err why;
    const char *slash = strrchr(path, '/');
    size_t len = text(dns, n, buf, sizeof(buf));
    if (!slash || !slash[1]) {
        errno = EINVAL;
        goto fail;
    }
    snprintf(dir, sizeof(dir), "%.*s", (int)(slash > path ? slash - path : 1), path);
    const char *name = slash + 1;
    snprintf(tmp, sizeof(tmp), "%s.hearth-tmp", name);
    int dfd = safepath_open_abs(dir, O_DIRECTORY, 0, &why);
    if (dfd < 0)
        goto fail_why;
    if (unlinkat(dfd, tmp, 0) < 0 && errno == EISDIR)
        unlinkat(dfd, tmp, AT_REMOVEDIR);
    int fd = safepath_open(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL, 0644, &why);
    if (fd < 0) {
        close(dfd);
        return err_set(err, "%s: unable to create %s/%s: %s", path, dir, tmp, why.msg);
    }
    ssize_t w = write(fd, buf, len);
    if (w != (ssize_t)len || fchmod(fd, 0644) < 0 || fsync(fd) < 0) {
        if (w >= 0 && w != (ssize_t)len)
            errno = EIO;
        int e = errno;
        close(fd);
        unlinkat(dfd, tmp, 0);
        close(dfd);
        errno = e;
        goto fail;
    }
    close(fd);
    /* rename: readers see the old file or the new one, never half. */
    if (renameat(dfd, tmp, dfd, name) < 0) {
        int e = errno;
        unlinkat(dfd, tmp, 0);
        close(dfd);
        errno = e;
        goto fail;
    }
    close(dfd);
    return 0;
fail_why:
    err_set(err, "%s: %s", path, why.msg);
    return -1;
fail:
    err_set(err, "%s: %s", path, strerror(errno));
    return -1;
}

/* Read through safepath (an agent may have put a FIFO or a link there),
 * at most one byte more than expected. */
bool resolvconf_matches(const char *path, const char (*dns)[64], size_t n)
{
    char want[RESOLVCONF_MAX * 80], got[RESOLVCONF_MAX * 80 + 1];
    struct err why;
    size_t wl = text(dns, n, want, sizeof(want));
    int fd = safepath_open_abs(path, O_RDONLY, 0, &why);
    if (fd < 0)
        return false;
    ssize_t r, total = 0;
    while (total < (ssize_t)sizeof(got) &&
           (r = read(fd, got + total, sizeof(got) - (size_t)total)) != 0) {
        if (r < 0) {
            if (errno == EINTR)
                continue;
            total = -1;
            break;
        }
        total += r;
    }
    close(fd);
    return total == (ssize_t)wl && memcmp(got, want, wl) == 0;
}

