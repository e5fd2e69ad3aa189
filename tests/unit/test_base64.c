#include "unit.h"

#include "base64.h"
#include "err.h"

/* RFC 4648 section 10's vectors, both ways, and every length a file
 * chunk can end on (0 to 2 bytes past a group of 3) round-tripped. */
TEST(base64_rfc4648_vectors)
{
    static const char *const plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *const coded[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=",
                                        "Zm9vYmFy"};
    for (size_t i = 0; i < 7; i++) {
        char out[BASE64_ENCODED_SIZE(6)];
        uint8_t back[8];
        base64_encode((const uint8_t *)plain[i], strlen(plain[i]), out);
        CHECK_STR(out, coded[i]);
        long n = base64_decode(coded[i], strlen(coded[i]), back, sizeof(back), NULL);
        CHECK_EQ_INT(n, (long)strlen(plain[i]));
        CHECK(memcmp(back, plain[i], (size_t)(n > 0 ? n : 0)) == 0);
    }
}

TEST(base64_round_trip_of_every_byte)
{
    uint8_t in[256], back[256];
    char enc[BASE64_ENCODED_SIZE(256)];
    for (int i = 0; i < 256; i++)
        in[i] = (uint8_t)(255 - i);
    for (size_t n = 250; n <= 256; n++) {
        base64_encode(in, n, enc);
        CHECK_EQ_INT(strlen(enc), BASE64_ENCODED_SIZE(n) - 1);
        CHECK_EQ_INT(base64_decode(enc, strlen(enc), back, sizeof(back), NULL), (long)n);
        CHECK(memcmp(in, back, n) == 0);
    }
}

TEST(base64_refusals_name_the_fault)
{
    uint8_t out[4];
    struct err err;
    CHECK_EQ_INT(base64_decode("Zm9v!", 5, out, sizeof(out), &err), -1);
    CHECK_STR(err.msg, "invalid base64 at offset 4");
    CHECK_EQ_INT(base64_decode("Zm9vYmFy", 8, out, sizeof(out), &err), -1);
    CHECK_STR(err.msg, "more than 4 bytes");
    CHECK_EQ_INT(base64_decode("Zg=", 3, out, sizeof(out), &err), -1);
    CHECK_CONTAINS(err.msg, "padding");
    /* No buffer for the reason: refused all the same. */
    CHECK_EQ_INT(base64_decode("Z", 1, out, sizeof(out), NULL), -1);
}
