/* env_files parsing and identity lookup without NSS. */
#include "unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "launch.h"

static void free_env(char **env, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(env[i]);
    free(env);
}

TEST(env_file_forms)
{
    const char *text = "# comment\n\nA=1\nexport B=two words  \nC='single $x # kept'\n"
                       "D=\"dq \\\"esc\\\" \\n\"\nE=bare # trailing comment\nF=\r\nA=override\n";
    char **env = NULL;
    size_t n = 0;
    char err[256] = "";

    CHECK_EQ_INT(launch_parse_env(text, strlen(text), "f", &env, &n, err, sizeof(err)), 0);
    CHECK_STR(err, "");
    CHECK_EQ_INT(n, 6);
    if (n == 6) {
        CHECK_STR(env[0], "A=override");
        CHECK_STR(env[1], "B=two words");
        CHECK_STR(env[2], "C=single $x # kept");
        CHECK_STR(env[3], "D=dq \"esc\" \n");
        CHECK_STR(env[4], "E=bare");
        CHECK_STR(env[5], "F=");
    }
    free_env(env, n);
}

TEST(env_file_errors_name_file_and_line)
{
    static const struct { const char *text; const char *msg; } bad[] = {
        {"A=1\nno equals here\n", "f:2: expected KEY=VALUE"},
        {"1A=x\n", "f:1: expected KEY=VALUE"},
        {"A=\"open\n", "f:1: unterminated quote"},
        {"A='x' y\n", "f:1: text after the closing quote"},
        {"A-B=1\n", "f:1: expected KEY=VALUE"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char **env = NULL;
        size_t n = 0;
        char err[256] = "";
        CHECK_EQ_INT(launch_parse_env(bad[i].text, strlen(bad[i].text), "f", &env, &n, err, sizeof(err)), -1);
        CHECK_STR(err, bad[i].msg);
        free_env(env, n);
    }
}

TEST(user_and_group_lookup_from_files)
{
    char pw[] = "/tmp/hearth-unit-passwdXXXXXX", gr[] = "/tmp/hearth-unit-groupXXXXXX";
    int fd = mkstemp(pw);
    const char *p = "root:x:0:0:root:/root:/bin/sh\nagent:x:1000:1001:Agent:/home/agent:/bin/sh\nbroken line\n";
    CHECK(write(fd, p, strlen(p)) == (ssize_t)strlen(p));
    close(fd);
    fd = mkstemp(gr);
    const char *g = "root:x:0:\nagents:x:1001:agent\n";
    CHECK(write(fd, g, strlen(g)) == (ssize_t)strlen(g));
    close(fd);

    uid_t uid;
    gid_t gid;
    char home[64];
    CHECK_EQ_INT(launch_lookup_user(pw, "agent", &uid, &gid, home, sizeof(home)), 0);
    CHECK_EQ_INT(uid, 1000);
    CHECK_EQ_INT(gid, 1001);
    CHECK_STR(home, "/home/agent");
    CHECK_EQ_INT(launch_lookup_user(pw, "0", &uid, &gid, home, sizeof(home)), 0);
    CHECK_STR(home, "/root");
    CHECK_EQ_INT(launch_lookup_user(pw, "4242", &uid, &gid, home, sizeof(home)), 0);
    CHECK_EQ_INT(uid, 4242);
    CHECK_EQ_INT(launch_lookup_user(pw, "nobody-here", &uid, &gid, home, sizeof(home)), -1);
    CHECK_EQ_INT(launch_lookup_group(gr, "agents", &gid), 0);
    CHECK_EQ_INT(gid, 1001);
    CHECK_EQ_INT(launch_lookup_group(gr, "missing", &gid), -1);
    unlink(pw);
    unlink(gr);
}

TEST(env_file_nul_byte_refused)
{
    static const char text[] = "A=1\nB=x\0y\n";
    char **env = NULL;
    size_t n = 0;
    char err[256] = "";

    CHECK_EQ_INT(launch_parse_env(text, sizeof(text) - 1, "f", &env, &n, err, sizeof(err)), -1);
    CHECK_STR(err, "f:2: NUL byte");
    CHECK_EQ_INT(n, 1);
    free_env(env, n);
}
