/* fuzz_files: the params of the files.* methods, which a host sends and
 * whose paths may name anything an agent left in the tree.
 *
 * The input's first byte picks the method, the rest is its params (JSON).
 * Every path-valued member ("path", "from", "to") that is a string is
 * moved beneath a scratch tree (an absolute path /x becomes ROOT/x), so
 * the writes and removals stay there; the tree is rebuilt before every
 * input: a file, a directory, a FIFO, a link inside and a link out.
 *
 * Checked beyond the sanitizers:
 *   - what every method promises (fuzz_method.h), a parameter's name in
 *     a message followed by ':';
 *   - nothing blocks (libFuzzer's -timeout): the FIFO is never opened. */
#include "m_files.h"
#include "m_files_int.h"

#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cJSON.h>

#include "fuzz_method.h"

static char root[] = "/tmp/hearth-fuzz-files-XXXXXX";

static const struct fuzz_method methods[] = {
    {"files.stat", m_files_stat_now, "path follow"},
    {"files.list", m_files_list_now, "path follow limit cursor"},
    {"files.read", m_files_read_now, "path follow offset length"},
    {"files.hash", m_files_hash_now, "path follow offset length"},
    {"files.write", m_files_write_now, "path data append exclusive mode uid gid"},
    {"files.rename", m_files_rename_now, "from to exclusive"},
    {"files.mkdir", m_files_mkdir_now, "path parents mode uid gid"},
    {"files.remove", m_files_remove_now, "path recursive"},
};

static int rm_one(const char *p, const struct stat *st, int type, struct FTW *f)
{
    if (f->level > 0)
        remove(p);
    return 0;
}

static void wipe(void)
{
    nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    rmdir(root);
}

static void make_tree(void)
{
    static bool made;
    char p[256];
    /* Once: mkdtemp's name may itself end in an X, so the name cannot
     * say whether it was made. */
    if (!made) {
        if (!mkdtemp(root))
            abort();
        made = true;
        atexit(wipe);
    }
    nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    mkdir(root, 0755);
    snprintf(p, sizeof(p), "%s/d", root);
    mkdir(p, 0755);
    snprintf(p, sizeof(p), "%s/d/f", root);
    int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) {
        (void)!write(fd, "hello\n", 6);
        close(fd);
    }
    snprintf(p, sizeof(p), "%s/p", root);
    mkfifo(p, 0600);
    snprintf(p, sizeof(p), "%s/l", root);
    (void)!symlink("d", p);
    snprintf(p, sizeof(p), "%s/out", root);
    (void)!symlink("/etc/hostname", p);
}

/* Strings at the path members move under root; other types are left for
 * the handler to refuse. */
static void confine(cJSON *params)
{
    static const char *const keys[] = {"path", "from", "to"};
    for (size_t i = 0; i < 3; i++) {
        cJSON *v = cJSON_GetObjectItemCaseSensitive(params, keys[i]);
        if (!cJSON_IsString(v) || v->valuestring[0] != '/')
            continue;
        size_t n = strlen(root) + strlen(v->valuestring) + 1;
        char *p = malloc(n);
        if (!p)
            abort();
        snprintf(p, n, "%s%s", root, v->valuestring);
        cJSON_ReplaceItemInObjectCaseSensitive(params, keys[i], cJSON_CreateString(p));
        free(p);
    }
}

/* The tree is rebuilt and the paths confined before every call. */
static void prepare(cJSON *params)
{
    make_tree();
    confine(params);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_method_run(data, size, methods, sizeof(methods) / sizeof(methods[0]), ":",
                           prepare);
}
