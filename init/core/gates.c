#include "gates.h"

#include <string.h>

#include <cJSON.h>

#include "config.h"
#include "events.h"
#include "log.h"

/* Whether each gate of names_after_phases has been reached. A gate whose
 * module has nothing to do is marked at boot. */
static bool gate_up[8];
#define NGATES ((int)(sizeof(gate_up) / sizeof(gate_up[0])))
static void (*change_fn)(const char *name, bool reached, const char *revoked);

static int gate_index(const char *name)
{
    for (int i = 0; i < NGATES && names_after_phases[i]; i++)
        if (strcmp(names_after_phases[i], name) == 0)
            return i;
    return -1;
}

void gates_on_change(void (*fn)(const char *, bool, const char *)) { change_fn = fn; }

bool gate_known(const char *name) { return gate_index(name) >= 0; }

static void change(int i, bool reached, const char *revoked)
{
    const char *name = names_after_phases[i];
    gate_up[i] = reached;
    if (revoked)
        log_warn("phase %s revoked: %s", name, revoked);
    else
        log_info("phase %s %s", name, reached ? "reached" : "no longer reached");
    cJSON *o = cJSON_CreateObject();
    if (o) {
        cJSON_AddStringToObject(o, "phase", name);
        cJSON_AddBoolToObject(o, "reached", reached);
        if (revoked) {
            cJSON_AddBoolToObject(o, "revoked", 1);
            cJSON_AddStringToObject(o, "reason", revoked);
        }
    }
    events_emit("phase.reached", o);
    if (change_fn)
        change_fn(name, reached, revoked);
}

void gate_set(const char *name, bool reached)
{
    int i = gate_index(name);
    if (i < 0 || gate_up[i] == reached)
        return;
    change(i, reached, NULL);
}

void gate_revoke(const char *name, const char *why)
{
    int i = gate_index(name);
    if (i >= 0)
        change(i, false, why && why[0] ? why : "revoked");
}

bool gate_reached(const char *name)
{
    int i = gate_index(name);
    return i >= 0 && gate_up[i];
}

cJSON *gates_json(void)
{
    cJSON *o = cJSON_CreateObject();
    for (int i = 0; o && i < NGATES && names_after_phases[i]; i++)
        cJSON_AddBoolToObject(o, names_after_phases[i], gate_up[i]);
    return o;
}
