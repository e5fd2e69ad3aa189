/* gates: the setup phases services may be "after" ("mounts", "skills",
 * "egress", "network", "init"; the names are config_after_phases). A
 * setup module marks its gate reached when its work is done; services
 * after a gate wait until then. Marking a gate unreached again holds new
 * starts only. The supervisor learns of changes through one callback. */
#ifndef HEARTH_GATES_H
#define HEARTH_GATES_H

#include <stdbool.h>

struct cJSON;

/* Marks gate name reached or not: logs it and emits "phase.reached" on a
 * change, then calls the change callback. Unknown names are ignored. */
void gate_set(const char *name, bool reached);
bool gate_reached(const char *name);
/* Whether name is a gate at all (rather than a service). */
bool gate_known(const char *name);
/* {"mounts": true, ...} for status. */
struct cJSON *gates_json(void);
/* fn(name, reached) after every change; one callback (service.c's). */
void gates_on_change(void (*fn)(const char *name, bool reached));

#endif
