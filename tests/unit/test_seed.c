/* Seeding and the tree copy under it, on temporary trees; and the pure
 * parts of mounts (options, host_mounts sources). */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"
#include "mounts.h"
#include "seed.h"
#include "tree.h"

static void put(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    CHECK(chmod(path, mode) == 0);
}

static const char *slurp(const char *path, char *buf, size_t n)
{
    FILE *f = fopen(path, "r");
    size_t r = 0;
    if (f) {
        r = fread(buf, 1, n - 1, f);
        fclose(f);
    }
    buf[r] = '\0';
    return buf;
}

struct seedt {
    char root[64], tmpl[128], home[128];
};

/* A template: config.yaml, bin/run (0755), secret (0600), skills/ (0700),
 * a symlink, and a fifo that must be skipped. */
static void setup(struct seedt *t)
{
    char p[256];

    snprintf(t->root, sizeof(t->root), "/tmp/hearth-seed-XXXXXX");
    CHECK(mkdtemp(t->root) != NULL);
    snprintf(t->tmpl, sizeof(t->tmpl), "%s/tmpl", t->root);
    snprintf(t->home, sizeof(t->home), "%s/home", t->root);
    CHECK(mkdir(t->tmpl, 0755) == 0);
    CHECK(mkdir(t->home, 0755) == 0);
    snprintf(p, sizeof(p), "%s/config.yaml", t->tmpl);
    put(p, "model: x\n", 0644);
    snprintf(p, sizeof(p), "%s/bin", t->tmpl);
    CHECK(mkdir(p, 0755) == 0);
    snprintf(p, sizeof(p), "%s/bin/run", t->tmpl);
    put(p, "#!/bin/sh\n", 0755);
    snprintf(p, sizeof(p), "%s/secret", t->tmpl);
    put(p, "s\n", 0600);
    snprintf(p, sizeof(p), "%s/skills", t->tmpl);
    CHECK(mkdir(p, 0700) == 0);
    snprintf(p, sizeof(p), "%s/current", t->tmpl);
    CHECK(symlink("bin/run", p) == 0);
    snprintf(p, sizeof(p), "%s/pipe", t->tmpl);
    CHECK(mkfifo(p, 0644) == 0);
}

static void teardown(struct seedt *t)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", t->root);
    CHECK(system(cmd) == 0);
}

static mode_t mode_of(const char *dir, const char *name)
{
    char p[256];
    struct stat s;
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    if (lstat(p, &s) < 0)
        return 0;
    return s.st_mode;
}

TEST(seed_copies_files_dirs_links_and_modes)
{
    struct seedt t;
    char p[256], buf[256];
    struct err err;

    setup(&t);
    CHECK_EQ_INT(seed_one(t.home, t.tmpl, "config.yaml", &err), SEED_DONE);
    CHECK_EQ_INT(mode_of(t.home, "config.yaml") & 07777, 0644);
    CHECK_EQ_INT(mode_of(t.home, "bin/run") & 07777, 0755);
    CHECK_EQ_INT(mode_of(t.home, "secret") & 07777, 0600);
    CHECK(S_ISDIR(mode_of(t.home, "skills")));
    CHECK_EQ_INT(mode_of(t.home, "skills") & 07777, 0700);
    CHECK(S_ISLNK(mode_of(t.home, "current")));
    snprintf(p, sizeof(p), "%s/current", t.home);
    ssize_t n = readlink(p, buf, sizeof(buf) - 1);
    CHECK(n == 7 && memcmp(buf, "bin/run", 7) == 0);
    CHECK_EQ_INT(mode_of(t.home, "pipe"), 0); /* fifos are not copied */
    CHECK_EQ_INT(mode_of(t.home, SEED_MARKER), 0);
    snprintf(p, sizeof(p), "%s/config.yaml", t.home);
    CHECK_STR(slurp(p, buf, sizeof(buf)), "model: x\n");
    teardown(&t);
}

TEST(seed_leaves_a_seeded_home_alone)
{
    struct seedt t;
    char p[256], buf[256];
    struct err err;

    setup(&t);
    snprintf(p, sizeof(p), "%s/config.yaml", t.home);
    put(p, "mine\n", 0600);
    CHECK_EQ_INT(seed_one(t.home, t.tmpl, "config.yaml", &err), SEED_ALREADY);
    CHECK_STR(slurp(p, buf, sizeof(buf)), "mine\n");
    CHECK_EQ_INT(mode_of(t.home, "secret"), 0);
    /* Without unless, any content means seeded. */
    teardown(&t);
    setup(&t);
    snprintf(p, sizeof(p), "%s/anything", t.home);
    put(p, "x", 0644);
    CHECK_EQ_INT(seed_one(t.home, t.tmpl, NULL, &err), SEED_ALREADY);
    CHECK_EQ_INT(mode_of(t.home, "config.yaml"), 0);
    teardown(&t);
}

TEST(seed_never_overwrites_and_redoes_an_interrupted_seed)
{
    struct seedt t;
    char p[256], buf[256];
    struct err err;

    setup(&t);
    /* An earlier seed got as far as bin/ and a half-written temp file. */
    snprintf(p, sizeof(p), "%s/bin", t.home);
    CHECK(mkdir(p, 0755) == 0);
    snprintf(p, sizeof(p), "%s/bin/run", t.home);
    put(p, "changed by the agent\n", 0700);
    snprintf(p, sizeof(p), "%s/.hearth-copy.tmp", t.home);
    put(p, "half", 0600);
    snprintf(p, sizeof(p), "%s/%s", t.home, SEED_MARKER);
    put(p, "", 0600);
    /* Without the marker and with no unless, a non-empty home would be
     * taken as seeded: the marker says otherwise. */
    CHECK_EQ_INT(seed_one(t.home, t.tmpl, NULL, &err), SEED_DONE);
    snprintf(p, sizeof(p), "%s/bin/run", t.home);
    CHECK_STR(slurp(p, buf, sizeof(buf)), "changed by the agent\n");
    CHECK_EQ_INT(mode_of(t.home, "bin/run") & 07777, 0700);
    CHECK(S_ISREG(mode_of(t.home, "config.yaml")));
    CHECK(S_ISREG(mode_of(t.home, "secret")));
    CHECK_EQ_INT(mode_of(t.home, ".hearth-copy.tmp"), 0);
    CHECK_EQ_INT(mode_of(t.home, SEED_MARKER), 0);
    teardown(&t);
}

TEST(seed_without_unless_file_is_redone)
{
    struct seedt t;
    char p[256], buf[256];
    struct err err;

    setup(&t);
    /* Partly there but no config.yaml: the copy is completed. */
    snprintf(p, sizeof(p), "%s/secret", t.home);
    put(p, "kept\n", 0600);
    CHECK_EQ_INT(seed_one(t.home, t.tmpl, "config.yaml", &err), SEED_DONE);
    CHECK_STR(slurp(p, buf, sizeof(buf)), "kept\n");
    CHECK(S_ISREG(mode_of(t.home, "config.yaml")));
    teardown(&t);
}

TEST(seed_missing_template_is_an_error)
{
    struct seedt t;
    struct err err;

    setup(&t);
    CHECK_EQ_INT(seed_one(t.home, "/nonexistent/tmpl", NULL, &err), SEED_FAILED);
    CHECK_CONTAINS(err.msg, "/nonexistent/tmpl");
    CHECK_EQ_INT(mode_of(t.home, SEED_MARKER), 0);
    teardown(&t);
}

TEST(tree_rename_noreplace_refuses_to_replace)
{
    char root[64] = "/tmp/hearth-tree-XXXXXX", p[128], buf[16];
    CHECK(mkdtemp(root) != NULL);
    int fd = open(root, O_RDONLY | O_DIRECTORY);
    snprintf(p, sizeof(p), "%s/a", root);
    put(p, "a", 0644);
    snprintf(p, sizeof(p), "%s/b", root);
    put(p, "b", 0644);
    CHECK_EQ_INT(tree_rename_noreplace(fd, "a", "b"), -1);
    CHECK_EQ_INT(errno, EEXIST);
    CHECK_STR(slurp(p, buf, sizeof(buf)), "b");
    CHECK_EQ_INT(tree_rename_noreplace(fd, "a", "c"), 0);
    struct err err;
    CHECK_EQ_INT(tree_remove(AT_FDCWD, root, &err), 0);
    CHECK(access(root, F_OK) < 0);
    close(fd);
}

TEST(mounts_options_split_flags_from_data)
{
    unsigned long f = 0;
    char data[64];

    CHECK_EQ_INT(mounts_parse_options("ro,nosuid,size=64m,nodev,mode=0755", &f, data, sizeof(data)),
                 0);
    CHECK(f & MS_RDONLY);
    CHECK(f & MS_NOSUID);
    CHECK(f & MS_NODEV);
    CHECK_STR(data, "size=64m,mode=0755");
    f = MS_RDONLY;
    CHECK_EQ_INT(mounts_parse_options("rw", &f, data, sizeof(data)), 0);
    CHECK_EQ_INT(f, 0);
    CHECK_STR(data, "");
    CHECK_EQ_INT(mounts_parse_options("", &f, data, sizeof(data)), 0);
    CHECK_EQ_INT(mounts_parse_options("averyveryverylongoption=1", &f, data, 8), -1);
}

TEST(mounts_host_sources_follow_the_rule)
{
    char out[256];

    CHECK_EQ_INT(mounts_host_source("tag-per-share", "", "/",
                                    "/data/shared/hermes-homes/h1", out, sizeof(out)), 0);
    CHECK_STR(out, "h1");
    CHECK_EQ_INT(mounts_host_source("tag-per-share", "hm-", "/",
                                    "/data/shared/hermes-homes/h1", out, sizeof(out)), 0);
    CHECK_STR(out, "hm-h1");
    CHECK_EQ_INT(mounts_host_source("subpath", "shared", "/data/shared",
                                    "/data/shared/hermes-homes/h1", out, sizeof(out)), 0);
    CHECK_STR(out, MOUNTS_SHARE_DIR "/shared/hermes-homes/h1");
    CHECK_EQ_INT(mounts_host_source("subpath", "shared", "/data/shared", "/data/sharedx/a", out,
                                    sizeof(out)), -1);
    CHECK_EQ_INT(mounts_host_source("subpath", "all", "/", "/x/y", out, sizeof(out)), 0);
    CHECK_STR(out, MOUNTS_SHARE_DIR "/all/x/y");
}
