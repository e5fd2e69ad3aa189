/* schema: the walker that checks a JSON document against the tables of
 * schema_tables.c (handed to it: it names none of them), and the strict
 * reading of JSON text.
 *
 * Validation is table driven: every object type has a static table of its
 * keys, each pointing at a schema (type, bounds, sub-table, element schema,
 * enum names, extra check). One walker applies the tables, so every key
 * the product knows is listed in exactly one place, and every error names
 * its JSON path. */
#include "schema_priv.h"

#include "err.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

/* ------------------------------------------------------------------ */
/* The JSON path being validated, and errors that name it. */

/* Appends to the path and returns the previous length, which path_pop
 * restores. A path too long for the buffer is truncated, never overrun. */
size_t vpath_append(struct vctx *c, const char *fmt, ...)
{
    size_t old = c->len;
    size_t room = sizeof(c->path) - c->len;
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(c->path + c->len, room, fmt, ap);
    va_end(ap);
    if (n < 0)
        c->path[c->len] = '\0';
    else if ((size_t)n >= room)
        c->len = sizeof(c->path) - 1;
    else
        c->len += (size_t)n;
    return old;
}

size_t vpath_key(struct vctx *c, const char *key)
{
    return c->len ? vpath_append(c, ".%s", key) : vpath_append(c, "%s", key);
}

size_t vpath_index(struct vctx *c, size_t i)
{
    return vpath_append(c, "[%zu]", i);
}

void vpath_pop(struct vctx *c, size_t old)
{
    c->len = old;
    c->path[old] = '\0';
}

/* Writes "<path>: <reason>" and returns -1 so checks can `return vfail(...)`. */
int vfail(struct vctx *c, const char *fmt, ...)
{
    char reason[SCHEMA_ERR_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(reason, sizeof(reason), fmt, ap);
    va_end(ap);
    return err_field(c->err, c->len ? c->path : "(root)", "%s", reason);
}

bool name_in_list(const char *s, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(s, *list) == 0)
            return true;
    return false;
}

/* ------------------------------------------------------------------ */
/* The walker. */

static int expect_enum(const struct schema *s, struct vctx *c)
{
    char list[256];
    size_t o = 0;

    list[0] = '\0';
    for (const char *const *n = s->names; *n && o < sizeof(list); n++)
        o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%s", n == s->names ? "" : ", ", *n);
    return vfail(c, "expected one of %s", list);
}

/* A key appearing twice in one object: cJSON keeps both, so the second
 * would be silently ignored by lookups. */
static bool duplicate_before(const cJSON *obj, const cJSON *item)
{
    for (const cJSON *p = obj->child; p && p != item; p = p->next)
        if (strcmp(p->string, item->string) == 0)
            return true;
    return false;
}

static int validate_object(const cJSON *v, const struct schema *s, struct vctx *c)
{
    const cJSON *item;
    size_t old;

    if (!cJSON_IsObject(v))
        return vfail(c, "expected object");
    cJSON_ArrayForEach(item, v) {
        const struct key *k = s->keys;
        while (k->name && strcmp(k->name, item->string) != 0)
            k++;
        old = vpath_key(c, item->string);
        if (!k->name)
            return vfail(c, "unknown key");
        if (duplicate_before(v, item))
            return vfail(c, "duplicate key");
        if (schema_validate(item, k->s, c) < 0)
            return -1;
        vpath_pop(c, old);
    }
    for (const struct key *k = s->keys; k->name; k++) {
        if (k->required && !jget(v, k->name)) {
            vpath_key(c, k->name);
            return vfail(c, "missing required key");
        }
    }
    return 0;
}

int schema_validate(const cJSON *v, const struct schema *s, struct vctx *c)
{
    const cJSON *item;
    int64_t n;
    size_t i, old;

    switch (s->kind) {
    case K_STRING:
        if (!cJSON_IsString(v))
            return vfail(c, "expected string");
        n = (int64_t)strlen(v->valuestring);
        if (n < s->min)
            return vfail(c, "must not be empty");
        if (s->max && n > s->max)
            return vfail(c, "longer than %lld bytes", (long long)s->max);
        break;
    case K_INT:
        if (!jget_integral(v))
            return vfail(c, "expected integer");
        if (!jget_int(v, &n))
            return vfail(c, "integer out of range");
        if (n < s->min || n > s->max) {
            if (s->max == JSON_INT53)
                return vfail(c, n < s->min ? "must be >= %lld" : "too large (limit %lld)",
                            (long long)(n < s->min ? s->min : s->max));
            return vfail(c, "must be between %lld and %lld", (long long)s->min,
                        (long long)s->max);
        }
        break;
    case K_BOOL:
        if (!cJSON_IsBool(v))
            return vfail(c, "expected boolean");
        break;
    case K_ENUM:
        if (!cJSON_IsString(v) || !name_in_list(v->valuestring, s->names))
            return expect_enum(s, c);
        break;
    case K_OBJECT:
        if (validate_object(v, s, c) < 0)
            return -1;
        break;
    case K_ARRAY:
        if (!cJSON_IsArray(v))
            return vfail(c, "expected array");
        n = cJSON_GetArraySize(v);
        if (n < s->min)
            return s->min == 1 ? vfail(c, "must not be empty")
                               : vfail(c, "needs at least %lld entries", (long long)s->min);
        if (s->max && n > s->max)
            return vfail(c, "at most %lld entries", (long long)s->max);
        i = 0;
        cJSON_ArrayForEach(item, v) {
            old = vpath_index(c, i++);
            if (schema_validate(item, s->elem, c) < 0)
                return -1;
            vpath_pop(c, old);
        }
        break;
    case K_MAP:
        if (!cJSON_IsObject(v))
            return vfail(c, "expected object");
        if (s->max && cJSON_GetArraySize(v) > s->max)
            return vfail(c, "at most %lld entries", (long long)s->max);
        cJSON_ArrayForEach(item, v) {
            char q[NAMES_QUOTE_MAX];
            if (duplicate_before(v, item))
                return vfail(c, "duplicate key %s", names_quote(item->string, q, sizeof(q)));
            if (s->key_check && s->key_check(item, c) < 0)
                return -1;
            old = vpath_key(c, item->string);
            if (schema_validate(item, s->elem, c) < 0)
                return -1;
            vpath_pop(c, old);
        }
        break;
    case K_ANY:
        break;
    }
    return s->check ? s->check(v, c) : 0;
}

/* ------------------------------------------------------------------ */
/* JSON text handling. */

static void line_col(const char *text, size_t off, size_t *line, size_t *col)
{
    size_t l = 1, start = 0;

    for (size_t i = 0; i < off; i++) {
        if (text[i] == '\n') {
            l++;
            start = i + 1;
        }
    }
    *line = l;
    *col = off - start + 1;
}

static void syntax_error(const char *text, size_t off, const char *what, struct err *out)
{
    size_t line, col;

    line_col(text, off, &line, &col);
    err_set(out, "syntax error at byte %zu (line %zu, column %zu)%s%s", off, line, col,
            what ? ": " : "", what ? what : "");
}

/* cJSON accepts raw control characters inside strings and turns \u0000
 * (and a \u without four hex digits, which it reads as \u0000) into an
 * early end of string; both would let a value differ from what
 * the operator sees, so they are refused. The text already parsed, so a
 * small scanner suffices. Returns the offending offset or -1. */
static long bad_string_byte(const char *text, size_t len, const char **what)
{
    bool in_str = false;

    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)text[i];
        if (!in_str) {
            in_str = ch == '"';
            continue;
        }
        if (ch == '"') {
            in_str = false;
        } else if (ch < 0x20) {
            *what = "control character in string";
            return (long)i;
        } else if (ch == '\\' && i + 1 < len) {
            if (text[i + 1] == 'u' && i + 5 < len && memcmp(text + i + 2, "0000", 4) == 0) {
                *what = "\\u0000 in string";
                return (long)i;
            }
            if (text[i + 1] == 'u' && (i + 5 >= len || !isxdigit((unsigned char)text[i + 2]) ||
                                       !isxdigit((unsigned char)text[i + 3]) ||
                                       !isxdigit((unsigned char)text[i + 4]) ||
                                       !isxdigit((unsigned char)text[i + 5]))) {
                *what = "\\u without four hex digits in string";
                return (long)i;
            }
            i++;
        }
    }
    return -1;
}

/* Parses exactly len bytes of JSON: trailing data is an error, as is
 * anything cJSON would silently reinterpret. reason gets the syntax error
 * with byte offset and line. */
cJSON *schema_parse_json(const char *text, size_t len, struct err *err)
{
    const char *end = NULL, *what = NULL;
    cJSON *root;
    size_t off;
    long bad;

    for (off = 0; off < len && strchr(" \t\r\n", text[off]) && text[off]; off++)
        ;
    if (off == len) {
        syntax_error(text, off, "empty document", err);
        return NULL;
    }
    root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) {
        off = end && end >= text ? (size_t)(end - text) : 0;
        syntax_error(text, off, NULL, err);
        return NULL;
    }
    off = (size_t)(end - text);
    while (off < len && strchr(" \t\r\n", text[off]) && text[off])
        off++;
    if (off < len) {
        cJSON_Delete(root);
        syntax_error(text, off, "unexpected data after the JSON value", err);
        return NULL;
    }
    bad = bad_string_byte(text, len, &what);
    if (bad >= 0) {
        cJSON_Delete(root);
        syntax_error(text, (size_t)bad, what, err);
        return NULL;
    }
    return root;
}
