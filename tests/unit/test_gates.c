/* Gates: a change is reported once, a repeat or an unknown name is not;
 * a revocation is always reported, with its reason. */
#include "unit.h"

#include <cJSON.h>

#include "gates.h"

static int changes;
static bool last_reached;
static char last_revoked[64];

static void on_change(const char *name, bool reached, const char *revoked)
{
    if (strcmp(name, "network") == 0) {
        changes++;
        last_reached = reached;
        snprintf(last_revoked, sizeof(last_revoked), "%s", revoked ? revoked : "");
    }
}

TEST(gates_report_each_change_once)
{
    bool was = gate_reached("network");
    gates_on_change(on_change);
    changes = 0;

    gate_set("network", !was);
    gate_set("network", !was); /* no change: no call */
    CHECK_EQ_INT(changes, 1);
    CHECK(last_reached == !was);
    CHECK(gate_reached("network") == !was);

    cJSON *j = gates_json();
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "network");
    CHECK(v && cJSON_IsBool(v) && cJSON_IsTrue(v) == !was);
    CHECK(cJSON_GetObjectItemCaseSensitive(j, "mounts") != NULL);
    cJSON_Delete(j);

    CHECK(!gate_known("web"));
    gate_set("web", true); /* a service name, not a gate: ignored */
    CHECK(!gate_reached("web"));
    CHECK(gate_known("init"));

    gate_set("network", was);
    CHECK_EQ_INT(changes, 2);
    CHECK_STR(last_revoked, "");

    /* Revoked: reported even when already unreached, with the reason. */
    gate_set("network", true);
    gate_revoke("network", "the share went away");
    CHECK(!gate_reached("network"));
    CHECK_EQ_INT(changes, 4);
    CHECK(!last_reached);
    CHECK_STR(last_revoked, "the share went away");
    gate_revoke("network", "again");
    CHECK_EQ_INT(changes, 5);
    CHECK_STR(last_revoked, "again");
    gate_revoke("web", "not a gate"); /* ignored */
    CHECK_EQ_INT(changes, 5);
    gate_set("network", was);
    gates_on_change(NULL);
}
