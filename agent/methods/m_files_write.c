/* m_files, the methods that change the tree: files.write (to a temp
 * file beside the target, then renamed into place), files.rename,
 * files.mkdir and files.remove (bounded per call). The path handling they
 * share with the reading side is in m_files.c (m_files_int.h). */
#include "m_files.h"
#include "err.h"
#include "m_files_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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
#include "timebase.h"

#ifndef SYS_renameat2
#define SYS_renameat2 316
#endif
#define F_RENAME_NOREPLACE 1

/* ---- files.write ---- */

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
    if (syscall(SYS_renameat2, ofd, from, nfd, to, F_RENAME_NOREPLACE) == 0)
        return 0;
    int e = errno;
    if (e != EINVAL && e != ENOSYS)
        return -1;
    /* A filesystem without RENAME_NOREPLACE (9p answers EINVAL): a hard
     * link refuses an existing name just as atomically, then the old name
     * goes. A directory cannot be linked: the first error stands. */
    if (linkat(ofd, from, nfd, to, 0) < 0) {
        errno = errno == EEXIST ? EEXIST : e;
        return -1;
    }
    unlinkat(ofd, from, 0);
    return 0;
}

int m_files_write_now(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    static const char *const known[] = {"path", "data", "append", "exclusive", "mode",
                                        "uid", "gid", NULL};
    struct fpath p;
    const char *data = "";
    bool append, exclusive, present, has_mode, has_uid, has_gid;
    mode_t mode = 0644;
    /* A new file is hearth's (root's) unless uid/gid say otherwise. */
    unsigned uid = geteuid(), gid = getegid();
    char leaf[NAME_MAX + 1], tmp[NAME_MAX + 1];
    struct err why = {0};
    struct err berr = {0};

    if (params_only(params, known, err) < 0 || m_files_get_path(params, "path", &p, err) < 0 ||
        param_string(params, "data", &data, &present, err) < 0 ||
        m_files_param_flag(params, "append", &append, err) < 0 ||
        m_files_param_flag(params, "exclusive", &exclusive, err) < 0 ||
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
    long n = base64_decode(data, dlen, buf, FILES_CHUNK_MAX, &berr);
    if (n < 0) {
        free(buf);
        err_wrap(&berr, "data");
        return rpc_error_from(err, RPC_INVALID_PARAMS, &berr);
    }
    int dfd = m_files_open_parent(&p, leaf, err);
    if (dfd < 0) {
        free(buf);
        return -1;
    }
    struct stat old;
    bool exists = fstatat(dfd, leaf, &old, AT_SYMLINK_NOFOLLOW) == 0;
    int rc = -1, fd = -1;
    bool created = !exists;
    if (exists && exclusive) {
        m_files_path_error(err, &p, EEXIST, "already exists (exclusive)");
        goto out;
    }
    if (exists && (S_ISDIR(old.st_mode) || (append && !S_ISREG(old.st_mode)))) {
        m_files_path_error(err, &p, EINVAL, m_files_not_file(old.st_mode));
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
        fd = safepath_open(dfd, leaf, flags, 0600, &why);
        if (fd < 0) {
            m_files_path_error(err, &p, errno, why.msg);
            goto out;
        }
        if ((!exists || has_mode || has_uid || has_gid) && set_owner_mode(fd, uid, gid, mode) < 0) {
            m_files_path_error(err, &p, errno, NULL);
            goto out;
        }
        if (write_all(fd, buf, (size_t)n) < 0) {
            m_files_path_error(err, &p, errno, NULL);
            goto out;
        }
    } else {
        /* Whole file: written under a temp name, synced, renamed over the
         * target by directory fd; a reader sees the old file or the new
         * one, never a part. */
        fd = open_temp(dfd, leaf, tmp, sizeof(tmp));
        if (fd < 0) {
            m_files_path_error(err, &p, errno, "unable to create a temp file beside it");
            goto out;
        }
        if (set_owner_mode(fd, uid, gid, mode) < 0 || write_all(fd, buf, (size_t)n) < 0 ||
            fsync(fd) < 0 || rename2(dfd, tmp, dfd, leaf, exclusive) < 0) {
            int e = errno;
            unlinkat(dfd, tmp, 0);
            m_files_path_error(err, &p, e, e == EEXIST ? "already exists (exclusive)" : NULL);
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

int m_files_rename_now(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    static const char *const known[] = {"from", "to", "exclusive", NULL};
    struct fpath f, t;
    bool exclusive;
    char fleaf[NAME_MAX + 1], tleaf[NAME_MAX + 1];
    struct err why = {0};
    struct stat st;

    if (params_only(params, known, err) < 0 || m_files_get_path(params, "from", &f, err) < 0 ||
        m_files_get_path(params, "to", &t, err) < 0 ||
        m_files_param_flag(params, "exclusive", &exclusive, err) < 0)
        return -1;
    int ffd = m_files_open_parent(&f, fleaf, err);
    if (ffd < 0)
        return -1;
    int tfd = m_files_open_parent(&t, tleaf, err);
    if (tfd < 0) {
        close(ffd);
        return -1;
    }
    int rc = -1;
    if (fstatat(ffd, fleaf, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        m_files_path_error(err, &f, errno, NULL);
        goto out;
    }
    /* A file uploaded in chunks reaches the disk before its name does. */
    if (S_ISREG(st.st_mode)) {
        int fd = safepath_open(ffd, fleaf, O_RDONLY, 0, &why);
        if (fd < 0) {
            m_files_path_error(err, &f, errno, why.msg);
            goto out;
        }
        int s = fsync(fd);
        int e = errno;
        close(fd);
        if (s < 0) {
            m_files_path_error(err, &f, e, NULL);
            goto out;
        }
    }
    if (rename2(ffd, fleaf, tfd, tleaf, exclusive) < 0) {
        int e = errno;
        m_files_path_error(err, e == ENOENT ? &f : &t, e, e == EEXIST ? "already exists (exclusive)" : NULL);
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

int m_files_mkdir_now(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    static const char *const known[] = {"path", "parents", "mode", "uid", "gid", NULL};
    struct fpath p;
    bool parents, has_mode, has_uid, has_gid, made = false;
    mode_t mode = 0755;
    unsigned uid = geteuid(), gid = getegid();
    struct err why = {0};

    if (params_only(params, known, err) < 0 || m_files_get_path(params, "path", &p, err) < 0 ||
        m_files_param_flag(params, "parents", &parents, err) < 0 ||
        param_mode(params, &mode, &has_mode, err) < 0 ||
        param_id(params, "uid", &uid, &has_uid, err) < 0 ||
        param_id(params, "gid", &gid, &has_gid, err) < 0)
        return -1;
    int fd;
    if (parents) {
        /* Whether it is there already, asked the way the walk below goes
         * (no link followed), never through a link to somewhere else. */
        int root = m_files_open_root(err);
        if (root < 0)
            return -1;
        int probe = safepath_open(root, p.rel, O_DIRECTORY, 0, &why);
        made = probe < 0;
        if (probe >= 0)
            close(probe);
        close(root);
        why.msg[0] = '\0';
        fd = safepath_mkdir_p(p.abs, mode, uid, gid, &why);
        if (fd < 0)
            return m_files_path_error(err, &p, errno,
                                      errno == ENOTDIR ? "a component is not a directory" : why.msg);
    } else {
        if (m_files_is_root(&p)) {
            rpc_error_set(err, RPC_INVALID_PARAMS, "path: not allowed on /");
            return -1;
        }
        int root = m_files_open_root(err);
        if (root < 0)
            return -1;
        fd = safepath_mkdir(root, p.rel, mode, uid, gid, &made, &why);
        int e = errno;
        close(root);
        if (fd < 0)
            return m_files_path_error(err, &p, e, e == ENOTDIR ? "exists and is not a directory" : why.msg);
        if (!made) {
            close(fd);
            return m_files_path_error(err, &p, EEXIST, "already exists (parents: true accepts that)");
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

int m_files_remove_now(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    static const char *const known[] = {"path", "recursive", NULL};
    struct fpath p;
    bool recursive;
    char leaf[NAME_MAX + 1];
    struct stat st, pst;

    if (params_only(params, known, err) < 0 || m_files_get_path(params, "path", &p, err) < 0 ||
        m_files_param_flag(params, "recursive", &recursive, err) < 0)
        return -1;
    int dfd = m_files_open_parent(&p, leaf, err);
    if (dfd < 0)
        return -1;
    if (fstatat(dfd, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0 || fstat(dfd, &pst) < 0) {
        int e = errno;
        close(dfd);
        return m_files_path_error(err, &p, e, NULL);
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
        return m_files_path_error(err, &p, r.err, r.why);
    cJSON *res = cJSON_CreateObject();
    if (!res)
        return -1;
    cJSON_AddStringToObject(res, "path", p.abs);
    cJSON_AddNumberToObject(res, "removed", (double)r.removed);
    cJSON_AddBoolToObject(res, "done", rc == 1);
    *result = res;
    return 0;
}
