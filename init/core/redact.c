#include "redact.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>



#define MARK_LEN (sizeof(REDACT_MARK) - 1)

struct secret {
    char *text;
    size_t len;
};

static struct secret secrets[REDACT_MAX_VALUES];
static size_t nsecrets;
static size_t secret_bytes;
static size_t secret_longest;
static bool full_warned;

bool redact_name_is_secret(const char *name)
{
    /* Substrings, in any case: "monkey" is caught with the rest, and
     * showing one harmless value as redacted costs less than one leak. */
    static const char *const words[] = {"KEY",        "TOKEN", "SECRET", "PASSWORD",
                                        "CREDENTIAL", "DSN",   "AUTH",   "PASS"};

    if (!name)
        return false;
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
        if (strcasestr(name, words[i]))
            return true;
    return false;
}

const char *redact_add_value(const char *value)
{
    static char why[160];
    size_t len = value ? strlen(value) : 0;

    if (len < REDACT_MIN_VALUE)
        return NULL;
    for (size_t i = 0; i < nsecrets; i++)
        if (secrets[i].len == len && memcmp(secrets[i].text, value, len) == 0)
            return NULL;
    if (nsecrets == REDACT_MAX_VALUES || secret_bytes + len > REDACT_MAX_BYTES) {
        if (full_warned)
            return NULL;
        full_warned = true;
        snprintf(why, sizeof(why),
                 "redact: unable to register more secret values: %zu values, %zu bytes kept; "
                 "later ones are not looked for", nsecrets, secret_bytes);
        return why;
    }
    char *copy = strdup(value);
    if (!copy)
        return "redact: unable to register a secret value: out of memory";
    secrets[nsecrets].text = copy;
    secrets[nsecrets].len = len;
    nsecrets++;
    secret_bytes += len;
    if (len > secret_longest)
        secret_longest = len;
    return NULL;
}

void redact_reset(void)
{
    for (size_t i = 0; i < nsecrets; i++)
        free(secrets[i].text);
    nsecrets = 0;
    secret_bytes = 0;
    secret_longest = 0;
    full_warned = false;
}

size_t redact_count(void) { return nsecrets; }
size_t redact_longest(void) { return secret_longest; }

static bool scheme_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '+' || c == '-' || c == '.';
}

/* Characters that end a URL's authority part in running text too. */
static bool authority_end(char c)
{
    return c == '/' || c == '?' || c == '#' || c == ' ' || c == '\t' || c == '\n' || c == '\r' ||
           c == '"' || c == '\'' || c == '<' || c == '>' || c == '`';
}

/* The next URL password at or after from: [*start, *end). */
static bool next_url_password(const char *in, size_t len, size_t from, size_t *start, size_t *end)
{
    while (from + 3 <= len) {
        const char *sep = memmem(in + from, len - from, "://", 3);
        if (!sep)
            return false;
        size_t s = (size_t)(sep - in);
        from = s + 3;
        if (s == 0 || !scheme_char(in[s - 1]))
            continue;
        size_t a = s + 3, colon = 0, at = 0;
        for (size_t i = a; i < len && !authority_end(in[i]); i++) {
            if (in[i] == ':' && !colon)
                colon = i;
            else if (in[i] == '@')
                at = i; /* the last one: a password may hold '@' unescaped */
        }
        if (at && colon && colon < at && colon + 1 < at) {
            *start = colon + 1;
            *end = at;
            return true;
        }
    }
    return false;
}

/* Per registered value, where it next occurs; each is searched again only
 * once the copy has passed it, so a line costs one scan per value however
 * many matches it holds (the agent writes these lines: no quadratic path). */
struct finder {
    size_t next[REDACT_MAX_VALUES];
    bool gone[REDACT_MAX_VALUES];
    size_t url_start, url_end;
    bool url_gone;
};

static void finder_init(struct finder *f, const char *in, size_t len)
{
    for (size_t i = 0; i < nsecrets; i++) {
        const char *m = memmem(in, len, secrets[i].text, secrets[i].len);
        f->gone[i] = !m;
        f->next[i] = m ? (size_t)(m - in) : len;
    }
    f->url_gone = !next_url_password(in, len, 0, &f->url_start, &f->url_end);
}

/* The earliest secret whose end lies past pos: [*s, *e), clipped to pos
 * (a match that overlaps the previous one still hides its rest). */
static bool finder_next(struct finder *f, const char *in, size_t len, size_t pos, size_t *s,
                        size_t *e)
{
    bool found = false;

    for (size_t i = 0; i < nsecrets; i++) {
        while (!f->gone[i] && f->next[i] + secrets[i].len <= pos) {
            const char *m = memmem(in + f->next[i] + 1, len - f->next[i] - 1, secrets[i].text,
                                   secrets[i].len);
            f->gone[i] = !m;
            f->next[i] = m ? (size_t)(m - in) : len;
        }
        if (f->gone[i])
            continue;
        size_t ms = f->next[i] < pos ? pos : f->next[i], me = f->next[i] + secrets[i].len;
        if (!found || ms < *s || (ms == *s && me > *e)) {
            *s = ms;
            *e = me;
            found = true;
        }
    }
    while (!f->url_gone && f->url_end <= pos)
        f->url_gone = !next_url_password(in, len, f->url_end, &f->url_start, &f->url_end);
    if (!f->url_gone) {
        size_t ms = f->url_start < pos ? pos : f->url_start;
        if (!found || ms < *s || (ms == *s && f->url_end > *e)) {
            *s = ms;
            *e = f->url_end;
            found = true;
        }
    }
    return found;
}

static void put(char *out, size_t cap, size_t *k, const char *src, size_t n)
{
    if (*k + 1 >= cap)
        return;
    if (n > cap - 1 - *k)
        n = cap - 1 - *k;
    memcpy(out + *k, src, n);
    *k += n;
}

size_t redact_text(const char *in, size_t len, char *out, size_t cap)
{
    struct finder f;
    size_t pos = 0, k = 0, s, e;

    if (!in || !len || !out || !cap)
        return (size_t)-1;
    if (!nsecrets && !memmem(in, len, "://", 3))
        return (size_t)-1;
    finder_init(&f, in, len);
    if (!finder_next(&f, in, len, 0, &s, &e))
        return (size_t)-1;
    do {
        put(out, cap, &k, in + pos, s - pos);
        put(out, cap, &k, REDACT_MARK, MARK_LEN);
        pos = e;
    } while (finder_next(&f, in, len, pos, &s, &e));
    put(out, cap, &k, in + pos, len - pos);
    out[k] = 0;
    return k;
}

/* Sets j's string to text; when that fails, empties it in place. */
static void set_string(cJSON *j, const char *text)
{
    if (!cJSON_SetValuestring(j, text) && j->valuestring && !(j->type & cJSON_IsReference))
        j->valuestring[0] = 0;
}

static void redact_string(cJSON *j)
{
    size_t len = strlen(j->valuestring);
    /* Each match takes at least six bytes of input (a registered value,
     * or "a://:p@" around a URL password) and writes MARK_LEN. */
    size_t cap = len * 3 + MARK_LEN + 1;
    char *buf = malloc(cap);
    if (!buf) {
        j->valuestring[0] = 0;
        return;
    }
    if (redact_text(j->valuestring, len, buf, cap) != (size_t)-1)
        set_string(j, buf);
    free(buf);
}

/* "--api-key=X" and "--api-key X": the flag's name decides. */
static void redact_argv(cJSON *argv)
{
    bool next_secret = false;
    cJSON *a;

    cJSON_ArrayForEach(a, argv) {
        if (!cJSON_IsString(a) || !a->valuestring)
            continue;
        const char *v = a->valuestring;
        if (next_secret && strncmp(v, "--", 2) != 0) {
            next_secret = false;
            set_string(a, REDACT_MARK);
            continue;
        }
        next_secret = false;
        if (v[0] != '-')
            continue;
        const char *name = v + strspn(v, "-");
        const char *eq = strchr(name, '=');
        if (!eq) {
            next_secret = redact_name_is_secret(name);
            continue;
        }
        char flag[128];
        size_t n = (size_t)(eq - name);
        if (n >= sizeof(flag))
            n = sizeof(flag) - 1;
        memcpy(flag, name, n);
        flag[n] = 0;
        if (redact_name_is_secret(flag) && eq[1]) {
            size_t keep = (size_t)(eq - v) + 1;
            char *nv = malloc(keep + MARK_LEN + 1);
            if (!nv) {
                a->valuestring[0] = 0;
                continue;
            }
            memcpy(nv, v, keep);
            memcpy(nv + keep, REDACT_MARK, MARK_LEN + 1);
            set_string(a, nv);
            free(nv);
        }
    }
}

static void walk(cJSON *j, const char *member)
{
    if (cJSON_IsString(j) && j->valuestring && !(j->type & cJSON_IsReference)) {
        redact_string(j);
        return;
    }
    if (!cJSON_IsObject(j) && !cJSON_IsArray(j))
        return;
    bool env = member && strcmp(member, "env") == 0 && cJSON_IsObject(j);
    bool argv = member && (strcmp(member, "argv") == 0 || strcmp(member, "exec") == 0) &&
                cJSON_IsArray(j);
    if (argv)
        redact_argv(j);
    cJSON *c;
    cJSON_ArrayForEach(c, j) {
        if (env && cJSON_IsString(c) && redact_name_is_secret(c->string)) {
            set_string(c, REDACT_MARK);
            continue;
        }
        walk(c, cJSON_IsObject(j) ? c->string : NULL);
    }
}

void redact_json(cJSON *tree)
{
    if (tree)
        walk(tree, tree->string);
}
