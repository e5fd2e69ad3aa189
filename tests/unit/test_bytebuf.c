/* bytebuf: the growth each owner asks for (first size, doubling, the
 * owner's limit), compaction, and a failed resize leaving the bytes. */
#include "unit.h"

#include <stdint.h>
#include <string.h>

#include "bytebuf.h"

TEST(bytebuf_grown_cap_doubles_from_first_up_to_the_limit)
{
    CHECK_EQ_INT(bytebuf_grown_cap(0, 4096, 10, SIZE_MAX), 4096);
    CHECK_EQ_INT(bytebuf_grown_cap(0, 4096, 5000, SIZE_MAX), 8192);
    CHECK_EQ_INT(bytebuf_grown_cap(4096, 65536, 4097, SIZE_MAX), 8192);
    /* One doubling clamped to the limit, as the line reader grows. */
    CHECK_EQ_INT(bytebuf_grown_cap(65536, 65536, 65537, 100000), 100000);
    /* A first size above the limit is cut to it (a small job result). */
    CHECK_EQ_INT(bytebuf_grown_cap(0, 65536, 1, 1000), 1000);
    /* Short of need when the limit says so: the owner checks. */
    CHECK_EQ_INT(bytebuf_grown_cap(0, 16, 5000, 1000), 1000);
    /* No overflow near the top. */
    CHECK(bytebuf_grown_cap(SIZE_MAX / 2 + 2, 16, SIZE_MAX, SIZE_MAX) == SIZE_MAX);
}

TEST(bytebuf_put_consume_compact_release)
{
    struct bytebuf b = {0};
    CHECK_EQ_INT(bytebuf_resize(&b, 8), 0);
    CHECK_EQ_INT(bytebuf_room(&b), 8);
    bytebuf_put(&b, "abcdef", 6);
    b.off += 4;
    CHECK_EQ_INT(bytebuf_pending(&b), 2);
    CHECK_EQ_INT(bytebuf_room(&b), 2);
    bytebuf_compact(&b);
    CHECK_EQ_INT(b.off, 0);
    CHECK_EQ_INT(bytebuf_room(&b), 6);
    CHECK(memcmp(bytebuf_head(&b), "ef", 2) == 0);
    /* Smaller than what it holds: refused, bytes kept. */
    CHECK_EQ_INT(bytebuf_resize(&b, 1), -1);
    CHECK_EQ_INT(b.cap, 8);
    CHECK(memcmp(bytebuf_head(&b), "ef", 2) == 0);
    bytebuf_release(&b);
    CHECK(b.data == NULL && b.cap == 0 && bytebuf_pending(&b) == 0);
}
