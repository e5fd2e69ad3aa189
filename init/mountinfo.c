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
            if (field == 4)
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
    if (!e->target || !e->opts || !e->fstype || !e->source)
        return false;
    unescape((char *)e->target);
    unescape((char *)e->source);
    return true;
}

int mountinfo_each(bool (*fn)(const struct mountinfo_entry *e, void *ctx), void *ctx)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    char line[4096];

    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f)) {
        if (!strchr(line, '\n') && !feof(f)) {
            int ch;
            while ((ch = fgetc(f)) != EOF && ch != '\n')
                ;
            continue;
        }
        struct mountinfo_entry e;
        if (mountinfo_parse(line, &e) && !fn(&e, ctx))
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
