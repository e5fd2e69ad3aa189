/* skills_names: the names skills are known by. Hermes resolves a skill by
 * its name, wherever it sits in the tree, not by its path: a private
 * software-development/lab-notebook loses to a public
 * research/lab-notebook linked beside it when that path sorts first. So
 * before a reconcile links anything, both trees are walked for their
 * skills (a directory holding the marker, within the layout's depth) and
 * each skill's names are learnt: its directory name, and the `name:` of
 * its marker's YAML front matter where there is one. A public skill that
 * shares a name with one of the agent's own skills is shadowed (never
 * linked); of two public skills sharing a name, the first by path is
 * linked and the other is a clash.
 *
 * The private tree is the agent's: directories are opened beneath their
 * parent's fd without following a link, only a regular marker file is
 * read (checked before the open, and again on the fd by safepath), never
 * blocking, and at most SKILLS_FRONT_MAX bytes of it. hearth's own links
 * are never entered, so only the agent's skills name private ones. */
#include "skills_priv.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "err.h"
#include "safepath.h"

/* The name index: open addressing over the skills arrays, keyed by a
 * string the skill owns (its path, or one of its names). */
static int nindex_init(struct nindex *x, size_t n)
{
    size_t size = 16;
    while (size < n * 2)
        size <<= 1;
    x->slot = calloc(size, sizeof(*x->slot));
    x->key = calloc(size, sizeof(*x->key));
    x->mask = size - 1;
    return x->slot && x->key ? 0 : -1;
}

static void nindex_free(struct nindex *x)
{
    free(x->slot);
    free(x->key);
    memset(x, 0, sizeof(*x));
}

/* The value for key (hashed: h), or 0. */
static uint32_t nindex_get_h(const struct nindex *x, const char *key, uint32_t h0)
{
    if (!x->slot || !key)
        return 0;
    for (size_t h = h0 & x->mask; x->slot[h]; h = (h + 1) & x->mask)
        if (strcmp(x->key[h], key) == 0)
            return x->slot[h];
    return 0;
}

static uint32_t nindex_get(const struct nindex *x, const char *key)
{
    return key ? nindex_get_h(x, key, skills_hash(key)) : 0;
}

/* Adds key (hashed: h) -> v unless key is there (the first holder keeps
 * it). */
static void nindex_put_h(struct nindex *x, const char *key, uint32_t h0, uint32_t v)
{
    size_t h = h0 & x->mask;
    for (; x->slot[h]; h = (h + 1) & x->mask)
        if (strcmp(x->key[h], key) == 0)
            return;
    x->slot[h] = v;
    x->key[h] = key;
}

static void nindex_put(struct nindex *x, const char *key, uint32_t v)
{
    nindex_put_h(x, key, skills_hash(key), v);
}

/* The `name:` of YAML front matter in buf (a `---` line first, up to the
 * next `---` or `...` line), copied into out; false when there is none or
 * it is not a usable name (empty, a '/', a control byte, too long). Only
 * a plain `name: value` at the start of a line counts; quotes around the
 * value are dropped, and a ` #` comment after an unquoted one. */
bool skills_front_name(const char *buf, size_t len, char *out, size_t outlen)
{
    const char *p = buf, *end = buf + len;
    bool first = true;

    if (len >= 3 && (unsigned char)p[0] == 0xef && (unsigned char)p[1] == 0xbb &&
        (unsigned char)p[2] == 0xbf)
        p += 3; /* a UTF-8 byte order mark */
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl)
            return false; /* a line cut by the bound, or no closing line */
        const char *le = nl;
        while (le > p && (le[-1] == '\r' || le[-1] == ' ' || le[-1] == '\t'))
            le--;
        size_t ll = (size_t)(le - p);
        bool fence = ll == 3 && memcmp(p, "---", 3) == 0;
        if (first) {
            if (!fence)
                return false;
            first = false;
        } else if (fence || (ll == 3 && memcmp(p, "...", 3) == 0)) {
            return false;
        } else if (ll > 5 && memcmp(p, "name:", 5) == 0) {
            const char *v = p + 5, *ve = le;
            while (v < ve && (*v == ' ' || *v == '\t'))
                v++;
            if (v < ve && (*v == '"' || *v == '\'')) {
                const char *q = memchr(v + 1, *v, (size_t)(ve - v - 1));
                if (!q)
                    return false;
                v++;
                ve = q;
            } else {
                for (const char *c = v; c < ve; c++)
                    if (*c == '#' && c > v && (c[-1] == ' ' || c[-1] == '\t')) {
                        ve = c;
                        break;
                    }
                while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
                    ve--;
            }
            size_t n = (size_t)(ve - v);
            if (n == 0 || n >= outlen || n >= 256)
                return false;
            for (size_t i = 0; i < n; i++)
                if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f || v[i] == '/')
                    return false;
            if ((n == 1 && v[0] == '.') || (n == 2 && v[0] == '.' && v[1] == '.'))
                return false;
            memcpy(out, v, n);
            out[n] = '\0';
            return true;
        }
        p = nl + 1;
    }
    return false;
}

/* Reads the front matter's name of the open marker fd (closed here)
 * into fm; whether fm is what the file held (read to its end or the
 * bound). */
static bool read_front(int fd, char *fm, size_t fmlen)
{
    char buf[SKILLS_FRONT_MAX];
    size_t got = 0;
    bool ok = false;

    for (;;) {
        ssize_t n = got < sizeof(buf) ? read(fd, buf + got, sizeof(buf) - got) : 0;
        if (n < 0 && errno == EINTR)
            continue;
        ok = n >= 0;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    skills_front_name(buf, got, fm, fmlen);
    return ok;
}

int64_t skills_mark_racy_ns = MARK_RACY_NS;

struct scan {
    struct skills_names *n;
    const char *const *ignore;
    bool priv;
    size_t total;
    struct marks *old; /* the last run's markers (may be NULL) */
    int64_t racy_ns; /* a marker changed after this is not remembered */
};

static int64_t ts_ns(struct timespec t)
{
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Remembers the marker of the skill at path, read whole just now, for
 * the next run; not one changed too recently to trust its stat (see
 * MARK_RACY_NS). Out of memory only costs the next run a read. */
static void remember(struct scan *s, const char *path, const char *fm, const struct stat *st)
{
    if (skills_stamp_settled(st, s->racy_ns))
        skills_marks_add(&s->n->marks, s->priv, path, fm, st);
}

/* The name m remembers into fm, when the marker stats as st: the file the
 * last run read (the cache keeps it, flagged seen). */
static bool vouch(struct mark *m, const struct stat *st, char *fm, size_t fmlen)
{
    if (!m || !skills_mark_same(m, st))
        return false;
    size_t n = strlen(m->name); /* below 256: skills_front_name's bound */
    if (n >= fmlen)
        return false;
    memcpy(fm, m->name, n + 1);
    m->seen = true;
    return true;
}

/* Whether the marker of directory cfd (the skill at path) is there, and
 * its front-matter name into fm ("" when none or unreadable): vouched
 * for by the cache, or read. Only a regular file is opened: a FIFO,
 * device or link of that name still makes a skill (as it does for the
 * reconcile, which only looks for the name) but is never opened, read or
 * followed. */
static bool read_marker(struct scan *s, int cfd, const char *path, char *fm, size_t fmlen)
{
    struct err why;
    struct stat st;

    fm[0] = '\0';
    if (fstatat(cfd, skills_layout_marker, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return false;
        s->n->draft.unrec = true; /* a skill by an error: not for the check */
        return true;
    }
    if (!S_ISREG(st.st_mode))
        s->n->draft.unrec = true;
    if (!S_ISREG(st.st_mode) ||
        vouch(skills_marks_find(s->old, s->priv, path), &st, fm, fmlen))
        return true;
    int fd = safepath_open(cfd, skills_layout_marker, O_RDONLY, 0, &why);
    if (fd >= 0 && read_front(fd, fm, fmlen))
        remember(s, path, fm, &st);
    return true;
}

/* The public skill dfd/name at path, settled through the parent's fd
 * (no open of the skill's directory): its marker, a regular file, stats
 * as the one the last run read (the name from the cache: no open, no
 * read), or is opened beneath dfd with no link followed (safepath) and
 * read; its name into fm. SETTLED_NO_MARKER: the directory holds no
 * marker (a category, within the depth). NOT_SETTLED (a marker that is
 * not a regular file, an open that failed): the directory is opened and
 * looked at as before. A directory swapped for a link since the listing
 * could only lead the stat elsewhere: a file elsewhere is never the one
 * remembered (device and inode), and the open refuses the link. Not for
 * the agent's tree, where no link is followed even by a stat. */
enum settled { NOT_SETTLED, SETTLED_SKILL, SETTLED_NO_MARKER };

static enum settled by_parent(struct scan *s, int dfd, const char *name, const char *path,
                              char *fm, size_t fmlen)
{
    size_t a = strlen(name), b = strlen(skills_layout_marker);
    char mp[600];
    struct err why;
    struct stat st;

    if (a + b + 2 > sizeof(mp))
        return NOT_SETTLED;
    /* Once per skill per run: memcpy, not snprintf. */
    memcpy(mp, name, a);
    mp[a] = '/';
    memcpy(mp + a + 1, skills_layout_marker, b + 1);
    if (fstatat(dfd, mp, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? SETTLED_NO_MARKER : NOT_SETTLED;
    if (!S_ISREG(st.st_mode))
        return NOT_SETTLED;
    if (vouch(skills_marks_find(s->old, s->priv, path), &st, fm, fmlen))
        return SETTLED_SKILL;
    int fd = safepath_open(dfd, mp, O_RDONLY, 0, &why);
    if (fd < 0)
        return NOT_SETTLED;
    fm[0] = '\0';
    if (read_front(fd, fm, fmlen))
        remember(s, path, fm, &st);
    return SETTLED_SKILL;
}

static int add_skill(struct scan *s, const char *path, const char *dir, const char *fm)
{
    struct skills_names *n = s->n;
    struct skill_info **v = s->priv ? &n->priv : &n->pub;
    size_t *cnt = s->priv ? &n->npriv : &n->npub, *cap = s->priv ? &n->cappriv : &n->cappub;

    if (*cnt == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        struct skill_info *nv = realloc(*v, nc * sizeof(*nv));
        if (!nv)
            return -1;
        *v = nv;
        *cap = nc;
    }
    struct skill_info *e = &(*v)[*cnt];
    memset(e, 0, sizeof(*e));
    /* Path and name in one block (path first: freeing it frees both). */
    const char *name = fm[0] ? fm : dir;
    size_t pl = strlen(path) + 1, nl = strlen(name) + 1;
    e->path = malloc(pl + nl);
    if (!e->path)
        return -1;
    memcpy(e->path, path, pl);
    e->name = e->path + pl;
    memcpy(e->name, name, nl);
    e->dir = strrchr(e->path, '/');
    e->dir = e->dir ? e->dir + 1 : e->path;
    (*cnt)++;
    return 0;
}

/* Keeps listing l of directory rel (dev, ino) for the reconcile, or
 * frees it (out of memory only costs the reconcile a read). */
static void keep(struct scan *s, const char *rel, dev_t dev, ino_t ino, struct listing *l)
{
    struct skills_names *n = s->n;
    int t = s->priv;
    if (n->nkept[t] == n->capkept[t]) {
        size_t nc = n->capkept[t] ? n->capkept[t] * 2 : 16;
        struct kept_dir *nv = realloc(n->kept[t], nc * sizeof(*nv));
        if (!nv) {
            skills_listing_free(l);
            return;
        }
        n->kept[t] = nv;
        n->capkept[t] = nc;
    }
    char *r = strdup(rel);
    if (!r) {
        skills_listing_free(l);
        return;
    }
    n->kept[t][n->nkept[t]++] = (struct kept_dir){.rel = r, .dev = dev, .ino = ino, .l = *l};
    memset(l, 0, sizeof(*l));
}

static void kept_free(struct skills_names *n)
{
    for (int t = 0; t < 2; t++) {
        for (size_t i = 0; i < n->nkept[t]; i++) {
            free(n->kept[t][i].rel);
            skills_listing_free(&n->kept[t][i].l);
        }
        free(n->kept[t]);
        nindex_free(&n->keptby[t]);
        n->kept[t] = NULL;
        n->nkept[t] = n->capkept[t] = 0;
    }
}

bool skills_names_take(struct skills_names *n, bool priv, const char *rel, int fd,
                       struct listing *out)
{
    struct stat st;
    uint32_t i = nindex_get(&n->keptby[priv], rel);
    if (!i)
        return false;
    struct kept_dir *k = &n->kept[priv][i - 1];
    if (!k->l.slot || fstat(fd, &st) < 0 || st.st_dev != k->dev || st.st_ino != k->ino)
        return false;
    *out = k->l;
    memset(&k->l, 0, sizeof(k->l));
    return true;
}

/* One directory level of a tree: its skills, and its categories entered
 * (a directory without the marker above the last level, not a dot-name,
 * as the reconcile has it). dfd is borrowed. -1 only for out of memory
 * or the entry bound; a directory that cannot be read is skipped (the
 * reconcile reports it). */
static int scan_level(struct scan *s, int dfd, const char *rel, const char *name, int level)
{
    struct check_draft *d = &s->n->draft;
    struct listing l = {0};
    char path[4096], fm[256];
    struct err lerr;
    struct stat st;
    int rc = 0;

    /* A description of its own (not a dup): its offset is its own. */
    int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        d->unrec = true;
        return 0;
    }
    if (fstat(fd, &st) < 0) {
        close(fd);
        d->unrec = true;
        return 0;
    }
    dev_t dev = st.st_dev;
    ino_t ino = st.st_ino;
    /* The stamps before the listing: a change after them moves them, so
     * the check never vouches for a listing older than its stamps. */
    skills_draft(d, level == 1 ? CHECK_ROOT : CHECK_DIR, s->priv, name, NULL, 0, &st, s->racy_ns);
    if (skills_listing_read(&l, fd, rel, &lerr) < 0) {
        d->unrec = true;
        return 0;
    }
    s->total += l.n;
    if (s->total > SKILLS_MAX_TOTAL) {
        skills_listing_free(&l);
        return -1;
    }
    for (size_t i = 0; i < l.n && rc == 0; i++) {
        const struct ent *e = &l.v[i];
        /* Only real directories: a link (hearth's, or one of the agent's
         * pointing anywhere) is never entered or read. */
        if (e->kind != ENT_DIR || skills_reserved_name(e->name) ||
            (!s->priv && skills_is_ignored(e->name, s->ignore)))
            continue;
        size_t a = strlen(rel), b = strlen(e->name);
        if (a + b + 2 > sizeof(path)) {
            d->unrec = true;
            continue;
        }
        memcpy(path, rel, a);
        if (a)
            path[a++] = '/';
        memcpy(path + a, e->name, b + 1);
        /* Public only: the stat by the parent's fd follows a link put in
         * the directory's place since the listing, and no link in the
         * agent's tree is ever followed. */
        enum settled how = s->priv ? NOT_SETTLED : by_parent(s, dfd, e->name, path, fm, sizeof(fm));
        if (how == SETTLED_SKILL) {
            rc = add_skill(s, path, e->name, fm);
            if (rc == 0)
                skills_draft(d, CHECK_MARK, false, NULL, s->n->pub[s->n->npub - 1].path, a, NULL, 0);
            continue;
        }
        bool category = level < skills_layout_depth && e->name[0] != '.';
        if (how == SETTLED_NO_MARKER && !category) {
            skills_draft(d, CHECK_NOMARK, false, e->name, NULL, 0, NULL, 0);
            continue; /* neither a skill nor a category */
        }
        if (!s->priv && how == NOT_SETTLED)
            d->unrec = true; /* an odd marker, or an open that failed */
        int cfd = openat(dfd, e->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (cfd < 0) {
            d->unrec = true;
            continue;
        }
        if (how != SETTLED_NO_MARKER && read_marker(s, cfd, path, fm, sizeof(fm))) {
            rc = add_skill(s, path, e->name, fm);
            /* The agent's skill: its directory's stamps vouch for what
             * else the reconcile may look for in it (hearth's category
             * mark). */
            if (rc == 0 && s->priv && fstat(cfd, &st) == 0)
                skills_draft(d, CHECK_PSKILL, true, NULL, s->n->priv[s->n->npriv - 1].path, 0, &st,
                             s->racy_ns);
            else if (rc == 0 && s->priv)
                d->unrec = true;
        } else if (category) {
            rc = scan_level(s, cfd, path, e->name, level + 1);
        } else {
            skills_draft(d, CHECK_PNOMARK, true, e->name, NULL, 0, NULL, 0);
        }
        close(cfd);
    }
    skills_draft(d, CHECK_UP, false, NULL, NULL, 0, NULL, 0);
    keep(s, rel, dev, ino, &l);
    return rc;
}

static bool path_after(const struct skill_info *a, const struct skill_info *b)
{
    return strcmp(a->path, b->path) > 0;
}

/* Moves v[i] down the max-heap v[0, n) to where it belongs. */
static void sift_down(struct skill_info *v, size_t i, size_t n)
{
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            return;
        if (c + 1 < n && path_after(&v[c + 1], &v[c]))
            c++;
        if (!path_after(&v[c], &v[i]))
            return;
        struct skill_info t = v[i];
        v[i] = v[c];
        v[c] = t;
        i = c;
    }
}

/* Sorts v by path. Some filesystems (tmpfs) list a directory newest
 * first, so a tree made in order arrives in reverse, others (ext4) in
 * hash order: a list in order or wholly reversed costs one comparison a
 * name, any other a heapsort (n log n at worst, no memory; musl's qsort
 * would add 2 KiB of smoothsort to the binary for this one caller). */
static void sort_by_path(struct skill_info *v, size_t n)
{
    size_t down = 0;
    for (size_t i = 1; i < n; i++)
        down += path_after(&v[i - 1], &v[i]);
    if (down == 0)
        return;
    if (down > n / 2)
        for (size_t i = 0, j = n - 1; i < j; i++, j--) {
            struct skill_info t = v[i];
            v[i] = v[j];
            v[j] = t;
        }
    /* Wholly reversed (paths are unique): in order now. */
    if (down + 1 >= n)
        return;
    for (size_t i = n / 2; i-- > 0;)
        sift_down(v, i, n);
    for (size_t end = n - 1; end > 0; end--) {
        struct skill_info t = v[0];
        v[0] = v[end];
        v[end] = t;
        sift_down(v, 0, end);
    }
}

/* The verdict's digest: what changes when a shadow or clash comes or
 * goes (0 when there is none). */
static void digest(struct skills_names *n)
{
    uint32_t h = 0;
    for (size_t i = 0; i < n->npub; i++) {
        const struct skill_info *e = &n->pub[i];
        if (e->verdict == SKILL_LINK)
            continue;
        h = (h ^ skills_hash(e->path)) * 16777619u;
        h = (h ^ skills_hash(e->by)) * 16777619u;
        h = (h ^ (uint32_t)e->verdict) * 16777619u;
        h |= h == 0; /* any verdict at all is not "none" */
    }
    n->digest = h;
}

int skills_names_scan(struct skills_names *n, int pfd, int vfd, const char *const *ignore,
                      struct marks *old)
{
    struct scan s = {.n = n, .ignore = ignore, .old = old};
    struct nindex own = {0}, taken = {0};
    struct timespec now;
    int rc = -1;

    memset(n, 0, sizeof(*n));
    clock_gettime(CLOCK_REALTIME, &now);
    s.racy_ns = ts_ns(now) - skills_mark_racy_ns;
    s.priv = true;
    if (vfd >= 0 && scan_level(&s, vfd, "", "", 1) < 0)
        goto out;
    s.priv = false;
    if (scan_level(&s, pfd, "", "", 1) < 0)
        goto out;
    /* Path order, as Hermes meets them: the first of two public skills of
     * one name is the one linked. */
    sort_by_path(n->priv, n->npriv);
    sort_by_path(n->pub, n->npub);
    if (nindex_init(&own, 2 * n->npriv) < 0 || nindex_init(&taken, 2 * n->npub) < 0 ||
        nindex_init(&n->bypath, n->npub) < 0)
        goto out;
    for (size_t i = 0; i < n->npriv; i++) {
        nindex_put(&own, n->priv[i].dir, (uint32_t)i + 1);
        nindex_put(&own, n->priv[i].name, (uint32_t)i + 1);
    }
    for (size_t i = 0; i < n->npub; i++) {
        struct skill_info *e = &n->pub[i];
        /* Each name hashed once for all three lookups; a skill whose
         * front matter repeats its directory's name has one name. */
        bool one = strcmp(e->dir, e->name) == 0;
        uint32_t hd = skills_hash(e->dir), hn = one ? hd : skills_hash(e->name), w = 0;
        if (n->npriv) {
            w = nindex_get_h(&own, e->dir, hd);
            if (!w && !one)
                w = nindex_get_h(&own, e->name, hn);
        }
        if (w) {
            e->verdict = SKILL_SHADOWED;
            e->by = n->priv[w - 1].path;
        } else if ((w = nindex_get_h(&taken, e->dir, hd)) ||
                   (!one && (w = nindex_get_h(&taken, e->name, hn)))) {
            e->verdict = SKILL_CLASH;
            e->by = n->pub[w - 1].path;
        } else {
            nindex_put_h(&taken, e->dir, hd, (uint32_t)i + 1);
            if (!one)
                nindex_put_h(&taken, e->name, hn, (uint32_t)i + 1);
        }
        nindex_put(&n->bypath, e->path, (uint32_t)i + 1);
    }
    digest(n);
    for (int t = 0; t < 2; t++) {
        if (nindex_init(&n->keptby[t], n->nkept[t]) < 0)
            goto out;
        for (size_t i = 0; i < n->nkept[t]; i++)
            nindex_put(&n->keptby[t], n->kept[t][i].rel, (uint32_t)i + 1);
    }
    rc = 0;
out:
    nindex_free(&own);
    nindex_free(&taken);
    if (rc < 0)
        skills_names_free(n);
    return rc;
}

const struct skill_info *skills_names_find(const struct skills_names *n, const char *path)
{
    uint32_t i = nindex_get(&n->bypath, path);
    return i ? &n->pub[i - 1] : NULL;
}

void skills_names_free(struct skills_names *n)
{
    for (size_t i = 0; i < n->npriv; i++)
        free(n->priv[i].path); /* the name too: one block */
    for (size_t i = 0; i < n->npub; i++)
        free(n->pub[i].path);
    free(n->priv);
    free(n->pub);
    nindex_free(&n->bypath);
    skills_marks_free(&n->marks);
    skills_draft_free(&n->draft);
    kept_free(n);
    memset(n, 0, sizeof(*n));
}

/* One skill as an operator reads it: {path, name}. */
cJSON *skills_names_item(const char *path, const char *name)
{
    cJSON *o = cJSON_CreateObject();
    if (o) {
        cJSON_AddStringToObject(o, "path", path);
        cJSON_AddStringToObject(o, "name", name);
    }
    return o;
}

void skills_names_report(const struct skills_names *n, char *out, size_t outlen)
{
    size_t off = 0, shown = 0, more = 0;

    out[0] = '\0';
    for (size_t i = 0; i < n->npub; i++) {
        const struct skill_info *e = &n->pub[i];
        if (e->verdict == SKILL_LINK)
            continue;
        char line[1024];
        int k = snprintf(line, sizeof(line), "%s (name %s) not linked: %s %s\n", e->path, e->name,
                         e->verdict == SKILL_SHADOWED ? "the agent's own skill of that name is"
                                                      : "the public skill of that name linked is",
                         e->by);
        if (k < 0 || shown >= SKILLS_REPORT_LINES || off + (size_t)k + 64 >= outlen) {
            more++;
            continue;
        }
        memcpy(out + off, line, (size_t)k + 1);
        off += (size_t)k;
        shown++;
    }
    if (more)
        snprintf(out + off, outlen - off, "and %zu more (skills.list has them all)\n", more);
}
