/* jsonalloc: cJSON's allocator in hearth. Parsing a request and printing
 * its reply make a dozen small allocations (64-byte items, short keys and
 * strings, a 256-byte print buffer) that are freed a moment later; musl's
 * malloc spends more time on those than the rest of a ping. Freed blocks
 * of a few size classes are kept on bounded free lists and handed out
 * again; anything larger goes straight to malloc. */
#ifndef HEARTH_JSONALLOC_H
#define HEARTH_JSONALLOC_H

#include <stddef.h>

/* Routes cJSON's allocations through the cache (once, before any cJSON
 * object exists: a block must be freed by the allocator that made it). */
void jsonalloc_install(void);

void *jsonalloc_malloc(size_t n);
void jsonalloc_free(void *p);
/* Blocks held on the free lists, in bytes (bounded by design). */
size_t jsonalloc_cached_bytes(void);

#endif
