/* service_priv: what the files of the supervisor share (service.c, the
 * state table and public API; svc_spawn.c, svc_output.c, svc_cgroup.c,
 * svc_notify.c, svc_probe.c; svc_base.c below them all): a service's
 * runtime record, grouped by the file that owns each part, and the calls
 * between those files. Calls run one way: service.c -> svc_spawn.c ->
 * svc_notify.c -> svc_probe.c -> svc_cgroup.c, svc_output.c -> svc_base.c;
 * a part's events reach the table through svc_post. Nothing outside them
 * includes it. */
#ifndef HEARTH_SERVICE_PRIV_H
#define HEARTH_SERVICE_PRIV_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <ev.h>

#include "cgroup.h"
#include "check.h"
#include "config.h"
#include "err.h"
#include "logring.h"
#include "notify.h"
#include "service.h"
#include "svc_config.h"

struct cJSON;
struct launch_plan;

enum svc_event {
    E_START,        /* wanted up */
    E_STOP,         /* wanted down */
    E_EXEC_OK,      /* exec confirmed (close-on-exec pipe hit EOF) */
    E_EXIT,         /* the main process exited */
    E_TIMER,        /* backoff elapsed or stop timeout */
    E_DEPS,         /* everything it is "after" is up */
    E_READY,        /* its readiness check passed */
    E_UNHEALTHY,    /* its health check failed too many times in a row */
    E_NEVENTS
};

/* Output capture (svc_output.c). */
struct svc_output {
    struct logring ring;
    struct outpipe {
        int fd;
        ev_io io;
        char part[LOGRING_LINE_MAX]; /* an unfinished line */
        size_t plen;
        struct service *s;
        enum log_stream stream;
        bool paused;                 /* not read: every follower is full */
    } pipe[2];
};

/* The cgroup leaf and the OOM kills in it (svc_cgroup.c); OOM counts
 * only when it has memory accounting. */
struct svc_leaf {
    char path[CGROUP_PATH_MAX]; /* "" = no cgroup */
    bool killed;              /* cgroup.kill was used on the leaf */
    uint64_t cpu_usec_before; /* CPU time of leaves it had before this one */
    bool oom_known;
    int oom_wd;               /* inotify watch on memory.events, -1 = none */
    uint64_t oom_count;       /* the current leaf's oom_kill count, last read */
    uint64_t oom_kills;       /* over every leaf it had */
    bool oom_this_run;        /* the OOM killer struck since the last spawn */
};

/* Readiness: between exec and "running" (svc_probe.c; the notify_fd pipe
 * in svc_notify.c). */
struct svc_ready {
    bool on;
    struct check_spec spec;
    int64_t timeout_ms;       /* overall; 0 = no limit */
    int64_t deadline;
    char why[192];            /* the last whole attempt's failure */
    bool cut;                 /* the attempt in flight was shortened by the deadline */
    bool probe_error;         /* error says only that a probe could not be started */
    unsigned attempts;        /* ready.attempts; 0 = no limit */
    unsigned failed_starts;   /* consecutive starts that never became ready */
    struct check *probe;
    ev_timer timer;           /* next attempt; with notify_fd, the deadline */
    int notify_fd;            /* ready.notify_fd in the child; 0 = not used */
    int notify_rd;            /* hearth's end of that pipe, -1 when closed */
    ev_io notify_io;
    bool notify;              /* ready.notify: READY=1 on NOTIFY_SOCKET makes it running */
    bool extended;            /* EXTEND_TIMEOUT_USEC moved deadline */
};

/* NOTIFY_SOCKET (ready.notify, health.watchdog_ms): its own datagram
 * socket, bound at boot and kept for hearth's life (svc_notify.c). */
struct svc_nsock {
    int fd;                   /* -1 = none */
    ev_io io;
    char addr[NOTIFY_ADDR_MAX];
    char status[NOTIFY_STATUS_MAX]; /* the last STATUS= */
    bool stopping, reloading; /* STOPPING=1, RELOADING=1 this run */
    unsigned long msgs;       /* datagrams accepted */
    unsigned long refused;    /* from a process outside the service, or without credentials */
    unsigned long bad;        /* oversized, holding a NUL, or lines not understood */
    int64_t last_ms;          /* when the last accepted datagram came; 0 = none */
    int64_t wd_last_ms;       /* the last WATCHDOG=1; 0 = none */
};

/* Health: periodic probes while running, or the watchdog (svc_probe.c). */
struct svc_health {
    bool on;
    struct check_spec spec;
    int64_t interval_ms;
    unsigned threshold;       /* consecutive failures that restart it */
    int64_t watchdog_ms;      /* health.watchdog_ms; 0 = no watchdog */
    struct check *probe;
    ev_timer timer;           /* next probe; with the watchdog, its deadline */
    unsigned fails;           /* consecutive */
    unsigned long checks;     /* probes completed since it last started */
    int64_t last_ms;          /* when the last probe ended; 0 = none yet */
    char detail[160];         /* the last failure */
};

struct service {
    const struct service_config *cfg;
    enum svc_state state;
    pid_t pid;
    unsigned restarts;
    int wstatus;            /* last exit, valid when has_exit */
    bool has_exit;
    bool exit_oom;          /* that exit was the OOM killer's (last_exit.reason) */
    bool killed;            /* stop escalated to SIGKILL */
    char error[384];        /* why it is down or not ready */
    /* Per secrets[] entry, this start's outcome (svc_spawn.c): one of
     * the SVC_SECRET_* letters; 0 before the first start. */
    char secret_state[SVC_SECRETS_MAX];
    char privileged[256];   /* why its settings let it undo hearth's setup; "" = contained */
    int64_t since_ms;
    ev_timer timer;         /* backoff or stop timeout */
    ev_io exec_io;
    int exec_fd;            /* the exec-status pipe, -1 when closed */
    int reaper_fd;          /* what its pid namespace's reaper reports the
                             * main process's end on (pidreaper.h), -1 */
    bool ns_offer;          /* its child was asked for the namespace template */
    uint64_t out_mark;      /* out.ring.total when this run began */
    struct launch_plan *probe_plan; /* this run's plan, for its exec probes (svc_probe.c) */
    unsigned fails;          /* consecutive failures, for the backoff */
    int64_t started_ms;      /* when it last reached running */
    bool restart_pending;    /* services.restart: start again once stopped */
    int restart_signal;      /* a graceful restart's signal for the next stop; 0 = stop.signal */
    int64_t stop_began_ms;   /* bounds EXTEND_TIMEOUT_USEC during a stop */
    const char *cause;       /* why the next state change happens ("notify", "watchdog", "revoked") */
    bool unhealthy_stop;     /* being stopped because of its health */
    bool held;               /* stopped by a revoked gate: waits for it again, not a failure */
    int64_t suspend_left_ms; /* backoff time left when suspended, restored on resume */
    struct svc_output out;
    struct svc_leaf leaf;
    struct svc_ready ready;
    struct svc_nsock n;
    struct svc_health health;
};

/* svc_base.c: below every part. The services, in config order. */
extern struct service svcs[CONFIG_MAX_SERVICES];
extern size_t nsvcs;
/* The activity tracker's hooks (service.h); members may be NULL. */
extern struct svc_activity_hooks svc_activity;
/* The sandbox is frozen (service_suspend): no clock-driven judgement
 * about a service (health, readiness, backoff) may count that time. */
extern bool svc_suspended;
/* An event for the state table: the parts' one way to it, through the
 * dispatch service.c hands down (svc_set_dispatch, at service_init). */
void svc_post(struct service *s, enum svc_event ev);
void svc_set_dispatch(void (*fn)(struct service *s, enum svc_event ev));
void svc_timer_start(struct service *s, int64_t ms);
void svc_signal_group(struct service *s, int sig);

/* svc_spawn.c */
/* secret_state letters: decided at the start, then reported by the child. */
#define SVC_SECRET_PENDING 'w'   /* the child has not said yet */
#define SVC_SECRET_FROM_ENV 'e'  /* the environment has it: nothing done */
#define SVC_SECRET_PRESENT 'p'   /* the file has it: nothing done */
#define SVC_SECRET_GENERATED 'g' /* made and added to the file */
#define SVC_SECRET_FAILED 'f'    /* the start failed on it (error says why) */
const char *svc_secret_state_name(char state);
int svc_spawn(struct service *s);
void svc_close_exec_pipe(struct service *s);

/* svc_output.c */
void svc_output_init(struct service *s);
void svc_output_attach(struct service *s, const int rd[2]);
void svc_outpipe_close(struct outpipe *o);
void svc_output_free(struct service *s);
size_t svc_output_last_line(struct service *s, char *out, size_t n);
/* A service.log_file event when its log file started or stopped taking
 * lines since the last call. */
void svc_log_file_news(struct service *s);
/* {"path", "error" (while failing), "lines_lost"} for status; NULL
 * without log.file. */
struct cJSON *svc_log_file_json(const struct service *s);

/* svc_cgroup.c */
void svc_leaf_kill(struct service *s);
const char *svc_leaf_for_spawn(struct service *s);
void svc_oom_check(struct service *s);
void svc_oom_watch(struct service *s);
void svc_sweep(struct service *s);
void svc_cgroup_free(void);

/* svc_notify.c */
bool svc_wants_nsock(const struct service *s);
int svc_nsock_open(struct service *s, struct err *err);
void svc_nsock_close(struct service *s);
int svc_notify_env(struct service *s, struct launch_plan *plan);
void svc_notify_fd_attach(struct service *s, int fd);
void svc_notify_close(struct service *s);
struct cJSON *svc_notify_json(const struct service *s, int64_t now);

/* svc_probe.c */
void svc_probe_init(struct service *s);
void svc_probe_keep_plan(struct service *s, struct launch_plan *plan);
void svc_probe_free(struct service *s);
void svc_ready_cancel(struct service *s);
void svc_ready_give_up(struct service *s, const char *detail);
void svc_ready_arm_deadline(struct service *s);
void svc_ready_attempt(struct service *s);
const char *svc_health_status(const struct service *s);
void svc_health_event(struct service *s, const char *action);
void svc_health_stop(struct service *s);
void svc_health_arm(struct service *s, int64_t ms);
void svc_health_result(struct service *s, bool ok, const char *detail);
void svc_health_on_state(struct service *s, enum svc_state from, enum svc_state to);

#endif
