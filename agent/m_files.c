#include "m_files.h"

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
#include <unistd.h>

#include <cJSON.h>

#include "base64.h"
#include "params.h"
#include "safepath.h"
#include "sha256.h"
#include "timebase.h"
#include "utf8.h"

#ifndef SYS_renameat2
#define SYS_renameat2 316
#endif
#define F_RENAME_NOREPLACE 1

/* A path parameter: the text as given (for messages) and the same path
 * relative to "/" for safepath ("." for "/" itself). */
struct fpath {
    const char *param; /* "path", "from", "to" */
    const char *abs;
    char rel[PATH_MAX];
};

static int get_path(cJSON *params, const char *name, struct fpath *p, struct rpc_error *err)
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

static bool is_root(const struct fpath *p)
{
    return strspn(p->rel, "./") == strlen(p->rel);
}

/* "path: /a/b: why", with -32002 for a missing file. */
static int path_error(struct rpc_error *err, const struct fpath *p, int e, const char *why)
{
    rpc_error_set(err, e == ENOENT ? RPC_ERR_NOT_FOUND : RPC_ERR_FAILED, "%s: %.*s: %s", p->param,
                  utf8_clip(p->abs, 160), p->abs, why && *why ? why : strerror(e));
    return -1;
}

static int open_root(struct rpc_error *err)
{
    int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        rpc_error_set(err, RPC_ERR_FAILED, "unable to open /: %s", strerror(errno));
    return fd;
}

/* The parent directory of p, opened without following links, and its
 * last component in leaf (NAME_MAX + 1 bytes). */
static int open_parent(const struct fpath *p, char *leaf, struct rpc_error *err)
{
    char dir[PATH_MAX], why[128] = "";
    if (is_root(p)) {
        rpc_error_set(err, RPC_INVALID_PARAMS, "%s: not allowed on /", p->param);
        return -1;
    }
    if (safepath_split(p->rel, dir, leaf) < 0)
        return path_error(err, p, errno, NULL);
    int root = open_root(err);
    if (root < 0)
        return -1;
    int fd = safepath_open(root, dir, O_DIRECTORY, 0, why, sizeof(why));
    int e = errno;
    close(root);
    if (fd < 0)
        return path_error(err, p, e, e == ENOTDIR ? "a parent is not a directory" : why);
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

static const char *not_file(mode_t m)
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

/* "mode": 420 or "0644"; permission bits only (07777). */
static int param_mode(cJSON *params, mode_t *out, bool *present, struct rpc_error *err)
{
    cJSON *v = cJSON_GetObjectItemCaseSensitive(params, "mode");
    *present = v != NULL;
    if (!v)
        return 0;
    long m = -1;
    if (cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble <= 07777 &&
        v->valuedouble == (double)(long)v->valuedouble) {
        m = (long)v->valuedouble;
    } else if (cJSON_IsString(v) && v->valuestring[0] && strlen(v->valuestring) <= 5 &&
               strspn(v->valuestring, "01234567") == strlen(v->valuestring)) {
        m = strtol(v->valuestring, NULL, 8);
    }
    if (m < 0 || m > 07777) {
        rpc_error_set(err, RPC_INVALID_PARAMS,
                      "mode: expected permission bits, an octal string (\"0644\") or a number up to 4095");
        return -1;
    }
    *out = (mode_t)m;
    return 0;
}

/* "uid" / "gid": up to 2^32 - 2 ((uid_t)-1 means "unchanged" to chown). */
static int param_id(cJSON *params, const char *name, unsigned *out, bool *present,
                    struct rpc_error *err)
{
    uint64_t v;
    if (param_uint(params, name, &v, present, err) < 0)
        return -1;
    if (*present && v >= 0xffffffffu) {
        rpc_error_set(err, RPC_INVALID_PARAMS, "%s: expected a number below 4294967295", name);
        return -1;
    }
    if (*present)
        *out = (unsigned)v;
    return 0;
}

static int param_flag(cJSON *params, const char *name, bool *out, struct rpc_error *err)
{
    bool present;
    *out = false;
    return param_bool(params, name, out, &present, err);
}

/* ---- files.stat ---- */

int m_files_stat(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    static const char *const known[] = {"path", "follow", NULL};
    struct fpath p;
    struct stat st;
    bool follow;
    char leaf[NAME_MAX + 1], target[PATH_MAX];
    ssize_t tl = -1;

    if (params_only(params, known, err) < 0 || get_path(params, "path", &p, err) < 0 ||
        param_flag(params, "follow", &follow, err) < 0)
        return -1;
    if (follow) {
        if (stat(p.abs, &st) < 0)
            return path_error(err, &p, errno, NULL);
    } else if (is_root(&p)) {
        if (stat("/", &st) < 0)
            return path_error(err, &p, errno, NULL);
    } else {
        /* fstatat on the parent: the file itself is never opened, so a
         * FIFO or a device is described, not touched. */
        int dfd = open_parent(&p, leaf, err);
        if (dfd < 0)
            return -1;
        int rc = fstatat(dfd, leaf, &st, AT_SYMLINK_NOFOLLOW);
        int e = errno;
        if (rc == 0 && S_ISLNK(st.st_mode))
            tl = readlinkat(dfd, leaf, target, sizeof(target) - 1);
        close(dfd);
        if (rc < 0)
            return path_error(err, &p, e, NULL);
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
int m_files_list(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    static const char *const known[] = {"path", "follow", "limit", "cursor", NULL};
    struct fpath p;
    bool follow, present;
    uint64_t limit = FILES_LIST_MAX;
    const char *cursor = NULL;
    long long pos = 0;
    char why[128] = "";

    if (params_only(params, known, err) < 0 || get_path(params, "path", &p, err) < 0 ||
        param_flag(params, "follow", &follow, err) < 0 ||
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
            return path_error(err, &p, errno, errno == ENOTDIR ? "not a directory" : NULL);
    } else {
        int root = open_root(err);
        if (root < 0)
            return -1;
        fd = safepath_open(root, p.rel, O_DIRECTORY, 0, why, sizeof(why));
        int e = errno;
        close(root);
        if (fd < 0)
            return path_error(err, &p, e, e == ENOTDIR ? "not a directory" : why);
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
            return path_error(err, &p, e, NULL);
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
    char leaf[NAME_MAX + 1], why[128] = "";
    int fd;

    if (follow) {
        if (stat(p->abs, st) < 0)
            return path_error(err, p, errno, NULL);
        if (!S_ISREG(st->st_mode))
            return path_error(err, p, EINVAL, not_file(st->st_mode));
        fd = open(p->abs, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
            return path_error(err, p, errno, NULL);
    } else {
        int dfd = open_parent(p, leaf, err);
        if (dfd < 0)
            return -1;
        if (fstatat(dfd, leaf, st, AT_SYMLINK_NOFOLLOW) < 0) {
            int e = errno;
            close(dfd);
            return path_error(err, p, e, NULL);
        }
        if (!S_ISREG(st->st_mode)) {
            close(dfd);
            return path_error(err, p, EINVAL, not_file(st->st_mode));
        }
        fd = safepath_open(dfd, leaf, O_RDONLY, 0, why, sizeof(why));
        int e = errno;
        close(dfd);
        if (fd < 0)
            return path_error(err, p, e, why);
    }
    if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode)) {
        int e = errno;
        bool reg = S_ISREG(st->st_mode);
        close(fd);
        return path_error(err, p, reg ? e : EINVAL, reg ? NULL : not_file(st->st_mode));
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

int m_files_read(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    static const char *const known[] = {"path", "follow", "offset", "length", NULL};
    struct fpath p;
    struct stat st;
    bool follow;
    uint64_t off, len;

    if (params_only(params, known, err) < 0 || get_path(params, "path", &p, err) < 0 ||
        param_flag(params, "follow", &follow, err) < 0 ||
        range_params(params, &off, &len, FILES_CHUNK_MAX, err) < 0)
        return -1;
    int fd = open_read(&p, follow, &st, err);
    if (fd < 0)
        return -1;
    uint8_t *buf = malloc(len ? len : 1);
    char *enc = malloc((len + 2) / 3 * 4 + 1);
    ssize_t got = buf && enc ? read_full(fd, buf, len, off) : -1;
    int e = errno;
    close(fd);
    if (got < 0) {
        free(buf);
        free(enc);
        if (!buf || !enc)
            return -1;
        return path_error(err, &p, e, e == EAGAIN ? "would block" : NULL);
    }
    base64_encode(buf, (size_t)got, enc);
    free(buf);
    cJSON *r = cJSON_CreateObject();
    if (!r) {
        free(enc);
        return -1;
    }
    cJSON_AddStringToObject(r, "path", p.abs);
    cJSON_AddNumberToObject(r, "offset", (double)off);
    cJSON_AddNumberToObject(r, "length", (double)got);
    cJSON_AddNumberToObject(r, "size", (double)st.st_size);
    /* A short read is the end; so is reaching the size, except where the
     * size says nothing (0 for most of /proc and /sys). */
    cJSON_AddBoolToObject(r, "eof", (uint64_t)got < len ||
                                        (st.st_size > 0 && off + (uint64_t)got >= (uint64_t)st.st_size));
    cJSON_AddStringToObject(r, "data", enc);
    free(enc);
    *result = r;
    return 0;
}

int m_files_hash(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    static const char *const known[] = {"path", "follow", "offset", "length", NULL};
    struct fpath p;
    struct stat st;
    struct sha256 h;
    bool follow;
    uint64_t off, len, done = 0;
    enum { HASH_BUF = 65536 };
    char hex[65];

    if (params_only(params, known, err) < 0 || get_path(params, "path", &p, err) < 0 ||
        param_flag(params, "follow", &follow, err) < 0 ||
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
            return path_error(err, &p, e, NULL);
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

/* ---- files.write ---- */

static int write_all(int fd, const uint8_t *buf, size_t len)
{
    while (len) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Sets owner then mode on the fd (chown clears set-id bits, so mode
 * comes last). */
static int set_owner_mode(int fd, unsigned uid, unsigned gid, mode_t mode)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -1;
    if ((st.st_uid != uid || st.st_gid != gid) && fchown(fd, uid, gid) < 0)
        return -1;
    return fchmod(fd, mode);
}

/* A temp name beside the target, made with O_EXCL so nothing planted
 * there is ever written: ".<leaf>.hearth-<n>" (leaf cut to fit). */
static int open_temp(int dfd, const char *leaf, char *tmp, size_t n)
{
    static unsigned seq;
    unsigned ns = (unsigned)(mono_ns() % 1000000000);
    for (int i = 0; i < 16; i++) {
        unsigned tag = ns ^ (unsigned)getpid() << 16 ^ ++seq * 2654435761u;
        snprintf(tmp, n, ".%.200s.hearth-%08x", leaf, tag);
        int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
                        0600);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    errno = EEXIST;
    return -1;
}

static int rename2(int ofd, const char *from, int nfd, const char *to, bool noreplace)
{
    if (!noreplace)
        return renameat(ofd, from, nfd, to);
    return (int)syscall(SYS_renameat2, ofd, from, nfd, to, F_RENAME_NOREPLACE);
}

int m_files_write(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    static const char *const known[] = {"path", "data", "append", "exclusive", "mode",
                                        "uid", "gid", NULL};
    struct fpath p;
    const char *data = "";
    bool append, exclusive, present, has_mode, has_uid, has_gid;
    mode_t mode = 0644;
    /* A new file is hearth's (root's) unless uid/gid say otherwise. */
    unsigned uid = geteuid(), gid = getegid();
    char leaf[NAME_MAX + 1], tmp[NAME_MAX + 1], why[128] = "", berr[96] = "";

    if (params_only(params, known, err) < 0 || get_path(params, "path", &p, err) < 0 ||
        param_string(params, "data", &data, &present, err) < 0 ||
        param_flag(params, "append", &append, err) < 0 ||
        param_flag(params, "exclusive", &exclusive, err) < 0 ||
        param_mode(params, &mode, &has_mode, err) < 0 ||
        param_id(params, "uid", &uid, &has_uid, err) < 0 ||
        param_id(params, "gid", &gid, &has_gid, err) < 0)
        return -1;
    size_t dlen = strlen(data);
    if (dlen > (FILES_CHUNK_MAX + 2) / 3 * 4) {
        rpc_error_set(err, RPC_INVALID_PARAMS, "data: over %d bytes decoded (send it in chunks)",
                      FILES_CHUNK_MAX);
        return -1;
    }
    uint8_t *buf = malloc(FILES_CHUNK_MAX);
    if (!buf)
        return -1;
    long n = base64_decode(data, dlen, buf, FILES_CHUNK_MAX, berr, sizeof(berr));
    if (n < 0) {
        free(buf);
        rpc_error_set(err, RPC_INVALID_PARAMS, "data: %s", berr);
        return -1;
    }
    int dfd = open_parent(&p, leaf, err);
    if (dfd < 0) {
        free(buf);
        return -1;
    }
    struct stat old;
    bool exists = fstatat(dfd, leaf, &old, AT_SYMLINK_NOFOLLOW) == 0;
    int rc = -1, fd = -1;
    bool created = !exists;
    if (exists && exclusive) {
        path_error(err, &p, EEXIST, "already exists (exclusive)");
        goto out;
    }
    if (exists && (S_ISDIR(old.st_mode) || (append && !S_ISREG(old.st_mode)))) {
        path_error(err, &p, EINVAL, not_file(old.st_mode));
        goto out;
    }
    /* An existing file keeps its mode and owner unless told otherwise. */
    if (exists && S_ISREG(old.st_mode)) {
        if (!has_mode)
            mode = old.st_mode & 07777;
        if (!has_uid)
            uid = old.st_uid;
        if (!has_gid)
            gid = old.st_gid;
    }
    if (append) {
        int flags = O_WRONLY | O_APPEND | (exists ? 0 : O_CREAT | O_EXCL);
        fd = safepath_open(dfd, leaf, flags, 0600, why, sizeof(why));
        if (fd < 0) {
            path_error(err, &p, errno, why);
            goto out;
        }
        if ((!exists || has_mode || has_uid || has_gid) && set_owner_mode(fd, uid, gid, mode) < 0) {
            path_error(err, &p, errno, NULL);
            goto out;
        }
        if (write_all(fd, buf, (size_t)n) < 0) {
            path_error(err, &p, errno, NULL);
            goto out;
        }
    } else {
        /* Whole file: written under a temp name, synced, renamed over the
         * target by directory fd; a reader sees the old file or the new
         * one, never a part. */
        fd = open_temp(dfd, leaf, tmp, sizeof(tmp));
        if (fd < 0) {
            path_error(err, &p, errno, "unable to create a temp file beside it");
            goto out;
        }
        if (set_owner_mode(fd, uid, gid, mode) < 0 || write_all(fd, buf, (size_t)n) < 0 ||
            fsync(fd) < 0 || rename2(dfd, tmp, dfd, leaf, exclusive) < 0) {
            int e = errno;
            unlinkat(dfd, tmp, 0);
            path_error(err, &p, e, e == EEXIST ? "already exists (exclusive)" : NULL);
            goto out;
        }
        fsync(dfd);
    }
    struct stat now;
    if (fstat(fd, &now) < 0)
        now.st_size = n;
    cJSON *r = cJSON_CreateObject();
    if (!r)
        goto out;
    cJSON_AddStringToObject(r, "path", p.abs);
    cJSON_AddNumberToObject(r, "written", (double)n);
    cJSON_AddNumberToObject(r, "size", (double)now.st_size);
    cJSON_AddBoolToObject(r, "created", created);
    *result = r;
    rc = 0;
out:
    if (fd >= 0)
        close(fd);
    close(dfd);
    free(buf);
    return rc;
}

/* ---- files.rename ---- */

int m_files_rename(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    static const char *const known[] = {"from", "to", "exclusive", NULL};
    struct fpath f, t;
    bool exclusive;
    char fleaf[NAME_MAX + 1], tleaf[NAME_MAX + 1], why[128] = "";
    struct stat st;

    if (params_only(params, known, err) < 0 || get_path(params, "from", &f, err) < 0 ||
        get_path(params, "to", &t, err) < 0 || param_flag(params, "exclusive", &exclusive, err) < 0)
        return -1;
    int ffd = open_parent(&f, fleaf, err);
    if (ffd < 0)
        return -1;
    int tfd = open_parent(&t, tleaf, err);
    if (tfd < 0) {
        close(ffd);
        return -1;
    }
    int rc = -1;
    if (fstatat(ffd, fleaf, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        path_error(err, &f, errno, NULL);
        goto out;
    }
    /* A file uploaded in chunks reaches the disk before its name does. */
    if (S_ISREG(st.st_mode)) {
        int fd = safepath_open(ffd, fleaf, O_RDONLY, 0, why, sizeof(why));
        if (fd < 0) {
            path_error(err, &f, errno, why);
            goto out;
        }
        int s = fsync(fd);
        int e = errno;
        close(fd);
        if (s < 0) {
            path_error(err, &f, e, NULL);
            goto out;
        }
    }
    if (rename2(ffd, fleaf, tfd, tleaf, exclusive) < 0) {
        int e = errno;
        path_error(err, e == ENOENT ? &f : &t, e, e == EEXIST ? "already exists (exclusive)" : NULL);
        goto out;
    }
    fsync(tfd);
    cJSON *r = cJSON_CreateObject();
    if (!r)
        goto out;
    cJSON_AddStringToObject(r, "from", f.abs);
    cJSON_AddStringToObject(r, "to", t.abs);
    *result = r;
    rc = 0;
out:
    close(ffd);
    close(tfd);
    return rc;
}

/* ---- files.mkdir ---- */

int m_files_mkdir(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    static const char *const known[] = {"path", "parents", "mode", "uid", "gid", NULL};
    struct fpath p;
    bool parents, has_mode, has_uid, has_gid, made = false;
    mode_t mode = 0755;
    unsigned uid = geteuid(), gid = getegid();
    char why[128] = "";

    if (params_only(params, known, err) < 0 || get_path(params, "path", &p, err) < 0 ||
        param_flag(params, "parents", &parents, err) < 0 ||
        param_mode(params, &mode, &has_mode, err) < 0 ||
        param_id(params, "uid", &uid, &has_uid, err) < 0 ||
        param_id(params, "gid", &gid, &has_gid, err) < 0)
        return -1;
    int fd;
    if (parents) {
        struct stat st;
        made = fstatat(AT_FDCWD, p.abs, &st, AT_SYMLINK_NOFOLLOW) < 0;
        fd = safepath_mkdir_p(p.abs, mode, uid, gid, why, sizeof(why));
        if (fd < 0)
            return path_error(err, &p, errno, errno == ENOTDIR ? "a component is not a directory" : why);
    } else {
        if (is_root(&p)) {
            rpc_error_set(err, RPC_INVALID_PARAMS, "path: not allowed on /");
            return -1;
        }
        int root = open_root(err);
        if (root < 0)
            return -1;
        fd = safepath_mkdir(root, p.rel, mode, uid, gid, &made, why, sizeof(why));
        int e = errno;
        close(root);
        if (fd < 0)
            return path_error(err, &p, e, e == ENOTDIR ? "exists and is not a directory" : why);
        if (!made) {
            close(fd);
            return path_error(err, &p, EEXIST, "already exists (parents: true accepts that)");
        }
    }
    close(fd);
    cJSON *r = cJSON_CreateObject();
    if (!r)
        return -1;
    cJSON_AddStringToObject(r, "path", p.abs);
    cJSON_AddBoolToObject(r, "created", made);
    *result = r;
    return 0;
}

/* ---- files.remove ---- */

struct rm {
    unsigned long removed, budget;
    dev_t dev;
    const char *why;
    int err;
};

/* Empties directory dirfd/name and removes it, depth first, at most
 * r->budget entries in all. Never follows a link (links are removed as
 * links) and never crosses into another filesystem: a mount point inside
 * stops the removal with EXDEV. Returns 1 when done, 0 when the budget
 * ran out, -1 with r->err. */
static int rm_tree(int dirfd, const char *name, struct rm *r, int depth)
{
    if (depth > FILES_REMOVE_DEPTH) {
        r->err = ELOOP;
        r->why = "nested deeper than 64 directories";
        return -1;
    }
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        r->err = errno;
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        r->err = errno;
        close(fd);
        return -1;
    }
    if (st.st_dev != r->dev) {
        r->err = EXDEV;
        r->why = "a mount point is inside (not crossed)";
        close(fd);
        return -1;
    }
    DIR *d = fdopendir(fd);
    if (!d) {
        r->err = errno;
        close(fd);
        return -1;
    }
    int rc = 1;
    struct dirent *e;
    while (rc == 1 && (errno = 0, e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (r->removed >= r->budget) {
            rc = 0;
            break;
        }
        struct stat es;
        if (fstatat(fd, e->d_name, &es, AT_SYMLINK_NOFOLLOW) < 0) {
            r->err = errno;
            rc = -1;
        } else if (S_ISDIR(es.st_mode)) {
            rc = rm_tree(fd, e->d_name, r, depth + 1);
        } else if (unlinkat(fd, e->d_name, 0) < 0) {
            r->err = errno;
            rc = -1;
        } else {
            r->removed++;
        }
    }
    if (rc == 1 && !e && errno) {
        r->err = errno;
        rc = -1;
    }
    closedir(d);
    if (rc == 1) {
        if (r->removed >= r->budget)
            return 0;
        if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0) {
            r->err = errno;
            return -1;
        }
        r->removed++;
    }
    return rc;
}

int m_files_remove(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    static const char *const known[] = {"path", "recursive", NULL};
    struct fpath p;
    bool recursive;
    char leaf[NAME_MAX + 1];
    struct stat st, pst;

    if (params_only(params, known, err) < 0 || get_path(params, "path", &p, err) < 0 ||
        param_flag(params, "recursive", &recursive, err) < 0)
        return -1;
    int dfd = open_parent(&p, leaf, err);
    if (dfd < 0)
        return -1;
    if (fstatat(dfd, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0 || fstat(dfd, &pst) < 0) {
        int e = errno;
        close(dfd);
        return path_error(err, &p, e, NULL);
    }
    struct rm r = {.budget = FILES_REMOVE_MAX, .dev = st.st_dev};
    int rc = 1;
    if (!S_ISDIR(st.st_mode)) {
        rc = unlinkat(dfd, leaf, 0) < 0 ? (r.err = errno, -1) : (r.removed = 1, 1);
    } else if (!recursive) {
        rc = unlinkat(dfd, leaf, AT_REMOVEDIR) < 0 ? (r.err = errno, -1) : (r.removed = 1, 1);
        if (rc < 0 && (r.err == ENOTEMPTY || r.err == EEXIST))
            r.why = "directory not empty (recursive: true removes its contents)";
    } else if (st.st_dev != pst.st_dev) {
        rc = -1, r.err = EBUSY, r.why = "a mount point (not removed)";
    } else {
        rc = rm_tree(dfd, leaf, &r, 0);
    }
    close(dfd);
    if (rc < 0)
        return path_error(err, &p, r.err, r.why);
    cJSON *res = cJSON_CreateObject();
    if (!res)
        return -1;
    cJSON_AddStringToObject(res, "path", p.abs);
    cJSON_AddNumberToObject(res, "removed", (double)r.removed);
    cJSON_AddBoolToObject(res, "done", rc == 1);
    *result = res;
    return 0;
}
