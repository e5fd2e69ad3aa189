/* seed: populates an empty persistent directory (a home on a host share)
 * from a template in the image, never overwriting what is there. */
#ifndef HEARTH_SEED_H
#define HEARTH_SEED_H

#include <stdbool.h>
#include <stddef.h>

struct config;
struct cJSON;

/* While a seed is being copied this file sits in its target, so a seed
 * interrupted by a crash or power loss is redone at the next boot. */
#define SEED_MARKER ".hearth-seeding"

enum seed_result { SEED_DONE, SEED_ALREADY, SEED_SKIPPED, SEED_FAILED };

/* Seeds target from template from: skipped (SEED_ALREADY) when
 * target/unless exists, or — without unless — when target is not empty;
 * either way redone while SEED_MARKER is present. unless is copied last,
 * so its presence means the whole template is in. err gets the reason on
 * SEED_FAILED. */
enum seed_result seed_one(const char *target, const char *from, const char *unless, char *err,
                          size_t errlen);

/* Runs every seed entry of the config; skip(path) says whether a target
 * lies under a failed mount (those are reported, not seeded). Returns the
 * number of failures. */
int seed_apply(const struct config *cfg, const char *(*skip)(const char *path));
/* The results of the last seed_apply, for status. */
struct cJSON *seed_to_json(void);

#endif
