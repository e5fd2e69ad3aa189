/* hearthctl cp: a file copied into or out of the sandbox in bounded
 * files.read / files.write calls, then checked against files.hash. */
#include "ctl.h"
#include "base64.h"
#include "sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Both sides of a transfer go in chunks of the server's per-call limit;
 * the end is checked with files.hash over ranges of CP_HASH_BLOCK, each
 * compared with the hash of the same range of the bytes sent or received. */
#define CP_CHUNK (256u << 10)      /* files.read / files.write per call */
#define CP_HASH_BLOCK (1u << 20)   /* files.hash per call */
#define CP_PREFIX "sandbox:"

/* What the copy into the sandbox is asked to land as. */
struct cp_opts {
    bool has_owner, has_mode;
    unsigned long uid, gid;
    char mode[8];
};

struct cp {
    struct ctl *t;
    struct cp_opts o;
    const char *guest;       /* the guest path */
    char *local;             /* the host path (after a directory is resolved) */
    unsigned long long size, done;
    struct sha256 whole, block;
    char (*blocks)[65];      /* hex sha256 of each finished CP_HASH_BLOCK */
    size_t nblocks, capblocks;
    bool tty;
    int64_t last_progress;
};

/* Feeds transferred bytes into the whole-file hash and the range hashes. */
static void cp_hash(struct cp *c, const unsigned char *p, size_t n)
{
    sha256_update(&c->whole, p, n);
    while (n) {
        size_t room = CP_HASH_BLOCK - (size_t)(c->block.bytes);
        size_t take = n < room ? n : room;
        sha256_update(&c->block, p, take);
        p += take, n -= take;
        if (c->block.bytes == CP_HASH_BLOCK) {
            if (c->nblocks == c->capblocks) {
                c->capblocks = c->capblocks ? c->capblocks * 2 : 64;
                c->blocks = realloc(c->blocks, c->capblocks * sizeof(*c->blocks));
                if (!c->blocks)
                    base_die_oom();
            }
            sha256_hex(&c->block, c->blocks[c->nblocks++]);
            sha256_init(&c->block);
        }
    }
}

static void cp_progress(struct cp *c, bool last)
{
    int64_t now = mono_ms();

    if (!c->tty || (!last && now - c->last_progress < 200))
        return;
    c->last_progress = now;
    fprintf(stderr, "\r%.1f / %.1f MiB (%3d%%)%s", c->done / 1048576.0, c->size / 1048576.0,
            c->size ? (int)(c->done * 100 / c->size) : 100, last ? "\n" : "");
}

/* One call: t->method with params; *reply to delete, *res inside it. */
static int cp_call(struct cp *c, const char *method, cJSON *params, cJSON **reply,
                   const cJSON **res)
{
    c->t->method = method;
    return call_method(c->t, params, reply, res);
}

/* The two halves of cp_call, for a chunk sent before the reply to the
 * one before it is read: the client's work on one chunk (hash, base64)
 * overlaps the server's on the other. */
static int cp_send(struct cp *c, const char *method, cJSON *params, struct call *k)
{
    c->t->method = method;
    return call_send(c->t, params, k);
}

static int cp_recv(struct cp *c, const char *method, const struct call *k, cJSON **reply,
                   const cJSON **res)
{
    c->t->method = method;
    return call_recv(c->t, k, reply, res);
}

/* The reply to a request still in flight, read and dropped (quietly: the
 * failure that ends the copy is the one already printed), so the next
 * call reads its own reply. Non-zero when the connection failed. */
static int cp_drain(struct cp *c, const char *method, struct call *k, bool *pending)
{
    cJSON *reply;
    const cJSON *res;
    if (!*pending)
        return 0;
    *pending = false;
    bool q = c->t->quiet;
    c->t->quiet = true;
    int rc = cp_recv(c, method, k, &reply, &res);
    c->t->quiet = q;
    if (rc == 0)
        cJSON_Delete(reply);
    return rc == EXIT_SERVER ? 0 : rc;
}

static cJSON *path_params(const char *key, const char *path)
{
    cJSON *p = base_new_object();
    base_add_str(p, key, path);
    return p;
}

/* Compares every range hash with files.hash of the guest file, then
 * prints the result. */
static int cp_verify(struct cp *c, const char *guest)
{
    char last[65];
    size_t n = c->nblocks + (c->block.bytes || c->size == 0 ? 1 : 0);

    if (c->block.bytes || c->size == 0)
        sha256_hex(&c->block, last);
    for (size_t i = 0; i < n; i++) {
        cJSON *p = path_params("path", guest), *reply;
        const cJSON *res;
        base_add_num(p, "offset", (double)i * CP_HASH_BLOCK);
        base_add_num(p, "length", CP_HASH_BLOCK);
        int rc = cp_call(c, "files.hash", p, &reply, &res);
        if (rc)
            return rc;
        const char *h = print_jstr(res, "sha256");
        const char *want = i < c->nblocks ? c->blocks[i] : last;
        bool ok = h && strcmp(h, want) == 0;
        cJSON_Delete(reply);
        if (!ok) {
            fprintf(stderr, "hearthctl: cp: checksum mismatch in bytes %llu-%llu: the copy differs\n",
                    (unsigned long long)i * CP_HASH_BLOCK,
                    (unsigned long long)(i + 1) * CP_HASH_BLOCK - 1);
            return EXIT_SERVER;
        }
    }
    char hex[65];
    sha256_hex(&c->whole, hex);
    printf("%llu bytes, sha256 %s\n", c->done, hex);
    return 0;
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* host -> guest: one files.write when it fits, else a temp name beside
 * the target written with append and renamed over it at the end. */
static int cp_upload(struct cp *c, const char *src, const char *dst_in)
{
    struct stat st;
    int fd = open(src, O_RDONLY | O_CLOEXEC);
    char *dst = NULL, *tmp = NULL;
    unsigned char *buf = malloc(CP_CHUNK);
    char *enc = malloc(CP_CHUNK / 3 * 4 + 8);
    int rc = EXIT_USAGE;
    bool tmp_made = false, inflight = false;
    struct call prev = {0};

    if (!buf || !enc)
        base_die_oom();
    if (fd < 0 || fstat(fd, &st) < 0) {
        fprintf(stderr, "hearthctl: cp: %s: %s\n", src, strerror(errno));
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        fprintf(stderr, "hearthctl: cp: %s: not a regular file\n", src);
        goto out;
    }
    /* A guest directory (or a path ending in '/') receives the file by
     * its own name. */
    size_t dl = strlen(dst_in);
    bool into = dl && dst_in[dl - 1] == '/';
    if (!into) {
        cJSON *reply;
        const cJSON *res;
        cJSON *p = path_params("path", dst_in);
        /* A missing target is the usual case: ask quietly. */
        c->t->quiet = true;
        int r = cp_call(c, "files.stat", p, &reply, &res);
        c->t->quiet = false;
        if (r == 0) {
            into = print_jstr(res, "type") && strcmp(print_jstr(res, "type"), "dir") == 0;
            cJSON_Delete(reply);
        } else if (r != EXIT_SERVER) {
            fprintf(stderr, "hearthctl: cp: unable to reach %s\n", c->t->conn.spec);
            goto out;
        }
    }
    if (into) {
        if (asprintf(&dst, "%s%s%s", dst_in, dst_in[dl - 1] == '/' ? "" : "/", base_name(src)) < 0)
            base_die_oom();
    } else if (!(dst = strdup(dst_in))) {
        base_die_oom();
    }
    c->size = (unsigned long long)st.st_size;
    char mode[8];
    snprintf(mode, sizeof(mode), "%04o", (unsigned)(st.st_mode & 07777));
    if (c->o.has_mode)
        snprintf(mode, sizeof(mode), "%s", c->o.mode);
    /* The owner the copy lands with: --owner, else that of the file it
     * replaces. One files.write keeps an existing file's owner by itself;
     * a copy in chunks is a new file renamed over the target, so it asks
     * for that owner explicitly (else it would land as root's). */
    bool owned = c->o.has_owner;
    unsigned long uid = c->o.uid, gid = c->o.gid;
    const char *target = dst;
    if ((unsigned long long)st.st_size > CP_CHUNK && !owned) {
        cJSON *reply;
        const cJSON *res;
        double u, g;
        c->t->quiet = true;
        int r = cp_call(c, "files.stat", path_params("path", dst), &reply, &res);
        c->t->quiet = false;
        if (r == 0) {
            if (print_jstr(res, "type") && strcmp(print_jstr(res, "type"), "file") == 0 &&
                print_jnum(res, "uid", &u) && print_jnum(res, "gid", &g)) {
                owned = true;
                uid = (unsigned long)u;
                gid = (unsigned long)g;
            }
            cJSON_Delete(reply);
        } else if (r != EXIT_SERVER) {
            fprintf(stderr, "hearthctl: cp: unable to reach %s\n", c->t->conn.spec);
            goto out;
        }
    }
    if ((unsigned long long)st.st_size > CP_CHUNK) {
        const char *slash = strrchr(dst, '/');
        if (asprintf(&tmp, "%.*s.%.180s.hearthctl-%ld", (int)(slash - dst + 1), dst, slash + 1,
                     (long)getpid()) < 0)
            base_die_oom();
        target = tmp;
    }
    for (bool first = true;; first = false) {
        size_t got = 0;
        while (got < CP_CHUNK) {
            ssize_t n = read(fd, buf + got, CP_CHUNK - got);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0) {
                fprintf(stderr, "hearthctl: cp: %s: %s\n", src, strerror(errno));
                goto out;
            }
            if (n == 0)
                break;
            got += (size_t)n;
        }
        if (!first && got == 0)
            break;
        cp_hash(c, buf, got);
        base64_encode(buf, got, enc);
        cJSON *p = path_params("path", target), *reply;
        const cJSON *res;
        base_add_str(p, "data", enc);
        base_add_str(p, "mode", mode);
        if (!first && !cJSON_AddBoolToObject(p, "append", 1))
            base_die_oom();
        if (first && tmp && !cJSON_AddBoolToObject(p, "exclusive", 1))
            base_die_oom();
        if (first && owned &&
            (!cJSON_AddNumberToObject(p, "uid", (double)uid) ||
             !cJSON_AddNumberToObject(p, "gid", (double)gid)))
            base_die_oom();
        /* One chunk in flight: this one goes out, then the reply to the
         * one before is read. The first is waited for at once: it makes
         * the temp file (exclusive), and no append may follow a create
         * that failed. */
        struct call k;
        rc = cp_send(c, "files.write", p, &k);
        if (rc)
            goto out;
        if (inflight || first) {
            rc = cp_recv(c, "files.write", inflight ? &prev : &k, &reply, &res);
            if (rc) {
                /* This chunk is still out: its reply is read before the
                 * temp file is removed. */
                cp_drain(c, "files.write", &k, &inflight);
                goto out;
            }
            cJSON_Delete(reply);
            tmp_made = tmp != NULL;
        }
        inflight = !first;
        prev = k;
        c->done += got;
        cp_progress(c, false);
        /* Without a temp name the one write was the whole copy: a file
         * that grew since fstat is copied as it was then, never appended
         * to the target itself. */
        if (got < CP_CHUNK || !tmp)
            break;
    }
    if (inflight) {
        cJSON *reply;
        const cJSON *res;
        inflight = false;
        rc = cp_recv(c, "files.write", &prev, &reply, &res);
        if (rc)
            goto out;
        cJSON_Delete(reply);
    }
    if (tmp) {
        cJSON *p = path_params("from", tmp), *reply;
        const cJSON *res;
        base_add_str(p, "to", dst);
        rc = cp_call(c, "files.rename", p, &reply, &res);
        if (rc)
            goto out;
        cJSON_Delete(reply);
        tmp_made = false;
    }
    cp_progress(c, true);
    rc = cp_verify(c, dst);
out:
    if (tmp_made) {
        cJSON *reply;
        const cJSON *res;
        if (cp_call(c, "files.remove", path_params("path", tmp), &reply, &res) == 0)
            cJSON_Delete(reply);
    }
    if (fd >= 0)
        close(fd);
    free(buf);
    free(enc);
    free(dst);
    free(tmp);
    return rc;
}

static cJSON *read_params(const char *src, unsigned long long offset)
{
    cJSON *p = path_params("path", src);
    base_add_num(p, "offset", (double)offset);
    base_add_num(p, "length", CP_CHUNK);
    return p;
}

/* guest -> host: read into a temp file beside the target, checked, then
 * renamed over it. */
static int cp_download(struct cp *c, const char *src, const char *dst_in)
{
    struct stat st;
    char *dst = NULL, *tmp = NULL;
    unsigned char *buf = malloc(CP_CHUNK);
    int fd = -1, rc;
    cJSON *reply;
    const cJSON *res;
    mode_t mode = 0644;

    if (!buf)
        base_die_oom();
    rc = cp_call(c, "files.stat", path_params("path", src), &reply, &res);
    if (rc) {
        free(buf);
        return rc;
    }
    const char *type = print_jstr(res, "type"), *m = print_jstr(res, "mode");
    double size = 0;
    print_jnum(res, "size", &size);
    if (!type || strcmp(type, "file") != 0) {
        fprintf(stderr, "hearthctl: cp: %s is a %s, not a regular file\n", src,
                type ? type : "?");
        cJSON_Delete(reply);
        free(buf);
        return EXIT_SERVER;
    }
    if (m)
        mode = (mode_t)strtoul(m, NULL, 8) & 07777;
    cJSON_Delete(reply);
    c->size = (unsigned long long)size;
    size_t dl = strlen(dst_in);
    if ((dl && dst_in[dl - 1] == '/') || (stat(dst_in, &st) == 0 && S_ISDIR(st.st_mode))) {
        if (asprintf(&dst, "%s%s%s", dst_in, dst_in[dl - 1] == '/' ? "" : "/", base_name(src)) < 0)
            base_die_oom();
    } else if (!(dst = strdup(dst_in))) {
        base_die_oom();
    }
    if (asprintf(&tmp, "%s.hearthctl-%ld", dst, (long)getpid()) < 0)
        base_die_oom();
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        fprintf(stderr, "hearthctl: cp: %s: %s\n", tmp, strerror(errno));
        rc = EXIT_USAGE;
        goto out;
    }
    /* One chunk asked for ahead while the last is decoded, hashed and
     * written (when the file, as files.stat saw it, goes on past it):
     * the server reads the next while this side works. A reply shorter
     * than asked without the end moves the offset, and the read ahead
     * is dropped and asked again from there. On a failure nothing else
     * is called, so a reply left unread matters to nobody. */
    struct call k, next;
    bool have_k = false, ahead = false;
    for (;;) {
        if (!have_k) {
            rc = cp_send(c, "files.read", read_params(src, c->done), &k);
            if (rc)
                goto out;
        }
        unsigned long long next_off = c->done + CP_CHUNK;
        if (next_off < c->size) {
            rc = cp_send(c, "files.read", read_params(src, next_off), &next);
            if (rc)
                goto out;
            ahead = true;
        }
        have_k = false;
        rc = cp_recv(c, "files.read", &k, &reply, &res);
        if (rc)
            goto out;
        const char *data = print_jstr(res, "data");
        long n = data ? base64_decode(data, strlen(data), buf, CP_CHUNK, NULL) : -1;
        bool eof = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res, "eof"));
        cJSON_Delete(reply);
        if (n < 0) {
            rc = base_bad_reply(c->t, "files.read data is not base64");
            goto out;
        }
        for (size_t off = 0; off < (size_t)n;) {
            ssize_t w = write(fd, buf + off, (size_t)n - off);
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0) {
                fprintf(stderr, "hearthctl: cp: %s: %s\n", tmp, strerror(errno));
                rc = EXIT_USAGE;
                goto out;
            }
            off += (size_t)w;
        }
        cp_hash(c, buf, (size_t)n);
        c->done += (unsigned long long)n;
        if (c->done > c->size)
            c->size = c->done;
        cp_progress(c, false);
        if (ahead && !eof && n != 0 && c->done == next_off) {
            k = next;
            have_k = true;
            ahead = false;
        } else if ((rc = cp_drain(c, "files.read", &next, &ahead)) != 0) {
            goto out;
        }
        if (eof || n == 0)
            break;
    }
    cp_progress(c, true);
    rc = cp_verify(c, src);
    if (rc)
        goto out;
    if (fchmod(fd, mode) < 0 || fsync(fd) < 0 || rename(tmp, dst) < 0) {
        fprintf(stderr, "hearthctl: cp: %s: %s\n", dst, strerror(errno));
        rc = EXIT_USAGE;
        goto out;
    }
    free(tmp);
    tmp = NULL;
out:
    if (fd >= 0)
        close(fd);
    if (tmp)
        unlink(tmp);
    free(tmp);
    free(dst);
    free(buf);
    return rc;
}

/* --owner UID[:GID] and --mode MODE before SRC and DST; *first is the
 * index of SRC. Non-zero (the exit code) with the problem printed. */
static int cp_options(const struct ctl *t, int argc, char **argv, struct cp_opts *o, int *first)
{
    int i = 0;
    memset(o, 0, sizeof(*o));
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (strcmp(a, "--owner") != 0 && strcmp(a, "--mode") != 0)
            break;
        if (i + 1 >= argc)
            return base_usage_err(t, "%s needs a value", a);
        const char *v = argv[++i];
        char *end;
        if (a[2] == 'o') {
            errno = 0;
            o->uid = strtoul(v, &end, 10);
            o->gid = o->uid;
            if (end != v && *end == ':') {
                const char *g = end + 1;
                o->gid = strtoul(g, &end, 10);
                if (end == g)
                    end = (char *)"x";
            }
            if (errno || end == v || *end || v[0] == '-' || o->uid >= 0xffffffffUL ||
                o->gid >= 0xffffffffUL)
                return base_usage_err(t, "--owner '%s': expected UID or UID:GID (numbers)", v);
            o->has_owner = true;
        } else {
            size_t n = strlen(v);
            if (n == 0 || n > 5 || strspn(v, "01234567") != n || strtoul(v, NULL, 8) > 07777)
                return base_usage_err(t, "--mode '%s': expected octal permission bits (0644)", v);
            snprintf(o->mode, sizeof(o->mode), "%04lo", strtoul(v, NULL, 8));
            o->has_mode = true;
        }
    }
    *first = i;
    return 0;
}

/* Checks cp's arguments before anything connects. */
int cp_build(struct ctl *t, int argc, char **argv, cJSON **params)
{
    struct cp_opts o;
    int first;
    *params = NULL;
    int rc = cp_options(t, argc, argv, &o, &first);
    if (rc)
        return rc;
    argc -= first;
    argv += first;
    if (argc != 2)
        return base_usage_err(t, "%s", argc < 2 ? "needs SRC and DST" : "too many arguments");
    bool g0 = strncmp(argv[0], CP_PREFIX, strlen(CP_PREFIX)) == 0;
    bool g1 = strncmp(argv[1], CP_PREFIX, strlen(CP_PREFIX)) == 0;
    if (g0 == g1)
        return base_usage_err(t, "%s", "exactly one of SRC and DST names the guest side (sandbox:PATH)");
    const char *guest = argv[g0 ? 0 : 1] + strlen(CP_PREFIX);
    if (guest[0] != '/')
        return base_usage_err(t, "guest path '%s' is not absolute", guest);
    if (g0 && (o.has_owner || o.has_mode))
        return base_usage_err(t, "%s", "--owner and --mode are for a copy into the sandbox");
    return 0;
}

int cp_run(struct ctl *t, int argc, char **argv)
{
    struct cp c;
    struct cp_opts o;
    int first;
    int orc = cp_options(t, argc, argv, &o, &first);
    if (orc)
        return orc;
    argc -= first;
    argv += first;
    bool g0 = strncmp(argv[0], CP_PREFIX, strlen(CP_PREFIX)) == 0;
    const char *guest = argv[g0 ? 0 : 1] + strlen(CP_PREFIX);

    memset(&c, 0, sizeof(c));
    c.t = t;
    c.o = o;
    c.tty = isatty(STDERR_FILENO);
    sha256_init(&c.whole);
    sha256_init(&c.block);
    int rc = g0 ? cp_download(&c, guest, argv[1]) : cp_upload(&c, argv[0], guest);
    free(c.blocks);
    return rc;
}
