/* logring: a service's captured output. Lines from its stdout and stderr
 * pipes go into a ring bounded in lines and bytes (a service that floods
 * its output never grows hearth's memory) and, optionally, into a file
 * rotated by size. */
#ifndef HEARTH_LOGRING_H
#define HEARTH_LOGRING_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct cJSON;

#define LOGRING_LINE_MAX 4096          /* longer lines are split */
#define LOGRING_MAX_BYTES (512 * 1024) /* per service, whatever the line count */

enum log_stream { STREAM_STDOUT, STREAM_STDERR };

struct logline {
    int64_t mono_ms;
    int64_t wall_ms;
    uint8_t stream;
    uint32_t len;
    char *text;
};

struct logring {
    struct logline *lines;
    size_t cap, head, count, bytes;
    uint64_t total;             /* lines ever added */
    int64_t last_mono_ms;       /* last output, for idle detection */
    /* optional file */
    char *file;
    int fd;
    int64_t max_bytes;          /* 0 = never rotate */
    int keep;
    int64_t file_size;
    uid_t uid;                  /* owner of a file hearth creates */
    gid_t gid;
    /* Lines the file did not take since its writes began to fail (a
     * full disk): reported when they begin and when they end, not once
     * per line. */
    uint64_t unwritten;
};

/* file (may be NULL): created owned by uid:gid (the service's), opened
 * and rotated beneath its directory without following links. */
void logring_init(struct logring *r, size_t lines, const char *file, int64_t max_bytes, int keep,
                  uid_t uid, gid_t gid);
void logring_free(struct logring *r);
/* (Re)opens the file, if any; called before each start of the service. */
void logring_open_file(struct logring *r);
/* Adds one line (without newline); returns the stored entry. */
const struct logline *logring_add(struct logring *r, enum log_stream s, const char *text, size_t len);
/* The k-th line back from the newest (0 = the newest), or NULL when the
 * ring holds fewer. */
const struct logline *logring_back(const struct logring *r, size_t k);
/* The last n lines as a JSON array, oldest first. */
struct cJSON *logring_tail_json(const struct logring *r, size_t n);
struct cJSON *logline_json(const struct logline *l, const char *service);
const char *logring_stream_name(enum log_stream s);

#endif
