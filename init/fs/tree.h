/* tree: file-tree operations shared by seeding and skills.fork — copying
 * a template tree without ever overwriting, renames that refuse to
 * replace or that swap atomically, and a bounded recursive removal. */
#ifndef HEARTH_TREE_H
#define HEARTH_TREE_H

#include <stddef.h>
#include <sys/types.h>

#include "err.h"

/* Entries one copy or removal may visit, so a hostile or runaway tree
 * costs bounded time in the loop. */
#define TREE_MAX_ENTRIES 100000
#define TREE_MAX_DEPTH 64

struct tree_stats {
    unsigned long files, dirs, links, kept, skipped;
};

/* Who owns what a copy makes; NULL where accepted: the template's owner. */
struct tree_owner {
    uid_t uid;
    gid_t gid;
};

/* Copies the tree under sd into dd (an existing directory): each file
 * and symlink is written under a temporary name in its final directory and
 * renamed into place without replacing anything already there, so a crash
 * leaves whole files or none; directories get the template's mode once
 * filled. Names listed in last (NULL-terminated, top level only, may be
 * NULL) are copied after everything else. Existing entries are kept
 * (counted in kept); fifos, sockets and devices are skipped. Returns 0, or
 * -1 with "unable to X PATH: reason" in err. Nothing is resolved by path
 * (dpath only names dd in errors), every file is opened with safepath, and
 * modes and owners (own, or the template's) are set on fds. */
int tree_copy_fd(int sd, int dd, const char *dpath, const char *const *last,
                 const struct tree_owner *own, struct tree_stats *st, struct err *err);

/* Copies the regular file sdir/src (resolved beneath sdir, no link
 * followed) to dirfd/name (replacing a stale name, created O_EXCL), its
 * mode plus the owner's read/write bits, owned by own when not NULL,
 * flushed to disk. */
int tree_copy_file(int sdir, const char *src, int dirfd, const char *name,
                   const struct tree_owner *own, struct err *err);

/* Moves dirfd/from to dirfd/to unless to exists (EEXIST then). Falls back
 * to link+unlink where the filesystem lacks RENAME_NOREPLACE. */
int tree_rename_noreplace(int dirfd, const char *from, const char *to);
/* Atomically swaps dirfd/a and dirfd/b (RENAME_EXCHANGE); -1 with errno
 * (EINVAL where the filesystem cannot). */
int tree_rename_exchange(int dirfd, const char *a, const char *b);
/* Removes dirfd/name and everything under it, not following symlinks;
 * ENOENT is success. */
int tree_remove(int dirfd, const char *name, struct err *err);

#endif
