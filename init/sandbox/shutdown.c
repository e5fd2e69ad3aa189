#include "shutdown.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>

#include "cgroup.h"
#include "events.h"
#include "log.h"
#include "machine.h"
#include "reaper.h"
#include "sandbox.h"
#include "service.h"

static bool requested;
static enum shutdown_action pending_action;
static char reason[128];
static ev_timer kick;

const char *shutdown_action_name(enum shutdown_action a)
{
    switch (a) {
    case SHUTDOWN_POWEROFF: return "poweroff";
    case SHUTDOWN_REBOOT: return "reboot";
    case SHUTDOWN_EXIT: return "exit";
    }
    return "?";
}

bool shutdown_in_progress(void) { return requested; }

static struct shutdown_hooks hooks;

void shutdown_set_hooks(const struct shutdown_hooks *h) { hooks = *h; }

static void flush_clients(void)
{
    if (hooks.flush)
        hooks.flush();
}

static void all_stopped(void)
{
    hearth_set_phase(PHASE_STOPPED);
    if (H.mode == MODE_VM) {
        /* PID 1 never returns: power off, and if the kernel refuses, keep
         * reaping with the control plane still up so the host can see. */
        flush_clients();
        sync();
        machine_power(pending_action);
        log_error("still running after %s; reaping continues", shutdown_action_name(pending_action));
        return;
    }
    H.exit_status = service_main_status();
    /* The services are gone; what is still watched is hearth's own work
     * (a skills walk, a copy, a disk probe, a check): it must not outlive
     * hearth, stuck on a share or past its deadline. */
    reaper_kill_watched(SIGKILL);
    log_info("exiting with status %d", H.exit_status);
    flush_clients();
    if (hooks.stop)
        hooks.stop();
    cgroup_teardown();
    ev_break(H.loop, EVBREAK_ALL);
}

static void kick_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    hearth_set_phase(PHASE_STOPPING);
    /* Frozen services cannot act on their stop signal: thaw them first. */
    sandbox_thaw_for_shutdown();
    /* Processes the host started are not stopped in order: they end now. */
    if (hooks.end_sessions)
        hooks.end_sessions();
    service_stop_all(all_stopped);
}

void shutdown_request(enum shutdown_action action, const char *why)
{
    if (requested) {
        if (action == SHUTDOWN_REBOOT)
            pending_action = SHUTDOWN_REBOOT;
        log_info("shutdown already under way (%s)", why);
        return;
    }
    requested = true;
    pending_action = action;
    snprintf(reason, sizeof(reason), "%s", why);
    log_info("shutdown (%s): %s", shutdown_action_name(action), reason);
    cJSON *p = cJSON_CreateObject();
    if (p) {
        cJSON_AddStringToObject(p, "action", shutdown_action_name(action));
        cJSON_AddStringToObject(p, "reason", reason);
    }
    events_emit("shutdown", p);
    ev_timer_init(&kick, kick_cb, 0., 0.);
    ev_timer_start(H.loop, &kick);
}
