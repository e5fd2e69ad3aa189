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

#include "config.h"
#include "events.h"
#include "hearth.h"
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
static int listing_read(struct listing *l, int fd, const char *path, char *err, size_t errlen)
{
    char *buf = malloc(GETDENTS_BUF);
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

static void note_error(struct skills_counts *c, char *err, size_t errlen, const char *what,
                       const char *priv, const char *name)
{
    if (c->errors++ == 0)
        snprintf(err, errlen, "unable to %s %s/%s: %s", what, priv, name, strerror(errno));
}

/* The public path without trailing slashes, as links spell it. */
static size_t norm_len(const char *p)
{
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/')
        n--;
    return n;
}

/* Links of ours seen by the last run, by name and inode: a link is
 * immutable, so one still there under the same inode needs no readlink.
 * That keeps a no-op pass to two directory reads. */
struct skills_cache {
    struct listing links;
};

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

/* The text of link v, read on first use; NULL when it cannot be read, or
 * when the cache vouches for it (v->ours: it is pub/name). */
static const char *link_target(int dfd, struct ent *v, const struct skills_cache *k,
                               const char *pub, size_t plen)
{
    char buf[4096];

    if (v->read)
        return v->target;
    v->read = true;
    struct ent *hit = k ? listing_find(&k->links, v->name) : NULL;
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

/* Moves the names of the links that now point at pub/name into the
 * cache for the next run. */
static void cache_update(struct skills_cache *k, struct listing *vl, const char *pub, size_t plen)
{
    struct listing nl = {0};

    for (size_t i = 0; i < vl->n; i++) {
        struct ent *v = &vl->v[i];
        if (v->kind != ENT_LINK || v->gone)
            continue;
        if (!v->ours && (!v->target || strncmp(v->target, pub, plen) != 0 ||
                         v->target[plen] != '/' || strcmp(v->target + plen + 1, v->name) != 0))
            continue;
        if (nl.n == nl.cap) {
            size_t nc = nl.cap ? nl.cap * 2 : 256;
            struct ent *nv = realloc(nl.v, nc * sizeof(*nv));
            if (!nv)
                break;
            nl.v = nv;
            nl.cap = nc;
        }
        nl.v[nl.n++] = (struct ent){.name = v->name, .ino = v->ino, .kind = ENT_LINK};
        v->name = NULL;
    }
    listing_free(&k->links);
    if (listing_index(&nl) < 0) {
        listing_free(&nl);
        return;
    }
    k->links = nl;
}

int skills_reconcile(const char *pub, const char *priv, const char *const *ignore, bool dry,
                     struct skills_counts *c, struct skills_lists *lists,
                     struct skills_cache *cache, char *err, size_t errlen)
{
    struct listing pl = {0}, vl = {0};
    struct skills_lists none = {0};
    size_t plen = norm_len(pub);
    char target[4096];
    int rc = -1;

    memset(c, 0, sizeof(*c));
    err[0] = '\0';
    owner_default();
    if (!lists)
        lists = &none;
    if (plen + 2 >= sizeof(target)) {
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
    if (listing_read(&pl, pfd, pub, err, errlen) < 0)
        goto out;
    /* private is the agent's: opened once, no link anywhere on its path
     * followed (a private directory renamed and replaced by a link is an
     * error, never written through), and every change below is made by
     * this fd. */
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
            goto out;
        }
    }
    int dfd = -1;
    if (vfd >= 0) {
        dfd = dup(vfd); /* listing_read consumes one */
        if (dfd < 0 || listing_read(&vl, vfd, priv, err, errlen) < 0) {
            if (dfd < 0)
                snprintf(err, errlen, "unable to read %s: %s", priv, strerror(errno));
            if (dfd >= 0)
                close(dfd);
            goto out;
        }
    } else if (errno != ENOENT || !dry) {
        snprintf(err, errlen, "unable to open %s: %s", priv, why);
        goto out;
    }

    memcpy(target, pub, plen);
    target[plen] = '/';
    /* A temporary link left by a crash between symlink and rename. */
    struct ent *tmp = listing_find(&vl, SKILLS_TMP_LINK);
    if (tmp && tmp->kind == ENT_LINK && !dry)
        unlinkat(dfd, SKILLS_TMP_LINK, 0);

    for (size_t i = 0; i < pl.n; i++) {
        struct ent *p = &pl.v[i];
        /* Our temporary names are never skill names. */
        p->ignored = is_ignored(p->name, ignore) || strcmp(p->name, SKILLS_TMP_LINK) == 0 ||
                     strcmp(p->name, SKILLS_TMP_FORK) == 0;
        if (p->ignored) {
            c->ignored++;
            list_add(lists->ignored, p->name);
            continue;
        }
        c->public_n++;
        list_add(lists->public_, p->name);
        size_t nl = strlen(p->name);
        if (plen + 1 + nl >= sizeof(target)) {
            c->errors++;
            continue;
        }
        memcpy(target + plen + 1, p->name, nl + 1);
        struct ent *v = listing_find(&vl, p->name);
        if (v) {
            const char *lt = v->kind == ENT_LINK ? link_target(dfd, v, cache, pub, plen) : NULL;
            if (v->ours || (lt && strcmp(lt, target) == 0)) {
                c->linked++;
                list_add(lists->linked, p->name);
            } else {
                /* Anything else of that name is the agent's: it wins. */
                c->shadowed++;
                list_add(lists->shadowed, p->name);
            }
            continue;
        }
        c->created++;
        if (dry)
            continue;
        /* Link under a temporary name, then rename: private/N is either
         * absent or a whole link, never half made. */
        if (symlinkat(target, dfd, SKILLS_TMP_LINK) < 0) {
            if (errno == EEXIST && unlinkat(dfd, SKILLS_TMP_LINK, 0) == 0 &&
                symlinkat(target, dfd, SKILLS_TMP_LINK) == 0)
                goto made;
            c->created--;
            note_error(c, err, errlen, "link", priv, p->name);
            continue;
        }
made:
        /* The agent's own links, so it can replace them. */
        if ((owner.uid != geteuid() || owner.gid != getegid()) &&
            fchownat(dfd, SKILLS_TMP_LINK, owner.uid, owner.gid, AT_SYMLINK_NOFOLLOW) < 0)
            log_debug("skills: unable to chown %s/%s: %s", priv, SKILLS_TMP_LINK,
                      strerror(errno));
        if (tree_rename_noreplace(dfd, SKILLS_TMP_LINK, p->name) < 0) {
            int e = errno;
            unlinkat(dfd, SKILLS_TMP_LINK, 0);
            c->created--;
            errno = e;
            /* Appeared since the listing: the agent's, so it wins. */
            if (e == EEXIST)
                c->shadowed++;
            else
                note_error(c, err, errlen, "rename a link into", priv, p->name);
            continue;
        }
        list_add(lists->linked, p->name);
    }

    /* Links into public whose target has gone, or whose name is now
     * ignored (only those we would have made: private/N -> public/N). */
    for (size_t i = 0; i < vl.n; i++) {
        struct ent *v = &vl.v[i];
        const char *lt = v->kind == ENT_LINK ? link_target(dfd, v, cache, pub, plen) : NULL;
        const char *rel;
        bool stale;
        if (v->ours) {
            /* A link to pub/name: stale once name left public. */
            struct ent *p = listing_find(&pl, v->name);
            stale = !p || p->ignored;
            rel = v->name;
        } else {
            if (!lt || strncmp(lt, target, plen + 1) != 0) {
                if (strcmp(v->name, SKILLS_TMP_LINK) && strcmp(v->name, SKILLS_TMP_FORK))
                    list_add(lists->private_, v->name);
                continue;
            }
            rel = lt + plen + 1;
            if (*rel && !strchr(rel, '/')) {
                struct ent *p = listing_find(&pl, rel);
                stale = !p || (p->ignored && strcmp(rel, v->name) == 0);
            } else {
                struct stat s;
                stale = stat(lt, &s) < 0 && errno == ENOENT;
            }
        }
        if (!stale) {
            if (strcmp(rel, v->name) != 0)
                list_add(lists->private_, v->name); /* a link of the agent's own */
            continue;
        }
        c->removed++;
        v->gone = true;
        if (!dry && unlinkat(dfd, v->name, 0) < 0 && errno != ENOENT) {
            c->removed--;
            note_error(c, err, errlen, "remove stale link", priv, v->name);
        }
    }
    if (cache && !dry)
        cache_update(cache, &vl, pub, plen);
    rc = c->errors ? -1 : 0;
    if (dfd >= 0)
        close(dfd);
out:
    listing_free(&pl);
    listing_free(&vl);
    return rc;
}

/* ------------------------------------------------------------------ */
/* skills.fork */

static bool valid_skill_name(const char *n)
{
    return *n && strlen(n) < 256 && !strchr(n, '/') && strcmp(n, ".") && strcmp(n, "..") &&
           strcmp(n, SKILLS_TMP_LINK) && strcmp(n, SKILLS_TMP_FORK);
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
        snprintf(err, errlen, "name: expected a skill name (no '/')");
        return -1;
    }
    int dfd = safepath_open_abs(priv, O_DIRECTORY, 0, why, sizeof(why));
    if (dfd < 0) {
        snprintf(err, errlen, "unable to open %s: %s", priv, why);
        return -1;
    }
    ssize_t n = readlinkat(dfd, name, link, sizeof(link) - 1);
    if (n < 0) {
        if (errno == EINVAL)
            snprintf(err, errlen, "%s/%s is already private", priv, name);
        else
            snprintf(err, errlen, "no linked skill %s in %s: %s", name, priv, strerror(errno));
        goto fail;
    }
    link[n] = '\0';
    if (strncmp(link, pub, plen) != 0 || link[plen] != '/') {
        snprintf(err, errlen, "%s/%s links to %s, not into %s", priv, name, link, pub);
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
            snprintf(err, errlen, "unable to replace %s/%s: %s", priv, name, strerror(errno));
            unlinkat(dfd, SKILLS_TMP_FORK, 0);
            goto fail;
        }
        close(pfd);
        close(dfd);
        log_info("skills: %s forked from %s (a file)", name, link);
        return 0;
    }
    if (sfd < 0 || fstat(sfd, &s) < 0) {
        snprintf(err, errlen, "unable to fork %s: %s: %s", name, link,
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
        snprintf(err, errlen, "unable to replace %s/%s: %s", priv, name, strerror(errno));
        char e2[64];
        tree_remove(dfd, SKILLS_TMP_FORK, e2, sizeof(e2));
        goto fail;
    }
    close(tfd);
    close(sfd);
    close(pfd);
    close(dfd);
    log_info("skills: %s forked from %s (%lu files, %lu dirs)", name, link, st.files, st.dirs + 1);
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
    int64_t poll_ms;
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

static void watch_public(void);

int skills_sync(const char *trigger, char *err, size_t errlen)
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
    int64_t t0 = mono_us();
    if (!S.cache)
        S.cache = skills_cache_new();
    int rc = skills_reconcile(S.pub, S.priv, (const char *const *)S.ignore, false, &S.last, NULL,
                              S.cache, err, errlen);
    S.last_us = mono_us() - t0;
    S.last_wall_ms = wall_ms();
    S.runs++;
    snprintf(S.trigger, sizeof(S.trigger), "%s", trigger);
    snprintf(S.error, sizeof(S.error), "%s", rc < 0 ? err : "");
    if (rc < 0)
        log_warn("skills (%s): %s", trigger, err);
    if (S.last.created || S.last.removed || rc < 0) {
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
        services_phase_set("skills", true);
    }
    if (S.started)
        watch_public();
    return rc;
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
 * a different inode and the old watch sees nothing. */
static void watch_public(void)
{
    struct stat s;

    if (S.ino_fd < 0 || stat(S.pub, &s) < 0)
        return;
    if (S.ino_wd >= 0 && s.st_dev == S.wdev && s.st_ino == S.wino)
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
    S.wdev = s.st_dev;
    S.wino = s.st_ino;
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
    const cJSON *g;
    size_t n = 0;

    free_config();
    S.enabled = cJSON_IsString(pub) && cJSON_IsString(priv);
    if (!S.enabled) {
        /* Nothing to lay: services after "skills" need not wait. */
        services_phase_set("skills", true);
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
        snprintf(err, errlen, "name: expected a skill name (no '/')");
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
        close(p[0]);
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

cJSON *skills_list_json(char *err, size_t errlen)
{
    struct skills_counts c;
    struct skills_lists l;
    cJSON *o;

    if (!S.enabled) {
        snprintf(err, errlen, "the skills overlay is not configured (skills.public, skills.private)");
        return NULL;
    }
    o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddStringToObject(o, "public_dir", S.pub);
    cJSON_AddStringToObject(o, "private_dir", S.priv);
    l.public_ = cJSON_AddArrayToObject(o, "public");
    l.private_ = cJSON_AddArrayToObject(o, "private");
    l.linked = cJSON_AddArrayToObject(o, "linked");
    l.shadowed = cJSON_AddArrayToObject(o, "shadowed");
    l.ignored = cJSON_AddArrayToObject(o, "ignored");
    /* A dry run: the lists are what is on disk now, not at the last sync. */
    if (skills_reconcile(S.pub, S.priv, (const char *const *)S.ignore, true, &c, &l, S.cache, err,
                         errlen) < 0 && c.errors == 0)
        cJSON_AddStringToObject(o, "error", err);
    cJSON_AddNumberToObject(o, "pending", c.created + c.removed);
    cJSON_AddNumberToObject(o, "poll_ms", (double)S.poll_ms);
    cJSON_AddBoolToObject(o, "inotify", S.ino_wd >= 0);
    cJSON_AddItemToObject(o, "last", skills_last_json());
    err[0] = '\0';
    return o;
}
