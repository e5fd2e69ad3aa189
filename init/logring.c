#include "logring.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cJSON.h>

#include "hearth.h"
#include "log.h"
#include "utf8.h"

const char *logring_stream_name(enum log_stream s) { return s == STREAM_STDERR ? "stderr" : "stdout"; }

static void file_open(struct logring *r)
{
    r->fd = open(r->file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY, 0640);
    if (r->fd < 0) {
        log_warn("unable to open log file %s: %s", r->file, strerror(errno));
        return;
    }
    off_t end = lseek(r->fd, 0, SEEK_END);
    r->file_size = end > 0 ? end : 0;
}

/* file -> file.1 -> ... -> file.keep; the oldest falls off. */
static void file_rotate(struct logring *r)
{
    char from[4200], to[4200];

    if (r->fd >= 0)
        close(r->fd);
    r->fd = -1;
    if (r->keep == 0) {
        if (truncate(r->file, 0) < 0)
            log_warn("unable to truncate %s: %s", r->file, strerror(errno));
    } else {
        for (int i = r->keep - 1; i >= 1; i--) {
            snprintf(from, sizeof(from), "%s.%d", r->file, i);
            snprintf(to, sizeof(to), "%s.%d", r->file, i + 1);
            rename(from, to);
        }
        snprintf(to, sizeof(to), "%s.1", r->file);
        if (rename(r->file, to) < 0 && errno != ENOENT)
            log_warn("unable to rotate %s: %s", r->file, strerror(errno));
    }
    file_open(r);
}

void logring_init(struct logring *r, size_t lines, const char *file, int64_t max_bytes, int keep)
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
        if (r->file)
            file_open(r);
    }
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
        struct timespec ts;
        struct tm tm;
        clock_gettime(CLOCK_REALTIME, &ts);
        gmtime_r(&ts.tv_sec, &tm);
        /* snprintf, not strftime: strftime drags the time-zone code into a
         * static binary for a stamp that is always UTC. */
        int n = snprintf(stamp, sizeof(stamp), "%04d-%02d-%02dT%02d:%02d:%02dZ ", tm.tm_year + 1900,
                         tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
        /* One write per line: the file is on local or shared disk and
         * the loop pays for each syscall. */
        struct iovec iov[3] = {{stamp, (size_t)n}, {(void *)text, len}, {"\n", 1}};
        ssize_t w = writev(r->fd, iov, 3);
        if (w < 0)
            log_warn("unable to write %s: %s", r->file, strerror(errno));
        else
            r->file_size += w;
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
