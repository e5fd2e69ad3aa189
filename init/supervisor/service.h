/* service: supervised processes. Each service is an explicit state machine
 * (state x event table in service.c); every transition is logged and
 * emitted as a "service.state" event. */
#ifndef HEARTH_SERVICE_H
#define HEARTH_SERVICE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "err.h"

struct cJSON;

enum svc_state {
    SVC_STOPPED,   /* not running, not wanted */
    SVC_WAITING,   /* wanted, waiting for what it is "after" */
    SVC_STARTING,  /* forked, exec not yet confirmed */
    SVC_RUNNING,
    SVC_STOPPING,  /* stop signal sent, waiting for exit or timeout */
    SVC_BACKOFF,   /* exited, restart timer pending */
    SVC_FAILED,    /* exited unsuccessfully, no restart */
    SVC_EXITED,    /* exited successfully, no restart */
    SVC_NSTATES
};

const char *service_state_name(enum svc_state s);

/* Builds the runtime for every configured service (none started). */
int service_init(const struct config *cfg);
/* Frees what service_init allocated (rings, open output pipes) once
 * every service is down: on exit, so leak checkers see a clean end. */
void service_free(void);
/* Wants every service up and starts them in the listed order. */
void service_start_all(void);
/* Stops every service in reverse order, one after the other, each with its
 * stop signal and timeout; calls done() once all are down. */
void service_stop_all(void (*done)(void));

/* Called once a service marked main (or the first) will not run again:
 * container mode shuts down with its status. */
void service_on_main_done(void (*fn)(int exit_status));
/* Exit status of the main service: its code, or 128+signal. */
int service_main_status(void);

/* What the supervisor reports to whoever judges busy or idle (activity
 * registers these; each may be NULL): output bytes of service idx, a
 * lease it declared on its NOTIFY_SOCKET (sender already checked), the
 * end of its main process. Hooks rather than calls, so the tracker,
 * which reads the services' cgroups, sits above the supervisor and no
 * call runs back up to it. */
struct svc_activity_hooks {
    void (*output)(size_t idx, size_t bytes);
    void (*lease)(size_t idx, uint64_t seconds, const char *reason);
    void (*down)(size_t idx);
};
void service_set_activity_hooks(const struct svc_activity_hooks *h);

/* An array of service objects for status / services.list. */
struct cJSON *service_list_json(void);

/* Control of one service by index (from service_index); -1 with err. */
int service_index(const char *name);
const char *service_state_of(int idx);
/* The main pid of service idx (0 when it has none) and its name; -1 past
 * the last service. For the peer checks, which walk every service. */
pid_t service_pid_at(size_t idx, const char **name);
/* The cgroup leaf of service idx ("" without cgroups; NULL past the
 * last service), its name, and the CPU time of the leaves it had before
 * the current one (a leaf is replaced after cgroup.kill). */
const char *service_cgroup_at(size_t idx, const char **name, uint64_t *cpu_usec_before);
int service_start(int idx, struct err *err);
int service_stop(int idx, struct err *err);
int service_restart(int idx, struct err *err);
/* A restart whose stop sends sig instead of stop.signal (0: stop.signal),
 * with stop.timeout_ms and the kill after it as usual, then starts the
 * service again at once: a graceful restart, not counted as a failure. */
int service_restart_signal(int idx, int sig, struct err *err);
int service_signal(int idx, int sig, struct err *err);
/* The last n captured output lines, oldest first. */
struct cJSON *service_logs_json(int idx, size_t n);
struct logline;
/* Called for every captured line (logs.read follow). */
void service_set_log_sink(void (*fn)(const char *service, size_t index, const struct logline *l));
/* full(index) is asked after each read of a service's output: true means
 * every client following that service has a full queue, and the service's
 * pipes are left unread until service_output_resume finds room. */
void service_set_log_gate(bool (*full)(size_t index));
/* Starts reading the paused output pipes whose followers have room again. */
void service_output_resume(void);

/* Pause/resume: while suspended (sandbox frozen), health, readiness and
 * backoff timers must not count the time against a service. */
void service_suspend(bool on);
bool service_suspended(void);
/* Probes the health of every running service with a health check at once
 * (after a resume). Returns how many there are; none while suspended. */
int service_health_now(void);
/* After a resume: applies each running service's on_resume (restart,
 * restart:NAME or signal:NAME); adds {"name": "restart"|"restart:SIGUSR1"|
 * "SIGHUP"} to report when given.
 * Returns how many services were acted on. */
int service_resumed(struct cJSON *report);

#endif
