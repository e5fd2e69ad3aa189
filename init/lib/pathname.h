/* pathname: lexical tests on absolute path names, without touching any
 * filesystem (a share that hangs cannot stall them). */
#ifndef HEARTH_PATHNAME_H
#define HEARTH_PATHNAME_H

#include <stdbool.h>

/* Whether path is top or lies below it, component by component
 * ("/data/sharedx" is not under "/data/shared"); "/" holds every path,
 * and slashes that end top are not part of it. */
bool pathname_at_or_under(const char *path, const char *top);

#endif
