/* m_files: the path handling every files.* method shares (absolute
 * paths resolved by safepath, parents opened without following links) and
 * the reading methods: files.stat, files.list, files.read, files.hash. */
#include "m_files.h"
#include "err.h"
#include "m_files_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cJSON.h>

#include "base64.h"
#include "params.h"
#include "safepath.h"
#include "sha256.h"
#include "utf8.h"

int m_files_get_path(cJSON *params, const char *name, struct fpath *p, struct rpc_error *err)
{
    const char *s = NULL;
    bool present;

    if (param_string(params, name, &s, &present, err) < 0)
        return -1;
    if (!present) {
        rpc_error_set(err, RPC_INVALID_PARAMS, "%s: required (an absolute path)", name);
        return -1;
    }
    p->param = name;
    p->abs = s;
    size_t len = strlen(s);
    if (s[0] != '/') {
        rpc_error_set(err, RPC_INVALID_PARAMS, "%s: expected an absolute path", name);
        return -1;
    }
    if (len >= PATH_MAX) {
        rpc_error_set(err, RPC_INVALID_PARAMS, "%s: longer than %d bytes", name, PATH_MAX - 1);
        return -1;
    }
    while (*s == '/')
        s++;
    snprintf(p->rel, sizeof(p->rel), "%s", *s ? s : ".");
    if (safepath_check(p->rel) < 0) {
        rpc_error_set(err, RPC_INVALID_PARAMS, "%s: %s", name,
                      errno == ENAMETOOLONG ? "a component is longer than 255 bytes"
                                            : "'..' components are not accepted");
        return -1;
    }
    return 0;
}

bool m_files_is_root(const struct fpath *p)
{
    return strspn(p->rel, "./") == strlen(p->rel);
}

/* "path: /a/b: why", with -32002 for a missing file. */
int m_files_path_error(struct rpc_error *err, const struct fpath *p, int e, const char *why)
{
    rpc_error_set(err, e == ENOENT ? RPC_ERR_NOT_FOUND : RPC_ERR_FAILED, "%s: %.*s: %s", p->param,
                  utf8_clip(p->abs, 160), p->abs, why && *why ? why : strerror(e));
    return -1;
}

int m_files_open_root(struct rpc_error *err)
{
    int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        rpc_error_set(err, RPC_ERR_FAILED, "unable to open /: %s", strerror(errno));
    return fd;
}

/* The parent directory of p, opened without following links, and its
 * last component in leaf (NAME_MAX + 1 bytes). */
int m_files_open_parent(const struct fpath *p, char *leaf, struct rpc_error *err)
{
    char dir[PATH_MAX];
    struct err why = {0};
    if (m_files_is_root(p)) {
        rpc_error_set(err, RPC_INVALID_PARAMS, "%s: not allowed on /", p->param);
        return -1;
    }
    if (safepath_split(p->rel, dir, leaf) < 0)
        return m_files_path_error(err, p, errno, NULL);
    int root = m_files_open_root(err);
    if (root < 0)
        return -1;
    int fd = safepath_open(root, dir, O_DIRECTORY, 0, &why);
    int e = errno;
    close(root);
    if (fd < 0)
        return m_files_path_error(err, p, e, e == ENOTDIR ? "a parent is not a directory" : why.msg);
    return fd;
}

static const char *type_name(mode_t m)
{
    return S_ISREG(m)    ? "file"
           : S_ISDIR(m)  ? "dir"
           : S_ISLNK(m)  ? "symlink"
           : S_ISFIFO(m) ? "fifo"
           : S_ISSOCK(m) ? "socket"
           : S_ISCHR(m)  ? "char"
           : S_ISBLK(m)  ? "block"
                         : "unknown";
}

const char *m_files_not_file(mode_t m)
{
    return S_ISDIR(m)    ? "a directory, not a regular file"
           : S_ISLNK(m)  ? "a symbolic link, not followed (follow: true reads its target)"
           : S_ISFIFO(m) ? "a FIFO, not a regular file"
           : S_ISSOCK(m) ? "a socket, not a regular file"
                         : "a device, not a regular file";
}

/* name with every byte that breaks UTF-8 replaced by U+FFFD, so the
 * reply stays valid JSON; *lossy tells whether anything was replaced. */
static cJSON *utf8_string(const char *s, bool *lossy)
{
    size_t len = strlen(s);
    long bad = utf8_invalid_at(s, len);
    *lossy = bad >= 0;
    if (bad < 0)
        return cJSON_CreateString(s);
    char *out = malloc(len * 3 + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    while (len) {
        bad = utf8_invalid_at(s, len);
        size_t good = bad < 0 ? len : (size_t)bad;
        memcpy(out + o, s, good);
        o += good, s += good, len -= good;
        if (len) {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3, s++, len--;
        }
    }
    out[o] = '\0';
    cJSON *j = cJSON_CreateString(out);
    free(out);
    return j;
}

static void add_stat(cJSON *o, const struct stat *st)
{
    char mode[8];
    snprintf(mode, sizeof(mode), "%04o", (unsigned)(st->st_mode & 07777));
    cJSON_AddStringToObject(o, "type", type_name(st->st_mode));
    cJSON_AddNumberToObject(o, "size", (double)st->st_size);
    cJSON_AddStringToObject(o, "mode", mode);
    cJSON_AddNumberToObject(o, "uid", (double)st->st_uid);
    cJSON_AddNumberToObject(o, "gid", (double)st->st_gid);
    cJSON_AddNumberToObject(o, "mtime_ms",
                            (double)st->st_mtim.tv_sec * 1000 + st->st_mtim.tv_nsec / 1000000);
}

int m_files_param_flag(cJSON *params, const char *name, bool *out, struct rpc_error *err)
{
    bool present;
    *out = false;
    return param_bool(params, name, out, &present, err);
}

/* ---- files.stat ---- */

int m_files_stat_now(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    static const char *const known[] = {"path", "follow", NULL};
    struct fpath p;
    struct stat st;
    bool follow;
    char leaf[NAME_MAX + 1], target[PATH_MAX];
    ssize_t tl = -1;

    if (params_only(params, known, err) < 0 || m_files_get_path(params, "path", &p, err) < 0 ||
        m_files_param_flag(params, "follow", &follow, err) < 0)
        return -1;
    if (follow) {
        if (stat(p.abs, &st) < 0)
            return m_files_path_error(err, &p, errno, NULL);
    } else if (m_files_is_root(&p)) {
        if (stat("/", &st) < 0)
            return m_files_path_error(err, &p, errno, NULL);
    } else {
        /* fstatat on the parent: the file itself is never opened, so a
         * FIFO or a device is described, not touched. */
        int dfd = m_files_open_parent(&p, leaf, err);
        if (dfd < 0)
            return -1;
        int rc = fstatat(dfd, leaf, &st, AT_SYMLINK_NOFOLLOW);
        int e = errno;
        if (rc == 0 && S_ISLNK(st.st_mode))
            tl = readlinkat(dfd, leaf, target, sizeof(target) - 1);
        close(dfd);
        if (rc < 0)
            return m_files_path_error(err, &p, e, NULL);
    }
    cJSON *r = cJSON_CreateObject();
    if (!r)
        return -1;
    cJSON_AddStringToObject(r, "path", p.abs);
    add_stat(r, &st);
    cJSON_AddNumberToObject(r, "nlink", (double)st.st_nlink);
    if (tl >= 0) {
        bool lossy;
        target[tl] = '\0';
        cJSON_AddItemToObject(r, "target", utf8_string(target, &lossy));
    }
    *result = r;
    return 0;
}

/* ---- files.list ---- */

struct fdirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

/* One page of a directory, read with getdents64 from "cursor" (the
 * d_off of the last entry returned before: the kernel's own position, so
 * a page costs the same however deep into a huge directory it is). */
int m_files_list_now(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    static const char *const known[] = {"path", "follow", "limit", "cursor", NULL};
    struct fpath p;
    bool follow, present;
    uint64_t limit = FILES_LIST_MAX;
    const char *cursor = NULL;
    long long pos = 0;
    struct err why = {0};

    if (params_only(params, known, err) < 0 || m_files_get_path(params, "path", &p, err) < 0 ||
        m_files_param_flag(params, "follow", &follow, err) < 0 ||
        param_uint(params, "limit", &limit, &present, err) < 0 ||
        param_string(params, "cursor", &cursor, &present, err) < 0)
        return -1;
    if (limit < 1 || limit > FILES_LIST_MAX) {
        rpc_error_set(err, RPC_INVALID_PARAMS, "limit: expected 1 to %d", FILES_LIST_MAX);
        return -1;
    }
    if (cursor) {
        char *end;
        errno = 0;
        pos = strtoll(cursor, &end, 10);
        if (!*cursor || *end || errno || pos < 0) {
            rpc_error_set(err, RPC_INVALID_PARAMS,
                          "cursor: expected the \"next\" string of the previous page");
            return -1;
        }
    }
    int fd;
    if (follow) {
        fd = open(p.abs, O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
            return m_files_path_error(err, &p, errno, errno == ENOTDIR ? "not a directory" : NULL);
    } else {
        int root = m_files_open_root(err);
        if (root < 0)
            return -1;
        fd = safepath_open(root, p.rel, O_DIRECTORY, 0, &why);
        int e = errno;
        close(root);
        if (fd < 0)
            return m_files_path_error(err, &p, e, e == ENOTDIR ? "not a directory" : why.msg);
    }
    if (pos && lseek(fd, (off_t)pos, SEEK_SET) < 0) {
        int e = errno;
        close(fd);
        rpc_error_set(err, RPC_INVALID_PARAMS, "cursor: %s", strerror(e));
        return -1;
    }
    cJSON *r = cJSON_CreateObject(), *ents = r ? cJSON_AddArrayToObject(r, "entries") : NULL;
    if (!ents) {
        cJSON_Delete(r);
        close(fd);
        return -1;
    }
    cJSON_AddStringToObject(r, "path", p.abs);
    /* Per call, not static: a page touched once would stay in hearth's
     * resident memory for good. */
    enum { DENTS_BUF = 32768 };
    char *buf = malloc(DENTS_BUF);
    if (!buf) {
        cJSON_Delete(r);
        close(fd);
        return -1;
    }
    uint64_t n = 0;
    long long last = pos;
    bool more = false, done = false;
    while (!done) {
        long got = syscall(SYS_getdents64, fd, buf, DENTS_BUF);
        if (got < 0) {
            int e = errno;
            free(buf);
            cJSON_Delete(r);
            close(fd);
            return m_files_path_error(err, &p, e, NULL);
        }
        if (got == 0)
            break;
        for (long off = 0; off < got;) {
            struct fdirent64 *d = (struct fdirent64 *)(buf + off);
            off += d->d_reclen;
            if (strcmp(d->d_name, ".") == 0 || strcmp(d->d_name, "..") == 0) {
                last = d->d_off;
                continue;
            }
            if (n == limit) {
                more = done = true;
                break;
            }
            struct stat st;
            cJSON *e = cJSON_CreateObject();
            bool lossy;
            if (!e) {
                free(buf);
                cJSON_Delete(r);
                close(fd);
                return -1;
            }
            cJSON_AddItemToArray(ents, e);
            cJSON_AddItemToObject(e, "name", utf8_string(d->d_name, &lossy));
            if (lossy)
                cJSON_AddBoolToObject(e, "lossy", 1);
            /* lstat by name beside the fd: nothing is opened or followed. */
            if (fstatat(fd, d->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
                add_stat(e, &st);
            else
                cJSON_AddStringToObject(e, "error", strerror(errno));
            last = d->d_off;
            n++;
        }
    }
    free(buf);
    close(fd);
    if (more) {
        char next[24];
        snprintf(next, sizeof(next), "%lld", last);
        cJSON_AddStringToObject(r, "next", next);
    } else {
        cJSON_AddNullToObject(r, "next");
    }
    *result = r;
    return 0;
}

/* ---- files.read, files.hash ---- */

/* Opens p for reading: a regular file only, checked before the open
 * (fstatat, so a FIFO or device is never opened at all) and again on the
 * fd by safepath. With follow, symbolic links are followed as open(2)
 * does and the fd is checked the same way. */
static int open_read(const struct fpath *p, bool follow, struct stat *st, struct rpc_error *err)
{
    char leaf[NAME_MAX + 1];
    struct err why = {0};
    int fd;

    if (follow) {
        if (stat(p->abs, st) < 0)
            return m_files_path_error(err, p, errno, NULL);
        if (!S_ISREG(st->st_mode))
            return m_files_path_error(err, p, EINVAL, m_files_not_file(st->st_mode));
        fd = open(p->abs, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
            return m_files_path_error(err, p, errno, NULL);
    } else {
        int dfd = m_files_open_parent(p, leaf, err);
        if (dfd < 0)
            return -1;
        if (fstatat(dfd, leaf, st, AT_SYMLINK_NOFOLLOW) < 0) {
            int e = errno;
            close(dfd);
            return m_files_path_error(err, p, e, NULL);
        }
        if (!S_ISREG(st->st_mode)) {
            close(dfd);
            return m_files_path_error(err, p, EINVAL, m_files_not_file(st->st_mode));
        }
        fd = safepath_open(dfd, leaf, O_RDONLY, 0, &why);
        int e = errno;
        close(dfd);
        if (fd < 0)
            return m_files_path_error(err, p, e, why.msg);
    }
    if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode)) {
        int e = errno;
        bool reg = S_ISREG(st->st_mode);
        close(fd);
        return m_files_path_error(err, p, reg ? e : EINVAL, reg ? NULL : m_files_not_file(st->st_mode));
    }
    return fd;
}

/* pread until len bytes or the end of the file; -1 with errno. */
static ssize_t read_full(int fd, uint8_t *buf, size_t len, uint64_t off)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(fd, buf + got, len - got, (off_t)(off + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0)
            break;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

static int range_params(cJSON *params, uint64_t *offset, uint64_t *length, uint64_t max,
                        struct rpc_error *err)
{
    bool present;
    *offset = 0;
    *length = max;
    if (param_uint(params, "offset", offset, &present, err) < 0 ||
        param_uint(params, "length", length, &present, err) < 0)
        return -1;
    if (*length > max) {
        rpc_error_set(err, RPC_INVALID_PARAMS, "length: at most %" PRIu64 " bytes per call", max);
        return -1;
    }
    if (*offset > (uint64_t)INT64_MAX - *length) {
        rpc_error_set(err, RPC_INVALID_PARAMS, "offset: too large");
        return -1;
    }
    return 0;
}

int m_files_read_now(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    static const char *const known[] = {"path", "follow", "offset", "length", NULL};
    struct fpath p;
    struct stat st;
    bool follow;
    uint64_t off, len;

    if (params_only(params, known, err) < 0 || m_files_get_path(params, "path", &p, err) < 0 ||
        m_files_param_flag(params, "follow", &follow, err) < 0 ||
        range_params(params, &off, &len, FILES_CHUNK_MAX, err) < 0)
        return -1;
    int fd = open_read(&p, follow, &st, err);
    if (fd < 0)
        return -1;
    uint8_t *buf = malloc(len ? len : 1);
    /* cJSON's allocator: the text becomes the "data" item's own string
     * below, not copied again (a chunk is 350 KiB of base64). */
    char *enc = cJSON_malloc((len + 2) / 3 * 4 + 1);
    ssize_t got = buf && enc ? read_full(fd, buf, len, off) : -1;
    int e = errno;
    close(fd);
    if (got < 0) {
        free(buf);
        cJSON_free(enc);
        if (!buf || !enc)
            return -1;
        return m_files_path_error(err, &p, e, e == EAGAIN ? "would block" : NULL);
    }
    base64_encode(buf, (size_t)got, enc);
    free(buf);
    cJSON *r = cJSON_CreateObject();
    cJSON *d = cJSON_CreateString("");
    if (!r || !d) {
        cJSON_Delete(r);
        cJSON_Delete(d);
        cJSON_free(enc);
        return -1;
    }
    cJSON_free(d->valuestring);
    d->valuestring = enc;
    cJSON_AddStringToObject(r, "path", p.abs);
    cJSON_AddNumberToObject(r, "offset", (double)off);
    cJSON_AddNumberToObject(r, "length", (double)got);
    cJSON_AddNumberToObject(r, "size", (double)st.st_size);
    /* A short read is the end; so is reaching the size, except where the
     * size says nothing (0 for most of /proc and /sys). */
    cJSON_AddBoolToObject(r, "eof", (uint64_t)got < len ||
                                        (st.st_size > 0 && off + (uint64_t)got >= (uint64_t)st.st_size));
    if (!cJSON_AddItemToObject(r, "data", d))
        cJSON_Delete(d);
    *result = r;
    return 0;
}

int m_files_hash_now(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    static const char *const known[] = {"path", "follow", "offset", "length", NULL};
    struct fpath p;
    struct stat st;
    struct sha256 h;
    bool follow;
    uint64_t off, len, done = 0;
    enum { HASH_BUF = 65536 };
    char hex[65];

    if (params_only(params, known, err) < 0 || m_files_get_path(params, "path", &p, err) < 0 ||
        m_files_param_flag(params, "follow", &follow, err) < 0 ||
        range_params(params, &off, &len, FILES_HASH_MAX, err) < 0)
        return -1;
    int fd = open_read(&p, follow, &st, err);
    if (fd < 0)
        return -1;
    uint8_t *buf = malloc(HASH_BUF);
    if (!buf) {
        close(fd);
        return -1;
    }
    sha256_init(&h);
    while (done < len) {
        size_t want = len - done < HASH_BUF ? (size_t)(len - done) : HASH_BUF;
        ssize_t got = read_full(fd, buf, want, off + done);
        if (got < 0) {
            int e = errno;
            free(buf);
            close(fd);
            return m_files_path_error(err, &p, e, NULL);
        }
        sha256_update(&h, buf, (size_t)got);
        done += (uint64_t)got;
        if ((size_t)got < want)
            break;
    }
    free(buf);
    close(fd);
    sha256_hex(&h, hex);
    cJSON *r = cJSON_CreateObject();
    if (!r)
        return -1;
    cJSON_AddStringToObject(r, "path", p.abs);
    cJSON_AddNumberToObject(r, "offset", (double)off);
    cJSON_AddNumberToObject(r, "length", (double)done);
    cJSON_AddNumberToObject(r, "size", (double)st.st_size);
    cJSON_AddBoolToObject(r, "eof", off + done >= (uint64_t)st.st_size);
    cJSON_AddStringToObject(r, "sha256", hex);
    *result = r;
    return 0;
}
