#include "resumefile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cJSON.h>

#include "config.h"
#include "err.h"
#include "hearth.h"
#include "jsonout.h"
#include "log.h"
#include "safepath.h"

#define TMP_NAME ".resume.tmp"

static struct {
    char path[256], dir[256], leaf[256];
    int64_t ref_offset_ms;  /* wall - mono at the last reference */
    int64_t frozen_wall_ms; /* 0 = not frozen */
} R;

const char *resumefile_path(void) { return R.path; }
const char *resumefile_dir(void) { return R.dir; }

void resumefile_reference(void) { R.ref_offset_ms = wall_ms() - mono_ms(); }

void resumefile_frozen(bool on) { R.frozen_wall_ms = on ? wall_ms() : 0; }

int64_t resumefile_paused_ms(bool was_frozen, int64_t frozen_wall_ms, int64_t wall_now_ms,
                             int64_t ref_offset_ms, int64_t offset_now_ms)
{
    int64_t p = was_frozen && frozen_wall_ms > 0 ? wall_now_ms - frozen_wall_ms
                                                  : offset_now_ms - ref_offset_ms;
    return p > 0 ? p : 0;
}

/* Writes text as the file: a fresh temporary name in the directory, then
 * renamed over the old file by directory fd, so a reader sees the old
 * file or the new one, never a part. /run is a tmpfs: no fsync. */
static int replace(const char *text, size_t len, struct err *err)
{
    int dfd = safepath_mkdir_p(R.dir, 0755, 0, 0, err);
    if (dfd < 0)
        return -1;
    int rc = -1;
    if (unlinkat(dfd, TMP_NAME, 0) < 0 && errno != ENOENT) {
        err_set(err, "unlink %s: %s", TMP_NAME, strerror(errno));
        goto out;
    }
    int fd = safepath_open(dfd, TMP_NAME, O_WRONLY | O_CREAT | O_EXCL, 0644, err);
    if (fd < 0)
        goto out;
    ssize_t w = write(fd, text, len);
    if (w != (ssize_t)len) {
        err_set(err, "write: %s", w < 0 ? strerror(errno) : "short write");
        close(fd);
        unlinkat(dfd, TMP_NAME, 0);
        goto out;
    }
    /* The mode on the fd: the umask must not make it unreadable. */
    if (fchmod(fd, 0644) < 0 || close(fd) < 0) {
        err_set(err, "fchmod/close: %s", strerror(errno));
        unlinkat(dfd, TMP_NAME, 0);
        goto out;
    }
    if (renameat(dfd, TMP_NAME, dfd, R.leaf) < 0) {
        err_set(err, "rename: %s", strerror(errno));
        unlinkat(dfd, TMP_NAME, 0);
        goto out;
    }
    rc = 0;
out:
    close(dfd);
    return rc;
}

static cJSON *write_generation(uint64_t generation, const char *cause, bool stepped,
                               int64_t paused_ms)
{
    char tbuf[40], *text;
    struct err why;
    int64_t now = wall_ms();
    cJSON *f = cJSON_CreateObject();

    if (!f)
        return NULL;
    timebase_utc_text(now, true, tbuf, sizeof(tbuf));
    cJSON_AddNumberToObject(f, "generation", (double)generation);
    cJSON_AddStringToObject(f, "cause", cause);
    cJSON_AddStringToObject(f, "time", tbuf);
    cJSON_AddNumberToObject(f, "wall_ms", (double)now);
    cJSON_AddNumberToObject(f, "paused_ms", (double)paused_ms);
    cJSON_AddBoolToObject(f, "clock_stepped", stepped);
    text = jsonout_print(f);
    if (!text) {
        cJSON_Delete(f);
        return NULL;
    }
    size_t n = strlen(text);
    char line[1024];
    int rc = -1;
    if (n + 1 < sizeof(line)) {
        memcpy(line, text, n);
        line[n++] = '\n';
        rc = replace(line, n, &why);
    } else {
        err_set(&why, "content too long");
    }
    cJSON_free(text);
    cJSON_AddStringToObject(f, "path", R.path);
    if (rc < 0) {
        log_warn("resumefile: unable to write %s: %s", R.path, why.msg);
        cJSON_AddStringToObject(f, "error", why.msg);
    }
    return f;
}

void resumefile_setup(const struct config *cfg)
{
    const char *v = cfg ? cfg->resume_file : NULL;
    /* Only a VM's /run is surely hearth's own tmpfs: a container's or a
     * supervisor's may be its host's, shared with other instances, so
     * there the file is written only where the config says. */
    const char *p = v ? v : H.mode == MODE_VM ? CONFIG_RESUME_FILE : "";

    resumefile_reference();
    R.path[0] = R.dir[0] = R.leaf[0] = 0;
    if (!p[0] || strlen(p) >= sizeof(R.path))
        return;
    const char *slash = strrchr(p, '/');
    if (!slash || !slash[1] || slash == p)
        return; /* the schema refuses these; a file right under / is not kept */
    snprintf(R.path, sizeof(R.path), "%s", p);
    snprintf(R.dir, sizeof(R.dir), "%.*s", (int)(slash - p), p);
    snprintf(R.leaf, sizeof(R.leaf), "%s", slash + 1);
    cJSON_Delete(write_generation(0, "boot", false, 0));
}

cJSON *resumefile_write(uint64_t generation, const char *cause, bool clock_stepped,
                        bool was_frozen)
{
    if (!R.path[0])
        return NULL;
    int64_t now = wall_ms(), offset = now - mono_ms();
    int64_t paused = resumefile_paused_ms(was_frozen, R.frozen_wall_ms, now, R.ref_offset_ms,
                                          offset);
    cJSON *r = write_generation(generation, cause, clock_stepped, paused);
    resumefile_reference();
    return r;
}
