/* The boot snapshot of users and groups: the parser, its bounds, and
 * how the files are opened. */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "accounts.h"

static const char PASSWD[] = "root:x:0:0:root:/root:/bin/sh\n"
                             "# a comment\n"
                             "agent:x:1000:1001:Agent:/home/agent:/bin/sh\r\n"
                             "broken line\n"
                             "short:x:5:5:gecos\n"
                             "neg:x:-1:0::/:/bin/sh\n"
                             "big:x:4294967295:0::/:/bin/sh\n"
                             "space:x: 7:0::/:/bin/sh\n"
                             "agent:x:2000:2000::/other:/bin/sh\n"
                             "nohome:x:3000:3000::\n"
                             "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin";

static const char GROUP[] = "root:x:0:\n"
                            "agents:x:1001:agent\n"
                            "audio:x:29:pulse,agent,other\n"
                            "video:x:44:agentx,xagent\n"
                            "nomembers:x:50\n"
                            "bad:x:zz:agent\n"
                            "again:x:1001:agent\n";

TEST(accounts_passwd_entries_and_skipped_lines)
{
    struct accounts a = {0};
    uid_t uid;
    gid_t gid;
    char home[64];

    CHECK_EQ_INT(accounts_parse_passwd(&a, PASSWD, strlen(PASSWD)), 0);
    /* root, agent, agent (second), nohome, nobody; the rest are not entries. */
    CHECK_EQ_INT(a.n_users, 5);
    CHECK_EQ_INT(accounts_user(&a, "agent", &uid, &gid, home, sizeof(home)), 0);
    CHECK_EQ_INT(uid, 1000); /* the first entry wins, as with getpwnam */
    CHECK_EQ_INT(gid, 1001);
    CHECK_STR(home, "/home/agent"); /* the \r of a CRLF line is not part of it */
    CHECK_EQ_INT(accounts_user(&a, "nobody", &uid, &gid, home, sizeof(home)), 0);
    CHECK_EQ_INT(uid, 65534);
    CHECK_STR(home, "/nonexistent"); /* the last line has no newline */
    CHECK_EQ_INT(accounts_user(&a, "nohome", &uid, &gid, home, sizeof(home)), 0);
    CHECK_STR(home, "/");
    /* Numbers: an entry gives group and home; none, the number itself. */
    CHECK_EQ_INT(accounts_user(&a, "0", &uid, &gid, home, sizeof(home)), 0);
    CHECK_STR(home, "/root");
    CHECK_EQ_INT(accounts_user(&a, "4242", &uid, &gid, home, sizeof(home)), 0);
    CHECK_EQ_INT(uid, 4242);
    CHECK_EQ_INT(gid, 4242);
    CHECK_STR(home, "/");
    /* Not entries, and not numbers either. */
    static const char *const unknown[] = {"short", "neg", "big", "space", "broken line",
                                          "nobody-here", "-1", "4294967295", " 7", "7x", ""};
    for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
        errno = 0;
        CHECK_EQ_INT(accounts_user(&a, unknown[i], &uid, &gid, home, sizeof(home)), -1);
        CHECK_EQ_INT(errno, ENOENT);
    }
    /* A long home is cut to the caller's buffer, never past it. */
    char small[5];
    CHECK_EQ_INT(accounts_user(&a, "agent", &uid, &gid, small, sizeof(small)), 0);
    CHECK_STR(small, "/hom");
    accounts_free(&a);
    CHECK_EQ_INT(a.n_users, 0);
}

TEST(accounts_groups_and_members)
{
    struct accounts a = {0};
    gid_t gid, out[4];

    CHECK_EQ_INT(accounts_parse_group(&a, GROUP, strlen(GROUP)), 0);
    CHECK_EQ_INT(a.n_groups, 6);
    CHECK_EQ_INT(accounts_group(&a, "agents", &gid), 0);
    CHECK_EQ_INT(gid, 1001);
    CHECK_EQ_INT(accounts_group(&a, "nomembers", &gid), 0);
    CHECK_EQ_INT(gid, 50);
    CHECK_EQ_INT(accounts_group(&a, "77", &gid), 0);
    CHECK_EQ_INT(gid, 77);
    CHECK_EQ_INT(accounts_group(&a, "bad", &gid), -1);
    CHECK_EQ_INT(accounts_group(&a, "missing", &gid), -1);
    /* Exact names only (not agentx, xagent); the primary group not twice. */
    size_t n = accounts_member_groups(&a, "agent", 1001, out, 4);
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_INT(out[0], 29);
    CHECK_EQ_INT(accounts_member_groups(&a, "agent", 0, out, 4), 3);
    CHECK_EQ_INT(accounts_member_groups(&a, "agent", 0, out, 2), 2); /* bounded by max */
    CHECK_EQ_INT(accounts_member_groups(&a, "other", 0, out, 4), 1);
    CHECK_EQ_INT(accounts_member_groups(&a, "nobody", 0, out, 4), 0);
    accounts_free(&a);
}

TEST(accounts_nul_byte_line_is_skipped)
{
    static const char text[] = "root:x:0:0::/root:/bin/sh\nev\0il:x:0:0::/:/bin/sh\nme:x:9:9::/m:\n";
    struct accounts a = {0};
    uid_t uid;
    gid_t gid;
    char home[16];

    CHECK_EQ_INT(accounts_parse_passwd(&a, text, sizeof(text) - 1), 0);
    CHECK_EQ_INT(a.n_users, 2);
    CHECK_EQ_INT(accounts_user(&a, "ev", &uid, &gid, home, sizeof(home)), -1);
    CHECK_EQ_INT(accounts_user(&a, "me", &uid, &gid, home, sizeof(home)), 0);
    CHECK_EQ_INT(uid, 9);
    accounts_free(&a);
}

TEST(accounts_bounds_refuse_the_whole_file)
{
    struct accounts a = {0};
    uid_t uid;
    gid_t gid;
    char home[16];
    const char *line = "u:x:1:1::/:/bin/sh\n"; /* 19 bytes */
    size_t ll = strlen(line);

    /* Exactly the most entries: fine. One more: the file is refused. */
    char *text = malloc(ll * (ACCOUNTS_MAX_ENTRIES + 1));
    for (size_t i = 0; i <= ACCOUNTS_MAX_ENTRIES; i++)
        memcpy(text + i * ll, line, ll);
    CHECK_EQ_INT(accounts_parse_passwd(&a, text, ll * ACCOUNTS_MAX_ENTRIES), 0);
    CHECK_EQ_INT(a.n_users, ACCOUNTS_MAX_ENTRIES);
    CHECK_STR(a.pw_problem, "");
    errno = 0;
    CHECK_EQ_INT(accounts_parse_passwd(&a, text, ll * (ACCOUNTS_MAX_ENTRIES + 1)), -1);
    CHECK_EQ_INT(errno, E2BIG);
    CHECK_EQ_INT(a.n_users, 0);
    CHECK_STR(a.pw_problem, "more than 8192 entries");
    CHECK_EQ_INT(accounts_user(&a, "u", &uid, &gid, home, sizeof(home)), -1);
    CHECK_EQ_INT(accounts_parse_group(&a, text, ll * (ACCOUNTS_MAX_ENTRIES + 1)), -1);
    CHECK_STR(a.gr_problem, "more than 8192 entries");
    free(text);

    /* Past the byte bound, even with few entries (comments). */
    text = malloc(ACCOUNTS_FILE_MAX + 1);
    memset(text, '#', ACCOUNTS_FILE_MAX + 1);
    memcpy(text, "u:x:1:1::/:/bin/sh\n", ll);
    text[ACCOUNTS_FILE_MAX] = '\n';
    CHECK_EQ_INT(accounts_parse_passwd(&a, text, ACCOUNTS_FILE_MAX), 0);
    CHECK_EQ_INT(a.n_users, 1);
    errno = 0;
    CHECK_EQ_INT(accounts_parse_passwd(&a, text, ACCOUNTS_FILE_MAX + 1), -1);
    CHECK_EQ_INT(errno, EFBIG);
    CHECK_EQ_INT(a.n_users, 0);
    CHECK_STR(a.pw_problem, "larger than 1048576 bytes");
    free(text);
    accounts_free(&a);
}

static void write_file(const char *path, const char *text, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    CHECK(fd >= 0);
    CHECK(write(fd, text, len) == (ssize_t)len);
    close(fd);
}

TEST(accounts_read_opens_safely)
{
    char dir[] = "/tmp/hearth-unit-accountsXXXXXX", pw[96], gr[96], link[96], fifo[96], big[96];
    struct accounts a = {0};
    uid_t uid;
    gid_t gid;
    char home[32];

    CHECK(mkdtemp(dir) != NULL);
    snprintf(pw, sizeof(pw), "%s/passwd", dir);
    snprintf(gr, sizeof(gr), "%s/group", dir);
    snprintf(link, sizeof(link), "%s/link", dir);
    snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
    snprintf(big, sizeof(big), "%s/big", dir);
    write_file(pw, PASSWD, strlen(PASSWD));
    write_file(gr, GROUP, strlen(GROUP));

    CHECK_EQ_INT(accounts_read(&a, pw, gr), 0);
    CHECK_EQ_INT(a.n_users, 5);
    CHECK_EQ_INT(a.n_groups, 6);
    /* Read once: rewriting the file changes nothing already read. */
    write_file(pw, "nobody:x:0:0::/root:/bin/sh\n", 28);
    CHECK_EQ_INT(accounts_user(&a, "nobody", &uid, &gid, home, sizeof(home)), 0);
    CHECK_EQ_INT(uid, 65534);

    /* Absent: an empty table, no problem. */
    char absent[128];
    snprintf(absent, sizeof(absent), "%s/none", dir);
    CHECK_EQ_INT(accounts_read(&a, absent, NULL), 0);
    CHECK_EQ_INT(a.n_users, 0);
    CHECK_STR(a.pw_problem, "");
    CHECK_EQ_INT(a.n_groups, 6); /* NULL leaves the other table alone */

    /* A symbolic link is not followed. */
    CHECK(symlink(pw, link) == 0);
    CHECK_EQ_INT(accounts_read(&a, link, NULL), -1);
    CHECK_EQ_INT(a.n_users, 0);
    CHECK_CONTAINS(a.pw_problem, "symbolic link");

    /* A FIFO would block a reader: refused without opening it for read. */
    CHECK(mkfifo(fifo, 0600) == 0);
    CHECK_EQ_INT(accounts_read(&a, NULL, fifo), -1);
    CHECK_EQ_INT(a.n_groups, 0);
    CHECK(a.gr_problem[0] != '\0');

    /* A directory is not a file either. */
    CHECK_EQ_INT(accounts_read(&a, dir, NULL), -1);
    CHECK(a.pw_problem[0] != '\0');

    /* One byte past the bound: refused whole. */
    char *text = malloc(ACCOUNTS_FILE_MAX + 1);
    memset(text, '#', ACCOUNTS_FILE_MAX + 1);
    memcpy(text, "u:x:1:1::/:/bin/sh\n", 19);
    write_file(big, text, ACCOUNTS_FILE_MAX + 1);
    CHECK_EQ_INT(accounts_read(&a, big, NULL), -1);
    CHECK_EQ_INT(a.n_users, 0);
    CHECK_STR(a.pw_problem, "larger than 1048576 bytes");
    CHECK(truncate(big, ACCOUNTS_FILE_MAX) == 0);
    CHECK_EQ_INT(accounts_read(&a, big, NULL), 0);
    CHECK_EQ_INT(a.n_users, 1);
    free(text);
    accounts_free(&a);

    unlink(pw);
    unlink(gr);
    unlink(link);
    unlink(fifo);
    unlink(big);
    rmdir(dir);
}

TEST(accounts_snapshot_is_empty_before_boot)
{
    /* The unit binary never boots: no name resolves, numbers still do,
     * and nothing reads /etc/passwd behind the caller's back. */
    uid_t uid;
    gid_t gid;
    char home[16];

    CHECK_EQ_INT(accounts_user(accounts_snapshot(), "root", &uid, &gid, home, sizeof(home)), -1);
    CHECK_EQ_INT(accounts_user(accounts_snapshot(), "0", &uid, &gid, home, sizeof(home)), 0);
    CHECK_EQ_INT(uid, 0);
}
