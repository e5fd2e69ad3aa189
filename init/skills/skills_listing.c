/* skills_listing: the indexed directory listing the reconcile walks, the
 * ignore globs, the layout and the names hearth reserves (what both the
 * names scan and the reconcile read), and the markers remembered by the
 * stat that vouches for them. */
#include "skills_priv.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cJSON.h>

#include "config.h"
#include "err.h"
#include "log.h"
#include "safepath.h"

/* The layout: the file that makes a directory a skill, and how many
 * levels deep categories go (1: every top-level entry is a skill). */
char skills_layout_marker[256] = CONFIG_SKILLS_MARKER;
int skills_layout_depth = CONFIG_SKILLS_DEPTH;

void skills_layout(const char *marker, int depth)
{
    snprintf(skills_layout_marker, sizeof(skills_layout_marker), "%s", marker ? marker : CONFIG_SKILLS_MARKER);
    skills_layout_depth = depth < 1 ? 1 : depth > SKILLS_MAX_DEPTH ? SKILLS_MAX_DEPTH : depth;
}

/* Names hearth keeps for itself or leaves to Hermes: never linked, never
 * merged, never removed. */
bool skills_reserved_name(const char *n)
{
    /* Every one is a dot-name: the common case is one comparison. */
    return n[0] == '.' && (strcmp(n, SKILLS_TMP_LINK) == 0 || strcmp(n, SKILLS_TMP_FORK) == 0 ||
           strcmp(n, SKILLS_TMP_CATEGORY) == 0 || strcmp(n, SKILLS_CATEGORY_MARK) == 0 ||
           strcmp(n, ".hub") == 0 || strcmp(n, ".bundled_manifest") == 0);
}

/* Eight bytes a step (a no-op pass hashes every name and path a few
 * times: byte by byte, that was a fifth of its instructions), then a
 * final mix so the low bits the tables use depend on every byte. */
uint32_t skills_hash(const char *s)
{
    size_t n = strlen(s);
    uint64_t h = 0x9e3779b97f4a7c15u ^ n, w;

    for (; n >= 8; n -= 8, s += 8) {
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdu;
        h ^= h >> 32;
    }
    w = 0;
    memcpy(&w, s, n);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53u;
    h ^= h >> 29;
    h *= 0xff51afd7ed558ccdu;
    h ^= h >> 32;
    return (uint32_t)h;
}

void skills_listing_free(struct listing *l)
{
    for (size_t i = 0; i < l->n; i++) {
        if (!l->pool)
            free(l->v[i].name);
        free(l->v[i].target);
    }
    free(l->v);
    free(l->slot);
    free(l->pool);
    memset(l, 0, sizeof(*l));
}

int skills_listing_index(struct listing *l)
{
    size_t size = 16;
    while (size < l->n * 2)
        size <<= 1;
    l->slot = calloc(size, sizeof(*l->slot));
    if (!l->slot)
        return -1;
    l->mask = size - 1;
    for (size_t i = 0; i < l->n; i++) {
        size_t h = skills_hash(l->v[i].name) & l->mask;
        while (l->slot[h])
            h = (h + 1) & l->mask;
        l->slot[h] = (uint32_t)(i + 1);
    }
    return 0;
}

struct ent *skills_listing_find(const struct listing *l, const char *name)
{
    if (!l->slot)
        return NULL;
    for (size_t h = skills_hash(name) & l->mask; l->slot[h]; h = (h + 1) & l->mask) {
        struct ent *e = &l->v[l->slot[h] - 1];
        if (strcmp(e->name, name) == 0)
            return e;
    }
    return NULL;
}

static bool skip_name(const char *n)
{
    return strcmp(n, ".") == 0 || strcmp(n, "..") == 0;
}

/* The kernel's getdents64 record. */
struct dirent64_raw {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

static int listing_add(struct listing *l, int fd, const struct dirent64_raw *de, const char *path,
                       struct err *err)
{
    if (l->n >= SKILLS_MAX_ENTRIES)
        return err_set(err, "unable to read %s: more than %d entries", path, SKILLS_MAX_ENTRIES);
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 256;
        struct ent *nv = realloc(l->v, nc * sizeof(*nv));
        if (!nv)
            return err_set(err, "unable to read %s: out of memory", path);
        l->v = nv;
        l->cap = nc;
    }
    struct ent *e = &l->v[l->n];
    memset(e, 0, sizeof(*e));
    /* Into the pool; its offset stands in for the pointer until the
     * whole directory is read (the pool may move as it grows). */
    size_t nl = strlen(de->d_name) + 1;
    if (l->pool_len + nl > l->pool_cap) {
        size_t nc = l->pool_cap ? l->pool_cap * 2 : 4096;
        while (nc < l->pool_len + nl)
            nc *= 2;
        char *np = realloc(l->pool, nc);
        if (!np)
            return err_set(err, "unable to read %s: out of memory", path);
        l->pool = np;
        l->pool_cap = nc;
    }
    memcpy(l->pool + l->pool_len, de->d_name, nl);
    e->name = (char *)(uintptr_t)l->pool_len;
    l->pool_len += nl;
    l->n++;
    unsigned char t = de->d_type;
    if (t == DT_UNKNOWN) {
        struct stat s;
        if (fstatat(fd, de->d_name, &s, AT_SYMLINK_NOFOLLOW) == 0)
            t = S_ISLNK(s.st_mode) ? DT_LNK : S_ISDIR(s.st_mode) ? DT_DIR : DT_REG;
    }
    e->kind = t == DT_LNK ? ENT_LINK : t == DT_DIR ? ENT_DIR : ENT_OTHER;
    e->ino = (ino_t)de->d_ino;
    return 0;
}

/* Reads fd (consumed) into l. getdents64 with a 64 KiB buffer rather
 * than readdir's 2 KiB: a 10,000-entry directory in a dozen calls. */
char *skills_dents_buf;

int skills_listing_read(struct listing *l, int fd, const char *path, struct err *err)
{
    char *buf = skills_dents_buf ? skills_dents_buf : malloc(GETDENTS_BUF);
    int rc = 0;

    if (!buf) {
        err_set(err, "unable to read %s: out of memory", path);
        close(fd);
        return -1;
    }
    for (;;) {
        long n = syscall(SYS_getdents64, fd, buf, GETDENTS_BUF);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            err_unable(err, errno, "read %s", path);
            rc = -1;
            break;
        }
        if (n == 0)
            break;
        for (long off = 0; off < n && rc == 0;) {
            const struct dirent64_raw *de = (const struct dirent64_raw *)(buf + off);
            off += de->d_reclen;
            if (!skip_name(de->d_name))
                rc = listing_add(l, fd, de, path, err);
        }
        if (rc < 0)
            break;
    }
    if (buf != skills_dents_buf)
        free(buf);
    close(fd);
    /* An empty listing is pooled too: no name of it is freed on its own. */
    if (!l->pool && (l->pool = malloc(1)) == NULL) {
        if (rc == 0)
            err_set(err, "unable to read %s: out of memory", path);
        rc = -1;
    }
    for (size_t i = 0; l->pool && i < l->n; i++)
        l->v[i].name = l->pool + (uintptr_t)l->v[i].name;
    if (rc == 0 && skills_listing_index(l) < 0) {
        err_set(err, "unable to index %s: out of memory", path);
        rc = -1;
    }
    return rc;
}

/* [set] at p (just past '['): whether c is in it; *end gets the byte
 * after ']'. An unterminated set is a literal '['. */
static bool glob_set(const char *p, char c, const char **end)
{
    bool neg = *p == '!' || *p == '^', hit = false;
    const char *q = p + neg;

    if (*q == ']')
        hit = c == ']', q++; /* a leading ']' is literal */
    for (; *q && *q != ']'; q++) {
        if (q[1] == '-' && q[2] && q[2] != ']') {
            hit |= (unsigned char)c >= (unsigned char)q[0] && (unsigned char)c <= (unsigned char)q[2];
            q += 2;
        } else {
            hit |= *q == c;
        }
    }
    if (!*q) {
        *end = NULL;
        return false;
    }
    *end = q + 1;
    return hit != neg;
}

/* Shell-style glob on one name: '*', '?', '[...]', '\' escapes; a
 * leading '.' is not special (".*" is how dotfiles are ignored). Small on
 * purpose: libc's fnmatch brings locale tables into a static binary. */
bool skills_glob(const char *pat, const char *s)
{
    const char *star = NULL, *resume = NULL;

    while (*s) {
        if (*pat == '*') {
            star = ++pat;
            resume = s;
            continue;
        }
        if (*pat == '?') {
            pat++, s++;
            continue;
        }
        if (*pat == '[') {
            const char *end;
            bool in = glob_set(pat + 1, *s, &end);
            if (end && in) {
                pat = end, s++;
                continue;
            }
            if (end)
                goto mismatch;
            /* unterminated: a literal '[' */
        }
        size_t adv = *pat == '\\' && pat[1] ? 2 : 1;
        if (*pat && pat[adv - 1] == *s) {
            pat += adv, s++;
            continue;
        }
mismatch:
        if (!star)
            return false;
        pat = star;
        s = ++resume;
    }
    while (*pat == '*')
        pat++;
    return *pat == '\0';
}

bool skills_is_ignored(const char *name, const char *const *ignore)
{
    for (; ignore && *ignore; ignore++)
        if (skills_glob(*ignore, name))
            return true;
    return false;
}

void skills_list_add(cJSON *arr, const char *name)
{
    if (arr)
        cJSON_AddItemToArray(arr, cJSON_CreateString(name));
}

/* The public path without trailing slashes, as links spell it. */
size_t skills_norm_len(const char *p)
{
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/')
        n--;
    return n;
}


void skills_marks_free(struct marks *m)
{
    for (size_t i = 0; i < m->n; i++) {
        free(m->v[i].path);
        free(m->v[i].name);
    }
    free(m->v);
    free(m->slot);
    memset(m, 0, sizeof(*m));
}

static int64_t ts_ns(struct timespec t)
{
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

bool skills_mark_same(const struct mark *m, const struct stat *s)
{
    return m->dev == (uint64_t)s->st_dev && m->ino == (uint64_t)s->st_ino &&
           m->size == (uint64_t)s->st_size && m->mtime_ns == ts_ns(s->st_mtim) &&
           m->ctime_ns == ts_ns(s->st_ctim);
}

int skills_marks_push(struct marks *m, struct mark k)
{
    if (m->n == m->cap) {
        size_t nc = m->cap ? m->cap * 2 : 256;
        struct mark *nv = realloc(m->v, nc * sizeof(*nv));
        if (!nv)
            return -1;
        m->v = nv;
        m->cap = nc;
    }
    m->v[m->n++] = k;
    return 0;
}

int skills_marks_add(struct marks *m, bool priv, const char *path, const char *name,
                     const struct stat *s)
{
    struct mark k = {.path = strdup(path), .name = strdup(name), .priv = priv,
                     .dev = (uint64_t)s->st_dev, .ino = (uint64_t)s->st_ino,
                     .size = (uint64_t)s->st_size, .mtime_ns = ts_ns(s->st_mtim),
                     .ctime_ns = ts_ns(s->st_ctim)};
    if (!k.path || !k.name || skills_marks_push(m, k) < 0) {
        free(k.path);
        free(k.name);
        return -1;
    }
    return 0;
}

static size_t mark_hash(bool priv, const char *path)
{
    return skills_hash(path) ^ (priv ? 0x9e3779b9u : 0);
}

int skills_marks_index(struct marks *m)
{
    size_t size = 16;
    while (size < m->n * 2)
        size <<= 1;
    free(m->slot);
    m->slot = calloc(size, sizeof(*m->slot));
    if (!m->slot)
        return -1;
    m->mask = size - 1;
    for (size_t i = 0; i < m->n; i++) {
        size_t h = mark_hash(m->v[i].priv, m->v[i].path) & m->mask;
        while (m->slot[h])
            h = (h + 1) & m->mask;
        m->slot[h] = (uint32_t)(i + 1);
    }
    return 0;
}

struct mark *skills_marks_find(const struct marks *m, bool priv, const char *path)
{
    if (!m || !m->slot)
        return NULL;
    for (size_t h = mark_hash(priv, path) & m->mask; m->slot[h]; h = (h + 1) & m->mask) {
        struct mark *k = &m->v[m->slot[h] - 1];
        if (k->priv == priv && strcmp(k->path, path) == 0)
            return k;
    }
    return NULL;
}
