/* hearth: the process-wide state every module shares — the loop, the
 * config, the mode and the lifecycle phase. One instance, set up in main. */
#ifndef HEARTH_HEARTH_H
#define HEARTH_HEARTH_H

#include <stdbool.h>
#include <stdint.h>

#include <ev.h>

#include "config.h"

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

/* Monotonic milliseconds (CLOCK_MONOTONIC): every timer and uptime uses it
 * so a wall-clock step after resume changes nothing. */
int64_t mono_ms(void);
int64_t mono_us(void);
/* Wall-clock milliseconds since the epoch, for reporting only. */
int64_t wall_ms(void);

/* Seconds until the next multiple of period_ms that lies more than half a
 * period ahead, for background timers (health probes, the skills poll, the
 * clock check). Timers armed this way share a grid, so one whose period
 * divides another's fires in the same wake-up instead of its own: an idle
 * sandbox pays one wake-up per distinct instant, not one per timer. The
 * gap between two firings stays within half and one and a half periods,
 * one period on average. The grid is counted on the loop's cached wall
 * time, which libev keeps at a fixed offset from its monotonic time
 * (re-read to within microseconds at each wake-up), so two timers aimed
 * at one grid point come due in the same wake-up; a clock step only
 * shifts the grid until each timer is next armed. */
double hearth_grid_delay(int64_t period_ms);

#endif
