/* The skills overlay reconcile on temporary trees: every rule of the
 * spec's section 6, and the glob matcher behind "ignore". */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cJSON.h>

#include "err.h"
#include "skills.h"
#include "skills_priv.h"

struct trees {
    char root[64], pub[128], priv[128];
};

static void mk(const char *dir, const char *name)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    CHECK(mkdir(p, 0755) == 0);
}

static void skill(const char *dir, const char *rel);

static void touch(const char *dir, const char *name, const char *text)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void setup(struct trees *t)
{
    snprintf(t->root, sizeof(t->root), "/tmp/hearth-skills-XXXXXX");
    CHECK(mkdtemp(t->root) != NULL);
    snprintf(t->pub, sizeof(t->pub), "%s/public", t->root);
    snprintf(t->priv, sizeof(t->priv), "%s/private", t->root);
    CHECK(mkdir(t->pub, 0755) == 0);
    /* The rules of a flat overlay: every top-level entry a skill. The
     * category tests below set depth 2 themselves. */
    skills_layout(SKILLS_MARKER, 1);
}

static void teardown(struct trees *t)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", t->root);
    CHECK(system(cmd) == 0);
}

/* The link text at priv/name, or "" when it is not a link. */
static const char *link_of(const struct trees *t, const char *name, char *buf, size_t n)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", t->priv, name);
    ssize_t r = readlink(p, buf, n - 1);
    buf[r < 0 ? 0 : r] = '\0';
    return buf;
}

static bool exists(const struct trees *t, const char *name)
{
    char p[512];
    struct stat s;
    snprintf(p, sizeof(p), "%s/%s", t->priv, name);
    return lstat(p, &s) == 0;
}

static const char *const ignore[] = {"._*", ".DS_Store", NULL};

TEST(skills_new_public_skills_linked_and_private_created)
{
    struct trees t;
    struct skills_counts c;
    char buf[512], want[512];
    struct err err;

    setup(&t);
    mk(t.pub, "alpha");
    mk(t.pub, "beta");
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, NULL, &err), 0);
    CHECK_EQ_INT(c.created, 2);
    CHECK_EQ_INT(c.public_n, 2);
    snprintf(want, sizeof(want), "%s/alpha", t.pub);
    CHECK_STR(link_of(&t, "alpha", buf, sizeof(buf)), want);
    /* A second run changes nothing. */
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, NULL, &err), 0);
    CHECK_EQ_INT(c.created, 0);
    CHECK_EQ_INT(c.linked, 2);
    CHECK_EQ_INT(c.removed, 0);
    /* A skill published later is picked up. */
    mk(t.pub, "gamma");
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, NULL, &err), 0);
    CHECK_EQ_INT(c.created, 1);
    CHECK(exists(&t, "gamma"));
    CHECK(!exists(&t, SKILLS_TMP_LINK));
    teardown(&t);
}

TEST(skills_private_wins_and_is_never_touched)
{
    struct trees t;
    struct skills_counts c;
    char buf[512];
    struct err err;
    struct stat before, after;

    setup(&t);
    mk(t.pub, "alpha");
    mk(t.pub, "notes");
    mk(t.pub, "other");
    CHECK(mkdir(t.priv, 0755) == 0);
    mk(t.priv, "alpha");                  /* a private skill of the same name */
    touch(t.priv, "notes", "mine\n");     /* a regular file named like a public skill */
    char p[512];
    snprintf(p, sizeof(p), "%s/other", t.priv);
    CHECK(symlink("/somewhere/else", p) == 0); /* a link of the agent's own */
    snprintf(p, sizeof(p), "%s/notes", t.priv);
    CHECK(stat(p, &before) == 0);
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, NULL, &err), 0);
    CHECK_EQ_INT(c.shadowed, 3);
    CHECK_EQ_INT(c.created, 0);
    CHECK_EQ_INT(c.removed, 0);
    CHECK(stat(p, &after) == 0);
    CHECK(S_ISREG(after.st_mode));
    CHECK_EQ_INT(after.st_ino, before.st_ino);
    CHECK_EQ_INT(after.st_mtime, before.st_mtime);
    CHECK_STR(link_of(&t, "other", buf, sizeof(buf)), "/somewhere/else");
    snprintf(p, sizeof(p), "%s/alpha", t.priv);
    struct stat s;
    CHECK(lstat(p, &s) == 0 && S_ISDIR(s.st_mode));
    teardown(&t);
}

TEST(skills_stale_links_removed_others_kept)
{
    struct trees t;
    struct skills_counts c;
    char p[512], q[512];
    struct err err;

    setup(&t);
    mk(t.pub, "alpha");
    mk(t.pub, "beta");
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, NULL, &err), 0);
    /* The public skill goes away: its link goes too. */
    snprintf(p, sizeof(p), "%s/beta", t.pub);
    CHECK(rmdir(p) == 0);
    /* A dangling link that does not point into public is the agent's. */
    snprintf(q, sizeof(q), "%s/mine", t.priv);
    CHECK(symlink("/nonexistent/thing", q) == 0);
    /* A link under another name into a deeper public path that is gone. */
    snprintf(q, sizeof(q), "%s/deep", t.priv);
    snprintf(p, sizeof(p), "%s/alpha/gone", t.pub);
    CHECK(symlink(p, q) == 0);
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, NULL, &err), 0);
    CHECK_EQ_INT(c.removed, 2);
    CHECK(!exists(&t, "beta"));
    CHECK(!exists(&t, "deep"));
    CHECK(exists(&t, "mine"));
    CHECK(exists(&t, "alpha"));
    teardown(&t);
}

TEST(skills_ignored_names_never_linked_and_unlinked_when_ignored_later)
{
    struct trees t;
    struct skills_counts c;
    struct err err;
    static const char *const more[] = {"._*", ".DS_Store", "draft-*", NULL};

    setup(&t);
    mk(t.pub, "._foo");
    touch(t.pub, ".DS_Store", "x");
    mk(t.pub, "draft-1");
    mk(t.pub, "real");
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, NULL, &err), 0);
    CHECK_EQ_INT(c.ignored, 2);
    CHECK(!exists(&t, "._foo"));
    CHECK(!exists(&t, ".DS_Store"));
    CHECK(exists(&t, "draft-1"));
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, more, false, &c, NULL, NULL, &err), 0);
    CHECK_EQ_INT(c.ignored, 3);
    CHECK_EQ_INT(c.removed, 1);
    CHECK(!exists(&t, "draft-1"));
    CHECK(exists(&t, "real"));
    teardown(&t);
}

TEST(skills_nothing_written_outside_private)
{
    struct trees t;
    struct skills_counts c;
    struct err err;

    setup(&t);
    mk(t.pub, "alpha");
    /* public read-only for everyone (root ignores modes: count entries). */
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, NULL, &err), 0);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "test $(ls -A '%s' | wc -l) -eq 1 && test $(ls -A '%s' | wc -l) -eq 2",
             t.pub, t.root);
    CHECK(system(cmd) == 0);
    teardown(&t);
}

TEST(skills_unreadable_public_changes_nothing)
{
    struct trees t;
    struct skills_counts c;
    char p[512];
    struct err err;

    setup(&t);
    mk(t.pub, "alpha");
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, NULL, &err), 0);
    /* The share is gone (an unmounted, missing directory): keep the links. */
    snprintf(p, sizeof(p), "%s/alpha", t.pub);
    CHECK(rmdir(p) == 0);
    CHECK(rmdir(t.pub) == 0);
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, NULL, &err), -1);
    CHECK_CONTAINS(err.msg, "unable to open");
    CHECK(exists(&t, "alpha"));
    teardown(&t);
}

TEST(skills_dry_run_lists_without_changing)
{
    struct trees t;
    struct skills_counts c;
    struct skills_lists l;
    struct err err;

    setup(&t);
    skill(t.pub, "alpha");
    skill(t.pub, "beta");
    mk(t.pub, "._x");
    CHECK(mkdir(t.priv, 0755) == 0);
    skill(t.priv, "beta");
    mk(t.priv, "own"); /* not a skill: no marker */
    l.public_ = cJSON_CreateArray();
    l.private_ = cJSON_CreateArray();
    l.linked = cJSON_CreateArray();
    l.shadowed = cJSON_CreateArray();
    l.ignored = cJSON_CreateArray();
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, true, &c, &l, NULL, &err), 0);
    CHECK_EQ_INT(c.created, 1); /* alpha would be linked */
    CHECK(!exists(&t, "alpha"));
    CHECK_EQ_INT(cJSON_GetArraySize(l.public_), 2);
    CHECK_EQ_INT(cJSON_GetArraySize(l.shadowed), 1);
    CHECK_STR(cJSON_GetObjectItem(cJSON_GetArrayItem(l.shadowed, 0), "path")->valuestring, "beta");
    CHECK_STR(cJSON_GetObjectItem(cJSON_GetArrayItem(l.shadowed, 0), "by")->valuestring, "beta");
    CHECK_EQ_INT(cJSON_GetArraySize(l.ignored), 1);
    CHECK_EQ_INT(cJSON_GetArraySize(l.private_), 1);
    CHECK_STR(cJSON_GetObjectItem(cJSON_GetArrayItem(l.private_, 0), "name")->valuestring, "beta");
    CHECK_EQ_INT(cJSON_GetArraySize(l.linked), 0);
    cJSON_Delete(l.public_);
    cJSON_Delete(l.private_);
    cJSON_Delete(l.linked);
    cJSON_Delete(l.shadowed);
    cJSON_Delete(l.ignored);
    teardown(&t);
}

TEST(skills_leftover_temp_link_cleaned)
{
    struct trees t;
    struct skills_counts c;
    char p[512];
    struct err err;

    setup(&t);
    mk(t.pub, "alpha");
    CHECK(mkdir(t.priv, 0755) == 0);
    /* A crash between symlink and rename left this behind. */
    snprintf(p, sizeof(p), "%s/%s", t.priv, SKILLS_TMP_LINK);
    CHECK(symlink("/x/alpha", p) == 0);
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, NULL, &err), 0);
    CHECK(!exists(&t, SKILLS_TMP_LINK));
    CHECK(exists(&t, "alpha"));
    teardown(&t);
}

TEST(skills_fork_gives_an_editable_private_copy)
{
    struct trees t;
    struct skills_counts c;
    char p[512], buf[64];
    struct err err;
    struct stat s;

    setup(&t);
    mk(t.pub, "alpha");
    snprintf(p, sizeof(p), "%s/alpha", t.pub);
    touch(p, "SKILL.md", "public text\n");
    mk(p, "sub");
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, NULL, &err), 0);
    CHECK_EQ_INT(skills_fork_at(t.pub, t.priv, "alpha", &err), 0);
    snprintf(p, sizeof(p), "%s/alpha", t.priv);
    CHECK(lstat(p, &s) == 0 && S_ISDIR(s.st_mode));
    snprintf(p, sizeof(p), "%s/alpha/SKILL.md", t.priv);
    FILE *f = fopen(p, "r+");
    CHECK(f != NULL);
    if (f) {
        CHECK(fgets(buf, sizeof(buf), f) != NULL);
        CHECK_STR(buf, "public text\n");
        fclose(f);
    }
    touch(t.priv, "alpha/SKILL.md", "edited\n");
    /* The public copy is untouched, and the fork now shadows it. */
    snprintf(p, sizeof(p), "%s/alpha/SKILL.md", t.pub);
    f = fopen(p, "r");
    CHECK(f && fgets(buf, sizeof(buf), f));
    if (f)
        fclose(f);
    CHECK_STR(buf, "public text\n");
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, NULL, &err), 0);
    CHECK_EQ_INT(c.shadowed, 1);
    CHECK(!exists(&t, SKILLS_TMP_FORK));
    /* A private skill cannot be forked again; an unknown one is refused. */
    CHECK_EQ_INT(skills_fork_at(t.pub, t.priv, "alpha", &err), -1);
    CHECK_CONTAINS(err.msg, "already private");
    CHECK_EQ_INT(skills_fork_at(t.pub, t.priv, "nope", &err), -1);
    CHECK_CONTAINS(err.msg, "no linked skill");
    CHECK_EQ_INT(skills_fork_at(t.pub, t.priv, "../x", &err), -1);
    CHECK_CONTAINS(err.msg, "name:");
    teardown(&t);
}

TEST(skills_glob_matches_like_a_shell)
{
    CHECK(skills_glob("._*", "._foo"));
    CHECK(!skills_glob("._*", "_foo"));
    CHECK(skills_glob(".DS_Store", ".DS_Store"));
    CHECK(!skills_glob(".DS_Store", ".DS_Storex"));
    CHECK(skills_glob(".*", ".hidden"));
    CHECK(!skills_glob(".*", "visible"));
    CHECK(skills_glob("*", ".x"));
    CHECK(skills_glob("a?c", "abc"));
    CHECK(!skills_glob("a?c", "ac"));
    CHECK(skills_glob("*.bak", "x.y.bak"));
    CHECK(!skills_glob("*.bak", "x.bak.y"));
    CHECK(skills_glob("[a-c]x", "bx"));
    CHECK(!skills_glob("[!a-c]x", "bx"));
    CHECK(skills_glob("[!a-c]x", "dx"));
    CHECK(skills_glob("\\*", "*"));
    CHECK(!skills_glob("\\*", "a"));
    CHECK(skills_glob("[", "["));
    CHECK(skills_glob("*a*b*", "xxaxxbxx"));
    CHECK(!skills_glob("*a*b", "xxaxxbxx"));
}

TEST(skills_cache_skips_readlink_but_sees_replaced_links)
{
    struct trees t;
    struct skills_counts c;
    struct skills_cache *k = skills_cache_new();
    char p[512], q[512];
    struct err err;

    setup(&t);
    mk(t.pub, "alpha");
    mk(t.pub, "beta");
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, k, &err), 0);
    CHECK_EQ_INT(c.created, 2);
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, k, &err), 0);
    CHECK_EQ_INT(c.linked, 2);
    /* The agent replaces alpha's link with its own: a new inode, so the
     * cache does not vouch for it and it shadows the public skill. */
    snprintf(p, sizeof(p), "%s/alpha", t.priv);
    snprintf(q, sizeof(q), "%s/alpha.new", t.priv);
    CHECK(symlink("/elsewhere", q) == 0);
    CHECK(rename(q, p) == 0);
    /* beta's public skill goes: its cached link is removed all the same. */
    snprintf(p, sizeof(p), "%s/beta", t.pub);
    CHECK(rmdir(p) == 0);
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, k, &err), 0);
    CHECK_EQ_INT(c.linked, 0);
    CHECK_EQ_INT(c.shadowed, 1);
    CHECK_EQ_INT(c.removed, 1);
    CHECK(!exists(&t, "beta"));
    char buf[64];
    CHECK_STR(link_of(&t, "alpha", buf, sizeof(buf)), "/elsewhere");
    skills_cache_free(k);
    teardown(&t);
}

TEST(skills_fork_of_a_one_file_skill)
{
    struct trees t;
    struct skills_counts c;
    char p[512], buf[64];
    struct err err;
    struct stat s;

    setup(&t);
    touch(t.pub, "quick.md", "one file\n");
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, NULL, &err), 0);
    CHECK_EQ_INT(skills_fork_at(t.pub, t.priv, "quick.md", &err), 0);
    snprintf(p, sizeof(p), "%s/quick.md", t.priv);
    CHECK(lstat(p, &s) == 0 && S_ISREG(s.st_mode));
    FILE *f = fopen(p, "r");
    CHECK(f && fgets(buf, sizeof(buf), f));
    if (f)
        fclose(f);
    CHECK_STR(buf, "one file\n");
    CHECK(!exists(&t, SKILLS_TMP_FORK));
    teardown(&t);
}

/* skills.fork follows the agent's link only beneath public: '..' out of
 * it, a link inside public, and a private directory that is itself a
 * link are refused, and nothing outside is read or written. */
TEST(skills_fork_stays_beneath_public_and_private)
{
    struct trees t;
    struct skills_counts c;
    char p[512], q[600];
    struct err err;
    struct stat s;
    setup(&t);
    mk(t.pub, "alpha");
    touch(t.pub, "alpha/SKILL.md", "public\n");
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, NULL, &err), 0);
    snprintf(p, sizeof(p), "%s/out", t.root);
    CHECK(mkdir(p, 0700) == 0);
    touch(p, "secret", "root only\n");
    /* priv/esc -> pub/../out */
    snprintf(q, sizeof(q), "%s/../out", t.pub);
    snprintf(p, sizeof(p), "%s/esc", t.priv);
    CHECK(symlink(q, p) == 0);
    CHECK_EQ_INT(skills_fork_at(t.pub, t.priv, "esc", &err), -1);
    CHECK_CONTAINS(err.msg, "leaves its directory");
    CHECK(lstat(p, &s) == 0 && S_ISLNK(s.st_mode));
    /* A link inside public leading out: not followed. */
    snprintf(q, sizeof(q), "%s/out", t.root);
    snprintf(p, sizeof(p), "%s/hop", t.pub);
    CHECK(symlink(q, p) == 0);
    snprintf(q, sizeof(q), "%s/hop", t.pub);
    snprintf(p, sizeof(p), "%s/hop", t.priv);
    CHECK(symlink(q, p) == 0);
    CHECK_EQ_INT(skills_fork_at(t.pub, t.priv, "hop", &err), -1);
    CHECK_CONTAINS(err.msg, "symbolic link");
    CHECK(!exists(&t, SKILLS_TMP_FORK));
    /* private renamed and replaced by a link: refused, not written through. */
    snprintf(p, sizeof(p), "%s/private.old", t.root);
    CHECK(rename(t.priv, p) == 0);
    snprintf(p, sizeof(p), "%s/out", t.root);
    CHECK(symlink(p, t.priv) == 0);
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, NULL, &err), -1);
    CHECK_CONTAINS(err.msg, "symbolic link");
    CHECK_EQ_INT(skills_fork_at(t.pub, t.priv, "alpha", &err), -1);
    CHECK_CONTAINS(err.msg, "symbolic link");
    snprintf(p, sizeof(p), "%s/out/alpha", t.root);
    CHECK(lstat(p, &s) < 0);
    teardown(&t);
}

/* ------------------------------------------------------------------ */
/* The two-level layout: skills/<category>/<skill>/SKILL.md. */

static void skill(const char *dir, const char *rel)
{
    char p[512], cmd[700];
    snprintf(p, sizeof(p), "%s/%s", dir, rel);
    snprintf(cmd, sizeof(cmd), "mkdir -p '%s' && echo '# %s' > '%s/SKILL.md'", p, rel, p);
    CHECK(system(cmd) == 0);
}

static bool is_dir(const struct trees *t, const char *name)
{
    char p[512];
    struct stat s;
    snprintf(p, sizeof(p), "%s/%s", t->priv, name);
    return lstat(p, &s) == 0 && S_ISDIR(s.st_mode);
}

TEST(skills_categories_merged_skill_by_skill_private_wins)
{
    struct trees t;
    struct skills_counts c;
    char buf[512], want[512];
    struct err err;

    setup(&t);
    skills_layout(SKILLS_MARKER, 2);
    skill(t.pub, "solo");          /* flat beside categories */
    skill(t.pub, "devops/deploy");
    skill(t.pub, "devops/backup");
    skill(t.pub, "data/query");
    skill(t.pub, ".hub/cache");
    CHECK(mkdir(t.priv, 0755) == 0);
    skill(t.priv, "devops/backup"); /* the agent's own, same category and name */
    skill(t.priv, "mine/tool");     /* a private-only category */
    touch(t.priv, ".bundled_manifest", "x\n");
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, NULL, &err), 0);
    CHECK_EQ_INT(c.public_n, 4);
    CHECK_EQ_INT(c.created, 3);
    CHECK_EQ_INT(c.shadowed, 1);
    CHECK_EQ_INT(c.categories, 2);
    CHECK_EQ_INT(c.cat_created, 1);
    snprintf(want, sizeof(want), "%s/devops/deploy", t.pub);
    CHECK_STR(link_of(&t, "devops/deploy", buf, sizeof(buf)), want);
    CHECK_STR(link_of(&t, "devops/backup", buf, sizeof(buf)), "");
    CHECK(is_dir(&t, "devops/backup"));
    CHECK(is_dir(&t, "devops") && !exists(&t, "devops/" SKILLS_CATEGORY_MARK)); /* the agent's */
    CHECK(is_dir(&t, "data") && exists(&t, "data/" SKILLS_CATEGORY_MARK));     /* hearth's */
    snprintf(want, sizeof(want), "%s/data/query", t.pub);
    CHECK_STR(link_of(&t, "data/query", buf, sizeof(buf)), want);
    CHECK(!exists(&t, ".hub"));
    CHECK(exists(&t, "mine/tool/SKILL.md"));
    /* A second run is a no-op. */
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, NULL, &err), 0);
    CHECK_EQ_INT(c.created + c.removed + c.cat_created + c.cat_removed, 0);
    CHECK_EQ_INT(c.linked, 3);

    /* The agent creates a skill in a category hearth made. */
    skill(t.priv, "data/notes");
    /* Public skills go: their links go; hearth's empty category goes; a
     * category with the agent's skill in it, or the agent's own, stays. */
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s/devops/deploy' '%s/data'", t.pub, t.pub);
    CHECK(system(cmd) == 0);
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, NULL, &err), 0);
    CHECK(!exists(&t, "devops/deploy"));
    CHECK(!exists(&t, "data/query"));
    CHECK(exists(&t, "data/notes/SKILL.md"));
    CHECK(exists(&t, "devops/backup/SKILL.md"));
    CHECK(exists(&t, "mine/tool/SKILL.md"));
    CHECK(exists(&t, ".bundled_manifest"));
    /* Once the agent's skill is gone, the category hearth made goes too. */
    snprintf(cmd, sizeof(cmd), "rm -rf '%s/data/notes'", t.priv);
    CHECK(system(cmd) == 0);
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, NULL, &err), 0);
    CHECK_EQ_INT(c.cat_removed, 1);
    CHECK(!exists(&t, "data"));
    /* devops is the agent's: never removed, even with public devops gone. */
    snprintf(cmd, sizeof(cmd), "rm -rf '%s/devops' '%s/devops/backup'", t.pub, t.priv);
    CHECK(system(cmd) == 0);
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, NULL, &err), 0);
    CHECK(is_dir(&t, "devops"));
    teardown(&t);
}

TEST(skills_category_linked_whole_is_converted)
{
    struct trees t;
    struct skills_counts c;
    char buf[512], want[512], p[512];
    struct err err;

    setup(&t);
    skills_layout(SKILLS_MARKER, 2);
    skill(t.pub, "devops/deploy");
    skill(t.pub, "devops/backup");
    CHECK(mkdir(t.priv, 0755) == 0);
    /* What an older hearth made: the category linked whole. */
    snprintf(want, sizeof(want), "%s/devops", t.pub);
    snprintf(p, sizeof(p), "%s/devops", t.priv);
    CHECK(symlink(want, p) == 0);
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, NULL, &err), 0);
    CHECK_EQ_INT(c.cat_converted, 1);
    CHECK(is_dir(&t, "devops"));
    CHECK(exists(&t, "devops/" SKILLS_CATEGORY_MARK));
    snprintf(want, sizeof(want), "%s/devops/backup", t.pub);
    CHECK_STR(link_of(&t, "devops/backup", buf, sizeof(buf)), want);
    CHECK(!exists(&t, SKILLS_TMP_CATEGORY));
    /* And now the agent can create a skill in it. */
    skill(t.priv, "devops/mine");
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, NULL, &err), 0);
    CHECK_EQ_INT(c.linked, 2);
    CHECK(exists(&t, "devops/mine/SKILL.md"));
    teardown(&t);
}

TEST(skills_planted_category_link_is_never_followed)
{
    struct trees t;
    struct skills_counts c;
    char buf[512], p[512], outside[512];
    struct err err;

    setup(&t);
    skills_layout(SKILLS_MARKER, 2);
    skill(t.pub, "devops/deploy");
    CHECK(mkdir(t.priv, 0755) == 0);
    snprintf(outside, sizeof(outside), "%s/outside", t.root);
    CHECK(mkdir(outside, 0755) == 0);
    snprintf(p, sizeof(p), "%s/devops", t.priv);
    CHECK(symlink(outside, p) == 0);
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, NULL, &err), 0);
    CHECK_EQ_INT(c.shadowed, 1);
    CHECK_STR(link_of(&t, "devops", buf, sizeof(buf)), outside);
    snprintf(p, sizeof(p), "%s/deploy", outside);
    struct stat s;
    CHECK(lstat(p, &s) < 0);
    teardown(&t);
}

TEST(skills_interrupted_category_run_is_finished)
{
    struct trees t;
    struct skills_counts c;
    char buf[512], want[512], p[512];
    struct err err;

    setup(&t);
    skills_layout(SKILLS_MARKER, 2);
    skill(t.pub, "devops/deploy");
    skill(t.pub, "devops/backup");
    CHECK(mkdir(t.priv, 0755) == 0);
    /* A crash before a category got its name, and one inside a category
     * between a link and its rename. */
    mk(t.priv, SKILLS_TMP_CATEGORY);
    touch(t.priv, SKILLS_TMP_CATEGORY "/" SKILLS_CATEGORY_MARK, "");
    mk(t.priv, "devops");
    touch(t.priv, "devops/" SKILLS_CATEGORY_MARK, "");
    snprintf(p, sizeof(p), "%s/devops/" SKILLS_TMP_LINK, t.priv);
    CHECK(symlink("/nowhere", p) == 0);
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, NULL, &err), 0);
    CHECK(!exists(&t, SKILLS_TMP_CATEGORY));
    CHECK(!exists(&t, "devops/" SKILLS_TMP_LINK));
    snprintf(want, sizeof(want), "%s/devops/deploy", t.pub);
    CHECK_STR(link_of(&t, "devops/deploy", buf, sizeof(buf)), want);
    CHECK_EQ_INT(c.created, 2);
    teardown(&t);
}

TEST(skills_depth_bounds_categories)
{
    struct trees t;
    struct skills_counts c;
    char buf[512], want[512];
    struct err err;

    setup(&t);
    skills_layout(SKILLS_MARKER, 2);
    skill(t.pub, "a/b/c"); /* a category in a category: deeper than 2 */
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, NULL, &err), 0);
    CHECK(is_dir(&t, "a"));
    snprintf(want, sizeof(want), "%s/a/b", t.pub);
    CHECK_STR(link_of(&t, "a/b", buf, sizeof(buf)), want); /* linked whole at the bound */
    skills_layout(SKILLS_MARKER, 3);
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, NULL, &err), 0);
    CHECK_EQ_INT(c.cat_converted, 1);
    snprintf(want, sizeof(want), "%s/a/b/c", t.pub);
    CHECK_STR(link_of(&t, "a/b/c", buf, sizeof(buf)), want);
    /* depth 1: the flat overlay, and a custom marker. */
    skills_layout("README", 1);
    struct trees u;
    setup(&u);
    skills_layout("README", 2);
    mk(u.pub, "cat");
    mk(u.pub, "cat/s");
    touch(u.pub, "cat/s/README", "x\n");
    CHECK_EQ_INT(skills_reconcile(u.pub, u.priv, ignore, false, &c, NULL, NULL, &err), 0);
    snprintf(want, sizeof(want), "%s/cat/s", u.pub);
    CHECK_STR(link_of(&u, "cat/s", buf, sizeof(buf)), want);
    teardown(&u);
    teardown(&t);
}

TEST(skills_list_reports_categories_and_shadows)
{
    struct trees t;
    struct skills_counts c;
    struct skills_lists l = {0};
    struct err err;

    setup(&t);
    skills_layout(SKILLS_MARKER, 2);
    skill(t.pub, "devops/deploy");
    skill(t.pub, "devops/backup");
    skill(t.pub, "data/query");
    CHECK(mkdir(t.priv, 0755) == 0);
    skill(t.priv, "devops/backup");
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, NULL, &err), 0);
    l.public_ = cJSON_CreateArray();
    l.shadowed = cJSON_CreateArray();
    l.linked = cJSON_CreateArray();
    l.categories = cJSON_CreateArray();
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, true, &c, &l, NULL, &err), 0);
    CHECK_EQ_INT(cJSON_GetArraySize(l.public_), 3);
    CHECK_STR(cJSON_GetObjectItem(cJSON_GetArrayItem(l.shadowed, 0), "path")->valuestring,
              "devops/backup");
    CHECK_EQ_INT(cJSON_GetArraySize(l.linked), 2);
    CHECK_EQ_INT(cJSON_GetArraySize(l.categories), 2);
    for (int i = 0; i < 2; i++) {
        cJSON *o = cJSON_GetArrayItem(l.categories, i);
        const char *n = cJSON_GetObjectItem(o, "name")->valuestring;
        const char *how = cJSON_GetObjectItem(o, "private")->valuestring;
        CHECK_STR(how, strcmp(n, "devops") == 0 ? "own" : "hearth");
    }
    cJSON_Delete(l.public_);
    cJSON_Delete(l.shadowed);
    cJSON_Delete(l.linked);
    cJSON_Delete(l.categories);
    teardown(&t);
}

TEST(skills_fork_of_a_category_skill)
{
    struct trees t;
    struct skills_counts c;
    char p[512], outside[512];
    struct err err;

    setup(&t);
    skills_layout(SKILLS_MARKER, 2);
    skill(t.pub, "devops/deploy");
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, NULL, &err), 0);
    CHECK_EQ_INT(skills_fork_at(t.pub, t.priv, "devops/deploy", &err), 0);
    CHECK(is_dir(&t, "devops/deploy"));
    CHECK(exists(&t, "devops/deploy/SKILL.md"));
    CHECK(skills_fork_at(t.pub, t.priv, "devops/../x", &err) < 0);
    CHECK(skills_fork_at(t.pub, t.priv, "a/b/c", &err) < 0); /* past the depth */
    /* A category the agent turned into a link is not followed. */
    snprintf(outside, sizeof(outside), "%s/out", t.root);
    CHECK(mkdir(outside, 0755) == 0);
    snprintf(p, sizeof(p), "%s/out/x", t.root);
    CHECK(symlink(t.pub, p) == 0);
    snprintf(p, sizeof(p), "%s/evil", t.priv);
    CHECK(symlink(outside, p) == 0);
    CHECK(skills_fork_at(t.pub, t.priv, "evil/x", &err) < 0);
    skills_layout(SKILLS_MARKER, 1);
    teardown(&t);
}

TEST(skills_cached_skill_that_becomes_a_category_is_converted)
{
    struct trees t;
    struct skills_counts c;
    struct skills_cache *k = skills_cache_new();
    char buf[512], want[512], p[600];
    struct err err;
    int runs = 0;

    setup(&t);
    skills_layout(SKILLS_MARKER, 2);
    skill(t.pub, "tools");
    skill(t.pub, "tools/inner");
    for (int i = 0; i < 3; i++) /* linked, then cached */
        CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, k, &err), 0);
    snprintf(want, sizeof(want), "%s/tools", t.pub);
    CHECK_STR(link_of(&t, "tools", buf, sizeof(buf)), want);
    /* The host turns the skill into a category: within 16 cheap runs the
     * link becomes a directory of per-skill links. */
    snprintf(p, sizeof(p), "%s/tools/SKILL.md", t.pub);
    CHECK(unlink(p) == 0);
    while (!is_dir(&t, "tools") && runs++ < 16)
        CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, k, &err), 0);
    CHECK(is_dir(&t, "tools"));
    CHECK(runs <= 16);
    snprintf(want, sizeof(want), "%s/tools/inner", t.pub);
    CHECK_STR(link_of(&t, "tools/inner", buf, sizeof(buf)), want);
    skills_cache_free(k);
    teardown(&t);
}

/* The cache as a reconcile run in a child hands it back: the bytes load
 * into a cache that encodes to the same bytes and judges links as the
 * original would; anything cut short or malformed is refused and leaves
 * the cache as it was. */
TEST(skills_cache_survives_its_bytes_and_refuses_broken_ones)
{
    struct trees t;
    struct skills_counts c;
    struct skills_cache *k = skills_cache_new(), *k2 = skills_cache_new();
    char p[512], q[512];
    struct err err;
    char *b = NULL, *b2 = NULL, *b3 = NULL;
    size_t n = 0, n2 = 0, n3 = 0;

    setup(&t);
    mk(t.pub, "alpha");
    mk(t.pub, "beta");
    mk(t.pub, "gamma");
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, k, &err), 0);
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, k, &err), 0);
    CHECK_EQ_INT(c.linked, 3);
    CHECK_EQ_INT(skills_cache_encode(k, 1 << 20, &b, &n), 0);
    CHECK(n > 8 + 3 * 12);
    CHECK_EQ_INT(skills_cache_encode(k, n - 1, &b3, &n3), -1); /* over its bound */
    CHECK(b3 == NULL);
    /* Every cut, a wrong count, and a key length of 0 or past the end
     * are refused. */
    for (size_t cut = 0; cut < n; cut++)
        CHECK_EQ_INT(skills_cache_load(k2, b, cut), -1);
    char *bad = malloc(n);
    memcpy(bad, b, n);
    uint32_t huge = 1u << 30;
    memcpy(bad + 8 + 8, &huge, 4);
    CHECK_EQ_INT(skills_cache_load(k2, bad, n), -1);
    uint32_t zero = 0;
    memcpy(bad + 8 + 8, &zero, 4);
    CHECK_EQ_INT(skills_cache_load(k2, bad, n), -1);
    memcpy(bad, b, n);
    uint32_t more = 4; /* says 4 links, holds 3 */
    memcpy(bad + 4, &more, 4);
    CHECK_EQ_INT(skills_cache_load(k2, bad, n), -1);
    free(bad);
    CHECK_EQ_INT(skills_cache_load(k2, b, n), 0);
    CHECK_EQ_INT(skills_cache_encode(k2, 1 << 20, &b2, &n2), 0);
    CHECK(n2 == n && memcmp(b, b2, n) == 0);
    free(b2);
    CHECK_EQ_INT(skills_cache_load(k2, b, n - 1), -1); /* refused: k2 as it was */
    CHECK_EQ_INT(skills_cache_encode(k2, 1 << 20, &b2, &n2), 0);
    CHECK(n2 == n && memcmp(b, b2, n) == 0);
    /* Judged as the original would: the agent's replacement of alpha
     * (a new inode) shadows, beta's cached link goes with its public
     * skill, gamma stays linked. */
    snprintf(p, sizeof(p), "%s/alpha", t.priv);
    snprintf(q, sizeof(q), "%s/alpha.new", t.priv);
    CHECK(symlink("/elsewhere", q) == 0);
    CHECK(rename(q, p) == 0);
    snprintf(p, sizeof(p), "%s/beta", t.pub);
    CHECK(rmdir(p) == 0);
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, k2, &err), 0);
    CHECK_EQ_INT(c.linked, 1);
    CHECK_EQ_INT(c.shadowed, 1);
    CHECK_EQ_INT(c.removed, 1);
    CHECK(!exists(&t, "beta"));
    /* A reset forgets the links: the next run still judges by reading. */
    skills_cache_reset(k2);
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, k2, &err), 0);
    CHECK_EQ_INT(c.linked, 1);
    free(b);
    free(b2);
    skills_cache_free(k);
    skills_cache_free(k2);
    teardown(&t);
}

/* ------------------------------------------------------------------ */
/* Names: a public skill loses to the agent's own skill of its name,
 * wherever that one sits, and of two public skills of one name the
 * first by path is linked. */

static void front(const char *dir, const char *rel, const char *name)
{
    char p[512];
    skill(dir, rel);
    snprintf(p, sizeof(p), "%s/%s", dir, rel);
    char text[300];
    snprintf(text, sizeof(text), "---\nname: %s\ndescription: x\n---\n# body\n", name);
    touch(p, "SKILL.md", text);
}

TEST(skills_front_matter_name)
{
    char n[256];
    const char *ok = "---\ndescription: a: b\nname:  \"lab-notebook\"  \n---\nname: no\n";
    CHECK(skills_front_name(ok, strlen(ok), n, sizeof(n)));
    CHECK_STR(n, "lab-notebook");
    const char *plain = "---\r\nname: notes # a comment\r\n---\r\n";
    CHECK(skills_front_name(plain, strlen(plain), n, sizeof(n)));
    CHECK_STR(n, "notes");
    const char *none[] = {"# no front matter\nname: x\n", "---\ndescription: d\n---\nname: x\n",
                          "---\nname: a/b\n---\n", "---\nname: ..\n---\n", "---\nname:\n---\n",
                          "---\nname: cut", "---\n  name: indented\n---\n"};
    for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++)
        CHECK(!skills_front_name(none[i], strlen(none[i]), n, sizeof(n)));
}

TEST(skills_names_shadow_and_clash)
{
    struct trees t;
    struct skills_counts c;
    struct skills_lists l = {0};
    char p[512];
    struct err err;

    setup(&t);
    skills_layout(SKILLS_MARKER, 2);
    skill(t.pub, "research/lab-notebook");
    skill(t.pub, "tools/journal");
    skill(t.pub, "arxiv");
    skill(t.pub, "zoo/arxiv");       /* a clash with the flat arxiv */
    front(t.pub, "zoo/paper", "journal-x");
    skill(t.pub, "zz/journal-x");    /* a clash by front-matter name */
    CHECK(mkdir(t.priv, 0755) == 0);
    skill(t.priv, "software-development/lab-notebook");
    skill(t.priv, "my-notes");
    front(t.priv, "my-notes", "journal");
    /* A link hearth made earlier for a skill that now loses: removed. */
    snprintf(p, sizeof(p), "%s/tools", t.priv);
    CHECK(mkdir(p, 0755) == 0);
    snprintf(p, sizeof(p), "%s/tools/journal", t.pub);
    char lp[512];
    snprintf(lp, sizeof(lp), "%s/tools/journal", t.priv);
    CHECK(symlink(p, lp) == 0);
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, NULL, &err), 0);
    CHECK_EQ_INT(c.shadowed, 2);
    CHECK_EQ_INT(c.clashes, 2);
    CHECK_EQ_INT(c.removed, 1);
    CHECK(c.names_digest != 0);
    CHECK(!exists(&t, "research/lab-notebook"));
    CHECK(!exists(&t, "tools/journal"));
    CHECK(exists(&t, "arxiv") && !exists(&t, "zoo/arxiv"));
    CHECK(exists(&t, "zoo/paper") && !exists(&t, "zz/journal-x"));
    CHECK_CONTAINS(skills_last_report, "research/lab-notebook (name lab-notebook) not linked");
    l.shadowed = cJSON_CreateArray();
    l.clashes = cJSON_CreateArray();
    l.private_ = cJSON_CreateArray();
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, true, &c, &l, NULL, &err), 0);
    CHECK_EQ_INT(c.removed + c.created, 0);
    cJSON *o = cJSON_GetArrayItem(l.shadowed, 0);
    CHECK_STR(cJSON_GetObjectItem(o, "path")->valuestring, "research/lab-notebook");
    CHECK_STR(cJSON_GetObjectItem(o, "by")->valuestring, "software-development/lab-notebook");
    o = cJSON_GetArrayItem(l.shadowed, 1);
    CHECK_STR(cJSON_GetObjectItem(o, "by")->valuestring, "my-notes");
    o = cJSON_GetArrayItem(l.clashes, 0);
    CHECK_STR(cJSON_GetObjectItem(o, "path")->valuestring, "zoo/arxiv");
    CHECK_STR(cJSON_GetObjectItem(o, "by")->valuestring, "arxiv");
    o = cJSON_GetArrayItem(l.clashes, 1);
    CHECK_STR(cJSON_GetObjectItem(o, "path")->valuestring, "zz/journal-x");
    CHECK_STR(cJSON_GetObjectItem(o, "by")->valuestring, "zoo/paper");
    CHECK_EQ_INT(cJSON_GetArraySize(l.private_), 2);
    cJSON_Delete(l.shadowed);
    cJSON_Delete(l.clashes);
    cJSON_Delete(l.private_);
    /* The private skill gone: the public one is linked again. */
    snprintf(p, sizeof(p), "rm -rf '%s/software-development'", t.priv);
    CHECK(system(p) == 0);
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, NULL, &err), 0);
    CHECK(exists(&t, "research/lab-notebook"));
    CHECK_EQ_INT(c.shadowed, 1);
    teardown(&t);
}

/* Who wins a clash is the first path in order, whatever order the
 * filesystem lists the names in: 300 pairs made in a scrambled order,
 * each pair's two skills claiming one name. */
TEST(skills_names_sorted_whatever_the_listing_order)
{
    struct trees t;
    struct skills_counts c;
    struct err err;
    char a[32], b[32], name[32];

    setup(&t);
    skills_layout(SKILLS_MARKER, 2);
    CHECK(mkdir(t.priv, 0755) == 0);
    for (unsigned k = 0; k < 300; k++) {
        unsigned i = (k * 7919u) % 300; /* 7919 is prime: every i once */
        snprintf(name, sizeof(name), "n%03u", i);
        snprintf(a, sizeof(a), "a%03u", i);
        snprintf(b, sizeof(b), "b%03u", 299 - i);
        front(t.pub, b, name);
        front(t.pub, a, name);
    }
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, NULL, &err), 0);
    CHECK_EQ_INT(c.clashes, 300);
    for (unsigned i = 0; i < 300; i++) {
        snprintf(a, sizeof(a), "a%03u", i);
        snprintf(b, sizeof(b), "b%03u", 299 - i);
        CHECK(exists(&t, a) && !exists(&t, b));
    }
    teardown(&t);
}

/* A marker read once is vouched for by its stat: the next run opens
 * none (a name changed in the cache behind the file's back is what it
 * uses), a marker rewritten is read again, one changed too recently to
 * trust its stat is never remembered, and a dry run leaves the cache
 * as it was. */
TEST(skills_marker_read_once_then_vouched_by_its_stat)
{
    struct trees t;
    struct skills_counts c;
    struct skills_cache *k = skills_cache_new(), *k2 = skills_cache_new();
    struct err err;
    char p[512];

    setup(&t);
    skills_layout(SKILLS_MARKER, 2);
    front(t.pub, "research/notebook", "lab-notebook");
    front(t.pub, "tools/journal", "journal");
    CHECK(mkdir(t.priv, 0755) == 0);
    front(t.priv, "my-notes", "journal");
    skills_mark_racy_ns = 0;
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, k, &err), 0);
    CHECK_EQ_INT(c.created, 1);
    CHECK_EQ_INT(c.shadowed, 1);
    CHECK_EQ_INT((int)k->marks.n, 3);
    struct mark *m = NULL;
    for (size_t i = 0; i < k->marks.n; i++)
        if (!k->marks.v[i].priv && strcmp(k->marks.v[i].path, "research/notebook") == 0)
            m = &k->marks.v[i];
    CHECK(m != NULL && strcmp(m->name, "lab-notebook") == 0);
    /* Not read again: the cached name is the one judged. */
    free(m->name);
    m->name = strdup("journal");
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, k, &err), 0);
    CHECK_EQ_INT(c.shadowed, 2);
    CHECK_EQ_INT(c.removed, 1);
    CHECK(!exists(&t, "research/notebook"));
    /* A dry run reads what it must and changes no mark. */
    size_t before = k->marks.n;
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, true, &c, NULL, k, &err), 0);
    CHECK_EQ_INT((int)k->marks.n, (int)before);
    /* Rewritten (another size): read again, its real name linked. */
    snprintf(p, sizeof(p), "%s/research/notebook", t.pub);
    touch(p, "SKILL.md", "---\nname: lab-notebook\ndescription: longer now\n---\n");
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, k, &err), 0);
    CHECK_EQ_INT(c.created, 1);
    CHECK_EQ_INT(c.shadowed, 1);
    CHECK(exists(&t, "research/notebook"));
    CHECK(k->changed);
    /* Nothing new: the cache keeps what it had, links and marks, and says
     * so (the walk child then sends nothing back but its run count). The
     * link made last run is read once, then vouched for. */
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, k, &err), 0);
    CHECK(k->changed);
    size_t links = k->links.n;
    unsigned runs = k->runs;
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, k, &err), 0);
    CHECK(!k->changed);
    CHECK_EQ_INT((int)k->links.n, (int)links);
    CHECK_EQ_INT((int)k->marks.n, 3);
    CHECK_EQ_INT((int)k->runs, (int)runs + 1);
    CHECK_EQ_INT(c.linked, 1);
    /* The marks travel with the links, and a cut anywhere in them is
     * refused; without room for them they are left out, not the links. */
    char *b = NULL, *b2 = NULL;
    size_t nb = 0, nb2 = 0;
    struct skills_cache *k3 = skills_cache_new();
    CHECK_EQ_INT(skills_cache_encode(k, 1 << 20, &b, &nb), 0);
    for (size_t cut = 0; cut < nb; cut++)
        CHECK_EQ_INT(skills_cache_load(k3, b, cut), -1);
    CHECK_EQ_INT(skills_cache_load(k3, b, nb), 0);
    CHECK_EQ_INT((int)k3->marks.n, 3);
    CHECK(skills_marks_find(&k3->marks, false, "research/notebook") != NULL);
    CHECK(skills_marks_find(&k3->marks, true, "research/notebook") == NULL);
    CHECK_EQ_INT(skills_cache_encode(k3, 1 << 20, &b2, &nb2), 0);
    CHECK(nb2 == nb && memcmp(b, b2, nb) == 0);
    free(b2);
    CHECK_EQ_INT(skills_cache_encode(k, nb - 1, &b2, &nb2), 0);
    CHECK_EQ_INT(skills_cache_load(k3, b2, nb2), 0);
    CHECK_EQ_INT((int)k3->marks.n, 0);
    CHECK_EQ_INT((int)k3->links.n, (int)k->links.n);
    free(b);
    free(b2);
    skills_cache_free(k3);
    /* A link gone is dropped from the cache. */
    snprintf(p, sizeof(p), "%s/research/notebook", t.priv);
    CHECK(unlink(p) == 0);
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, k, &err), 0);
    CHECK_EQ_INT(c.created, 1);
    CHECK(k->changed);
    /* Written just now: judged by reading, never remembered. */
    skills_mark_racy_ns = MARK_RACY_NS;
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, k2, &err), 0);
    CHECK_EQ_INT(c.linked, 1);
    CHECK_EQ_INT(c.shadowed, 1);
    CHECK_EQ_INT((int)k2->marks.n, 0);
    skills_cache_free(k);
    skills_cache_free(k2);
    teardown(&t);
}

/* ------------------------------------------------------------------ */
/* The check: a run over trees that have not changed since the last
 * whole run is answered by the stats of what that run read. */

/* The window the tests trust stamps after: longer than any clock tick a
 * local filesystem stamps with, short enough to wait out. */
#define TEST_WINDOW_NS 20000000LL

static void settle(void)
{
    usleep(25000);
}

/* A whole run (which records), then one the check must answer with the
 * same counts, returned in *c. */
static void settled_run(const struct trees *t, struct skills_cache *k, struct skills_counts *c)
{
    struct skills_counts c2;
    struct err err;

    settle();
    CHECK_EQ_INT(skills_reconcile(t->pub, t->priv, ignore, false, c, NULL, k, &err), 0);
    unsigned before = k->replayed;
    CHECK_EQ_INT(skills_reconcile(t->pub, t->priv, ignore, false, &c2, NULL, k, &err), 0);
    CHECK_EQ_INT(k->replayed, before + 1);
    CHECK(!k->changed);
    CHECK(!c->checked && c2.checked);
    c2.checked = false;
    CHECK(memcmp(c, &c2, sizeof(c2)) == 0);
}

/* A run the check must refuse: it reads, and sees what changed. */
static void read_run(const struct trees *t, struct skills_cache *k, struct skills_counts *c)
{
    struct err err;
    unsigned before = k->replayed;
    CHECK_EQ_INT(skills_reconcile(t->pub, t->priv, ignore, false, c, NULL, k, &err), 0);
    CHECK_EQ_INT(k->replayed, before);
}

/* Rewrites dir/SKILL.md with text of the same size and puts its mtime
 * back: only the ctime tells. */
static void rewrite_in_place(const char *dir, const char *rel, const char *text)
{
    char p[512];
    struct stat s;
    snprintf(p, sizeof(p), "%s/%s/SKILL.md", dir, rel);
    CHECK(stat(p, &s) == 0);
    CHECK_EQ_INT(strlen(text), s.st_size);
    int fd = open(p, O_WRONLY);
    CHECK(fd >= 0);
    CHECK_EQ_INT(pwrite(fd, text, strlen(text), 0), strlen(text));
    struct timespec ts[2] = {s.st_atim, s.st_mtim};
    CHECK(futimens(fd, ts) == 0);
    close(fd);
}

/* Every change the overlay acts on makes the next run read again: a
 * marker rewritten in place (same size, mtime put back), a skill added
 * to a category, the agent's own entry in place of a link, the agent's
 * marker renamed in place, a public skill renamed, a marker appearing
 * in a directory that had none, a category of hearth's swapped for a
 * link by the agent (never followed), other settings. A dry run always
 * reads. The check travels in the cache's bytes. */
TEST(skills_check_answers_a_settled_tree_and_sees_every_change)
{
    struct trees t;
    struct skills_counts c;
    struct skills_cache *k = skills_cache_new(), *k2 = skills_cache_new();
    struct err err;
    char p[512], q[512];

    setup(&t);
    skills_layout(SKILLS_MARKER, 2);
    skills_mark_racy_ns = TEST_WINDOW_NS;
    front(t.pub, "research/notebook", "lab-notebook");
    skill(t.pub, "research/paper");
    snprintf(p, sizeof(p), "%s/research/assets", t.pub);
    CHECK(mkdir(p, 0755) == 0); /* neither skill nor category */
    skill(t.pub, "arxiv");
    mk(t.pub, "._junk");
    CHECK(mkdir(t.priv, 0755) == 0);
    front(t.priv, "my-notes", "journal");
    skill(t.priv, "mine/idea");
    mk(t.priv, ".cache");
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, k, &err), 0);
    CHECK_EQ_INT(c.created, 4);
    CHECK(k->check.step == NULL); /* it wrote: nothing to vouch for */
    settled_run(&t, k, &c);
    CHECK_EQ_INT(c.linked, 4);
    CHECK_EQ_INT(c.shadowed + c.clashes + c.created + c.removed, 0);

    /* The bytes: loaded, the check answers as the original; any cut or
     * a broken step is refused. */
    char *b = NULL;
    size_t nb = 0;
    CHECK_EQ_INT(skills_cache_encode(k, 1 << 20, &b, &nb), 0);
    for (size_t cut = 0; cut < nb; cut++)
        CHECK_EQ_INT(skills_cache_load(k2, b, cut), -1);
    size_t steps = k->check.n * sizeof(struct check_step);
    b[nb - steps] = 42; /* the first step's op */
    CHECK_EQ_INT(skills_cache_load(k2, b, nb), -1);
    b[nb - steps] = CHECK_ROOT;
    memcpy(b + nb - steps + 8, &(uint32_t){1u << 30}, 4); /* its stamp */
    CHECK_EQ_INT(skills_cache_load(k2, b, nb), -1);
    free(b);
    CHECK_EQ_INT(skills_cache_encode(k, 1 << 20, &b, &nb), 0);
    CHECK_EQ_INT(skills_cache_load(k2, b, nb), 0);
    free(b);
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, k2, &err), 0);
    CHECK_EQ_INT(k2->replayed, 1);
    CHECK_EQ_INT(c.linked, 4);

    /* A dry run lists what is on disk: never answered by the check. */
    struct skills_lists l = {0};
    l.linked = cJSON_CreateArray();
    unsigned before = k->replayed;
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, true, &c, &l, k, &err), 0);
    CHECK_EQ_INT(cJSON_GetArraySize(l.linked), 3);
    CHECK_EQ_INT(k->replayed, before);
    cJSON_Delete(l.linked);
    /* Other settings: read. */
    static const char *const more[] = {"._*", ".DS_Store", "zzz", NULL};
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, more, false, &c, NULL, k, &err), 0);
    CHECK_EQ_INT(k->replayed, before);

    /* A marker rewritten in place, same size, mtime put back: its name
     * is now the agent's skill's, so its link goes. */
    settled_run(&t, k, &c);
    rewrite_in_place(t.pub, "research/notebook", "---\nname: journal     \ndescription: x\n---\n# body\n");
    read_run(&t, k, &c);
    CHECK_EQ_INT(c.shadowed, 1);
    CHECK_EQ_INT(c.removed, 1);
    CHECK(!exists(&t, "research/notebook"));

    /* A skill added to a category. */
    settled_run(&t, k, &c);
    skill(t.pub, "research/new");
    read_run(&t, k, &c);
    CHECK_EQ_INT(c.created, 1);
    CHECK(exists(&t, "research/new"));

    /* The agent's own entry in place of a link: it wins. */
    settled_run(&t, k, &c);
    snprintf(p, sizeof(p), "%s/arxiv", t.priv);
    CHECK(unlink(p) == 0 && mkdir(p, 0755) == 0);
    read_run(&t, k, &c);
    CHECK_EQ_INT(c.shadowed, 2);
    CHECK(is_dir(&t, "arxiv"));

    /* The agent's marker renamed in place: the public skill it shadowed
     * is linked again. */
    settled_run(&t, k, &c);
    rewrite_in_place(t.priv, "my-notes", "---\nname: journax\ndescription: x\n---\n# body\n");
    read_run(&t, k, &c);
    CHECK_EQ_INT(c.created, 1);
    CHECK(exists(&t, "research/notebook"));

    /* A public skill renamed. */
    settled_run(&t, k, &c);
    snprintf(p, sizeof(p), "%s/research/paper", t.pub);
    snprintf(q, sizeof(q), "%s/research/paper2", t.pub);
    CHECK(rename(p, q) == 0);
    read_run(&t, k, &c);
    CHECK_EQ_INT(c.created, 1);
    CHECK_EQ_INT(c.removed, 1);
    CHECK(!exists(&t, "research/paper") && exists(&t, "research/paper2"));

    /* A marker in a directory that had none: a skill now, whose name
     * clashes with the flat arxiv, first by path. */
    settled_run(&t, k, &c);
    snprintf(p, sizeof(p), "%s/research/assets", t.pub);
    touch(p, "SKILL.md", "---\nname: arxiv\n---\n");
    read_run(&t, k, &c);
    CHECK_EQ_INT(c.clashes, 1);
    CHECK_EQ_INT(c.removed, 1);
    CHECK(!exists(&t, "research/assets"));

    /* The agent swaps hearth's category for a link to a directory of its
     * own: read, the link is the agent's, nothing is made through it. */
    settled_run(&t, k, &c);
    snprintf(p, sizeof(p), "%s/elsewhere", t.root);
    CHECK(mkdir(p, 0755) == 0);
    snprintf(q, sizeof(q), "rm -rf '%s/research' && ln -s '%s' '%s/research'", t.priv, p, t.priv);
    CHECK(system(q) == 0);
    read_run(&t, k, &c);
    CHECK_EQ_INT(c.linked, 0);
    CHECK(rmdir(p) == 0); /* still empty */

    skills_mark_racy_ns = MARK_RACY_NS;
    skills_cache_free(k);
    skills_cache_free(k2);
    teardown(&t);
}

/* The rule behind the check: a directory whose stamps are within the
 * window of the run that read it is never vouched for, as a marker is
 * not. A filesystem stamps with a clock of some tick (jiffies, whole
 * seconds, 2 s on the coarsest): a second change within the tick of the
 * first leaves the stamps as the run saw them, and only a run that reads
 * would see it. */
TEST(skills_check_never_vouches_for_a_directory_changed_within_its_window)
{
    struct trees t;
    struct skills_counts c;
    struct skills_cache *k = skills_cache_new();
    struct err err;
    struct stat s;
    char p[512];

    /* Both stamps must be older than the window: an mtime put back (a
     * copy that keeps times) still has a fresh ctime. */
    memset(&s, 0, sizeof(s));
    s.st_mtim.tv_sec = 100;
    s.st_ctim.tv_sec = 100;
    CHECK(skills_stamp_settled(&s, 101000000000LL));
    CHECK(!skills_stamp_settled(&s, 100000000000LL));
    s.st_ctim.tv_sec = 200;
    CHECK(!skills_stamp_settled(&s, 101000000000LL));

    setup(&t);
    skills_layout(SKILLS_MARKER, 2);
    skills_mark_racy_ns = TEST_WINDOW_NS;
    skill(t.pub, "research/notebook");
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, k, &err), 0);
    settled_run(&t, k, &c);
    CHECK(k->check.step != NULL);
    /* A change that needs no write (an ignored name), read at once: the
     * run reads it, and keeps no check, its category being in the
     * window. */
    snprintf(p, sizeof(p), "%s/research/._x", t.pub);
    CHECK(mkdir(p, 0755) == 0);
    read_run(&t, k, &c);
    CHECK_EQ_INT(c.created + c.removed, 0);
    CHECK(k->check.step == NULL);
    /* So a second change, which on a coarse clock could keep the stamps
     * that run saw, is read. */
    skill(t.pub, "research/late");
    read_run(&t, k, &c);
    CHECK_EQ_INT(c.created, 1);

    /* Without the window the same run would have vouched for the fresh
     * stamps, and a change within their tick (here: stamps as a coarse
     * clock would leave them) goes unseen: what the window rules out. */
    settled_run(&t, k, &c);
    skills_mark_racy_ns = 0;
    snprintf(p, sizeof(p), "%s/research/._y", t.pub);
    CHECK(mkdir(p, 0755) == 0);
    read_run(&t, k, &c);
    CHECK(k->check.step != NULL);
    skill(t.pub, "research/later");
    snprintf(p, sizeof(p), "%s/research", t.pub);
    CHECK(stat(p, &s) == 0);
    int found = 0;
    for (size_t i = 0; i < k->check.n; i++) {
        struct check_step *st = &k->check.step[i];
        if (st->op == CHECK_DIR && strcmp(k->check.pool + st->a, "research") == 0 &&
            k->check.stamp[st->b].ino == (uint64_t)s.st_ino) {
            k->check.stamp[st->b].mtime_ns = (int64_t)s.st_mtim.tv_sec * 1000000000 + s.st_mtim.tv_nsec;
            k->check.stamp[st->b].ctime_ns = (int64_t)s.st_ctim.tv_sec * 1000000000 + s.st_ctim.tv_nsec;
            found++;
        }
    }
    CHECK_EQ_INT(found, 1);
    unsigned before = k->replayed;
    CHECK_EQ_INT(skills_reconcile(t.pub, t.priv, ignore, false, &c, NULL, k, &err), 0);
    CHECK_EQ_INT(k->replayed, before + 1);
    CHECK(!exists(&t, "research/later"));

    skills_mark_racy_ns = MARK_RACY_NS;
    skills_cache_free(k);
    teardown(&t);
}
