/* A service's typed settings: what the config says, and the defaults
 * where it says nothing. */
#include "unit.h"

#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "config.h"
#include "contain.h"
#include "err.h"
#include "launch.h"
#include "svc_config.h"

static struct config *parse(const char *json)
{
    struct err err = {0};
    struct config *c = config_parse(json, strlen(json), &err);
    CHECK_STR(err.msg, "");
    return c;
}

TEST(svc_config_defaults)
{
    struct config *c = parse("{\"services\":[{\"name\":\"a\",\"argv\":[\"/bin/a\"],"
                             "\"health\":{\"tcp\":\"127.0.0.1:1\"}}]}");
    CHECK(c && c->services[0].settings);
    if (!c || !c->services[0].settings) {
        config_free(c);
        return;
    }
    const struct svc_settings *st = c->services[0].settings;
    CHECK_EQ_INT(st->log.ring_lines, 1000);
    CHECK(st->log.file == NULL);
    CHECK_EQ_INT(st->log.max_bytes, 10 * 1024 * 1024);
    CHECK_EQ_INT(st->log.keep, 3);
    CHECK(!st->ready.given);
    CHECK(st->health.given && !st->health.listens && !st->health.error[0]);
    CHECK_EQ_INT(st->health.interval_ms, 10000);
    CHECK_EQ_INT(st->health.failures, 3);
    CHECK(!st->launch.set_umask && !st->launch.set_oom);
    CHECK_EQ_INT(st->launch.n_rlimits, 0);
    CHECK(st->launch.no_new_privs);
    CHECK(st->contain.isolation && st->contain.seccomp && !st->contain.keep_given);
    config_free(c);
}

TEST(svc_settings_from_the_config)
{
    struct config *c = parse(
        "{\"services\":[{\"name\":\"a\",\"argv\":[\"/bin/a\"],"
        "\"log\":{\"ring_lines\":50,\"file\":\"/var/log/a.log\",\"max_bytes\":4096,\"keep\":1},"
        "\"ready\":{\"notify\":true,\"timeout_ms\":2000},"
        "\"health\":{\"exec\":[\"/bin/true\"],\"interval_ms\":500,\"failures\":7},"
        "\"umask\":\"027\",\"rlimits\":{\"nofile\":1024,\"core\":\"unlimited\"},"
        "\"oom_score_adj\":-100,\"no_new_privs\":false,"
        "\"isolation\":false,\"seccomp\":\"off\",\"caps_keep\":[]}]}");
    CHECK(c && c->services[0].settings);
    if (!c || !c->services[0].settings) {
        config_free(c);
        return;
    }
    const struct svc_settings *st = c->services[0].settings;
    CHECK_EQ_INT(st->log.ring_lines, 50);
    CHECK_STR(st->log.file ? st->log.file : "", "/var/log/a.log");
    CHECK_EQ_INT(st->log.max_bytes, 4096);
    CHECK_EQ_INT(st->log.keep, 1);
    CHECK(st->ready.given && st->ready.listens && st->ready.spec.notify);
    CHECK_EQ_INT(st->ready.spec.timeout_ms, 2000);
    CHECK(st->health.given && !st->health.listens && st->health.spec.kind == CHECK_EXEC);
    CHECK(st->health.spec.argv && st->health.spec.argv[0] &&
          strcmp(st->health.spec.argv[0], "/bin/true") == 0);
    CHECK_EQ_INT(st->health.interval_ms, 500);
    CHECK_EQ_INT(st->health.failures, 7);
    CHECK(st->launch.set_umask);
    CHECK_EQ_INT(st->launch.umask, 027);
    CHECK_EQ_INT(st->launch.n_rlimits, 2);
    for (size_t i = 0; i < st->launch.n_rlimits; i++) {
        if (st->launch.rlimits[i].resource == RLIMIT_NOFILE)
            CHECK_EQ_INT(st->launch.rlimits[i].lim, 1024);
        else
            CHECK(st->launch.rlimits[i].resource == RLIMIT_CORE &&
                  st->launch.rlimits[i].lim == RLIM_INFINITY);
    }
    CHECK(st->launch.set_oom);
    CHECK_EQ_INT(st->launch.oom_score_adj, -100);
    CHECK(!st->launch.no_new_privs);
    CHECK(!st->contain.isolation && !st->contain.seccomp);
    CHECK(st->contain.keep_given && st->contain.keep == 0);
    config_free(c);
}

/* A service_config made by hand (an exec.start process) has no settings:
 * launch and contain read the defaults instead. */
TEST(svc_settings_defaults_without_a_config)
{
    const struct svc_settings *d = svc_config_defaults();
    CHECK_EQ_INT(d->log.max_bytes, 10 * 1024 * 1024);
    CHECK(d->launch.no_new_privs && !d->ready.given && !d->health.given);
    CHECK(d->contain.isolation && d->contain.seccomp && d->contain.keep == svc_config_default_caps);

    struct service_config sc = {.name = "x"};
    struct contain_policy pol;
    contain_policy_of(&sc, &pol);
    CHECK(pol.isolation && pol.seccomp && !pol.keep_given);
    struct launch_plan plan;
    struct err err = {0};
    CHECK_EQ_INT(launch_prepare(&sc, &plan, &err), 0);
    CHECK(plan.no_new_privs && !plan.set_umask && plan.n_rlimits == 0);
    launch_free(&plan);
}

/* ready.attempts: 5 with a ready section that does not say, what it says
 * otherwise (0 = no limit), and no limit without a ready section; refused
 * below 0 and in health. */
TEST(svc_settings_ready_attempts)
{
    static const struct { const char *svc; unsigned want; } cases[] = {
        {"\"ready\":{\"tcp\":\"127.0.0.1:1\"}", 5},
        {"\"ready\":{\"tcp\":\"127.0.0.1:1\",\"attempts\":0}", 0},
        {"\"ready\":{\"notify\":true,\"attempts\":2}", 2},
        {"\"ready\":{\"http\":\"127.0.0.1:1/h\",\"attempts\":9007199254740991}", 0},
        {"\"restart\":\"always\"", 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char json[256];
        snprintf(json, sizeof(json), "{\"services\":[{\"name\":\"a\",\"argv\":[\"/bin/a\"],%s}]}",
                 cases[i].svc);
        struct config *c = parse(json);
        CHECK(c && c->services[0].settings);
        if (c && c->services[0].settings)
            CHECK_EQ_INT(c->services[0].settings->ready.attempts, cases[i].want);
        config_free(c);
    }
    static const char *const bad[] = {
        "{\"services\":[{\"name\":\"a\",\"argv\":[\"/bin/a\"],"
        "\"ready\":{\"tcp\":\"127.0.0.1:1\",\"attempts\":-1}}]}",
        "{\"services\":[{\"name\":\"a\",\"argv\":[\"/bin/a\"],"
        "\"health\":{\"tcp\":\"127.0.0.1:1\",\"attempts\":2}}]}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct err err = {0};
        struct config *c = config_parse(bad[i], strlen(bad[i]), &err);
        CHECK(c == NULL);
        CHECK(strstr(err.msg, "attempts") != NULL);
        config_free(c);
    }
}
