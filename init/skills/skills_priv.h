/* skills_priv: what the skills files share and nothing else includes:
 * the indexed directory listing and the links cache (skills_listing.c),
 * the layout and the owner of what the overlay makes
 * (skills_reconcile.c), for the runtime in skills.c. */
#ifndef HEARTH_SKILLS_PRIV_H
#define HEARTH_SKILLS_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <cJSON.h>

#include "err.h"
#include "skills.h"
#include "tree.h"

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
    bool seen; /* in the cache: still a link of ours this run */
    uint32_t cached; /* listing: index+1 of the cache's link that vouched */
};

struct listing {
    struct ent *v;
    size_t n, cap;
    uint32_t *slot; /* index+1 into v, 0 = empty; size mask+1 */
    size_t mask;
    /* A listing read from a directory keeps its names here, one block
     * (not one allocation a name); NULL: each name is its own. */
    char *pool;
    size_t pool_len, pool_cap;
};

/* A skill's marker file as the names scan last read it: the name its
 * front matter gives ("" for none) and the stat that vouches the file is
 * the one read (device, inode, size, change and modification times). A
 * marker that stats the same is not opened again; one changed in any of
 * those is read. */
struct mark {
    char *path; /* below the tree's root: "skill", "category/skill" */
    char *name;
    bool priv;  /* of the private tree (else public) */
    bool seen;  /* vouched for by this run's stat */
    uint64_t dev, ino, size;
    int64_t mtime_ns, ctime_ns;
};

struct marks {
    struct mark *v;
    size_t n, cap;
    uint32_t *slot; /* index+1 into v, 0 = empty; size mask+1 */
    size_t mask;
};

/* A marker changed this recently (its mtime or ctime, against the clock
 * when it is read) is read again every run rather than vouched for by its
 * stat: a rewrite of the same size within one tick of the filesystem's
 * timestamps (2 s on the coarsest) would leave the stat as it was. */
#define MARK_RACY_NS 2000000000LL
/* MARK_RACY_NS, a variable so the unit tests can trust a marker they
 * have just written. */
extern int64_t skills_mark_racy_ns;

void skills_marks_free(struct marks *m);
/* Adds a copy of path and name with s's identity; -1 out of memory. */
int skills_marks_add(struct marks *m, bool priv, const char *path, const char *name,
                     const struct stat *s);
/* Appends k (its strings now m's); -1 out of memory. */
int skills_marks_push(struct marks *m, struct mark k);
int skills_marks_index(struct marks *m);
/* The mark of path in the private or public tree, or NULL. */
struct mark *skills_marks_find(const struct marks *m, bool priv, const char *path);
/* Whether s is the file mark m describes. */
bool skills_mark_same(const struct mark *m, const struct stat *s);

/* ------------------------------------------------------------------ */
/* The check (skills_cache.c): what a whole run read, kept so the next
 * run can learn by stats alone that none of it changed, and then answer
 * as that run did without reading a directory or judging an entry.
 *
 * A run's outcome is a function of what it read: the listing of every
 * directory it walked in both trees, whether each directory entry that
 * could be a skill holds the marker, each marker's front-matter name,
 * and its settings. A listing is vouched for by its directory's stamps
 * (device, inode, mtime, ctime: a name added, removed or renamed in it
 * moves both times), a marker by its own stat, as the links cache has
 * it. So the check is the run's reads as steps, replayed in order:
 *
 *   CHECK_ROOT   a tree's root (the run's own fd) has the stamps recorded
 *   CHECK_DIR    name, opened beneath the current directory without
 *                following a link, holds no marker and has its stamps
 *   CHECK_UP     back to the directory above
 *   CHECK_MARK   a public skill: name/marker stats as mark[a]
 *   CHECK_NOMARK a public directory that is neither skill nor category:
 *                name/marker is absent
 *   CHECK_PSKILL one of the agent's skills: name, opened without
 *                following a link, has its stamps and its marker stats
 *                as mark[a]
 *   CHECK_PNOMARK one of the agent's directories that is neither: name,
 *                opened so, holds no marker
 *
 * Only a run that read everything cleanly and changed nothing is kept:
 * no error, no link made or removed, every directory and marker settled
 * for longer than MARK_RACY_NS (a change within the same tick of the
 * filesystem's clock would leave the stamps as they were), every listing
 * the reconcile used one the names scan recorded, no judgement that
 * rests on anything else (an agent's link deeper into public, a cached
 * link to what may have become a category). */
enum check_op { CHECK_ROOT, CHECK_DIR, CHECK_UP, CHECK_MARK, CHECK_NOMARK, CHECK_PSKILL,
                CHECK_PNOMARK };

struct check_step {
    uint8_t op;
    uint8_t priv; /* CHECK_ROOT: which tree */
    uint16_t pad;
    /* ROOT, DIR, PSKILL: b is the index of the stamps. DIR, NOMARK,
     * PNOMARK: a is the name's offset in the pool. MARK, PSKILL: a is
     * the mark; for MARK b is where the skill's own name starts in the
     * mark's path. */
    uint32_t a, b;
};

struct check_stamp {
    uint64_t dev, ino;
    int64_t mtime_ns, ctime_ns;
};

struct skills_check {
    struct check_step *step; /* NULL: no check (the next run reads) */
    size_t n, cap;
    struct check_stamp *stamp;
    size_t nstamp, capstamp;
    char *pool;
    size_t npool, cappool;
    uint64_t cfg; /* the settings the run had (skills_check_cfg) */
    struct skills_counts counts;
    char *report; /* skills_last_report as the run left it */
};

/* A check being recorded by a run: as above, but a MARK or PSKILL
 * step's a indexes path (the skill's path, owned by the names scan),
 * resolved to its mark once the cache holds the run's marks. unrec: a
 * read that cannot be replayed, so nothing is kept. */
struct check_draft {
    struct skills_check k;
    const char **path;
    size_t npath, cappath;
    bool unrec;
};

/* The settings a run's outcome depends on besides the trees (the
 * layout, and owner: who owns what it makes). */
uint64_t skills_check_cfg(const char *pub, const char *priv, const char *const *ignore,
                          const struct tree_owner *owner);
/* Whether stamps st are older than racy_ns (mtime and ctime both). */
bool skills_stamp_settled(const struct stat *st, int64_t racy_ns);
/* Records one read of the run, in the order made: op, the tree (priv),
 * name (DIR, NOMARK, PNOMARK), the skill's path (MARK, PSKILL) and
 * where its own name starts in it (MARK, off), the stamps st (ROOT, DIR,
 * PSKILL: too recent for racy_ns, and nothing is kept). Out of memory,
 * too: d->unrec. */
void skills_draft(struct check_draft *d, enum check_op op, bool priv, const char *name,
                  const char *path, size_t off, const struct stat *st, int64_t racy_ns);
void skills_draft_free(struct check_draft *d);
/* Replaces k with the draft d (NULL, or a draft that cannot be kept:
 * none), its marks resolved in m, with the run's cfg, counts and report;
 * d is consumed. Whether k may have changed. */
bool skills_check_update(struct skills_check *k, struct check_draft *d, const struct marks *m,
                         uint64_t cfg, const struct skills_counts *c, const char *report);
/* Whether every step of k still holds, for the trees open at pfd and vfd
 * and settings cfg. Reads only: no allocation, nothing written (in a
 * walk child, the cache's pages stay shared with the loop). */
bool skills_check_replay(const struct skills_check *k, const struct marks *m, uint64_t cfg,
                         int pfd, int vfd);

/* Links of ours seen by the last run, by path (category/skill) and
 * inode: a link is immutable, so one still there under the same inode
 * needs no readlink. That keeps a no-op pass to directory reads. The
 * skills' markers the last run read, so that a no-op pass reads none.
 * The check, so that a pass over trees that have not changed reads no
 * directory at all. */
struct skills_cache {
    struct listing links;
    struct marks marks;
    struct skills_check check;
    unsigned runs; /* which slice of cached links has its marker re-checked */
    unsigned replayed; /* runs answered by the check alone */
    bool changed;  /* the last run changed links, marks or the check (not only runs) */
};

/* The end of a run that may change the cache (not a dry one): what it
 * did not see again goes, what it learnt (links, marks: consumed) comes
 * in, and cache->changed says whether anything did. A no-op pass over a
 * tree the cache knows allocates nothing here. */
void skills_cache_update(struct skills_cache *k, struct listing *links, struct marks *marks);
/* After a dry run: the seen flags it set are cleared. */
void skills_cache_unsee(struct skills_cache *k);

/* A link the cache vouches for was a skill when it was made; whether its
 * public entry has since lost the marker (become a category) is checked
 * for one sixteenth of them per run, so a no-op pass over 10,000 flat
 * skills costs ~600 lookups rather than 10,000, and a skill turned into
 * a category is converted within 16 runs. */
#define RECHECK_SLICES 16u

/* getdents64 reads this much at a time. */
#define GETDENTS_BUF 65536
/* The getdents buffer, kept for the length of one reconcile: a run over
 * 100 categories reads 200 directories, and a fresh 64 KiB each time is
 * an mmap, page faults and an munmap per directory. NULL between runs. */
extern char *skills_dents_buf;

uint32_t skills_hash(const char *s);
bool skills_is_ignored(const char *name, const char *const *ignore);
void skills_list_add(cJSON *arr, const char *name);
struct ent *skills_listing_find(const struct listing *l, const char *name);
void skills_listing_free(struct listing *l);
int skills_listing_index(struct listing *l);
int skills_listing_read(struct listing *l, int fd, const char *path, struct err *err);
size_t skills_norm_len(const char *p);

/* The layout (skills_layout): the file that makes a directory a skill,
 * and how many levels deep categories go. */
extern char skills_layout_marker[256];
extern int skills_layout_depth;
/* A skill name, or category/.../skill within the layout's depth. */
bool skills_valid_name(const char *n);

/* Who owns what hearth makes in private: the agent's service (set by
 * skills_init), hearth itself until then (skills_owner_default). */
extern struct tree_owner skills_owner;
extern bool skills_owner_set;
void skills_owner_default(void);

/* Names hearth keeps for itself or leaves to Hermes (.hub,
 * .bundled_manifest): never linked, merged or removed. */
bool skills_reserved_name(const char *n);

/* ------------------------------------------------------------------ */
/* The names skills go by (skills_names.c): both trees' skills with their
 * names, and each public skill's verdict, learnt before a reconcile
 * links anything. */

/* How much of a marker file is read for its front matter. */
#define SKILLS_FRONT_MAX 4096
/* Lines of one run's report of shadows and clashes that are logged. */
#define SKILLS_REPORT_LINES 16

enum skill_verdict {
    SKILL_LINK,     /* linked (or left to the path rules) */
    SKILL_SHADOWED, /* a name of it is one of the agent's own skills' */
    SKILL_CLASH,    /* a name of it is an earlier public skill's */
};

struct skill_info {
    char *path;      /* below the skill directory: "skill", "category/skill" */
    char *name;      /* the front matter's name, else the directory's */
    const char *dir; /* the directory's name (the end of path) */
    enum skill_verdict verdict;
    const char *by; /* the path that wins: a private one, or a public one */
};

/* An index by string over a skills array (index+1, 0 = empty). */
struct nindex {
    uint32_t *slot;
    const char **key;
    size_t mask;
};

/* A directory the names scan listed, kept for the reconcile, which
 * lists the same directories right after: handed over (skills_names_take)
 * rather than read twice, when the directory it then opens is the one
 * listed (device and inode). */
struct kept_dir {
    char *rel; /* below the tree's root; "" for the root */
    dev_t dev;
    ino_t ino;
    struct listing l;
};

struct skills_names {
    struct skill_info *priv, *pub; /* each sorted by path */
    size_t npriv, npub, cappriv, cappub;
    struct nindex bypath; /* public path -> pub */
    uint32_t digest;      /* of the shadows and clashes, 0 when none */
    struct marks marks;   /* the markers read this run, for the next one */
    struct kept_dir *kept[2]; /* [0] public, [1] private */
    size_t nkept[2], capkept[2];
    struct nindex keptby[2]; /* rel -> kept */
    struct check_draft draft; /* the reads, for the next run's check */
};

/* Walks private (vfd; -1: none) and public (pfd) for their skills and
 * judges each public one; old (may be NULL) holds the markers the last
 * run read (those vouched for again are flagged seen; n->marks gets those
 * read anew). -1 when out of memory or past SKILLS_MAX_TOTAL entries (n
 * is then empty). */
int skills_names_scan(struct skills_names *n, int pfd, int vfd, const char *const *ignore,
                      struct marks *old);
/* The listing of directory fd (rel below the private or public root) as
 * the scan read it, moved into out; false when the scan kept none for it
 * (or the directory fd names is another one). */
bool skills_names_take(struct skills_names *n, bool priv, const char *rel, int fd,
                       struct listing *out);
/* The public skill at path, or NULL (not a skill). */
const struct skill_info *skills_names_find(const struct skills_names *n, const char *path);
void skills_names_free(struct skills_names *n);
/* {path, name} */
cJSON *skills_names_item(const char *path, const char *name);
/* The shadows and clashes as log lines (at most SKILLS_REPORT_LINES). */
void skills_names_report(const struct skills_names *n, char *out, size_t outlen);
/* The name: of YAML front matter in buf[0..len). */
bool skills_front_name(const char *buf, size_t len, char *out, size_t outlen);
/* What the last skills_reconcile in this process judged, as
 * skills_names_report has it (for a walk child to send the loop). */
extern char skills_last_report[2048];

#endif
