/* Gates: a change is reported once, a repeat or an unknown name is not. */
#include "unit.h"

#include <cJSON.h>

#include "gates.h"

static int changes;
static bool last_reached;

static void on_change(const char *name, bool reached)
{
    if (strcmp(name, "network") == 0) {
        changes++;
        last_reached = reached;
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
    gates_on_change(NULL);
}
