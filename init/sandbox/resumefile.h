/* resumefile: resume news for the services. A small JSON file (the
 * resume_file key, default /run/hearth-news/resume) holding a generation
 * counter, the wall time, how long the sandbox was paused and whether the
 * clock was stepped, replaced as a whole (temporary name + rename in its
 * directory, by directory fd) after every resume, so an agent can watch
 * the directory with inotify and rebuild its long-lived connections
 * without being restarted. Generation 0 is written at boot; the count is
 * the sandbox's identity's (identity.h), kept whether or not the file is.
 *
 * The directory is made root-owned 0755; main.c hands it to
 * contain_readonly_dir, so it is read-only in every isolated service's
 * mount namespace: a service reads the news but cannot forge it. */
#ifndef HEARTH_RESUMEFILE_H
#define HEARTH_RESUMEFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cJSON;
struct config;

/* Reads resume_file, notes the clock reference and writes generation 0.
 * Failures are logged: the sandbox runs on without the file. */
void resumefile_setup(const struct config *cfg);
/* The configured path ("" when off). */
const char *resumefile_path(void);
/* The directory resume_file lies in ("" when off). */
const char *resumefile_dir(void);

/* Notes the wall-clock minus monotonic-clock offset now: a later resume
 * counts a growth of that offset as time the guest did not run. Called at
 * boot, after time.sync and after each resume. */
void resumefile_reference(void);
/* The services were frozen now (sandbox.freeze). */
void resumefile_frozen(bool on);

/* After a resume: replaces the file with the resume's generation. Returns
 * a report {generation, paused_ms, clock_stepped, path} or {..., error}
 * (NULL when off or out of memory). */
struct cJSON *resumefile_write(uint64_t generation, const char *cause, bool clock_stepped,
                               bool was_frozen);

/* The pause estimate (exposed for unit tests): wall time since the freeze
 * when the services were frozen, else the growth of the wall-minus-
 * monotonic offset; never negative. */
int64_t resumefile_paused_ms(bool was_frozen, int64_t frozen_wall_ms, int64_t wall_now_ms,
                             int64_t ref_offset_ms, int64_t offset_now_ms);

#endif
