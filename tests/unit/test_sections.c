#include "unit.h"

#include <string.h>
#include <sys/socket.h>

#include <cJSON.h>

#include "clock.h"
#include "config.h"
#include "err.h"
#include "jsonget.h"
#include "names.h"
#include "netaddr.h"
#include "sections.h"

static struct config *load(const char *text)
{
    struct err err;
    struct config *c = config_parse(text, strlen(text), &err);
    if (!c)
        fprintf(stderr, "config: %s\n", err.msg);
    return c;
}

TEST(netaddr_ip_mac_and_hostport)
{
    uint8_t a[16], mac[6];
    char host[16];
    uint16_t port = 0;
    int fam = 0;

    CHECK(netaddr_parse_ip("169.254.68.5", &fam, a));
    CHECK_EQ_INT(fam, AF_INET);
    CHECK_EQ_INT(a[3], 5);
    CHECK(netaddr_parse_ip("fd00::1", &fam, NULL));
    CHECK_EQ_INT(fam, AF_INET6);
    CHECK(!netaddr_parse_ip("10.0.0.0/8", &fam, a));

    CHECK(netaddr_parse_mac("02:Aa:00:10:ff:09", mac));
    CHECK_EQ_INT(mac[1], 0xaa);
    CHECK_EQ_INT(mac[5], 9);
    CHECK(!netaddr_parse_mac("2:aa:00:10:ff:09", NULL));
    CHECK(!netaddr_parse_mac("02-aa-00-10-ff-09", NULL));
    CHECK(!netaddr_parse_mac("02:aa:00:10:ff:0g", NULL));

    CHECK_EQ_INT(netaddr_split_hostport("[::1]:8080", host, sizeof(host), &port), 0);
    CHECK_STR(host, "[::1]");
    CHECK_EQ_INT(port, 8080);
    CHECK_EQ_INT(netaddr_split_hostport("h:0", host, sizeof(host), &port), -1);
    CHECK_EQ_INT(netaddr_split_hostport("h:080", host, sizeof(host), &port), -1);
    CHECK_EQ_INT(netaddr_split_hostport("h", host, sizeof(host), &port), -1);
    CHECK_EQ_INT(netaddr_split_hostport(":80", host, sizeof(host), &port), -2);
    CHECK_EQ_INT(netaddr_split_hostport("a-host-name-too-long:80", host, sizeof(host), &port), -2);
}

TEST(names_env_rule)
{
    CHECK(names_env_valid("_A1", 3));
    CHECK(names_env_valid("PATH=x", 4));
    CHECK(!names_env_valid("1A", 2));
    CHECK(!names_env_valid("A-B", 3));
    CHECK(!names_env_valid("", 0));
}

TEST(jsonget_defaults)
{
    cJSON *o = cJSON_Parse("{\"i\":3,\"f\":1.5,\"s\":\"x\",\"b\":false,\"big\":1e300}");
    int64_t n = 0;

    CHECK_EQ_INT(jget_int_or(o, "i", 9), 3);
    CHECK_EQ_INT(jget_int_or(o, "f", 9), 9);
    CHECK_EQ_INT(jget_int_or(o, "missing", 9), 9);
    CHECK(!jget_int(jget(o, "big"), &n));
    CHECK_STR(jget_str_or(o, "s", "d"), "x");
    CHECK_STR(jget_str_or(o, "i", "d"), "d");
    CHECK(!jget_bool_or(o, "b", true));
    CHECK(jget_bool_or(NULL, "b", true));
    cJSON_Delete(o);
}

TEST(jsonget_uint_bounds)
{
    cJSON *o = cJSON_Parse("{\"top\":9007199254740992,\"over\":9007199254740994,"
                           "\"neg\":-1,\"frac\":2.5,\"s\":\"7\",\"zero\":0}");
    uint64_t u = 42;

    CHECK(jget_uint(jget(o, "top"), &u) && u == UINT64_C(9007199254740992));
    CHECK(jget_uint(jget(o, "zero"), &u) && u == 0);
    u = 42;
    CHECK(!jget_uint(jget(o, "over"), &u));
    CHECK(!jget_uint(jget(o, "neg"), &u));
    CHECK(!jget_uint(jget(o, "frac"), &u));
    CHECK(!jget_uint(jget(o, "s"), &u));
    CHECK(!jget_uint(jget(o, "missing"), &u));
    CHECK_EQ_INT(u, 42);
    cJSON_Delete(o);
}

/* The sections are extracted once, with their defaults, at load. */
TEST(sections_typed_at_load)
{
    struct config *c = load(
        "{\"network\":{\"interfaces\":[{\"name\":\"eth0\",\"mac\":\"02:00:00:00:00:01\","
        "\"address\":\"169.254.68.6/30\",\"gateway\":\"169.254.68.5\"}],\"dns\":[\"1.1.1.1\"]},"
        "\"egress\":{\"allowPublicTraffic\":false,\"allowOut\":[\"10.10.0.0/16\"]},"
        "\"mounts\":[{\"target\":\"/t\",\"type\":\"tmpfs\"}],"
        "\"host_mounts\":\"[{\\\"hostPath\\\":\\\"/d/a\\\",\\\"mountPath\\\":\\\"/a\\\"}]\","
        "\"seed\":[{\"target\":\"/home/a\",\"from\":\"/tmpl\"}],"
        "\"skills\":{\"public\":\"/p\",\"private\":\"/q\",\"ignore\":[\"x*\"]},"
        "\"metrics\":{\"disk_low_percent\":80}}");
    CHECK(c != NULL);
    if (!c)
        return;
    CHECK_EQ_INT(c->network.n_ifs, 1);
    CHECK(c->network.ifs[0].has_mac && c->network.ifs[0].has_addr && c->network.ifs[0].has_gw);
    CHECK_EQ_INT(c->network.ifs[0].prefix, 30);
    CHECK_EQ_INT(c->network.ifs[0].timeout_ms, CONFIG_IFACE_TIMEOUT_MS);
    CHECK(c->network.ifs[0].required);
    CHECK_STR(c->network.resolv, CONFIG_RESOLV_CONF);
    CHECK_EQ_INT(c->network.n_dns, 1);

    CHECK(c->egress.present && !c->egress.allow_public && !c->egress.error[0]);
    CHECK_EQ_INT(c->egress.n_allow, 1);
    CHECK_EQ_INT(c->egress.allow[0].prefix, 16);
    /* denyOut: nothing stated, the always-denied ranges appended. */
    CHECK(c->egress.n_deny > 10);
    CHECK(cJSON_IsArray(cJSON_GetObjectItem(c->egress.stated, "denyOut")));

    CHECK_EQ_INT(c->mounts.n, 1);
    CHECK(c->mounts.v[0].required && !c->mounts.v[0].source);
    CHECK_STR(c->mounts.rule_mode, CONFIG_MOUNT_RULE_MODE);
    CHECK_EQ_INT(c->mounts.host.n, 1);
    CHECK_STR(c->mounts.host.v[0].mount_path, "/a");

    CHECK_EQ_INT(c->seed.n, 1);
    CHECK(c->seed.v[0].unless == NULL);
    CHECK_STR(c->skills.ignore[0], "x*");
    CHECK(c->skills.ignore[1] == NULL);
    CHECK_STR(c->skills.marker, CONFIG_SKILLS_MARKER);
    CHECK_EQ_INT(c->skills.timeout_ms, CONFIG_SKILLS_WALK_TIMEOUT_MS);
    CHECK(!c->skills.external_dirs && c->skills.config_yaml == NULL); /* mode "links" */
    CHECK_EQ_INT(c->metrics.disk_low_percent, 80);
    CHECK_EQ_INT(c->metrics.disk_ok_percent, 80 - CONFIG_DISK_OK_GAP);
    CHECK(c->resume_file == NULL);
    config_free(c);

    c = load("{}");
    CHECK(c != NULL);
    if (!c)
        return;
    CHECK(!c->egress.present && c->network.n_ifs == 0 && !c->skills.pub);
    CHECK_EQ_INT(c->metrics.disk_check_ms, CONFIG_DISK_CHECK_MS);
    config_free(c);
}

/* envd: present means on; the polling watchers' idle bound has its
 * default and its range. */
TEST(sections_envd_watcher_idle)
{
    struct err err;
    struct config *c = load("{\"envd\":{}}");
    CHECK(c != NULL);
    if (!c)
        return;
    CHECK(c->envd.enabled);
    CHECK_EQ_INT(c->envd.watcher_idle_ms, ENVD_DEFAULT_WATCHER_IDLE_MS);
    config_free(c);
    c = load("{\"envd\":{\"watcher_idle_ms\":2000}}");
    CHECK(c != NULL);
    if (!c)
        return;
    CHECK_EQ_INT(c->envd.watcher_idle_ms, 2000);
    config_free(c);
    const char *low = "{\"envd\":{\"watcher_idle_ms\":999}}";
    c = config_parse(low, strlen(low), &err);
    CHECK(c == NULL && strstr(err.msg, "watcher_idle_ms") != NULL);
    config_free(c);
}

/* What egress.set and sandbox.init send is checked and parsed in one
 * call, with the same errors as the config's. */
TEST(sections_runtime_parse_in_one_pass)
{
    struct egress_policy p;
    struct host_mounts_cfg h;
    struct err err;

    cJSON *pol = cJSON_Parse("{\"denyOut\":[\"10.1.2.3/8\"]}");
    CHECK_EQ_INT(sections_egress_parse(pol, &p, &err), -1);
    CHECK_CONTAINS(err.msg, "egress.denyOut[0]: bad CIDR");
    CHECK(p.allow == NULL && p.stated == NULL);
    cJSON_Delete(pol);
    CHECK_EQ_INT(sections_egress_parse(NULL, &p, &err), -1);
    CHECK_STR(err.msg, "egress: expected object");

    pol = cJSON_Parse("{\"allowOut\":[\"192.168.1.7\"]}");
    CHECK_EQ_INT(sections_egress_parse(pol, &p, &err), 0);
    CHECK(p.present && p.allow_public);
    CHECK_EQ_INT(p.n_allow, 1);
    CHECK_EQ_INT(p.allow[0].prefix, 32);
    struct egress_policy copy;
    CHECK_EQ_INT(sections_egress_policy_copy(&copy, &p), 0);
    CHECK_EQ_INT(copy.n_deny, p.n_deny);
    CHECK(memcmp(copy.deny, p.deny, p.n_deny * sizeof(*p.deny)) == 0);
    sections_egress_policy_free(&copy);
    sections_egress_policy_free(&p);
    cJSON_Delete(pol);

    cJSON *hm = cJSON_CreateString("[{\"hostPath\":\"rel\",\"mountPath\":\"/x\"}]");
    CHECK_EQ_INT(sections_host_mounts_parse(hm, &h, &err), -1);
    CHECK_CONTAINS(err.msg, "host_mounts[0].hostPath");
    cJSON_Delete(hm);
    hm = cJSON_Parse("[{\"hostPath\":\"/d/b\",\"mountPath\":\"/b\",\"readOnly\":true}]");
    CHECK_EQ_INT(sections_host_mounts_parse(hm, &h, &err), 0);
    CHECK_EQ_INT(h.n, 1);
    CHECK(h.v[0].read_only);
    CHECK_STR(h.v[0].host_path, "/d/b");
    sections_host_mounts_free(&h);
    cJSON_Delete(hm);
    hm = cJSON_CreateString(" ");
    CHECK_EQ_INT(sections_host_mounts_parse(hm, &h, &err), 0);
    CHECK_EQ_INT(h.n, 0);
    sections_host_mounts_free(&h);
    cJSON_Delete(hm);
}

TEST(config_clock_and_init_gate_typed)
{
    struct config *c = load("{\"clock\":{\"set\":false,\"check_ms\":0},"
                            "\"wait_for_init\":{\"enabled\":true,\"on_timeout\":\"fail\"}}");
    CHECK(c != NULL);
    if (!c)
        return;
    CHECK_EQ_INT(c->clock_set, 0);
    CHECK_EQ_INT(c->clock_check_ms, 0);
    CHECK_EQ_INT(c->clock_step_threshold_ms, CLOCK_DEFAULT_THRESHOLD_MS);
    CHECK(c->wait_for_init && c->wait_for_init_fail);
    config_free(c);
    c = load("{\"wait_for_init\":{\"on_timeout\":\"start\"}}");
    CHECK(c != NULL);
    if (!c)
        return;
    CHECK_EQ_INT(c->clock_set, -1);
    CHECK_EQ_INT(c->clock_check_ms, CONFIG_CLOCK_CHECK_MS);
    CHECK(!c->wait_for_init_fail);
    config_free(c);
}

/* sandbox.init's and sandbox.resume's `network`: the schema with its
 * cross-checks, the run-time bounds, and the typed routes and neighbours. */
TEST(sections_network_parse)
{
    static struct network_cfg n;
    struct err err;
    struct {
        const char *json, *err;
    } bad[] = {
        {"{\"interfaces\":[{\"name\":\"eth0\"},{\"name\":\"eth1\",\"mac\":\"02:00:00:00:00\"}]}",
         "network.interfaces[1].mac: bad MAC address \"02:00:00:00:00\""},
        {"{\"interfaces\":[{\"name\":\"eth0\"},{\"name\":\"eth0\"}]}",
         "network.interfaces[1].name: \"eth0\" is also interfaces[0]"},
        {"{\"interfaces\":[{\"name\":\"a\",\"mac\":\"02:00:00:00:00:01\"},"
         "{\"name\":\"b\",\"mac\":\"02:00:00:00:00:01\"}]}",
         "network.interfaces[1].mac: \"02:00:00:00:00:01\" is also the MAC of interfaces[0]"},
        {"{\"interfaces\":[{\"name\":\"eth0\"}],\"routes\":[{\"to\":\"10.1.2.3/8\",\"dev\":\"eth0\"}]}",
         "network.routes[0].to: bad CIDR \"10.1.2.3/8\""},
        {"{\"interfaces\":[{\"name\":\"eth0\"}],\"routes\":[{\"to\":\"default\",\"dev\":\"eth1\"}]}",
         "network.routes[0].dev: \"eth1\" is not the name of one of network.interfaces"},
        {"{\"interfaces\":[{\"name\":\"eth0\"}],\"routes\":[{\"to\":\"10.0.0.0/8\",\"via\":\"fd00::1\","
         "\"dev\":\"eth0\"}]}",
         "network.routes[0].via: \"fd00::1\" is not of the family of \"to\" (IPv4)"},
        {"{\"interfaces\":[{\"name\":\"eth0\"}],\"routes\":[{\"via\":\"10.0.0.1\",\"dev\":\"eth0\"}]}",
         "network.routes[0].to: missing required key"},
        {"{\"interfaces\":[{\"name\":\"eth0\"}],\"routes\":[{\"to\":\"default\",\"dev\":\"eth0\","
         "\"mtu\":10}]}",
         "network.routes[0].mtu: must be between 68 and 65535"},
        {"{\"interfaces\":[{\"name\":\"eth0\"}],\"neighbours\":[{\"ip\":\"10.0.0.1\",\"dev\":\"eth0\"}]}",
         "network.neighbours[0].mac: missing required key"},
        {"{\"interfaces\":[{\"name\":\"eth0\"}],\"neighbours\":[{\"ip\":\"10.0.0.1\","
         "\"mac\":\"02:00:00:00:00:01\",\"dev\":\"lo\"}]}",
         "network.neighbours[0].dev: \"lo\" is not the name of one of network.interfaces"},
        {"{\"dns\":[\"1.1.1.1\",\"1.1.1.2\",\"1.1.1.3\",\"1.1.1.4\",\"1.1.1.5\",\"1.1.1.6\","
         "\"1.1.1.7\",\"1.1.1.8\",\"1.1.1.9\"]}",
         "network.dns: 9 entries, at most 8"},
        {"[]", "network: expected object"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cJSON *j = cJSON_Parse(bad[i].json);
        CHECK(j != NULL);
        CHECK_EQ_INT(sections_network_parse(j, &n, &err), -1);
        CHECK_CONTAINS(err.msg, bad[i].err);
        CHECK_EQ_INT(n.n_ifs + n.n_routes + n.n_neighs, 0);
        cJSON_Delete(j);
    }

    cJSON *j = cJSON_Parse(
        "{\"interfaces\":[{\"name\":\"eth0\",\"mac\":\"52:54:00:aa:bb:02\","
        "\"address\":\"10.0.3.15/24\",\"gateway\":\"10.0.3.2\"}],"
        "\"routes\":[{\"to\":\"192.0.2.0/24\",\"via\":\"10.0.3.1\",\"dev\":\"eth0\",\"metric\":7,"
        "\"mtu\":1300},{\"to\":\"default\",\"via\":\"fd00::1\",\"dev\":\"eth0\"},"
        "{\"to\":\"default\",\"dev\":\"eth0\"}],"
        "\"neighbours\":[{\"ip\":\"10.0.3.2\",\"mac\":\"02:00:00:00:00:02\",\"dev\":\"eth0\"}],"
        "\"dns\":[\"10.0.3.3\"]}");
    CHECK_EQ_INT(sections_network_parse(j, &n, &err), 0);
    CHECK_EQ_INT(n.n_ifs, 1);
    CHECK(n.ifs[0].has_mac && n.ifs[0].mac[5] == 2 && n.ifs[0].prefix == 24);
    CHECK_EQ_INT(n.n_routes, 3);
    CHECK(n.routes[0].fam == AF_INET && n.routes[0].dst_len == 24 && n.routes[0].dst[2] == 2);
    CHECK(n.routes[0].has_via && n.routes[0].via[3] == 1 && n.routes[0].has_metric);
    CHECK_EQ_INT(n.routes[0].metric, 7);
    CHECK_EQ_INT(n.routes[0].mtu, 1300);
    CHECK_STR(n.routes[0].dev, "eth0");
    CHECK(n.routes[1].fam == AF_INET6 && n.routes[1].dst_len == 0 && !n.routes[1].has_metric);
    CHECK(n.routes[2].fam == AF_INET && !n.routes[2].has_via);
    CHECK_STR(n.routes[2].to_s, "default");
    CHECK_EQ_INT(n.n_neighs, 1);
    CHECK(n.neighs[0].fam == AF_INET && n.neighs[0].mac[5] == 2 && n.neighs[0].ip[3] == 2);
    CHECK_EQ_INT(n.n_dns, 1);
    CHECK_STR(n.resolv, CONFIG_RESOLV_CONF);
    cJSON_Delete(j);

    /* Seventeen interfaces are a valid config but more than hearth uses. */
    j = cJSON_CreateObject();
    cJSON *a = cJSON_AddArrayToObject(j, "interfaces");
    for (int i = 0; i < 17; i++) {
        char name[16];
        snprintf(name, sizeof(name), "eth%d", i);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", name);
        cJSON_AddItemToArray(a, o);
    }
    CHECK_EQ_INT(sections_network_parse(j, &n, &err), -1);
    CHECK_STR(err.msg, "network.interfaces: 17 entries, at most 16");
    cJSON_Delete(j);
}
