/* jsonout against cJSON's own printer: the same text for every tree,
 * except integers from 10^15 to 2^53, where the value must match. */
#include "unit.h"

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include <cJSON.h>

#include "jsonout.h"

/* Both printers on one tree; 1 when they agree. */
static int same_as_cjson(const cJSON *t)
{
    char *a = jsonout_print(t), *b = cJSON_PrintUnformatted(t);
    int ok = (!a && !b) || (a && b && strcmp(a, b) == 0);
    if (!ok)
        fprintf(stderr, "  jsonout %s\n  cJSON   %s\n", a ? a : "(null)", b ? b : "(null)");
    cJSON_free(a);
    cJSON_free(b);
    return ok;
}

static int number_agrees(double d)
{
    char mine[JSONOUT_NUM_MAX];
    size_t n = jsonout_number(d, mine);
    if (n != strlen(mine))
        return 0;
    cJSON *c = cJSON_CreateNumber(d);
    char *theirs = cJSON_PrintUnformatted(c);
    cJSON_Delete(c);
    int ok;
    if (d == trunc(d) && fabs(d) >= 1e15 && fabs(d) <= 9007199254740992.0) {
        /* Plain digits here, where cJSON may write an exponent: the same
         * number, and every digit of it. */
        char *end;
        ok = strtod(mine, &end) == d && *end == 0 && strspn(mine, "-0123456789") == n;
    } else {
        ok = theirs && strcmp(mine, theirs) == 0;
    }
    if (!ok)
        fprintf(stderr, "  %.17g: jsonout %s, cJSON %s\n", d, mine, theirs ? theirs : "(null)");
    cJSON_free(theirs);
    return ok;
}

TEST(jsonout_numbers_as_cjson_writes_them)
{
    static const double fixed[] = {0.0, -0.0, 1, -1, 42, 0.1, 0.5, -2.5, 1.0 / 3, 2.0 / 3, 100.25,
                                   3.141592653589793, 1e-7, 123456789012345.0, 999999999999999.0,
                                   1e15, 1234567890123456.0, 9007199254740992.0, -9007199254740992.0,
                                   9007199254740994.0, 1e16, 1e20, 1e300, -1e-300, 5e-324,
                                   DBL_MAX, -DBL_MAX, DBL_MIN, 2147483647.0, -2147483648.0,
                                   4294967296.0, 1796429505123.0, 0.30000000000000004};
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
        CHECK(number_agrees(fixed[i]));
    char b[JSONOUT_NUM_MAX];
    CHECK_EQ_INT(jsonout_number(NAN, b), 4);
    CHECK_STR(b, "null");
    jsonout_number(-INFINITY, b);
    CHECK_STR(b, "null");
    jsonout_number(-0.0, b);
    CHECK_STR(b, "-0");
    jsonout_number(1e15, b);
    CHECK_STR(b, "1000000000000000");
    jsonout_number(-9007199254740992.0, b);
    CHECK_STR(b, "-9007199254740992");
    /* Doubles from random bit patterns, and random integers and ratios. */
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    int bad = 0;
    for (int i = 0; i < 20000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        double d;
        memcpy(&d, &x, sizeof(d));
        if (isnan(d))
            continue;
        bad += !number_agrees(d);
        bad += !number_agrees((double)(int64_t)(x >> (i % 64)));
        bad += !number_agrees((double)(x % 1000000) / (double)(1 + (x >> 40) % 1000));
    }
    CHECK_EQ_INT(bad, 0);
}

TEST(jsonout_strings_escaped_as_cjson_escapes_them)
{
    char all[256];
    for (int i = 1; i < 256; i++)
        all[i - 1] = (char)i;
    all[255] = 0;
    cJSON *t = cJSON_CreateObject();
    cJSON_AddStringToObject(t, "every byte", all);
    cJSON_AddStringToObject(t, "", "");
    cJSON_AddStringToObject(t, "k\"\\\n\x01", "quote \" backslash \\ tab \t end");
    cJSON_AddStringToObject(t, "utf8", "h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x94\xa5 \x7f");
    CHECK(same_as_cjson(t));
    char *text = jsonout_print(t);
    CHECK(text && strstr(text, "\"k\\\"\\\\\\n\\u0001\":"));
    CHECK(text && strstr(text, "\\u001f") && strstr(text, "\\b\\t\\n\\u000b\\f\\r"));
    cJSON_free(text);
    /* A string item or a key without text is written as "". */
    cJSON *s = cJSON_CreateString("x");
    cJSON_free(s->valuestring);
    s->valuestring = NULL;
    CHECK(same_as_cjson(s));
    text = jsonout_print(s);
    CHECK_STR(text, "\"\"");
    cJSON_free(text);
    cJSON_Delete(s);
    cJSON_Delete(t);
}

TEST(jsonout_trees_as_cjson_writes_them)
{
    cJSON *t = cJSON_CreateObject();
    cJSON_AddNullToObject(t, "n");
    cJSON_AddTrueToObject(t, "t");
    cJSON_AddFalseToObject(t, "f");
    cJSON_AddNumberToObject(t, "i", 7);
    cJSON_AddNumberToObject(t, "x", 0.25);
    cJSON_AddItemToObject(t, "eo", cJSON_CreateObject());
    cJSON_AddItemToObject(t, "ea", cJSON_CreateArray());
    cJSON_AddRawToObject(t, "raw", "{\"a\": [1, 2]}");
    cJSON *a = cJSON_AddArrayToObject(t, "a");
    for (int i = 0; i < 5; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "k", i * 1.5);
        cJSON_AddItemToObject(o, "deep", cJSON_CreateIntArray((const int[]){i, -i, 3}, 3));
        cJSON_AddItemToArray(a, o);
    }
    cJSON_AddItemToArray(a, cJSON_CreateString("s"));
    cJSON_AddItemToArray(a, cJSON_CreateNull());
    CHECK(same_as_cjson(t));
    char *text = jsonout_print(t);
    const char *want = "{\"n\":null,\"t\":true,\"f\":false,\"i\":7,\"x\":0.25,\"eo\":{},\"ea\":[],"
                       "\"raw\":{\"a\": [1, 2]},\"a\":[{\"k\":0,\"deep\":[0,0,3]},";
    CHECK(text && strncmp(text, want, strlen(want)) == 0);
    cJSON_free(text);
    /* A parsed document prints back as cJSON prints it. */
    cJSON *p = cJSON_Parse("{\"id\":\"a\\u0000b\",\"v\":[1e400,-0,1.5e-3,\"\\ud83d\\ude00\"],"
                           "\"o\":{\"\":{\"\":[]}}}");
    CHECK(p != NULL);
    CHECK(same_as_cjson(p));
    cJSON_Delete(p);
    /* A scalar at the top. */
    cJSON *n = cJSON_CreateNumber(12);
    CHECK(same_as_cjson(n));
    cJSON_Delete(n);
    CHECK(jsonout_print(NULL) == NULL);

    /* An item of no JSON type, or a raw item without text, anywhere in
     * the tree: no text at all, as with cJSON. */
    cJSON *bad = cJSON_CreateRaw("1");
    cJSON_free(bad->valuestring);
    bad->valuestring = NULL;
    cJSON_AddItemToArray(cJSON_GetObjectItem(t, "ea"), bad);
    CHECK(jsonout_print(t) == NULL);
    CHECK(same_as_cjson(t));
    bad->type = cJSON_Invalid;
    CHECK(jsonout_print(t) == NULL);
    CHECK(same_as_cjson(t));
    bad->type = cJSON_NULL;
    CHECK(same_as_cjson(t));
    cJSON_Delete(t);
}

/* U+0080..U+009F, the C1 controls, are escaped where cJSON passes them:
 * a guest's CSI (U+009B) or OSC (U+009D) in any string reaches no
 * terminal through hearth's replies, and parses back to the same text. */
TEST(jsonout_escapes_c1_controls)
{
    cJSON *t = cJSON_CreateObject();
    cJSON_AddStringToObject(t, "csi\xc2\x9b", "a\xc2\x9b" "31mred \xc2\x9d" "0;title\xc2\x9c z");
    cJSON_AddStringToObject(t, "edges", "\xc2\x80\xc2\x9f\xc2\xa0\xc2\x7f\xc3\x9b");
    char *text = jsonout_print(t);
    CHECK_STR(text, "{\"csi\\u009b\":\"a\\u009b31mred \\u009d0;title\\u009c z\","
                    "\"edges\":\"\\u0080\\u009f\xc2\xa0\xc2\x7f\xc3\x9b\"}");
    /* No raw C1 left: no C2 followed by 80..9F. */
    for (const unsigned char *p = (const unsigned char *)text; p && *p; p++)
        CHECK(!(p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f));
    cJSON *back = text ? cJSON_Parse(text) : NULL;
    CHECK(back && cJSON_Compare(back, t, true));
    cJSON_Delete(back);
    cJSON_free(text);
    cJSON_Delete(t);
}
