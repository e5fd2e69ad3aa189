#include "unit.h"

#include <string.h>

#include "jsonalloc.h"

/* A freed small block is handed out again for the same class, and the free
 * lists never hold more than their bound. */
TEST(jsonalloc_reuses_and_bounds)
{
    void *a = jsonalloc_malloc(40);
    CHECK(a != NULL);
    memset(a, 0xab, 40);
    jsonalloc_free(a);
    void *b = jsonalloc_malloc(60);
    CHECK(b == a);
    jsonalloc_free(b);

    void *many[200];
    for (int i = 0; i < 200; i++) {
        many[i] = jsonalloc_malloc(100);
        CHECK(many[i] != NULL);
    }
    for (int i = 0; i < 200; i++)
        jsonalloc_free(many[i]);
    /* 128-byte class capped at 64 blocks, plus the one 64-byte block. */
    CHECK(jsonalloc_cached_bytes() <= 64 * (32 + 16) + 64 * (64 + 16) + 64 * (128 + 16) +
                                          64 * (256 + 16));
    CHECK(jsonalloc_cached_bytes() >= 64 * (128 + 16));
}

/* Sizes beyond the classes come from malloc and go back to it; the payload
 * keeps malloc's alignment. */
TEST(jsonalloc_large_and_aligned)
{
    char *p = jsonalloc_malloc(100000);
    CHECK(p != NULL);
    CHECK(((unsigned long)p & 15) == 0);
    memset(p, 1, 100000);
    size_t before = jsonalloc_cached_bytes();
    jsonalloc_free(p);
    CHECK(jsonalloc_cached_bytes() == before);
    CHECK(jsonalloc_malloc((size_t)-1) == NULL);
    jsonalloc_free(NULL);
}
