#include "unit.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cJSON.h>

#include "config.h"
#include "err.h"
#include "svc_config.h"

/* The reference sandbox, as shipped in rootfs/hermes/hearth.json (the Hermes contract of
 * docs/hermes.md). */
static const char hermes_json[] =
    "{\n"
    "  \"hostname\": \"hermes\",\n"
    "  \"log\": {\"level\": \"info\"},\n"
    "  \"control\": {\"listen\": [\"vsock:1025\", \"unix:/run/hearth/control.sock\"], "
    "\"allowed_cids\": [2]},\n"
    "  \"modules\": [\"virtio_net\", \"virtiofs\", \"nf_tables\", \"nft_ct\", "
    "\"nft_reject_inet\", \"nft_socket\",\n"
    "              \"nft_fib_inet\"],\n"
    "  \"wait_for_init\": {\"enabled\": false, \"timeout_ms\": 0},\n"
    "  \"network\": {\"interfaces\": [{\"name\": \"eth0\", \"address\": \"169.254.68.6/30\",\n"
    "               \"gateway\": \"169.254.68.5\", \"mtu\": 1500}], \"dns\": [\"119.29.29.29\"]},\n"
    "  \"mounts\": [\n"
    "    {\"source\": \"hermes-home\",   \"target\": \"/root/.hermes\", \"type\": \"virtiofs\", "
    "\"owner\": \"hermes\"},\n"
    "    {\"source\": \"hermes-ws\",     \"target\": \"/workspace\",    \"type\": \"virtiofs\", "
    "\"owner\": \"hermes\"},\n"
    "    {\"source\": \"hermes-skills\", \"target\": \"/opt/hermes-common-skills\", "
    "\"type\": \"virtiofs\", \"read_only\": true}\n"
    "  ],\n"
    "  \"host_mounts_rule\": {\"owner\": \"hermes\"},\n"
    "  \"seed\": [{\"target\": \"/root/.hermes\", \"from\": "
    "\"/usr/share/hearth/hermes-home\", \"unless\": \"config.yaml\",\n"
    "            \"user\": \"hermes\"}],\n"
    "  \"skills\": {\"public\": \"/opt/hermes-common-skills\", \"private\": "
    "\"/root/.hermes/skills\",\n"
    "             \"ignore\": [\"._*\", \".DS_Store\", \".*\"], \"poll_ms\": 60000, "
    "\"marker\": \"SKILL.md\", \"depth\": 2},\n"
    "  \"egress\": {\"allowPublicTraffic\": true, \"allowOut\": [\"10.10.0.0/16\"], "
    "\"denyOut\": []},\n"
    "  \"services\": [{\n"
    "    \"name\": \"hermes\", \"argv\": [\"hermes\", \"gateway\", \"run\"],\n"
    "    \"env\": {\"HERMES_HOME\": \"/root/.hermes\", \"API_SERVER_ENABLED\": \"true\",\n"
    "            \"API_SERVER_HOST\": \"127.0.0.1\", \"API_SERVER_PORT\": \"8642\",\n"
    "            \"HERMES_GATEWAY_EXTERNAL_SUPERVISOR\": \"1\", \"INVOCATION_ID\": \"hearth\",\n"
    "            \"TIRITH_ENABLED\": \"false\"},\n"
    "    \"secrets\": [{\"env\": \"API_SERVER_KEY\", \"file\": \"/root/.hermes/.env\"}],\n"
    "    \"cwd\": \"/workspace\", \"user\": \"hermes\", \"after\": [\"mounts\", \"skills\", "
    "\"egress\"],\n"
    "    \"restart\": \"always\", \"backoff\": {\"initial_ms\": 500, \"max_ms\": 30000, "
    "\"reset_after_ms\": 60000},\n"
    "    \"restart_force_exit_codes\": [75], \"restart_prevent_exit_codes\": [78],\n"
    "    \"success_exit_codes\": [0, 75],\n"
    "    \"ready\": {\"http\": \"127.0.0.1:8642/health\", \"timeout_ms\": 120000},\n"
    "    \"health\": {\"http\": \"127.0.0.1:8642/health\", \"interval_ms\": 60000, "
    "\"timeout_ms\": 5000, \"failures\": 2},\n"
    "    \"stop\": {\"signal\": \"SIGTERM\", \"timeout_ms\": 250000},\n"
    "    \"on_resume\": \"restart:SIGUSR1\",\n"
    "    \"log\": {\"file\": \"/root/.hermes/logs/hermes.out\", \"max_bytes\": 10485760, "
    "\"keep\": 3}\n"
    "  }, {\n"
    "    \"name\": \"web-ui\", \"argv\": [\"hermes-web-ui\", \"9000\"], \"after\": [\"hermes\"],\n"
    "    \"env\": {\"HOME\": \"/root/.hermes/home\", \"HERMES_HOME\": \"/root/.hermes\"},\n"
    "    \"user\": \"hermes\",\n"
    "    \"restart\": \"always\", \"ready\": {\"tcp\": \"127.0.0.1:9000\", \"timeout_ms\": "
    "60000},\n"
    "    \"log\": {\"file\": \"/root/.hermes/logs/web-ui.out\", \"max_bytes\": 1048576, "
    "\"keep\": 2}\n"
    "  }]\n"
    "}\n";

static struct config *parse(const char *json, char *err)
{
    struct err e = {0};
    struct config * r = config_parse(json, strlen(json), &e);
    if (err)
        snprintf(err, CONFIG_ERR_MAX, "%s", e.msg);
    return r;
}

/* Parses json, which must fail with exactly msg (reported at the caller). */
#define EXPECT_ERR(json, msg)                                           \
    do {                                                                \
        char e_[CONFIG_ERR_MAX] = "";                                   \
        struct config *c_ = parse((json), e_);                          \
        CHECK(c_ == NULL);                                              \
        CHECK_STR(e_, (msg));                                           \
        config_free(c_);                                                \
    } while (0)

#define EXPECT_OK(json)                                                 \
    do {                                                                \
        char e_[CONFIG_ERR_MAX] = "";                                   \
        struct config *c_ = parse((json), e_);                          \
        if (!c_)                                                        \
            fprintf(stderr, "  %s:%d: rejected: %s\n", __FILE__, __LINE__, e_); \
        CHECK(c_ != NULL);                                              \
        config_free(c_);                                                \
    } while (0)

/* A one-service document with extra keys spliced into the service. */
#define SVC(extra) "{\"services\":[{\"name\":\"a\",\"argv\":[\"/bin/a\"]" extra "}]}"

static void check_hermes(const struct config *cfg)
{
    const struct service_config *h, *w;

    CHECK_STR(cfg->hostname, "hermes");
    CHECK_EQ_INT(cfg->log_level, HLOG_INFO);
    CHECK_EQ_INT(cfg->n_listen, 2);
    CHECK_EQ_INT(cfg->listen[0].kind, LISTEN_VSOCK);
    CHECK_EQ_INT(cfg->listen[0].port, 1025);
    CHECK_EQ_INT(cfg->listen[1].kind, LISTEN_UNIX);
    CHECK_STR(cfg->listen[1].path, "/run/hearth/control.sock");
    CHECK_EQ_INT(cfg->n_allowed_cids, 1);
    CHECK_EQ_INT(cfg->allowed_cids[0], 2);
    CHECK_EQ_INT(cfg->n_modules, 7);
    CHECK_STR(cfg->modules[0], "virtio_net");
    CHECK_STR(cfg->modules[2], "nf_tables");
    /* The output chain's ct (with nf_conntrack: established connections,
     * answers to connections from outside) and reject; nothing loads
     * them on demand. */
    CHECK_STR(cfg->modules[3], "nft_ct");
    CHECK_STR(cfg->modules[4], "nft_reject_inet");
    /* egress.deny_local_ports: socket cgroupv2 and fib daddr local. */
    CHECK_STR(cfg->modules[5], "nft_socket");
    CHECK_STR(cfg->modules[6], "nft_fib_inet");
    CHECK(cfg->modules[7] == NULL);
    CHECK(!cfg->wait_for_init);
    CHECK_EQ_INT(cfg->wait_for_init_timeout_ms, 0);
    CHECK_EQ_INT(cfg->n_services, 2);

    h = &cfg->services[0];
    CHECK_STR(h->name, "hermes");
    /* No flag: 0.18.2 knows none that says "supervised" and exits 2 on
     * 0.19's; the environment says it to every release. */
    CHECK_EQ_INT(h->argc, 3);
    CHECK_STR(h->argv[0], "hermes");
    CHECK_STR(h->argv[2], "run");
    CHECK(h->argv[3] == NULL);
    CHECK_EQ_INT(h->n_env, 7);
    CHECK_STR(h->env[4].key, "HERMES_GATEWAY_EXTERNAL_SUPERVISOR");
    CHECK_STR(h->env[4].value, "1");
    CHECK_STR(h->env[5].key, "INVOCATION_ID");
    CHECK_STR(h->env[6].key, "TIRITH_ENABLED");
    CHECK_STR(h->env[6].value, "false");
    CHECK_STR(h->env[0].key, "HERMES_HOME");
    CHECK_STR(h->env[0].value, "/root/.hermes");
    CHECK_STR(h->env[1].key, "API_SERVER_ENABLED");
    CHECK_STR(h->env[1].value, "true");
    CHECK_STR(h->env[3].key, "API_SERVER_PORT");
    CHECK_STR(h->env[3].value, "8642");
    /* Hermes reads its .env itself. */
    CHECK_EQ_INT(h->n_env_files, 0);
    CHECK_STR(h->cwd, "/workspace");
    CHECK_STR(h->user, "hermes");
    CHECK(h->group == NULL);
    CHECK_EQ_INT(h->n_after, 3);
    CHECK_STR(h->after[0], "mounts");
    CHECK_STR(h->after[2], "egress");
    CHECK_EQ_INT(h->restart, RESTART_ALWAYS);
    CHECK(!h->main);
    CHECK_EQ_INT(h->backoff_initial_ms, 500);
    CHECK_EQ_INT(h->backoff_max_ms, 30000);
    CHECK_EQ_INT(h->backoff_reset_ms, 60000);
    CHECK(config_code_in(h->force_exit, 75));
    CHECK(!config_code_in(h->force_exit, 78));
    CHECK(config_code_in(h->prevent_exit, 78));
    CHECK(!config_code_in(h->prevent_exit, 75));
    CHECK_EQ_INT(h->stop_signal, SIGTERM);
    CHECK_EQ_INT(h->stop_timeout_ms, 250000);
    CHECK_EQ_INT(h->n_success, 2);
    CHECK_EQ_INT(h->success_exit_codes[0], 0);
    CHECK_EQ_INT(h->success_exit_codes[1], 75);
    CHECK_STR(h->on_resume, "restart:SIGUSR1");
    /* One probe and one poll a minute, on the same grid point
     * (docs/hermes.md, "Why /health once a minute"). */
    CHECK(h->settings != NULL);
    if (h->settings) {
        CHECK(h->settings->health.given && h->settings->health.spec.kind == CHECK_HTTP);
        CHECK_EQ_INT(h->settings->health.interval_ms, 60000);
        CHECK_EQ_INT(h->settings->health.failures, 2);
        CHECK_EQ_INT(h->settings->health.spec.timeout_ms, 5000);
        /* The gateway's API server (and /health) needs a key: each
         * sandbox makes its own in the home's .env. */
        CHECK_EQ_INT(h->settings->n_secrets, 1);
        CHECK_STR(h->settings->secrets[0].env, "API_SERVER_KEY");
        CHECK_STR(h->settings->secrets[0].file, "/root/.hermes/.env");
        CHECK_EQ_INT(h->settings->secrets[0].chars, 48);
    }
    CHECK_EQ_INT(cfg->skills.poll_ms, 60000);
    CHECK(h->json != NULL);
    CHECK_STR(cJSON_GetObjectItemCaseSensitive(h->json, "name")->valuestring, "hermes");
    CHECK(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(cfg->json, "services"), 0) ==
          h->json);

    w = &cfg->services[1];
    CHECK_STR(w->name, "web-ui");
    CHECK_EQ_INT(w->argc, 2);
    CHECK_STR(w->argv[1], "9000");
    CHECK_EQ_INT(w->n_after, 1);
    CHECK_STR(w->after[0], "hermes");
    CHECK_EQ_INT(w->n_env, 2);
    CHECK_STR(w->env[0].key, "HOME");
    CHECK_STR(w->env[0].value, "/root/.hermes/home");
    CHECK_STR(w->user, "hermes");
    /* The agent's shares and seeded home are its own. */
    CHECK_EQ_INT(cfg->mounts.n, 3);
    if (cfg->mounts.n == 3) {
        CHECK_STR(cfg->mounts.v[0].owner, "hermes");
        CHECK_STR(cfg->mounts.v[1].owner, "hermes");
        CHECK(cfg->mounts.v[2].owner == NULL);
    }
    CHECK_STR(cfg->mounts.rule_owner, "hermes");
    CHECK_EQ_INT(cfg->seed.n, 1);
    if (cfg->seed.n == 1) {
        CHECK_STR(cfg->seed.v[0].user, "hermes");
        CHECK(cfg->seed.v[0].group == NULL);
    }
    CHECK(w->cwd == NULL);
    CHECK_EQ_INT(w->stop_signal, SIGTERM);
    CHECK_EQ_INT(w->stop_timeout_ms, 10000);
    CHECK_EQ_INT(w->n_success, 1);
    CHECK_EQ_INT(w->success_exit_codes[0], 0);
    CHECK(w->on_resume == NULL);
    CHECK_STR(cJSON_GetObjectItemCaseSensitive(w->json, "name")->valuestring, "web-ui");

    /* Sections without a typed form stay reachable in the tree. */
    CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cfg->json, "egress"), "allowPublicTraffic")));
}

TEST(config_hermes_example)
{
    char err[CONFIG_ERR_MAX] = "";
    struct config *cfg = parse(hermes_json, err);

    CHECK_STR(err, "");
    CHECK(cfg != NULL);
    if (cfg)
        check_hermes(cfg);
    config_free(cfg);
}

TEST(config_hermes_shipped_file)
{
    struct err err = {0};
    struct config *cfg = config_load("rootfs/hermes/hearth.json", &err);

    CHECK_STR(err.msg, "");
    CHECK(cfg != NULL);
    if (cfg)
        check_hermes(cfg);
    config_free(cfg);
}

TEST(config_fixture_files)
{
    /* tests/unit/configs: good-*.json must load, bad-*.json must not. */
    static const char *const good[] = {"tests/unit/configs/good-minimal.json",
                                       "tests/unit/configs/good-full.json"};
    static const char *const bad[][2] = {
        {"tests/unit/configs/bad-type.json", "services[0].backoff.max_ms: expected integer"},
        {"tests/unit/configs/bad-syntax.json", "syntax error at byte 39 (line 3, column 19)"},
    };
    struct err err;

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        struct config *cfg = config_load(good[i], &err);
        if (!cfg)
            fprintf(stderr, "  %s: %s\n", good[i], err.msg);
        CHECK(cfg != NULL);
        config_free(cfg);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct config *cfg = config_load(bad[i][0], &err);
        CHECK(cfg == NULL);
        CHECK_STR(err.msg, bad[i][1]);
        config_free(cfg);
    }
}

TEST(config_defaults)
{
    struct err err = {0};
    struct config *cfg = parse("{}", err.msg);

    CHECK(cfg != NULL);
    if (!cfg)
        return;
    CHECK(cfg->hostname == NULL);
    CHECK_EQ_INT(cfg->log_level, HLOG_INFO);
    CHECK_EQ_INT(cfg->n_listen, 2);
    CHECK_EQ_INT(cfg->listen[0].kind, LISTEN_UNIX);
    CHECK_STR(cfg->listen[0].path, "/run/hearth/control.sock");
    CHECK_EQ_INT(cfg->listen[1].kind, LISTEN_VSOCK);
    CHECK_EQ_INT(cfg->listen[1].port, 1025);
    CHECK_EQ_INT(cfg->idle_evict_ms, 30000);
    CHECK_EQ_INT(cfg->n_allowed_cids, 1);
    CHECK_EQ_INT(cfg->allowed_cids[0], 2);
    CHECK_EQ_INT(cfg->n_modules, 0);
    CHECK(!cfg->wait_for_init);
    CHECK_EQ_INT(cfg->clock_detect_step_ms, CONFIG_CLOCK_DETECT_STEP_MS);
    CHECK_EQ_INT(cfg->n_services, 0);
    CHECK_EQ_INT(cfg->files.timeout_ms, 5000);
    CHECK(cJSON_IsObject(cfg->json));
    config_free(cfg);

    cfg = config_default(&err);
    CHECK(cfg != NULL);
    if (cfg) {
        CHECK_EQ_INT(cfg->n_listen, 2);
        CHECK_EQ_INT(cfg->listen[0].kind, LISTEN_UNIX);
        CHECK_EQ_INT(cfg->listen[1].port, 1025);
        CHECK_EQ_INT(cfg->n_services, 0);
        CHECK(cfg->json != NULL);
    }
    config_free(cfg);
    config_free(NULL);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* vm mode's fallback after a refusal: the defaults, keeping the file's
 * control and modules only when those are valid by themselves. */
TEST(config_fallback_keeps_control_and_modules)
{
    char path[] = "/tmp/hearth-unit-fallback-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    close(fd);
    bool kept = true;

    write_text(path, "{\"control\": {\"listen\": [\"serial:org.hearth.ctl\"]},"
                     " \"modules\": [\"virtio_console\"], \"hostname\": \"h\","
                     " \"services\": [{\"name\": \"a\", \"argv\": [\"/x\"], \"restart\": \"often\"}]}");
    struct config *cfg = config_fallback(path, &kept);
    CHECK(cfg != NULL && kept);
    if (cfg) {
        CHECK_EQ_INT(cfg->n_listen, 1);
        CHECK_EQ_INT(cfg->listen[0].kind, LISTEN_SERIAL);
        CHECK_EQ_INT(cfg->n_modules, 1);
        CHECK_STR(cfg->modules[0], "virtio_console");
        CHECK(cfg->hostname == NULL);
        CHECK_EQ_INT(cfg->n_services, 0);
    }
    config_free(cfg);

    /* A bad control section, a syntax error, a missing file: defaults. */
    static const char *const bad[] = {
        "{\"control\": {\"listen\": [\"tcp:1\"]}, \"modules\": [\"virtio_console\"]}",
        "{\"control\": ", "[1]", "{\"hostname\": 7}"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        write_text(path, bad[i]);
        kept = true;
        cfg = config_fallback(path, &kept);
        CHECK(cfg != NULL && !kept);
        if (cfg) {
            CHECK_EQ_INT(cfg->n_listen, 2);
            CHECK_EQ_INT(cfg->listen[1].kind, LISTEN_VSOCK);
            CHECK_EQ_INT(cfg->n_modules, 0);
        }
        config_free(cfg);
    }
    unlink(path);
    kept = true;
    cfg = config_fallback(path, &kept);
    CHECK(cfg != NULL && !kept);
    config_free(cfg);
}

TEST(config_service_defaults)
{
    char err[CONFIG_ERR_MAX] = "";
    struct config *cfg = parse(SVC(""), err);
    const struct service_config *s;

    CHECK(cfg != NULL);
    if (!cfg)
        return;
    s = &cfg->services[0];
    CHECK_STR(s->name, "a");
    CHECK_EQ_INT(s->argc, 1);
    CHECK(s->argv[1] == NULL);
    CHECK_EQ_INT(s->restart, RESTART_ALWAYS);
    CHECK(!s->main);
    CHECK_EQ_INT(s->backoff_initial_ms, 500);
    CHECK_EQ_INT(s->backoff_max_ms, 30000);
    CHECK_EQ_INT(s->backoff_reset_ms, 60000);
    CHECK_EQ_INT(s->stop_signal, SIGTERM);
    CHECK_EQ_INT(s->stop_timeout_ms, 10000);
    CHECK_EQ_INT(s->n_success, 1);
    CHECK_EQ_INT(s->success_exit_codes[0], 0);
    CHECK(s->cwd == NULL && s->user == NULL && s->group == NULL && s->on_resume == NULL);
    CHECK_EQ_INT(s->n_env, 0);
    CHECK_EQ_INT(s->n_env_files, 0);
    CHECK_EQ_INT(s->n_after, 0);
    config_free(cfg);
}

TEST(config_typed_values)
{
    char err[CONFIG_ERR_MAX] = "";
    struct config *cfg = parse(
        "{\"log\":{\"level\":\"debug\"},"
        "\"control\":{\"listen\":[\"serial:/dev/vport0p1\",\"vsock:5000\"],"
        "\"allowed_cids\":[2,3,4294967295]},"
        "\"wait_for_init\":{\"enabled\":true,\"timeout_ms\":5000,\"on_timeout\":\"fail\"},"
        "\"services\":[{\"name\":\"x\",\"argv\":[\"x\"],\"restart\":\"on-failure\",\"main\":true,"
        "\"stop\":{\"signal\":\"INT\",\"timeout_ms\":0},\"backoff\":{\"initial_ms\":10},"
        "\"success_exit_codes\":[0,2,255],\"group\":\"wheel\"},"
        "{\"name\":\"y\",\"argv\":[\"y\"],\"restart\":\"never\",\"stop\":{\"signal\":\"9\"}}]}",
        err);

    CHECK(cfg != NULL);
    if (!cfg) {
        fprintf(stderr, "  %s\n", err);
        return;
    }
    CHECK_EQ_INT(cfg->log_level, HLOG_DEBUG);
    CHECK_EQ_INT(cfg->n_listen, 2);
    CHECK_EQ_INT(cfg->listen[0].kind, LISTEN_SERIAL);
    CHECK_STR(cfg->listen[0].path, "/dev/vport0p1");
    CHECK_EQ_INT(cfg->listen[1].port, 5000);
    CHECK_EQ_INT(cfg->n_allowed_cids, 3);
    CHECK_EQ_INT(cfg->allowed_cids[2], 0xffffffffu);
    CHECK(cfg->wait_for_init);
    CHECK_EQ_INT(cfg->wait_for_init_timeout_ms, 5000);
    CHECK_EQ_INT(cfg->services[0].restart, RESTART_ON_FAILURE);
    CHECK(cfg->services[0].main);
    CHECK_EQ_INT(cfg->services[0].stop_signal, SIGINT);
    CHECK_EQ_INT(cfg->services[0].stop_timeout_ms, 0);
    CHECK_EQ_INT(cfg->services[0].backoff_initial_ms, 10);
    CHECK_EQ_INT(cfg->services[0].backoff_max_ms, 30000);
    CHECK_EQ_INT(cfg->services[0].n_success, 3);
    CHECK_EQ_INT(cfg->services[0].success_exit_codes[2], 255);
    CHECK_STR(cfg->services[0].group, "wheel");
    CHECK_EQ_INT(cfg->services[1].restart, RESTART_NEVER);
    CHECK_EQ_INT(cfg->services[1].stop_signal, SIGKILL);
    config_free(cfg);

    /* An explicit empty listener list means no control plane at all. */
    cfg = parse("{\"control\":{\"listen\":[],\"allowed_cids\":[],\"idle_evict_ms\":0}}", err);
    CHECK(cfg != NULL);
    if (cfg) {
        CHECK_EQ_INT(cfg->idle_evict_ms, 0);
        CHECK_EQ_INT(cfg->n_listen, 0);
        CHECK_EQ_INT(cfg->n_allowed_cids, 0);
    }
    config_free(cfg);
}

TEST(config_accepts_valid_variants)
{
    EXPECT_OK("{\"hostname\":\"a-b.c1\"}");
    EXPECT_OK(SVC(",\"umask\":\"022\""));
    EXPECT_OK(SVC(",\"umask\":18"));
    EXPECT_OK(SVC(",\"umask\":\"0777\""));
    EXPECT_OK(SVC(",\"rlimits\":{\"nofile\":65536,\"core\":\"unlimited\",\"memlock\":0}"));
    EXPECT_OK(SVC(",\"caps_drop\":[\"NET_ADMIN\",\"cap_sys_admin\",\"CAP_CHECKPOINT_RESTORE\"]"));
    EXPECT_OK(SVC(",\"oom_score_adj\":-1000"));
    EXPECT_OK(SVC(",\"limits\":{\"memory_max\":1048576,\"pids_max\":4194304}"));
    EXPECT_OK(SVC(",\"on_resume\":\"restart\""));
    EXPECT_OK(SVC(",\"on_resume\":\"none\""));
    EXPECT_OK(SVC(",\"on_resume\":\"signal:USR1\""));
    EXPECT_OK(SVC(",\"ready\":{\"tcp\":\"[::1]:80\"}"));
    EXPECT_OK(SVC(",\"ready\":{\"tcp\":\"localhost:80\"}"));
    EXPECT_OK(SVC(",\"ready\":{\"unix\":\"/run/a.sock\",\"timeout_ms\":0}"));
    EXPECT_OK(SVC(",\"ready\":{\"file\":\"/run/a.ready\"}"));
    EXPECT_OK(SVC(",\"ready\":{\"notify_fd\":3}"));
    EXPECT_OK(SVC(",\"ready\":{\"exec\":[\"/bin/true\"]}"));
    EXPECT_OK(SVC(",\"health\":{\"exec\":[\"/bin/check\",\"-q\"],\"timeout_ms\":1000}"));
    EXPECT_OK(SVC(",\"log\":{\"ring_lines\":500,\"keep\":0,\"max_bytes\":0}"));
    EXPECT_OK(SVC(",\"no_new_privs\":false,\"env_files\":[]"));
    EXPECT_OK(SVC(",\"env\":{\"_X1\":\"\",\"lower_case\":\"v\"}"));
    EXPECT_OK("{\"mounts\":[{\"target\":\"/tmp\",\"type\":\"tmpfs\",\"options\":\"size=1m\"},"
              "{\"source\":\"/dev/vdb\",\"target\":\"/data\",\"type\":\"xfs\",\"required\":false,"
              "\"timeout_ms\":100},{\"source\":\"share\",\"target\":\"/s\",\"type\":\"9p\"},"
              "{\"source\":\"tag\",\"target\":\"/t\"}]}");
    EXPECT_OK("{\"network\":{\"interfaces\":[{\"name\":\"eth1\",\"mac\":\"02:00:AA:bb:cc:dd\","
              "\"address\":\"fd00::5/64\",\"gateway\":\"fd00::1\",\"required\":false,"
              "\"timeout_ms\":50}],\"dns\":[\"2001:4860:4860::8888\"]}}");
    EXPECT_OK("{\"host_mounts\":\"[{\\\"hostPath\\\":\\\"/data/shared/x\\\",\\\"mountPath\\\":"
              "\\\"/root/.hermes\\\",\\\"readOnly\\\":false}]\","
              "\"host_mounts_rule\":{\"mode\":\"subpath\",\"tag\":\"shared\"}}");
    EXPECT_OK("{\"host_mounts\":\"\"}");
    EXPECT_OK("{\"host_mounts\":\"[]\",\"host_mounts_rule\":{\"mode\":\"tag-per-share\"}}");
    EXPECT_OK("{\"clock\":{\"set\":true,\"step_threshold_ms\":50}}");
    EXPECT_OK("{\"clock\":{\"detect_step_ms\":0}}");
    EXPECT_OK("{\"egress\":{\"allowPublicTraffic\":false,\"allowOut\":[\"192.168.1.7\","
              "\"fd00::/8\",\"0.0.0.0/0\"],\"denyOut\":[\"203.0.113.0/24\"]}}");
    EXPECT_OK("{\"seed\":[{\"target\":\"/root/.hermes\",\"from\":\"/usr/share/x\"}]}");
    EXPECT_OK("{\"skills\":{\"poll_ms\":0}}");
    EXPECT_OK("{\"skills\":{\"marker\":\"README.md\",\"depth\":1}}");
    EXPECT_ERR("{\"skills\":{\"marker\":\"a/SKILL.md\"}}",
               "skills.marker: expected a file name (no '/'), got \"a/SKILL.md\"");
    EXPECT_ERR("{\"skills\":{\"marker\":\"..\"}}", "skills.marker: expected a file name (no '/'), got \"..\"");
    EXPECT_ERR("{\"skills\":{\"depth\":0}}", "skills.depth: must be between 1 and 8");
    EXPECT_ERR("{\"skills\":{\"depth\":9}}", "skills.depth: must be between 1 and 8");
    EXPECT_OK("{\"skills\":{\"mode\":\"links\"}}");
    EXPECT_OK("{\"skills\":{\"mode\":\"external_dirs\",\"config_yaml\":\"/root/.hermes/config.yaml\"}}");
    EXPECT_ERR("{\"skills\":{\"mode\":\"external_dirs\"}}",
               "skills.config_yaml: required when mode is \"external_dirs\" (Hermes's config.yaml)");
    EXPECT_ERR("{\"skills\":{\"mode\":\"yaml\"}}",
               "skills.mode: expected one of links, external_dirs");
    EXPECT_ERR("{\"skills\":{\"mode\":\"external_dirs\",\"config_yaml\":\"config.yaml\"}}",
               "skills.config_yaml: expected an absolute path, got \"config.yaml\"");
    /* A chain of dependencies is fine; only cycles are not. */
    EXPECT_OK("{\"services\":[{\"name\":\"a\",\"argv\":[\"a\"],\"after\":[\"b\",\"init\"]},"
              "{\"name\":\"b\",\"argv\":[\"b\"],\"after\":[\"c\"]},"
              "{\"name\":\"c\",\"argv\":[\"c\"],\"after\":[\"network\"]}]}");
    /* Whitespace around the document is not trailing data. */
    EXPECT_OK(" \n\t{}\r\n ");
}

TEST(config_error_unknown_keys)
{
    EXPECT_ERR("{\"frobnicate\": 1}", "frobnicate: unknown key");
    EXPECT_ERR(SVC(",\"bogus\":true"), "services[0].bogus: unknown key");
    EXPECT_ERR(SVC(",\"backoff\":{\"initial\":5}"), "services[0].backoff.initial: unknown key");
    EXPECT_ERR("{\"network\":{\"interfaces\":[{\"name\":\"eth0\",\"ip\":\"1.2.3.4\"}]}}",
               "network.interfaces[0].ip: unknown key");
    /* Keys are case-sensitive. */
    EXPECT_ERR("{\"Hostname\":\"a\"}", "Hostname: unknown key");
    EXPECT_ERR("{\"hostname\":\"a\",\"hostname\":\"b\"}", "hostname: duplicate key");
    EXPECT_ERR(SVC(",\"env\":{\"A\":\"1\",\"A\":\"2\"}"),
               "services[0].env: duplicate key \"A\"");
}

TEST(config_error_types)
{
    EXPECT_ERR("[]", "(root): expected object");
    EXPECT_ERR("{\"hostname\": 5}", "hostname: expected string");
    EXPECT_ERR("{\"log\": \"info\"}", "log: expected object");
    EXPECT_ERR("{\"modules\": \"virtio_net\"}", "modules: expected array");
    EXPECT_ERR("{\"modules\": [\"a\", 7]}", "modules[1]: expected string");
    EXPECT_ERR("{\"services\": {}}", "services: expected array");
    EXPECT_ERR(SVC(",\"backoff\":{\"max_ms\":\"30000\"}"),
               "services[0].backoff.max_ms: expected integer");
    EXPECT_ERR(SVC(",\"main\":1"), "services[0].main: expected boolean");
    EXPECT_ERR(SVC(",\"cwd\":null"), "services[0].cwd: expected string");
    EXPECT_ERR(SVC(",\"env\":{\"A\":1}"), "services[0].env.A: expected string");
    EXPECT_ERR(SVC(",\"env\":[]"), "services[0].env: expected object");
    EXPECT_ERR("{\"egress\":{\"allowPublicTraffic\":\"yes\"}}",
               "egress.allowPublicTraffic: expected boolean");
    EXPECT_ERR("{\"control\":{\"allowed_cids\":[\"2\"]}}",
               "control.allowed_cids[0]: expected integer");
}

TEST(config_error_integers)
{
    EXPECT_ERR(SVC(",\"stop\":{\"timeout_ms\":1.5}"),
               "services[0].stop.timeout_ms: expected integer");
    EXPECT_ERR("{\"wait_for_init\":{\"timeout_ms\":-1}}", "wait_for_init.timeout_ms: must be >= 0");
    EXPECT_ERR(SVC(",\"ready\":{\"tcp\":\"127.0.0.1:1\",\"timeout_ms\":-5}"),
               "services[0].ready.timeout_ms: must be >= 0");
    EXPECT_ERR("{\"clock\":{\"step_threshold_ms\":-50}}", "clock.step_threshold_ms: must be >= 0");
    EXPECT_ERR("{\"clock\":{\"detect_step_ms\":-1}}", "clock.detect_step_ms: must be >= 0");
    EXPECT_ERR("{\"clock\":{\"detect_step_ms\":\"1s\"}}", "clock.detect_step_ms: expected integer");
    EXPECT_ERR(SVC(",\"stop\":{\"timeout_ms\":1e300}"),
               "services[0].stop.timeout_ms: integer out of range");
    EXPECT_ERR(SVC(",\"limits\":{\"memory_max\":65536}"),
               "services[0].limits.memory_max: must be >= 1048576");
    EXPECT_ERR(SVC(",\"limits\":{\"pids_max\":0}"),
               "services[0].limits.pids_max: must be between 1 and 4194304");
    EXPECT_ERR(SVC(",\"limits\":{\"cpu_max\":1}"), "services[0].limits.cpu_max: unknown key");
    EXPECT_ERR(SVC(",\"oom_score_adj\":1001"),
               "services[0].oom_score_adj: must be between -1000 and 1000");
    EXPECT_ERR(SVC(",\"success_exit_codes\":[0,256]"),
               "services[0].success_exit_codes[1]: must be between 0 and 255");
    EXPECT_ERR(SVC(",\"log\":{\"keep\":101}"), "services[0].log.keep: must be between 0 and 100");
    EXPECT_ERR(SVC(",\"health\":{\"tcp\":\"127.0.0.1:1\",\"failures\":0}"),
               "services[0].health.failures: must be >= 1");
    EXPECT_ERR(SVC(",\"ready\":{\"notify_fd\":1}"),
               "services[0].ready.notify_fd: must be between 3 and 1023");
    EXPECT_ERR("{\"network\":{\"interfaces\":[{\"name\":\"eth0\",\"mtu\":67}]}}",
               "network.interfaces[0].mtu: must be between 68 and 65535");
    EXPECT_ERR("{\"control\":{\"idle_evict_ms\":-1}}",
               "control.idle_evict_ms: must be >= 0");
    EXPECT_ERR("{\"files\":{\"timeout_ms\":99}}",
               "files.timeout_ms: must be between 100 and 600000");
    EXPECT_ERR("{\"files\":{\"deadline_ms\":1000}}", "files.deadline_ms: unknown key");
    EXPECT_ERR("{\"control\":{\"allowed_cids\":[4294967296]}}",
               "control.allowed_cids[0]: must be between 0 and 4294967295");
    EXPECT_ERR("{\"control\":{\"allowed_cids\":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]}}",
               "control.allowed_cids: at most 16 entries");
}

TEST(config_error_enums)
{
    EXPECT_ERR("{\"log\":{\"level\":\"loud\"}}",
               "log.level: expected one of error, warn, info, debug");
    EXPECT_ERR("{\"services\":[{\"name\":\"a\",\"argv\":[\"a\"]},"
               "{\"name\":\"b\",\"argv\":[\"b\"],\"restart\":\"sometimes\"}]}",
               "services[1].restart: expected one of always, on-failure, never");
    EXPECT_ERR(SVC(",\"restart\":true"),
               "services[0].restart: expected one of always, on-failure, never");
    EXPECT_ERR("{\"wait_for_init\":{\"on_timeout\":\"retry\"}}",
               "wait_for_init.on_timeout: expected one of start, fail");
    EXPECT_ERR("{\"host_mounts_rule\":{\"mode\":\"magic\"}}",
               "host_mounts_rule.mode: expected one of tag-per-share, subpath");
}

TEST(config_error_listen)
{
    EXPECT_ERR("{\"control\":{\"listen\":[\"foo\"]}}",
               "control.listen[0]: bad listen address \"foo\" (expected unix:PATH, vsock:PORT or "
               "serial:PATH)");
    EXPECT_ERR("{\"control\":{\"listen\":[\"vsock:1025\",\"vsock:abc\"]}}",
               "control.listen[1]: bad listen address \"vsock:abc\" (vsock port must be "
               "1..4294967294)");
    EXPECT_ERR("{\"control\":{\"listen\":[\"vsock:4294967295\"]}}",
               "control.listen[0]: bad listen address \"vsock:4294967295\" (vsock port must be "
               "1..4294967294)");
    EXPECT_ERR("{\"control\":{\"listen\":[\"vsock:+5\"]}}",
               "control.listen[0]: bad listen address \"vsock:+5\" (vsock port must be "
               "1..4294967294)");
    EXPECT_ERR("{\"control\":{\"listen\":[\"unix:\"]}}",
               "control.listen[0]: bad listen address \"unix:\" (empty path)");
    EXPECT_ERR("{\"control\":{\"listen\":[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\",\"i\"]}}",
               "control.listen: at most 8 entries");
}

TEST(names_parse_listen_direct)
{
    struct listen_spec l;
    struct err err;
    char longpath[200];

    CHECK_EQ_INT(names_parse_listen("unix:/run/x.sock", &l, &err), 0);
    CHECK_EQ_INT(l.kind, LISTEN_UNIX);
    CHECK_STR(l.path, "/run/x.sock");
    CHECK_EQ_INT(names_parse_listen("vsock:1025", &l, &err), 0);
    CHECK_EQ_INT(l.kind, LISTEN_VSOCK);
    CHECK_EQ_INT(l.port, 1025);
    CHECK_EQ_INT(names_parse_listen("serial:org.hearth.ctl", &l, &err), 0);
    CHECK_EQ_INT(l.kind, LISTEN_SERIAL);
    CHECK_STR(l.path, "org.hearth.ctl");

    memset(longpath, 'a', sizeof(longpath));
    memcpy(longpath, "unix:/", 6);
    longpath[sizeof(longpath) - 1] = '\0';
    CHECK_EQ_INT(names_parse_listen(longpath, &l, &err), -1);
    CHECK_CONTAINS(err.msg, "path longer than 107 bytes");
    CHECK_EQ_INT(names_parse_listen("tcp:80", &l, &err), -1);
    CHECK_CONTAINS(err.msg, "expected unix:PATH");
    CHECK_EQ_INT(names_parse_listen("vsock:0", &l, NULL), -1);
    CHECK_EQ_INT(names_parse_listen("vsock:01", &l, &err), -1);
    /* A control character in the value is escaped in the message. */
    CHECK_EQ_INT(names_parse_listen("x\ny", &l, &err), -1);
    CHECK_CONTAINS(err.msg, "\"x\\x0ay\"");
}

TEST(config_error_cidr)
{
    EXPECT_ERR("{\"egress\":{\"allowOut\":[\"10.1.2.3/8\"]}}",
               "egress.allowOut[0]: bad CIDR \"10.1.2.3/8\": host bits set below the /8 prefix "
               "(did you mean 10.0.0.0/8?)");
    EXPECT_ERR("{\"egress\":{\"denyOut\":[\"10.0.0.0/8\",\"nope\"]}}",
               "egress.denyOut[1]: bad CIDR \"nope\": bad IPv4 address");
    EXPECT_ERR("{\"egress\":{\"denyOut\":[\"fc00::/200\"]}}",
               "egress.denyOut[0]: bad CIDR \"fc00::/200\": bad prefix length (expected 0..128)");
    EXPECT_ERR("{\"network\":{\"interfaces\":[{\"name\":\"eth0\",\"address\":\"1.2.3.4/33\"}]}}",
               "network.interfaces[0].address: bad address \"1.2.3.4/33\": bad prefix length "
               "(expected 0..32)");
    EXPECT_ERR("{\"network\":{\"interfaces\":[{\"name\":\"eth0\",\"gateway\":\"1.2.3.4/32\"}]}}",
               "network.interfaces[0].gateway: bad IP address \"1.2.3.4/32\"");
    EXPECT_ERR("{\"network\":{\"dns\":[\"dns.google\"]}}",
               "network.dns[0]: bad IP address \"dns.google\"");
}

TEST(config_error_services)
{
    EXPECT_ERR("{\"services\":[{\"name\":\"a\",\"argv\":[\"a\"]},{\"name\":\"a\",\"argv\":[\"b\"]}]}",
               "services[1].name: duplicate service name \"a\" (also services[0])");
    EXPECT_ERR(SVC(",\"after\":[\"mounts\",\"db\"]"),
               "services[0].after[1]: unknown service or phase \"db\" (phases: mounts, skills, "
               "egress, network, init)");
    EXPECT_ERR(SVC(",\"after\":[\"a\"]"), "services[0].after[0]: a service cannot wait for itself");
    EXPECT_ERR("{\"services\":[{\"name\":\"a\",\"argv\":[\"a\"],\"main\":true},"
               "{\"name\":\"b\",\"argv\":[\"b\"],\"main\":false},"
               "{\"name\":\"c\",\"argv\":[\"c\"],\"main\":true}]}",
               "services[2].main: only one service may be main (services[0] already is)");
    EXPECT_ERR("{\"services\":[{\"name\":\"a\",\"argv\":[\"a\"],\"after\":[\"b\"]},"
               "{\"name\":\"b\",\"argv\":[\"b\"],\"after\":[\"c\"]},"
               "{\"name\":\"c\",\"argv\":[\"c\"],\"after\":[\"a\"]}]}",
               "services[0].after: dependency cycle: a -> b -> c -> a");
    EXPECT_ERR("{\"services\":[{\"name\":\"a\",\"argv\":[\"a\"]},"
               "{\"name\":\"b\",\"argv\":[\"b\"],\"after\":[\"c\"]},"
               "{\"name\":\"c\",\"argv\":[\"c\"],\"after\":[\"b\"]}]}",
               "services[1].after: dependency cycle: b -> c -> b");
    EXPECT_ERR("{\"services\":[{\"argv\":[\"a\"]}]}", "services[0].name: missing required key");
    EXPECT_ERR("{\"services\":[{\"name\":\"a\"}]}", "services[0].argv: missing required key");
    EXPECT_ERR("{\"services\":[{\"name\":\"a\",\"argv\":[]}]}", "services[0].argv: must not be empty");
    EXPECT_ERR("{\"services\":[{\"name\":\"a\",\"argv\":[\"\"]}]}",
               "services[0].argv[0]: must not be empty");
    EXPECT_ERR("{\"services\":[{\"name\":\"a b\",\"argv\":[\"a\"]}]}",
               "services[0].name: bad service name \"a b\" (expected [A-Za-z0-9_.-]{1,64})");
    EXPECT_ERR("{\"services\":[{\"name\":\"mounts\",\"argv\":[\"a\"]}]}",
               "services[0].name: \"mounts\" is reserved (a phase name)");
    EXPECT_ERR(SVC(",\"env\":{\"1BAD\":\"x\"}"),
               "services[0].env: bad environment variable name \"1BAD\"");
    EXPECT_ERR(SVC(",\"env\":{\"A=B\":\"x\"}"),
               "services[0].env: bad environment variable name \"A=B\"");
    EXPECT_ERR(SVC(",\"env_files\":[\"relative/.env\"]"),
               "services[0].env_files[0]: expected an absolute path, got \"relative/.env\"");
    EXPECT_ERR(SVC(",\"secrets\":[{\"env\":\"1KEY\",\"file\":\"/h/.env\"}]"),
               "services[0].secrets[0].env: bad environment variable name \"1KEY\"");
    EXPECT_ERR(SVC(",\"secrets\":[{\"env\":\"KEY\",\"file\":\"h/.env\"}]"),
               "services[0].secrets[0].file: expected an absolute path, got \"h/.env\"");
    EXPECT_ERR(SVC(",\"secrets\":[{\"env\":\"KEY\",\"file\":\"/h/../.env\"}]"),
               "services[0].secrets[0].file: path \"/h/../.env\" must not contain '.', '..' or "
               "'//' components");
    EXPECT_ERR(SVC(",\"secrets\":[{\"env\":\"KEY\",\"file\":\"/h/\"}]"),
               "services[0].secrets[0].file: expected the path of a file, got \"/h/\"");
    EXPECT_ERR(SVC(",\"secrets\":[{\"env\":\"KEY\",\"file\":\"/h/.env\",\"chars\":16}]"),
               "services[0].secrets[0].chars: must be between 32 and 256");
    EXPECT_ERR(SVC(",\"secrets\":[{\"file\":\"/h/.env\"}]"),
               "services[0].secrets[0].env: missing required key");
    EXPECT_ERR(SVC(",\"secrets\":[{\"env\":\"KEY\",\"file\":\"/h/.env\",\"mode\":1}]"),
               "services[0].secrets[0].mode: unknown key");
    EXPECT_OK(SVC(",\"secrets\":[{\"env\":\"KEY\",\"file\":\"/h/.env\",\"chars\":256},"
                  "{\"env\":\"OTHER\",\"file\":\"/h/.env\"}]"));
    EXPECT_ERR(SVC(",\"umask\":\"089\""),
               "services[0].umask: expected an octal string such as \"022\" or an integer 0..511");
    EXPECT_ERR(SVC(",\"umask\":512"),
               "services[0].umask: expected an octal string such as \"022\" or an integer 0..511");
    EXPECT_ERR(SVC(",\"rlimits\":{\"files\":10}"),
               "services[0].rlimits: unknown resource limit \"files\" (expected one of as, core, "
               "cpu, data, fsize, locks, memlock, msgqueue, nice, nofile, nproc, rss, rtprio, "
               "rttime, sigpending, stack)");
    EXPECT_ERR(SVC(",\"rlimits\":{\"nofile\":-1}"),
               "services[0].rlimits.nofile: expected an integer >= 0 or \"unlimited\"");
    EXPECT_ERR(SVC(",\"rlimits\":{\"nofile\":\"infinity\"}"),
               "services[0].rlimits.nofile: expected an integer >= 0 or \"unlimited\"");
    EXPECT_ERR(SVC(",\"caps_drop\":[\"CAP_NET_ADMIN\",\"CAP_WIZARD\"]"),
               "services[0].caps_drop[1]: unknown capability \"CAP_WIZARD\"");
    EXPECT_ERR(SVC(",\"backoff\":{\"initial_ms\":5000,\"max_ms\":1000}"),
               "services[0].backoff.initial_ms: must not exceed max_ms (1000)");
    EXPECT_ERR(SVC(",\"backoff\":{\"initial_ms\":40000}"),
               "services[0].backoff.initial_ms: must not exceed max_ms (30000)");
    EXPECT_ERR(SVC(",\"backoff\":{\"max_ms\":100}"),
               "services[0].backoff.max_ms: must not be below initial_ms (500)");
    EXPECT_ERR(SVC(",\"user\":\"\""), "services[0].user: must not be empty");
}

TEST(config_error_too_many_services)
{
    /* 65 services: one more than CONFIG_MAX_SERVICES. */
    char *doc = malloc(8192);
    size_t o = 0;

    o += (size_t)sprintf(doc + o, "{\"services\":[");
    for (int i = 0; i <= CONFIG_MAX_SERVICES; i++)
        o += (size_t)sprintf(doc + o, "%s{\"name\":\"s%d\",\"argv\":[\"x\"]}", i ? "," : "", i);
    sprintf(doc + o, "]}");
    EXPECT_ERR(doc, "services: at most 64 entries");

    /* Exactly 64 is fine, each depending on the previous. */
    o = (size_t)sprintf(doc, "{\"services\":[");
    for (int i = 0; i < CONFIG_MAX_SERVICES; i++) {
        if (i)
            o += (size_t)sprintf(doc + o, ",{\"name\":\"s%d\",\"argv\":[\"x\"],\"after\":[\"s%d\"]}",
                                 i, i - 1);
        else
            o += (size_t)sprintf(doc + o, "{\"name\":\"s0\",\"argv\":[\"x\"]}");
    }
    sprintf(doc + o, "]}");
    EXPECT_OK(doc);
    free(doc);
}

TEST(config_error_ready_health_stop)
{
    EXPECT_ERR(SVC(",\"ready\":{\"timeout_ms\":100}"),
               "services[0].ready: needs one of tcp, http, unix, file, notify_fd, notify, exec");
    EXPECT_ERR(SVC(",\"ready\":{\"tcp\":\"127.0.0.1:80\",\"file\":\"/run/x\"}"),
               "services[0].ready: only one of tcp, http, unix, file, notify_fd, notify, exec may be given");
    EXPECT_ERR(SVC(",\"ready\":{\"tcp\":\"127.0.0.1:0\"}"),
               "services[0].ready.tcp: bad address \"127.0.0.1:0\" (expected HOST:PORT, port "
               "1..65535)");
    EXPECT_ERR(SVC(",\"ready\":{\"tcp\":\"9119\"}"),
               "services[0].ready.tcp: bad address \"9119\" (expected HOST:PORT, port 1..65535)");
    EXPECT_ERR(SVC(",\"ready\":{\"tcp\":\"::1:80\"}"),
               "services[0].ready.tcp: bad address \"::1:80\" (expected HOST:PORT; IPv6 as "
               "[ADDR]:PORT)");
    EXPECT_ERR(SVC(",\"ready\":{\"exec\":[]}"), "services[0].ready.exec: must not be empty");
    EXPECT_ERR(SVC(",\"health\":{\"interval_ms\":1000}"), "services[0].health: needs one of tcp, http, unix, exec, watchdog_ms");
    EXPECT_ERR(SVC(",\"health\":{\"tcp\":\"127.0.0.1:80\",\"interval_ms\":0}"),
               "services[0].health.interval_ms: must be >= 1");
    EXPECT_ERR(SVC(",\"stop\":{\"signal\":\"SIGFOO\"}"),
               "services[0].stop.signal: unknown signal \"SIGFOO\"");
    EXPECT_ERR(SVC(",\"stop\":{\"signal\":15}"), "services[0].stop.signal: expected string");
    EXPECT_ERR(SVC(",\"on_resume\":\"signal:SIGNOPE\""),
               "services[0].on_resume: unknown signal \"SIGNOPE\"");
    EXPECT_ERR(SVC(",\"on_resume\":\"reboot\""),
               "services[0].on_resume: expected none, restart, restart:SIGNAME or signal:SIGNAME");
    EXPECT_ERR(SVC(",\"log\":{\"file\":\"hermes.out\"}"),
               "services[0].log.file: expected an absolute path, got \"hermes.out\"");
}

TEST(config_restart_exit_codes_and_graceful_restart)
{
    char err[CONFIG_ERR_MAX] = "";
    struct config *cfg = parse(SVC(",\"restart_force_exit_codes\":[75,0],"
                                   "\"restart_prevent_exit_codes\":[78,255],"
                                   "\"on_resume\":\"restart:SIGUSR1\""), err);
    CHECK(cfg != NULL);
    if (cfg) {
        const struct service_config *s = &cfg->services[0];
        CHECK(config_code_in(s->force_exit, 75));
        CHECK(config_code_in(s->force_exit, 0));
        CHECK(!config_code_in(s->force_exit, 78));
        CHECK(config_code_in(s->prevent_exit, 78));
        CHECK(config_code_in(s->prevent_exit, 255));
        CHECK(!config_code_in(s->prevent_exit, 75));
        CHECK(!config_code_in(s->prevent_exit, -1));
        CHECK(!config_code_in(s->prevent_exit, 256));
        CHECK_STR(s->on_resume, "restart:SIGUSR1");
    }
    config_free(cfg);
    EXPECT_ERR(SVC(",\"restart_force_exit_codes\":[75],\"restart_prevent_exit_codes\":[78,75]"),
               "services[0].restart_prevent_exit_codes[1]: 75 is also in restart_force_exit_codes");
    EXPECT_ERR(SVC(",\"restart_force_exit_codes\":[256]"),
               "services[0].restart_force_exit_codes[0]: must be between 0 and 255");
    EXPECT_ERR(SVC(",\"restart_prevent_exit_codes\":[\"78\"]"),
               "services[0].restart_prevent_exit_codes[0]: expected integer");
    EXPECT_ERR(SVC(",\"on_resume\":\"restart:SIGNOPE\""),
               "services[0].on_resume: unknown signal \"SIGNOPE\"");
    EXPECT_OK(SVC(",\"on_resume\":\"restart:USR1\""));
}

TEST(config_http_probe_targets)
{
    EXPECT_OK(SVC(",\"ready\":{\"http\":\"127.0.0.1:8642/health\",\"timeout_ms\":1000}"));
    EXPECT_OK(SVC(",\"health\":{\"http\":\"[::1]:8642/health?x=1\",\"failures\":2}"));
    EXPECT_OK(SVC(",\"health\":{\"http\":\"localhost:80\"}"));
    EXPECT_ERR(SVC(",\"ready\":{\"http\":\"127.0.0.1:0/health\"}"),
               "services[0].ready.http: bad address \"127.0.0.1:0\" (expected HOST:PORT, port "
               "1..65535)");
    EXPECT_ERR(SVC(",\"ready\":{\"http\":\"/health\"}"),
               "services[0].ready.http: bad target \"/health\": expected HOST:PORT/PATH");
    EXPECT_ERR(SVC(",\"health\":{\"http\":\"127.0.0.1:80/a b\"}"),
               "services[0].health.http: bad target \"127.0.0.1:80/a b\": path byte 2 is a space, "
               "a control or a non-ASCII byte (percent-encode it)");
    EXPECT_ERR(SVC(",\"health\":{\"http\":\"127.0.0.1:80/\",\"tcp\":\"127.0.0.1:80\"}"),
               "services[0].health: only one of tcp, http, unix, exec, watchdog_ms may be given");
}

TEST(config_error_machine_sections)
{
    EXPECT_ERR("{\"hostname\":\"bad_name\"}",
               "hostname: bad hostname \"bad_name\" (letters, digits, '-' and '.', at most 64 "
               "bytes)");
    EXPECT_ERR("{\"hostname\":\"-x\"}",
               "hostname: bad hostname \"-x\" (letters, digits, '-' and '.', at most 64 bytes)");
    EXPECT_ERR("{\"hostname\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}",
               "hostname: bad hostname \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
               "aaaa\" (letters, digits, '-' and '.', at most 64 bytes)");
    /* Long values are cut in messages so the path stays visible. */
    EXPECT_ERR("{\"modules\":[\"" "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
               "aaaaaaaaaaaaaaaaaaaa/\"]}",
               "modules[0]: bad module name \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
               "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...\"");
    EXPECT_ERR("{\"modules\":[\"../evil\"]}", "modules[0]: bad module name \"../evil\"");
    EXPECT_ERR("{\"mounts\":[{\"source\":\"a\",\"target\":\"relative\"}]}",
               "mounts[0].target: expected an absolute path, got \"relative\"");
    EXPECT_ERR("{\"mounts\":[{\"source\":\"a\"}]}", "mounts[0].target: missing required key");
    EXPECT_ERR("{\"mounts\":[{\"target\":\"/x\",\"type\":\"virtiofs\"}]}",
               "mounts[0].source: missing required key (only tmpfs mounts may omit it)");
    EXPECT_ERR("{\"mounts\":[{\"source\":\"a\",\"target\":\"/x\",\"type\":\"ext4 -o\"}]}",
               "mounts[0].type: bad filesystem type \"ext4 -o\"");
    EXPECT_ERR("{\"mounts\":[{\"source\":\"a\",\"target\":\"/x\",\"type\":\"\"}]}",
               "mounts[0].type: must not be empty");
    EXPECT_ERR("{\"network\":{\"interfaces\":[{\"mtu\":1500}]}}",
               "network.interfaces[0].name: missing required key");
    EXPECT_ERR("{\"network\":{\"interfaces\":[{\"name\":\"a-very-long-ifname\"}]}}",
               "network.interfaces[0].name: bad interface name \"a-very-long-ifname\"");
    EXPECT_ERR("{\"network\":{\"interfaces\":[{\"name\":\"eth0\",\"mac\":\"02:00:00:00:00\"}]}}",
               "network.interfaces[0].mac: bad MAC address \"02:00:00:00:00\" (expected "
               "xx:xx:xx:xx:xx:xx)");
    EXPECT_ERR("{\"seed\":[{\"target\":\"/root/.hermes\"}]}", "seed[0].from: missing required key");
    EXPECT_ERR("{\"skills\":{\"ignore\":[\"\"]}}", "skills.ignore[0]: must not be empty");
    EXPECT_ERR("{\"host_mounts_rule\":{\"mode\":\"subpath\"}}",
               "host_mounts_rule.tag: missing required key (needed by mode subpath)");
}

TEST(config_error_host_mounts)
{
    EXPECT_ERR("{\"host_mounts\":\"[{\\\"hostPath\\\":\\\"/data/x\\\",\\\"mountPath\\\":"
               "\\\"relative\\\"}]\"}",
               "host_mounts[0].mountPath: expected an absolute path, got \"relative\"");
    EXPECT_ERR("{\"host_mounts\":\"[{\\\"hostPath\\\":\\\"/a\\\",\\\"mountPath\\\":\\\"/b\\\"},"
               "{\\\"hostPath\\\":\\\"/c\\\"}]\"}",
               "host_mounts[1].mountPath: missing required key");
    EXPECT_ERR("{\"host_mounts\":\"[{\\\"hostPath\\\":\\\"/a\\\",\\\"mountPath\\\":\\\"/b\\\","
               "\\\"readOnly\\\":\\\"no\\\"}]\"}",
               "host_mounts[0].readOnly: expected boolean");
    EXPECT_ERR("{\"host_mounts\":\"[{\\\"hostPath\\\":\\\"/a\\\",\\\"mountPath\\\":\\\"/b\\\","
               "\\\"mode\\\":1}]\"}",
               "host_mounts[0].mode: unknown key");
    EXPECT_ERR("{\"host_mounts\":\"[{\\\"hostPath\\\":}]\"}",
               "host_mounts: bad JSON in string: syntax error at byte 13 (line 1, column 14)");
    EXPECT_ERR("{\"host_mounts\":\"{}\"}", "host_mounts: expected a JSON array in the string");
    EXPECT_ERR("{\"host_mounts\":[]}", "host_mounts: expected string");
    EXPECT_ERR("{\"host_mounts\":\"[{\\\"hostPath\\\":\\\"/data/shared/../../etc\\\","
               "\\\"mountPath\\\":\\\"/x\\\"}]\"}",
               "host_mounts[0].hostPath: path \"/data/shared/../../etc\" must not contain '.', "
               "'..' or '//' components");
    EXPECT_ERR("{\"mounts\":[{\"source\":\"a\",\"target\":\"/root/./x\"}]}",
               "mounts[0].target: path \"/root/./x\" must not contain '.', '..' or '//' "
               "components");
    /* subpath mode: every share must lie under host_root. */
    EXPECT_OK("{\"host_mounts\":\"[{\\\"hostPath\\\":\\\"/data/shared/homes/h1\\\","
              "\\\"mountPath\\\":\\\"/root/.hermes\\\"}]\",\"host_mounts_rule\":"
              "{\"mode\":\"subpath\",\"tag\":\"shared\",\"host_root\":\"/data/shared/\"}}");
    EXPECT_ERR("{\"host_mounts\":\"[{\\\"hostPath\\\":\\\"/data/shared/a\\\",\\\"mountPath\\\":"
               "\\\"/a\\\"},{\\\"hostPath\\\":\\\"/data/sharedx/b\\\",\\\"mountPath\\\":\\\"/b\\\"}]\","
               "\"host_mounts_rule\":{\"mode\":\"subpath\",\"tag\":\"shared\","
               "\"host_root\":\"/data/shared\"}}",
               "host_mounts[1].hostPath: \"/data/sharedx/b\" is not under "
               "host_mounts_rule.host_root \"/data/shared\"");
}

TEST(config_error_syntax)
{
    EXPECT_ERR("{\"hostname\": \"a\",\n \"log\": }", "syntax error at byte 26 (line 2, column 9)");
    EXPECT_ERR("{\"a\":1,}", "syntax error at byte 7 (line 1, column 8)");
    EXPECT_ERR("{} x", "syntax error at byte 3 (line 1, column 4): unexpected data after the JSON "
                       "value");
    EXPECT_ERR("{}{}", "syntax error at byte 2 (line 1, column 3): unexpected data after the JSON "
                       "value");
    EXPECT_ERR("", "syntax error at byte 0 (line 1, column 1): empty document");
    EXPECT_ERR("{\"hostname\":\"a\\u0000b\"}",
               "syntax error at byte 14 (line 1, column 15): \\u0000 in string");
    /* cJSON reads these as \u0000. */
    EXPECT_ERR("{\"hostname\":\"a\\u00zzb\"}",
               "syntax error at byte 14 (line 1, column 15): \\u without four hex digits in "
               "string");
    EXPECT_ERR("{\"hostname\":\"a\\u0Xyzb\"}",
               "syntax error at byte 14 (line 1, column 15): \\u without four hex digits in "
               "string");
    EXPECT_ERR("{\"hostname\":\"a\tb\"}",
               "syntax error at byte 14 (line 1, column 15): control character in string");

    /* The length is honoured: bytes past len are never read. */
    {
        struct err err;
        struct config *cfg = config_parse("{}garbage", 2, &err);
        CHECK(cfg != NULL);
        config_free(cfg);
        cfg = config_parse("{\"a\":1}", 5, &err);
        CHECK(cfg == NULL);
        CHECK_CONTAINS(err.msg, "syntax error at byte");
        config_free(cfg);
        /* An embedded NUL is not the end of the document. */
        cfg = config_parse("{}\0{}", 5, &err);
        CHECK(cfg == NULL);
        CHECK_STR(err.msg, "syntax error at byte 2 (line 1, column 3): unexpected data after the JSON "
                       "value");
        config_free(cfg);
        CHECK(config_parse(NULL, 0, &err) == NULL);
        CHECK(config_parse("{", 1, NULL) == NULL);
    }
}

TEST(config_error_long_path_is_bounded)
{
    /* A huge unknown key must not overflow err; the message is cut. */
    size_t n = 5000;
    char *doc = malloc(n + 16);
    struct err err;
    struct config *cfg;

    doc[0] = '{';
    doc[1] = '"';
    memset(doc + 2, 'k', n);
    strcpy(doc + 2 + n, "\":1}");
    cfg = config_parse(doc, strlen(doc), &err);
    CHECK(cfg == NULL);
    /* Cut where the field's path is (SCHEMA_ERR_MAX), the reason after it. */
    CHECK(strlen(err.msg) >= SCHEMA_ERR_MAX - 1 && strlen(err.msg) < sizeof(err.msg));
    CHECK(strncmp(err.msg, "kkkk", 4) == 0);
    free(doc);
}

static char *write_temp(const char *content, size_t len)
{
    char *path = strdup("/tmp/hearth-config-test-XXXXXX");
    int fd = mkstemp(path);

    CHECK(fd >= 0);
    if (fd < 0)
        return path;
    while (len) {
        ssize_t w = write(fd, content, len);
        if (w <= 0)
            break;
        content += w;
        len -= (size_t)w;
    }
    close(fd);
    return path;
}

/* A config read from a pipe (no size known beforehand): the buffer grows
 * as it reads, to the same limit as a file's. */
static struct config *load_from_pipe(const char *doc, size_t len, struct err *err)
{
    int p[2];
    char path[64];
    if (pipe(p) < 0)
        return NULL;
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        while (len) {
            ssize_t w = write(p[1], doc, len);
            if (w <= 0)
                _exit(1);
            doc += w;
            len -= (size_t)w;
        }
        _exit(0);
    }
    close(p[1]);
    snprintf(path, sizeof(path), "/proc/self/fd/%d", p[0]);
    struct config *cfg = config_load(path, err);
    close(p[0]);
    waitpid(pid, NULL, 0);
    return cfg;
}

TEST(config_load_from_a_pipe_grows_to_the_limit)
{
    struct err err;
    char *big = malloc(CONFIG_MAX_BYTES + 1);
    memset(big, ' ', CONFIG_MAX_BYTES + 1);
    big[0] = '{';
    /* 40 KiB: more than the first buffer, read whole. */
    big[40000] = '}';
    struct config *cfg = load_from_pipe(big, 40001, &err);
    CHECK(cfg != NULL);
    config_free(cfg);
    big[40000] = ' ';
    big[CONFIG_MAX_BYTES - 1] = '}';
    cfg = load_from_pipe(big, CONFIG_MAX_BYTES, &err);
    CHECK(cfg != NULL);
    config_free(cfg);
    errno = 0;
    cfg = load_from_pipe(big, CONFIG_MAX_BYTES + 1, &err);
    CHECK(cfg == NULL);
    CHECK_EQ_INT(errno, EFBIG);
    CHECK_CONTAINS(err.msg, ": larger than 1048576 bytes");
    free(big);
}

TEST(config_load_files)
{
    struct err err;
    struct config *cfg;
    char *path, *big;

    errno = 0;
    cfg = config_load("/nonexistent/hearth.json", &err);
    CHECK(cfg == NULL);
    CHECK_EQ_INT(errno, ENOENT);
    CHECK_STR(err.msg, "/nonexistent/hearth.json: No such file or directory");

    cfg = config_load("/tmp", &err);
    CHECK(cfg == NULL);
    CHECK_STR(err.msg, "/tmp: Is a directory");

    /* Exactly CONFIG_MAX_BYTES loads; one byte more does not. */
    big = malloc(CONFIG_MAX_BYTES + 1);
    memset(big, ' ', CONFIG_MAX_BYTES + 1);
    big[0] = '{';
    big[CONFIG_MAX_BYTES - 1] = '}';
    path = write_temp(big, CONFIG_MAX_BYTES);
    cfg = config_load(path, &err);
    CHECK(cfg != NULL);
    config_free(cfg);
    unlink(path);
    free(path);

    path = write_temp(big, CONFIG_MAX_BYTES + 1);
    errno = 0;
    cfg = config_load(path, &err);
    CHECK(cfg == NULL);
    CHECK_EQ_INT(errno, EFBIG);
    CHECK_CONTAINS(err.msg, path);
    CHECK_CONTAINS(err.msg, ": larger than 1048576 bytes");
    unlink(path);
    free(path);

    CHECK(config_parse(big, CONFIG_MAX_BYTES + 1, &err) == NULL);
    CHECK_STR(err.msg, "document larger than 1048576 bytes");
    free(big);

    /* Validation errors from a file are the plain "path: reason". */
    path = write_temp("{\"frobnicate\":1}", 16);
    errno = 0;
    cfg = config_load(path, &err);
    CHECK(cfg == NULL);
    CHECK_EQ_INT(errno, EINVAL);
    CHECK_STR(err.msg, "frobnicate: unknown key");
    unlink(path);
    free(path);
}

TEST(config_check_section)
{
    struct err err;
    cJSON *v = cJSON_Parse("{\"allowPublicTraffic\":false,\"allowOut\":[\"10.0.0.0/8\"]}");

    CHECK_EQ_INT(config_check_section("egress", v, &err), 0);
    cJSON_Delete(v);
    v = cJSON_Parse("{\"allowOut\":[\"10.0.0.1/8\"]}");
    CHECK_EQ_INT(config_check_section("egress", v, &err), -1);
    CHECK_CONTAINS(err.msg, "egress.allowOut[0]: bad CIDR \"10.0.0.1/8\"");
    cJSON_Delete(v);
    v = cJSON_CreateString("[{\"hostPath\":\"/a\",\"mountPath\":\"b\"}]");
    CHECK_EQ_INT(config_check_section("host_mounts", v, &err), -1);
    CHECK_STR(err.msg, "host_mounts[0].mountPath: expected an absolute path, got \"b\"");
    CHECK_EQ_INT(config_check_section("nonsense", v, &err), -1);
    CHECK_STR(err.msg, "nonsense: unknown key");
    cJSON_Delete(v);
}

TEST(config_redaction)
{
    char err[CONFIG_ERR_MAX];
    struct config *cfg = parse(
        SVC(",\"env\":{\"API_KEY\":\"k1\",\"my_token\":\"t1\",\"Password\":\"p1\","
            "\"PATH\":\"/bin\",\"AWS_CREDENTIALS\":\"c\",\"db_secret_x\":\"s\",\"HOME\":\"/root\"}"),
        err);
    cJSON *red, *env;

    CHECK(cfg != NULL);
    if (!cfg)
        return;
    red = config_redacted_json(cfg);
    CHECK(red != NULL);
    env = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(red, "services"), 0), "env");
    CHECK_STR(cJSON_GetObjectItemCaseSensitive(env, "API_KEY")->valuestring, "<redacted>");
    CHECK_STR(cJSON_GetObjectItemCaseSensitive(env, "my_token")->valuestring, "<redacted>");
    CHECK_STR(cJSON_GetObjectItemCaseSensitive(env, "Password")->valuestring, "<redacted>");
    CHECK_STR(cJSON_GetObjectItemCaseSensitive(env, "AWS_CREDENTIALS")->valuestring, "<redacted>");
    CHECK_STR(cJSON_GetObjectItemCaseSensitive(env, "db_secret_x")->valuestring, "<redacted>");
    CHECK_STR(cJSON_GetObjectItemCaseSensitive(env, "PATH")->valuestring, "/bin");
    CHECK_STR(cJSON_GetObjectItemCaseSensitive(env, "HOME")->valuestring, "/root");
    /* Order and count survive the replacement. */
    CHECK_EQ_INT(cJSON_GetArraySize(env), 7);
    CHECK_STR(cJSON_GetArrayItem(env, 0)->string, "API_KEY");
    CHECK_STR(cJSON_GetArrayItem(env, 3)->string, "PATH");
    cJSON_Delete(red);

    /* The config itself keeps the real values. */
    CHECK_STR(cfg->services[0].env[0].value, "k1");
    CHECK_STR(cJSON_GetObjectItemCaseSensitive(
                  cJSON_GetObjectItemCaseSensitive(cfg->services[0].json, "env"), "API_KEY")
                  ->valuestring,
              "k1");
    config_free(cfg);

    CHECK(config_redacted_json(NULL) == NULL);
}

TEST(config_env_secret_names)
{
    CHECK(names_env_is_secret("API_KEY"));
    CHECK(names_env_is_secret("my_token"));
    CHECK(names_env_is_secret("Password"));
    CHECK(names_env_is_secret("OPENAI_API_KEY"));
    CHECK(names_env_is_secret("GITHUB_TOKEN"));
    CHECK(names_env_is_secret("client_secret"));
    CHECK(names_env_is_secret("GOOGLE_APPLICATION_CREDENTIALS"));
    CHECK(names_env_is_secret("monkey")); /* substring match, by design */
    CHECK(names_env_is_secret("SENTRY_DSN"));
    CHECK(names_env_is_secret("PROXY_AUTH"));
    CHECK(names_env_is_secret("SMTP_PASS"));
    CHECK(!names_env_is_secret("PATH"));
    CHECK(!names_env_is_secret("HOME"));
    CHECK(!names_env_is_secret("HERMES_HOME"));
    CHECK(!names_env_is_secret(""));
    CHECK(!names_env_is_secret(NULL));
}

TEST(config_signals)
{
    CHECK_EQ_INT(names_signal_number("SIGTERM"), SIGTERM);
    CHECK_EQ_INT(names_signal_number("TERM"), SIGTERM);
    CHECK_EQ_INT(names_signal_number("sigkill"), SIGKILL);
    CHECK_EQ_INT(names_signal_number("SIGHUP"), SIGHUP);
    CHECK_EQ_INT(names_signal_number("SIGSYS"), SIGSYS);
    CHECK_EQ_INT(names_signal_number("SIGWINCH"), SIGWINCH);
    CHECK_EQ_INT(names_signal_number("15"), 15);
    CHECK_EQ_INT(names_signal_number("SIGIOT"), SIGABRT);
    CHECK_EQ_INT(names_signal_number("POLL"), SIGIO);
    CHECK_EQ_INT(names_signal_number("SIGFOO"), -1);
    CHECK_EQ_INT(names_signal_number("SIG"), -1);
    CHECK_EQ_INT(names_signal_number(""), -1);
    CHECK_EQ_INT(names_signal_number(NULL), -1);
    CHECK_EQ_INT(names_signal_number("0"), -1);
    CHECK_EQ_INT(names_signal_number("15x"), -1);
    CHECK_EQ_INT(names_signal_number("99"), -1);
    CHECK_EQ_INT(names_signal_number("SIGTERM "), -1);
    CHECK_STR(names_signal_name(SIGTERM), "SIGTERM");
    CHECK_STR(names_signal_name(SIGABRT), "SIGABRT");
    CHECK_STR(names_signal_name(SIGIO), "SIGIO");
    CHECK_STR(names_signal_name(SIGCHLD), "SIGCHLD");
    CHECK(names_signal_name(0) == NULL);
    CHECK(names_signal_name(999) == NULL);
    /* Every standard signal round-trips through its name. */
    for (int sig = SIGHUP; sig <= SIGSYS; sig++) {
        const char *name = names_signal_name(sig);
        CHECK(name != NULL);
        if (name)
            CHECK_EQ_INT(names_signal_number(name), sig);
    }
}

TEST(config_caps_and_rlimits)
{
    CHECK_EQ_INT(names_cap_number("CAP_CHOWN"), 0);
    CHECK_EQ_INT(names_cap_number("CAP_NET_ADMIN"), 12);
    CHECK_EQ_INT(names_cap_number("NET_ADMIN"), 12);
    CHECK_EQ_INT(names_cap_number("cap_sys_admin"), 21);
    CHECK_EQ_INT(names_cap_number("CAP_SYS_MODULE"), 16);
    CHECK_EQ_INT(names_cap_number("CAP_SYS_TIME"), 25);
    CHECK_EQ_INT(names_cap_number("CAP_SYS_BOOT"), 22);
    CHECK_EQ_INT(names_cap_number("CAP_BPF"), 39);
    CHECK_EQ_INT(names_cap_number("CAP_CHECKPOINT_RESTORE"), 40);
    CHECK_EQ_INT(names_cap_number("CAP_"), -1);
    CHECK_EQ_INT(names_cap_number("CAP_WIZARD"), -1);
    CHECK_EQ_INT(names_cap_number(NULL), -1);
    CHECK_EQ_INT(names_rlimit_number("nofile"), RLIMIT_NOFILE);
    CHECK_EQ_INT(names_rlimit_number("as"), RLIMIT_AS);
    CHECK_EQ_INT(names_rlimit_number("core"), RLIMIT_CORE);
    CHECK_EQ_INT(names_rlimit_number("NOFILE"), -1);
    CHECK_EQ_INT(names_rlimit_number(NULL), -1);
}
