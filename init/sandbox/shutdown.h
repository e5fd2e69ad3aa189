/* shutdown: the orderly end. Services stop in reverse order with their
 * own signals and timeouts, then: vm mode syncs, unmounts (bounded) and
 * powers off or reboots; container and supervisor modes leave the loop and
 * exit with the main service's status. */
#ifndef HEARTH_SHUTDOWN_H
#define HEARTH_SHUTDOWN_H

#include <stdbool.h>

#include "hearth.h"

/* Starts the shutdown on the next loop iteration (so a reply to the
 * request that asked for it goes out first). A second call while one is
 * under way only upgrades poweroff to reboot if asked. */
void shutdown_request(enum shutdown_action action, const char *why);
bool shutdown_in_progress(void);
const char *shutdown_action_name(enum shutdown_action a);
/* The control plane's part in the end, registered by main so that
 * shutdown does not reach up into it: end_sessions ends the processes the
 * host started (first: they are not stopped in order), flush writes what
 * the clients can take now (before a power-off, and before exit), stop
 * closes listeners and clients (before exit). Any may be NULL. */
struct shutdown_hooks {
    void (*end_sessions)(void);
    void (*flush)(void);
    void (*stop)(void);
};
void shutdown_set_hooks(const struct shutdown_hooks *h);

#endif
