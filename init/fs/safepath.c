#include "safepath.h"

#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "err.h"

#ifndef SYS_openat2
#define SYS_openat2 437
#endif
#define SP_RESOLVE_NO_MAGICLINKS 0x02
#define SP_RESOLVE_NO_SYMLINKS 0x04
#define SP_RESOLVE_BENEATH 0x08

/* The kernel's struct open_how, spelled here: musl's headers lack it. */
struct sp_open_how {
    uint64_t flags;
    uint64_t mode;
    uint64_t resolve;
};

/* Remembered once the kernel says openat2 does not exist. */
static bool no_openat2;

static void reason(struct err *err, int e)
{
    const char *r;

    switch (e) {
    case ELOOP:
        r = "a symbolic link is in the way (not followed)";
        break;
    case EXDEV:
        r = "the path leaves its directory";
        break;
    case SAFEPATH_EWRONGTYPE:
        r = "not a regular file";
        break;
    case ENXIO:
        r = "a FIFO or socket with no reader";
        break;
    default:
        r = strerror(e);
    }
    /* Only the reason: the caller says what it was unable to do. */
    err_set(err, "%s", r);
    if (err)
        err->code = e;
    errno = e;
}

static int fail(struct err *err, int e)
{
    reason(err, e);
    return -1;
}

void safepath_use_openat2(bool on)
{
    no_openat2 = !on;
}

int safepath_check(const char *rel)
{
    size_t len = strlen(rel);

    if (len == 0) {
        errno = ENOENT;
        return -1;
    }
    if (len >= PATH_MAX) {
        errno = ENAMETOOLONG;
        return -1;
    }
    if (rel[0] == '/') {
        errno = EXDEV;
        return -1;
    }
    for (const char *p = rel; *p;) {
        const char *end = strchr(p, '/');
        size_t cl = end ? (size_t)(end - p) : strlen(p);
        if (cl == 2 && p[0] == '.' && p[1] == '.') {
            errno = EXDEV;
            return -1;
        }
        if (cl >= NAME_MAX + 1) {
            errno = ENAMETOOLONG;
            return -1;
        }
        p += cl;
        while (*p == '/')
            p++;
    }
    return 0;
}

int safepath_split(const char *rel, char *dir, char *leaf)
{
    if (safepath_check(rel) < 0)
        return -1;
    size_t n = strlen(rel);
    while (n > 1 && rel[n - 1] == '/')
        n--;
    size_t s = n;
    while (s > 0 && rel[s - 1] != '/')
        s--;
    memcpy(leaf, rel + s, n - s);
    leaf[n - s] = '\0';
    if (leaf[0] == '\0') {
        errno = ENOENT;
        return -1;
    }
    size_t d = s;
    while (d > 0 && rel[d - 1] == '/')
        d--;
    if (d == 0) {
        strcpy(dir, ".");
    } else {
        memcpy(dir, rel, d);
        dir[d] = '\0';
    }
    return 0;
}

/* Where openat2 is missing (kernels before 5.6): one component at a
 * time, each directory opened O_PATH | O_NOFOLLOW and checked, the last
 * one opened O_NOFOLLOW. '..' was refused by safepath_check, so nothing
 * can climb out. */
static int open_walk(int dirfd, const char *rel, int flags, mode_t mode)
{
    char comp[NAME_MAX + 1];
    int cur = dirfd;

    for (const char *p = rel; *p;) {
        const char *end = strchr(p, '/');
        size_t cl = end ? (size_t)(end - p) : strlen(p);
        memcpy(comp, p, cl);
        comp[cl] = '\0';
        p += cl;
        while (*p == '/')
            p++;
        if (*p == '\0') {
            int fd = openat(cur, comp, flags | O_NOFOLLOW, mode);
            int e = errno;
            struct stat ls;
            /* O_DIRECTORY on a link says ENOTDIR; openat2 says ELOOP, as
             * for a link anywhere else: one answer either way. */
            if (fd < 0 && e == ENOTDIR && fstatat(cur, comp, &ls, AT_SYMLINK_NOFOLLOW) == 0 &&
                S_ISLNK(ls.st_mode))
                e = ELOOP;
            if (cur != dirfd)
                close(cur);
            errno = e;
            return fd;
        }
        int next = openat(cur, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        int e = errno;
        struct stat s;
        if (next >= 0 && fstat(next, &s) < 0)
            e = errno, close(next), next = -1;
        else if (next >= 0 && !S_ISDIR(s.st_mode))
            e = S_ISLNK(s.st_mode) ? ELOOP : ENOTDIR, close(next), next = -1;
        if (cur != dirfd)
            close(cur);
        if (next < 0) {
            errno = e;
            return -1;
        }
        cur = next;
    }
    /* Only separators and '.' can end here ("./"): the directory itself. */
    int fd = openat(cur, ".", flags, mode);
    int e = errno;
    if (cur != dirfd)
        close(cur);
    errno = e;
    return fd;
}

static int raw_open(int dirfd, const char *rel, int flags, mode_t mode)
{
    if (!no_openat2) {
        struct sp_open_how how = {
            .flags = (uint64_t)(unsigned)flags,
            .mode = (flags & O_CREAT) ? mode : 0,
            .resolve = SP_RESOLVE_NO_SYMLINKS | SP_RESOLVE_BENEATH | SP_RESOLVE_NO_MAGICLINKS,
        };
        long fd;
        do
            fd = syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));
        while (fd < 0 && errno == EINTR);
        /* ENOSYS: a kernel before 5.6. EPERM: also what some container
         * seccomp profiles answer for a system call they do not know; the
         * walk below gives the real answer either way. */
        if (fd >= 0 || (errno != ENOSYS && errno != EPERM))
            return (int)fd;
        if (errno == ENOSYS)
            no_openat2 = true;
    }
    int fd;
    do
        fd = open_walk(dirfd, rel, flags, mode);
    while (fd < 0 && errno == EINTR);
    return fd;
}

int safepath_open(int dirfd, const char *rel, int flags, mode_t mode, struct err *err)
{
    if (flags & O_TRUNC)
        return fail(err, EINVAL);
    if (safepath_check(rel) < 0)
        return fail(err, errno);
    bool want_dir = (flags & O_DIRECTORY) != 0;
    if (want_dir)
        flags = O_RDONLY | O_DIRECTORY;
    flags |= O_NONBLOCK | O_CLOEXEC | O_NOCTTY;
    int fd = raw_open(dirfd, rel, flags, mode);
    if (fd < 0)
        return fail(err, errno);
    struct stat s;
    if (fstat(fd, &s) < 0) {
        int e = errno;
        close(fd);
        return fail(err, e);
    }
    if (want_dir ? !S_ISDIR(s.st_mode) : !S_ISREG(s.st_mode)) {
        close(fd);
        if (!want_dir && (S_ISDIR(s.st_mode) || S_ISFIFO(s.st_mode) || S_ISSOCK(s.st_mode) ||
                          S_ISCHR(s.st_mode) || S_ISBLK(s.st_mode))) {
            const char *k = S_ISDIR(s.st_mode)    ? "a directory"
                            : S_ISFIFO(s.st_mode) ? "a FIFO"
                            : S_ISSOCK(s.st_mode) ? "a socket"
                                                  : "a device";
            err_set(err, "%s, not a regular file", k);
            errno = SAFEPATH_EWRONGTYPE;
            return -1;
        }
        return fail(err, want_dir ? ENOTDIR : SAFEPATH_EWRONGTYPE);
    }
    return fd;
}

int safepath_open_owned(int dirfd, const char *rel, int flags, mode_t mode, uid_t uid, gid_t gid,
                        struct err *err)
{
    int fd = -1;

    /* Created here first (O_EXCL): only then is the owner ours to set. */
    if (flags & O_CREAT) {
        fd = safepath_open(dirfd, rel, flags | O_EXCL, mode, err);
        if (fd >= 0) {
            if ((uid != geteuid() || gid != getegid()) && fchown(fd, uid, gid) < 0) {
                int e = errno;
                close(fd);
                return fail(err, e);
            }
            return fd;
        }
        if (errno != EEXIST || (flags & O_EXCL))
            return -1;
        flags &= ~O_CREAT;
    }
    fd = safepath_open(dirfd, rel, flags, mode, err);
    if (fd < 0)
        return -1;
    struct stat s;
    if (fstat(fd, &s) < 0) {
        int e = errno;
        close(fd);
        return fail(err, e);
    }
    if ((s.st_uid != uid && s.st_uid != 0) || (S_ISREG(s.st_mode) && s.st_nlink > 1)) {
        close(fd);
        err_set(err, "%s", s.st_nlink > 1 ? "has other hard links (not trusted)"
                                                   : "owned by another user (not trusted)");
        errno = SAFEPATH_EOWNER;
        return -1;
    }
    return fd;
}

int safepath_open_abs(const char *path, int flags, mode_t mode, struct err *err)
{
    if (path[0] != '/')
        return fail(err, EINVAL);
    while (*path == '/')
        path++;
    int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root < 0)
        return fail(err, errno);
    int fd = *path ? safepath_open(root, path, flags, mode, err)
                   : safepath_open(root, ".", flags, mode, err);
    int e = errno;
    close(root);
    errno = e;
    return fd;
}

int safepath_mkdir(int dirfd, const char *rel, mode_t mode, uid_t uid, gid_t gid, bool *made,
                   struct err *err)
{
    char dir[PATH_MAX], leaf[PATH_MAX];

    if (made)
        *made = false;
    if (safepath_split(rel, dir, leaf) < 0)
        return fail(err, errno);
    int pfd = safepath_open(dirfd, dir, O_DIRECTORY, 0, err);
    if (pfd < 0)
        return -1;
    bool mine = mkdirat(pfd, leaf, mode) == 0;
    if (!mine && errno != EEXIST) {
        int e = errno;
        close(pfd);
        return fail(err, e);
    }
    int fd = safepath_open(pfd, leaf, O_DIRECTORY, 0, err);
    int e = errno;
    close(pfd);
    if (fd < 0) {
        errno = e;
        return -1;
    }
    /* On the fd: the name may have been swapped since mkdirat. */
    if (mine && (uid != geteuid() || gid != getegid()) && fchown(fd, uid, gid) < 0) {
        e = errno;
        close(fd);
        return fail(err, e);
    }
    if (mine && fchmod(fd, mode) < 0) {
        e = errno;
        close(fd);
        return fail(err, e);
    }
    if (made)
        *made = mine;
    return fd;
}

int safepath_mkdir_p(const char *path, mode_t mode, uid_t uid, gid_t gid, struct err *err)
{
    char comp[NAME_MAX + 1];

    if (path[0] != '/' || safepath_check(path + 1 + strspn(path + 1, "/")) < 0) {
        if (path[0] == '/' && path[1 + strspn(path + 1, "/")] == '\0')
            return safepath_open_abs("/", O_DIRECTORY, 0, err);
        return fail(err, path[0] != '/' ? EINVAL : errno);
    }
    int cur = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (cur < 0)
        return fail(err, errno);
    for (const char *p = path; *p;) {
        while (*p == '/')
            p++;
        if (!*p)
            break;
        size_t cl = strcspn(p, "/");
        memcpy(comp, p, cl);
        comp[cl] = '\0';
        p += cl;
        /* Levels that exist keep their owner and mode. */
        int next = strcmp(comp, ".") == 0
                       ? safepath_open(cur, ".", O_DIRECTORY, 0, err)
                       : safepath_mkdir(cur, comp, mode, uid, gid, NULL, err);
        int e = errno;
        close(cur);
        if (next < 0) {
            errno = e;
            return -1;
        }
        cur = next;
    }
    return cur;
}
