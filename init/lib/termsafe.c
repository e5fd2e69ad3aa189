#include "termsafe.h"

#include <stdlib.h>
#include <string.h>

#include "utf8.h"

static const char hex[] = "0123456789abcdef";

/* The length of the valid UTF-8 character at s, or 0 when s[0] begins
 * none (a bad lead, a cut or broken sequence, an overlong form, a
 * surrogate). */
static size_t char_len(const unsigned char *s, size_t len)
{
    size_t n = s[0] < 0x80 ? 1 : (s[0] & 0xe0) == 0xc0 ? 2 : (s[0] & 0xf0) == 0xe0 ? 3
             : (s[0] & 0xf8) == 0xf0 ? 4 : 0;
    if (n == 0 || n > len)
        return 0;
    return utf8_invalid_at((const char *)s, n) < 0 ? n : 0;
}

size_t termsafe_step(const char *s, size_t len, unsigned keep, char out[TERMSAFE_ESC_MAX],
                     size_t *used, bool *escaped)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = char_len(p, len);
    bool esc = true;

    if (n == 0) {
        /* A byte that breaks UTF-8: a terminal in a legacy mode would take
         * 0x80..0x9f as C1 controls. */
        out[0] = '\\', out[1] = 'x', out[2] = hex[p[0] >> 4], out[3] = hex[p[0] & 15];
        n = 4, *used = 1;
    } else if (n == 1 && (p[0] < 0x20 || p[0] == 0x7f) &&
               !(p[0] == '\t' && (keep & TERMSAFE_TAB)) &&
               !(p[0] == '\n' && (keep & TERMSAFE_NL))) {
        out[0] = '\\', out[1] = 'x', out[2] = hex[p[0] >> 4], out[3] = hex[p[0] & 15];
        n = 4, *used = 1;
    } else if (n == 2 && p[0] == 0xc2 && p[1] <= 0x9f) {
        /* U+0080..U+009F: the C1 controls (CSI, OSC, DCS, ST...). */
        memcpy(out, "\\u00", 4);
        out[4] = hex[p[1] >> 4], out[5] = hex[p[1] & 15];
        n = 6, *used = 2;
    } else {
        memcpy(out, s, n);
        *used = n;
        esc = false;
    }
    if (escaped)
        *escaped = esc;
    return n;
}

size_t termsafe_copy(char *dst, size_t n, const char *s, size_t len, unsigned keep)
{
    size_t o = 0, need = 0;
    bool full = false;

    for (size_t i = 0; i < len;) {
        char e[TERMSAFE_ESC_MAX];
        size_t used, l = termsafe_step(s + i, len - i, keep, e, &used, NULL);

        if (!full && o + l < n) {
            memcpy(dst + o, e, l);
            o += l;
        } else {
            full = true;
        }
        need += l;
        i += used;
    }
    if (n > 0)
        dst[o] = '\0';
    return need;
}

bool termsafe_clean(const char *s, size_t len, unsigned keep)
{
    for (size_t i = 0; i < len;) {
        char e[TERMSAFE_ESC_MAX];
        size_t used;
        bool esc;

        termsafe_step(s + i, len - i, keep, e, &used, &esc);
        if (esc)
            return false;
        i += used;
    }
    return true;
}

/* One pass of termsafe_json: counts while out is NULL, writes too after. */
static size_t json_pass(const char *json, size_t len, char *out)
{
    size_t o = 0;

    for (size_t i = 0; i < len;) {
        const unsigned char *p = (const unsigned char *)json + i;
        size_t n = char_len(p, len - i);
        char e[6];
        const char *w = e;
        size_t wl = 6;

        if (n == 0) {
            memcpy(e, "\\ufffd", 6);
            i++;
        } else if ((n == 2 && p[0] == 0xc2 && p[1] <= 0x9f) || (n == 1 && p[0] == 0x7f)) {
            memcpy(e, "\\u00", 4);
            e[4] = hex[p[n - 1] >> 4], e[5] = hex[p[n - 1] & 15];
            i += n;
        } else {
            w = (const char *)p, wl = n;
            i += n;
        }
        if (out)
            memcpy(out + o, w, wl);
        o += wl;
    }
    return o;
}

char *termsafe_json(const char *json)
{
    size_t len = strlen(json), n = json_pass(json, len, NULL);
    char *out = malloc(n + 1);

    if (!out)
        return NULL;
    json_pass(json, len, out);
    out[n] = '\0';
    return out;
}
