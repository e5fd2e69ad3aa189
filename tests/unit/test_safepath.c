/* safepath: opening beneath a directory fd without following links,
 * never blocking, refusing what is not the expected kind of file. Each
 * refusal is also checked through the component-by-component fallback
 * used where the kernel has no openat2. */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"
#include "safepath.h"

struct spt {
    char root[64];
    int dfd;
};

static void sp_setup(struct spt *t)
{
    char p[256];

    snprintf(t->root, sizeof(t->root), "/tmp/hearth-sp-XXXXXX");
    CHECK(mkdtemp(t->root) != NULL);
    snprintf(p, sizeof(p), "%s/tree", t->root);
    CHECK(mkdir(p, 0755) == 0);
    snprintf(p, sizeof(p), "%s/tree/sub", t->root);
    CHECK(mkdir(p, 0755) == 0);
    snprintf(p, sizeof(p), "%s/tree/sub/file", t->root);
    FILE *f = fopen(p, "w");
    CHECK(f != NULL);
    if (f) {
        fputs("inside\n", f);
        fclose(f);
    }
    snprintf(p, sizeof(p), "%s/outside", t->root);
    f = fopen(p, "w");
    CHECK(f != NULL);
    if (f) {
        fputs("secret\n", f);
        fclose(f);
    }
    snprintf(p, sizeof(p), "%s/tree/fifo", t->root);
    CHECK(mkfifo(p, 0600) == 0);
    snprintf(p, sizeof(p), "%s/tree/tail", t->root); /* symlink at the end */
    CHECK(symlink("../outside", p) == 0);
    snprintf(p, sizeof(p), "%s/tree/mid", t->root); /* symlink in the middle */
    CHECK(symlink("sub", p) == 0);
    snprintf(p, sizeof(p), "%s/tree", t->root);
    t->dfd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    CHECK(t->dfd >= 0);
}

static void sp_teardown(struct spt *t)
{
    char cmd[128];
    close(t->dfd);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", t->root);
    CHECK(system(cmd) == 0);
}

static void expect_fail(int dfd, const char *rel, int flags, int err, const char *why_part)
{
    struct err why = {0};
    errno = 0;
    int fd = safepath_open(dfd, rel, flags, 0600, &why);
    CHECK(fd < 0);
    if (fd >= 0)
        close(fd);
    CHECK_EQ_INT(errno, err);
    CHECK_CONTAINS(why.msg, why_part);
}

TEST(safepath_opens_a_file_beneath)
{
    struct spt t;
    char buf[16] = "";
    struct err why;
    sp_setup(&t);
    int fd = safepath_open(t.dfd, "sub/file", O_RDONLY, 0, &why);
    CHECK(fd >= 0);
    if (fd >= 0) {
        CHECK(read(fd, buf, sizeof(buf) - 1) == 7);
        CHECK_STR(buf, "inside\n");
        CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC);
        close(fd);
    }
    fd = safepath_open(t.dfd, "sub", O_DIRECTORY, 0, &why);
    CHECK(fd >= 0);
    if (fd >= 0)
        close(fd);
    sp_teardown(&t);
}

TEST(safepath_refuses_links_fifos_dirs_and_escapes)
{
    struct spt t;
    sp_setup(&t);
    expect_fail(t.dfd, "tail", O_RDONLY, ELOOP, "symbolic link");
    expect_fail(t.dfd, "mid/file", O_RDONLY, ELOOP, "symbolic link");
    expect_fail(t.dfd, "tail", O_WRONLY | O_CREAT | O_APPEND, ELOOP, "symbolic link");
    expect_fail(t.dfd, "fifo", O_RDONLY, SAFEPATH_EWRONGTYPE, "a FIFO");
    /* A FIFO opened for writing with no reader: refused at once. */
    expect_fail(t.dfd, "fifo", O_WRONLY | O_APPEND, ENXIO, "FIFO");
    expect_fail(t.dfd, "sub", O_RDONLY, SAFEPATH_EWRONGTYPE, "a directory");
    expect_fail(t.dfd, "sub/file", O_DIRECTORY, ENOTDIR, "");
    expect_fail(t.dfd, "mid", O_DIRECTORY, ELOOP, "symbolic link");
    expect_fail(t.dfd, "../outside", O_RDONLY, EXDEV, "leaves");
    expect_fail(t.dfd, "sub/../../outside", O_RDONLY, EXDEV, "leaves");
    expect_fail(t.dfd, "/etc/passwd", O_RDONLY, EXDEV, "leaves");
    expect_fail(t.dfd, "sub/file", O_WRONLY | O_TRUNC, EINVAL, "");
    /* O_EXCL on a planted link: not followed, not created. */
    expect_fail(t.dfd, "tail", O_WRONLY | O_CREAT | O_EXCL, EEXIST, "");
    char p[256], buf[16] = "";
    snprintf(p, sizeof(p), "%s/outside", t.root);
    FILE *f = fopen(p, "r");
    CHECK(f && fgets(buf, sizeof(buf), f));
    CHECK_STR(buf, "secret\n");
    if (f)
        fclose(f);
    sp_teardown(&t);
}

TEST(safepath_fallback_without_openat2)
{
    struct spt t;
    struct err why;
    sp_setup(&t);
    safepath_use_openat2(false);
    expect_fail(t.dfd, "tail", O_RDONLY, ELOOP, "symbolic link");
    expect_fail(t.dfd, "mid/file", O_RDONLY, ELOOP, "symbolic link");
    expect_fail(t.dfd, "fifo", O_RDONLY, SAFEPATH_EWRONGTYPE, "a FIFO");
    expect_fail(t.dfd, "sub", O_RDONLY, SAFEPATH_EWRONGTYPE, "a directory");
    expect_fail(t.dfd, "../outside", O_RDONLY, EXDEV, "leaves");
    expect_fail(t.dfd, "/etc/passwd", O_RDONLY, EXDEV, "leaves");
    /* A link where a directory is expected: ELOOP, as openat2 says. */
    expect_fail(t.dfd, "mid", O_DIRECTORY, ELOOP, "symbolic link");
    expect_fail(t.dfd, "sub/file", O_DIRECTORY, ENOTDIR, "");
    int fd = safepath_open(t.dfd, "sub//file", O_RDONLY, 0, &why);
    CHECK(fd >= 0);
    if (fd >= 0)
        close(fd);
    fd = safepath_open(t.dfd, "sub/new", O_WRONLY | O_CREAT | O_EXCL, 0600, &why);
    CHECK(fd >= 0);
    if (fd >= 0)
        close(fd);
    safepath_use_openat2(true);
    sp_teardown(&t);
}

TEST(safepath_check_and_split)
{
    char dir[PATH_MAX], leaf[PATH_MAX];
    CHECK(safepath_check("a/b") == 0);
    CHECK(safepath_check("a/..b/c..") == 0);
    CHECK(safepath_check("") < 0 && errno == ENOENT);
    CHECK(safepath_check("..") < 0 && errno == EXDEV);
    CHECK(safepath_check("a/../b") < 0 && errno == EXDEV);
    CHECK(safepath_check("a/..") < 0 && errno == EXDEV);
    CHECK(safepath_check("/a") < 0 && errno == EXDEV);
    CHECK(safepath_split("a/b/c", dir, leaf) == 0);
    CHECK_STR(dir, "a/b");
    CHECK_STR(leaf, "c");
    CHECK(safepath_split("c//", dir, leaf) == 0);
    CHECK_STR(dir, ".");
    CHECK_STR(leaf, "c");
    CHECK(safepath_split("a//c", dir, leaf) == 0);
    CHECK_STR(dir, "a");
    CHECK_STR(leaf, "c");
}

TEST(safepath_owned_refuses_hard_links_and_sets_owner)
{
    struct spt t;
    char p[256];
    struct err why;
    struct stat s;
    sp_setup(&t);
    int fd = safepath_open_owned(t.dfd, "log", O_WRONLY | O_CREAT | O_APPEND, 0640, 65534, 65534,
                                 &why);
    CHECK(fd >= 0);
    if (fd >= 0) {
        CHECK(fstat(fd, &s) == 0 && s.st_uid == 65534 && s.st_gid == 65534);
        close(fd);
    }
    /* Opened again: it is the service's own, accepted. */
    fd = safepath_open_owned(t.dfd, "log", O_WRONLY | O_CREAT | O_APPEND, 0640, 65534, 65534,
                             &why);
    CHECK(fd >= 0);
    if (fd >= 0)
        close(fd);
    /* A hard link to a file outside: never written. */
    snprintf(p, sizeof(p), "%s/outside", t.root);
    CHECK(linkat(AT_FDCWD, p, t.dfd, "hard", 0) == 0);
    fd = safepath_open_owned(t.dfd, "hard", O_WRONLY | O_CREAT | O_APPEND, 0640, 0, 0, &why);
    CHECK(fd < 0 && errno == SAFEPATH_EOWNER);
    CHECK_CONTAINS(why.msg, "hard link");
    /* Someone else's file. */
    CHECK(fchownat(t.dfd, "sub/file", 1000, 1000, 0) == 0);
    fd = safepath_open_owned(t.dfd, "sub/file", O_WRONLY | O_APPEND, 0, 65534, 65534, &why);
    CHECK(fd < 0 && errno == SAFEPATH_EOWNER);
    sp_teardown(&t);
}

TEST(safepath_mkdir_p_owner_and_links)
{
    struct spt t;
    char p[256];
    struct err why;
    struct stat s;
    bool made;
    sp_setup(&t);
    snprintf(p, sizeof(p), "%s/tree/a/b/c", t.root);
    int fd = safepath_mkdir_p(p, 0750, 65534, 65534, &why);
    CHECK(fd >= 0);
    if (fd >= 0) {
        CHECK(fstat(fd, &s) == 0 && S_ISDIR(s.st_mode) && s.st_uid == 65534 &&
              (s.st_mode & 07777) == 0750);
        close(fd);
    }
    /* Through a link in the middle: refused, nothing made behind it. */
    snprintf(p, sizeof(p), "%s/tree/mid/x", t.root);
    fd = safepath_mkdir_p(p, 0755, 0, 0, &why);
    CHECK(fd < 0 && errno == ELOOP);
    snprintf(p, sizeof(p), "%s/tree/sub/x", t.root);
    CHECK(stat(p, &s) < 0);
    fd = safepath_mkdir(t.dfd, "sub", 0700, 0, 0, &made, &why);
    CHECK(fd >= 0 && !made);
    if (fd >= 0)
        close(fd);
    fd = safepath_mkdir(t.dfd, "tail", 0700, 0, 0, &made, &why);
    CHECK(fd < 0 && errno == ELOOP);
    fd = safepath_open_abs("/tmp", O_DIRECTORY, 0, &why);
    CHECK(fd >= 0);
    if (fd >= 0)
        close(fd);
    snprintf(p, sizeof(p), "%s/tree/tail", t.root);
    fd = safepath_open_abs(p, O_RDONLY, 0, &why);
    CHECK(fd < 0 && errno == ELOOP);
    sp_teardown(&t);
}
