/* A minimal unit-test harness: TEST(name) registers a test through a
 * constructor; CHECK* record failures without aborting the test. The
 * runner (tests/unit/main.c) prints "N passed, N failed" and fails a test
 * that runs over UNIT_TIMEOUT seconds (120) by name. */
#ifndef HEARTH_UNIT_H
#define HEARTH_UNIT_H

#include <stdio.h>
#include <string.h>

struct unit_test {
    const char *name;
    void (*fn)(void);
    struct unit_test *next;
};

void unit_register(struct unit_test *t);
extern int unit_failures; /* failures within the current test */

#define TEST(tname)                                                   \
    static void test_##tname(void);                                   \
    static struct unit_test unit_##tname = {#tname, test_##tname, 0}; \
    __attribute__((constructor)) static void reg_##tname(void)        \
    {                                                                 \
        unit_register(&unit_##tname);                                 \
    }                                                                 \
    static void test_##tname(void)

#define CHECK(cond)                                                              \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "  %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, \
                    #cond);                                                      \
            unit_failures++;                                                     \
        }                                                                        \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                        \
    do {                                                                          \
        long long _a = (long long)(a), _b = (long long)(b);                       \
        if (_a != _b) {                                                           \
            fprintf(stderr, "  %s:%d: %s == %lld, expected %lld\n", __FILE__,     \
                    __LINE__, #a, _a, _b);                                        \
            unit_failures++;                                                      \
        }                                                                         \
    } while (0)

#define CHECK_STR(a, b)                                                            \
    do {                                                                           \
        const char *_a = (a), *_b = (b);                                           \
        if (!_a || !_b || strcmp(_a, _b) != 0) {                                   \
            fprintf(stderr, "  %s:%d: %s == \"%s\", expected \"%s\"\n", __FILE__,  \
                    __LINE__, #a, _a ? _a : "(null)", _b ? _b : "(null)");         \
            unit_failures++;                                                       \
        }                                                                          \
    } while (0)

/* Substring check, for error messages that name a path. */
#define CHECK_CONTAINS(hay, needle)                                                \
    do {                                                                           \
        const char *_h = (hay), *_n = (needle);                                    \
        if (!_h || !strstr(_h, _n)) {                                              \
            fprintf(stderr, "  %s:%d: \"%s\" does not contain \"%s\"\n", __FILE__, \
                    __LINE__, _h ? _h : "(null)", _n);                             \
            unit_failures++;                                                       \
        }                                                                          \
    } while (0)

#endif
