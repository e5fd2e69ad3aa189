/* env_files parsing (identity lookup: test_accounts.c). */
#include "unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "err.h"
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
    struct err err = {0};

    CHECK_EQ_INT(launch_parse_env(text, strlen(text), "f", &env, &n, &err), 0);
    CHECK_STR(err.msg, "");
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
        struct err err = {0};
        CHECK_EQ_INT(launch_parse_env(bad[i].text, strlen(bad[i].text), "f", &env, &n, &err), -1);
        CHECK_STR(err.msg, bad[i].msg);
        free_env(env, n);
    }
}

TEST(env_file_nul_byte_refused)
{
    static const char text[] = "A=1\nB=x\0y\n";
    char **env = NULL;
    size_t n = 0;
    struct err err = {0};

    CHECK_EQ_INT(launch_parse_env(text, sizeof(text) - 1, "f", &env, &n, &err), -1);
    CHECK_STR(err.msg, "f:2: NUL byte");
    CHECK_EQ_INT(n, 1);
    free_env(env, n);
}
