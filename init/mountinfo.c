#include "mountinfo.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* Undoes the octal escapes (\040) mountinfo uses for spaces and such. */
static void unescape(char *s)
{
    char *o = s;
    for (; *s; s++) {
        if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
            s[3] >= '0' && s[3] <= '7') {
            *o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
            s += 3;
        } else {
            *o++ = *s;
        }
    }
    *o = '\0';
}

/* Fields: id parent major:minor root target opts [optional...] - fstype
 * source superopts. The optional fields end at a lone "-". */
bool mountinfo_parse(char *line, struct mountinfo_entry *e)
{
    char *save, *tok;
    int field = 0;
    bool after_sep = false;

    memset(e, 0, sizeof(*e));
    for (tok = strtok_r(line, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save)) {
        if (!after_sep) {
            if (field == 3)
                e->root = tok;
            else if (field == 4)
                e->target = tok;
            else if (field == 5)
                e->opts = tok;
            else if (field > 5 && strcmp(tok, "-") == 0) {
                after_sep = true;
                field = 0;
                continue;
            }
        } else {
            if (field == 0)
                e->fstype = tok;
            else if (field == 1)
                e->source = tok;
        }
        field++;
    }
    if (!e->root || !e->target || !e->opts || !e->fstype || !e->source)
        return false;
    unescape((char *)e->root);
    unescape((char *)e->target);
    unescape((char *)e->source);
    return true;
}

/* Whether the head of an overlong line holds every field up to the
 * source whole: the separator, then the type and the source each ended by
 * a space. Paths escape their spaces (\040), so " - " is the separator. */
static bool head_complete(const char *line)
{
    const char *sep = strstr(line, " - ");
    if (!sep)
        return false;
    const char *end_type = strchr(sep + 3, ' ');
    return end_type && strchr(end_type + 1, ' ');
}

int mountinfo_scan(bool (*fn)(const struct mountinfo_entry *e, void *ctx), void *ctx,
                   unsigned *skipped)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    char line[4096];

    if (skipped)
        *skipped = 0;
    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f)) {
        if (!strchr(line, '\n') && !feof(f)) {
            int ch;
            while ((ch = fgetc(f)) != EOF && ch != '\n')
                ;
            if (!head_complete(line)) {
                if (skipped)
                    (*skipped)++;
                continue;
            }
        }
        struct mountinfo_entry e;
        if (!mountinfo_parse(line, &e)) {
            if (skipped)
                (*skipped)++;
            continue;
        }
        if (!fn(&e, ctx))
            break;
    }
    int err = ferror(f) ? EIO : 0;
    fclose(f);
    if (err) {
        errno = err;
        return -1;
    }
    return 0;
}

int mountinfo_each(bool (*fn)(const struct mountinfo_entry *e, void *ctx), void *ctx)
{
    return mountinfo_scan(fn, ctx, NULL);
}
