/* What envd's routes share (envd_ops.c, envd_watch.c): its path rule for
 * the call's user, and hearth's files.stat result as envd's EntryInfo. */
#include "envd_role.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "timebase.h"

/* ---------------- paths ---------------- */

/* envd's rule: "~" is the user's home, a relative path is beneath it;
 * then "." and ".." are folded lexically (hearth refuses ".."). */
int entry_expand_path(const struct conn *c, const char *in, char *out, size_t cap)
{
    char tmp[4096 + 300];
    if (!in[0])
        snprintf(tmp, sizeof(tmp), "%s", c->user.home);
    else if (in[0] == '~' && (in[1] == 0 || in[1] == '/'))
        snprintf(tmp, sizeof(tmp), "%s/%s", c->user.home, in + 1);
    else if (in[0] != '/')
        snprintf(tmp, sizeof(tmp), "%s/%s", c->user.home, in);
    else
        snprintf(tmp, sizeof(tmp), "%s", in);
    size_t o = 0;
    out[o++] = '/';
    for (char *p = tmp, *save = NULL, *seg; (seg = strtok_r(p, "/", &save)); p = NULL) {
        if (strcmp(seg, ".") == 0)
            continue;
        if (strcmp(seg, "..") == 0) {
            while (o > 1 && out[o - 1] != '/')
                o--;
            if (o > 1)
                o--;
            continue;
        }
        size_t n = strlen(seg);
        if (o + n + 2 >= cap)
            return -1;
        if (o > 1)
            out[o++] = '/';
        memcpy(out + o, seg, n);
        o += n;
    }
    out[o] = 0;
    return 0;
}

const char *entry_base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s && s[1] ? s + 1 : p;
}

/* ---------------- EntryInfo ---------------- */

cJSON *entry_json(const cJSON *st, const char *path)
{
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(st, "type");
    const char *t = cJSON_IsString(type) ? type->valuestring : "";
    const char *ft = strcmp(t, "file") == 0      ? "FILE_TYPE_FILE"
                     : strcmp(t, "dir") == 0     ? "FILE_TYPE_DIRECTORY"
                     : strcmp(t, "symlink") == 0 ? "FILE_TYPE_SYMLINK"
                                                 : "FILE_TYPE_UNSPECIFIED";
    const cJSON *mode = cJSON_GetObjectItemCaseSensitive(st, "mode");
    unsigned perm = cJSON_IsString(mode) ? (unsigned)strtoul(mode->valuestring, NULL, 8) : 0;
    /* Go's FileMode.String(), as envd reports it. */
    char perms[16];
    char k = strcmp(t, "dir") == 0 ? 'd' : strcmp(t, "symlink") == 0 ? 'L'
             : strcmp(t, "fifo") == 0 ? 'p' : strcmp(t, "socket") == 0 ? 'S'
             : strcmp(t, "block") == 0 ? 'D' : strcmp(t, "char") == 0 ? 'c' : '-';
    perms[0] = k;
    for (int i = 0; i < 9; i++)
        perms[1 + i] = (perm >> (8 - i)) & 1 ? "rwx"[i % 3] : '-';
    perms[10] = 0;
    cJSON *e = cJSON_CreateObject();
    if (!e)
        return NULL;
    cJSON_AddStringToObject(e, "name", entry_base_name(path));
    cJSON_AddStringToObject(e, "type", ft);
    cJSON_AddStringToObject(e, "path", path);
    const cJSON *size = cJSON_GetObjectItemCaseSensitive(st, "size");
    char num[32];
    snprintf(num, sizeof(num), "%.0f", cJSON_IsNumber(size) ? size->valuedouble : 0.0);
    cJSON_AddStringToObject(e, "size", num);
    cJSON_AddNumberToObject(e, "mode", perm & 0777);
    cJSON_AddStringToObject(e, "permissions", perms);
    const cJSON *uid = cJSON_GetObjectItemCaseSensitive(st, "uid");
    const cJSON *gid = cJSON_GetObjectItemCaseSensitive(st, "gid");
    char nb[24];
    cJSON_AddStringToObject(e, "owner", link_uid_name(cJSON_IsNumber(uid) ? (uid_t)uid->valuedouble : 0,
                                                      nb, sizeof(nb)));
    cJSON_AddStringToObject(e, "group", link_gid_name(cJSON_IsNumber(gid) ? (gid_t)gid->valuedouble : 0,
                                                      nb, sizeof(nb)));
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(st, "mtime_ms");
    if (cJSON_IsNumber(mt)) {
        char ts[48];
        if (timebase_utc_text((int64_t)mt->valuedouble, true, ts, sizeof(ts)) > 1)
            cJSON_AddStringToObject(e, "modifiedTime", ts);
    }
    const cJSON *target = cJSON_GetObjectItemCaseSensitive(st, "target");
    if (cJSON_IsString(target))
        cJSON_AddStringToObject(e, "symlinkTarget", target->valuestring);
    return e;
}
