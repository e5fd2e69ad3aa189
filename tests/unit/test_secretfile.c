/* secretfile: finding a secret's line in an env file, making a value,
 * and adding it to the file without touching what was there. */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"
#include "secretfile.h"

#define HAS(text, name) secretfile_has((text), strlen(text), (name))

TEST(secretfile_finds_a_non_empty_line)
{
    CHECK(HAS("API_KEY=abc\n", "API_KEY"));
    CHECK(HAS("# c\nOTHER=1\n  export API_KEY='abc'\n", "API_KEY"));
    CHECK(HAS("export\tAPI_KEY = \"v\"", "API_KEY"));
    CHECK(HAS("API_KEY=v\r\n", "API_KEY"));
    CHECK(!HAS("API_KEY=\n", "API_KEY"));
    CHECK(!HAS("API_KEY=''\nAPI_KEY=\"\"\nAPI_KEY=   \n", "API_KEY"));
    CHECK(!HAS("API_KEY_OLD=abc\nMY_API_KEY=abc\n# API_KEY=abc\n", "API_KEY"));
    CHECK(!HAS("API_KEY\n", "API_KEY"));
    CHECK(!HAS("", "API_KEY"));
    CHECK(HAS("A=1\nAPI_KEY=x", "API_KEY")); /* last line without newline */
}

static bool url_safe(const char *s)
{
    for (; *s; s++)
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
              *s == '-' || *s == '_'))
            return false;
    return true;
}

TEST(secretfile_generates_url_safe_values)
{
    char a[SECRETFILE_CHARS_MAX + 1], b[SECRETFILE_CHARS_MAX + 1];

    CHECK_EQ_INT(secretfile_generate(a, 48), 0);
    CHECK_EQ_INT(secretfile_generate(b, 48), 0);
    CHECK_EQ_INT(strlen(a), 48);
    CHECK(url_safe(a) && url_safe(b));
    CHECK(strcmp(a, b) != 0);
    CHECK_EQ_INT(secretfile_generate(a, SECRETFILE_CHARS_MAX), 0);
    CHECK_EQ_INT(strlen(a), SECRETFILE_CHARS_MAX);
    CHECK_EQ_INT(secretfile_generate(a, SECRETFILE_CHARS_MAX + 1), -1);
}

static char *slurp(const char *path, size_t *len)
{
    static char buf[4096];
    int fd = open(path, O_RDONLY);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n < 0)
        return NULL;
    buf[n] = 0;
    if (len)
        *len = (size_t)n;
    return buf;
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

TEST(secretfile_ensure_makes_appends_and_keeps)
{
    char dir[64] = "/tmp/hearth-secret-XXXXXX", p[128];
    struct err why;
    struct stat st;

    CHECK(mkdtemp(dir) != NULL);
    snprintf(p, sizeof(p), "%s/.env", dir);
    /* Missing: made, 0600, one line. */
    CHECK_EQ_INT(secretfile_ensure(p, "KEY", 40, getuid(), getgid(), &why),
                 SECRETFILE_GENERATED);
    CHECK(stat(p, &st) == 0 && (st.st_mode & 07777) == 0600);
    char *t = slurp(p, NULL);
    CHECK(t && strlen(t) == 4 + 40 + 1 && strncmp(t, "KEY=", 4) == 0 && t[44] == '\n');
    char first[64];
    snprintf(first, sizeof(first), "%s", t ? t : "");
    /* There: never touched again. */
    why.msg[0] = 0;
    CHECK_EQ_INT(secretfile_ensure(p, "KEY", 40, getuid(), getgid(), &why),
                 SECRETFILE_PRESENT);
    CHECK_STR(why.msg, "");
    CHECK_STR(slurp(p, NULL), first);
    /* Another variable in the same file: appended after the first. */
    CHECK_EQ_INT(secretfile_ensure(p, "OTHER", 32, getuid(), getgid(), &why),
                 SECRETFILE_GENERATED);
    t = slurp(p, NULL);
    CHECK(t && strncmp(t, first, strlen(first)) == 0 && strncmp(t + strlen(first), "OTHER=", 6) == 0);
    /* A last line without its newline gets one; the old bytes stay. */
    put(p, "# mine\nA=1");
    chmod(p, 0644);
    CHECK_EQ_INT(secretfile_ensure(p, "KEY", 32, getuid(), getgid(), &why),
                 SECRETFILE_GENERATED);
    t = slurp(p, NULL);
    CHECK(t && strncmp(t, "# mine\nA=1\nKEY=", 15) == 0 && strlen(t) == 15 + 32 + 1);
    CHECK(stat(p, &st) == 0 && (st.st_mode & 07777) == 0600);
    /* No temporary file left beside it. */
    snprintf(p, sizeof(p), "%s/..env.hearth-new", dir);
    CHECK(access(p, F_OK) < 0 && errno == ENOENT);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

TEST(secretfile_ensure_refuses_links_fifos_and_big_files)
{
    char dir[64] = "/tmp/hearth-secret-XXXXXX", p[128], q[128];
    struct err why;

    CHECK(mkdtemp(dir) != NULL);
    snprintf(q, sizeof(q), "%s/victim", dir);
    put(q, "untouched\n");
    snprintf(p, sizeof(p), "%s/link.env", dir);
    CHECK(symlink("victim", p) == 0);
    CHECK_EQ_INT(secretfile_ensure(p, "KEY", 32, getuid(), getgid(), &why), -1);
    CHECK_EQ_INT(errno, ELOOP);
    CHECK_CONTAINS(why.msg, "symbolic link");
    CHECK_STR(slurp(q, NULL), "untouched\n");
    /* A link on the way to it, too. */
    snprintf(p, sizeof(p), "%s/d", dir);
    CHECK(symlink(".", p) == 0);
    snprintf(p, sizeof(p), "%s/d/new.env", dir);
    CHECK_EQ_INT(secretfile_ensure(p, "KEY", 32, getuid(), getgid(), &why), -1);
    CHECK_CONTAINS(why.msg, "its directory: a symbolic link");
    snprintf(p, sizeof(p), "%s/new.env", dir);
    CHECK(access(p, F_OK) < 0);
    /* A FIFO with no writer: refused at once, never waited on. */
    snprintf(p, sizeof(p), "%s/fifo.env", dir);
    CHECK(mkfifo(p, 0600) == 0);
    CHECK_EQ_INT(secretfile_ensure(p, "KEY", 32, getuid(), getgid(), &why), -1);
    CHECK_STR(why.msg, "a FIFO, not a regular file");
    snprintf(p, sizeof(p), "%s/dir.env", dir);
    CHECK(mkdir(p, 0700) == 0);
    CHECK_EQ_INT(secretfile_ensure(p, "KEY", 32, getuid(), getgid(), &why), -1);
    CHECK_STR(why.msg, "a directory, not a regular file");
    snprintf(p, sizeof(p), "%s/big.env", dir);
    int fd = open(p, O_WRONLY | O_CREAT, 0600);
    CHECK(fd >= 0 && ftruncate(fd, SECRETFILE_MAX + 1) == 0);
    close(fd);
    CHECK_EQ_INT(secretfile_ensure(p, "KEY", 32, getuid(), getgid(), &why), -1);
    CHECK_EQ_INT(errno, EFBIG);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}
