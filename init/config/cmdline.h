/* cmdline: hearth.* settings from the kernel command line (vm mode). */
#ifndef HEARTH_CMDLINE_H
#define HEARTH_CMDLINE_H

#include <stddef.h>

/* Loads text as the command line (tests) or, with NULL, /proc/cmdline. */
void cmdline_load(const char *text);
/* Copies the value of key ("hearth.log") into out; returns 0 when found.
 * The last occurrence wins, as with the kernel's own parameters. */
int cmdline_get(const char *key, char *out, size_t outlen);

#endif
