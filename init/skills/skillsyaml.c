#include "skillsyaml.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"
#include "safepath.h"
#include "tree.h"

const char *skillsyaml_state_name(int state)
{
    switch (state) {
    case SKILLSYAML_PRESENT: return "present";
    case SKILLSYAML_ADDED: return "added";
    case SKILLSYAML_CREATED: return "created";
    default: return "error";
    }
}

/* ------------------------------------------------------------------ */
/* The editor on bytes. The file is cut into lines; only the lines at the
 * top level, at the level of `skills:`'s keys and inside `external_dirs`
 * are read, every other line is skipped whole (a deeper line belongs to
 * the value of the key above it, whatever it holds). */

struct line {
    const char *p; /* the line's text, without its '\n' */
    size_t len;
    size_t end;    /* offset just after the line (after its '\n', if any) */
    bool nl;       /* ends with '\n' */
    int indent;    /* leading spaces */
    bool content;  /* neither blank nor a comment */
};

struct ed {
    const char *in;
    size_t len;
    struct line *v;
    size_t n;
    size_t *line;
    struct err *err;
};

__attribute__((format(printf, 3, 4))) static int fail(struct ed *e, size_t i, const char *fmt, ...)
{
    va_list ap;
    *e->line = i + 1;
    va_start(ap, fmt);
    err_vset(e->err, fmt, ap);
    va_end(ap);
    return SKILLSYAML_ERROR;
}

static int split_lines(struct ed *e)
{
    size_t n = 0;

    for (size_t i = 0; i < e->len; i++)
        n += e->in[i] == '\n';
    e->v = calloc(n + 1, sizeof(*e->v));
    if (!e->v)
        return err_set(e->err, "out of memory");
    for (size_t off = 0; off < e->len;) {
        const char *p = e->in + off;
        const char *nl = memchr(p, '\n', e->len - off);
        struct line *l = &e->v[e->n++];
        l->p = p;
        l->len = nl ? (size_t)(nl - p) : e->len - off;
        l->nl = nl != NULL;
        l->end = off + l->len + (nl ? 1 : 0);
        while ((size_t)l->indent < l->len && p[l->indent] == ' ')
            l->indent++;
        size_t k = (size_t)l->indent;
        while (k < l->len && p[k] == '\t')
            k++;
        l->content = k < l->len && p[k] != '#';
        off = l->end;
    }
    return 0;
}

/* Whether the line holds a tab anywhere in its leading whitespace. */
static bool tab_indent(const struct line *l)
{
    for (size_t k = 0; k < l->len && (l->p[k] == ' ' || l->p[k] == '\t'); k++)
        if (l->p[k] == '\t')
            return true;
    return false;
}

static bool is_dash(const char *s, size_t n)
{
    return n >= 1 && s[0] == '-' && (n == 1 || s[1] == ' ');
}

/* s[0..n) after the indentation: "KEY:" then a space or the end. 1 with
 * the key (unquoted) in key and *val the offset of what follows the ':';
 * 0 when the line is not a key; -1 when it is a key hearth cannot read
 * with confidence (an escape in a quoted key, an explicit '?' key). */
static int parse_key(const char *s, size_t n, char *key, size_t keycap, size_t *val)
{
    size_t j, ks = 0, ke;

    if (n == 0)
        return 0;
    if (s[0] == '?' && (n == 1 || s[1] == ' '))
        return -1;
    if (s[0] == '"' || s[0] == '\'') {
        char q = s[0];
        for (j = 1; j < n && s[j] != q; j++)
            if (s[j] == '\\' && q == '"')
                return -1;
        if (j >= n)
            return 0;
        if (q == '\'' && j + 1 < n && s[j + 1] == '\'')
            return -1;
        ks = 1;
        ke = j;
        j++;
        while (j < n && s[j] == ' ')
            j++;
        if (j >= n || s[j] != ':' || (j + 1 < n && s[j + 1] != ' '))
            return 0;
    } else {
        if (strchr("-?:,[]{}#&*!|>%@`", s[0]))
            return 0;
        for (j = 0; j < n; j++) {
            if (s[j] == ':' && (j + 1 == n || s[j + 1] == ' '))
                break;
            if (s[j] == '#' && j > 0 && s[j - 1] == ' ')
                return 0;
        }
        if (j >= n)
            return 0;
        ke = j;
        while (ke > 0 && s[ke - 1] == ' ')
            ke--;
    }
    if (ke - ks >= keycap)
        return -1;
    memcpy(key, s + ks, ke - ks);
    key[ke - ks] = '\0';
    *val = j + 1;
    return 1;
}

/* The value part s[0..n): leading spaces and a trailing comment gone. */
static void value_span(const char *s, size_t n, size_t *a, size_t *b)
{
    size_t i = 0;
    while (i < n && s[i] == ' ')
        i++;
    *a = i;
    if (i < n && s[i] == '#') {
        *b = i;
        return;
    }
    *b = n;
}

/* Why a value that should be empty (a block follows) or a list is not
 * readable: names the construct. */
static const char *shape_of(char c)
{
    switch (c) {
    case '&': return "an anchor";
    case '*': return "an alias";
    case '!': return "a tag";
    case '{': return "a flow mapping";
    case '[': return "a flow list";
    case '|':
    case '>': return "a block scalar";
    default: return "a single value";
    }
}

/* The end of an item's text s[a..b): before a comment (" #") that
 * follows a plain item, or follows a quoted item's closing quote. */
static size_t cut_comment(const char *s, size_t a, size_t b)
{
    char q = s[a] == '"' || s[a] == '\'' ? s[a] : 0;
    size_t k = a + (q ? 1 : 0);

    if (q) {
        for (; k < b; k++) {
            if (s[k] == '\\' && q == '"' && k + 1 < b)
                k++;
            else if (s[k] == q && q == '\'' && k + 1 < b && s[k + 1] == '\'')
                k++;
            else if (s[k] == q)
                break;
        }
        if (k >= b)
            return b;
        k++;
    }
    for (; k < b; k++)
        if (s[k] == '#' && k > a && s[k - 1] == ' ')
            return k;
    return b;
}

/* One list item s[0..n) (a scalar, from an item line or a flow list):
 * its text in out. 0, or -1 when it is not a plain or simply quoted
 * scalar (why in *why). */
static int item_scalar(const char *s, size_t n, char *out, size_t cap, const char **why)
{
    size_t a = 0, b = n, o = 0;

    while (a < b && s[a] == ' ')
        a++;
    while (b > a && s[b - 1] == ' ')
        b--;
    if (a == b) {
        *why = "an empty item";
        return -1;
    }
    if (s[a] == '"' || s[a] == '\'') {
        char q = s[a];
        size_t j;
        for (j = a + 1; j < b; j++) {
            if (q == '"' && s[j] == '\\') {
                *why = "an escape in a quoted item";
                return -1;
            }
            if (s[j] == q) {
                if (q == '\'' && j + 1 < b && s[j + 1] == '\'') {
                    if (o + 1 >= cap)
                        goto long_;
                    out[o++] = '\'';
                    j++;
                    continue;
                }
                break;
            }
            if (o + 1 >= cap)
                goto long_;
            out[o++] = s[j];
        }
        if (j >= b) {
            *why = "an unterminated quoted item";
            return -1;
        }
        for (j++; j < b; j++)
            if (s[j] != ' ') {
                *why = "text after a quoted item";
                return -1;
            }
        out[o] = '\0';
        return 0;
    }
    if (strchr("[]{}&*!|>%@`,\"'", s[a]) || (strchr("-?:", s[a]) && (a + 1 == b || s[a + 1] == ' '))) {
        *why = s[a] == '&' || s[a] == '*' || s[a] == '!' ? shape_of(s[a]) : "an item that is not a plain value";
        return -1;
    }
    if (b - a >= cap)
        goto long_;
    memcpy(out, s + a, b - a);
    out[b - a] = '\0';
    return 0;
long_:
    *why = "an item too long";
    return -1;
}

/* An entry names dir: the same text, or with one trailing '/'. */
static bool same_dir(const char *item, const char *dir)
{
    size_t a = strlen(item), b = strlen(dir);
    while (a > 1 && item[a - 1] == '/')
        a--;
    while (b > 1 && dir[b - 1] == '/')
        b--;
    return a == b && memcmp(item, dir, a) == 0;
}

/* dir as a YAML scalar: plain when only safe bytes, else double-quoted. */
static void scalar_text(const char *dir, char *out, size_t cap)
{
    bool plain = dir[0] != '\0' && dir[0] != '-' && dir[0] != '~';
    for (const char *p = dir; *p && plain; p++)
        plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                strchr("/._+-", *p);
    if (plain) {
        snprintf(out, cap, "%s", dir);
        return;
    }
    size_t o = 0;
    out[o++] = '"';
    for (const unsigned char *p = (const unsigned char *)dir; *p && o + 8 < cap; p++) {
        if (*p == '"' || *p == '\\')
            o += (size_t)snprintf(out + o, cap - o, "\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f)
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", *p);
        else
            out[o++] = (char)*p;
    }
    out[o++] = '"';
    out[o] = '\0';
}

/* in with ins inserted at offset at (a '\n' first when that offset ends
 * a last line that has none). */
static int splice_in(struct ed *e, size_t at, bool need_nl, const char *ins, char **out,
                  size_t *outlen)
{
    size_t il = strlen(ins), n = e->len + il + (need_nl ? 1 : 0);
    char *b = malloc(n + 1);
    if (!b) {
        err_set(e->err, "out of memory");
        *e->line = 0;
        return SKILLSYAML_ERROR;
    }
    memcpy(b, e->in, at);
    size_t o = at;
    if (need_nl)
        b[o++] = '\n';
    memcpy(b + o, ins, il);
    memcpy(b + o + il, e->in + at, e->len - at);
    b[n] = '\0';
    *out = b;
    *outlen = n;
    return SKILLSYAML_ADDED;
}

/* The file as a whole: what hearth refuses before looking at keys. */
static int check_whole(struct ed *e)
{
    bool seen = false;

    if (e->len >= 3 && memcmp(e->in, "\xef\xbb\xbf", 3) == 0)
        return fail(e, 0, "a byte order mark");
    for (size_t i = 0; i < e->n; i++) {
        const struct line *l = &e->v[i];
        if (memchr(l->p, '\0', l->len))
            return fail(e, i, "a NUL byte");
        if (memchr(l->p, '\r', l->len))
            return fail(e, i, "a carriage return (only '\\n' line ends are read)");
        if (tab_indent(l))
            return fail(e, i, "a tab in the indentation");
        if (!l->content)
            continue;
        if (l->indent == 0 && l->p[0] == '%')
            return fail(e, i, "a directive");
        bool start = l->len >= 3 && memcmp(l->p, "---", 3) == 0 && (l->len == 3 || l->p[3] == ' ');
        bool end = l->len >= 3 && memcmp(l->p, "...", 3) == 0 && (l->len == 3 || l->p[3] == ' ');
        if (end)
            return fail(e, i, "a document end marker (one document only)");
        if (start) {
            size_t a, b;
            value_span(l->p + 3, l->len - 3, &a, &b);
            if (seen)
                return fail(e, i, "a second document (one document only)");
            if (a < b)
                return fail(e, i, "a value on the document start line");
            e->v[i].content = false; /* the marker alone: no key */
        }
        seen = true;
    }
    return 0;
}

/* skills.external_dirs at line x (keys of skills at indent n, the block
 * ends before line blk_end): present, or the entry added. */
static int edit_list(struct ed *e, size_t x, int n, size_t blk_end, const char *dir, char **out,
                     size_t *outlen)
{
    const struct line *xl = &e->v[x];
    char key[64], item[4096], text[4200], ins[4400];
    size_t val, a, b;
    const char *why;

    parse_key(xl->p + n, xl->len - (size_t)n, key, sizeof(key), &val);
    const char *vs = xl->p + n + val;
    value_span(vs, xl->len - (size_t)n - val, &a, &b);
    scalar_text(dir, text, sizeof(text));
    if (a < b && vs[a] == '[') {
        /* A flow list on this one line: read it, and add the entry by
         * inserting ", DIR" after its last item (only this line changes). */
        size_t j = a + 1, last = a + 1, len = b;
        bool empty = true, closed = false;
        while (j < len) {
            size_t s0 = j;
            char q = 0;
            for (; j < len; j++) {
                if (q) {
                    if (vs[j] == q)
                        q = 0;
                } else if (vs[j] == '"' || vs[j] == '\'') {
                    q = vs[j];
                } else if (vs[j] == ',' || vs[j] == ']') {
                    break;
                } else if (vs[j] == '[' || vs[j] == '{') {
                    return fail(e, x, "external_dirs holds a nested collection");
                } else if (vs[j] == '#' && vs[j - 1] == ' ') {
                    return fail(e, x, "a comment inside external_dirs's flow list");
                }
            }
            if (j >= len)
                break;
            bool blank = true;
            for (size_t k = s0; k < j; k++)
                blank &= vs[k] == ' ';
            if (vs[j] == ']' && blank && empty) {
                closed = true;
                j++;
                break;
            }
            if (item_scalar(vs + s0, j - s0, item, sizeof(item), &why) < 0)
                return fail(e, x, "external_dirs holds %s", why);
            empty = false;
            if (same_dir(item, dir))
                return SKILLSYAML_PRESENT;
            last = j;
            while (last > s0 && vs[last - 1] == ' ')
                last--;
            if (vs[j] == ']') {
                closed = true;
                j++;
                break;
            }
            j++;
        }
        if (!closed)
            return fail(e, x, "external_dirs is a flow list that does not end on its line");
        size_t rest_a, rest_b;
        value_span(vs + j, len - j, &rest_a, &rest_b);
        if (rest_a < rest_b)
            return fail(e, x, "text after external_dirs's list");
        snprintf(ins, sizeof(ins), "%s%s", empty ? "" : ", ", text);
        size_t at = (size_t)(vs - e->in) + (empty ? a + 1 : last);
        return splice_in(e, at, false, ins, out, outlen);
    }
    if (a < b)
        return fail(e, x, "external_dirs is %s, not a list", shape_of(vs[a]));
    /* A block list: the lines below, deeper than the key or "- " at the
     * key's own indentation. */
    int m = -1;
    size_t last = x;
    for (size_t i = x + 1; i < blk_end; i++) {
        const struct line *l = &e->v[i];
        if (!l->content)
            continue;
        bool dash = is_dash(l->p + l->indent, l->len - (size_t)l->indent);
        if (l->indent < n || (l->indent == n && !dash))
            break;
        if (m < 0) {
            if (!dash)
                return fail(e, i, "external_dirs is a mapping, not a list");
            m = l->indent;
        }
        if (l->indent != m || !dash)
            return fail(e, i, "external_dirs holds an item over several lines, or a bad indentation");
        if (memchr(l->p, '\t', l->len))
            return fail(e, i, "a tab in external_dirs");
        const char *s = l->p + m + 1;
        size_t sl = l->len - (size_t)m - 1, ia, ib;
        value_span(s, sl, &ia, &ib);
        if (ia == ib)
            return fail(e, i, "external_dirs holds an empty item, or one over several lines");
        ib = cut_comment(s, ia, ib);
        if (item_scalar(s + ia, ib - ia, item, sizeof(item), &why) < 0)
            return fail(e, i, "external_dirs holds %s", why);
        if (same_dir(item, dir))
            return SKILLSYAML_PRESENT;
        last = i;
    }
    if (m < 0)
        m = n + 2; /* external_dirs: with nothing under it */
    snprintf(ins, sizeof(ins), "%*s- %s\n", m, "", text);
    return splice_in(e, e->v[last].end, !e->v[last].nl, ins, out, outlen);
}

int skillsyaml_edit(const char *in, size_t len, const char *dir, char **out, size_t *outlen,
                    size_t *line, struct err *err)
{
    struct ed e = {.in = in, .len = len, .line = line, .err = err};
    char key[256], text[4200], ins[4400];
    size_t val, a, b;
    int rc;

    *out = NULL;
    *outlen = 0;
    *line = 0;
    if (err)
        err->msg[0] = '\0';
    if (split_lines(&e) < 0)
        return SKILLSYAML_ERROR;
    if ((rc = check_whole(&e)) < 0)
        goto done;

    /* The top level: a block mapping at indentation 0. */
    size_t sk = (size_t)-1;
    bool any = false;
    for (size_t i = 0; i < e.n; i++) {
        const struct line *l = &e.v[i];
        if (!l->content || (l->indent > 0 && any))
            continue;
        if (l->indent > 0) {
            rc = fail(&e, i, "the top level is not a mapping at indentation 0");
            goto done;
        }
        any = true;
        int k = parse_key(l->p, l->len, key, sizeof(key), &val);
        if (k < 0) {
            rc = fail(&e, i, "a key hearth cannot read (quoted with escapes, or explicit)");
            goto done;
        }
        if (k == 0) {
            rc = fail(&e, i, "the top level is not a block mapping");
            goto done;
        }
        if (strcmp(key, "<<") == 0) {
            rc = fail(&e, i, "a merge key at the top level");
            goto done;
        }
        if (strcmp(key, "skills") == 0) {
            if (sk != (size_t)-1) {
                rc = fail(&e, i, "skills is given twice");
                goto done;
            }
            sk = i;
        }
    }
    scalar_text(dir, text, sizeof(text));
    if (sk == (size_t)-1) {
        /* No skills: a block of its own at the end. */
        snprintf(ins, sizeof(ins), "skills:\n  external_dirs:\n    - %s\n", text);
        rc = splice_in(&e, len, len > 0 && in[len - 1] != '\n', ins, out, outlen);
        goto done;
    }
    const struct line *sl = &e.v[sk];
    parse_key(sl->p, sl->len, key, sizeof(key), &val);
    value_span(sl->p + val, sl->len - val, &a, &b);
    if (a < b) {
        rc = fail(&e, sk, "skills is %s, not a block mapping", shape_of(sl->p[val + a]));
        goto done;
    }
    /* The skills block: up to the next line at indentation 0. */
    size_t end = sk + 1;
    while (end < e.n && !(e.v[end].content && e.v[end].indent == 0))
        end++;
    int n = -1;
    size_t ext = (size_t)-1;
    bool may_list = false;
    for (size_t i = sk + 1; i < end; i++) {
        const struct line *l = &e.v[i];
        if (!l->content)
            continue;
        if (n < 0)
            n = l->indent;
        if (l->indent > n)
            continue; /* the value of the key above */
        if (l->indent < n) {
            rc = fail(&e, i, "a bad indentation in skills");
            goto done;
        }
        const char *s = l->p + n;
        size_t sn = l->len - (size_t)n;
        if (is_dash(s, sn)) {
            /* "key:" then "- item" at the key's own indentation: the
             * key's list; otherwise skills itself would be a list. */
            if (!may_list) {
                rc = fail(&e, i, "skills is a list, not a mapping");
                goto done;
            }
            continue;
        }
        if (memchr(l->p, '\t', l->len)) {
            rc = fail(&e, i, "a tab in skills");
            goto done;
        }
        int k = parse_key(s, sn, key, sizeof(key), &val);
        if (k <= 0) {
            rc = fail(&e, i, k < 0 ? "a key hearth cannot read in skills" : "a line of skills that is not a key");
            goto done;
        }
        value_span(s + val, sn - val, &a, &b);
        if (strcmp(key, "<<") == 0 || (a < b && strchr("&*!", s[val + a]))) {
            rc = fail(&e, i, "%s in skills", strcmp(key, "<<") == 0 ? "a merge key" : shape_of(s[val + a]));
            goto done;
        }
        may_list = a == b;
        if (strcmp(key, "external_dirs") == 0) {
            if (ext != (size_t)-1) {
                rc = fail(&e, i, "external_dirs is given twice");
                goto done;
            }
            ext = i;
        }
    }
    if (ext == (size_t)-1) {
        /* Its first key, right under skills: (nothing else moves). */
        int ind = n < 0 ? 2 : n;
        snprintf(ins, sizeof(ins), "%*sexternal_dirs:\n%*s- %s\n", ind, "", ind + 2, "", text);
        rc = splice_in(&e, sl->end, !sl->nl, ins, out, outlen);
        goto done;
    }
    rc = edit_list(&e, ext, n, end, dir, out, outlen);
done:
    free(e.v);
    return rc;
}

/* ------------------------------------------------------------------ */
/* The file. */

/* Writes buf to dfd/tmp (made anew, mode and owner set on the fd) and
 * syncs it; -1 with why. */
static int write_tmp(int dfd, const char *tmp, const char *buf, size_t len, uid_t uid, gid_t gid,
                     mode_t mode, struct err *err)
{
    if (unlinkat(dfd, tmp, 0) < 0 && errno != ENOENT)
        return err_unable(err, errno, "clear %s", tmp);
    int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK,
                    0600);
    if (fd < 0)
        return err_unable(err, errno, "create %s", tmp);
    const char *what = NULL;
    for (size_t off = 0; off < len && !what;) {
        ssize_t w = write(fd, buf + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            what = "write";
        else
            off += (size_t)w;
    }
    /* Owner before mode: a chown clears set-id bits, and the mode given
     * is the file's own. */
    if (!what && fchown(fd, uid, gid) < 0)
        what = "give the owner to";
    if (!what && fchmod(fd, mode) < 0)
        what = "set the mode of";
    if (!what && fsync(fd) < 0)
        what = "sync";
    int e = errno;
    close(fd);
    if (what) {
        unlinkat(dfd, tmp, 0);
        return err_unable(err, e, "%s %s", what, tmp);
    }
    return 0;
}

int skillsyaml_ensure(const char *path, const char *dir, uid_t uid, gid_t gid, bool dry,
                      struct err *err)
{
    char parent[4096], leaf[256], tmp[300];
    struct err why;
    const char *slash = strrchr(path, '/');
    struct stat st, now;
    char *buf = NULL, *out = NULL;
    size_t outlen = 0, line = 0;
    int rc = SKILLSYAML_ERROR, dfd = -1, fd = -1;

    if (err)
        err->msg[0] = '\0';
    if (path[0] != '/' || !slash || !slash[1] || strlen(slash + 1) >= sizeof(leaf) - 20 ||
        (size_t)(slash - path) >= sizeof(parent)) {
        err_set(err, "%s: not an absolute path to a file", path);
        return SKILLSYAML_ERROR;
    }
    snprintf(parent, sizeof(parent), "%.*s", slash == path ? 1 : (int)(slash - path), path);
    snprintf(leaf, sizeof(leaf), "%s", slash + 1);
    snprintf(tmp, sizeof(tmp), ".%s%s", leaf, SKILLSYAML_TMP_SUFFIX);
    dfd = safepath_open_abs(parent, O_DIRECTORY, 0, &why);
    if (dfd < 0) {
        err_set(err, "%s: unable to open its directory: %s", path, why.msg);
        return SKILLSYAML_ERROR;
    }
    fd = safepath_open(dfd, leaf, O_RDONLY, 0, &why);
    if (fd < 0 && errno == ENOENT) {
        /* No config yet: one holding the entry alone, the agent's; made
         * whole under the temporary name and renamed in only if no file
         * appeared meanwhile (that one then waits for the next run). */
        rc = SKILLSYAML_CREATED;
        if (dry)
            goto out;
        char text[4200], body[4400];
        scalar_text(dir, text, sizeof(text));
        snprintf(body, sizeof(body), "skills:\n  external_dirs:\n    - %s\n", text);
        if (write_tmp(dfd, tmp, body, strlen(body), uid, gid, 0600, &why) < 0 ||
            (tree_rename_noreplace(dfd, tmp, leaf) < 0 &&
             (err_unable(&why, errno, "rename %s into place", tmp),
              unlinkat(dfd, tmp, 0), 1))) {
            err_set(err, "%s: %s", path, why.msg);
            rc = SKILLSYAML_ERROR;
        } else {
            fsync(dfd);
        }
        goto out;
    }
    if (fd < 0) {
        err_set(err, "%s: unable to open: %s", path, why.msg);
        goto out;
    }
    if (fstat(fd, &st) < 0) {
        err_set(err, "%s: unable to stat: %s", path, strerror(errno));
        goto out;
    }
    if (st.st_nlink != 1) {
        err_set(err, "%s: has %lu hard links; left unchanged", path,
                (unsigned long)st.st_nlink);
        goto out;
    }
    if (st.st_size > SKILLSYAML_MAX_BYTES) {
        err_set(err, "%s: larger than %d bytes; left unchanged", path,
                SKILLSYAML_MAX_BYTES);
        goto out;
    }
    buf = malloc(SKILLSYAML_MAX_BYTES + 1);
    if (!buf) {
        err_set(err, "%s: out of memory", path);
        goto out;
    }
    size_t len = 0;
    for (;;) {
        ssize_t r = read(fd, buf + len, SKILLSYAML_MAX_BYTES + 1 - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            err_set(err, "%s: unable to read: %s", path, strerror(errno));
            goto out;
        }
        if (r == 0)
            break;
        len += (size_t)r;
        if (len > SKILLSYAML_MAX_BYTES) {
            err_set(err, "%s: larger than %d bytes; left unchanged", path,
                    SKILLSYAML_MAX_BYTES);
            goto out;
        }
    }
    rc = skillsyaml_edit(buf, len, dir, &out, &outlen, &line, &why);
    if (rc == SKILLSYAML_ERROR) {
        if (line)
            err_set(err, "%s:%zu: %s; left unchanged", path, line, why.msg);
        else
            err_set(err, "%s: %s; left unchanged", path, why.msg);
        goto out;
    }
    if (rc == SKILLSYAML_PRESENT || dry)
        goto out;
    if (write_tmp(dfd, tmp, out, outlen, st.st_uid, st.st_gid, st.st_mode & 07777, &why) < 0) {
        err_set(err, "%s: %s", path, why.msg);
        rc = SKILLSYAML_ERROR;
        goto out;
    }
    /* The file read must still be the one at the name: one replaced or
     * rewritten meanwhile is not overwritten with an edit of the old. */
    if (fstatat(dfd, leaf, &now, AT_SYMLINK_NOFOLLOW) < 0 || now.st_ino != st.st_ino ||
        now.st_dev != st.st_dev || fstat(fd, &now) < 0 || now.st_size != st.st_size ||
        now.st_mtim.tv_sec != st.st_mtim.tv_sec || now.st_mtim.tv_nsec != st.st_mtim.tv_nsec) {
        unlinkat(dfd, tmp, 0);
        err_set(err, "%s: changed while being edited; left for the next run", path);
        rc = SKILLSYAML_ERROR;
        goto out;
    }
    if (renameat(dfd, tmp, dfd, leaf) < 0) {
        err_set(err, "%s: unable to rename %s into place: %s", path, tmp,
                strerror(errno));
        unlinkat(dfd, tmp, 0);
        rc = SKILLSYAML_ERROR;
        goto out;
    }
    fsync(dfd);
out:
    free(buf);
    free(out);
    if (fd >= 0)
        close(fd);
    if (dfd >= 0)
        close(dfd);
    return rc;
}
