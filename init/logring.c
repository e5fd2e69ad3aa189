#include "logring.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cJSON.h>

#include "hearth.h"
#include "log.h"
#include "safepath.h"
#include "utf8.h"

const char *logring_stream_name(enum log_stream s) { return s == STREAM_STDERR ? "stderr" : "stdout"; }

/* The log's directory, opened fresh each time without following a link
 * anywhere on the configured path: the agent may have swapped it for a
 * link since the last open. Levels that are missing (a fresh home has no
 * logs directory yet) are made, 0750 and the service's own as the file
 * is; one that is a link, a FIFO or a file is an error, never followed
 * and never waited on (safepath). */
static int dir_open(struct logring *r)
{
    char dir[4200], why[128];
    const char *slash = strrchr(r->file, '/');
    size_t n = slash ? (size_t)(slash - r->file) : 0;

    snprintf(dir, sizeof(dir), "%.*s", (int)(n ? n : 1), n ? r->file : "/");
    int fd = safepath_open_abs(dir, O_DIRECTORY, 0, why, sizeof(why));
    if (fd < 0 && errno == ENOENT)
        fd = safepath_mkdir_p(dir, 0750, r->uid, r->gid, why, sizeof(why));
    if (fd < 0)
        log_warn("logring: unable to open log file %s: %s: %s", r->file, dir, why);
    return fd;
}

static const char *leaf(const struct logring *r)
{
    const char *slash = strrchr(r->file, '/');
    return slash ? slash + 1 : r->file;
}

/* Created as the service's own (uid, gid) when it is not root; an
 * existing file must be a regular file with no other hard link, owned by
 * the service or root (safepath_open_owned): never a FIFO (hearth would
 * block), a link or a hard link to someone else's file. */
static void file_open(struct logring *r)
{
    char why[128];
    int dfd = dir_open(r);

    if (dfd < 0)
        return;
    r->fd = safepath_open_owned(dfd, leaf(r), O_WRONLY | O_CREAT | O_APPEND, 0640, r->uid, r->gid,
                                why, sizeof(why));
    close(dfd);
    if (r->fd < 0) {
        log_warn("logring: unable to open log file %s: %s", r->file, why);
        return;
    }
    off_t end = lseek(r->fd, 0, SEEK_END);
    r->file_size = end > 0 ? end : 0;
}

/* file -> file.1 -> ... -> file.keep; the oldest falls off. Renames go by
 * the directory's fd and never follow a link (renameat moves the link
 * itself). When the file cannot be moved aside (the agent made file.1 a
 * directory, say), the open fd is truncated instead: the size bound holds
 * and nothing is truncated by name. */
static void file_rotate(struct logring *r)
{
    char from[4200], to[4200];
    const char *name = leaf(r);
    int dfd = r->keep > 0 ? dir_open(r) : -1;

    if (dfd >= 0) {
        for (int i = r->keep - 1; i >= 1; i--) {
            snprintf(from, sizeof(from), "%s.%d", name, i);
            snprintf(to, sizeof(to), "%s.%d", name, i + 1);
            if (renameat(dfd, from, dfd, to) < 0 && errno != ENOENT)
                log_warn("logring: unable to rotate %s.%d: %s", r->file, i, strerror(errno));
        }
        snprintf(to, sizeof(to), "%s.1", name);
        if (renameat(dfd, name, dfd, to) == 0) {
            close(dfd);
            if (r->fd >= 0)
                close(r->fd);
            r->fd = -1;
            file_open(r);
            return;
        }
        if (errno == ENOENT) {
            /* The agent removed the file: writing on to the unlinked
             * inode would lose every line; a fresh one is made instead. */
            close(dfd);
            if (r->fd >= 0)
                close(r->fd);
            r->fd = -1;
            file_open(r);
            r->file_size = 0;
            return;
        }
        log_warn("logring: unable to rotate %s: %s; truncating it instead", r->file, strerror(errno));
        close(dfd);
    }
    if (r->fd >= 0 && ftruncate(r->fd, 0) < 0)
        log_warn("logring: unable to truncate %s: %s", r->file, strerror(errno));
    r->file_size = 0;
}

void logring_init(struct logring *r, size_t lines, const char *file, int64_t max_bytes, int keep,
                  uid_t uid, gid_t gid)
{
    memset(r, 0, sizeof(*r));
    r->cap = lines ? lines : 1;
    r->lines = calloc(r->cap, sizeof(*r->lines));
    if (!r->lines)
        r->cap = 0;
    r->fd = -1;
    if (file) {
        r->file = strdup(file);
        r->max_bytes = max_bytes;
        r->keep = keep;
        r->uid = uid;
        r->gid = gid;
    }
}

/* Not at init: the config loads before the mounts, and a log on the
 * agent's home mount opened then would be written to the directory the
 * mount hides. Each start opens it afresh, so a remount after a resume is
 * followed as well. */
void logring_open_file(struct logring *r)
{
    if (!r->file)
        return;
    if (r->fd >= 0) {
        close(r->fd);
        r->fd = -1;
    }
    file_open(r);
}

void logring_free(struct logring *r)
{
    for (size_t i = 0; i < r->cap; i++)
        free(r->lines[i].text);
    free(r->lines);
    if (r->fd >= 0)
        close(r->fd);
    free(r->file);
    memset(r, 0, sizeof(*r));
    r->fd = -1;
}

static void drop_oldest(struct logring *r)
{
    size_t oldest = (r->head + r->cap - r->count) % r->cap;
    struct logline *l = &r->lines[oldest];
    r->bytes -= l->len;
    free(l->text);
    l->text = NULL;
    l->len = 0;
    r->count--;
}

const struct logline *logring_add(struct logring *r, enum log_stream s, const char *text, size_t len)
{
    if (len > LOGRING_LINE_MAX)
        len = LOGRING_LINE_MAX;
    r->total++;
    r->last_mono_ms = mono_ms();
    if (r->fd >= 0) {
        char stamp[48];
        int n = timebase_utc_text(wall_ms(), false, stamp, sizeof(stamp) - 1);
        stamp[n++] = ' ';
        /* One write per line: the file is on local or shared disk and
         * the loop pays for each syscall. */
        struct iovec iov[3] = {{stamp, (size_t)n}, {(void *)text, len}, {"\n", 1}};
        ssize_t w = writev(r->fd, iov, 3);
        if (w < 0) {
            /* Once per spell: a chatty service on a full disk would
             * otherwise put a line of hearth's own log beside each of
             * its lines, for as long as the disk stays full. */
            if (r->unwritten++ == 0)
                log_warn("logring: unable to write %s: %s; its lines go to the ring only "
                         "until it can be written again", r->file, strerror(errno));
        } else {
            if (r->unwritten)
                log_info("logring: %s written again; %llu lines were not written to it", r->file,
                         (unsigned long long)r->unwritten);
            r->unwritten = 0;
            r->file_size += w;
        }
        if (r->max_bytes > 0 && r->file_size >= r->max_bytes)
            file_rotate(r);
    }
    if (!r->cap)
        return NULL;
    while (r->count > 0 && (r->count == r->cap || r->bytes + len > LOGRING_MAX_BYTES))
        drop_oldest(r);
    struct logline *l = &r->lines[r->head];
    free(l->text);
    l->text = malloc(len + 1);
    if (!l->text) {
        l->len = 0;
        return NULL;
    }
    memcpy(l->text, text, len);
    l->text[len] = 0;
    l->len = (uint32_t)len;
    l->stream = (uint8_t)s;
    l->mono_ms = mono_ms();
    l->wall_ms = wall_ms();
    r->bytes += len;
    r->head = (r->head + 1) % r->cap;
    r->count++;
    return l;
}

cJSON *logline_json(const struct logline *l, const char *service)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    if (service)
        cJSON_AddStringToObject(o, "name", service);
    cJSON_AddNumberToObject(o, "t_ms", (double)l->mono_ms);
    cJSON_AddNumberToObject(o, "time_ms", (double)l->wall_ms);
    cJSON_AddStringToObject(o, "stream", logring_stream_name((enum log_stream)l->stream));
    /* Output may be any bytes; JSON needs valid UTF-8: each byte that
     * breaks it becomes U+FFFD. */
    char *safe = malloc((size_t)l->len * 3 + 1);
    if (!safe) {
        cJSON_Delete(o);
        return NULL;
    }
    size_t k = 0, i = 0;
    while (i < l->len) {
        long bad = utf8_invalid_at(l->text + i, l->len - i);
        size_t good = bad < 0 ? l->len - i : (size_t)bad;
        memcpy(safe + k, l->text + i, good);
        k += good;
        i += good;
        if (bad >= 0) {
            memcpy(safe + k, "\xef\xbf\xbd", 3);
            k += 3;
            i++;
        }
    }
    safe[k] = 0;
    cJSON_AddStringToObject(o, "line", safe);
    free(safe);
    return o;
}

const struct logline *logring_back(const struct logring *r, size_t k)
{
    if (!r->cap || k >= r->count)
        return NULL;
    return &r->lines[(r->head + r->cap - 1 - k) % r->cap];
}

cJSON *logring_tail_json(const struct logring *r, size_t n)
{
    cJSON *arr = cJSON_CreateArray();
    if (!arr || !r->cap)
        return arr;
    if (n > r->count)
        n = r->count;
    for (size_t i = 0; i < n; i++) {
        size_t idx = (r->head + r->cap - n + i) % r->cap;
        cJSON *o = logline_json(&r->lines[idx], NULL);
        if (o)
            cJSON_AddItemToArray(arr, o);
    }
    return arr;
}
