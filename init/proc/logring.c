#include "logring.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>

#include "err.h"
#include "hearth.h"
#include "log.h"
#include "safepath.h"
#include "utf8.h"

const char *logring_stream_name(enum log_stream s) { return s == STREAM_STDERR ? "stderr" : "stdout"; }

/* The file stopped taking lines. Said once when it starts (and again only
 * when the reason changes), in hearth's log and, through file_news, as an
 * event: a service writing on into a full disk must not make hearth log a
 * line for each of its own. */
static void file_failing(struct logring *r, bool on_open, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void file_failing(struct logring *r, bool on_open, const char *fmt, ...)
{
    char e[sizeof(r->file_error)];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(e, sizeof(e), fmt, ap);
    va_end(ap);
    if (!r->file_error[0])
        r->file_news = true;
    if (strcmp(e, r->file_error) != 0)
        log_warn("logring: %s", e);
    memcpy(r->file_error, e, sizeof(e));
    r->open_failed = on_open;
}

/* Lines reach the file again. */
static void file_writing(struct logring *r)
{
    if (!r->file_error[0])
        return;
    log_info("logring: %s is written again (%llu line%s lost so far)", r->file,
             (unsigned long long)r->file_lost, r->file_lost == 1 ? "" : "s");
    r->file_error[0] = 0;
    r->open_failed = false;
    r->file_news = true;
}

bool logring_file_news(struct logring *r)
{
    bool n = r->file_news;
    r->file_news = false;
    return n;
}

/* The log's directory, opened fresh each time without following a link
 * anywhere on the configured path: the agent may have swapped it for a
 * link since the last open. Levels that are missing (a fresh home has no
 * logs directory yet) are made, 0750 and the service's own as the file
 * is; one that is a link, a FIFO or a file is an error, never followed
 * and never waited on (safepath). */
static int dir_open(struct logring *r, struct err *err)
{
    char dir[4200];
    struct err e;
    const char *slash = strrchr(r->file, '/');
    size_t n = slash ? (size_t)(slash - r->file) : 0;

    snprintf(dir, sizeof(dir), "%.*s", (int)(n ? n : 1), n ? r->file : "/");
    int fd = safepath_open_abs(dir, O_DIRECTORY, 0, &e);
    if (fd < 0 && errno == ENOENT)
        fd = safepath_mkdir_p(dir, 0750, r->uid, r->gid, &e);
    if (fd < 0)
        err_set(err, "%s: %s", dir, e.msg);
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
    struct err why;
    int dfd = dir_open(r, &why);

    if (dfd < 0) {
        file_failing(r, true, "unable to open log file %s: %s", r->file, why.msg);
        return;
    }
    r->fd = safepath_open_owned(dfd, leaf(r), O_WRONLY | O_CREAT | O_APPEND, 0640, r->uid, r->gid,
                                &why);
    close(dfd);
    if (r->fd < 0) {
        file_failing(r, true, "unable to open log file %s: %s", r->file, why.msg);
        return;
    }
    /* An open that failed before is over; a write that failed is over
     * only once a line goes in. */
    if (r->open_failed)
        file_writing(r);
    off_t end = lseek(r->fd, 0, SEEK_END);
    r->file_size = end > 0 ? end : 0;
    /* A line cut short before a restart is still ended in the same
     * file; a new or emptied one has nothing to end. */
    if (end <= 0)
        r->torn = false;
}

/* file -> file.1 -> ... -> file.keep; the oldest falls off. Renames go by
 * the directory's fd and never follow a link (renameat moves the link
 * itself). When the file cannot be moved aside (the agent made file.1 a
 * directory, say), the open fd is truncated instead: the size bound holds
 * and nothing is truncated by name. */
static void file_rotate(struct logring *r)
{
    char from[4200], to[4200];
    struct err why;
    const char *name = leaf(r);
    int dfd = r->keep > 0 ? dir_open(r, &why) : -1;

    if (r->keep > 0 && dfd < 0)
        log_warn("logring: unable to rotate %s: %s; truncating it instead", r->file, why.msg);

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

/* One line into the file, whole: a short write (the disk filled within
 * it) is carried on until the kernel says why it stops, the part written
 * is ended by a newline before the next line, and a line that does not
 * go in is counted. */
static void file_line(struct logring *r, const char *text, size_t len)
{
    static char buf[LOGRING_LINE_MAX + 64];
    size_t n = 0;

    if (r->fd < 0) {
        r->file_lost++; /* the open failed: file_error says why */
        return;
    }
    if (r->torn)
        buf[n++] = '\n';
    n += (size_t)timebase_utc_text(wall_ms(), false, buf + n, 47);
    buf[n++] = ' ';
    memcpy(buf + n, text, len);
    n += len;
    buf[n++] = '\n';
    /* One write per line as a rule: the file is on local or shared disk
     * and the loop pays for each syscall. */
    size_t off = 0;
    while (off < n) {
        ssize_t w = write(r->fd, buf + off, n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = w < 0 ? errno : EIO;
            if (off > 0)
                r->torn = buf[off - 1] != '\n';
            r->file_size += (int64_t)off;
            r->file_lost++;
            file_failing(r, false, "unable to write %s: %s", r->file, strerror(e));
            return;
        }
        off += (size_t)w;
    }
    r->torn = false;
    r->file_size += (int64_t)n;
    file_writing(r);
    if (r->max_bytes > 0 && r->file_size >= r->max_bytes)
        file_rotate(r);
}

const struct logline *logring_add(struct logring *r, enum log_stream s, const char *text, size_t len)
{
    if (len > LOGRING_LINE_MAX)
        len = LOGRING_LINE_MAX;
    r->total++;
    r->last_mono_ms = mono_ms();
    if (r->file)
        file_line(r, text, len);
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
