#include "accounts.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "err.h"
#include "log.h"
#include "safepath.h"

/* A uid or gid: decimal digits only, below (uid_t)-1, which the kernel
 * reads as "no change". strtoul would take "-1", " 7" or "7x". */
static int parse_id(const char *s, uint32_t *out)
{
    uint64_t v = 0;

    if (!*s)
        return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return -1;
        v = v * 10 + (uint64_t)(*s - '0');
        if (v >= UINT32_MAX)
            return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

/* Splits line at ':' into at most max fields; returns how many. */
static size_t split_fields(char *line, char **f, size_t max)
{
    size_t k = 0;

    while (k < max) {
        f[k++] = line;
        char *c = strchr(line, ':');
        if (!c)
            break;
        *c = '\0';
        line = c + 1;
    }
    return k;
}

/* Copies text and walks its lines: each is NUL-terminated in the copy
 * and handed to take (which keeps pointers into the copy). A line with
 * a NUL byte in it is skipped. Returns the copy, or NULL (errno, and
 * the reason in err). */
typedef int (*line_fn)(void *ctx, char *line);

static char *walk_lines(const char *text, size_t len, line_fn take, void *ctx, struct err *err)
{
    if (len > ACCOUNTS_FILE_MAX) {
        err_set(err, "larger than %d bytes", ACCOUNTS_FILE_MAX);
        errno = EFBIG;
        return NULL;
    }
    char *copy = malloc(len + 1);
    if (!copy) {
        err_set(err, "out of memory");
        errno = ENOMEM;
        return NULL;
    }
    memcpy(copy, text, len);
    copy[len] = '\0';
    for (size_t at = 0; at < len;) {
        char *line = copy + at;
        char *nl = memchr(line, '\n', len - at);
        size_t ll = nl ? (size_t)(nl - line) : len - at;
        at += ll + 1;
        line[ll] = '\0';
        if (ll && line[ll - 1] == '\r')
            line[--ll] = '\0';
        if (strlen(line) != ll)
            continue; /* a NUL byte inside */
        if (!line[0] || line[0] == '#')
            continue;
        if (take(ctx, line) < 0) {
            int e = errno;
            if (e == E2BIG)
                err_set(err, "more than %d entries", ACCOUNTS_MAX_ENTRIES);
            else
                err_set(err, "out of memory");
            free(copy);
            errno = e;
            return NULL;
        }
    }
    return copy;
}

/* Grows *arr (of elem bytes) to hold n + 1 entries, within the bound. */
static int room_for(void **arr, size_t n, size_t elem, size_t *cap)
{
    if (n >= ACCOUNTS_MAX_ENTRIES) {
        errno = E2BIG;
        return -1;
    }
    if (n < *cap)
        return 0;
    size_t nc = *cap ? *cap * 2 : 64;
    if (nc > ACCOUNTS_MAX_ENTRIES)
        nc = ACCOUNTS_MAX_ENTRIES;
    void *p = realloc(*arr, nc * elem);
    if (!p) {
        errno = ENOMEM;
        return -1;
    }
    *arr = p;
    *cap = nc;
    return 0;
}

struct pw_ctx {
    struct accounts_user *users;
    size_t n, cap;
};

/* name:password:uid:gid:gecos:home[:shell] */
static int take_user(void *vctx, char *line)
{
    struct pw_ctx *c = vctx;
    char *f[7];
    uint32_t uid, gid;

    if (split_fields(line, f, 7) < 6 || !f[0][0] || parse_id(f[2], &uid) < 0 ||
        parse_id(f[3], &gid) < 0)
        return 0;
    if (room_for((void **)&c->users, c->n, sizeof(*c->users), &c->cap) < 0)
        return -1;
    c->users[c->n++] = (struct accounts_user){f[0], (uid_t)uid, (gid_t)gid, f[5]};
    return 0;
}

struct gr_ctx {
    struct accounts_group *groups;
    size_t n, cap;
};

/* name:password:gid[:member,member,...] */
static int take_group(void *vctx, char *line)
{
    struct gr_ctx *c = vctx;
    char *f[4];
    uint32_t gid;
    size_t k = split_fields(line, f, 4);

    if (k < 3 || !f[0][0] || parse_id(f[2], &gid) < 0)
        return 0;
    if (room_for((void **)&c->groups, c->n, sizeof(*c->groups), &c->cap) < 0)
        return -1;
    c->groups[c->n++] = (struct accounts_group){f[0], (gid_t)gid, k == 4 ? f[3] : ""};
    return 0;
}

static void clear_passwd(struct accounts *a)
{
    free(a->pw_text);
    free(a->users);
    a->pw_text = NULL;
    a->users = NULL;
    a->n_users = 0;
    a->pw_problem[0] = '\0';
}

static void clear_group(struct accounts *a)
{
    free(a->gr_text);
    free(a->groups);
    a->gr_text = NULL;
    a->groups = NULL;
    a->n_groups = 0;
    a->gr_problem[0] = '\0';
}

int accounts_parse_passwd(struct accounts *a, const char *text, size_t len)
{
    struct pw_ctx c = {0};

    clear_passwd(a);
    struct err why;
    char *copy = walk_lines(text, len, take_user, &c, &why);
    if (!copy) {
        int e = errno;
        snprintf(a->pw_problem, sizeof(a->pw_problem), "%s", why.msg);
        free(c.users);
        errno = e;
        return -1;
    }
    a->pw_text = copy;
    a->users = c.users;
    a->n_users = c.n;
    return 0;
}

int accounts_parse_group(struct accounts *a, const char *text, size_t len)
{
    struct gr_ctx c = {0};

    clear_group(a);
    struct err why;
    char *copy = walk_lines(text, len, take_group, &c, &why);
    if (!copy) {
        int e = errno;
        snprintf(a->gr_problem, sizeof(a->gr_problem), "%s", why.msg);
        free(c.groups);
        errno = e;
        return -1;
    }
    a->gr_text = copy;
    a->groups = c.groups;
    a->n_groups = c.n;
    return 0;
}

/* Reads path whole, at most ACCOUNTS_FILE_MAX bytes (one more is read
 * to tell a file at the bound from one past it). 1: absent; 0: read
 * into *out; -1: the reason in problem. */
static int read_file(const char *path, char **out, size_t *len, struct err *err)
{
    int fd = safepath_open_abs(path, O_RDONLY, 0, err);

    if (fd < 0 && errno == ENOENT)
        return 1;
    if (fd < 0)
        return -1;
    char *buf = malloc(ACCOUNTS_FILE_MAX + 1);
    size_t n = 0;
    if (!buf) {
        close(fd);
        return err_set(err, "out of memory");
    }
    while (n <= ACCOUNTS_FILE_MAX) {
        ssize_t r = read(fd, buf + n, ACCOUNTS_FILE_MAX + 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            err_set(err, "%s", strerror(errno));
            free(buf);
            close(fd);
            return -1;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    if (n > ACCOUNTS_FILE_MAX) {
        free(buf);
        return err_set(err, "larger than %d bytes", ACCOUNTS_FILE_MAX);
    }
    *out = buf;
    *len = n;
    return 0;
}

int accounts_read(struct accounts *a, const char *passwd, const char *group)
{
    int rc = 0;
    char *text;
    size_t len;
    struct err why;

    if (passwd) {
        clear_passwd(a);
        int r = read_file(passwd, &text, &len, &why);
        if (r < 0) {
            snprintf(a->pw_problem, sizeof(a->pw_problem), "%s", why.msg);
            rc = -1;
        }
        if (r == 0) {
            if (accounts_parse_passwd(a, text, len) < 0)
                rc = -1;
            free(text);
        }
    }
    if (group) {
        clear_group(a);
        int r = read_file(group, &text, &len, &why);
        if (r < 0) {
            snprintf(a->gr_problem, sizeof(a->gr_problem), "%s", why.msg);
            rc = -1;
        }
        if (r == 0) {
            if (accounts_parse_group(a, text, len) < 0)
                rc = -1;
            free(text);
        }
    }
    return rc;
}

void accounts_free(struct accounts *a)
{
    clear_passwd(a);
    clear_group(a);
}

int accounts_user(const struct accounts *a, const char *name, uid_t *uid, gid_t *gid, char *home,
                  size_t homelen)
{
    uint32_t num;
    bool numeric = parse_id(name, &num) == 0;

    for (size_t i = 0; i < a->n_users; i++) {
        const struct accounts_user *u = &a->users[i];
        if (numeric ? u->uid == (uid_t)num : strcmp(u->name, name) == 0) {
            *uid = u->uid;
            *gid = u->gid;
            snprintf(home, homelen, "%s", u->home[0] ? u->home : "/");
            return 0;
        }
    }
    if (numeric) {
        /* A uid with no entry is still usable: group = uid. */
        *uid = (uid_t)num;
        *gid = (gid_t)num;
        snprintf(home, homelen, "/");
        return 0;
    }
    errno = ENOENT;
    return -1;
}

int accounts_user_group(const struct accounts *a, const char *user, const char *group, uid_t *uid,
                        gid_t *gid, struct err *err)
{
    char home[8];
    uid_t u = *uid;
    gid_t g = *gid;

    if (user && accounts_user(a, user, &u, &g, home, sizeof(home)) < 0)
        return err_set(err, "no user \"%s\" in the image's %s (read at boot)", user,
                       ACCOUNTS_PASSWD);
    if (group && accounts_group(a, group, &g) < 0)
        return err_set(err, "no group \"%s\" in the image's %s (read at boot)", group,
                       ACCOUNTS_GROUP);
    *uid = u;
    *gid = g;
    return 0;
}

int accounts_owner(const struct accounts *a, const char *spec, uid_t *uid, gid_t *gid, struct err *err)
{
    char user[128];
    const char *colon = strchr(spec, ':');
    size_t n = colon ? (size_t)(colon - spec) : strlen(spec);

    if (n == 0 || n >= sizeof(user) || (colon && !colon[1])) {
        err_set(err, "\"%s\" is not USER or USER:GROUP", spec);
        errno = EINVAL;
        return -1;
    }
    memcpy(user, spec, n);
    user[n] = '\0';
    return accounts_user_group(a, user, colon ? colon + 1 : NULL, uid, gid, err);
}

int accounts_group(const struct accounts *a, const char *name, gid_t *gid)
{
    uint32_t num;

    if (parse_id(name, &num) == 0) {
        *gid = (gid_t)num;
        return 0;
    }
    for (size_t i = 0; i < a->n_groups; i++)
        if (strcmp(a->groups[i].name, name) == 0) {
            *gid = a->groups[i].gid;
            return 0;
        }
    errno = ENOENT;
    return -1;
}

/* Whether the comma-separated list names user exactly. */
static bool lists(const char *members, const char *user)
{
    size_t ul = strlen(user);

    for (const char *m = members; *m;) {
        size_t l = strcspn(m, ",");
        if (l == ul && memcmp(m, user, ul) == 0)
            return true;
        m += l;
        if (*m == ',')
            m++;
    }
    return false;
}

size_t accounts_member_groups(const struct accounts *a, const char *user, gid_t primary,
                              gid_t *out, size_t max)
{
    size_t n = 0;

    for (size_t i = 0; i < a->n_groups && n < max; i++)
        if (a->groups[i].gid != primary && lists(a->groups[i].members, user))
            out[n++] = a->groups[i].gid;
    return n;
}

static struct accounts snapshot;
static bool taken;

void accounts_boot(void)
{
    if (taken)
        return;
    taken = true;
    if (accounts_read(&snapshot, ACCOUNTS_PASSWD, ACCOUNTS_GROUP) < 0) {
        if (snapshot.pw_problem[0])
            log_error("accounts: %s refused: %s; no user resolves by name", ACCOUNTS_PASSWD,
                      snapshot.pw_problem);
        if (snapshot.gr_problem[0])
            log_error("accounts: %s refused: %s; no group resolves by name", ACCOUNTS_GROUP,
                      snapshot.gr_problem);
    }
    log_debug("accounts: %zu users, %zu groups, fixed until hearth restarts", snapshot.n_users,
              snapshot.n_groups);
}

const struct accounts *accounts_snapshot(void)
{
    return &snapshot;
}
