#include "unit.h"

#include "sha256.h"

static const char *hex_of(const void *data, size_t len, size_t step, char out[65])
{
    struct sha256 s;
    const unsigned char *p = data;

    sha256_init(&s);
    /* Fed in pieces of step bytes: the result must not depend on how. */
    for (size_t off = 0; off < len; off += step)
        sha256_update(&s, p + off, len - off < step ? len - off : step);
    sha256_hex(&s, out);
    return out;
}

TEST(sha256_known_vectors)
{
    char h[65];
    static const char two_blocks[] = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";

    CHECK_STR(hex_of("", 0, 1, h), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK_STR(hex_of("abc", 3, 1, h), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    for (size_t step = 1; step <= 64; step *= 3)
        CHECK_STR(hex_of(two_blocks, sizeof(two_blocks) - 1, step, h),
                     "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(sha256_a_million_a)
{
    static char buf[1000000];
    char h[65];

    memset(buf, 'a', sizeof(buf));
    CHECK_STR(hex_of(buf, sizeof(buf), 4096 + 7, h),
                 "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    /* 55 and 56 bytes: the padding fits in the block, or needs another. */
    CHECK_STR(hex_of(buf, 55, 55, h),
                 "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
    CHECK_STR(hex_of(buf, 56, 56, h),
                 "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
}

/* 1 MiB (the range hearthctl cp hashes) in one update, many blocks at
 * once (the SHA extensions' path where the CPU has them), and in pieces
 * that split blocks: the same digest, the one Python's hashlib gives. */
TEST(sha256_many_blocks_at_once_or_in_pieces)
{
    static unsigned char buf[1 << 20];
    char a[65], b[65], c[65];

    for (size_t i = 0; i < sizeof(buf); i++)
        buf[i] = (unsigned char)((uint32_t)(i * 2654435761u) >> 24);
    hex_of(buf, sizeof(buf), sizeof(buf), a);
    hex_of(buf, sizeof(buf), 1, b);
    hex_of(buf, sizeof(buf), 64 * 1000 + 3, c);
    CHECK_STR(a, b);
    CHECK_STR(a, c);
    CHECK_STR(a, "ca6073392ee71dbd1a2d356c3caa233f8f828ae17f8f8ba8570ee3491be128ab");
}
