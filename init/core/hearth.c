#include "hearth.h"

#include <cJSON.h>

#include "events.h"
#include "log.h"

struct hearth H;

static const char *const mode_names[] = {"vm", "container", "supervisor"};
static const char *const phase_names[] = {"boot", "setup", "wait_init", "starting",
                                          "running", "stopping", "stopped"};

const char *hearth_mode_name(enum hearth_mode m) { return mode_names[m]; }
const char *hearth_phase_name(enum hearth_phase p) { return phase_names[p]; }

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
