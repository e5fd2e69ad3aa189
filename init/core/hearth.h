/* hearth: the process-wide state every module shares — the loop, the
 * config, the mode and the lifecycle phase. One instance, set up in main. */
#ifndef HEARTH_HEARTH_H
#define HEARTH_HEARTH_H

#include <stdbool.h>
#include <stdint.h>

#include <ev.h>

#include "config.h"
#include "timebase.h"

enum hearth_mode { MODE_VM, MODE_CONTAINER, MODE_SUPERVISOR };

/* The lifecycle, in order. Each change is an event notification. */
enum hearth_phase {
    PHASE_BOOT,       /* early machine setup, config */
    PHASE_SETUP,      /* network, mounts, seed, skills, egress */
    PHASE_WAIT_INIT,  /* waiting for sandbox.init */
    PHASE_STARTING,   /* services starting */
    PHASE_RUNNING,    /* all services started */
    PHASE_STOPPING,   /* orderly shutdown in progress */
    PHASE_STOPPED     /* services stopped; about to power off or exit */
};

enum shutdown_action { SHUTDOWN_POWEROFF, SHUTDOWN_REBOOT, SHUTDOWN_EXIT };

struct hearth {
    struct ev_loop *loop;
    struct config *cfg;
    char config_path[256];
    char config_error[CONFIG_ERR_MAX]; /* non-empty when the file was refused */
    enum hearth_mode mode;
    enum hearth_phase phase;
    int64_t boot_mono_ms;
    /* Boot timings, monotonic µs: hearth's start (in vm mode, the time the
     * kernel took to run it), phase "running", the first service exec. */
    int64_t boot_us, running_us, first_exec_us, modules_us;
    int exit_status;                   /* container/supervisor exit status */
};

extern struct hearth H;

const char *hearth_mode_name(enum hearth_mode m);
const char *hearth_phase_name(enum hearth_phase p);
/* Moves to phase p, logs it and emits a "phase" event. */
void hearth_set_phase(enum hearth_phase p);

/* The clocks (mono_ms, mono_us, wall_ms) are timebase.h's; the timer
 * grid on hearth's loop, see timebase_grid_delay. */
static inline double hearth_grid_delay(int64_t period_ms)
{
    return timebase_grid_delay(ev_now(H.loop), period_ms);
}
static inline double hearth_grid_after(double after_s, int64_t period_ms)
{
    return timebase_grid_after(ev_now(H.loop), after_s, period_ms);
}

#endif
