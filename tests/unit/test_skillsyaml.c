/* The editor of Hermes's skills.external_dirs (skills.mode
 * "external_dirs"): each shape of YAML it edits, byte for byte, each one
 * it refuses (with the line), and the file rules on temporary trees. */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"
#include "skillsyaml.h"

#define DIR_ "/opt/hermes-common-skills"

/* One edit: the state, and the output (ADDED) or the error's line and
 * text (ERROR). */
static void edit_case(const char *in, int want, const char *want_out, size_t want_line,
                      const char *want_err)
{
    char *out = NULL;
    struct err err;
    size_t outlen = 0, line = 99;
    int rc = skillsyaml_edit(in, strlen(in), DIR_, &out, &outlen, &line, &err);
    if (rc != want)
        fprintf(stderr, "  input:\n%s\n  state %d (%s), error %s\n", in, rc,
                skillsyaml_state_name(rc), err.msg);
    CHECK_EQ_INT(rc, want);
    if (want == SKILLSYAML_ADDED) {
        CHECK_STR(out, want_out);
        CHECK_EQ_INT(outlen, out ? strlen(out) : 0);
    } else {
        CHECK(out == NULL);
    }
    if (want == SKILLSYAML_ERROR) {
        CHECK_EQ_INT(line, want_line);
        CHECK_CONTAINS(err.msg, want_err);
    }
    free(out);
}

TEST(skillsyaml_no_skills_appends_block)
{
    edit_case("# my config\nmodel:\n  provider: custom   # LAN\n\nagent:\n  x: 1\n",
              SKILLSYAML_ADDED,
              "# my config\nmodel:\n  provider: custom   # LAN\n\nagent:\n  x: 1\n"
              "skills:\n  external_dirs:\n    - " DIR_ "\n",
              0, NULL);
    /* No newline at the end: one is added before the block. */
    edit_case("model: x", SKILLSYAML_ADDED,
              "model: x\nskills:\n  external_dirs:\n    - " DIR_ "\n", 0, NULL);
    /* An empty file, and one of comments only. */
    edit_case("", SKILLSYAML_ADDED, "skills:\n  external_dirs:\n    - " DIR_ "\n", 0, NULL);
    edit_case("---\n# only a comment\n", SKILLSYAML_ADDED,
              "---\n# only a comment\nskills:\n  external_dirs:\n    - " DIR_ "\n", 0, NULL);
    /* A key that only starts with "skills" is another key. */
    edit_case("skills_hub: 1\n", SKILLSYAML_ADDED,
              "skills_hub: 1\nskills:\n  external_dirs:\n    - " DIR_ "\n", 0, NULL);
}

TEST(skillsyaml_mapping_without_key_inserts_with_its_indent)
{
    edit_case("model: x\nskills:   # mine\n    disabled: [a]\n    other: 1\nagent: {}\n",
              SKILLSYAML_ADDED,
              "model: x\nskills:   # mine\n    external_dirs:\n      - " DIR_
              "\n    disabled: [a]\n    other: 1\nagent: {}\n",
              0, NULL);
    /* skills: with nothing under it (null), last line without '\n'. */
    edit_case("a: 1\nskills:", SKILLSYAML_ADDED,
              "a: 1\nskills:\n  external_dirs:\n    - " DIR_ "\n", 0, NULL);
    /* A compact list under another key of skills is not skills itself. */
    edit_case("skills:\n  disabled:\n  - a\n  - b\n", SKILLSYAML_ADDED,
              "skills:\n  external_dirs:\n    - " DIR_ "\n  disabled:\n  - a\n  - b\n", 0, NULL);
    /* A quoted key is the same key. */
    edit_case("\"skills\":\n  a: 1\n", SKILLSYAML_ADDED,
              "\"skills\":\n  external_dirs:\n    - " DIR_ "\n  a: 1\n", 0, NULL);
}

TEST(skillsyaml_block_list_appends_item)
{
    edit_case("skills:\n  external_dirs:\n    - /srv/a   # team\n    # between\n    - '/srv/b'\n"
              "  other: 2\n# tail\n",
              SKILLSYAML_ADDED,
              "skills:\n  external_dirs:\n    - /srv/a   # team\n    # between\n    - '/srv/b'\n"
              "    - " DIR_ "\n  other: 2\n# tail\n",
              0, NULL);
    /* The list at the key's own indentation keeps it. */
    edit_case("skills:\n  external_dirs:\n  - /srv/a\n", SKILLSYAML_ADDED,
              "skills:\n  external_dirs:\n  - /srv/a\n  - " DIR_ "\n", 0, NULL);
    /* An empty (null) external_dirs, and the last line without '\n'. */
    edit_case("skills:\n  external_dirs:", SKILLSYAML_ADDED,
              "skills:\n  external_dirs:\n    - " DIR_ "\n", 0, NULL);
}

TEST(skillsyaml_present_changes_nothing)
{
    edit_case("skills:\n  external_dirs:\n    - " DIR_ "\n", SKILLSYAML_PRESENT, NULL, 0, NULL);
    edit_case("skills:\n  external_dirs:\n    - \"" DIR_ "/\"  # ours\n", SKILLSYAML_PRESENT,
              NULL, 0, NULL);
    edit_case("skills:\n  external_dirs: [/a, '" DIR_ "']\n", SKILLSYAML_PRESENT, NULL, 0, NULL);
}

TEST(skillsyaml_flow_list_rewrites_its_line)
{
    edit_case("skills:\n  external_dirs: [/a, \"/b\"]   # c\n  x: 1\n", SKILLSYAML_ADDED,
              "skills:\n  external_dirs: [/a, \"/b\", " DIR_ "]   # c\n  x: 1\n", 0, NULL);
    edit_case("skills:\n  external_dirs: []\n", SKILLSYAML_ADDED,
              "skills:\n  external_dirs: [" DIR_ "]\n", 0, NULL);
}

TEST(skillsyaml_quotes_a_dir_that_needs_it)
{
    char *out = NULL;
    struct err err;
    size_t len, line;
    const char *in = "skills:\n  external_dirs: []\n";
    CHECK_EQ_INT(skillsyaml_edit(in, strlen(in), "/a b/#c\"d", &out, &len, &line, &err),
                 SKILLSYAML_ADDED);
    CHECK_STR(out, "skills:\n  external_dirs: [\"/a b/#c\\\"d\"]\n");
    free(out);
}

TEST(skillsyaml_refuses_what_it_cannot_read)
{
    edit_case("model: x\nskills: &s\n  a: 1\n", SKILLSYAML_ERROR, NULL, 2, "an anchor");
    edit_case("skills: *s\n", SKILLSYAML_ERROR, NULL, 1, "an alias");
    edit_case("skills: [a]\n", SKILLSYAML_ERROR, NULL, 1, "not a block mapping");
    edit_case("skills: off\n", SKILLSYAML_ERROR, NULL, 1, "a single value");
    edit_case("skills: {external_dirs: []}\n", SKILLSYAML_ERROR, NULL, 1, "a flow mapping");
    edit_case("skills:\n  - a\n", SKILLSYAML_ERROR, NULL, 2, "skills is a list");
    edit_case("skills:\n\ta: 1\n", SKILLSYAML_ERROR, NULL, 2, "a tab");
    edit_case("a: 1\n---\nskills:\n  x: 1\n", SKILLSYAML_ERROR, NULL, 2, "a second document");
    edit_case("a: 1\n...\n", SKILLSYAML_ERROR, NULL, 2, "document end");
    edit_case("%YAML 1.2\n---\na: 1\n", SKILLSYAML_ERROR, NULL, 1, "a directive");
    edit_case("a: 1\nskills:\n  x: 1\nskills:\n  y: 1\n", SKILLSYAML_ERROR, NULL, 4, "twice");
    edit_case("skills:\n  external_dirs: []\n  external_dirs: []\n", SKILLSYAML_ERROR, NULL, 3,
              "twice");
    edit_case("<<: *base\n", SKILLSYAML_ERROR, NULL, 1, "a merge key");
    edit_case("skills:\n  <<: *base\n", SKILLSYAML_ERROR, NULL, 2, "a merge key");
    edit_case("skills:\n  external_dirs: &d\n    - /a\n", SKILLSYAML_ERROR, NULL, 2, "an anchor");
    edit_case("skills:\n  external_dirs:\n    - *d\n", SKILLSYAML_ERROR, NULL, 3, "an alias");
    edit_case("skills:\n  external_dirs: /a\n", SKILLSYAML_ERROR, NULL, 2, "not a list");
    edit_case("skills:\n  external_dirs:\n    a: 1\n", SKILLSYAML_ERROR, NULL, 3, "a mapping");
    edit_case("skills:\n  external_dirs: [/a,\n    /b]\n", SKILLSYAML_ERROR, NULL, 2,
              "does not end on its line");
    edit_case("skills:\n  external_dirs: [[/a]]\n", SKILLSYAML_ERROR, NULL, 2, "nested");
    edit_case("skills:\n  external_dirs:\n    - /a\n      /b\n", SKILLSYAML_ERROR, NULL, 4,
              "several lines");
    edit_case("skills:\n  external_dirs:\n    - |\n      /a\n", SKILLSYAML_ERROR, NULL, 3,
              "not a plain value");
    edit_case("skills:\n  external_dirs:\n    - \"/a\\tb\"\n", SKILLSYAML_ERROR, NULL, 3,
              "an escape");
    edit_case("\"sk\\x69lls\": 1\n", SKILLSYAML_ERROR, NULL, 1, "cannot read");
    edit_case("? skills\n: 1\n", SKILLSYAML_ERROR, NULL, 1, "cannot read");
    edit_case("- a\n- b\n", SKILLSYAML_ERROR, NULL, 1, "not a block mapping");
    edit_case("{skills: {}}\n", SKILLSYAML_ERROR, NULL, 1, "not a block mapping");
    edit_case("  a: 1\n", SKILLSYAML_ERROR, NULL, 1, "indentation 0");
    edit_case("skills:\n    a: 1\n  b: 2\n", SKILLSYAML_ERROR, NULL, 3, "bad indentation");
    edit_case("a: 1\r\nskills:\r\n", SKILLSYAML_ERROR, NULL, 1, "carriage return");
    edit_case("\xef\xbb\xbf" "a: 1\n", SKILLSYAML_ERROR, NULL, 1, "byte order mark");
    /* A NUL byte: not a C string, so the length is given. */
    char *out = NULL;
    struct err err;
    size_t len = 0, line = 0;
    CHECK_EQ_INT(skillsyaml_edit("a: 1\nb\0: 2\n", 11, DIR_, &out, &len, &line, &err),
                 SKILLSYAML_ERROR);
    CHECK_EQ_INT(line, 2);
    CHECK_CONTAINS(err.msg, "NUL");
    CHECK(out == NULL);
}

/* ------------------------------------------------------------------ */
/* The file. */

struct fdir {
    char root[64], path[128];
};

static void fsetup(struct fdir *d)
{
    snprintf(d->root, sizeof(d->root), "/tmp/hearth-yaml-XXXXXX");
    CHECK(mkdtemp(d->root) != NULL);
    snprintf(d->path, sizeof(d->path), "%s/config.yaml", d->root);
}

static void fteardown(struct fdir *d)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d->root);
    CHECK(system(cmd) == 0);
}

static void put(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    CHECK(fchmod(fd, mode) == 0);
    close(fd);
}

static char *slurp(const char *path)
{
    static char buf[8192];
    int fd = open(path, O_RDONLY);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
    if (fd >= 0)
        close(fd);
    buf[n > 0 ? n : 0] = '\0';
    return buf;
}

TEST(skillsyaml_file_edit_keeps_mode_and_owner)
{
    struct fdir d;
    struct stat a, b;
    struct err err;

    fsetup(&d);
    put(d.path, "model: x  # keep\n", 0640);
    CHECK(stat(d.path, &a) == 0);
    /* dry: the state, nothing written */
    CHECK_EQ_INT(skillsyaml_ensure(d.path, DIR_, 0, 0, true, &err), SKILLSYAML_ADDED);
    CHECK_STR(slurp(d.path), "model: x  # keep\n");
    CHECK_EQ_INT(skillsyaml_ensure(d.path, DIR_, 0, 0, false, &err), SKILLSYAML_ADDED);
    CHECK_STR(slurp(d.path), "model: x  # keep\nskills:\n  external_dirs:\n    - " DIR_ "\n");
    CHECK(stat(d.path, &b) == 0);
    CHECK_EQ_INT(b.st_mode & 07777, 0640);
    CHECK_EQ_INT(b.st_uid, a.st_uid);
    CHECK_EQ_INT(b.st_gid, a.st_gid);
    CHECK(b.st_ino != a.st_ino); /* replaced by rename, not written in place */
    /* The second run finds it and leaves the file alone. */
    CHECK_EQ_INT(skillsyaml_ensure(d.path, DIR_, 0, 0, false, &err),
                 SKILLSYAML_PRESENT);
    CHECK(stat(d.path, &a) == 0);
    CHECK_EQ_INT(a.st_ino, b.st_ino);
    /* No temporary left behind. */
    char tmp[200];
    snprintf(tmp, sizeof(tmp), "%s/.config.yaml" SKILLSYAML_TMP_SUFFIX, d.root);
    CHECK(access(tmp, F_OK) < 0 && errno == ENOENT);
    fteardown(&d);
}

TEST(skillsyaml_file_missing_is_created)
{
    struct fdir d;
    struct stat st;
    struct err err;

    fsetup(&d);
    CHECK_EQ_INT(skillsyaml_ensure(d.path, DIR_, getuid(), getgid(), true, &err),
                 SKILLSYAML_CREATED);
    CHECK(access(d.path, F_OK) < 0);
    CHECK_EQ_INT(skillsyaml_ensure(d.path, DIR_, getuid(), getgid(), false, &err),
                 SKILLSYAML_CREATED);
    CHECK_STR(slurp(d.path), "skills:\n  external_dirs:\n    - " DIR_ "\n");
    CHECK(stat(d.path, &st) == 0);
    CHECK_EQ_INT(st.st_mode & 07777, 0600);
    /* A missing directory is not made. */
    char deep[200];
    snprintf(deep, sizeof(deep), "%s/nope/config.yaml", d.root);
    CHECK_EQ_INT(skillsyaml_ensure(deep, DIR_, 0, 0, false, &err), SKILLSYAML_ERROR);
    CHECK_CONTAINS(err.msg, "unable to open its directory");
    fteardown(&d);
}

TEST(skillsyaml_file_hostile)
{
    struct fdir d;
    char other[200], p2[200];
    struct err err;

    fsetup(&d);
    /* A link to another file: never followed, never replaced. */
    snprintf(other, sizeof(other), "%s/victim", d.root);
    put(other, "a: 1\n", 0644);
    CHECK(symlink(other, d.path) == 0);
    CHECK_EQ_INT(skillsyaml_ensure(d.path, DIR_, 0, 0, false, &err), SKILLSYAML_ERROR);
    CHECK_CONTAINS(err.msg, d.path);
    CHECK_STR(slurp(other), "a: 1\n");
    struct stat st;
    CHECK(lstat(d.path, &st) == 0 && S_ISLNK(st.st_mode));
    CHECK(unlink(d.path) == 0);
    /* A hard link to another file. */
    CHECK(link(other, d.path) == 0);
    CHECK_EQ_INT(skillsyaml_ensure(d.path, DIR_, 0, 0, false, &err), SKILLSYAML_ERROR);
    CHECK_CONTAINS(err.msg, "hard links");
    CHECK_STR(slurp(other), "a: 1\n");
    CHECK(unlink(d.path) == 0);
    /* A FIFO (would block a reader) and a directory. */
    CHECK(mkfifo(d.path, 0644) == 0);
    CHECK_EQ_INT(skillsyaml_ensure(d.path, DIR_, 0, 0, false, &err), SKILLSYAML_ERROR);
    CHECK(unlink(d.path) == 0);
    CHECK(mkdir(d.path, 0755) == 0);
    CHECK_EQ_INT(skillsyaml_ensure(d.path, DIR_, 0, 0, false, &err), SKILLSYAML_ERROR);
    CHECK(rmdir(d.path) == 0);
    /* A link in the directory part of the path. */
    snprintf(p2, sizeof(p2), "%s/viadir", d.root);
    CHECK(symlink(d.root, p2) == 0);
    put(d.path, "a: 1\n", 0644);
    char via[256];
    snprintf(via, sizeof(via), "%s/config.yaml", p2);
    CHECK_EQ_INT(skillsyaml_ensure(via, DIR_, 0, 0, false, &err), SKILLSYAML_ERROR);
    CHECK_STR(slurp(d.path), "a: 1\n");
    /* Too large: refused whole, unchanged. */
    char *big = malloc(SKILLSYAML_MAX_BYTES + 16);
    CHECK(big != NULL);
    if (big) {
        memset(big, '#', SKILLSYAML_MAX_BYTES + 8);
        big[SKILLSYAML_MAX_BYTES + 8] = '\0';
        put(d.path, big, 0644);
        free(big);
    }
    CHECK_EQ_INT(skillsyaml_ensure(d.path, DIR_, 0, 0, false, &err), SKILLSYAML_ERROR);
    CHECK_CONTAINS(err.msg, "larger than");
    /* A YAML it cannot read: the error names file and line, no change. */
    put(d.path, "a: 1\nskills: &x\n", 0644);
    CHECK_EQ_INT(skillsyaml_ensure(d.path, DIR_, 0, 0, false, &err), SKILLSYAML_ERROR);
    char want[200];
    snprintf(want, sizeof(want), "%s:2: skills is an anchor", d.path);
    CHECK_CONTAINS(err.msg, want);
    CHECK_STR(slurp(d.path), "a: 1\nskills: &x\n");
    /* A directory planted at the temporary name: an error, no change. */
    put(d.path, "a: 1\n", 0644);
    char tmp[200];
    snprintf(tmp, sizeof(tmp), "%s/.config.yaml" SKILLSYAML_TMP_SUFFIX, d.root);
    CHECK(mkdir(tmp, 0755) == 0);
    CHECK_EQ_INT(skillsyaml_ensure(d.path, DIR_, 0, 0, false, &err), SKILLSYAML_ERROR);
    CHECK_STR(slurp(d.path), "a: 1\n");
    CHECK(rmdir(tmp) == 0);
    /* A stale temporary file is cleared and the edit goes through. */
    put(tmp, "junk", 0644);
    CHECK_EQ_INT(skillsyaml_ensure(d.path, DIR_, 0, 0, false, &err), SKILLSYAML_ADDED);
    CHECK(access(tmp, F_OK) < 0);
    fteardown(&d);
}
