/* skillsyaml: the `skills.external_dirs` entry of Hermes's config.yaml,
 * the other way (skills.mode "external_dirs") of showing the agent the
 * public skills: Hermes reads that list itself, after its own skills, so
 * its private skills win by name and its tools see the public ones as
 * external rather than as its own.
 *
 * The file belongs to the agent, which may have made it hostile, so the
 * editor is conservative: it understands block-style YAML only as far as
 * it needs (a top-level block mapping, `skills:` a block mapping,
 * `external_dirs:` a block or one-line flow list of scalars), changes the
 * least it can (one inserted block, item or line; every other byte kept),
 * and anything it cannot read with confidence (tabs in indentation,
 * anchors, aliases, tags, merge keys, several documents, a `skills` or
 * `external_dirs` of another shape, a key given twice) is an error naming
 * the line, with the file left as it was. The file is opened without
 * following any link, must be a regular file of at most
 * SKILLSYAML_MAX_BYTES with one link, and is replaced atomically (a
 * temporary file beside it, fsync, rename) keeping its owner and mode.
 * Synchronous: hearth calls it in the skills walk's child process. */
#ifndef HEARTH_SKILLSYAML_H
#define HEARTH_SKILLSYAML_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "err.h"

#define SKILLSYAML_MAX_BYTES (1024 * 1024)
/* The temporary name beside the file (the file's name + this). */
#define SKILLSYAML_TMP_SUFFIX ".hearth-tmp"

enum skillsyaml_state {
    SKILLSYAML_ERROR = -1,
    SKILLSYAML_PRESENT = 0, /* the entry was there: nothing written */
    SKILLSYAML_ADDED = 1,   /* the entry was added (dry: would be) */
    SKILLSYAML_CREATED = 2, /* the file was missing and made (dry: would be) */
};

/* The name of a state for reports: "present", "added", "created", "error". */
const char *skillsyaml_state_name(int state);

/* The editor on bytes: whether in (len bytes, a whole file) lists dir in
 * skills.external_dirs. SKILLSYAML_PRESENT: nothing to do;
 * SKILLSYAML_ADDED: *out (malloc'ed, *outlen bytes) is in with the entry
 * added; SKILLSYAML_ERROR: *line is the 1-based line at fault (0: the
 * file as a whole) and err says why. */
int skillsyaml_edit(const char *in, size_t len, const char *dir, char **out, size_t *outlen,
                    size_t *line, struct err *err);

/* Makes sure the file at the absolute path lists dir: reads it, edits
 * it, replaces it when the entry was missing. A missing file (its
 * directory existing) is made with the entry alone, mode 0600, owned by
 * uid:gid. dry: nothing is written, the state says what would be done.
 * Returns a state; on SKILLSYAML_ERROR, err is "PATH:LINE: why" (or
 * "PATH: why") and the file is untouched. */
int skillsyaml_ensure(const char *path, const char *dir, uid_t uid, gid_t gid, bool dry,
                      struct err *err);

#endif
