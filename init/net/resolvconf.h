/* resolvconf: the name servers' file (resolv.conf), "nameserver X" a
 * line, written atomically beside itself (temporary name, fsync, rename
 * by directory fd) and read back through safepath: the file and its
 * directory may be within an agent's reach. */
#ifndef HEARTH_RESOLVCONF_H
#define HEARTH_RESOLVCONF_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"

/* At most this many servers are written. */
#define RESOLVCONF_MAX 8

/* Replaces path with the first RESOLVCONF_MAX of the n servers. Returns
 * 0, or -1 with "PATH: reason" in err. */
int resolvconf_write(const char *path, const char (*dns)[64], size_t n, struct err *err);
/* Whether path is a regular file holding exactly what resolvconf_write
 * would write. */
bool resolvconf_matches(const char *path, const char (*dns)[64], size_t n);

#endif
