#include "skills.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cJSON.h>
#include <ev.h>

#include "childjob.h"
#include "config.h"
#include "events.h"
#include "gates.h"
#include "hearth.h"
#include "inherit.h"
#include "log.h"
#include "reaper.h"
#include "safepath.h"
#include "service.h"
#include "tree.h"

/* Who owns what hearth makes in private: the agent's service (see
 * skills_init); hearth itself until then. */
static struct tree_owner owner;
static bool owner_set;

static void owner_default(void)
{
    if (!owner_set) {
        owner.uid = geteuid();
        owner.gid = getegid();
    }
}

/* ------------------------------------------------------------------ */
/* A directory listing with a hash index: one readdir per side, then
 * every rule is a lookup, so a no-op pass over 10,000 skills costs two
 * directory reads and one readlink per link. */

enum ent_kind { ENT_OTHER, ENT_LINK, ENT_DIR };

struct ent {
    char *name;
    char *target; /* link text, ENT_LINK only, read on demand */
    ino_t ino;
    enum ent_kind kind;
    bool ignored, read, gone;
    bool category; /* public: a directory without the marker */
    bool ours; /* the cache vouches: a link to pub/name, target not read */
};

struct listing {
    struct ent *v;
    size_t n, cap;
    uint32_t *slot; /* index+1 into v, 0 = empty; size mask+1 */
    size_t mask;
};

static uint32_t hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static void listing_free(struct listing *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].name);
        free(l->v[i].target);
    }
    free(l->v);
    free(l->slot);
    memset(l, 0, sizeof(*l));
}

static int listing_index(struct listing *l)
{
    size_t size = 16;
    while (size < l->n * 2)
        size <<= 1;
    l->slot = calloc(size, sizeof(*l->slot));
    if (!l->slot)
        return -1;
    l->mask = size - 1;
    for (size_t i = 0; i < l->n; i++) {
        size_t h = hash(l->v[i].name) & l->mask;
        while (l->slot[h])
            h = (h + 1) & l->mask;
        l->slot[h] = (uint32_t)(i + 1);
    }
    return 0;
}

static struct ent *listing_find(const struct listing *l, const char *name)
{
    if (!l->slot)
        return NULL;
    for (size_t h = hash(name) & l->mask; l->slot[h]; h = (h + 1) & l->mask) {
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

#define GETDENTS_BUF 65536

static int listing_add(struct listing *l, int fd, const struct dirent64_raw *de, const char *path,
                       char *err, size_t errlen)
{
    if (l->n >= SKILLS_MAX_ENTRIES) {
        snprintf(err, errlen, "unable to read %s: more than %d entries", path, SKILLS_MAX_ENTRIES);
        return -1;
    }
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 256;
        struct ent *nv = realloc(l->v, nc * sizeof(*nv));
        if (!nv) {
            snprintf(err, errlen, "unable to read %s: out of memory", path);
            return -1;
        }
        l->v = nv;
        l->cap = nc;
    }
    struct ent *e = &l->v[l->n];
    memset(e, 0, sizeof(*e));
    e->name = strdup(de->d_name);
    if (!e->name) {
        snprintf(err, errlen, "unable to read %s: out of memory", path);
        return -1;
    }
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
/* The getdents buffer, kept for the length of one reconcile: a run over
 * 100 categories reads 200 directories, and a fresh 64 KiB each time is
 * an mmap, page faults and an munmap per directory. */
static char *dents_buf;

static int listing_read(struct listing *l, int fd, const char *path, char *err, size_t errlen)
{
    char *buf = dents_buf ? dents_buf : malloc(GETDENTS_BUF);
    int rc = 0;

    if (!buf) {
        snprintf(err, errlen, "unable to read %s: out of memory", path);
        close(fd);
        return -1;
    }
    for (;;) {
        long n = syscall(SYS_getdents64, fd, buf, GETDENTS_BUF);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            snprintf(err, errlen, "unable to read %s: %s", path, strerror(errno));
            rc = -1;
            break;
        }
        if (n == 0)
            break;
        for (long off = 0; off < n && rc == 0;) {
            const struct dirent64_raw *de = (const struct dirent64_raw *)(buf + off);
            off += de->d_reclen;
            if (!skip_name(de->d_name))
                rc = listing_add(l, fd, de, path, err, errlen);
        }
        if (rc < 0)
            break;
    }
    if (buf != dents_buf)
        free(buf);
    close(fd);
    if (rc == 0 && listing_index(l) < 0) {
        snprintf(err, errlen, "unable to index %s: out of memory", path);
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

static bool is_ignored(const char *name, const char *const *ignore)
{
    for (; ignore && *ignore; ignore++)
        if (skills_glob(*ignore, name))
            return true;
    return false;
}

static void list_add(cJSON *arr, const char *name)
{
    if (arr)
        cJSON_AddItemToArray(arr, cJSON_CreateString(name));
}

/* The public path without trailing slashes, as links spell it. */
static size_t norm_len(const char *p)
{
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/')
        n--;
    return n;
}

/* Links of ours seen by the last run, by path (category/skill) and
 * inode: a link is immutable, so one still there under the same inode
 * needs no readlink. That keeps a no-op pass to directory reads. */
struct skills_cache {
    struct listing links;
    unsigned runs; /* which slice of cached links has its marker re-checked */
};

/* A link the cache vouches for was a skill when it was made; whether its
 * public entry has since lost the marker (become a category) is checked
 * for one sixteenth of them per run, so a no-op pass over 10,000 flat
 * skills costs ~600 lookups rather than 10,000, and a skill turned into
 * a category is converted within 16 runs. */
#define RECHECK_SLICES 16u

struct skills_cache *skills_cache_new(void)
{
    return calloc(1, sizeof(struct skills_cache));
}

void skills_cache_free(struct skills_cache *k)
{
    if (k) {
        listing_free(&k->links);
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
    if (l.n != count || listing_index(&l) < 0)
        goto bad;
    listing_free(&k->links);
    k->links = l;
    k->runs = runs;
    return 0;
bad:
    listing_free(&l);
    return -1;
}

void skills_cache_reset(struct skills_cache *k)
{
    listing_free(&k->links);
    k->runs++;
}

/* The layout: the file that makes a directory a skill, and how many
 * levels deep categories go (1: every top-level entry is a skill). */
static char layout_marker[256] = SKILLS_MARKER;
static int layout_depth = SKILLS_DEPTH;

void skills_layout(const char *marker, int depth)
{
    snprintf(layout_marker, sizeof(layout_marker), "%s", marker ? marker : SKILLS_MARKER);
    layout_depth = depth < 1 ? 1 : depth > SKILLS_MAX_DEPTH ? SKILLS_MAX_DEPTH : depth;
}

/* One reconcile's state, shared by every level of the walk. */
struct run {
    const char *pub, *priv;
    size_t plen;
    const char *const *ignore;
    bool dry;
    struct skills_counts *c;
    struct skills_lists *lists;
    struct skills_cache *cache;
    struct listing next; /* links of ours, for the next run's cache */
    size_t total;        /* entries read in all directories */
    char *err;
    size_t errlen;
};

/* rel/name, or name at the top ("" rel). */
static void join(char *out, size_t n, const char *rel, const char *name)
{
    /* Twice per entry per run: memcpy, not snprintf. */
    size_t a = strlen(rel), b = strlen(name);
    if (a + 1 + b >= n) {
        snprintf(out, n, "%s/%s", rel, name); /* truncated; only ever a label */
        return;
    }
    memcpy(out, rel, a);
    if (a)
        out[a++] = '/';
    memcpy(out + a, name, b + 1);
}

static void run_error(struct run *r, const char *what, const char *path)
{
    if (r->c->errors++ == 0)
        snprintf(r->err, r->errlen, "unable to %s %s/%s: %s", what, r->priv, path,
                 strerror(errno));
}

/* The text of link v (at path key), read on first use; NULL when it
 * cannot be read, or when the cache vouches for it (v->ours). */
static const char *link_target(int dfd, struct ent *v, const struct skills_cache *k,
                               const char *key)
{
    char buf[4096];

    if (v->read)
        return v->target;
    v->read = true;
    struct ent *hit = k ? listing_find(&k->links, key) : NULL;
    if (hit && hit->ino == v->ino) {
        v->ours = true;
        return NULL;
    }
    ssize_t n = dfd >= 0 ? readlinkat(dfd, v->name, buf, sizeof(buf) - 1) : -1;
    if (n >= 0) {
        buf[n] = '\0';
        v->target = strdup(buf);
    }
    return v->target;
}

static void next_add(struct run *r, const char *key, struct ent *v)
{
    struct listing *nl = &r->next;
    if (r->dry || !r->cache)
        return;
    if (nl->n == nl->cap) {
        size_t nc = nl->cap ? nl->cap * 2 : 256;
        struct ent *nv = realloc(nl->v, nc * sizeof(*nv));
        if (!nv)
            return; /* the cache is an optimisation: a miss costs a readlink */
        nl->v = nv;
        nl->cap = nc;
    }
    /* At the top the key is the entry's own name: moved, not copied. */
    char *k = strcmp(key, v->name) == 0 ? v->name : strdup(key);
    if (k == v->name)
        v->name = NULL;
    if (k)
        nl->v[nl->n++] = (struct ent){.name = k, .ino = v->ino, .kind = ENT_LINK};
}

/* Names hearth keeps for itself or leaves to Hermes: never linked, never
 * merged, never removed. */
static bool reserved_name(const char *n)
{
    return strcmp(n, SKILLS_TMP_LINK) == 0 || strcmp(n, SKILLS_TMP_FORK) == 0 ||
           strcmp(n, SKILLS_TMP_CATEGORY) == 0 || strcmp(n, SKILLS_CATEGORY_MARK) == 0 ||
           strcmp(n, ".hub") == 0 || strcmp(n, ".bundled_manifest") == 0;
}

/* Whether public entry p (a directory) is a category: no marker file in
 * it. A dot-name is never one (hidden trees are not Hermes categories).
 * Any error but ENOENT reads as "a skill": linking it whole is the
 * behaviour of a flat overlay, never a loss. */
static bool is_category(int pfd, const struct ent *p, int level)
{
    char m[600];
    struct stat s;

    if (level >= layout_depth || p->kind != ENT_DIR || p->name[0] == '.')
        return false;
    snprintf(m, sizeof(m), "%s/%s", p->name, layout_marker);
    return fstatat(pfd, m, &s, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT;
}

/* Whether vfd/name holds the skill marker (a skill, not a category). */
static bool has_marker(int vfd, const char *name)
{
    char m[600];
    struct stat s;

    snprintf(m, sizeof(m), "%s/%s", name, layout_marker);
    return fstatat(vfd, m, &s, AT_SYMLINK_NOFOLLOW) == 0;
}

/* Whether the private directory vfd/name carries hearth's category mark
 * (made by hearth, so hearth may remove it once empty). */
static bool made_by_hearth(int vfd, const char *name)
{
    char m[600];
    struct stat s;

    snprintf(m, sizeof(m), "%s/%s", name, SKILLS_CATEGORY_MARK);
    return vfd >= 0 && fstatat(vfd, m, &s, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(s.st_mode);
}

static void cat_add(struct run *r, const char *path, const char *how)
{
    cJSON *o;
    if (!r->lists->categories || !(o = cJSON_CreateObject()))
        return;
    cJSON_AddStringToObject(o, "name", path);
    cJSON_AddStringToObject(o, "private", how);
    cJSON_AddItemToArray(r->lists->categories, o);
}

/* Makes vfd/SKILLS_TMP_CATEGORY, a directory owned by the agent holding
 * the category mark, and returns it open. The mark is written before the
 * directory gets its real name, so a category directory hearth made
 * always carries it, whatever crash comes in between: the mark inside
 * the directory (rather than a state file beside it) cannot disagree
 * with the directory it describes, and travels with the home. */
static int category_make(struct run *r, int vfd, const char *path)
{
    char why[128], e2[128];

    if (tree_remove(vfd, SKILLS_TMP_CATEGORY, e2, sizeof(e2)) < 0) {
        run_error(r, "clear a temporary category beside", path);
        return -1;
    }
    int tfd = safepath_mkdir(vfd, SKILLS_TMP_CATEGORY, 0755, owner.uid, owner.gid, NULL, why,
                             sizeof(why));
    if (tfd < 0) {
        run_error(r, "create a category directory for", path);
        return -1;
    }
    int mfd = openat(tfd, SKILLS_CATEGORY_MARK,
                     O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0644);
    if (mfd < 0) {
        int e = errno;
        close(tfd);
        tree_remove(vfd, SKILLS_TMP_CATEGORY, e2, sizeof(e2));
        errno = e;
        run_error(r, "mark the category directory for", path);
        return -1;
    }
    if ((owner.uid != geteuid() || owner.gid != getegid()) && fchown(mfd, owner.uid, owner.gid) < 0)
        log_debug("skills: unable to chown the mark of %s/%s: %s", r->priv, path, strerror(errno));
    close(mfd);
    return tfd;
}

static int reconcile_level(struct run *r, int pfd, int vfd, const char *rel, int level,
                           size_t *left);

/* Descends into category name: public pfd/name (or nothing when cpfd is
 * -1: the public category is gone) against the private directory cvfd
 * (-1: not there yet, a dry run). */
static void descend(struct run *r, int cpfd, int cvfd, const char *path, int level, size_t *left)
{
    size_t dummy;
    reconcile_level(r, cpfd, cvfd, path, level + 1, left ? left : &dummy);
}

/* The public category p at rel, against whatever private holds under its
 * name. */
static void merge_category(struct run *r, int pfd, int vfd, struct listing *vl, struct ent *p,
                           const char *rel, int level, const char *target)
{
    char path[4096], why[128], e2[128];
    struct ent *v = listing_find(vl, p->name);

    join(path, sizeof(path), rel, p->name);
    int cpfd = openat(pfd, p->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (cpfd < 0) {
        if (r->c->errors++ == 0)
            snprintf(r->err, r->errlen, "unable to open %s/%s: %s", r->pub, path,
                     strerror(errno));
        return;
    }
    r->c->categories++;
    if (v && v->kind == ENT_DIR) {
        /* A real directory, the agent's own or one hearth made: merged.
         * Opened beneath private's fd without following a link, so one
         * swapped in since the listing is refused, never entered. */
        int cvfd = safepath_open(vfd, p->name, O_DIRECTORY, 0, why, sizeof(why));
        if (cvfd < 0 && (errno == ELOOP || errno == ENOTDIR || errno == ENOENT)) {
            /* Replaced by the agent since the listing: its entry wins. */
            r->c->shadowed++;
            list_add(r->lists->shadowed, path);
        } else if (cvfd < 0) {
            run_error(r, "open category", path);
        } else {
            if (r->lists->categories)
                cat_add(r, path, made_by_hearth(vfd, p->name) ? "hearth" : "own");
            descend(r, cpfd, cvfd, path, level, NULL);
            close(cvfd);
        }
        close(cpfd);
        return;
    }
    const char *lt = v && v->kind == ENT_LINK ? link_target(vfd, v, r->cache, path) : NULL;
    if (v && !v->ours && !(lt && strcmp(lt, target) == 0)) {
        /* A file, or a link of the agent's (never followed): it wins. */
        r->c->shadowed++;
        list_add(r->lists->shadowed, path);
        cat_add(r, path, "shadowed");
        close(cpfd);
        return;
    }
    if (r->dry) {
        /* Would be made (or converted): what it would hold. */
        cat_add(r, path, v ? "linked whole" : "pending");
        descend(r, cpfd, -1, path, level, NULL);
        close(cpfd);
        return;
    }
    int tfd = category_make(r, vfd, path);
    if (tfd < 0) {
        close(cpfd);
        return;
    }
    if (!v) {
        /* Named first, filled after: each link inside is atomic on its
         * own, and a crash midway leaves a marked category the next run
         * completes. */
        if (tree_rename_noreplace(vfd, SKILLS_TMP_CATEGORY, p->name) < 0) {
            int e = errno;
            close(tfd);
            tree_remove(vfd, SKILLS_TMP_CATEGORY, e2, sizeof(e2));
            errno = e;
            if (e != EEXIST) {
                run_error(r, "create category", path);
            } else {
                /* The agent made it meanwhile: its own, merged next run. */
                r->c->shadowed++;
                list_add(r->lists->shadowed, path);
            }
            close(cpfd);
            return;
        }
        r->c->cat_created++;
        cat_add(r, path, "hearth");
        descend(r, cpfd, tfd, path, level, NULL);
        close(tfd);
        close(cpfd);
        return;
    }
    /* A category linked whole by an older hearth: the directory with its
     * per-skill links is filled under the temporary name, then swapped
     * with the link in one rename (RENAME_EXCHANGE), so the agent sees
     * either the old link or the new directory, never neither. */
    descend(r, cpfd, tfd, path, level, NULL);
    close(cpfd);
    struct stat s;
    if (tree_rename_exchange(vfd, SKILLS_TMP_CATEGORY, p->name) == 0) {
        if (fstatat(vfd, SKILLS_TMP_CATEGORY, &s, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISLNK(s.st_mode)) {
            /* The agent replaced the link meanwhile: its entry goes back. */
            if (tree_rename_exchange(vfd, SKILLS_TMP_CATEGORY, p->name) < 0)
                run_error(r, "restore", path);
            r->c->shadowed++;
            list_add(r->lists->shadowed, path);
        } else {
            r->c->cat_converted++;
            cat_add(r, path, "hearth");
        }
    } else if (errno == EINVAL || errno == ENOSYS) {
        /* No exchange here: the name is briefly absent. */
        if ((unlinkat(vfd, p->name, 0) < 0 && errno != ENOENT) ||
            tree_rename_noreplace(vfd, SKILLS_TMP_CATEGORY, p->name) < 0) {
            run_error(r, "convert linked category", path);
        } else {
            r->c->cat_converted++;
            cat_add(r, path, "hearth");
        }
    } else {
        run_error(r, "convert linked category", path);
    }
    v->gone = true;
    close(tfd);
    tree_remove(vfd, SKILLS_TMP_CATEGORY, e2, sizeof(e2));
}

/* A private directory that is not (or no longer) a public category: when
 * hearth made it, its links are judged against an empty public, and it
 * goes once nothing else is in it. An agent's directory is never
 * entered. */
static void retire_category(struct run *r, int vfd, struct ent *v, const char *rel, int level,
                            bool listed)
{
    char path[4096], why[128];
    size_t left = 0;

    join(path, sizeof(path), rel, v->name);
    bool ours = level < layout_depth && v->name[0] != '.' && made_by_hearth(vfd, v->name);
    /* The agent's own category (no marker: not a skill) may still hold
     * links hearth made while public had it: those are judged like any
     * link of ours. Its skills and the directory itself are never
     * touched, and a skill directory is never entered. */
    if (!ours && (level >= layout_depth || v->name[0] == '.' || has_marker(vfd, v->name))) {
        if (!listed)
            list_add(r->lists->private_, path);
        return;
    }
    int cvfd = safepath_open(vfd, v->name, O_DIRECTORY, 0, why, sizeof(why));
    if (cvfd < 0) {
        run_error(r, "open category", path);
        return;
    }
    descend(r, -1, cvfd, path, level, &left);
    if (!ours) {
        list_add(r->lists->private_, path);
        close(cvfd);
        return;
    }
    if (left > 0 || r->dry) {
        if (left > 0)
            list_add(r->lists->private_, path);
        close(cvfd);
        return;
    }
    /* Empty but for the mark: the mark goes first, then the directory; a
     * skill the agent makes in between keeps the directory (unmarked
     * now, so the agent's from then on). */
    if (unlinkat(cvfd, SKILLS_CATEGORY_MARK, 0) < 0 && errno != ENOENT) {
        run_error(r, "unmark category", path);
    } else if (unlinkat(vfd, v->name, AT_REMOVEDIR) < 0) {
        if (errno != ENOTEMPTY && errno != EEXIST)
            run_error(r, "remove category", path);
        else
            list_add(r->lists->private_, path);
    } else {
        r->c->cat_removed++;
    }
    close(cvfd);
}

/* One directory level: public pfd (-1: known empty) against private vfd
 * (-1: absent, dry runs only), rel its path below both roots. left gets
 * how many private entries remain that hearth does not own. */
static int reconcile_level(struct run *r, int pfd, int vfd, const char *rel, int level,
                           size_t *left)
{
    struct listing pl = {0}, vl = {0};
    struct skills_counts *c = r->c;
    struct skills_lists *lists = r->lists;
    char target[4096], path[4096], prefix[4096];
    char lerr[512];
    int rc = -1;

    *left = 0;
    int n = snprintf(prefix, sizeof(prefix), "%.*s/%s%s", (int)r->plen, r->pub, rel,
                     *rel ? "/" : "");
    if (n < 0 || (size_t)n >= sizeof(prefix) - 256) {
        errno = ENAMETOOLONG;
        run_error(r, "use", rel);
        return -1;
    }
    size_t tlen = (size_t)n;
    memcpy(target, prefix, tlen + 1);
    /* An unreadable directory changes nothing below it. At the top that
     * is the run's failure (not an entry error: the overlay is not
     * usable); deeper it is one entry that could not be handled. */
    int fd = pfd >= 0 ? dup(pfd) : -1;
    if (pfd >= 0 && (fd < 0 || listing_read(&pl, fd, r->pub, lerr, sizeof(lerr)) < 0)) {
        if (level > 1 && c->errors++ == 0)
            snprintf(r->err, r->errlen, "%s", fd < 0 ? strerror(errno) : lerr);
        else if (level == 1)
            snprintf(r->err, r->errlen, "%s", fd < 0 ? strerror(errno) : lerr);
        goto out;
    }
    if (pfd < 0 && listing_index(&pl) < 0)
        goto out;
    fd = vfd >= 0 ? dup(vfd) : -1;
    if (vfd >= 0 && (fd < 0 || listing_read(&vl, fd, r->priv, lerr, sizeof(lerr)) < 0)) {
        if (level > 1 && c->errors++ == 0)
            snprintf(r->err, r->errlen, "%s", fd < 0 ? strerror(errno) : lerr);
        else if (level == 1)
            snprintf(r->err, r->errlen, "%s", fd < 0 ? strerror(errno) : lerr);
        goto out;
    }
    if (vfd < 0 && listing_index(&vl) < 0)
        goto out;
    /* Every level is bounded on its own; the sum is bounded too, so a
     * share of many huge categories costs bounded time and memory. */
    r->total += pl.n + vl.n;
    if (r->total > SKILLS_MAX_TOTAL) {
        if (c->errors++ == 0)
            snprintf(r->err, r->errlen, "unable to read %s: more than %d entries in all", r->pub,
                     SKILLS_MAX_TOTAL);
        goto out;
    }

    /* Temporary names left by a crash between making and renaming. */
    struct ent *tmp = listing_find(&vl, SKILLS_TMP_LINK);
    if (tmp && tmp->kind == ENT_LINK && !r->dry)
        unlinkat(vfd, SKILLS_TMP_LINK, 0);
    if (listing_find(&vl, SKILLS_TMP_CATEGORY) && !r->dry &&
        tree_remove(vfd, SKILLS_TMP_CATEGORY, lerr, sizeof(lerr)) < 0)
        log_debug("skills: %s", lerr);

    for (size_t i = 0; i < pl.n; i++) {
        struct ent *p = &pl.v[i];
        join(path, sizeof(path), rel, p->name);
        /* Our temporary names and Hermes's own files are never skills. */
        p->ignored = is_ignored(p->name, r->ignore) || reserved_name(p->name);
        if (p->ignored) {
            c->ignored++;
            list_add(lists->ignored, path);
            continue;
        }
        size_t nl = strlen(p->name);
        if (tlen + nl >= sizeof(target)) {
            c->errors++;
            continue;
        }
        memcpy(target + tlen, p->name, nl + 1);
        struct ent *pv = listing_find(&vl, p->name);
        bool vouched = false;
        if (pv && pv->kind == ENT_LINK && r->cache &&
            hash(path) % RECHECK_SLICES != r->cache->runs % RECHECK_SLICES) {
            link_target(vfd, pv, r->cache, path);
            vouched = pv->ours;
        }
        if (!vouched && is_category(pfd, p, level)) {
            p->category = true;
            merge_category(r, pfd, vfd, &vl, p, rel, level, target);
            continue;
        }
        c->public_n++;
        list_add(lists->public_, path);
        struct ent *v = listing_find(&vl, p->name);
        if (v) {
            const char *lt = v->kind == ENT_LINK ? link_target(vfd, v, r->cache, path) : NULL;
            if (v->ours || (lt && strcmp(lt, target) == 0)) {
                c->linked++;
                list_add(lists->linked, path);
            } else {
                /* Anything else of that name is the agent's: it wins. */
                c->shadowed++;
                list_add(lists->shadowed, path);
            }
            continue;
        }
        c->created++;
        if (r->dry)
            continue;
        /* Link under a temporary name, then rename: private/N is either
         * absent or a whole link, never half made. */
        if (symlinkat(target, vfd, SKILLS_TMP_LINK) < 0) {
            if (errno == EEXIST && unlinkat(vfd, SKILLS_TMP_LINK, 0) == 0 &&
                symlinkat(target, vfd, SKILLS_TMP_LINK) == 0)
                goto made;
            c->created--;
            run_error(r, "link", path);
            continue;
        }
made:
        /* The agent's own links, so it can replace them. */
        if ((owner.uid != geteuid() || owner.gid != getegid()) &&
            fchownat(vfd, SKILLS_TMP_LINK, owner.uid, owner.gid, AT_SYMLINK_NOFOLLOW) < 0)
            log_debug("skills: unable to chown %s/%s: %s", r->priv, SKILLS_TMP_LINK,
                      strerror(errno));
        if (tree_rename_noreplace(vfd, SKILLS_TMP_LINK, p->name) < 0) {
            int e = errno;
            unlinkat(vfd, SKILLS_TMP_LINK, 0);
            c->created--;
            errno = e;
            /* Appeared since the listing: the agent's, so it wins. */
            if (e == EEXIST) {
                c->shadowed++;
                list_add(lists->shadowed, path);
            } else {
                run_error(r, "rename a link into", path);
            }
            continue;
        }
        /* Not cached yet: the next run reads it once, then vouches. */
        list_add(lists->linked, path);
    }

    /* Links into public whose target has gone, or whose name is now
     * ignored (only those we would have made: private/N -> public/N);
     * directories hearth made for categories public no longer has. */
    for (size_t i = 0; i < vl.n; i++) {
        struct ent *v = &vl.v[i];
        if (v->gone || reserved_name(v->name))
            continue;
        join(path, sizeof(path), rel, v->name);
        if (v->kind == ENT_DIR) {
            struct ent *p = listing_find(&pl, v->name);
            if (p && !p->ignored && p->category) {
                (*left)++;
                continue; /* a merged category */
            }
            struct stat s;
            retire_category(r, vfd, v, rel, level, false);
            if (r->dry || fstatat(vfd, v->name, &s, AT_SYMLINK_NOFOLLOW) == 0)
                (*left)++;
            continue;
        }
        const char *lt = v->kind == ENT_LINK ? link_target(vfd, v, r->cache, path) : NULL;
        const char *sub;
        bool stale;
        if (v->ours) {
            /* A link to pub/rel/name: stale once name left public. */
            struct ent *p = listing_find(&pl, v->name);
            stale = !p || p->ignored;
            sub = v->name;
        } else {
            if (!lt || strncmp(lt, prefix, tlen) != 0) {
                list_add(lists->private_, path);
                (*left)++;
                continue;
            }
            sub = lt + tlen;
            if (*sub && !strchr(sub, '/')) {
                struct ent *p = listing_find(&pl, sub);
                stale = !p || (p->ignored && strcmp(sub, v->name) == 0);
            } else {
                struct stat s;
                stale = stat(lt, &s) < 0 && errno == ENOENT;
            }
        }
        if (!stale) {
            if (strcmp(sub, v->name) != 0) {
                list_add(lists->private_, path); /* a link of the agent's own */
                (*left)++;
            } else {
                next_add(r, path, v);
            }
            continue;
        }
        c->removed++;
        v->gone = true;
        if (!r->dry && unlinkat(vfd, v->name, 0) < 0 && errno != ENOENT) {
            c->removed--;
            (*left)++;
            run_error(r, "remove stale link", path);
        }
    }
    rc = 0;
out:
    listing_free(&pl);
    listing_free(&vl);
    return rc;
}

int skills_reconcile(const char *pub, const char *priv, const char *const *ignore, bool dry,
                     struct skills_counts *c, struct skills_lists *lists,
                     struct skills_cache *cache, char *err, size_t errlen)
{
    struct skills_lists none = {0};
    struct run r = {.pub = pub, .priv = priv, .plen = norm_len(pub), .ignore = ignore,
                    .dry = dry, .c = c, .lists = lists ? lists : &none, .cache = cache,
                    .err = err, .errlen = errlen};
    size_t left;
    int rc;

    memset(c, 0, sizeof(*c));
    err[0] = '\0';
    owner_default();
    if (r.plen + 2 >= 4096 - 256) {
        snprintf(err, errlen, "unable to use %s: path too long", pub);
        return -1;
    }
    /* public first: if it cannot be read (a share not there), nothing in
     * private may be judged stale. */
    int pfd = open(pub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (pfd < 0) {
        snprintf(err, errlen, "unable to open %s: %s", pub, strerror(errno));
        return -1;
    }
    /* private is the agent's: opened once, no link anywhere on its path
     * followed (a private directory renamed and replaced by a link is an
     * error, never written through), and every change below is made by
     * this fd or by fds opened beneath it. */
    char why[128];
    int vfd = safepath_open_abs(priv, O_DIRECTORY, 0, why, sizeof(why));
    if (vfd < 0 && errno == ENOENT && !dry) {
        int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        vfd = root < 0 || priv[0] != '/'
                  ? -1
                  : safepath_mkdir(root, priv + 1, 0755, owner.uid, owner.gid, NULL, why,
                                   sizeof(why));
        if (root >= 0)
            close(root);
        if (vfd < 0) {
            snprintf(err, errlen, "unable to create %s: %s", priv, why);
            close(pfd);
            return -1;
        }
    } else if (vfd < 0 && (errno != ENOENT || !dry)) {
        snprintf(err, errlen, "unable to open %s: %s", priv, why);
        close(pfd);
        return -1;
    }
    /* An unreadable top level is a run that changed nothing: an error
     * even when no entry was counted. */
    dents_buf = malloc(GETDENTS_BUF); /* NULL: each read allocates its own */
    int lrc = reconcile_level(&r, pfd, vfd, "", 1, &left);
    free(dents_buf);
    dents_buf = NULL;
    if (cache && !dry) {
        cache->runs++;
        listing_free(&cache->links);
        if (listing_index(&r.next) == 0)
            cache->links = r.next;
        else
            listing_free(&r.next);
    }
    rc = lrc < 0 || c->errors ? -1 : 0;
    if (vfd >= 0)
        close(vfd);
    close(pfd);
    return rc;
}

/* ------------------------------------------------------------------ */
/* skills.fork */

/* A skill name, or category/.../skill within the configured depth: no
 * empty, '.', '..' or reserved component. */
static bool valid_skill_name(const char *n)
{
    char buf[1024];
    int parts = 0;

    if (!*n || strlen(n) >= sizeof(buf))
        return false;
    memcpy(buf, n, strlen(n) + 1);
    for (char *save = NULL, *c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
        if (strlen(c) >= 256 || !strcmp(c, ".") || !strcmp(c, "..") || reserved_name(c))
            return false;
        parts++;
    }
    return parts > 0 && parts <= layout_depth && n[0] != '/' && n[strlen(n) - 1] != '/' &&
           !strstr(n, "//");
}

int skills_fork_at(const char *pub, const char *priv, const char *name, char *err, size_t errlen)
{
    size_t plen = norm_len(pub);
    char link[4096], why[128];
    struct stat s;
    struct tree_stats st;
    int pfd = -1, sfd = -1, tfd = -1;

    owner_default();
    if (!valid_skill_name(name)) {
        snprintf(err, errlen, "name: expected a skill name or category/skill");
        return -1;
    }
    int dfd = safepath_open_abs(priv, O_DIRECTORY, 0, why, sizeof(why));
    if (dfd < 0) {
        snprintf(err, errlen, "unable to open %s: %s", priv, why);
        return -1;
    }
    /* category/skill: the category is opened beneath private without
     * following a link (one the agent planted there is refused), and the
     * skill is handled by that fd from here on, by its last name. */
    const char *full = name, *slash = strrchr(name, '/');
    if (slash) {
        char cat[1024];
        snprintf(cat, sizeof(cat), "%.*s", (int)(slash - name), name);
        int cfd = safepath_open(dfd, cat, O_DIRECTORY, 0, why, sizeof(why));
        if (cfd < 0) {
            snprintf(err, errlen, "unable to open %s/%s: %s", priv, cat, why);
            close(dfd);
            return -1;
        }
        close(dfd);
        dfd = cfd;
        name = slash + 1;
    }
    ssize_t n = readlinkat(dfd, name, link, sizeof(link) - 1);
    if (n < 0) {
        if (errno == EINVAL)
            snprintf(err, errlen, "%s/%s is already private", priv, full);
        else
            snprintf(err, errlen, "no linked skill %s in %s: %s", full, priv, strerror(errno));
        goto fail;
    }
    link[n] = '\0';
    if (strncmp(link, pub, plen) != 0 || link[plen] != '/') {
        snprintf(err, errlen, "%s/%s links to %s, not into %s", priv, full, link, pub);
        goto fail;
    }
    /* The link is the agent's text: what follows pub/ is resolved beneath
     * public's fd, so '..' or a link inside public can never lead out
     * (pub/../../proc/kmsg is refused, not read). */
    const char *rel = link + plen + 1;
    while (*rel == '/')
        rel++;
    pfd = open(pub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (pfd < 0) {
        snprintf(err, errlen, "unable to open %s: %s", pub, strerror(errno));
        goto fail;
    }
    sfd = safepath_open(pfd, rel, O_DIRECTORY, 0, why, sizeof(why));
    if (sfd < 0 && errno == ENOTDIR) {
        /* A one-file skill: renaming a file over the link replaces it. */
        if (tree_copy_file(pfd, rel, dfd, SKILLS_TMP_FORK, &owner, err, errlen) < 0)
            goto fail;
        if (renameat(dfd, SKILLS_TMP_FORK, dfd, name) < 0) {
            snprintf(err, errlen, "unable to replace %s/%s: %s", priv, full, strerror(errno));
            unlinkat(dfd, SKILLS_TMP_FORK, 0);
            goto fail;
        }
        close(pfd);
        close(dfd);
        log_info("skills: %s forked from %s (a file)", full, link);
        return 0;
    }
    if (sfd < 0 || fstat(sfd, &s) < 0) {
        snprintf(err, errlen, "unable to fork %s: %s: %s", full, link,
                 sfd < 0 ? why : strerror(errno));
        goto fail;
    }
    /* A copy left by an interrupted fork is redone from scratch. */
    if (tree_remove(dfd, SKILLS_TMP_FORK, err, errlen) < 0)
        goto fail;
    tfd = safepath_mkdir(dfd, SKILLS_TMP_FORK, 0700, owner.uid, owner.gid, NULL, why,
                         sizeof(why));
    if (tfd < 0) {
        snprintf(err, errlen, "unable to create %s/%s: %s", priv, SKILLS_TMP_FORK, why);
        goto fail;
    }
    char tmp_path[4200];
    snprintf(tmp_path, sizeof(tmp_path), "%s/%s", priv, SKILLS_TMP_FORK);
    if (slash)
        snprintf(tmp_path, sizeof(tmp_path), "%s/%.*s/%s", priv, (int)(slash - full), full,
                 SKILLS_TMP_FORK);
    /* The mode goes on the copy's own fd: a name swapped meanwhile is
     * never chmodded. */
    if (tree_copy_fd(sfd, tfd, tmp_path, NULL, &owner, &st, err, errlen) < 0 ||
        fchmod(tfd, (s.st_mode & 07777) | 0700) < 0) {
        if (!err[0])
            snprintf(err, errlen, "unable to chmod %s: %s", tmp_path, strerror(errno));
        char e2[64];
        tree_remove(dfd, SKILLS_TMP_FORK, e2, sizeof(e2));
        goto fail;
    }
    /* Swap the copy and the link in one step where the filesystem can;
     * elsewhere there is a moment with neither. */
    if (tree_rename_exchange(dfd, SKILLS_TMP_FORK, name) == 0) {
        unlinkat(dfd, SKILLS_TMP_FORK, 0);
    } else if (unlinkat(dfd, name, 0) < 0 || renameat(dfd, SKILLS_TMP_FORK, dfd, name) < 0) {
        snprintf(err, errlen, "unable to replace %s/%s: %s", priv, full, strerror(errno));
        char e2[64];
        tree_remove(dfd, SKILLS_TMP_FORK, e2, sizeof(e2));
        goto fail;
    }
    close(tfd);
    close(sfd);
    close(pfd);
    close(dfd);
    log_info("skills: %s forked from %s (%lu files, %lu dirs)", full, link, st.files, st.dirs + 1);
    return 0;
fail:
    if (tfd >= 0)
        close(tfd);
    if (sfd >= 0)
        close(sfd);
    if (pfd >= 0)
        close(pfd);
    close(dfd);
    return -1;
}

/* ------------------------------------------------------------------ */
/* The runtime: configuration, triggers and the last run. */

static struct {
    bool enabled, started, reached;
    char *pub, *priv;
    char **ignore; /* NULL-terminated */
    int64_t poll_ms, timeout_ms;
    ev_timer poll, debounce;
    ev_io ino;
    int ino_fd, ino_wd;
    dev_t wdev;
    ino_t wino;
    const char *(*failed_mount)(const char *path);
    struct skills_cache *cache;
    /* the last run */
    unsigned long runs;
    char trigger[16];
    struct skills_counts last;
    int64_t last_wall_ms, last_us;
    char error[512];
} S = {.ino_fd = -1, .ino_wd = -1};

bool skills_enabled(void)
{
    return S.enabled;
}

static void watch_public(dev_t dev, ino_t ino);

/* The outcome of one reconcile (run here or in the child): the last
 * run, the log, the skills.sync event, the phase. */
static void record_run(const char *trigger, int rc, const char *err,
                       const struct skills_counts *c, int64_t us, dev_t dev, ino_t ino)
{
    S.last = *c;
    S.last_us = us;
    S.last_wall_ms = wall_ms();
    S.runs++;
    snprintf(S.trigger, sizeof(S.trigger), "%s", trigger);
    snprintf(S.error, sizeof(S.error), "%s", rc < 0 ? err : "");
    if (rc < 0)
        log_warn("skills (%s): %s", trigger, err);
    if (S.last.created || S.last.removed || S.last.cat_created || S.last.cat_converted ||
        S.last.cat_removed || rc < 0) {
        log_info("skills (%s): %u linked, %u new, %u removed, %u shadowed in %lld us", trigger,
                 S.last.linked + S.last.created, S.last.created, S.last.removed, S.last.shadowed,
                 (long long)S.last_us);
        /* The event's own time_ms is the run's: not repeated. */
        cJSON *ev = skills_last_json();
        cJSON_DeleteItemFromObjectCaseSensitive(ev, "time_ms");
        events_emit("skills.sync", ev);
    }
    /* Per-entry errors still leave a usable overlay; an unreadable
     * directory does not. */
    bool usable = rc == 0 || S.last.errors > 0;
    if (usable && !S.reached) {
        S.reached = true;
        gate_set("skills", true);
    }
    if (S.started)
        watch_public(dev, ino);
}

/* Whether a reconcile may run now; -1 with err when not. */
static int sync_allowed(char *err, size_t errlen)
{
    const char *fm;

    if (!S.enabled) {
        snprintf(err, errlen, "the skills overlay is not configured (skills.public, skills.private)");
        return -1;
    }
    if (!S.started) {
        /* Before mounts and seeding, private may be the image's directory
         * under a share still to come: writing there would be lost. */
        snprintf(err, errlen, "the skills overlay starts after mounts and seeding");
        return -1;
    }
    if (S.failed_mount && ((fm = S.failed_mount(S.pub)) || (fm = S.failed_mount(S.priv)))) {
        snprintf(err, errlen, "mount %s failed", fm);
        snprintf(S.error, sizeof(S.error), "%s", err);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* The walks run in a child process (init/childjob.c): an agent that
 * fills its skill directory with 100,000 entries, or a share that hangs,
 * stalls that child, never the loop. One walk at a time: a reconcile
 * (skills_sync) or a dry run for skills.list. A reconcile asked for while
 * one runs is coalesced into one more run after it, whatever the number
 * of triggers; a skills.sync is answered by the first run that starts
 * after it arrived, a skills.list by the first dry run after it arrived.
 *
 * The child hands back, over its pipe, records of one type byte and a
 * u32 length: 'R' the counts (struct wire_result), 'E' the reconcile's
 * error, 'K' the links cache it left (skills_cache_encode), 'L' the lists
 * as JSON (dry runs), 'X' why a dry run has no lists, and 'Z' last, so a
 * child killed midway is never read as a whole result. The cache is the
 * one state kept between runs: the child works on its copy and sends it
 * back; the loop takes it only from a whole result (a killed run leaves
 * the cache as it was, which is what an unreadable public does too), and
 * one too large to send is dropped (the next run reads every link). */

/* What one skills.sync or skills.list waits for. */
struct waiter {
    skills_reply reply;
    uint64_t tag;
};

enum walk_kind { WALK_SYNC, WALK_LIST };

struct wire_result {
    int32_t rc;
    uint8_t cache; /* 0 not touched, 1 sent ('K'), 2 changed but too large: drop it */
    struct skills_counts c;
    int64_t us;
    uint64_t dev, ino; /* public, for the inotify watch */
};

static struct {
    struct childjob job;
    enum walk_kind kind, last_kind;
    int64_t t0;
    char trigger[16];
    struct waiter cur[SKILLS_MAX_WAITERS]; /* answered when the running walk ends */
    size_t ncur;
    bool sync_pending;
    char sync_trigger[16];
    struct waiter syncw[SKILLS_MAX_WAITERS], listw[SKILLS_MAX_WAITERS];
    size_t nsync, nlist;
    ev_timer kick;
    bool kick_init;
} Q = {.last_kind = WALK_LIST}; /* a reconcile goes first when both wait at the start */

static void put(int fd, char type, const void *p, size_t n)
{
    char hdr[5];
    uint32_t len = (uint32_t)n;
    const char *parts[2] = {hdr, p};
    size_t lens[2] = {5, n};

    hdr[0] = type;
    memcpy(hdr + 1, &len, 4);
    for (int i = 0; i < 2; i++) {
        for (size_t off = 0; off < lens[i];) {
            ssize_t w = write(fd, parts[i] + off, lens[i] - off);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                _exit(1); /* the loop went away: nobody to tell */
            off += (size_t)w;
        }
    }
}

/* The child: one walk, its result down wfd. */
static void walk_child(int wfd, void *arg)
{
    bool dry = Q.kind == WALK_LIST;
    struct wire_result w;
    struct skills_lists l = {0};
    char err[512] = "";
    cJSON *o = NULL;
    struct stat st;

    memset(&w, 0, sizeof(w)); /* padding too: it goes down the pipe */
    if (dry && (o = cJSON_CreateObject())) {
        l.public_ = cJSON_AddArrayToObject(o, "public");
        l.private_ = cJSON_AddArrayToObject(o, "private");
        l.linked = cJSON_AddArrayToObject(o, "linked");
        l.shadowed = cJSON_AddArrayToObject(o, "shadowed");
        l.ignored = cJSON_AddArrayToObject(o, "ignored");
        l.categories = cJSON_AddArrayToObject(o, "categories");
    }
    unsigned runs0 = S.cache ? S.cache->runs : 0;
    int64_t t0 = mono_us();
    w.rc = skills_reconcile(S.pub, S.priv, (const char *const *)S.ignore, dry, &w.c,
                            dry ? &l : NULL, S.cache, err, sizeof(err));
    w.us = mono_us() - t0;
    if (stat(S.pub, &st) == 0) {
        w.dev = (uint64_t)st.st_dev;
        w.ino = (uint64_t)st.st_ino;
    }
    char *cbuf = NULL;
    size_t clen = 0;
    if (!dry && S.cache && S.cache->runs != runs0)
        w.cache = skills_cache_encode(S.cache, SKILLS_RESULT_MAX / 2, &cbuf, &clen) == 0 ? 1 : 2;
    put(wfd, 'R', &w, sizeof(w));
    if (err[0])
        put(wfd, 'E', err, strlen(err));
    if (cbuf)
        put(wfd, 'K', cbuf, clen);
    if (dry) {
        char *text = NULL;
        if (o) {
            if (w.rc < 0 && w.c.errors == 0)
                cJSON_AddStringToObject(o, "error", err);
            cJSON_AddNumberToObject(o, "pending", w.c.created + w.c.removed + w.c.cat_removed);
            text = cJSON_PrintUnformatted(o);
        }
        if (text && strlen(text) < SKILLS_RESULT_MAX - 4096) {
            put(wfd, 'L', text, strlen(text));
        } else {
            char m[128];
            snprintf(m, sizeof(m), text ? "the lists take more than %d bytes" : "out of memory",
                     SKILLS_RESULT_MAX - 4096);
            put(wfd, 'X', m, strlen(m));
        }
        cJSON_free(text);
    }
    put(wfd, 'Z', "", 0);
    /* Freed, though the process ends now: a leak checker judges the
     * child too. */
    free(cbuf);
    cJSON_Delete(o);
}

/* A child's result, cut into its records (pointers into the buffer). */
struct walk_result {
    bool whole;
    struct wire_result w;
    const char *e, *k, *l, *x;
    size_t elen, klen, llen, xlen;
};

static bool parse_result(const char *b, size_t len, struct walk_result *r)
{
    bool have_r = false;

    memset(r, 0, sizeof(*r));
    for (size_t off = 0; off < len;) {
        uint32_t n;
        if (len - off < 5)
            return false;
        char t = b[off];
        memcpy(&n, b + off + 1, 4);
        off += 5;
        if (n > len - off)
            return false;
        const char *p = b + off;
        off += n;
        switch (t) {
        case 'R':
            if (n != sizeof(r->w))
                return false;
            memcpy(&r->w, p, n);
            have_r = true;
            break;
        case 'E': r->e = p, r->elen = n; break;
        case 'K': r->k = p, r->klen = n; break;
        case 'L': r->l = p, r->llen = n; break;
        case 'X': r->x = p, r->xlen = n; break;
        case 'Z': r->whole = have_r && off == len; return r->whole;
        default: return false;
        }
    }
    return false;
}

static void answer(struct waiter *v, size_t n, int rc, const char *msg, cJSON *result)
{
    for (size_t i = 0; i < n; i++) {
        cJSON *r = result ? (i + 1 == n ? result : cJSON_Duplicate(result, 1)) : NULL;
        v[i].reply(v[i].tag, rc, msg, r);
    }
    if (!n)
        cJSON_Delete(result);
}

static void answer_sync(struct waiter *v, size_t n, int rc, const char *msg)
{
    for (size_t i = 0; i < n; i++)
        v[i].reply(v[i].tag, rc, msg, skills_last_json());
}

/* A reconcile ended (fail: why it has no result) */
static void sync_finish(const char *fail, const struct walk_result *r)
{
    char err[512];

    if (fail) {
        struct skills_counts none = {0};
        record_run(Q.trigger, -1, fail, &none, mono_us() - Q.t0, 0, 0);
        answer_sync(Q.cur, Q.ncur, -1, fail);
        return;
    }
    snprintf(err, sizeof(err), "%.*s", (int)(r->elen < sizeof(err) ? r->elen : sizeof(err) - 1),
             r->e ? r->e : "");
    if (r->w.cache == 1 && skills_cache_load(S.cache, r->k, r->klen) < 0)
        skills_cache_reset(S.cache);
    else if (r->w.cache == 2)
        skills_cache_reset(S.cache);
    record_run(Q.trigger, r->w.rc, err, &r->w.c, r->w.us, (dev_t)r->w.dev, (ino_t)r->w.ino);
    answer_sync(Q.cur, Q.ncur, r->w.rc, err);
}

/* A dry run ended: the lists, with what only the loop knows around them. */
static void list_finish(const char *fail, const struct walk_result *r)
{
    char msg[512];
    cJSON *lists = NULL, *o = NULL;

    if (!fail && r->x) {
        snprintf(msg, sizeof(msg), "%.*s", (int)(r->xlen < 256 ? r->xlen : 256), r->x);
        fail = msg;
    }
    if (!fail && !(lists = cJSON_ParseWithLength(r->l, r->llen)))
        fail = "the listing process sent lists that do not parse";
    if (!fail && !(o = cJSON_CreateObject()))
        fail = "out of memory";
    if (fail) {
        cJSON_Delete(lists);
        answer(Q.cur, Q.ncur, -1, fail, NULL);
        return;
    }
    cJSON_AddStringToObject(o, "public_dir", S.pub);
    cJSON_AddStringToObject(o, "private_dir", S.priv);
    static const char *const order[] = {"public", "private", "linked", "shadowed", "ignored",
                                        "categories", "error", "pending", NULL};
    for (const char *const *k = order; *k; k++) {
        cJSON *it = cJSON_DetachItemFromObjectCaseSensitive(lists, *k);
        if (it)
            cJSON_AddItemToObject(o, *k, it);
    }
    cJSON_Delete(lists);
    cJSON_AddStringToObject(o, "marker", layout_marker);
    cJSON_AddNumberToObject(o, "depth", layout_depth);
    cJSON_AddNumberToObject(o, "poll_ms", (double)S.poll_ms);
    cJSON_AddBoolToObject(o, "inotify", S.ino_wd >= 0);
    cJSON_AddItemToObject(o, "last", skills_last_json());
    answer(Q.cur, Q.ncur, 0, "", o);
}

static void schedule(void);

static void walk_done(struct childjob *j, enum childjob_end end, int status, const char *data,
                      size_t len)
{
    struct walk_result r;
    char why[256];
    const char *fail = NULL;

    if (end == CHILDJOB_TIMEOUT) {
        snprintf(why, sizeof(why), "the walk took longer than %lld ms (skills.timeout_ms); stopped",
                 (long long)S.timeout_ms);
        fail = why;
    } else if (end == CHILDJOB_TOO_BIG) {
        snprintf(why, sizeof(why), "the walk's result took more than %d bytes; stopped",
                 SKILLS_RESULT_MAX);
        fail = why;
    } else if (WIFSIGNALED(status)) {
        snprintf(why, sizeof(why), "the walk process was killed by signal %d", WTERMSIG(status));
        fail = why;
    } else if (!parse_result(data, len, &r)) {
        snprintf(why, sizeof(why), "the walk process ended without a whole result (status %d)",
                 WIFEXITED(status) ? WEXITSTATUS(status) : status);
        fail = why;
    }
    if (Q.kind == WALK_SYNC)
        sync_finish(fail, &r);
    else
        list_finish(fail, &r);
    Q.ncur = 0;
    schedule();
}

/* Starts the next walk when none runs: a reconcile or a dry run, taking
 * turns when both wait, so a stream of triggers cannot starve a
 * skills.list. */
static void schedule(void)
{
    char err[256], why[320];

    while (!childjob_running(&Q.job) && (Q.sync_pending || Q.nlist)) {
        enum walk_kind k = Q.sync_pending && Q.nlist
                               ? (Q.last_kind == WALK_SYNC ? WALK_LIST : WALK_SYNC)
                           : Q.sync_pending ? WALK_SYNC
                                            : WALK_LIST;
        if (k == WALK_SYNC) {
            memcpy(Q.cur, Q.syncw, Q.nsync * sizeof(Q.cur[0]));
            Q.ncur = Q.nsync;
            Q.nsync = 0;
            Q.sync_pending = false;
            snprintf(Q.trigger, sizeof(Q.trigger), "%s", Q.sync_trigger);
            if (sync_allowed(err, sizeof(err)) < 0) {
                log_warn("skills (%s): %s", Q.trigger, err);
                answer_sync(Q.cur, Q.ncur, -1, err);
                Q.ncur = 0;
                continue;
            }
        } else {
            memcpy(Q.cur, Q.listw, Q.nlist * sizeof(Q.cur[0]));
            Q.ncur = Q.nlist;
            Q.nlist = 0;
        }
        if (!S.cache)
            S.cache = skills_cache_new();
        Q.kind = Q.last_kind = k;
        Q.t0 = mono_us();
        if (childjob_start(&Q.job, S.timeout_ms, SKILLS_RESULT_MAX, walk_child, NULL, walk_done,
                           err, sizeof(err)) == 0)
            return;
        /* Not started: an error like any failed run; the next trigger
         * tries again. */
        snprintf(why, sizeof(why), "unable to start the walk: %s", err);
        if (k == WALK_SYNC)
            sync_finish(why, NULL);
        else
            answer(Q.cur, Q.ncur, -1, why, NULL);
        Q.ncur = 0;
    }
}

static void on_kick(struct ev_loop *loop, ev_timer *w, int revents)
{
    schedule();
}

/* Walks start from the loop, never inside the caller: a skills.sync
 * handler must have deferred its reply before any answer can come. */
static void kick(void)
{
    if (!Q.kick_init) {
        ev_timer_init(&Q.kick, on_kick, 0., 0.);
        Q.kick_init = true;
    }
    if (!ev_is_active(&Q.kick)) {
        ev_timer_set(&Q.kick, 0., 0.);
        ev_timer_start(H.loop, &Q.kick);
    }
}

int skills_sync(const char *trigger, char *err, size_t errlen)
{
    if (sync_allowed(err, errlen) < 0)
        return -1;
    if (!H.loop) {
        /* No loop (unit tests): here and now. */
        struct skills_counts c;
        struct stat st;
        if (!S.cache)
            S.cache = skills_cache_new();
        int64_t t0 = mono_us();
        int rc = skills_reconcile(S.pub, S.priv, (const char *const *)S.ignore, false, &c, NULL,
                                  S.cache, err, errlen);
        bool ok = stat(S.pub, &st) == 0;
        record_run(trigger, rc, err, &c, mono_us() - t0, ok ? st.st_dev : 0, ok ? st.st_ino : 0);
        return rc;
    }
    Q.sync_pending = true;
    /* A coalesced run is named after the last trigger, or "sync" when a
     * skills.sync waits for it. */
    if (!Q.nsync)
        snprintf(Q.sync_trigger, sizeof(Q.sync_trigger), "%s", trigger);
    err[0] = '\0';
    kick();
    return 0;
}

int skills_sync_request(skills_defer defer, void *dctx, skills_reply reply, char *err,
                        size_t errlen)
{
    if (sync_allowed(err, errlen) < 0)
        return -1;
    if (!H.loop) {
        snprintf(err, errlen, "no event loop");
        return -1;
    }
    if (Q.nsync >= SKILLS_MAX_WAITERS) {
        snprintf(err, errlen, "%d skills.sync requests are already waiting", SKILLS_MAX_WAITERS);
        return -1;
    }
    Q.syncw[Q.nsync++] = (struct waiter){reply, defer(dctx)};
    Q.sync_pending = true;
    snprintf(Q.sync_trigger, sizeof(Q.sync_trigger), "sync");
    kick();
    return 0;
}

int skills_list_request(skills_defer defer, void *dctx, skills_reply reply, char *err,
                        size_t errlen)
{
    if (!S.enabled) {
        snprintf(err, errlen, "the skills overlay is not configured (skills.public, skills.private)");
        return -1;
    }
    if (!H.loop) {
        snprintf(err, errlen, "no event loop");
        return -1;
    }
    if (Q.nlist >= SKILLS_MAX_WAITERS) {
        snprintf(err, errlen, "%d skills.list requests are already waiting", SKILLS_MAX_WAITERS);
        return -1;
    }
    Q.listw[Q.nlist++] = (struct waiter){reply, defer(dctx)};
    kick();
    return 0;
}

static void on_poll(struct ev_loop *loop, ev_timer *w, int revents)
{
    char err[512];
    skills_sync("poll", err, sizeof(err));
}

static void on_debounce(struct ev_loop *loop, ev_timer *w, int revents)
{
    char err[512];
    skills_sync("inotify", err, sizeof(err));
}

static void on_inotify(struct ev_loop *loop, ev_io *w, int revents)
{
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    bool any = false;

    for (;;) {
        ssize_t n = read(S.ino_fd, buf, sizeof(buf));
        if (n <= 0)
            break;
        any = true;
    }
    /* A burst of changes (a whole skill being copied in) becomes one
     * reconcile a little later. */
    if (any && !ev_is_active(&S.debounce)) {
        ev_timer_set(&S.debounce, 0.2, 0.);
        ev_timer_start(H.loop, &S.debounce);
    }
}

/* (Re)arms the inotify watch on public: after a remount the directory is
 * a different inode and the old watch sees nothing. dev and ino are
 * public's as the walk saw it (0: not seen); the loop itself never
 * stats public, which may be a share that hangs. */
static void watch_public(dev_t dev, ino_t ino)
{
    if (S.ino_fd < 0 || ino == 0)
        return;
    if (S.ino_wd >= 0 && dev == S.wdev && ino == S.wino)
        return;
    if (S.ino_wd >= 0)
        inotify_rm_watch(S.ino_fd, S.ino_wd);
    S.ino_wd = inotify_add_watch(S.ino_fd, S.pub,
                                 IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO |
                                     IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR);
    if (S.ino_wd < 0) {
        log_debug("skills: no inotify on %s: %s (polling only)", S.pub, strerror(errno));
        return;
    }
    S.wdev = dev;
    S.wino = ino;
}

static void free_config(void)
{
    free(S.pub);
    free(S.priv);
    for (char **p = S.ignore; p && *p; p++)
        free(*p);
    free(S.ignore);
    S.pub = S.priv = NULL;
    S.ignore = NULL;
}

void skills_init(const struct config *cfg)
{
    const cJSON *sk = cJSON_GetObjectItemCaseSensitive(cfg->json, "skills");
    const cJSON *pub = cJSON_GetObjectItemCaseSensitive(sk, "public");
    const cJSON *priv = cJSON_GetObjectItemCaseSensitive(sk, "private");
    const cJSON *ign = cJSON_GetObjectItemCaseSensitive(sk, "ignore");
    const cJSON *poll = cJSON_GetObjectItemCaseSensitive(sk, "poll_ms");
    const cJSON *marker = cJSON_GetObjectItemCaseSensitive(sk, "marker");
    const cJSON *depth = cJSON_GetObjectItemCaseSensitive(sk, "depth");
    const cJSON *timeout = cJSON_GetObjectItemCaseSensitive(sk, "timeout_ms");
    const cJSON *g;
    size_t n = 0;

    free_config();
    S.enabled = cJSON_IsString(pub) && cJSON_IsString(priv);
    if (!S.enabled) {
        /* Nothing to lay: services after "skills" need not wait. */
        gate_set("skills", true);
        return;
    }
    S.pub = strdup(pub->valuestring);
    S.priv = strdup(priv->valuestring);
    S.ignore = calloc((size_t)cJSON_GetArraySize(ign) + 1, sizeof(char *));
    if (!S.pub || !S.priv || !S.ignore) {
        log_error("skills: out of memory; overlay off");
        free_config();
        S.enabled = false;
        return;
    }
    cJSON_ArrayForEach(g, ign) {
        if ((S.ignore[n] = strdup(g->valuestring)))
            n++;
    }
    S.poll_ms = cJSON_IsNumber(poll) ? (int64_t)poll->valuedouble : 0;
    S.timeout_ms = cJSON_IsNumber(timeout) ? (int64_t)timeout->valuedouble : SKILLS_WALK_TIMEOUT_MS;
    skills_layout(cJSON_IsString(marker) ? marker->valuestring : SKILLS_MARKER,
                  cJSON_IsNumber(depth) ? (int)depth->valuedouble : SKILLS_DEPTH);
    /* What hearth makes in private belongs to the agent: the first
     * service that waits for the skills phase, so a non-root agent can
     * write its own skills. */
    owner_set = false;
    owner_default();
    for (size_t i = 0; i < cfg->n_services; i++) {
        const struct service_config *sc = &cfg->services[i];
        bool waits = false;
        for (size_t k = 0; k < sc->n_after; k++)
            waits |= strcmp(sc->after[k], "skills") == 0;
        if (waits) {
            service_owner(sc, &owner.uid, &owner.gid);
            owner_set = true;
            break;
        }
    }
    ev_timer_init(&S.poll, on_poll, 0., 0.);
    ev_timer_init(&S.debounce, on_debounce, 0., 0.);
}

void skills_start(const char *(*failed_mount)(const char *path))
{
    char err[512];

    if (!S.enabled)
        return;
    S.failed_mount = failed_mount;
    if (S.started) {
        skills_sync("mounts", err, sizeof(err)); /* a later pass over the mounts */
        return;
    }
    S.started = true;
    S.ino_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (S.ino_fd >= 0) {
        ev_io_init(&S.ino, on_inotify, S.ino_fd, EV_READ);
        ev_io_start(H.loop, &S.ino);
    } else {
        log_debug("skills: no inotify: %s", strerror(errno));
    }
    if (S.poll_ms > 0) {
        double iv = (double)S.poll_ms / 1000.0;
        ev_timer_set(&S.poll, hearth_grid_delay(S.poll_ms), iv);
        ev_timer_start(H.loop, &S.poll);
    }
    skills_sync("boot", err, sizeof(err));
}

/* skills.fork copies a whole skill: in a child process, so a skill of
 * 30,000 files never stalls the loop, bounded by a deadline after which
 * the child is killed (its temporary copy is removed by the next fork).
 * The child reports through a pipe: one byte (0 ok, 1 failed), then the
 * message. One fork at a time. */
static struct {
    pid_t pid;
    int rd;
    ev_timer deadline;
    bool timed_out;
    skills_fork_done done;
    void *ctx;
} F = {.pid = -1, .rd = -1};

static void fork_finish(int rc, const char *msg)
{
    skills_fork_done done = F.done;
    void *ctx = F.ctx;

    F.pid = -1;
    F.done = NULL;
    F.ctx = NULL;
    if (rc == 0) {
        char err[512];
        skills_sync("fork", err, sizeof(err));
    }
    if (done)
        done(ctx, rc, msg);
}

static void on_fork_child(void *ctx, pid_t pid, int status)
{
    char buf[1024];
    ssize_t n = F.rd >= 0 ? read(F.rd, buf, sizeof(buf) - 1) : -1;
    char msg[1024];
    int rc = -1;

    ev_timer_stop(H.loop, &F.deadline);
    if (F.rd >= 0)
        close(F.rd);
    F.rd = -1;
    if (F.timed_out) {
        snprintf(msg, sizeof(msg), "unable to fork: the copy took longer than %d ms; stopped",
                 SKILLS_FORK_TIMEOUT_MS);
    } else if (n >= 1 && WIFEXITED(status)) {
        buf[n] = '\0';
        rc = buf[0] == 0 ? 0 : -1;
        snprintf(msg, sizeof(msg), "%s", buf + 1);
    } else if (WIFSIGNALED(status)) {
        snprintf(msg, sizeof(msg), "unable to fork: copy process killed by signal %d",
                 WTERMSIG(status));
    } else {
        snprintf(msg, sizeof(msg), "unable to fork: copy process ended without a result");
    }
    F.timed_out = false;
    fork_finish(rc, msg);
}

static void on_fork_deadline(struct ev_loop *loop, ev_timer *w, int revents)
{
    if (F.pid > 0) {
        log_warn("skills: fork still copying after %d ms; killing it", SKILLS_FORK_TIMEOUT_MS);
        F.timed_out = true;
        kill(F.pid, SIGKILL);
    }
}

int skills_fork(const char *name, skills_fork_done done, void *ctx, char *err, size_t errlen)
{
    int p[2];

    if (!S.enabled) {
        snprintf(err, errlen, "the skills overlay is not configured (skills.public, skills.private)");
        return -1;
    }
    if (!valid_skill_name(name)) {
        snprintf(err, errlen, "name: expected a skill name or category/skill");
        return -1;
    }
    if (F.pid > 0) {
        snprintf(err, errlen, "a skills.fork is already in progress");
        return -1;
    }
    if (!H.loop) {
        /* No loop to wait on (unit tests): here and now. */
        if (skills_fork_at(S.pub, S.priv, name, err, errlen) < 0)
            return -1;
        if (done)
            done(ctx, 0, "");
        return 0;
    }
    if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0) {
        snprintf(err, errlen, "unable to fork %s: pipe: %s", name, strerror(errno));
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "unable to fork %s: fork: %s", name, strerror(errno));
        close(p[0]);
        close(p[1]);
        return -1;
    }
    if (pid == 0) {
        char msg[1024];
        inherit_close_all_but(p[1]);
        msg[1] = '\0';
        msg[0] = (char)(skills_fork_at(S.pub, S.priv, name, msg + 1, sizeof(msg) - 1) < 0);
        ssize_t w = write(p[1], msg, 1 + strlen(msg + 1));
        _exit(w > 0 ? 0 : 1);
    }
    close(p[1]);
    if (reaper_watch(pid, on_fork_child, NULL) < 0) {
        kill(pid, SIGKILL); /* reaped as an orphan */
        close(p[0]);
        snprintf(err, errlen, "unable to fork %s: unable to watch the copy process", name);
        return -1;
    }
    F.pid = pid;
    F.rd = p[0];
    F.done = done;
    F.ctx = ctx;
    F.timed_out = false;
    ev_timer_init(&F.deadline, on_fork_deadline, SKILLS_FORK_TIMEOUT_MS / 1000.0, 0.);
    ev_timer_start(H.loop, &F.deadline);
    return 0;
}

static void add_counts(cJSON *o, const struct skills_counts *c)
{
    cJSON_AddNumberToObject(o, "public", c->public_n);
    cJSON_AddNumberToObject(o, "linked", c->linked + c->created);
    cJSON_AddNumberToObject(o, "created", c->created);
    cJSON_AddNumberToObject(o, "removed", c->removed);
    cJSON_AddNumberToObject(o, "shadowed", c->shadowed);
    cJSON_AddNumberToObject(o, "ignored", c->ignored);
    cJSON_AddNumberToObject(o, "errors", c->errors);
    cJSON_AddNumberToObject(o, "categories", c->categories);
    cJSON_AddNumberToObject(o, "categories_created", c->cat_created);
    cJSON_AddNumberToObject(o, "categories_converted", c->cat_converted);
    cJSON_AddNumberToObject(o, "categories_removed", c->cat_removed);
}

cJSON *skills_last_json(void)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddNumberToObject(o, "runs", (double)S.runs);
    if (S.runs) {
        cJSON_AddStringToObject(o, "trigger", S.trigger);
        add_counts(o, &S.last);
        cJSON_AddNumberToObject(o, "duration_us", (double)S.last_us);
        cJSON_AddNumberToObject(o, "time_ms", (double)S.last_wall_ms);
    }
    if (S.error[0])
        cJSON_AddStringToObject(o, "error", S.error);
    return o;
}
