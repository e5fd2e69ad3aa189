#include "jsonout.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

size_t jsonout_number(double d, char buf[JSONOUT_NUM_MAX])
{
    /* Comparisons rather than isfinite/trunc calls: NaN and the
     * infinities fail the range test, a fraction the round trip. */
    if (d >= -9007199254740992.0 && d <= 9007199254740992.0) {
        long long v = (long long)d;
        /* -0 is an integer too, but only printf writes its sign. */
        if ((double)v == d && (v != 0 || !signbit(d))) {
            unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
            char tmp[24], *o = tmp + sizeof(tmp);
            do {
                *--o = (char)('0' + u % 10);
                u /= 10;
            } while (u);
            if (v < 0)
                *--o = '-';
            size_t n = (size_t)(tmp + sizeof(tmp) - o);
            memcpy(buf, o, n);
            buf[n] = 0;
            return n;
        }
    }
    if (isnan(d) || isinf(d)) {
        memcpy(buf, "null", 5);
        return 4;
    }
    /* 15 significant digits avoid noise such as 0.1 written as
     * 0.10000000000000001; when they lose the value, 17 always keep it.
     * "Lose" is cJSON's test, a difference beyond a relative DBL_EPSILON,
     * so the text is the one cJSON would write. */
    int n = snprintf(buf, JSONOUT_NUM_MAX, "%1.15g", d);
    double back = strtod(buf, NULL), big = fabs(back) > fabs(d) ? fabs(back) : fabs(d);
    if (!(fabs(back - d) <= big * DBL_EPSILON))
        n = snprintf(buf, JSONOUT_NUM_MAX, "%1.17g", d);
    return (size_t)n;
}

/* Where text goes: counted only while at is NULL (the first pass, which
 * sizes the allocation), stored too in the second. */
struct out {
    char *at;
    size_t len;
};

static void put(struct out *o, const char *s, size_t n)
{
    if (o->at)
        memcpy(o->at + o->len, s, n);
    o->len += n;
}

/* The bytes a string carries as they are whatever follows: all but the
 * controls (and NUL), '"' (34), '\\' (92) and 0xc2, the lead byte of a C1
 * control. */
static const bool plain[256] = {
    [32 ... 33] = true, [35 ... 91] = true, [93 ... 193] = true, [195 ... 255] = true,
};

static void put_string(struct out *o, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    /* The characters with a short escape, and their letters. */
    static const char shortc[] = "\"\\\b\f\n\r\t", letter[] = "\"\\bfnrt";
    put(o, "\"", 1);
    /* Runs that need no escape are copied whole. */
    const unsigned char *p = (const unsigned char *)(s ? s : ""), *run = p;
    for (; *p; p++) {
        /* The common byte needs nothing: skipped by table, without the
         * C1 look ahead (a long base64 value is all such bytes). */
        while (plain[*p])
            p++;
        if (!*p)
            break;
        unsigned char c = *p;
        /* U+0080..U+009F (C2 80..C2 9F) are the C1 controls: escaped, so
         * that text a guest wrote cannot reach a terminal as CSI or OSC
         * through a reader that prints the JSON as it is. */
        bool c1 = c == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f;
        if (c >= 32 && c != '"' && c != '\\' && !c1)
            continue;
        put(o, (const char *)run, (size_t)(p - run));
        if (c1)
            c = *++p;
        run = p + 1;
        const char *k = c1 ? NULL : memchr(shortc, c, sizeof(shortc) - 1);
        char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
        if (k)
            e[1] = letter[k - shortc];
        put(o, e, k ? 2 : 6);
    }
    put(o, (const char *)run, (size_t)(p - run));
    put(o, "\"", 1);
}

/* Recursion as deep as the tree: hearth's own trees are shallow, and a
 * parsed one is held to cJSON's nesting limit. */
static bool put_value(struct out *o, const cJSON *item)
{
    char num[JSONOUT_NUM_MAX];
    int type = item->type & 0xff;

    switch (type) {
    case cJSON_NULL:
        put(o, "null", 4);
        return true;
    case cJSON_False:
        put(o, "false", 5);
        return true;
    case cJSON_True:
        put(o, "true", 4);
        return true;
    case cJSON_Number:
        put(o, num, jsonout_number(item->valuedouble, num));
        return true;
    case cJSON_Raw:
        if (!item->valuestring)
            return false;
        put(o, item->valuestring, strlen(item->valuestring));
        return true;
    case cJSON_String:
        put_string(o, item->valuestring);
        return true;
    case cJSON_Array:
    case cJSON_Object:
        put(o, type == cJSON_Object ? "{" : "[", 1);
        for (const cJSON *c = item->child; c; c = c->next) {
            if (type == cJSON_Object) {
                put_string(o, c->string);
                put(o, ":", 1);
            }
            if (!put_value(o, c))
                return false;
            if (c->next)
                put(o, ",", 1);
        }
        put(o, type == cJSON_Object ? "}" : "]", 1);
        return true;
    default:
        return false;
    }
}

char *jsonout_print(const cJSON *item)
{
    struct out o = {NULL, 0};
    /* cJSON's bound on printed text. */
    if (!item || !put_value(&o, item) || o.len > INT_MAX)
        return NULL;
    char *text = cJSON_malloc(o.len + 1);
    if (!text)
        return NULL;
    o.at = text;
    o.len = 0;
    put_value(&o, item);
    text[o.len] = 0;
    return text;
}
