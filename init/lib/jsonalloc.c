#include "jsonalloc.h"

#include <stdint.h>
#include <stdlib.h>

#include <cJSON.h>

/* Each block starts with a 16-byte header holding its class, so a free
 * finds its list without a size and the payload keeps malloc's 16-byte
 * alignment. CLASS_BIG marks a block that came from malloc as it is. */
#define HDR 16
#define NCLASS 4
#define CLASS_BIG 0xff
/* Enough for a burst of pipelined requests' items without ever holding
 * more than about 35 KiB: 64 x (48 + 80 + 144 + 272) bytes. The debug
 * build keeps none, so valgrind sees every block freed (a use after free
 * stays visible) while a free() of a cJSON block still shows as invalid. */
#ifndef JSONALLOC_KEEP
#define JSONALLOC_KEEP 64
#endif
static const unsigned keep = JSONALLOC_KEEP;

static const size_t class_size[NCLASS] = {32, 64, 128, 256};

struct freeblk {
    struct freeblk *next;
};

static struct freeblk *lists[NCLASS];
static unsigned counts[NCLASS];

void *jsonalloc_malloc(size_t n)
{
    unsigned c = 0;
    while (c < NCLASS && n > class_size[c])
        c++;
    unsigned char *b;
    if (c < NCLASS && lists[c]) {
        b = (unsigned char *)lists[c];
        lists[c] = lists[c]->next;
        counts[c]--;
        /* The link lay over the header while the block was free. */
        b[0] = (unsigned char)c;
    } else {
        size_t total = (c < NCLASS ? class_size[c] : n) + HDR;
        if (total < n) /* overflow */
            return NULL;
        b = malloc(total);
        if (!b)
            return NULL;
        b[0] = c < NCLASS ? (unsigned char)c : CLASS_BIG;
    }
    return b + HDR;
}

void jsonalloc_free(void *p)
{
    if (!p)
        return;
    unsigned char *b = (unsigned char *)p - HDR;
    unsigned c = b[0];
    if (c < NCLASS && counts[c] < keep) {
        struct freeblk *f = (struct freeblk *)b;
        f->next = lists[c];
        lists[c] = f;
        counts[c]++;
        return;
    }
    free(b);
}

size_t jsonalloc_cached_bytes(void)
{
    size_t n = 0;
    for (unsigned c = 0; c < NCLASS; c++)
        n += counts[c] * (class_size[c] + HDR);
    return n;
}

void jsonalloc_install(void)
{
    cJSON_Hooks h = {jsonalloc_malloc, jsonalloc_free};
    cJSON_InitHooks(&h);
}
