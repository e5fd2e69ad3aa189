/* fuzz_safepath: the path handling of safepath, which parses names an
 * agent chose (a link's text in skills.fork, configured paths).
 *
 * The input is a path (cut at the first NUL).
 *
 * Checked beyond the sanitizers:
 *   - safepath_check accepts only relative paths without a '..'
 *     component, and fails with EXDEV, ENOENT or ENAMETOOLONG otherwise;
 *   - safepath_split succeeds exactly when the check does and the path
 *     has a last component; the leaf is one non-empty component without
 *     '/', and dir + "/" + leaf names the same components as the input;
 *   - safepath_open beneath a small fixed tree (a file, a directory, a
 *     FIFO, a link in the middle and at the end, a link out) never
 *     blocks, and any fd it returns is a regular file. */
#include "safepath.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"
#include "fuzz_common.h"

static int tree = -1;
static char root[] = "/tmp/hearth-fuzz-sp-XXXXXX";

/* The fixed tree goes when the fuzzer exits. */
static void remove_tree(void)
{
    static const char *const names[] = {"d/f", "p", "l", "out", "up"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        unlinkat(tree, names[i], 0);
    unlinkat(tree, "d", AT_REMOVEDIR);
    rmdir(root);
}

static void make_tree(void)
{
    FUZZ_CHECK(mkdtemp(root) != NULL, "mkdtemp");
    atexit(remove_tree);
    tree = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    FUZZ_CHECK(tree >= 0, "open tree");
    mkdirat(tree, "d", 0755);
    int fd = openat(tree, "d/f", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0)
        close(fd);
    mkfifoat(tree, "p", 0600);
    symlinkat("d", tree, "l");
    symlinkat("/etc/passwd", tree, "out");
    symlinkat("../..", tree, "up");
}

/* The components of p, '.' and empty ones dropped, joined by '/'. */
static void components(const char *p, char *out, size_t n)
{
    size_t k = 0;
    out[0] = '\0';
    while (*p) {
        while (*p == '/')
            p++;
        size_t cl = strcspn(p, "/");
        if (cl && !(cl == 1 && p[0] == '.')) {
            if (k && k + 1 < n)
                out[k++] = '/';
            for (size_t i = 0; i < cl && k + 1 < n; i++)
                out[k++] = p[i];
            out[k] = '\0';
        }
        p += cl;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char dir[PATH_MAX], leaf[PATH_MAX], a[PATH_MAX * 2], b[PATH_MAX * 2],
        joined[PATH_MAX * 2 + 2];
    char *p = fuzz_strndup(data, size);

    if (tree < 0)
        make_tree();
    errno = 0;
    int c = safepath_check(p);
    if (c == 0) {
        FUZZ_CHECK(p[0] != '/', "absolute accepted: %.80s", p);
        for (const char *q = p; (q = strstr(q, "..")); q++) {
            bool start = q == p || q[-1] == '/';
            bool end = q[2] == '\0' || q[2] == '/';
            FUZZ_CHECK(!(start && end), "'..' accepted: %.80s", p);
        }
    } else {
        FUZZ_CHECK(errno == EXDEV || errno == ENOENT || errno == ENAMETOOLONG, "errno %d", errno);
    }
    int s = safepath_split(p, dir, leaf);
    if (s == 0) {
        FUZZ_CHECK(c == 0, "split accepted what check refused: %.80s", p);
        FUZZ_CHECK(leaf[0] && !strchr(leaf, '/'), "bad leaf %.80s", leaf);
        snprintf(joined, sizeof(joined), "%s/%s", dir, leaf);
        components(joined, a, sizeof(a));
        components(p, b, sizeof(b));
        /* A leaf of "." is kept as a component of its own by split. */
        if (strcmp(leaf, ".") != 0)
            FUZZ_CHECK(strcmp(a, b) == 0, "split %.80s -> %.80s + %.80s", p, dir, leaf);
    }
    struct err why;
    int fd = safepath_open(tree, p, O_RDONLY, 0, &why);
    if (fd >= 0) {
        struct stat st;
        FUZZ_CHECK(fstat(fd, &st) == 0 && S_ISREG(st.st_mode), "not a regular file: %.80s", p);
        close(fd);
    } else {
        FUZZ_CHECK(memchr(why.msg, '\0', sizeof(why.msg)) != NULL, "why not terminated");
    }
    free(p);
    return 0;
}
