/* svc_base: what every part of the supervisor shares, below them all:
 * the services' records, the activity tracker's hooks, whether the
 * sandbox is suspended, a service's timer and its process group's
 * signal, and the way a part posts an event to the state table
 * (svc_post), through the dispatch service.c hands down at its start.
 * So the parts never call service.c, which runs them. */
#include "service_priv.h"

#include <errno.h>
#include <signal.h>

#include <ev.h>

#include "hearth.h"

struct service svcs[CONFIG_MAX_SERVICES];
size_t nsvcs;
struct svc_activity_hooks svc_activity;
bool svc_suspended;

static void (*dispatch)(struct service *s, enum svc_event ev);

void svc_set_dispatch(void (*fn)(struct service *s, enum svc_event ev)) { dispatch = fn; }

void svc_post(struct service *s, enum svc_event ev) { dispatch(s, ev); }

void svc_timer_start(struct service *s, int64_t ms)
{
    /* From now, not from the start of this turn of the loop (libev's
     * cached time), which may be a few ms earlier after a busy turn: a
     * short backoff must not end before it began. */
    ev_now_update(H.loop);
    ev_timer_stop(H.loop, &s->timer);
    ev_timer_set(&s->timer, (double)ms / 1000.0, 0.);
    ev_timer_start(H.loop, &s->timer);
}

void svc_signal_group(struct service *s, int sig)
{
    if (s->pid > 0) {
        /* The service leads its own process group (setsid). */
        if (kill(-s->pid, sig) < 0 && errno == ESRCH)
            kill(s->pid, sig);
    }
}
