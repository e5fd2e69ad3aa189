/* pathname: "at or under" compares whole components, "/" holds every
 * path, and slashes ending the top are not part of it. */
#include "unit.h"

#include "pathname.h"

TEST(pathname_at_or_under_compares_whole_components)
{
    CHECK(pathname_at_or_under("/a/b", "/"));
    CHECK(pathname_at_or_under("/a/b", "/a"));
    CHECK(pathname_at_or_under("/a/b", "/a/b"));
    CHECK(pathname_at_or_under("/a/b/c", "/a/b"));
    CHECK(!pathname_at_or_under("/a/bc", "/a/b"));
    CHECK(!pathname_at_or_under("/a", "/a/b"));
    CHECK(pathname_at_or_under("/", "/"));
    CHECK(!pathname_at_or_under("/data/sharedx", "/data/shared"));
}

TEST(pathname_top_ending_in_slashes)
{
    CHECK(pathname_at_or_under("/a/b", "/a/"));
    CHECK(pathname_at_or_under("/a", "/a//"));
    CHECK(!pathname_at_or_under("/ab", "/a/"));
    CHECK(pathname_at_or_under("/x", "//"));
}
