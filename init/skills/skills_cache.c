/* skills_cache: what one run leaves the next, and its bytes for a run
 * in a child process to hand back: the links of ours by inode (no
 * readlink), the markers by their stats (no read), and the check: the
 * last whole run's reads, replayed by the next run (see "The check" in
 * skills_priv.h). A no-op pass over 10,000 settled public skills is then
 * one stat a marker and an open and fstat a directory, with no listing
 * read, nothing allocated and nothing judged: the stats that notice a
 * SKILL.md edited in place on a share without inotify, and little else. */
#include "skills_priv.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static int64_t ts_ns(struct timespec t)
{
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* ------------------------------------------------------------------ */
/* The check. */

bool skills_stamp_settled(const struct stat *st, int64_t racy_ns)
{
    return ts_ns(st->st_mtim) < racy_ns && ts_ns(st->st_ctim) < racy_ns;
}

/* FNV-1a, 64 bits, over s and its terminating NUL (so "ab","c" and
 * "a","bc" differ). */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3u;
    return h;
}

static uint64_t fnv_str(uint64_t h, const char *s)
{
    return fnv(h, s, strlen(s) + 1);
}

uint64_t skills_check_cfg(const char *pub, const char *priv, const char *const *ignore,
                          const struct tree_owner *owner)
{
    uint64_t h = 0xcbf29ce484222325u;
    int32_t depth = skills_layout_depth;
    uint32_t own[2] = {owner->uid, owner->gid};

    h = fnv_str(h, pub);
    h = fnv_str(h, priv);
    h = fnv_str(h, skills_layout_marker);
    h = fnv(h, &depth, sizeof(depth));
    h = fnv(h, own, sizeof(own));
    for (; ignore && *ignore; ignore++)
        h = fnv_str(h, *ignore);
    return h;
}

/* ------------------------------------------------------------------ */
/* Recording. Out of memory only costs the next run its check. */

static struct check_step *draft_step(struct check_draft *d, uint8_t op, uint8_t priv)
{
    struct skills_check *k = &d->k;
    if (d->unrec)
        return NULL;
    if (k->n == k->cap) {
        size_t nc = k->cap ? k->cap * 2 : 256;
        struct check_step *nv = realloc(k->step, nc * sizeof(*nv));
        if (!nv) {
            d->unrec = true;
            return NULL;
        }
        k->step = nv;
        k->cap = nc;
    }
    struct check_step *s = &k->step[k->n++];
    *s = (struct check_step){.op = op, .priv = priv};
    return s;
}

/* The stamps of st, their index into *idx; false when they are too
 * recent to vouch for anything (or out of memory). */
static bool draft_stamp(struct check_draft *d, const struct stat *st, int64_t racy_ns,
                        uint32_t *idx)
{
    struct skills_check *k = &d->k;
    if (!skills_stamp_settled(st, racy_ns)) {
        d->unrec = true;
        return false;
    }
    if (k->nstamp == k->capstamp) {
        size_t nc = k->capstamp ? k->capstamp * 2 : 64;
        struct check_stamp *nv = realloc(k->stamp, nc * sizeof(*nv));
        if (!nv) {
            d->unrec = true;
            return false;
        }
        k->stamp = nv;
        k->capstamp = nc;
    }
    *idx = (uint32_t)k->nstamp;
    k->stamp[k->nstamp++] = (struct check_stamp){
        .dev = (uint64_t)st->st_dev, .ino = (uint64_t)st->st_ino,
        .mtime_ns = ts_ns(st->st_mtim), .ctime_ns = ts_ns(st->st_ctim)};
    return true;
}

static bool draft_name(struct check_draft *d, const char *name, uint32_t *off)
{
    struct skills_check *k = &d->k;
    size_t n = strlen(name) + 1;
    if (k->npool + n > k->cappool) {
        size_t nc = k->cappool ? k->cappool * 2 : 1024;
        while (nc < k->npool + n)
            nc *= 2;
        char *np = realloc(k->pool, nc);
        if (!np) {
            d->unrec = true;
            return false;
        }
        k->pool = np;
        k->cappool = nc;
    }
    *off = (uint32_t)k->npool;
    memcpy(k->pool + k->npool, name, n);
    k->npool += n;
    return true;
}

static bool draft_path(struct check_draft *d, const char *path, uint32_t *idx)
{
    if (d->npath == d->cappath) {
        size_t nc = d->cappath ? d->cappath * 2 : 256;
        const char **nv = realloc(d->path, nc * sizeof(*nv));
        if (!nv) {
            d->unrec = true;
            return false;
        }
        d->path = nv;
        d->cappath = nc;
    }
    *idx = (uint32_t)d->npath;
    d->path[d->npath++] = path;
    return true;
}

void skills_draft(struct check_draft *d, enum check_op op, bool priv, const char *name,
                  const char *path, size_t off, const struct stat *st, int64_t racy_ns)
{
    uint32_t a = 0, b = (uint32_t)off;
    if (d->unrec || (st && !draft_stamp(d, st, racy_ns, &b)) ||
        (name && op != CHECK_ROOT && !draft_name(d, name, &a)) ||
        (path && !draft_path(d, path, &a)))
        return;
    struct check_step *s = draft_step(d, op, priv);
    if (s) {
        s->a = a;
        s->b = b;
    }
}

static void check_free(struct skills_check *k)
{
    free(k->step);
    free(k->stamp);
    free(k->pool);
    free(k->report);
    memset(k, 0, sizeof(*k));
}

void skills_draft_free(struct check_draft *d)
{
    check_free(&d->k);
    free(d->path);
    memset(d, 0, sizeof(*d));
}

/* Whether the steps of k are well formed against the marks m: each
 * index in range, names NUL-terminated in the pool, a skill's mark of
 * its tree, the nesting balanced and within the layout's bound. */
static bool check_valid(const struct skills_check *k, const struct marks *m)
{
    int depth = 0;
    bool priv = false;
    for (size_t i = 0; i < k->n; i++) {
        const struct check_step *s = &k->step[i];
        /* A path of two names (MARK, NOMARK) only in the public tree: in
         * the agent's, no link is followed even by a stat. */
        if (s->op == CHECK_ROOT)
            priv = s->priv;
        if ((s->op == CHECK_MARK || s->op == CHECK_NOMARK) && priv)
            return false;
        if ((s->op == CHECK_PSKILL || s->op == CHECK_PNOMARK) && !priv)
            return false;
        bool named = s->op == CHECK_DIR || s->op == CHECK_NOMARK || s->op == CHECK_PNOMARK;
        bool stamped = s->op == CHECK_ROOT || s->op == CHECK_DIR || s->op == CHECK_PSKILL;
        if (s->op > CHECK_PNOMARK || s->priv > 1 || s->pad)
            return false;
        if (named && (s->a >= k->npool || !memchr(k->pool + s->a, 0, k->npool - s->a)))
            return false;
        if (stamped && s->b >= k->nstamp)
            return false;
        if (s->op == CHECK_MARK || s->op == CHECK_PSKILL) {
            if (s->a >= m->n || m->v[s->a].priv != (s->op == CHECK_PSKILL))
                return false;
            size_t pl = strlen(m->v[s->a].path);
            if (s->op == CHECK_MARK && (s->b >= pl || (s->b && m->v[s->a].path[s->b - 1] != '/')))
                return false;
        }
        if (s->op == CHECK_ROOT ? depth != 0 : s->op == CHECK_UP ? depth == 0 : depth == 0)
            return false;
        depth += s->op == CHECK_ROOT || s->op == CHECK_DIR;
        depth -= s->op == CHECK_UP;
        if (depth > SKILLS_MAX_DEPTH + 1)
            return false;
    }
    return depth == 0;
}

bool skills_check_update(struct skills_check *k, struct check_draft *d, const struct marks *m,
                         uint64_t cfg, const struct skills_counts *c, const char *report)
{
    /* A check recorded anew is news to the loop even when it is the one
     * it had: a whole run that could record the same reads again comes
     * only after a replay failed for want of an fd, or a run that
     * listed. */
    bool had = k->step != NULL;

    if (!d || d->unrec || !d->k.n) {
        if (d)
            skills_draft_free(d);
        check_free(k);
        return had;
    }
    /* Each skill's step now names its mark: one the run vouched for or
     * read and remembered. A marker it could not remember (changed too
     * recently, unreadable) has none, and nothing is kept. */
    struct skills_check *n = &d->k;
    for (size_t i = 0; i < n->n; i++) {
        struct check_step *s = &n->step[i];
        if (s->op != CHECK_MARK && s->op != CHECK_PSKILL)
            continue;
        const struct mark *mk = skills_marks_find(m, s->op == CHECK_PSKILL, d->path[s->a]);
        if (!mk) {
            skills_draft_free(d);
            check_free(k);
            return had;
        }
        s->a = (uint32_t)(mk - m->v);
    }
    n->cfg = cfg;
    n->counts = *c;
    n->report = strdup(report);
    if (!n->report || !check_valid(n, m)) {
        skills_draft_free(d);
        check_free(k);
        return had;
    }
    check_free(k);
    *k = *n;
    memset(n, 0, sizeof(*n));
    skills_draft_free(d);
    return true;
}

/* ------------------------------------------------------------------ */
/* Replay. */

static bool stamp_same(const struct check_stamp *s, const struct stat *st)
{
    return s->dev == (uint64_t)st->st_dev && s->ino == (uint64_t)st->st_ino &&
           s->mtime_ns == ts_ns(st->st_mtim) && s->ctime_ns == ts_ns(st->st_ctim);
}

#ifndef SYS_statx
#define SYS_statx 332
#endif
/* The kernel's struct statx: musl 1.2.3 has no statx, and linux/stat.h
 * clashes with its sys/stat.h. */
struct xstamp {
    int64_t sec;
    uint32_t nsec;
    int32_t pad;
};
struct xstat {
    uint32_t mask, blksize;
    uint64_t attributes;
    uint32_t nlink, uid, gid;
    uint16_t mode, spare;
    uint64_t ino, size, blocks, attributes_mask;
    struct xstamp atime, btime, ctime, mtime;
    uint32_t rdev_major, rdev_minor, dev_major, dev_minor;
    uint8_t rest[256 - 144];
};
/* STATX_TYPE, _MODE, _MTIME, _CTIME, _INO, _SIZE; AT_STATX_FORCE_SYNC. */
#define XSTAT_WANT 0x2c3u
#define XSTAT_SYNC 0x2000

/* name beneath dfd (NULL: dfd itself) into st, as far as the check
 * compares it. Asked of a share's server every time (AT_STATX_FORCE_SYNC):
 * FUSE (virtio-fs), 9p and NFS would otherwise answer from attributes
 * they cached (for up to a second on virtio-fs), where the directory
 * reads this stands in for would not; a local filesystem ignores the
 * flag. -1 with errno (ENOENT: not there; a kernel without statx: the
 * run reads instead). */
static int stat_fresh(int dfd, const char *name, struct stat *st)
{
    struct xstat x;
    int flags = (name ? AT_SYMLINK_NOFOLLOW : AT_EMPTY_PATH) | XSTAT_SYNC;

    if (syscall(SYS_statx, dfd, name ? name : "", flags, XSTAT_WANT, &x) < 0)
        return -1;
    if ((x.mask & XSTAT_WANT) != XSTAT_WANT) {
        errno = ENODATA;
        return -1;
    }
    /* Only what stamp_same and skills_mark_same read. */
    st->st_dev = makedev(x.dev_major, x.dev_minor);
    st->st_ino = x.ino;
    st->st_size = (off_t)x.size;
    st->st_mode = x.mode;
    st->st_mtim = (struct timespec){.tv_sec = x.mtime.sec, .tv_nsec = x.mtime.nsec};
    st->st_ctim = (struct timespec){.tv_sec = x.ctime.sec, .tv_nsec = x.ctime.nsec};
    return 0;
}

/* Whether dfd/name's marker (name NULL: dfd's own; b its length) is
 * the regular file mk, or with mk NULL is absent. */
static bool marker_is(int dfd, const char *name, size_t b, const struct mark *mk)
{
    char mp[600];
    struct stat st;
    size_t a = name ? strlen(name) : 0;

    if (a + b + 2 > sizeof(mp))
        return false;
    if (a) {
        memcpy(mp, name, a);
        mp[a++] = '/';
    }
    memcpy(mp + a, skills_layout_marker, b + 1);
    if (stat_fresh(dfd, mp, &st) < 0)
        return !mk && errno == ENOENT;
    return mk && S_ISREG(st.st_mode) && skills_mark_same(mk, &st);
}

/* Whether directory fd has stamps s. */
static bool dir_is(int fd, const struct check_stamp *s)
{
    struct stat st;
    return stat_fresh(fd, NULL, &st) == 0 && stamp_same(s, &st);
}

bool skills_check_replay(const struct skills_check *k, const struct marks *m, uint64_t cfg,
                         int pfd, int vfd)
{
    /* The directories entered, innermost last; own: opened here (the
     * roots are the run's). */
    int fds[SKILLS_MAX_DEPTH + 2];
    bool own[SKILLS_MAX_DEPTH + 2];
    int top = -1;
    bool ok = k->step && k->cfg == cfg && pfd >= 0 && vfd >= 0;
    size_t ml = strlen(skills_layout_marker);

    for (size_t i = 0; ok && i < k->n; i++) {
        const struct check_step *s = &k->step[i];
        const struct mark *mk = s->op == CHECK_MARK || s->op == CHECK_PSKILL ? &m->v[s->a] : NULL;
        const char *name = mk ? mk->path + s->b : k->pool + s->a;
        int fd;
        switch (s->op) {
        case CHECK_ROOT:
            fds[++top] = s->priv ? vfd : pfd;
            own[top] = false;
            ok = dir_is(fds[top], &k->stamp[s->b]);
            break;
        case CHECK_DIR:
        case CHECK_PSKILL:
        case CHECK_PNOMARK:
            if (s->op == CHECK_PSKILL) {
                const char *slash = strrchr(mk->path, '/');
                name = slash ? slash + 1 : mk->path;
            }
            /* Beneath the directory above, no link followed. */
            fd = openat(fds[top], name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
            if (fd < 0) {
                ok = false;
                break;
            }
            ok = s->op == CHECK_PNOMARK || dir_is(fd, &k->stamp[s->b]);
            ok = ok && marker_is(fd, NULL, ml, mk);
            if (s->op != CHECK_DIR) {
                close(fd);
                break;
            }
            fds[++top] = fd;
            own[top] = true;
            break;
        case CHECK_UP:
            if (own[top])
                close(fds[top]);
            top--;
            break;
        case CHECK_MARK:
        case CHECK_NOMARK:
            ok = marker_is(fds[top], name, ml, mk);
            break;
        default:
            ok = false;
        }
    }
    for (; top >= 0; top--)
        if (own[top])
            close(fds[top]);
    return ok;
}

/* ------------------------------------------------------------------ */
/* The cache. */

/* Keeps the links of old flagged seen (flags cleared), frees the rest,
 * then appends fresh (consumed) and indexes; whether anything changed.
 * Out of memory empties old: the next run reads every link. */
static bool links_update(struct listing *old, struct listing *fresh)
{
    size_t keep = 0;
    for (size_t i = 0; i < old->n; i++)
        keep += old->v[i].seen;
    bool changed = keep != old->n || fresh->n;
    for (size_t i = 0, j = 0; changed && i < old->n; i++) {
        if (old->v[i].seen) {
            old->v[j++] = old->v[i];
        } else {
            free(old->v[i].name);
            free(old->v[i].target);
        }
    }
    if (changed)
        old->n = keep;
    for (size_t i = 0; i < old->n; i++)
        old->v[i].seen = false;
    if (fresh->n) {
        if (old->n + fresh->n > old->cap) {
            size_t nc = old->n + fresh->n;
            struct ent *nv = realloc(old->v, nc * sizeof(*nv));
            if (!nv) {
                skills_listing_free(old);
                skills_listing_free(fresh);
                return true;
            }
            old->v = nv;
            old->cap = nc;
        }
        memcpy(old->v + old->n, fresh->v, fresh->n * sizeof(*fresh->v));
        old->n += fresh->n;
        fresh->n = 0;
    }
    skills_listing_free(fresh);
    if (changed) {
        free(old->slot);
        old->slot = NULL;
        if (skills_listing_index(old) < 0)
            skills_listing_free(old);
    }
    return changed;
}

/* links_update for marks. */
static bool marks_update(struct marks *old, struct marks *fresh)
{
    size_t keep = 0;
    for (size_t i = 0; i < old->n; i++)
        keep += old->v[i].seen;
    bool changed = keep != old->n || fresh->n;
    for (size_t i = 0, j = 0; changed && i < old->n; i++) {
        if (old->v[i].seen) {
            old->v[j++] = old->v[i];
        } else {
            free(old->v[i].path);
            free(old->v[i].name);
        }
    }
    if (changed)
        old->n = keep;
    for (size_t i = 0; i < old->n; i++)
        old->v[i].seen = false;
    for (size_t i = 0; i < fresh->n; i++) {
        if (skills_marks_push(old, fresh->v[i]) < 0) {
            free(fresh->v[i].path);
            free(fresh->v[i].name);
        }
    }
    fresh->n = 0;
    skills_marks_free(fresh);
    if (changed && skills_marks_index(old) < 0)
        skills_marks_free(old);
    return changed;
}

void skills_cache_update(struct skills_cache *k, struct listing *links, struct marks *marks)
{
    bool a = links_update(&k->links, links);
    bool b = marks_update(&k->marks, marks);
    k->changed = a || b;
}

void skills_cache_unsee(struct skills_cache *k)
{
    for (size_t i = 0; i < k->links.n; i++)
        k->links.v[i].seen = false;
    for (size_t i = 0; i < k->marks.n; i++)
        k->marks.v[i].seen = false;
}

struct skills_cache *skills_cache_new(void)
{
    return calloc(1, sizeof(struct skills_cache));
}

void skills_cache_free(struct skills_cache *k)
{
    if (k) {
        skills_listing_free(&k->links);
        skills_marks_free(&k->marks);
        check_free(&k->check);
        free(k);
    }
}

void skills_cache_reset(struct skills_cache *k)
{
    skills_listing_free(&k->links);
    skills_marks_free(&k->marks);
    check_free(&k->check);
    k->changed = true;
    k->runs++;
}


/* ------------------------------------------------------------------ */
/* Bytes. The check's: a u32 step count (0: no check, nothing follows); then the u64
 * settings, the counts, a u32 report length and the report, a u32 stamp
 * count and the stamps, a u32 pool length and the pool, and the steps.
 * Native layout: both ends are the same binary. */

static char *put_bytes(char *p, const void *v, size_t n)
{
    if (n)
        memcpy(p, v, n);
    return p + n;
}

static size_t check_size(const struct skills_check *k)
{
    if (!k->step)
        return 4;
    return 4 + 8 + sizeof(k->counts) + 4 + strlen(k->report) + 4 +
           k->nstamp * sizeof(*k->stamp) + 4 + k->npool + k->n * sizeof(*k->step);
}

static char *check_put(const struct skills_check *k, char *p)
{
    uint32_t n = k->step ? (uint32_t)k->n : 0;
    p = put_bytes(p, &n, 4);
    if (!n)
        return p;
    uint32_t rl = (uint32_t)strlen(k->report), ns = (uint32_t)k->nstamp,
             np = (uint32_t)k->npool;
    p = put_bytes(p, &k->cfg, 8);
    p = put_bytes(p, &k->counts, sizeof(k->counts));
    p = put_bytes(p, &rl, 4);
    p = put_bytes(p, k->report, rl);
    p = put_bytes(p, &ns, 4);
    p = put_bytes(p, k->stamp, ns * sizeof(*k->stamp));
    p = put_bytes(p, &np, 4);
    p = put_bytes(p, k->pool, np);
    return put_bytes(p, k->step, n * sizeof(*k->step));
}

/* n bytes at buf+*off into out, *off past them; -1 when they are not
 * there. */
static int take(const char *buf, size_t *off, size_t len, size_t n, void *out)
{
    if (n > len - *off)
        return -1;
    memcpy(out, buf + *off, n);
    *off += n;
    return 0;
}

/* The same into a fresh allocation with extra zero bytes after them;
 * NULL when they are not there (or out of memory). */
static void *take_alloc(const char *buf, size_t *off, size_t len, size_t n, size_t extra)
{
    if (n > len - *off)
        return NULL;
    char *p = malloc(n + extra ? n + extra : 1);
    if (!p)
        return NULL;
    memcpy(p, buf + *off, n);
    memset(p + n, 0, extra);
    *off += n;
    return p;
}

static int check_load(struct skills_check *k, const char *buf, size_t *off, size_t len,
                      const struct marks *m)
{
    struct skills_check n = {0};
    uint32_t count, rl, ns, np;

    memset(k, 0, sizeof(*k));
    if (take(buf, off, len, 4, &count) < 0)
        return -1;
    if (!count)
        return 0;
    if (count > 4 * (uint32_t)SKILLS_MAX_TOTAL || take(buf, off, len, 8, &n.cfg) < 0 ||
        take(buf, off, len, sizeof(n.counts), &n.counts) < 0 || take(buf, off, len, 4, &rl) < 0 ||
        rl >= sizeof(skills_last_report) || !(n.report = take_alloc(buf, off, len, rl, 1)) ||
        memchr(n.report, 0, rl) || take(buf, off, len, 4, &ns) < 0 || ns > count ||
        !(n.stamp = take_alloc(buf, off, len, (size_t)ns * sizeof(*n.stamp), 0)) ||
        take(buf, off, len, 4, &np) < 0 ||
        !(n.pool = take_alloc(buf, off, len, np, 0)) ||
        !(n.step = take_alloc(buf, off, len, (size_t)count * sizeof(*n.step), 0)))
        goto bad;
    n.n = n.cap = count;
    n.nstamp = n.capstamp = ns;
    n.npool = n.cappool = np;
    if (!check_valid(&n, m))
        goto bad;
    *k = n;
    return 0;
bad:
    check_free(&n);
    return -1;
}

/* The cache as bytes, so a reconcile run in a child process can hand
 * what it learnt back to the loop: a u32 run count, a u32 link count,
 * then per link a u64 inode, a u32 key length and the key; then a u32
 * mark count, and per mark a u8 tree (1 private), u64 device, inode and
 * size, i64 mtime and ctime (ns), u32 path and name lengths, the path and
 * the name; then the check (check_put). Native byte order: both
 * ends are the same binary. The marks and the check, which names them,
 * are left out (counts of 0) when they would not fit in max: without
 * them the next run reads every marker, nothing worse. */
#define CACHE_KEY_MAX 4096
#define MARK_FIXED (1 + 5 * 8 + 4 + 4)

int skills_cache_encode(const struct skills_cache *k, size_t max, char **out, size_t *outlen)
{
    size_t need = 8 + 4, mneed = 0;
    uint32_t runs = k->runs, count = (uint32_t)k->links.n, mcount = (uint32_t)k->marks.n;

    *out = NULL;
    *outlen = 0;
    for (size_t i = 0; i < k->links.n; i++)
        need += 12 + strlen(k->links.v[i].name);
    if (need > max)
        return -1;
    for (size_t i = 0; i < k->marks.n; i++)
        mneed += MARK_FIXED + strlen(k->marks.v[i].path) + strlen(k->marks.v[i].name);
    mneed += check_size(&k->check);
    if (mneed > max - need)
        mcount = 0, mneed = 4;
    if (mneed > max - need)
        return -1;
    need += mneed;
    char *b = malloc(need), *p = b;
    if (!b)
        return -1;
    p = put_bytes(p, &runs, 4);
    p = put_bytes(p, &count, 4);
    for (size_t i = 0; i < k->links.n; i++) {
        const struct ent *e = &k->links.v[i];
        uint64_t ino = (uint64_t)e->ino;
        uint32_t kl = (uint32_t)strlen(e->name);
        p = put_bytes(p, &ino, 8);
        p = put_bytes(p, &kl, 4);
        p = put_bytes(p, e->name, kl);
    }
    p = put_bytes(p, &mcount, 4);
    for (size_t i = 0; i < mcount; i++) {
        const struct mark *m = &k->marks.v[i];
        uint8_t priv = m->priv;
        uint32_t pl = (uint32_t)strlen(m->path), nl = (uint32_t)strlen(m->name);
        p = put_bytes(p, &priv, 1);
        p = put_bytes(p, &m->dev, 8);
        p = put_bytes(p, &m->ino, 8);
        p = put_bytes(p, &m->size, 8);
        p = put_bytes(p, &m->mtime_ns, 8);
        p = put_bytes(p, &m->ctime_ns, 8);
        p = put_bytes(p, &pl, 4);
        p = put_bytes(p, &nl, 4);
        p = put_bytes(p, m->path, pl);
        p = put_bytes(p, m->name, nl);
    }
    if (mcount) {
        p = check_put(&k->check, p);
    } else {
        uint32_t none = 0;
        p = put_bytes(p, &none, 4);
    }
    *out = b;
    *outlen = need;
    return 0;
}

/* The marks section at buf[*off..len) into m (indexed), *off past it;
 * -1 when it is not whole or well formed. */
static int marks_load(struct marks *m, const char *buf, size_t *offp, size_t len)
{
    uint32_t count;
    size_t off = *offp;

    if (len - off < 4)
        return -1;
    memcpy(&count, buf + off, 4);
    off += 4;
    if (count > SKILLS_MAX_TOTAL)
        return -1;
    while (m->n < count) {
        struct mark k = {0};
        uint8_t priv;
        uint32_t pl, nl;
        if (len - off < MARK_FIXED)
            return -1;
        memcpy(&priv, buf + off, 1);
        memcpy(&k.dev, buf + off + 1, 8);
        memcpy(&k.ino, buf + off + 9, 8);
        memcpy(&k.size, buf + off + 17, 8);
        memcpy(&k.mtime_ns, buf + off + 25, 8);
        memcpy(&k.ctime_ns, buf + off + 33, 8);
        memcpy(&pl, buf + off + 41, 4);
        memcpy(&nl, buf + off + 45, 4);
        off += MARK_FIXED;
        if (priv > 1 || pl == 0 || pl >= CACHE_KEY_MAX || nl >= 256 || pl > len - off ||
            nl > len - off - pl || memchr(buf + off, 0, pl) || memchr(buf + off + pl, 0, nl))
            return -1;
        k.priv = priv;
        k.path = strndup(buf + off, pl);
        k.name = strndup(buf + off + pl, nl);
        if (!k.path || !k.name || skills_marks_push(m, k) < 0) {
            free(k.path);
            free(k.name);
            return -1;
        }
        off += pl + nl;
    }
    *offp = off;
    return skills_marks_index(m);
}

int skills_cache_load(struct skills_cache *k, const char *buf, size_t len)
{
    struct listing l = {0};
    struct marks m = {0};
    struct skills_check ck = {0};
    uint32_t runs, count;
    size_t off = 8;

    if (len < 8)
        return -1;
    memcpy(&runs, buf, 4);
    memcpy(&count, buf + 4, 4);
    if (count > SKILLS_MAX_TOTAL)
        return -1;
    while (l.n < count) {
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
    if (skills_listing_index(&l) < 0 || marks_load(&m, buf, &off, len) < 0 ||
        check_load(&ck, buf, &off, len, &m) < 0 || off != len)
        goto bad;
    skills_listing_free(&k->links);
    skills_marks_free(&k->marks);
    check_free(&k->check);
    k->links = l;
    k->marks = m;
    k->check = ck;
    k->runs = runs;
    return 0;
bad:
    skills_listing_free(&l);
    skills_marks_free(&m);
    check_free(&ck);
    return -1;
}
