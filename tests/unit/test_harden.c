#include "unit.h"

#include <stdio.h>

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cJSON.h>

#include "config.h"
#include "harden.h"
#include "names.h"

static struct config *parse(const char *json, char *err)
{
    struct err e = {0};
    struct config * r = config_parse(json, strlen(json), &e);
    if (err)
        snprintf(err, CONFIG_ERR_MAX, "%s", e.msg);
    return r;
}

#define EXPECT_ERR(json, msg)                     \
    do {                                          \
        char e_[CONFIG_ERR_MAX] = "";             \
        struct config *c_ = parse((json), e_);    \
        CHECK(c_ == NULL);                        \
        CHECK_STR(e_, (msg));                     \
        config_free(c_);                          \
    } while (0)

TEST(sysctl_name_to_path)
{
    char p[64];
    CHECK_EQ_INT(names_sysctl_path("/proc/sys", "kernel.yama.ptrace_scope", p, sizeof(p)), 0);
    CHECK_STR(p, "/proc/sys/kernel/yama/ptrace_scope");
    CHECK_EQ_INT(names_sysctl_path("/r", "net.ipv4.conf.all-x.rp_filter", p, sizeof(p)), 0);
    CHECK_STR(p, "/r/net/ipv4/conf/all-x/rp_filter");
    /* Nothing that could leave the root, nothing empty. */
    static const char *const bad[] = {"", ".", "..", "kernel..modprobe", ".kernel.modprobe",
                                      "kernel.modprobe.", "kernel/modprobe", "../../etc/passwd",
                                      "kernel.mod probe", "kernel.modprobe\n", "kernel.*", NULL};
    for (const char *const *b = bad; *b; b++) {
        CHECK_EQ_INT(names_sysctl_path("/proc/sys", *b, p, sizeof(p)), -1);
    }
    /* A path past the buffer is refused, never cut. */
    CHECK_EQ_INT(names_sysctl_path("/proc/sys", "kernel.yama.ptrace_scope", p, 20), -1);
}

TEST(sysctl_config_checks_name_and_value)
{
    char e[CONFIG_ERR_MAX] = "";
    struct config *c = parse("{\"sysctl\":{\"kernel.yama.ptrace_scope\":\"2\",\"kernel.sysrq\":null,"
                             "\"net.ipv4.ip_unprivileged_port_start\":80,"
                             "\"kernel.usermodehelper.bset\":\"0\\t0\"}}",
                             e);
    CHECK(c != NULL);
    if (c) {
        CHECK_EQ_INT(c->sysctl.n, 4);
        CHECK_STR(c->sysctl.v[0].name, "kernel.yama.ptrace_scope");
        CHECK_STR(c->sysctl.v[0].value, "2");
        CHECK(c->sysctl.v[1].value == NULL);
        CHECK_STR(c->sysctl.v[2].value, "80");
        CHECK_STR(c->sysctl.v[3].value, "0\t0");
        config_free(c);
    }
    EXPECT_ERR("{\"sysctl\":{\"kernel..modprobe\":\"x\"}}",
               "sysctl: bad sysctl name \"kernel..modprobe\" (expected letters, digits, '_' and "
               "'-' in parts joined by single dots, at most 128 characters)");
    EXPECT_ERR("{\"sysctl\":{\"kernel/../../x\":\"1\"}}",
               "sysctl: bad sysctl name \"kernel/../../x\" (expected letters, digits, '_' and "
               "'-' in parts joined by single dots, at most 128 characters)");
    EXPECT_ERR("{\"sysctl\":{\"kernel.core_pattern\":\"core\\n|/tmp/x\"}}",
               "sysctl.kernel.core_pattern: must not contain a newline or another control "
               "character");
    EXPECT_ERR("{\"sysctl\":{\"kernel.sysrq\":true}}",
               "sysctl.kernel.sysrq: expected a string, an integer or null");
    EXPECT_ERR("{\"sysctl\":{\"kernel.sysrq\":1.5}}",
               "sysctl.kernel.sysrq: expected a string, an integer or null");
    EXPECT_ERR("{\"sysctl\":[\"kernel.sysrq\"]}", "sysctl: expected object");
}

static const struct harden_row *find(const struct harden_row *rows, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(rows[i].name, name) == 0)
            return &rows[i];
    return NULL;
}

TEST(harden_plan_baseline_and_overrides)
{
    static struct harden_row rows[HARDEN_ROWS_MAX];
    struct sysctl_entry ents[] = {{"kernel.yama.ptrace_scope", "2"},
                                  {"kernel.modprobe", "/sbin/modprobe"},
                                  {"kernel.core_pattern", NULL},
                                  {"kernel.kptr_restrict", "2"},
                                  {"net.ipv4.ip_unprivileged_port_start", "80"}};
    struct sysctl_cfg cfg = {ents, 5};

    /* vm mode, no config: the baseline alone, the helpers first. */
    size_t n = harden_plan(NULL, true, rows, HARDEN_ROWS_MAX);
    CHECK(n >= 12);
    CHECK_STR(rows[0].name, "kernel.modprobe");
    CHECK_STR(rows[0].wanted, "");
    CHECK(rows[0].has_wanted && !rows[0].from_config && !rows[0].loosened);
    const struct harden_row *r = find(rows, n, "kernel.usermodehelper.bset");
    CHECK(r && strcmp(r->wanted, "0\t0") == 0);
    r = find(rows, n, "kernel.core_pattern");
    CHECK(r && r->wanted[0] != '|');
    r = find(rows, n, "fs.suid_dumpable");
    CHECK(r && strcmp(r->wanted, "0") == 0);

    size_t base = n;
    n = harden_plan(&cfg, true, rows, HARDEN_ROWS_MAX);
    CHECK_EQ_INT(n, base + 1);
    r = find(rows, n, "kernel.yama.ptrace_scope");
    CHECK(r && strcmp(r->wanted, "2") == 0 && r->from_config && !r->loosened);
    /* Setting the module helper back, or leaving core_pattern to the
     * kernel, loosens; the same value as the baseline does not. */
    r = find(rows, n, "kernel.modprobe");
    CHECK(r && strcmp(r->wanted, "/sbin/modprobe") == 0 && r->loosened);
    r = find(rows, n, "kernel.core_pattern");
    CHECK(r && !r->has_wanted && r->loosened);
    r = find(rows, n, "kernel.kptr_restrict");
    CHECK(r && r->from_config && !r->loosened);
    CHECK_STR(rows[n - 1].name, "net.ipv4.ip_unprivileged_port_start");
    CHECK(rows[n - 1].from_config);

    /* Not the kernel's owner: the config's keys alone, in their order. */
    n = harden_plan(&cfg, false, rows, HARDEN_ROWS_MAX);
    CHECK_EQ_INT(n, 5);
    CHECK_STR(rows[0].name, "kernel.yama.ptrace_scope");
    CHECK(!rows[1].loosened); /* no baseline to loosen */
    CHECK_EQ_INT(harden_plan(NULL, false, rows, HARDEN_ROWS_MAX), 0);
    /* Bounded by max. */
    CHECK_EQ_INT(harden_plan(&cfg, true, rows, 3), 3);
}

static char root[64];

static void put(const char *rel, const char *text)
{
    char p[256], dir[256];
    snprintf(p, sizeof(p), "%s/%s", root, rel);
    snprintf(dir, sizeof(dir), "%s", p);
    for (char *s = dir + strlen(root) + 1; (s = strchr(s, '/')); s++) {
        *s = 0;
        mkdir(dir, 0755);
        *s = '/';
    }
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
        if (write(fd, text, strlen(text)) < 0)
            CHECK(0);
        close(fd);
    }
}

static const cJSON *entry(const cJSON *status, const char *name)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(status, "entries"))
        if (strcmp(cJSON_GetObjectItem(e, "name")->valuestring, name) == 0)
            return e;
    return NULL;
}

static const char *field(const cJSON *e, const char *k)
{
    const cJSON *v = e ? cJSON_GetObjectItem(e, k) : NULL;
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

TEST(harden_apply_writes_reads_back_and_reports)
{
    snprintf(root, sizeof(root), "/tmp/hearth-sysctl.XXXXXX");
    CHECK(mkdtemp(root) != NULL);
    put("kernel/modprobe", "/sbin/modprobe\n");
    put("kernel/usermodehelper/bset", "4294967295\t511\n");
    put("kernel/kptr_restrict", "2\n");
    put("fs/suid_dumpable", "2\n");
    put("net/ipv4/ip_unprivileged_port_start", "1024\n");
    put("net/ipv4/ip_local_port_range", "32768\t60999\n");
    char d[128];
    snprintf(d, sizeof(d), "%s/kernel/perf_event_paranoid", root);
    mkdir(d, 0755); /* cannot be written: a failure */

    struct sysctl_entry ents[] = {{"net.ipv4.ip_unprivileged_port_start", "80"},
                                  {"net.ipv4.ip_local_port_range", NULL}};
    struct sysctl_cfg cfg = {ents, 2};
    int failed = harden_apply(root, &cfg, true);
    CHECK_EQ_INT(failed, 1);
    cJSON *st = harden_json();
    CHECK(cJSON_IsTrue(cJSON_GetObjectItem(st, "baseline")));

    const cJSON *e = entry(st, "kernel.modprobe");
    CHECK_STR(field(e, "state"), "applied");
    CHECK_STR(field(e, "wanted"), "");
    CHECK_STR(field(e, "value"), "");
    CHECK_STR(field(e, "from"), "baseline");
    e = entry(st, "kernel.usermodehelper.bset");
    CHECK_STR(field(e, "state"), "applied");
    CHECK_STR(field(e, "value"), "0 0");
    /* Already as wanted: read, not written. */
    e = entry(st, "kernel.kptr_restrict");
    CHECK_STR(field(e, "state"), "applied");
    CHECK(cJSON_IsTrue(cJSON_GetObjectItem(e, "already")));
    e = entry(st, "fs.suid_dumpable");
    CHECK_STR(field(e, "value"), "0");
    CHECK(!cJSON_GetObjectItem(e, "already"));
    /* A sysctl this kernel lacks is skipped, not failed. */
    e = entry(st, "kernel.yama.ptrace_scope");
    CHECK_STR(field(e, "state"), "absent");
    CHECK(field(e, "error") == NULL);
    e = entry(st, "kernel.perf_event_paranoid");
    CHECK_STR(field(e, "state"), "failed");
    CHECK_CONTAINS(field(e, "error"), "unable to write \"3\"");
    e = entry(st, "net.ipv4.ip_unprivileged_port_start");
    CHECK_STR(field(e, "state"), "applied");
    CHECK_STR(field(e, "from"), "config");
    CHECK_STR(field(e, "value"), "80");
    e = entry(st, "net.ipv4.ip_local_port_range");
    CHECK_STR(field(e, "state"), "kept");
    CHECK_STR(field(e, "value"), "32768 60999");
    CHECK(field(e, "wanted") == NULL);
    cJSON_Delete(st);

    char buf[64] = "";
    snprintf(d, sizeof(d), "%s/kernel/modprobe", root);
    int fd = open(d, O_RDONLY);
    if (fd >= 0) {
        CHECK(read(fd, buf, sizeof(buf) - 1) == 1);
        close(fd);
    }
    CHECK_STR(buf, "\n");

    /* Not the kernel's owner and no keys: nothing written, and said so. */
    put("kernel/modprobe", "/sbin/modprobe\n");
    CHECK_EQ_INT(harden_apply(root, NULL, false), 0);
    st = harden_json();
    CHECK(cJSON_IsFalse(cJSON_GetObjectItem(st, "baseline")));
    CHECK_CONTAINS(field(st, "reason"), "not hearth's");
    CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(st, "entries")), 0);
    cJSON_Delete(st);
    memset(buf, 0, sizeof(buf));
    fd = open(d, O_RDONLY);
    if (fd >= 0) {
        CHECK(read(fd, buf, sizeof(buf) - 1) > 0);
        close(fd);
    }
    CHECK_STR(buf, "/sbin/modprobe\n");

    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
    CHECK_EQ_INT(system(cmd), 0);
}
