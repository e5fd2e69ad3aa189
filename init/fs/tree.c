#include "tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "err.h"
#include "safepath.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

#define TMP_NAME ".hearth-copy.tmp"

struct walk {
    struct tree_stats *st;
    const struct tree_owner *own; /* NULL: the template's owner */
    unsigned long visited;
    struct err *err;
};

static int fail(struct walk *w, const char *what, const char *path, int e)
{
    err_unable(w->err, e, "%s %s", what, path);
    errno = e;
    return -1;
}

/* musl 1.2.3 has no renameat2() wrapper: the raw syscall works with both
 * libcs. */
static int renameat2_raw(int dirfd, const char *from, const char *to, unsigned flags)
{
    return (int)syscall(SYS_renameat2, dirfd, from, dirfd, to, flags);
}

int tree_rename_noreplace(int dirfd, const char *from, const char *to)
{
    if (renameat2_raw(dirfd, from, to, RENAME_NOREPLACE) == 0)
        return 0;
    if (errno != EINVAL && errno != ENOSYS)
        return -1;
    /* A hard link never replaces either; it fails with EEXIST. */
    if (linkat(dirfd, from, dirfd, to, 0) == 0) {
        unlinkat(dirfd, from, 0);
        return 0;
    }
    if (errno == EEXIST)
        return -1;
    struct stat s;
    if (fstatat(dirfd, to, &s, AT_SYMLINK_NOFOLLOW) == 0) {
        errno = EEXIST;
        return -1;
    }
    return renameat(dirfd, from, dirfd, to);
}

int tree_rename_exchange(int dirfd, const char *a, const char *b)
{
    return renameat2_raw(dirfd, a, b, RENAME_EXCHANGE);
}

static void join(char *out, size_t n, const char *dir, const char *name)
{
    snprintf(out, n, "%s/%s", dir, name);
}

static int copy_bytes(int in, int out)
{
    char buf[65536];

    for (;;) {
        ssize_t r = read(in, buf, sizeof(buf));
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (r == 0)
            return 0;
        for (ssize_t off = 0; off < r;) {
            ssize_t wr = write(out, buf + off, (size_t)(r - off));
            if (wr < 0) {
                if (errno == EINTR)
                    continue;
                return -1;
            }
            off += wr;
        }
    }
}

/* Renames the finished temporary entry of ddir to name, never over an
 * entry that is there (then kept, and the temporary one removed);
 * counted in *count once it is in place. */
static int publish(struct walk *w, int ddir, const char *name, const char *dpath,
                   unsigned long *count)
{
    if (tree_rename_noreplace(ddir, TMP_NAME, name) < 0) {
        int e = errno;
        unlinkat(ddir, TMP_NAME, 0);
        if (e == EEXIST) {
            w->st->kept++;
            return 0;
        }
        return fail(w, "rename into", dpath, e);
    }
    (*count)++;
    return 0;
}

/* One regular file: written to TMP_NAME, flushed, then renamed in place
 * without replacing. */
static int copy_file(struct walk *w, int sdir, int ddir, const char *name, const struct stat *s,
                     const char *dpath)
{
    struct err why;
    /* Never blocks on a FIFO swapped in since the stat, never follows. */
    int in = safepath_open(sdir, name, O_RDONLY, 0, &why);
    if (in < 0)
        return err_set(w->err, "unable to open %s: %s", dpath, why.msg);
    unlinkat(ddir, TMP_NAME, 0); /* left by an interrupted copy */
    int out = safepath_open(ddir, TMP_NAME, O_WRONLY | O_CREAT | O_EXCL, 0600, &why);
    if (out < 0) {
        close(in);
        return err_set(w->err, "unable to create a temporary file for %s: %s", dpath, why.msg);
    }
    int rc = copy_bytes(in, out);
    int e = errno;
    close(in);
    /* Owner first: a chown clears set-uid and set-gid bits set before it. */
    uid_t ou = w->own ? w->own->uid : s->st_uid;
    gid_t og = w->own ? w->own->gid : s->st_gid;
    if (rc == 0 && fchown(out, ou, og) < 0 && errno != EPERM)
        rc = -1, e = errno;
    if (rc == 0 && fchmod(out, s->st_mode & 07777) < 0)
        rc = -1, e = errno;
    /* The rename must not publish a file whose data is not on disk yet. */
    if (rc == 0 && fsync(out) < 0 && errno != EINVAL)
        rc = -1, e = errno;
    if (close(out) < 0 && rc == 0)
        rc = -1, e = errno;
    if (rc < 0) {
        unlinkat(ddir, TMP_NAME, 0);
        return fail(w, "copy", dpath, e);
    }
    return publish(w, ddir, name, dpath, &w->st->files);
}

static int copy_link(struct walk *w, int sdir, int ddir, const char *name, const char *dpath)
{
    char target[4096];
    ssize_t n = readlinkat(sdir, name, target, sizeof(target) - 1);
    if (n < 0)
        return fail(w, "read link", dpath, errno);
    target[n] = '\0';
    unlinkat(ddir, TMP_NAME, 0);
    if (symlinkat(target, ddir, TMP_NAME) < 0)
        return fail(w, "create link", dpath, errno);
    if (w->own && fchownat(ddir, TMP_NAME, w->own->uid, w->own->gid, AT_SYMLINK_NOFOLLOW) < 0 &&
        errno != EPERM) {
        int e = errno;
        unlinkat(ddir, TMP_NAME, 0);
        return fail(w, "chown link", dpath, e);
    }
    return publish(w, ddir, name, dpath, &w->st->links);
}

static int copy_dir(struct walk *w, int sdir, int ddir, const char *dpath, int depth,
                    const char *const *last);

static int copy_entry(struct walk *w, int sdir, int ddir, const char *name, const char *dpath,
                      int depth)
{
    struct stat s, d;
    char path[4096];

    if (++w->visited > TREE_MAX_ENTRIES)
        return fail(w, "copy", dpath, EFBIG);
    join(path, sizeof(path), dpath, name);
    if (fstatat(sdir, name, &s, AT_SYMLINK_NOFOLLOW) < 0)
        return fail(w, "stat template of", path, errno);
    if (S_ISREG(s.st_mode) || S_ISLNK(s.st_mode)) {
        if (fstatat(ddir, name, &d, AT_SYMLINK_NOFOLLOW) == 0) {
            w->st->kept++;
            return 0;
        }
        return S_ISREG(s.st_mode) ? copy_file(w, sdir, ddir, name, &s, path)
                                  : copy_link(w, sdir, ddir, name, path);
    }
    if (!S_ISDIR(s.st_mode)) {
        w->st->skipped++;
        return 0;
    }
    if (depth >= TREE_MAX_DEPTH)
        return fail(w, "copy", path, ELOOP);
    bool made = false;
    if (mkdirat(ddir, name, 0700) == 0)
        made = true;
    else if (errno != EEXIST)
        return fail(w, "create directory", path, errno);
    int cs = openat(sdir, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (cs < 0)
        return fail(w, "open template directory", path, errno);
    int cd = openat(ddir, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (cd < 0) {
        int e = errno;
        close(cs);
        /* An existing non-directory of that name is the user's: keep it. */
        if (e == ENOTDIR) {
            w->st->kept++;
            return 0;
        }
        return fail(w, "open directory", path, e);
    }
    int rc = copy_dir(w, cs, cd, path, depth + 1, NULL);
    /* The template's mode goes on last: it may lack the owner's write bit
     * the copy needed. An existing directory keeps its own. */
    if (rc == 0 && made) {
        if (fchown(cd, w->own ? w->own->uid : s.st_uid, w->own ? w->own->gid : s.st_gid) < 0 &&
            errno != EPERM)
            rc = fail(w, "chown", path, errno);
        else if (fchmod(cd, s.st_mode & 07777) < 0)
            rc = fail(w, "chmod", path, errno);
    }
    if (made && rc == 0)
        w->st->dirs++;
    else if (rc == 0)
        w->st->kept++;
    close(cs);
    close(cd);
    return rc;
}

static bool listed(const char *name, const char *const *list)
{
    for (; list && *list; list++)
        if (strcmp(*list, name) == 0)
            return true;
    return false;
}

static int copy_dir(struct walk *w, int sdir, int ddir, const char *dpath, int depth,
                    const char *const *last)
{
    int fd = dup(sdir);
    if (fd < 0)
        return fail(w, "read template", dpath, errno);
    DIR *d = fdopendir(fd);
    if (!d) {
        int e = errno;
        close(fd);
        return fail(w, "read template", dpath, e);
    }
    struct dirent *de;
    int rc = 0;
    errno = 0;
    while (rc == 0 && (de = readdir(d))) {
        const char *n = de->d_name;
        if (strcmp(n, ".") == 0 || strcmp(n, "..") == 0 || strcmp(n, TMP_NAME) == 0 ||
            listed(n, last))
            continue;
        rc = copy_entry(w, sdir, ddir, n, dpath, depth);
        errno = 0;
    }
    if (rc == 0 && errno)
        rc = fail(w, "read template", dpath, errno);
    closedir(d);
    for (; rc == 0 && last && *last; last++) {
        struct stat s;
        if (fstatat(sdir, *last, &s, AT_SYMLINK_NOFOLLOW) == 0)
            rc = copy_entry(w, sdir, ddir, *last, dpath, depth);
    }
    return rc;
}

int tree_copy_fd(int sd, int dd, const char *dpath, const char *const *last,
                 const struct tree_owner *own, struct tree_stats *st, struct err *err)
{
    struct tree_stats dummy;
    struct walk w = {.st = st ? st : &dummy, .own = own, .err = err};

    memset(w.st, 0, sizeof(*w.st));
    unlinkat(dd, TMP_NAME, 0);
    return copy_dir(&w, sd, dd, dpath, 0, last);
}

static int remove_at(struct walk *w, int dfd, const char *name, const char *path, int depth)
{
    if (++w->visited > TREE_MAX_ENTRIES)
        return fail(w, "remove", path, EFBIG);
    if (unlinkat(dfd, name, 0) == 0 || errno == ENOENT)
        return 0;
    if (errno != EISDIR && errno != EPERM)
        return fail(w, "remove", path, errno);
    if (depth >= TREE_MAX_DEPTH)
        return fail(w, "remove", path, ELOOP);
    int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return fail(w, "open", path, errno);
    DIR *d = fdopendir(fd);
    if (!d) {
        int e = errno;
        close(fd);
        return fail(w, "read", path, e);
    }
    struct dirent *de;
    char sub[4096];
    int rc = 0;
    while (rc == 0 && (de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        join(sub, sizeof(sub), path, de->d_name);
        rc = remove_at(w, dirfd(d), de->d_name, sub, depth + 1);
    }
    closedir(d);
    if (rc == 0 && unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
        rc = fail(w, "remove", path, errno);
    return rc;
}

int tree_remove(int dirfd, const char *name, struct err *err)
{
    struct tree_stats dummy;
    struct walk w = {.st = &dummy, .err = err};
    return remove_at(&w, dirfd, name, name, 0);
}

int tree_copy_file(int sdir, const char *src, int ddir, const char *name,
                   const struct tree_owner *own, struct err *err)
{
    struct err why;
    struct stat s;
    int in = safepath_open(sdir, src, O_RDONLY, 0, &why);

    if (in < 0 || fstat(in, &s) < 0) {
        err_set(err, "unable to open %s: %s", src, in < 0 ? why.msg : strerror(errno));
        if (in >= 0)
            close(in);
        return -1;
    }
    unlinkat(ddir, name, 0);
    int out = safepath_open(ddir, name, O_WRONLY | O_CREAT | O_EXCL, 0600, &why);
    if (out < 0) {
        err_set(err, "unable to create %s: %s", name, why.msg);
        close(in);
        return -1;
    }
    int rc = copy_bytes(in, out);
    if (rc == 0 && own && fchown(out, own->uid, own->gid) < 0 && errno != EPERM)
        rc = -1;
    if (rc == 0 && fchmod(out, (s.st_mode & 07777) | 0600) < 0)
        rc = -1;
    if (rc == 0 && fsync(out) < 0 && errno != EINVAL)
        rc = -1;
    int e = errno;
    close(in);
    if (close(out) < 0 && rc == 0)
        rc = -1, e = errno;
    if (rc < 0) {
        err_unable(err, e, "copy %s", src);
        unlinkat(ddir, name, 0);
    }
    return rc;
}
