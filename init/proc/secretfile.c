#include "secretfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"
#include "safepath.h"
#include "tree.h"

static const char alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static bool blank(char c)
{
    return c == ' ' || c == '\t';
}

/* The value of one line (p..e, already known to set name) is non-empty. */
static bool value_nonempty(const char *p, const char *e)
{
    while (p < e && blank(*p))
        p++;
    while (e > p && (e[-1] == '\r' || blank(e[-1])))
        e--;
    if (p == e)
        return false;
    if (*p == '"' || *p == '\'')
        return e - p >= 2 && p[1] != *p;
    return true;
}

bool secretfile_has(const char *text, size_t len, const char *name)
{
    size_t nl = strlen(name), pos = 0;

    while (pos < len) {
        const char *p = text + pos, *eol = memchr(p, '\n', len - pos);
        const char *e = eol ? eol : text + len;
        pos = (size_t)(e - text) + 1;
        while (p < e && blank(*p))
            p++;
        if (e - p > 7 && strncmp(p, "export", 6) == 0 && blank(p[6])) {
            p += 7;
            while (p < e && blank(*p))
                p++;
        }
        if ((size_t)(e - p) <= nl || memcmp(p, name, nl) != 0)
            continue;
        p += nl;
        while (p < e && blank(*p))
            p++;
        if (p < e && *p == '=' && value_nonempty(p + 1, e))
            return true;
    }
    return false;
}

int secretfile_generate(char *out, size_t chars)
{
    unsigned char buf[SECRETFILE_CHARS_MAX];
    size_t got = 0;

    if (chars > sizeof(buf)) {
        errno = EINVAL;
        return -1;
    }
    /* Blocks only until the kernel's generator is first seeded, which
     * is why this runs in a child and never in hearth's loop. */
    while (got < chars) {
        ssize_t n = getrandom(buf + got, chars - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        got += (size_t)n;
    }
    for (size_t i = 0; i < chars; i++)
        out[i] = alphabet[buf[i] & 63];
    out[chars] = 0;
    explicit_bzero(buf, sizeof(buf));
    return 0;
}

static int failed(struct err *err, int e, const char *fmt, const char *arg)
{
    err_set(err, fmt, arg);
    errno = e;
    return -1;
}

/* Reads the whole (regular, already checked) file, bounded. */
static int read_bounded(int fd, char **out, size_t *len)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -1;
    if (st.st_size > SECRETFILE_MAX) {
        errno = EFBIG;
        return -1;
    }
    char *buf = malloc(SECRETFILE_MAX + 1);
    size_t n = 0;
    if (!buf)
        return -1;
    for (;;) {
        ssize_t r = read(fd, buf + n, SECRETFILE_MAX + 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            free(buf);
            errno = e;
            return -1;
        }
        if (r == 0)
            break;
        n += (size_t)r;
        if (n > SECRETFILE_MAX) {
            free(buf);
            errno = EFBIG;
            return -1;
        }
    }
    *out = buf;
    *len = n;
    return 0;
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* The new file's bytes: old, a newline when its last line has none,
 * then NAME=value and a newline. */
static char *compose(const char *old, size_t len, const char *name, const char *value, size_t *out)
{
    size_t nl = strlen(name), vl = strlen(value);
    bool fix = len && old[len - 1] != '\n';
    size_t total = len + (fix ? 1 : 0) + nl + 1 + vl + 1;
    char *b = malloc(total);
    if (!b)
        return NULL;
    size_t at = 0;
    if (len)
        memcpy(b, old, len);
    at = len;
    if (fix)
        b[at++] = '\n';
    memcpy(b + at, name, nl);
    at += nl;
    b[at++] = '=';
    memcpy(b + at, value, vl);
    at += vl;
    b[at++] = '\n';
    *out = at;
    return b;
}

/* Writes bytes to dfd/tmp (made new: whatever a previous attempt left
 * there is removed first, a link never followed) as uid:gid 0600, synced. */
static int write_temp(int dfd, const char *tmp, const char *bytes, size_t n, uid_t uid, gid_t gid,
                      struct err *err)
{
    struct err r;
    if (unlinkat(dfd, tmp, 0) < 0 && errno != ENOENT)
        return failed(err, errno, "unable to remove the old temporary file: %s",
                      strerror(errno));
    int fd = safepath_open(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL, 0600, &r);
    if (fd < 0)
        return failed(err, errno, "unable to create its temporary file: %s", r.msg);
    struct stat st;
    int e = 0;
    if (fstat(fd, &st) < 0 || ((st.st_uid != uid || st.st_gid != gid) && fchown(fd, uid, gid) < 0) ||
        fchmod(fd, 0600) < 0)
        e = errno;
    else if (write_all(fd, bytes, n) < 0 || fsync(fd) < 0)
        e = errno;
    if (close(fd) < 0 && !e && errno != EINTR)
        e = errno;
    if (e) {
        unlinkat(dfd, tmp, 0);
        return failed(err, e, "unable to write its temporary file: %s", strerror(e));
    }
    return 0;
}

/* attempt's answer when the file changed or appeared between the look
 * and the rename: look again. */
#define AGAIN 0

/* One look at the file and, when the line is missing, one write. */
static int attempt(int dfd, const char *leaf, const char *tmp, const char *name, unsigned chars,
                   uid_t uid, gid_t gid, struct err *err)
{
    char value[SECRETFILE_CHARS_MAX + 1];
    struct err r;
    char *old = NULL, *bytes = NULL;
    size_t len = 0, n = 0;
    struct stat before;

    int fd = safepath_open(dfd, leaf, O_RDONLY, 0, &r);
    if (fd < 0 && errno != ENOENT)
        return failed(err, errno, "%s", r.msg);
    bool exists = fd >= 0;
    if (exists) {
        int rc = fstat(fd, &before) < 0 ? -1 : read_bounded(fd, &old, &len);
        int e = errno;
        close(fd);
        if (rc < 0)
            return failed(err, e, "%s",
                          e == EFBIG ? "larger than 256 KiB, not an env file" : strerror(e));
        if (secretfile_has(old, len, name)) {
            free(old);
            return SECRETFILE_PRESENT;
        }
    }
    if (secretfile_generate(value, chars) < 0) {
        int e = errno;
        free(old);
        return failed(err, e, "no random bytes: %s", strerror(e));
    }
    bytes = compose(old, len, name, value, &n);
    explicit_bzero(value, sizeof(value));
    if (old)
        free(old);
    if (!bytes)
        return failed(err, ENOMEM, "%s", strerror(ENOMEM));
    int rc = write_temp(dfd, tmp, bytes, n, uid, gid, err);
    explicit_bzero(bytes, n);
    free(bytes);
    if (rc < 0)
        return -1;
    if (exists) {
        /* Replaced only if it is still the file that was read. */
        struct stat now;
        if (fstatat(dfd, leaf, &now, AT_SYMLINK_NOFOLLOW) < 0 || now.st_ino != before.st_ino ||
            now.st_dev != before.st_dev || now.st_size != before.st_size ||
            now.st_mtim.tv_sec != before.st_mtim.tv_sec ||
            now.st_mtim.tv_nsec != before.st_mtim.tv_nsec) {
            unlinkat(dfd, tmp, 0);
            return AGAIN;
        }
        rc = renameat(dfd, tmp, dfd, leaf);
    } else {
        rc = tree_rename_noreplace(dfd, tmp, leaf);
        if (rc < 0 && errno == EEXIST) {
            unlinkat(dfd, tmp, 0);
            return AGAIN;
        }
    }
    if (rc < 0) {
        int e = errno;
        unlinkat(dfd, tmp, 0);
        return failed(err, e, "unable to rename its temporary file: %s", strerror(e));
    }
    /* The rename itself made durable; a share may not sync directories. */
    if (fsync(dfd) < 0 && errno != EINVAL && errno != EROFS && errno != ENOSYS) {
        int e = errno;
        return failed(err, e, "unable to sync its directory: %s", strerror(e));
    }
    return SECRETFILE_GENERATED;
}

int secretfile_ensure(const char *path, const char *name, unsigned chars, uid_t uid, gid_t gid,
                      struct err *err)
{
    char dir[PATH_MAX], leaf[PATH_MAX], tmp[NAME_MAX + 1];
    struct err r;

    if (chars < 1 || chars > SECRETFILE_CHARS_MAX)
        return failed(err, EINVAL, "%s", "bad key length");
    if (path[0] != '/' || safepath_split(path + 1, dir + 1, leaf) < 0)
        return failed(err, path[0] != '/' ? EINVAL : errno, "%s",
                      "not an absolute path to a file");
    dir[0] = '/';
    if (strcmp(dir + 1, ".") == 0)
        dir[1] = 0;
    if (snprintf(tmp, sizeof(tmp), ".%s.hearth-new", leaf) >= (int)sizeof(tmp))
        return failed(err, ENAMETOOLONG, "%s", strerror(ENAMETOOLONG));
    int dfd = safepath_open_abs(dir, O_DIRECTORY, 0, &r);
    if (dfd < 0)
        return failed(err, errno, "its directory: %s", r.msg);
    int rc = AGAIN;
    /* Another writer between the look and the rename: look again, a few
     * times at most. */
    for (int i = 0; i < 4 && rc == AGAIN; i++)
        rc = attempt(dfd, leaf, tmp, name, chars, uid, gid, err);
    int e = errno;
    close(dfd);
    if (rc == AGAIN)
        return failed(err, EAGAIN, "%s", "the file kept changing while it was written");
    errno = e;
    return rc;
}
