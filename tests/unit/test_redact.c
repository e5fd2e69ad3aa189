/* redact: the name rule, the value registry, URL passwords, argv flags,
 * and the JSON walk used by config.get, status and events. */
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "redact.h"
#include "unit.h"

/* Runs redact_text on s; returns a static copy of the result (s itself
 * when nothing changed). */
static const char *red(const char *s)
{
    static char out[4096];
    size_t n = redact_text(s, strlen(s), out, sizeof(out));
    if (n == (size_t)-1)
        return s;
    CHECK_EQ_INT(strlen(out), n);
    return out;
}

TEST(redact_names)
{
    CHECK(redact_name_is_secret("OPENAI_API_KEY"));
    CHECK(redact_name_is_secret("github_token"));
    CHECK(redact_name_is_secret("CLIENT_SECRET"));
    CHECK(redact_name_is_secret("DB_PASSWORD"));
    CHECK(redact_name_is_secret("GOOGLE_APPLICATION_CREDENTIALS"));
    CHECK(redact_name_is_secret("SENTRY_DSN"));
    CHECK(redact_name_is_secret("PROXY_AUTH"));
    CHECK(redact_name_is_secret("SMTP_PASS"));
    CHECK(redact_name_is_secret("basic-auth"));
    CHECK(redact_name_is_secret("api-key"));
    CHECK(!redact_name_is_secret("PATH"));
    CHECK(!redact_name_is_secret("HERMES_HOME"));
    CHECK(!redact_name_is_secret("DATABASE_URL")); /* its password is found by value */
    CHECK(!redact_name_is_secret("port"));
    CHECK(!redact_name_is_secret(""));
    CHECK(!redact_name_is_secret(NULL));
}

TEST(redact_url_passwords)
{
    redact_reset();
    CHECK_STR(red("postgres://u:hunter2pw@db/x"), "postgres://u:<redacted>@db/x");
    CHECK_STR(red("connecting to postgres://u:hunter2pw@db:5432/x now"),
              "connecting to postgres://u:<redacted>@db:5432/x now");
    /* Two in one line, and a password holding '@' and ':'. */
    CHECK_STR(red("a=https://me:p@ss:w@h/ b=redis://:tok123@cache:6379"),
              "a=https://me:<redacted>@h/ b=redis://:<redacted>@cache:6379");
    /* No password, or no userinfo at all: nothing to hide. */
    CHECK_STR(red("ssh://git@example.org/repo"), "ssh://git@example.org/repo");
    CHECK_STR(red("http://example.org:8080/a@b"), "http://example.org:8080/a@b");
    CHECK_STR(red("see ://x:y@z"), "see ://x:y@z");
    CHECK_STR(red("plain text"), "plain text");
}

TEST(redact_registered_values)
{
    redact_reset();
    redact_add_value("hunter2pw");
    redact_add_value("plainvaluexyz");
    redact_add_value("1");       /* too short to look for */
    redact_add_value("abcde");   /* one under the minimum */
    redact_add_value("hunter2pw"); /* twice: kept once */
    redact_add_value(NULL);
    redact_add_value("");
    CHECK_EQ_INT(redact_count(), 2);
    CHECK_EQ_INT(redact_longest(), 13);
    CHECK_STR(red("FOO is plainvaluexyz."), "FOO is <redacted>.");
    CHECK_STR(red("hunter2pwhunter2pw"), "<redacted><redacted>");
    CHECK_STR(red("x plainvaluexy"), "x plainvaluexy"); /* a prefix is not the value */
    CHECK_STR(red("1 abcde 11"), "1 abcde 11");
    /* Overlapping matches hide the union. */
    redact_add_value("2pwXYZ");
    CHECK_STR(red("[hunter2pwXYZ]"), "[<redacted><redacted>]");
    /* The result is cut at the buffer, never overflowing it. */
    char small[8];
    size_t n = redact_text("aa plainvaluexyz", 16, small, sizeof(small));
    CHECK_EQ_INT(n, 7);
    CHECK_STR(small, "aa <red");
    redact_reset();
    CHECK_EQ_INT(redact_count(), 0);
    CHECK_EQ_INT(redact_longest(), 0);
    CHECK_STR(red("hunter2pw"), "hunter2pw");
}

TEST(redact_many_matches_stay_linear)
{
    /* The agent writes what is scanned: a line made of secrets must cost
     * one pass per value, not one per match. */
    char line[4001], out[16384];
    redact_reset();
    redact_add_value("abcdef");
    redact_add_value("zzzzzz");
    for (int i = 0; i < 4000; i++)
        line[i] = "abcdef"[i % 6];
    line[4000] = 0;
    size_t n = redact_text(line, 4000, out, sizeof(out));
    CHECK_EQ_INT(n, 666 * 10 + 4);
    CHECK(strncmp(out + 6660, "abcd", 4) == 0);
    redact_reset();
}

TEST(redact_registry_is_bounded)
{
    char v[32];
    redact_reset();
    int told = 0;
    for (int i = 0; i < REDACT_MAX_VALUES + 10; i++) {
        snprintf(v, sizeof(v), "value-%06d", i);
        const char *why = redact_add_value(v);
        if (why) {
            told++;
            CHECK(strstr(why, "unable to register more secret values: 512 values") != NULL);
        }
    }
    /* The caller is told once, when the registry is first full. */
    CHECK_EQ_INT(told, 1);
    CHECK_EQ_INT(redact_count(), REDACT_MAX_VALUES);
    CHECK_STR(red("value-000000"), "<redacted>");
    redact_reset();
}

static cJSON *parse_json(const char *s)
{
    cJSON *j = cJSON_Parse(s);
    CHECK(j != NULL);
    return j;
}

static const char *str_at(const cJSON *o, const char *a, int i, const char *b)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, a);
    if (i >= 0)
        x = cJSON_GetArrayItem(x, i);
    if (b)
        x = cJSON_GetObjectItemCaseSensitive(x, b);
    return cJSON_IsString(x) ? x->valuestring : "(missing)";
}

TEST(redact_json_env_argv_and_values)
{
    redact_reset();
    redact_add_value("fromenvfile42");
    cJSON *j = parse_json(
        "{\"services\":[{\"name\":\"hermes\","
        "\"argv\":[\"agent\",\"--api-key\",\"sk-123456\",\"--token=tok-abcdef\",\"--port\",\"9000\","
        "\"--password\",\"--verbose\",\"--db=postgres://u:hunter2pw@db/x\",\"-v\",\"--secret=\","
        "\"--note\",\"has fromenvfile42 inside\"],"
        "\"env\":{\"OPENAI_API_KEY\":\"sk-live\",\"SENTRY_DSN\":\"https://k@s/1\","
        "\"DATABASE_URL\":\"postgres://u:hunter2pw@db/x\",\"SMTP_PASS\":\"x\",\"PROXY_AUTH\":\"y\","
        "\"HOME\":\"/root\",\"MODE\":\"fromenvfile42\",\"PORT\":\"1\"},"
        "\"health\":{\"exec\":[\"probe\",\"--auth\",\"Bearer-zz\"]}}],"
        "\"note\":\"fromenvfile42\",\"n\":3}");
    if (!j)
        return;
    redact_json(j);
    cJSON *svc = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "services"), 0);
    const char *want_argv[] = {"agent",     "--api-key",   "<redacted>",
                               "--token=<redacted>",       "--port",
                               "9000",      "--password",  "--verbose",
                               "--db=postgres://u:<redacted>@db/x",
                               "-v",        "--secret=",   "--note",
                               "has <redacted> inside"};
    for (int i = 0; i < (int)(sizeof(want_argv) / sizeof(want_argv[0])); i++)
        CHECK_STR(str_at(svc, "argv", i, NULL), want_argv[i]);
    CHECK_STR(str_at(svc, "env", -1, "OPENAI_API_KEY"), "<redacted>");
    CHECK_STR(str_at(svc, "env", -1, "SENTRY_DSN"), "<redacted>");
    CHECK_STR(str_at(svc, "env", -1, "DATABASE_URL"), "postgres://u:<redacted>@db/x");
    CHECK_STR(str_at(svc, "env", -1, "SMTP_PASS"), "<redacted>");
    CHECK_STR(str_at(svc, "env", -1, "PROXY_AUTH"), "<redacted>");
    CHECK_STR(str_at(svc, "env", -1, "HOME"), "/root");
    CHECK_STR(str_at(svc, "env", -1, "MODE"), "<redacted>");
    CHECK_STR(str_at(svc, "env", -1, "PORT"), "1");
    cJSON *exec = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(svc, "health"), "exec");
    CHECK_STR(cJSON_GetArrayItem(exec, 2)->valuestring, "<redacted>");
    CHECK_STR(str_at(j, "note", -1, NULL), "<redacted>");
    CHECK_EQ_INT(cJSON_GetObjectItemCaseSensitive(j, "n")->valuedouble, 3);
    /* Keys are names, not values: kept. */
    CHECK(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(svc, "env"),
                                           "OPENAI_API_KEY") != NULL);
    cJSON_Delete(j);
    redact_json(NULL);
    redact_reset();
}
