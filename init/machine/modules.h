/* modules: loading the kernel modules a config lists, with their
 * dependencies, the way modprobe would but without it (the image has no
 * userland besides hearth). */
#ifndef HEARTH_MODULES_H
#define HEARTH_MODULES_H

#include <stddef.h>

#include "err.h"

struct cJSON;

#define MODULES_MAX_DEPS 32

/* Looks NAME up in DIR/modules.dep ("-" and "_" are the same) and fills
 * PATHS with absolute paths in load order: dependencies first, NAME last.
 * Returns the number of paths, 0 when NAME is built in (listed in
 * DIR/modules.builtin), -1 with ERR set when it is unknown or DIR is
 * unreadable. */
int modules_resolve(const char *dir, const char *name, char paths[][256], size_t max,
                    struct err *err);

/* Loads each name with finit_module(2), dependencies first, skipping
 * modules already loaded (/proc/modules) and built-in ones. DIR NULL means
 * /lib/modules/$(uname -r). Failures are logged and kept for status; the
 * return value is the number of names that could not be loaded. */
int modules_load(const char *dir, char *const *names, size_t n);

/* [{name, state: loaded|present|builtin|failed, error?}] of the last load. */
struct cJSON *modules_json(void);

#endif
