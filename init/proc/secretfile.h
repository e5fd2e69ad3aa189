/* secretfile: a per-sandbox secret kept as a NAME=value line in an env
 * file the service itself reads (a service's `secrets`, svc_config.h).
 * Never shared: each sandbox makes its own the first time the service
 * starts, keeps it across restarts and reboots, and never overwrites a
 * value already there. The value is made from the kernel's random bytes
 * and written straight to the file; it never reaches a log or PID 1.
 *
 * secretfile_ensure may block (the file is usually on a share), so it
 * runs in a child, never in hearth's loop: svc_spawn.c calls it in the
 * service's start child, once contained, before it takes the service's
 * identity. */
#ifndef HEARTH_SECRETFILE_H
#define HEARTH_SECRETFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "err.h"

/* A file larger than this is refused rather than read (an env file is a
 * few lines). */
#define SECRETFILE_MAX (256 * 1024)
/* The longest value secretfile_generate makes. */
#define SECRETFILE_CHARS_MAX 256

enum secretfile_result {
    SECRETFILE_PRESENT = 1,   /* the file already had a non-empty line */
    SECRETFILE_GENERATED = 2, /* a new value was added (or the file made) */
};

/* Whether text holds a line setting name to a non-empty value, in the
 * forms an env file reader takes: NAME=v, export NAME=v, spaces around
 * '=', 'single' or "double" quotes (an empty pair is empty). */
bool secretfile_has(const char *text, size_t len, const char *name);

/* chars characters of the URL-safe base64 alphabet (A-Z a-z 0-9 - _),
 * from getrandom (6 uniform bits per character), NUL-terminated in out
 * (chars + 1 bytes). 0, or -1 with errno. */
int secretfile_generate(char *out, size_t chars);

/* Makes sure the absolute path holds a non-empty name line: if it has
 * one, nothing is touched (SECRETFILE_PRESENT); otherwise a value of
 * chars characters is added (SECRETFILE_GENERATED) by writing the whole
 * file anew beside it (the old bytes as they were, a newline if the last
 * line had none, then NAME=value), owned by uid:gid, mode 0600, synced
 * and renamed over the old one; a missing file is made the same way and
 * never replaces one made meanwhile. Nothing on the path is followed if
 * it is a symbolic link; a FIFO, directory, device or file over
 * SECRETFILE_MAX is refused without blocking (safepath.h). -1 with errno
 * and the reason in why (the caller names the path). */
int secretfile_ensure(const char *path, const char *name, unsigned chars, uid_t uid, gid_t gid,
                      struct err *err);

#endif
