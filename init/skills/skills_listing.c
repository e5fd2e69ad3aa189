/* skills_listing: the indexed directory listing the reconcile walks, the
 * ignore globs, the layout and the names hearth reserves (what both the
 * names scan and the reconcile read), and the links cache kept between
 * runs (and its bytes, for a run in a child process). */
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
    return strcmp(n, SKILLS_TMP_LINK) == 0 || strcmp(n, SKILLS_TMP_FORK) == 0 ||
           strcmp(n, SKILLS_TMP_CATEGORY) == 0 || strcmp(n, SKILLS_CATEGORY_MARK) == 0 ||
           strcmp(n, ".hub") == 0 || strcmp(n, ".bundled_manifest") == 0;
}

uint32_t skills_hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

void skills_listing_free(struct listing *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].name);
        free(l->v[i].target);
    }
    free(l->v);
    free(l->slot);
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
    e->name = strdup(de->d_name);
    if (!e->name)
        return err_set(err, "unable to read %s: out of memory", path);
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


struct skills_cache *skills_cache_new(void)
{
    return calloc(1, sizeof(struct skills_cache));
}

void skills_cache_free(struct skills_cache *k)
{
    if (k) {
        skills_listing_free(&k->links);
        free(k);
    }
}

/* The cache as bytes, so a reconcile run in a child process can hand
 * what it learnt back to the loop: a u32 run count, a u32 link count,
 * then per link a u64 inode, a u32 key length and the key. Native byte order: both ends are
 * the same binary. */
#define CACHE_KEY_MAX 4096

int skills_cache_encode(const struct skills_cache *k, size_t max, char **out, size_t *outlen)
{
    size_t need = 8;
    uint32_t runs = k->runs, count = (uint32_t)k->links.n;

    *out = NULL;
    *outlen = 0;
    for (size_t i = 0; i < k->links.n; i++)
        need += 12 + strlen(k->links.v[i].name);
    if (need > max)
        return -1;
    char *b = malloc(need), *p = b;
    if (!b)
        return -1;
    memcpy(p, &runs, 4);
    memcpy(p + 4, &count, 4);
    p += 8;
    for (size_t i = 0; i < k->links.n; i++) {
        const struct ent *e = &k->links.v[i];
        uint64_t ino = (uint64_t)e->ino;
        uint32_t kl = (uint32_t)strlen(e->name);
        memcpy(p, &ino, 8);
        memcpy(p + 8, &kl, 4);
        memcpy(p + 12, e->name, kl);
        p += 12 + kl;
    }
    *out = b;
    *outlen = need;
    return 0;
}

int skills_cache_load(struct skills_cache *k, const char *buf, size_t len)
{
    struct listing l = {0};
    uint32_t runs, count;
    size_t off = 8;

    if (len < 8)
        return -1;
    memcpy(&runs, buf, 4);
    memcpy(&count, buf + 4, 4);
    if (count > SKILLS_MAX_TOTAL)
        return -1;
    while (off < len) {
        uint64_t ino;
        uint32_t kl;
        if (len - off < 12)
            goto bad;
        memcpy(&ino, buf + off, 8);
        memcpy(&kl, buf + off + 8, 4);
        off += 12;
        if (kl == 0 || kl >= CACHE_KEY_MAX || kl > len - off || memchr(buf + off, 0, kl))
            goto bad;
        if (l.n == l.cap) {
            size_t nc = l.cap ? l.cap * 2 : 256;
            struct ent *nv = realloc(l.v, nc * sizeof(*nv));
            if (!nv)
                goto bad;
            l.v = nv;
            l.cap = nc;
        }
        char *name = strndup(buf + off, kl);
        if (!name)
            goto bad;
        l.v[l.n++] = (struct ent){.name = name, .ino = (ino_t)ino, .kind = ENT_LINK};
        off += kl;
    }
    if (l.n != count || skills_listing_index(&l) < 0)
        goto bad;
    skills_listing_free(&k->links);
    k->links = l;
    k->runs = runs;
    return 0;
bad:
    skills_listing_free(&l);
    return -1;
}

void skills_cache_reset(struct skills_cache *k)
{
    skills_listing_free(&k->links);
    k->runs++;
}
