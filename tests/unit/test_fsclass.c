/* fsclass: lexical normalisation, the local types, and
 * the decision on a real mount table: a FUSE mount nobody serves (any
 * system call inside it would block) is recognised as a share without
 * being touched. */
#include "unit.h"

#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fsclass.h"

static const char *norm(const char *in)
{
    static char out[256];
    return fsclass_normalize(in, out, sizeof(out)) < 0 ? "(refused)" : out;
}

TEST(fsclass_normalize_is_lexical)
{
    CHECK_STR(norm("/"), "/");
    CHECK_STR(norm("//"), "/");
    CHECK_STR(norm("/a//b/./c/"), "/a/b/c");
    CHECK_STR(norm("/./a/."), "/a");
    CHECK_STR(norm("/a/.b/..c"), "/a/.b/..c");
    CHECK_STR(norm("/a/../b"), "(refused)");
    CHECK_STR(norm("a/b"), "(refused)");
    char small[4];
    CHECK(fsclass_normalize("/abcd", small, sizeof(small)) < 0);
    CHECK(fsclass_normalize("/ab", small, sizeof(small)) == 0);
}

TEST(fsclass_local_types)
{
    CHECK(fsclass_local_type("tmpfs"));
    CHECK(fsclass_local_type("ext4"));
    CHECK(fsclass_local_type("overlay"));
    CHECK(fsclass_local_type("proc"));
    CHECK(!fsclass_local_type("9p"));
    CHECK(!fsclass_local_type("virtiofs"));
    CHECK(!fsclass_local_type("fuse"));
    CHECK(!fsclass_local_type("fuse.sshfs"));
    CHECK(!fsclass_local_type("fuseblk"));
    CHECK(!fsclass_local_type("nfs4"));
    CHECK(!fsclass_local_type("autofs"));
    CHECK(!fsclass_local_type("no-such-type"));
}

static int decide(const char *fmt, const char *root, unsigned flags, struct fsclass_hit *hit)
{
    char p[256];
    snprintf(p, sizeof(p), fmt, root);
    return fsclass_path(p, flags, hit);
}

/* In a mount namespace of its own: a tmpfs at root, a FUSE mount with
 * no server at root/share. */
static void share_body(const char *root)
{
    struct fsclass_hit hit;
    char share[128], opts[128];

    /* Where the machine's own root is itself a share, every path is. */
    bool local_root = fsclass_path(root, 0, &hit) == 0;
    CHECK(mount("t", root, "tmpfs", 0, "size=1m") == 0);
    snprintf(share, sizeof(share), "%s/share", root);
    CHECK(mkdir(share, 0755) == 0);
    CHECK(mkdir(strcat(strcpy(opts, root), "/sharex"), 0755) == 0);
    int fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "  (no /dev/fuse: skipped)\n");
        return;
    }
    snprintf(opts, sizeof(opts), "fd=%d,rootmode=40000,user_id=0,group_id=0", fd);
    CHECK(mount("unit", share, "fuse", 0, opts) == 0);

    CHECK_EQ_INT(decide("%s/share", root, 0, &hit), 1);
    CHECK_STR(hit.target, share);
    CHECK_STR(hit.fstype, "fuse");
    CHECK_EQ_INT(decide("%s/share/a/b", root, 0, &hit), 1);
    CHECK_EQ_INT(decide("%s//./share/", root, 0, &hit), 1);
    CHECK_EQ_INT(decide("%s/a/../share", root, 0, &hit), 1);
    CHECK_STR(hit.fstype, "path not normalised");
    if (local_root) {
        CHECK_EQ_INT(decide("%s", root, 0, &hit), 0);
        CHECK_EQ_INT(decide("%s/sharex", root, 0, &hit), 0);
        CHECK_EQ_INT(decide("%s/file", root, 0, &hit), 0);
    }
    /* Beneath: a listing of root stats the mount point. */
    CHECK_EQ_INT(decide("%s", root, FSCLASS_BELOW, &hit), 1);
    CHECK_STR(hit.target, share);
    /* Following links, anything may lead there. */
    CHECK_EQ_INT(fsclass_path("/etc", FSCLASS_FOLLOW, &hit), 1);
    CHECK_STR(hit.target, share);
    close(fd); /* aborts the connection: the lazy unmount below is quick */
    umount2(share, MNT_DETACH);
}

TEST(fsclass_path_finds_a_share_without_touching_it)
{
    char root[64] = "/tmp/hearth-fsclass-XXXXXX";
    CHECK(mkdtemp(root) != NULL);
    pid_t p = fork();
    if (p == 0) {
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
            _exit(77);
        unit_failures = 0;
        share_body(root);
        _exit(unit_failures ? 1 : 0);
    }
    int st = 0;
    CHECK(waitpid(p, &st, 0) == p);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 77)
        fprintf(stderr, "  (no mount namespace here: skipped)\n");
    else
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    rmdir(root);
}
