/* accounts: the image's users and groups (/etc/passwd, /etc/group, no
 * NSS) as they were at boot. main takes the snapshot once, right after
 * the config loads and before any service runs; every later lookup (a
 * service's start and restart, exec.start's user and group, the owner
 * of a service's log files and private skills) reads the snapshot and
 * never the files again. A root service can rewrite /etc/passwd, but
 * that never changes who a service runs as.
 *
 * Each file is read at most once, bounded (ACCOUNTS_FILE_MAX bytes,
 * ACCOUNTS_MAX_ENTRIES entries), through safepath: a regular file, no
 * symbolic link anywhere on the path, never blocking. A file that is
 * absent leaves its table empty; one that breaks a bound or cannot be
 * read is refused whole (its table empty, the reason kept and logged),
 * so names from it resolve to nothing and the start that names one
 * fails. Numbers need no entry (uid N with no line is uid N, group N). */
#ifndef HEARTH_ACCOUNTS_H
#define HEARTH_ACCOUNTS_H

#include <stddef.h>
#include <sys/types.h>

#include "err.h"

#define ACCOUNTS_FILE_MAX (1024 * 1024)
#define ACCOUNTS_MAX_ENTRIES 8192
#define ACCOUNTS_PASSWD "/etc/passwd"
#define ACCOUNTS_GROUP "/etc/group"

struct accounts_user {
    const char *name;
    uid_t uid;
    gid_t gid;
    const char *home;
};

struct accounts_group {
    const char *name;
    gid_t gid;
    const char *members; /* the comma-separated member list, as written */
};

/* One table per file. text holds the file with its fields split in
 * place; the entries point into it. */
struct accounts {
    char *pw_text, *gr_text;
    struct accounts_user *users;
    size_t n_users;
    struct accounts_group *groups;
    size_t n_groups;
    /* Why a file's table is empty although the file exists ("" when it
     * was read, or is absent): "larger than 1048576 bytes", ... */
    char pw_problem[128], gr_problem[128];
};

/* Parses the text of a passwd / group file into a's table, replacing
 * what it held. Lines that are not entries (comments, too few fields, a
 * uid or gid that is not a decimal number below 2^32 - 1, a NUL byte)
 * are skipped. Returns 0, or -1 with errno EFBIG (text past the bound)
 * or E2BIG (more entries than the bound) or ENOMEM, the reason in the
 * table's problem and the table left empty. */
int accounts_parse_passwd(struct accounts *a, const char *text, size_t len);
int accounts_parse_group(struct accounts *a, const char *text, size_t len);

/* Reads both files into a (empty first); NULL skips one. An absent file
 * is an empty table and no problem. Returns 0 when both were read or
 * absent, else -1 (the problems say why). */
int accounts_read(struct accounts *a, const char *passwd, const char *group);
void accounts_free(struct accounts *a);

/* A user by name, or by number (decimal digits only). The first entry
 * that matches wins, as with getpwnam. A number without an entry is
 * itself, its group the same number and its home "/". Returns 0, or -1
 * with errno ENOENT. */
int accounts_user(const struct accounts *a, const char *name, uid_t *uid, gid_t *gid, char *home,
                  size_t homelen);
/* A group by name or number (a number needs no entry). */
int accounts_group(const struct accounts *a, const char *name, gid_t *gid);
/* An owner given as "USER" (the user's primary group) or "USER:GROUP"
 * (mounts[].owner), and a user and/or group given apart (seed[].user,
 * .group; either may be NULL: the missing part is *uid or *gid as the
 * caller set it, but a user alone brings its primary group). Returns 0,
 * or -1 with errno ENOENT and why ("no user \"x\" in /etc/passwd"). */
int accounts_owner(const struct accounts *a, const char *spec, uid_t *uid, gid_t *gid, struct err *err);
int accounts_user_group(const struct accounts *a, const char *user, const char *group, uid_t *uid,
                        gid_t *gid, struct err *err);
/* The groups that list user as a member, other than primary, in file
 * order, at most max of them. Returns how many were written. */
size_t accounts_member_groups(const struct accounts *a, const char *user, gid_t primary,
                              gid_t *out, size_t max);

/* The process's snapshot: the first call reads ACCOUNTS_PASSWD and
 * ACCOUNTS_GROUP and logs what it found; later calls change nothing. */
void accounts_boot(void);
/* The snapshot; an empty one (every name unknown) before accounts_boot,
 * so nothing can ever read the files late. */
const struct accounts *accounts_snapshot(void);

#endif
