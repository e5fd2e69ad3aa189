/* gates: the setup phases services may be "after" ("mounts", "skills",
 * "egress", "network", "init"; the names are names_after_phases). A
 * setup module marks its gate reached when its work is done; services
 * after a gate wait until then. Marking a gate unreached again holds new
 * starts only; revoking it also stops what runs on it (a platform's
 * mount gone from under the agent). The supervisor learns of changes
 * through one callback. */
#ifndef HEARTH_GATES_H
#define HEARTH_GATES_H

#include <stdbool.h>

struct cJSON;

/* Marks gate name reached or not: logs it and emits "phase.reached" on a
 * change, then calls the change callback. Unknown names are ignored. */
void gate_set(const char *name, bool reached);
bool gate_reached(const char *name);
/* Marks gate name unreached because what it stood for is gone (why says
 * what): emits "phase.reached" with "revoked" and "reason", and the
 * change callback is told to stop the services that depend on it, until
 * the gate is reached again. Done whether or not it was reached. */
void gate_revoke(const char *name, const char *why);
/* Whether name is a gate at all (rather than a service). */
bool gate_known(const char *name);
/* {"mounts": true, ...} for status. */
struct cJSON *gates_json(void);
/* fn(name, reached, revoked) after every change, and after each
 * gate_revoke (reached false, revoked the reason); one callback
 * (service.c's). */
void gates_on_change(void (*fn)(const char *name, bool reached, const char *revoked));

#endif
