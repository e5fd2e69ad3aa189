#include "hearth.h"

#include <time.h>

#include <cJSON.h>

#include "events.h"
#include "log.h"

struct hearth H;

static const char *const mode_names[] = {"vm", "container", "supervisor"};
static const char *const phase_names[] = {"boot", "setup", "wait_init", "starting",
                                          "running", "stopping", "stopped"};

const char *hearth_mode_name(enum hearth_mode m) { return mode_names[m]; }
const char *hearth_phase_name(enum hearth_phase p) { return phase_names[p]; }

int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

double hearth_grid_delay(int64_t period_ms)
{
    if (period_ms <= 0)
        return 0.;
    double now = ev_now(H.loop);
    int64_t now_ms = (int64_t)(now * 1000.0);
    int64_t next = ((now_ms + period_ms / 2) / period_ms + 1) * period_ms;
    double d = (double)next / 1000.0 - now;
    return d > 0. ? d : 0.;
}

void hearth_set_phase(enum hearth_phase p)
{
    if (H.phase == p)
        return;
    enum hearth_phase from = H.phase;
    H.phase = p;
    log_info("phase %s -> %s", phase_names[from], phase_names[p]);
    cJSON *o = cJSON_CreateObject();
    if (o) {
        cJSON_AddStringToObject(o, "phase", phase_names[p]);
        cJSON_AddStringToObject(o, "from", phase_names[from]);
    }
    events_emit("phase", o);
}
