#include "seed.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cJSON.h>

#include "config.h"
#include "events.h"
#include "hearth.h"
#include "log.h"
#include "tree.h"

static cJSON *last_report;

static const char *const result_names[] = {"seeded", "already", "skipped", "failed"};

/* mkdir -p, each missing level 0755. */
static int make_dirs(const char *path)
{
    char buf[4096];
    size_t n = strlen(path);

    if (n == 0 || n >= sizeof(buf)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(buf, path, n + 1);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(buf, 0755) < 0 && errno != EEXIST)
                return -1;
            *p = c;
            if (!c)
                break;
        }
    }
    return 0;
}

static bool dir_is_empty(int fd)
{
    int d2 = dup(fd);
    if (d2 < 0)
        return false;
    DIR *d = fdopendir(d2);
    if (!d) {
        close(d2);
        return false;
    }
    struct dirent *de;
    bool empty = true;
    while ((de = readdir(d))) {
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
            strcmp(de->d_name, "lost+found")) {
            empty = false;
            break;
        }
    }
    closedir(d);
    return empty;
}

static int fsync_dir(int fd)
{
    return fsync(fd) < 0 && errno != EINVAL ? -1 : 0;
}

enum seed_result seed_one(const char *target, const char *from, const char *unless, char *err,
                          size_t errlen)
{
    struct stat s;
    struct tree_stats st;

    err[0] = '\0';
    if (stat(from, &s) < 0) {
        snprintf(err, errlen, "unable to use template %s: %s", from, strerror(errno));
        return SEED_FAILED;
    }
    if (!S_ISDIR(s.st_mode)) {
        snprintf(err, errlen, "unable to use template %s: not a directory", from);
        return SEED_FAILED;
    }
    if (make_dirs(target) < 0) {
        snprintf(err, errlen, "unable to create %s: %s", target, strerror(errno));
        return SEED_FAILED;
    }
    int fd = open(target, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "unable to open %s: %s", target, strerror(errno));
        return SEED_FAILED;
    }
    bool interrupted = fstatat(fd, SEED_MARKER, &s, AT_SYMLINK_NOFOLLOW) == 0;
    if (!interrupted) {
        bool done = unless ? fstatat(fd, unless, &s, AT_SYMLINK_NOFOLLOW) == 0 : !dir_is_empty(fd);
        if (done) {
            close(fd);
            return SEED_ALREADY;
        }
        int m = openat(fd, SEED_MARKER, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        if (m < 0) {
            snprintf(err, errlen, "unable to write %s/%s: %s", target, SEED_MARKER,
                     strerror(errno));
            close(fd);
            return SEED_FAILED;
        }
        close(m);
        fsync_dir(fd);
    } else {
        log_warn("seed %s: an earlier seed was interrupted; completing it", target);
    }
    /* unless is the "seeded" flag: copied last, it only exists once the
     * rest of the template is in place. */
    const char *last[] = {unless, NULL};
    if (tree_copy(from, target, unless ? last : NULL, &st, err, errlen) < 0) {
        close(fd);
        return SEED_FAILED;
    }
    fsync_dir(fd);
    if (unlinkat(fd, SEED_MARKER, 0) < 0 && errno != ENOENT) {
        snprintf(err, errlen, "unable to remove %s/%s: %s", target, SEED_MARKER, strerror(errno));
        close(fd);
        return SEED_FAILED;
    }
    fsync_dir(fd);
    close(fd);
    log_info("seeded %s from %s: %lu files, %lu dirs, %lu links, %lu kept", target, from, st.files,
             st.dirs, st.links, st.kept);
    return SEED_DONE;
}

int seed_apply(const struct config *cfg, const char *(*skip)(const char *path))
{
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(cfg->json, "seed"), *e;
    cJSON *report = cJSON_CreateArray();
    char err[512];
    int failures = 0;

    cJSON_ArrayForEach(e, list) {
        const char *target = cJSON_GetObjectItemCaseSensitive(e, "target")->valuestring;
        const char *from = cJSON_GetObjectItemCaseSensitive(e, "from")->valuestring;
        const cJSON *u = cJSON_GetObjectItemCaseSensitive(e, "unless");
        const char *unless = cJSON_IsString(u) ? u->valuestring : NULL;
        const char *failed_mount = skip ? skip(target) : NULL;
        int64_t t0 = mono_ms();
        enum seed_result r;

        if (failed_mount) {
            snprintf(err, sizeof(err), "mount %s failed", failed_mount);
            r = SEED_SKIPPED;
        } else {
            r = seed_one(target, from, unless, err, sizeof(err));
        }
        if (r == SEED_FAILED) {
            failures++;
            log_error("seed %s: %s", target, err);
        } else if (r == SEED_SKIPPED) {
            log_warn("seed %s skipped: %s", target, err);
        }
        cJSON *o = cJSON_CreateObject();
        if (o) {
            cJSON_AddStringToObject(o, "target", target);
            cJSON_AddStringToObject(o, "from", from);
            cJSON_AddStringToObject(o, "result", result_names[r]);
            if (err[0])
                cJSON_AddStringToObject(o, "error", err);
            cJSON_AddNumberToObject(o, "ms", (double)(mono_ms() - t0));
            if (r != SEED_ALREADY)
                events_emit(r == SEED_DONE ? "seed.done" : "seed.failed", cJSON_Duplicate(o, 1));
            if (report)
                cJSON_AddItemToArray(report, o);
            else
                cJSON_Delete(o);
        }
    }
    cJSON_Delete(last_report);
    last_report = report;
    return failures;
}

cJSON *seed_to_json(void)
{
    return last_report ? cJSON_Duplicate(last_report, 1) : cJSON_CreateArray();
}
