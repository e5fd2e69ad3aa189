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

/* Long input goes 4 characters at a time until a group it cannot take
 * whole; the refusals and their offsets are those of one character at a
 * time all the same. */
TEST(base64_long_input_faults_keep_their_offsets)
{
    char in[1001];
    uint8_t out[800];
    struct err err;
    for (int i = 0; i < 1000; i++)
        in[i] = "Zm9v"[i % 4];
    in[1000] = '\0';
    CHECK_EQ_INT(base64_decode(in, 1000, out, sizeof(out), &err), 750);
    CHECK(memcmp(out, "foofoo", 6) == 0 && memcmp(out + 744, "foofoo", 6) == 0);
    /* A bad character at each place of a group, far in. */
    for (int k = 0; k < 4; k++) {
        in[600 + k] = '*';
        CHECK_EQ_INT(base64_decode(in, 1000, out, sizeof(out), &err), -1);
        char want[64];
        snprintf(want, sizeof(want), "invalid base64 at offset %d", 600 + k);
        CHECK_STR(err.msg, want);
        in[600 + k] = "Zm9v"[k];
    }
    /* Padding mid-way, then more data. */
    memcpy(in + 400, "Zg==", 4);
    CHECK_EQ_INT(base64_decode(in, 1000, out, sizeof(out), &err), -1);
    CHECK_STR(err.msg, "invalid base64 at offset 404");
    memcpy(in + 400, "Zm9v", 4);
    /* Room for some of it: refused at the first byte past the room. */
    CHECK_EQ_INT(base64_decode(in, 1000, out, 301, &err), -1);
    CHECK_STR(err.msg, "more than 301 bytes");
    CHECK_EQ_INT(base64_decode(in, 1000, out, 750, &err), 750);
    /* Padded end after whole groups; bits left over after the padding. */
    memcpy(in + 996, "Zm8=", 4);
    CHECK_EQ_INT(base64_decode(in, 1000, out, sizeof(out), &err), 749);
    CHECK(memcmp(out + 747, "fo", 2) == 0);
    memcpy(in + 996, "Zm9=", 4);
    CHECK_EQ_INT(base64_decode(in, 1000, out, sizeof(out), &err), -1);
    CHECK_CONTAINS(err.msg, "padding");
}
