/* seed: populates an empty persistent directory (a home on a host share)
 * from a template in the image, never overwriting what is there. */
#ifndef HEARTH_SEED_H
#define HEARTH_SEED_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"

struct config;
struct cJSON;

/* While a seed is being copied this file sits in its target, so a seed
 * interrupted by a crash or power loss is redone at the next boot. */
#define SEED_MARKER ".hearth-seeding"
/* How long one entry's copy (in a child process) may take. */
#define SEED_TIMEOUT_MS 600000

enum seed_result { SEED_DONE, SEED_ALREADY, SEED_SKIPPED, SEED_FAILED };

/* Seeds target from template from: skipped (SEED_ALREADY) when
 * target/unless exists, or — without unless — when target is not empty;
 * either way redone while SEED_MARKER is present. unless is copied last,
 * so its presence means the whole template is in. err gets the reason on
 * SEED_FAILED. */
enum seed_result seed_one(const char *target, const char *from, const char *unless, struct err *err);
/* The same, what it makes owned by own (seed[].user, .group): the target
 * directory when it has to be made (its missing parents stay hearth's)
 * and every copy. NULL: the target is hearth's, the copies keep the
 * template's owners. */
struct tree_owner;
enum seed_result seed_one_as(const char *target, const char *from, const char *unless,
                             const struct tree_owner *own, struct err *err);

/* Runs every seed entry of the config in order, each copy in a child
 * process so the loop never waits for a large template (without a loop,
 * or when fork fails, in-line); skip(path) says why a target cannot be
 * written now (under a failed mount, or a platform mount not there yet:
 * those are reported, not seeded), NULL when it can. done() is called when all
 * entries are through. Called again while running, it runs once more
 * afterwards. */
void seed_start(const struct config *cfg, const char *(*skip)(const char *path),
                void (*done)(void));
/* A platform mount at target went or was replaced (why says so): a copy
 * under way into it (or from it) is killed rather than left writing into
 * what it hid; its entry is recorded skipped, and the pass that follows
 * the mount's return completes it. */
void seed_mount_left(const char *target, const char *why);
bool seed_running(void);
/* Failures in the last complete run. */
int seed_failures(void);
/* The results of the last complete run, for mounts.list. */
struct cJSON *seed_to_json(void);

#endif
