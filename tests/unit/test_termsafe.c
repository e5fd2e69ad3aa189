/* termsafe: the one escaper for guest text bound for a terminal (hearthctl's
 * human output, hearth's log lines): C0, DEL, C1 both encoded and raw, and
 * broken UTF-8 escaped; valid UTF-8 and what the caller keeps pass. */
#include "unit.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "log.h"
#include "termsafe.h"

/* A literal's bytes, a NUL inside it included. */
#define ESC(lit, keep) esc(lit, sizeof(lit) - 1, keep)
#define CLEAN(lit, keep) termsafe_clean(lit, sizeof(lit) - 1, keep)

static char *esc(const char *s, size_t len, unsigned keep)
{
    static char buf[512];
    size_t need = termsafe_copy(buf, sizeof(buf), s, len, keep);
    CHECK(need == strlen(buf));
    return buf;
}

/* No byte a terminal would act on: no C0 but the kept ones, no DEL, no
 * 0x80..0x9f byte at all (neither raw nor as U+0080..U+009F, nor as the
 * tail of a cut sequence: the escaped text here is ASCII or valid UTF-8
 * of characters above U+009F). */
static int inert(const char *s, unsigned keep)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p < 0x20 && !((*p == '\t' && (keep & TERMSAFE_TAB)) ||
                            (*p == '\n' && (keep & TERMSAFE_NL)))) || *p == 0x7f)
            return 0;
        if (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)
            return 0;
        if (*p >= 0x80 && *p <= 0x9f && (p == (const unsigned char *)s || p[-1] < 0xc2))
            return 0; /* 0x80..0x9f not inside a multi-byte character */
    }
    return 1;
}

TEST(termsafe_escapes_c0_del_c1_and_broken_utf8)
{
    /* OSC title, CSI, BEL, DEL. */
    CHECK_STR(ESC("\x1b]0;owned\x07 \x1b[2J\x7f", 0), "\\x1b]0;owned\\x07 \\x1b[2J\\x7f");
    /* C1 as UTF-8 (U+009B CSI, U+0085 NEL, U+0080 and U+009F at the edges)
     * and as raw bytes, which are not UTF-8. */
    CHECK_STR(ESC("a\xc2\x9b" "31m\xc2\x85\xc2\x80\xc2\x9f", 0),
              "a\\u009b31m\\u0085\\u0080\\u009f");
    CHECK_STR(ESC("\x9b" "31m\x9d\x90", 0), "\\x9b31m\\x9d\\x90");
    /* Broken UTF-8: a bad lead, a cut sequence, an overlong form, a
     * surrogate, beyond U+10FFFF; each byte escaped on its own. */
    CHECK_STR(ESC("\xff\xe2\x82", 0), "\\xff\\xe2\\x82");
    CHECK_STR(ESC("\xc0\x9b", 0), "\\xc0\\x9b");
    CHECK_STR(ESC("\xed\xa0\x80", 0), "\\xed\\xa0\\x80");
    CHECK_STR(ESC("\xf4\x90\x80\x80", 0), "\\xf4\\x90\\x80\\x80");
    /* A NUL inside the given length is a control like the others. */
    CHECK_STR(ESC("a\0b", 0), "a\\x00b");
    /* Valid UTF-8 passes, U+00A0 right after the C1 range included, and
     * a character whose continuation byte is 0x9b (U+26DB). */
    CHECK_STR(ESC("h\xc3\xa9 \xc2\xa0 \xe2\x9b\x9b \xf0\x9f\x94\xa5 \\x", 0),
              "h\xc3\xa9 \xc2\xa0 \xe2\x9b\x9b \xf0\x9f\x94\xa5 \\x");
    /* Tab and newline only where kept. */
    CHECK_STR(ESC("a\tb\nc\r", 0), "a\\x09b\\x0ac\\x0d");
    CHECK_STR(ESC("a\tb\nc\r", TERMSAFE_TAB), "a\tb\\x0ac\\x0d");
    CHECK_STR(ESC("a\tb\nc\r", TERMSAFE_TAB | TERMSAFE_NL), "a\tb\nc\\x0d");
    CHECK(CLEAN("plain h\xc3\xa9", 0));
    CHECK(!CLEAN("tab\t", 0) && CLEAN("tab\t", TERMSAFE_TAB));
    CHECK(!CLEAN("\xc2\x9b", 0) && !CLEAN("\x9b", 0));
}

TEST(termsafe_every_byte_pair_is_inert)
{
    /* Every two-byte input, and every byte after a C2 lead: what comes
     * out is inert, whatever went in. */
    char in[3], *out;
    for (int a = 0; a < 256; a++) {
        for (int b = 0; b < 256; b++) {
            in[0] = (char)a, in[1] = (char)b, in[2] = (char)0xc2;
            out = esc(in, 3, 0);
            if (!inert(out, 0)) {
                fprintf(stderr, "  %02x %02x c2 -> %s\n", a, b, out);
                CHECK(0);
                return;
            }
        }
    }
}

TEST(termsafe_copy_cuts_between_escapes)
{
    char small[8];
    /* "ab\x1b" needs 6; with 5 bytes (4 + NUL) the escape does not fit
     * and is left out whole. */
    CHECK_EQ_INT(termsafe_copy(small, 5, "ab\x1b", 3, 0), 6);
    CHECK_STR(small, "ab");
    CHECK_EQ_INT(termsafe_copy(small, 7, "ab\x1b", 3, 0), 6);
    CHECK_STR(small, "ab\\x1b");
    /* A multi-byte character is not cut either. */
    CHECK_EQ_INT(termsafe_copy(small, 4, "a\xe2\x82\xac", 4, 0), 4);
    CHECK_STR(small, "a");
    CHECK_EQ_INT(termsafe_copy(small, 1, "abc", 3, 0), 3);
    CHECK_STR(small, "");
    CHECK_EQ_INT(termsafe_copy(NULL, 0, "\x9b", 1, 0), 4);
}

TEST(termsafe_json_escapes_c1_and_broken_utf8)
{
    char *s = termsafe_json("{\"a\":\"x\xc2\x9b" "1m\x9b\xff \xc3\xa9\xe2\x9b\x9b\x7f\",\"\xc2\x85\":1}");
    CHECK_STR(s, "{\"a\":\"x\\u009b1m\\ufffd\\ufffd \xc3\xa9\xe2\x9b\x9b\\u007f\",\"\\u0085\":1}");
    free(s);
    s = termsafe_json("");
    CHECK_STR(s, "");
    free(s);
}

/* hearth's own log records: a guest-chosen name or message in one is
 * escaped before it reaches stderr, kmsg or the console. */
TEST(termsafe_log_records_are_escaped)
{
    int p[2], saved = dup(2);
    CHECK(pipe(p) == 0 && saved >= 0);
    fflush(stderr);
    dup2(p[1], 2);
    log_error("service \"%s\": %s", "x\x1b]0;t\x07", "bad \xc2\x9b" "2J \x9b and\ttab\nnext");
    dup2(saved, 2);
    close(saved);
    close(p[1]);
    char buf[2048];
    ssize_t n = read(p[0], buf, sizeof(buf) - 1);
    close(p[0]);
    CHECK(n > 0);
    buf[n > 0 ? n : 0] = 0;
    CHECK_CONTAINS(buf, "service \"x\\x1b]0;t\\x07\": bad \\u009b2J \\x9b and\ttab next\n");
    /* One record, one newline, nothing a terminal acts on. */
    CHECK(strchr(buf, '\n') == buf + n - 1);
    buf[n - 1] = 0;
    CHECK(inert(buf, TERMSAFE_TAB));
}
