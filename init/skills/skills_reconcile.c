/* skills_reconcile: one pass of the overlay (links in private to the
 * skills of public, categories as directories, stale links removed, the
 * agent's own entries left alone) and the copy behind skills.fork; both
 * run in whatever process calls them (the walk child, or a test). */
#include "skills_priv.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cJSON.h>

#include "err.h"
#include "log.h"
#include "safepath.h"
#include "tree.h"

/* Who owns what hearth makes in private: the agent's service (see
 * skills_init); hearth itself until then. */
struct tree_owner skills_owner;
bool skills_owner_set;
char skills_last_report[2048];

void skills_owner_default(void)
{
    if (!skills_owner_set) {
        skills_owner.uid = geteuid();
        skills_owner.gid = getegid();
    }
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
    struct err *err;
    bool chown; /* what it makes goes to another owner than hearth's */
    struct skills_names names; /* the names both trees' skills go by */
    /* Something was judged on more than the names scan recorded, or
     * written: the next run may not answer by the check alone. */
    bool unrec;
};

/* {path, name} onto arr (NULL: not listed). */
static void item_add(cJSON *arr, const char *path, const char *name)
{
    cJSON *o;
    if (arr && (o = skills_names_item(path, name)))
        cJSON_AddItemToArray(arr, o);
}

/* Public path is not linked: by (a private path) stands at its place, or
 * for a whole category (category) at the category's. */
static void shadow_add(struct run *r, const char *path, const char *by, bool category)
{
    const struct skill_info *si = category ? NULL : skills_names_find(&r->names, path);
    const char *name = si ? si->name : strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    cJSON *o;

    if (!r->lists->shadowed || !(o = skills_names_item(path, name)))
        return;
    cJSON_AddStringToObject(o, "by", by);
    if (category)
        cJSON_AddBoolToObject(o, "category", true);
    cJSON_AddItemToArray(r->lists->shadowed, o);
}

/* A public skill not linked because of its name: shadowed by the
 * agent's own skill of that name, or a clash with the public one linked. */
static void verdict_add(struct run *r, const struct skill_info *si)
{
    cJSON *o;

    if (si->verdict == SKILL_SHADOWED) {
        r->c->shadowed++;
        shadow_add(r, si->path, si->by, false);
        return;
    }
    r->c->clashes++;
    if (r->lists->clashes && (o = skills_names_item(si->path, si->name))) {
        cJSON_AddStringToObject(o, "by", si->by);
        cJSON_AddItemToArray(r->lists->clashes, o);
    }
}

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
        err_unable(r->err, errno, "%s %s/%s", what, r->priv, path);
}

/* The text of link v (at path key), read on first use; NULL when it
 * cannot be read, or when the cache vouches for it (v->ours). */
static const char *link_target(struct run *r, int dfd, struct ent *v, const char *key)
{
    const struct skills_cache *k = r->cache;
    char buf[4096];

    if (v->read)
        return v->target;
    v->read = true;
    struct ent *hit = k ? skills_listing_find(&k->links, key) : NULL;
    if (hit && hit->ino == v->ino) {
        v->ours = true;
        v->cached = (uint32_t)(hit - k->links.v) + 1;
        return NULL;
    }
    ssize_t n = dfd >= 0 ? readlinkat(dfd, v->name, buf, sizeof(buf) - 1) : -1;
    if (n >= 0) {
        buf[n] = '\0';
        v->target = strdup(buf);
    }
    if (!v->target)
        r->unrec = true; /* judged as the agent's for want of its text */
    return v->target;
}

static void next_add(struct run *r, const char *key, struct ent *v)
{
    struct listing *nl = &r->next;
    if (r->dry || !r->cache)
        return;
    if (v->cached) {
        /* The cache's own entry (same path, same inode): kept as it is. */
        r->cache->links.v[v->cached - 1].seen = true;
        return;
    }
    if (nl->n == nl->cap) {
        size_t nc = nl->cap ? nl->cap * 2 : 256;
        struct ent *nv = realloc(nl->v, nc * sizeof(*nv));
        if (!nv)
            return; /* the cache is an optimisation: a miss costs a readlink */
        nl->v = nv;
        nl->cap = nc;
    }
    /* A copy: the listing's names live in its pool. */
    char *k = strdup(key);
    if (k)
        nl->v[nl->n++] = (struct ent){.name = k, .ino = v->ino, .kind = ENT_LINK};
}

/* Whether public entry p (a directory) is a category: no marker file in
 * it. A dot-name is never one (hidden trees are not Hermes categories).
 * Any error but ENOENT reads as "a skill": linking it whole is the
 * behaviour of a flat overlay, never a loss. */
static bool is_category(const struct run *r, int pfd, const struct ent *p, const char *path,
                        int level)
{
    char m[600];
    struct stat s;

    if (level >= skills_layout_depth || p->kind != ENT_DIR || p->name[0] == '.')
        return false;
    /* The names scan found its marker a moment ago: a skill, no stat. */
    if (skills_names_find(&r->names, path))
        return false;
    snprintf(m, sizeof(m), "%s/%s", p->name, skills_layout_marker);
    return fstatat(pfd, m, &s, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT;
}

/* Whether vfd/name holds the skill marker (a skill, not a category). */
static bool has_marker(int vfd, const char *name)
{
    char m[600];
    struct stat s;

    snprintf(m, sizeof(m), "%s/%s", name, skills_layout_marker);
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
    struct err why;
    struct err e2;

    if (tree_remove(vfd, SKILLS_TMP_CATEGORY, &e2) < 0) {
        run_error(r, "clear a temporary category beside", path);
        return -1;
    }
    int tfd = safepath_mkdir(vfd, SKILLS_TMP_CATEGORY, 0755, skills_owner.uid, skills_owner.gid, NULL, &why);
    if (tfd < 0) {
        run_error(r, "create a category directory for", path);
        return -1;
    }
    int mfd = openat(tfd, SKILLS_CATEGORY_MARK,
                     O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0644);
    if (mfd < 0) {
        int e = errno;
        close(tfd);
        tree_remove(vfd, SKILLS_TMP_CATEGORY, &e2);
        errno = e;
        run_error(r, "mark the category directory for", path);
        return -1;
    }
    if (r->chown && fchown(mfd, skills_owner.uid, skills_owner.gid) < 0)
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
    char path[4096];
    struct err why;
    struct err e2;
    struct ent *v = skills_listing_find(vl, p->name);

    join(path, sizeof(path), rel, p->name);
    int cpfd = openat(pfd, p->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (cpfd < 0) {
        if (r->c->errors++ == 0)
            err_unable(r->err, errno, "open %s/%s", r->pub, path);
        return;
    }
    r->c->categories++;
    if (v && v->kind == ENT_DIR) {
        /* A real directory, the agent's own or one hearth made: merged.
         * Opened beneath private's fd without following a link, so one
         * swapped in since the listing is refused, never entered. */
        int cvfd = safepath_open(vfd, p->name, O_DIRECTORY, 0, &why);
        if (cvfd < 0 && (errno == ELOOP || errno == ENOTDIR || errno == ENOENT)) {
            /* Replaced by the agent since the listing: its entry wins. */
            r->c->shadowed++;
            shadow_add(r, path, path, true);
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
    const char *lt = v && v->kind == ENT_LINK ? link_target(r, vfd, v, path) : NULL;
    if (v && !v->ours && !(lt && strcmp(lt, target) == 0)) {
        /* A file, or a link of the agent's (never followed): it wins. */
        r->c->shadowed++;
        shadow_add(r, path, path, true);
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
            tree_remove(vfd, SKILLS_TMP_CATEGORY, &e2);
            errno = e;
            if (e != EEXIST) {
                run_error(r, "create category", path);
            } else {
                /* The agent made it meanwhile: its own, merged next run. */
                r->c->shadowed++;
                shadow_add(r, path, path, true);
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
            shadow_add(r, path, path, true);
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
    tree_remove(vfd, SKILLS_TMP_CATEGORY, &e2);
}

/* A private directory that is not (or no longer) a public category: when
 * hearth made it, its links are judged against an empty public, and it
 * goes once nothing else is in it. An agent's directory is never
 * entered. */
static void retire_category(struct run *r, int vfd, struct ent *v, const char *rel, int level)
{
    char path[4096];
    struct err why;
    size_t left = 0;

    join(path, sizeof(path), rel, v->name);
    bool ours = level < skills_layout_depth && v->name[0] != '.' && made_by_hearth(vfd, v->name);
    /* The agent's own category (no marker: not a skill) may still hold
     * links hearth made while public had it: those are judged like any
     * link of ours. Its skills and the directory itself are never
     * touched, and a skill directory is never entered. */
    if (!ours && (level >= skills_layout_depth || v->name[0] == '.' || has_marker(vfd, v->name)))
        return;
    int cvfd = safepath_open(vfd, v->name, O_DIRECTORY, 0, &why);
    if (cvfd < 0) {
        run_error(r, "open category", path);
        return;
    }
    descend(r, -1, cvfd, path, level, &left);
    if (!ours || left > 0 || r->dry) {
        close(cvfd);
        return;
    }
    /* Empty but for the mark: the mark goes first, then the directory; a
     * skill the agent makes in between keeps the directory (unmarked
     * now, so the agent's from then on). */
    r->unrec = true;
    if (unlinkat(cvfd, SKILLS_CATEGORY_MARK, 0) < 0 && errno != ENOENT) {
        run_error(r, "unmark category", path);
    } else if (unlinkat(vfd, v->name, AT_REMOVEDIR) < 0) {
        if (errno != ENOTEMPTY && errno != EEXIST)
            run_error(r, "remove category", path);
    } else {
        r->c->cat_removed++;
    }
    close(cvfd);
}

/* Lists one directory level of root into l: dir is its descriptor (-1:
 * known empty, nothing read). An unreadable directory changes nothing
 * below it. At the top that is the run's failure (not an entry error: the
 * overlay is not usable); deeper it is one entry that could not be
 * handled. */
static int read_level(struct run *r, struct listing *l, int dir, const char *root, int level,
                      bool priv, const char *rel)
{
    struct err lerr;
    if (dir < 0)
        return skills_listing_index(l) < 0 ? -1 : 0;
    /* The names scan has just read it: taken, not read again. */
    if (skills_names_take(&r->names, priv, rel, dir, l))
        return 0;
    /* A listing the scan did not record: the check could not vouch for
     * it. */
    r->unrec = true;
    int fd = dup(dir);
    if (fd >= 0 && skills_listing_read(l, fd, root, &lerr) >= 0)
        return 0;
    if ((level > 1 && r->c->errors++ == 0) || level == 1)
        err_set(r->err, "%s", fd < 0 ? strerror(errno) : lerr.msg);
    return -1;
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
    struct err lerr;
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
    if (read_level(r, &pl, pfd, r->pub, level, false, rel) < 0 ||
        read_level(r, &vl, vfd, r->priv, level, true, rel) < 0)
        goto out;
    /* Every level is bounded on its own; the sum is bounded too, so a
     * share of many huge categories costs bounded time and memory. */
    r->total += pl.n + vl.n;
    if (r->total > SKILLS_MAX_TOTAL) {
        if (c->errors++ == 0)
            err_set(r->err, "unable to read %s: more than %d entries in all", r->pub,
                    SKILLS_MAX_TOTAL);
        goto out;
    }

    /* Temporary names left by a crash between making and renaming. */
    struct ent *tmp = skills_listing_find(&vl, SKILLS_TMP_LINK);
    if (tmp && tmp->kind == ENT_LINK && !r->dry) {
        r->unrec = true;
        unlinkat(vfd, SKILLS_TMP_LINK, 0);
    }
    if (skills_listing_find(&vl, SKILLS_TMP_CATEGORY) && !r->dry) {
        r->unrec = true;
        if (tree_remove(vfd, SKILLS_TMP_CATEGORY, &lerr) < 0)
            log_debug("skills: %s", lerr.msg);
    }

    for (size_t i = 0; i < pl.n; i++) {
        struct ent *p = &pl.v[i];
        join(path, sizeof(path), rel, p->name);
        /* Our temporary names and Hermes's own files are never skills. */
        p->ignored = skills_is_ignored(p->name, r->ignore) || skills_reserved_name(p->name);
        if (p->ignored) {
            c->ignored++;
            skills_list_add(lists->ignored, path);
            continue;
        }
        size_t nl = strlen(p->name);
        if (tlen + nl >= sizeof(target)) {
            c->errors++;
            continue;
        }
        memcpy(target + tlen, p->name, nl + 1);
        struct ent *pv = skills_listing_find(&vl, p->name);
        bool vouched = false;
        if (pv && pv->kind == ENT_LINK && r->cache &&
            skills_hash(path) % RECHECK_SLICES != r->cache->runs % RECHECK_SLICES) {
            link_target(r, vfd, pv, path);
            vouched = pv->ours;
            /* Left unasked whether it has become a category: the next
             * run must ask in its turn, not repeat this one. */
            if (vouched && level < skills_layout_depth && p->kind == ENT_DIR &&
                p->name[0] != '.' && !skills_names_find(&r->names, path))
                r->unrec = true;
        }
        if (!vouched && is_category(r, pfd, p, path, level)) {
            p->category = true;
            merge_category(r, pfd, vfd, &vl, p, rel, level, target);
            continue;
        }
        c->public_n++;
        /* A skill (a directory with the marker) is listed as one; any
         * other public entry (a category's DESCRIPTION.md) is linked the
         * same way and listed apart. */
        const struct skill_info *si = skills_names_find(&r->names, path);
        if (si)
            item_add(lists->public_, path, si->name);
        else
            skills_list_add(lists->other, path);
        bool beaten = si && si->verdict != SKILL_LINK;
        struct ent *v = pv;
        if (v) {
            const char *lt = v->kind == ENT_LINK ? link_target(r, vfd, v, path) : NULL;
            if ((v->ours || (lt && strcmp(lt, target) == 0)) && beaten) {
                /* A link of ours to a skill that has since lost by name:
                 * it goes, so the name resolves to the one that wins. */
                c->removed++;
                v->gone = true;
                if (!r->dry && unlinkat(vfd, p->name, 0) < 0 && errno != ENOENT) {
                    c->removed--;
                    run_error(r, "remove the link of a shadowed skill", path);
                    continue;
                }
                verdict_add(r, si);
            } else if (v->ours || (lt && strcmp(lt, target) == 0)) {
                c->linked++;
                item_add(si ? lists->linked : NULL, path, si ? si->name : p->name);
            } else {
                /* Anything else of that name is the agent's: it wins. */
                c->shadowed++;
                shadow_add(r, path, path, false);
            }
            continue;
        }
        if (beaten) {
            verdict_add(r, si);
            continue;
        }
        c->created++;
        if (r->dry)
            continue;
        /* A link of hearth's own owner (a root agent, as the shipped
         * image's) is made at its name in one step: a symlink appears
         * whole, and EEXIST means the name appeared since the listing,
         * the agent's, which wins. Half the cost of a cold run went to
         * the rename the other way takes. */
        if (!r->chown) {
            if (symlinkat(target, vfd, p->name) == 0) {
                item_add(si ? lists->linked : NULL, path, si ? si->name : p->name);
            } else {
                c->created--;
                if (errno == EEXIST) {
                    c->shadowed++;
                    shadow_add(r, path, path, false);
                } else {
                    run_error(r, "link", path);
                }
            }
            continue;
        }
        /* For another owner: link under a temporary name, chown, then
         * rename, so private/N is absent or a whole link with its owner,
         * never one that is still hearth's. */
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
        if (fchownat(vfd, SKILLS_TMP_LINK, skills_owner.uid, skills_owner.gid, AT_SYMLINK_NOFOLLOW) < 0)
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
                shadow_add(r, path, path, false);
            } else {
                run_error(r, "rename a link into", path);
            }
            continue;
        }
        /* Not cached yet: the next run reads it once, then vouches. */
        item_add(si ? lists->linked : NULL, path, si ? si->name : p->name);
    }

    /* Links into public whose target has gone, or whose name is now
     * ignored (only those we would have made: private/N -> public/N);
     * directories hearth made for categories public no longer has. */
    for (size_t i = 0; i < vl.n; i++) {
        struct ent *v = &vl.v[i];
        if (v->gone || skills_reserved_name(v->name))
            continue;
        join(path, sizeof(path), rel, v->name);
        if (v->kind == ENT_DIR) {
            struct ent *p = skills_listing_find(&pl, v->name);
            if (p && !p->ignored && p->category) {
                (*left)++;
                continue; /* a merged category */
            }
            struct stat s;
            retire_category(r, vfd, v, rel, level);
            if (r->dry || fstatat(vfd, v->name, &s, AT_SYMLINK_NOFOLLOW) == 0)
                (*left)++;
            continue;
        }
        const char *lt = v->kind == ENT_LINK ? link_target(r, vfd, v, path) : NULL;
        const char *sub;
        bool stale;
        if (v->ours) {
            /* A link to pub/rel/name: stale once name left public. */
            struct ent *p = skills_listing_find(&pl, v->name);
            stale = !p || p->ignored;
            sub = v->name;
        } else {
            if (!lt || strncmp(lt, prefix, tlen) != 0) {
                (*left)++;
                continue;
            }
            sub = lt + tlen;
            if (*sub && !strchr(sub, '/')) {
                struct ent *p = skills_listing_find(&pl, sub);
                stale = !p || (p->ignored && strcmp(sub, v->name) == 0);
            } else {
                struct stat s;
                stale = stat(lt, &s) < 0 && errno == ENOENT;
                r->unrec = true; /* deeper than anything recorded */
            }
        }
        if (!stale) {
            if (strcmp(sub, v->name) != 0) {
                (*left)++; /* a link of the agent's own */
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
    skills_listing_free(&pl);
    skills_listing_free(&vl);
    return rc;
}

int skills_reconcile(const char *pub, const char *priv, const char *const *ignore, bool dry,
                     struct skills_counts *c, struct skills_lists *lists,
                     struct skills_cache *cache, struct err *err)
{
    struct skills_lists none = {0};
    struct run r = {.pub = pub, .priv = priv, .plen = skills_norm_len(pub), .ignore = ignore,
                    .dry = dry, .c = c, .lists = lists ? lists : &none, .cache = cache,
                    .err = err};
    size_t left;
    int rc;

    memset(c, 0, sizeof(*c));
    if (err)
        err->msg[0] = '\0';
    skills_owner_default();
    r.chown = skills_owner.uid != geteuid() || skills_owner.gid != getegid();
    if (r.plen + 2 >= 4096 - 256)
        return err_set(err, "unable to use %s: path too long", pub);
    /* public first: if it cannot be read (a share not there), nothing in
     * private may be judged stale. */
    int pfd = open(pub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (pfd < 0)
        return err_unable(err, errno, "open %s", pub);
    /* private is the agent's: opened once, no link anywhere on its path
     * followed (a private directory renamed and replaced by a link is an
     * error, never written through), and every change below is made by
     * this fd or by fds opened beneath it. */
    struct err why;
    int vfd = safepath_open_abs(priv, O_DIRECTORY, 0, &why);
    if (vfd < 0 && errno == ENOENT && !dry) {
        int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        vfd = root < 0 || priv[0] != '/'
                  ? -1
                  : safepath_mkdir(root, priv + 1, 0755, skills_owner.uid, skills_owner.gid, NULL, &why);
        if (root >= 0)
            close(root);
        if (vfd < 0) {
            err_set(err, "unable to create %s: %s", priv, why.msg);
            close(pfd);
            return -1;
        }
    } else if (vfd < 0 && (errno != ENOENT || !dry)) {
        err_set(err, "unable to open %s: %s", priv, why.msg);
        close(pfd);
        return -1;
    }
    /* Nothing read since the last whole run has changed: that run's
     * answer stands, and nothing needs reading, judging or writing. A
     * run that lists keeps reading: its lists are what is on disk. */
    uint64_t cfg = skills_check_cfg(pub, priv, ignore, &skills_owner);
    if (!dry && cache && !lists &&
        skills_check_replay(&cache->check, &cache->marks, cfg, pfd, vfd)) {
        *c = cache->check.counts;
        c->checked = true;
        snprintf(skills_last_report, sizeof(skills_last_report), "%s", cache->check.report);
        cache->runs++;
        cache->replayed++;
        cache->changed = false;
        close(vfd);
        close(pfd);
        return 0;
    }
    /* An unreadable top level is a run that changed nothing: an error
     * even when no entry was counted. */
    skills_dents_buf = malloc(GETDENTS_BUF); /* NULL: each read allocates its own */
    /* Names first: whether a public skill may be linked depends on every
     * skill of both trees, wherever it sits. Without them (out of memory,
     * too many entries) the run goes on by path alone and says so. */
    if (skills_names_scan(&r.names, pfd, vfd, ignore, cache ? &cache->marks : NULL) < 0 &&
        c->errors++ == 0)
        err_set(err, "unable to learn the skills' names: out of memory or more than %d "
                "entries", SKILLS_MAX_TOTAL);
    int lrc = reconcile_level(&r, pfd, vfd, "", 1, &left);
    free(skills_dents_buf);
    skills_dents_buf = NULL;
    c->names_digest = r.names.digest;
    skills_names_report(&r.names, skills_last_report, sizeof(skills_last_report));
    for (size_t i = 0; r.lists->private_ && i < r.names.npriv; i++)
        item_add(r.lists->private_, r.names.priv[i].path, r.names.priv[i].name);
    if (cache && !dry) {
        /* What this run vouched for stays, what it learnt comes in. */
        cache->runs++;
        skills_cache_update(cache, &r.next, &r.names.marks);
        /* Its reads become the next run's check, when they can vouch for
         * everything it did: read cleanly, changed nothing. */
        bool clean = lrc == 0 && !r.unrec && !c->errors && !c->created && !c->removed &&
                     !c->cat_created && !c->cat_converted && !c->cat_removed;
        if (skills_check_update(&cache->check, clean ? &r.names.draft : NULL, &cache->marks, cfg,
                                c, skills_last_report))
            cache->changed = true;
    } else if (cache) {
        skills_cache_unsee(cache);
    }
    skills_names_free(&r.names);
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
bool skills_valid_name(const char *n)
{
    char buf[1024];
    int parts = 0;

    if (!*n || strlen(n) >= sizeof(buf))
        return false;
    memcpy(buf, n, strlen(n) + 1);
    for (char *save = NULL, *c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
        if (strlen(c) >= 256 || !strcmp(c, ".") || !strcmp(c, "..") || skills_reserved_name(c))
            return false;
        parts++;
    }
    return parts > 0 && parts <= skills_layout_depth && n[0] != '/' && n[strlen(n) - 1] != '/' &&
           !strstr(n, "//");
}

int skills_fork_at(const char *pub, const char *priv, const char *name, struct err *err)
{
    size_t plen = skills_norm_len(pub);
    char link[4096];
    struct err why;
    struct stat s;
    struct tree_stats st;
    int pfd = -1, sfd = -1, tfd = -1;

    skills_owner_default();
    if (!skills_valid_name(name))
        return err_set(err, "name: expected a skill name or category/skill");
    int dfd = safepath_open_abs(priv, O_DIRECTORY, 0, &why);
    if (dfd < 0)
        return err_set(err, "unable to open %s: %s", priv, why.msg);
    /* category/skill: the category is opened beneath private without
     * following a link (one the agent planted there is refused), and the
     * skill is handled by that fd from here on, by its last name. */
    const char *full = name, *slash = strrchr(name, '/');
    if (slash) {
        char cat[1024];
        snprintf(cat, sizeof(cat), "%.*s", (int)(slash - name), name);
        int cfd = safepath_open(dfd, cat, O_DIRECTORY, 0, &why);
        if (cfd < 0) {
            err_set(err, "unable to open %s/%s: %s", priv, cat, why.msg);
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
            err_set(err, "%s/%s is already private", priv, full);
        else
            err_set(err, "no linked skill %s in %s: %s", full, priv, strerror(errno));
        goto fail;
    }
    link[n] = '\0';
    if (strncmp(link, pub, plen) != 0 || link[plen] != '/') {
        err_set(err, "%s/%s links to %s, not into %s", priv, full, link, pub);
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
        err_unable(err, errno, "open %s", pub);
        goto fail;
    }
    sfd = safepath_open(pfd, rel, O_DIRECTORY, 0, &why);
    if (sfd < 0 && errno == ENOTDIR) {
        /* A one-file skill: renaming a file over the link replaces it. */
        if (tree_copy_file(pfd, rel, dfd, SKILLS_TMP_FORK, &skills_owner, err) < 0)
            goto fail;
        if (renameat(dfd, SKILLS_TMP_FORK, dfd, name) < 0) {
            err_unable(err, errno, "replace %s/%s", priv, full);
            unlinkat(dfd, SKILLS_TMP_FORK, 0);
            goto fail;
        }
        close(pfd);
        close(dfd);
        log_info("skills: %s forked from %s (a file)", full, link);
        return 0;
    }
    if (sfd < 0 || fstat(sfd, &s) < 0) {
        err_set(err, "unable to fork %s: %s: %s", full, link,
                sfd < 0 ? why.msg : strerror(errno));
        goto fail;
    }
    /* A copy left by an interrupted fork is redone from scratch. */
    if (tree_remove(dfd, SKILLS_TMP_FORK, err) < 0)
        goto fail;
    tfd = safepath_mkdir(dfd, SKILLS_TMP_FORK, 0700, skills_owner.uid, skills_owner.gid, NULL, &why);
    if (tfd < 0) {
        err_set(err, "unable to create %s/%s: %s", priv, SKILLS_TMP_FORK, why.msg);
        goto fail;
    }
    char tmp_path[4200];
    snprintf(tmp_path, sizeof(tmp_path), "%s/%s", priv, SKILLS_TMP_FORK);
    if (slash)
        snprintf(tmp_path, sizeof(tmp_path), "%s/%.*s/%s", priv, (int)(slash - full), full,
                 SKILLS_TMP_FORK);
    /* The mode goes on the copy's own fd: a name swapped meanwhile is
     * never chmodded. */
    if (tree_copy_fd(sfd, tfd, tmp_path, NULL, &skills_owner, &st, err) < 0 ||
        fchmod(tfd, (s.st_mode & 07777) | 0700) < 0) {
        if (err && !err->msg[0])
            err_unable(err, errno, "chmod %s", tmp_path);
        struct err e2;
        tree_remove(dfd, SKILLS_TMP_FORK, &e2);
        goto fail;
    }
    /* Swap the copy and the link in one step where the filesystem can;
     * elsewhere there is a moment with neither. */
    if (tree_rename_exchange(dfd, SKILLS_TMP_FORK, name) == 0) {
        unlinkat(dfd, SKILLS_TMP_FORK, 0);
    } else if (unlinkat(dfd, name, 0) < 0 || renameat(dfd, SKILLS_TMP_FORK, dfd, name) < 0) {
        err_unable(err, errno, "replace %s/%s", priv, full);
        struct err e2;
        tree_remove(dfd, SKILLS_TMP_FORK, &e2);
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
