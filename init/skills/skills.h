/* skills: the public-skills overlay. Every entry N of the public skill
 * directory (usually a read-only host share) gets a link private/N ->
 * public/N in the agent's own skill directory, unless private/N exists:
 * then the private entry wins and is never touched. Links into public
 * whose target has gone are removed, names matching the ignore globs are
 * never linked, and nothing outside private is written.
 *
 * Categories: a public directory without the marker file (skills.marker,
 * SKILL.md) above skills.depth is a category, a real directory in private
 * merged entry by entry, so a private category never hides public skills
 * and the agent can add its own; hearth marks the ones it makes
 * (SKILLS_CATEGORY_MARK) and removes only those, only when empty.
 *
 * Owns the phase "skills" (reached after the first reconcile). Runs at
 * boot (after mounts and seeding), on skills.sync, on sandbox.init and
 * resume (skills_sync from those modules), every poll_ms on a monotonic
 * timer, and on inotify events in public where the filesystem sends them
 * (virtio-fs does not for host-side changes: hence the poll). */
#ifndef HEARTH_SKILLS_H
#define HEARTH_SKILLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "err.h"

struct config;
struct cJSON;

/* Entries per directory one reconcile accepts; more is an error, so a
 * runaway share costs bounded memory. */
#define SKILLS_MAX_ENTRIES 100000
/* The temporary names in private (links are made there, then renamed). */
#define SKILLS_TMP_LINK ".hearth-link.tmp"
#define SKILLS_TMP_FORK ".hearth-fork.tmp"
#define SKILLS_TMP_CATEGORY ".hearth-category.tmp"
/* The file inside a category directory hearth made (and so may remove
 * once it is empty); a directory without it is the agent's. */
#define SKILLS_CATEGORY_MARK ".hearth-category"
/* The layout defaults (skills.marker, skills.depth; kept with every
 * other default in config.h) and bounds. */
#define SKILLS_MARKER CONFIG_SKILLS_MARKER
#define SKILLS_DEPTH CONFIG_SKILLS_DEPTH
#define SKILLS_MAX_DEPTH 8
/* Entries one reconcile reads in all directories together. */
#define SKILLS_MAX_TOTAL 400000
/* How long one skills.fork copy may take before it is stopped. */
#define SKILLS_FORK_TIMEOUT_MS 120000

struct skills_counts {
    unsigned public_n;  /* public entries that are not ignored */
    unsigned linked;    /* private/N -> public/N already in place */
    unsigned created;   /* links made by this run (dry: would be made) */
    unsigned removed;   /* stale links removed (dry: would be removed) */
    unsigned shadowed;  /* public names a private entry overrides */
    unsigned ignored;   /* public names matching ignore */
    unsigned errors;    /* entries that could not be handled */
    unsigned categories;    /* public categories merged (real directories in private) */
    unsigned cat_created;   /* category directories made by this run */
    unsigned cat_converted; /* whole-category links turned into directories */
    unsigned cat_removed;   /* empty category directories of hearth's removed */
    unsigned clashes;       /* public skills not linked: an earlier public one has the name */
    uint32_t names_digest;  /* of which skills are shadowed by name or clash (0: none) */
    bool checked;           /* answered by the last whole run's stats: no directory read */
};

/* Named lists for skills.list, each a cJSON array; paths are below the
 * skill directories ("skill" or "category/skill"). public_, private_ and
 * linked hold skills as {path, name}; shadowed {path, name, by[,
 * category]}; clashes {path, name, by}; other and ignored paths (public
 * entries that are not skills, ignored names); categories {name,
 * private}. NULL members are not filled. */
struct skills_lists {
    struct cJSON *public_, *private_, *linked, *shadowed, *ignored, *categories, *clashes, *other;
};

/* The layout: marker is the file that makes a directory a skill, depth
 * how many levels categories may nest (1: a flat overlay). Process-wide;
 * skills_init sets it from the config. */
void skills_layout(const char *marker, int depth);

/* What one run learnt for the next (which links are ours, by inode), so
 * a no-op pass needs no readlink per skill. Optional everywhere. */
struct skills_cache;
struct skills_cache *skills_cache_new(void);
void skills_cache_free(struct skills_cache *k);
/* The cache as bytes (for a reconcile run in a child process to hand it
 * back): -1 when its links would take more than max bytes, or out of
 * memory; the markers are left out when only they do not fit. *out is
 * malloc'ed. */
int skills_cache_encode(const struct skills_cache *k, size_t max, char **out, size_t *outlen);
/* Replaces k with what buf holds; -1 (k unchanged) when buf is not
 * whole or well formed. */
int skills_cache_load(struct skills_cache *k, const char *buf, size_t len);
/* Forgets every link and marker (the next run reads them again) and
 * counts a run. */
void skills_cache_reset(struct skills_cache *k);

/* One reconcile of private against public. ignore is NULL-terminated
 * (may be NULL). dry: change nothing, only count and list. Creates
 * private (one level) when it is missing. Returns 0, or -1 with the first
 * problem in err: a directory that cannot be read changes nothing, an
 * entry that cannot be handled is counted in errors and the rest goes on. */
int skills_reconcile(const char *pub, const char *priv, const char *const *ignore, bool dry,
                     struct skills_counts *c, struct skills_lists *lists,
                     struct skills_cache *cache, struct err *err);

/* Whether name matches the shell glob pat ('*', '?', '[a-z]', '[!x]',
 * '\\' escapes; no special case for a leading '.'). */
bool skills_glob(const char *pat, const char *name);

/* Turns the linked public skill private/name (name: "skill" or
 * "category/skill", the category opened without following a link) into
 * a private copy of the
 * public one (a directory), swapped in atomically where the filesystem can
 * (RENAME_EXCHANGE), so the agent can edit it. The link's target is
 * resolved beneath public's fd ('..' or a link on the way is refused),
 * private is opened without following links, the copy is owned by the
 * agent's service and its modes are set on fds. Synchronous: the loop
 * calls it in a child (skills_fork). */
int skills_fork_at(const char *pub, const char *priv, const char *name, struct err *err);

/* Reads the skills section; without public and private the overlay is
 * off and the phase is reached at once. */
void skills_init(const struct config *cfg);
/* The first reconcile, once mounts and seeding are done; failed_mount
 * says why public or private cannot be used now (under a failed mount,
 * or a platform mount not there: then no run writes anything and the
 * phase stays unreached), NULL when they can. Starts the poll timer and
 * inotify. */
void skills_start(const char *(*failed_mount)(const char *path));
/* A reconcile soon, in a child process (the loop never walks the
 * directories); trigger names why ("boot", "mounts", "sync", "resume",
 * "poll", "inotify", "fork" after a skills.fork). While a walk runs,
 * any number of triggers become one more run after it. Returns 0 once
 * queued (the result is the last run and the skills.sync event), -1 with
 * err when the overlay cannot run now (not configured, before mounts and
 * seeding, under a failed mount). Without a loop (unit tests) it runs
 * here and returns its result. */
int skills_sync(const char *trigger, struct err *err);
/* skills.sync and skills.list answer later, from the loop, never inside
 * the call: defer(dctx) is called once the request is accepted and
 * gives the tag its answer carries. reply(tag, rc, msg, result): for a
 * sync, result is the last run (skills_last_json) and rc, msg the run's;
 * for a list, result is the listing (rc 0) or NULL with rc -1 and why.
 * result is the callee's to keep or free. */
typedef uint64_t (*skills_defer)(void *dctx);
typedef void (*skills_reply)(uint64_t tag, int rc, const char *msg, struct cJSON *result);
/* At most this many requests of each kind wait at once. */
#define SKILLS_MAX_WAITERS 64
/* The bound on what one walk hands back (the list a skills.list sends
 * is at most this large: a bigger one would overflow a client's queue). */
#define SKILLS_RESULT_MAX (8 * 1024 * 1024)
/* A reconcile that starts after this call; -1 with err when refused now. */
int skills_sync_request(skills_defer defer, void *dctx, skills_reply reply, struct err *err);
/* skills.list: a dry run in a child (what is on disk now), its lists,
 * the directories, the layout and the last run. */
int skills_list_request(skills_defer defer, void *dctx, skills_reply reply, struct err *err);
/* skills.fork for the configured directories, in a child process (see
 * SKILLS_FORK_TIMEOUT_MS): returns 0 once started, and done(ctx, rc, msg)
 * follows from the loop (msg: the error when rc is -1). -1 with err when
 * it cannot start (not configured, a bad name, a fork in progress). */
typedef void (*skills_fork_done)(void *ctx, int rc, const char *msg);
int skills_fork(const char *name, skills_fork_done done, void *ctx, struct err *err);
/* A platform mount at target went or was replaced (why says so): when
 * public or private lies under it, the walk or skills.fork under way is
 * stopped (its answer says why) and the phase "skills" is revoked (the
 * services after it stop) until the overlay has run again on what comes
 * back (skills_start, after mounts and seeding). */
void skills_mount_left(const char *target, const char *why);
bool skills_enabled(void);
/* The last run (trigger, counts, duration), for skills.sync and status. */
struct cJSON *skills_last_json(void);

#endif
