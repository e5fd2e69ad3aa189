#include "resume.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cJSON.h>
#include <ev.h>
#include <linux/filter.h>
#include <linux/netlink.h>

#include "cgroup.h"
#include "clock.h"
#include "egress.h"
#include "entropy.h"
#include "err.h"
#include "events.h"
#include "hearth.h"
#include "identity.h"
#include "log.h"
#include "mounts.h"
#include "network.h"
#include "resumefile.h"
#include "sandbox_priv.h"
#include "service.h"
#include "skills.h"

static cJSON *last_resume;
static int64_t last_resume_mono_ms = -1;
static bool resume_running; /* the steps are running: a detection joins them */

/* ---- resume ---- */

enum step_result { STEP_OK, STEP_SKIPPED, STEP_FAILED, STEP_REPAIRED };
static const char *const step_results[] = {"ok", "skipped", "failed", "repaired"};

struct resume_ctx {
    const struct resume_req *req;
    const char *cause;
    bool host;          /* sandbox.resume, not a detector */
    bool was_frozen;
    bool stepped;       /* the time step set the clock */
    cJSON *row;         /* the current step's row, for extra members */
};

/* hearth stepped the clock itself (or may have): the wall clock's offset
 * from the boot clock now is the new reference, so the step is not taken
 * for a restore. */
static void resume_clock_reference(void);

static enum step_result step_time(struct resume_ctx *rc, struct err *d)
{
    struct clock_result cr;
    struct timespec target;
    int64_t threshold = sandbox_clock_threshold_ms();
    const char *src = "host";

    if (rc->req && rc->req->has_time) {
        target = rc->req->time;
    } else if (!rc->host) {
        int64_t res;
        if (clock_hw_read(&target, &src, &res) < 0) {
            err_set(d, "no time given and no hardware clock");
            return STEP_SKIPPED;
        }
        threshold += res;
    } else {
        err_set(d, "no time given");
        return STEP_SKIPPED;
    }
    clock_sync(&target, sandbox_clock_allowed(), threshold, &cr);
    resume_clock_reference();
    rc->stepped = cr.action == CLOCK_STEPPED;
    cJSON_AddStringToObject(rc->row, "source", src);
    cJSON_AddItemToObject(rc->row, "clock", clock_result_json(&cr));
    err_set(d, "%s", cr.error[0] ? cr.error : clock_action_name(cr.action));
    return cr.action == CLOCK_ERROR ? STEP_FAILED : STEP_OK;
}

static enum step_result step_entropy(struct resume_ctx *rc, struct err *d)
{
    if (!rc->req || !rc->req->entropy) {
        err_set(d, "no entropy given");
        return STEP_SKIPPED;
    }
    if (entropy_add(rc->req->entropy, rc->req->entropy_len, d) < 0)
        return STEP_FAILED;
    err_set(d, "%zu bytes, CRNG reseeded", rc->req->entropy_len);
    return STEP_OK;
}

/* Whatever was drawn at random before a snapshot is shared by every
 * sandbox restored from it: drawn again, after the entropy step so the
 * host's bytes are in the pool first. */
static enum step_result step_identity(struct resume_ctx *rc, struct err *d)
{
    static const char *const shown[] = {"instance_id", "generation", "crng"};
    int r = identity_refresh(rc->cause, d);
    cJSON *id = identity_json();
    for (size_t i = 0; id && i < sizeof(shown) / sizeof(shown[0]); i++) {
        cJSON *v = cJSON_DetachItemFromObjectCaseSensitive(id, shown[i]);
        if (v)
            cJSON_AddItemToObject(rc->row, shown[i], v);
    }
    cJSON_Delete(id);
    return r < 0 ? STEP_FAILED : STEP_OK;
}

static enum step_result run_hook(int (*fn)(struct err *), struct err *d)
{
    d->msg[0] = 0;
    return fn(d) == 0 ? STEP_OK : STEP_FAILED;
}

static enum step_result step_mounts(struct resume_ctx *rc, struct err *d)
{
    return run_hook(mounts_recheck, d);
}

/* A platform restoring onto a new NIC hands the new network here: it
 * replaces the old one (and the gateways and name servers the egress
 * policy always allows) before the check, which then applies it. */
static enum step_result step_network(struct resume_ctx *rc, struct err *d)
{
    const struct network_cfg *net = rc->req ? rc->req->network : NULL;
    if (net) {
        struct err why;
        network_replace(net, rc->row);
        if (egress_set_always(net, true, &why) < 0)
            cJSON_AddStringToObject(rc->row, "egress", why.msg);
    }
    switch (network_verify(rc->row, d)) {
    case NETWORK_OK:
        return STEP_OK;
    case NETWORK_REPAIRED:
        return STEP_REPAIRED;
    case NETWORK_SKIPPED:
        return STEP_SKIPPED;
    default:
        return STEP_FAILED;
    }
}

static enum step_result step_egress(struct resume_ctx *rc, struct err *d)
{
    return run_hook(egress_recheck, d);
}

static enum step_result step_skills(struct resume_ctx *rc, struct err *d)
{
    if (!skills_enabled()) {
        err_set(d, "no skills overlay configured");
        return STEP_SKIPPED;
    }
    d->msg[0] = 0;
    if (skills_sync("resume", d) < 0)
        return STEP_FAILED;
    /* The walk runs in a child: its outcome is the skills.sync event. */
    err_set(d, "reconcile queued");
    return STEP_OK;
}

/* A detector never thaws what the host froze: the host's own
 * sandbox.resume does, once it is ready for the sandbox to run. */
static bool held_by_host(const struct resume_ctx *rc) { return rc->was_frozen && !rc->host; }

static enum step_result step_thaw(struct resume_ctx *rc, struct err *d)
{
    if (!rc->was_frozen) {
        err_set(d, "not frozen");
        return STEP_SKIPPED;
    }
    if (held_by_host(rc)) {
        err_set(d, "frozen by the host: waits for sandbox.resume");
        return STEP_SKIPPED;
    }
    enum step_result r = STEP_OK;
    if (cgroup_available() && cgroup_services_freeze(false) < 0) {
        err_set(d, "cgroup.freeze: %s", strerror(errno));
        r = STEP_FAILED;
    }
    service_suspend(false);
    sandbox_set_state(SANDBOX_RUNNING);
    return r;
}

static enum step_result step_on_resume(struct resume_ctx *rc, struct err *d)
{
    if (held_by_host(rc)) {
        err_set(d, "sandbox still frozen");
        return STEP_SKIPPED;
    }
    cJSON *acted = cJSON_CreateObject();
    int n = service_resumed(acted);
    if (acted)
        cJSON_AddItemToObject(rc->row, "services", acted);
    err_set(d, "%d service%s", n, n == 1 ? "" : "s");
    return n ? STEP_OK : STEP_SKIPPED;
}

static enum step_result step_health(struct resume_ctx *rc, struct err *d)
{
    if (service_suspended()) {
        err_set(d, "services still frozen");
        return STEP_SKIPPED;
    }
    int n = service_health_now();
    err_set(d, "%d service%s checked at once", n, n == 1 ? "" : "s");
    return n ? STEP_OK : STEP_SKIPPED;
}

struct resume_step {
    const char *name;
    enum step_result (*fn)(struct resume_ctx *rc, struct err *detail);
};

/* The order matters: the clock first (everything after logs and checks
 * with the right time), checks and repairs while services are still
 * frozen, then thaw and each service's own on_resume. */
static const struct resume_step resume_steps[] = {
    {"time", step_time},       {"entropy", step_entropy}, {"identity", step_identity},
    {"mounts", step_mounts},   {"network", step_network}, {"egress", step_egress},
    {"skills", step_skills},   {"thaw", step_thaw},       {"on_resume", step_on_resume},
    {"health", step_health},
};

struct cJSON *resume_run(const struct resume_req *req, const char *cause, struct err *err)
{
    struct resume_ctx rc = {.req = req, .cause = cause, .host = strcmp(cause, "host") == 0};
    struct err detail;
    int64_t t0 = mono_ns();

    if (sandbox_state() == SANDBOX_FREEZING) {
        err_set(err, "a freeze is in progress");
        return NULL;
    }
    rc.was_frozen = sandbox_state() == SANDBOX_FROZEN;
    cJSON *r = cJSON_CreateObject(), *steps = cJSON_CreateArray();
    if (!r || !steps) {
        cJSON_Delete(r);
        cJSON_Delete(steps);
        err_set(err, "out of memory");
        return NULL;
    }
    if (!rc.was_frozen)
        sandbox_set_state(SANDBOX_RESUMING);
    resume_running = true;
    int failed = 0;
    for (size_t i = 0; i < sizeof(resume_steps) / sizeof(resume_steps[0]); i++) {
        int64_t ts = mono_ns();
        rc.row = sandbox_step_row(steps, resume_steps[i].name, "ok", 0, NULL);
        if (!rc.row) {
            rc.row = cJSON_CreateObject(); /* keep going; the row is lost */
            if (!rc.row)
                continue;
            cJSON_AddItemToArray(steps, rc.row);
        }
        detail.msg[0] = 0;
        enum step_result sr = resume_steps[i].fn(&rc, &detail);
        cJSON_ReplaceItemInObjectCaseSensitive(rc.row, "result",
                                               cJSON_CreateString(step_results[sr]));
        cJSON_ReplaceItemInObjectCaseSensitive(rc.row, "ms",
                                               cJSON_CreateNumber(sandbox_ms_since(ts)));
        if (detail.msg[0])
            cJSON_AddStringToObject(rc.row, "detail", detail.msg);
        if (sr == STEP_FAILED) {
            failed++;
            log_warn("resume: unable to complete step %s: %s", resume_steps[i].name, detail.msg);
        }
    }
    resume_running = false;
    if (sandbox_state() == SANDBOX_RESUMING)
        sandbox_set_state(SANDBOX_RUNNING);
    double total = sandbox_ms_since(t0);
    cJSON_AddStringToObject(r, "cause", cause);
    cJSON_AddBoolToObject(r, "ok", failed == 0);
    cJSON_AddStringToObject(r, "state", sandbox_state_name(sandbox_state()));
    cJSON_AddNumberToObject(r, "total_ms", total);
    cJSON_AddNumberToObject(r, "at_ms", (double)wall_ms());
    cJSON_AddItemToObject(r, "steps", steps);
    /* The news for the services: a clock step detected from outside is
     * a stepped clock too. */
    cJSON *news = resumefile_write(identity_generation(), cause,
                                   rc.stepped || strcmp(cause, "clock_step") == 0, rc.was_frozen);
    if (news)
        cJSON_AddItemToObject(r, "resume_file", news);
    if (sandbox_state() != SANDBOX_FROZEN)
        resumefile_frozen(false);
    last_resume_mono_ms = mono_ms();
    cJSON_Delete(last_resume);
    last_resume = cJSON_Duplicate(r, 1);
    cJSON *ev = cJSON_Duplicate(r, 1);
    if (ev)
        events_emit("resume", ev);
    log_info("resume (%s) in %.2f ms, %d step%s failed", cause, total, failed,
             failed == 1 ? "" : "s");
    return r;
}

cJSON *resume_time_sync(const struct timespec *t)
{
    struct clock_result cr;
    clock_sync(t, sandbox_clock_allowed(), sandbox_clock_threshold_ms(), &cr);
    resume_clock_reference();
    /* A step here is a correction, not a pause the next resume reports. */
    resumefile_reference();
    cJSON *r = clock_result_json(&cr);
    if (r) {
        cJSON_AddBoolToObject(r, "allowed", sandbox_clock_allowed());
        cJSON_AddNumberToObject(r, "threshold_ms", (double)sandbox_clock_threshold_ms());
    }
    return r;
}

/* ---- resume detection ---- */

static int clock_fd = -1, uevent_fd = -1;
static ev_io clock_io, uevent_io;
static ev_timer hw_timer;

bool resume_detected(const char *cause)
{
    /* Detectors can fire together for one restore (a vmgenid uevent, then
     * the platform putting the clock right): while the steps run, and
     * within RESUME_COALESCE_MS of their end, a detection joins that
     * resume. The window is counted on the monotonic clock, which stands
     * still while the VM does: it is time the sandbox ran. */
    if (resume_running ||
        (last_resume_mono_ms >= 0 && mono_ms() - last_resume_mono_ms < RESUME_COALESCE_MS)) {
        log_info("resume detected (%s): joins the resume just run", cause);
        return false;
    }
    /* On the way down there is nothing to resume into. */
    if (H.phase >= PHASE_STOPPING) {
        log_info("resume detected (%s) while stopping: not run", cause);
        return false;
    }
    log_info("resume detected (%s)", cause);
    struct err err;
    cJSON *r = resume_run(NULL, cause, &err);
    if (!r) {
        log_warn("resume: unable to run (%s): %s", cause, err.msg);
        return false;
    }
    cJSON_Delete(r);
    return true;
}

/* ---- the clock-step watcher ----
 * A restore leaves the wall clock where the snapshot had it until someone
 * (the platform's agent, hearth, an NTP client) steps it; the boot clock
 * has no such step. So the wall clock's offset from the boot clock moves
 * by the step, and by nothing else: slewing moves both clocks alike, and
 * a suspend adds the slept time to both. A CLOCK_REALTIME timerfd with
 * TFD_TIMER_CANCEL_ON_SET is woken by every step (and nothing else: it
 * costs nothing while idle); the offset then says how large it was. */

static int64_t clock_ref_ns; /* realtime - boottime at the last look */

static int wall_boot_offset_ns(int64_t *out)
{
    struct timespec real, boot;
    if (clock_gettime(CLOCK_REALTIME, &real) < 0 || clock_gettime(CLOCK_BOOTTIME, &boot) < 0)
        return -1;
    *out = clock_diff_ns(&real, &boot);
    return 0;
}

static void resume_clock_reference(void)
{
    int64_t off;
    if (wall_boot_offset_ns(&off) == 0)
        clock_ref_ns = off;
}

bool resume_clock_step_is_resume(int64_t ref_offset_ns, int64_t offset_ns, int64_t threshold_ms,
                                 int64_t *step_ms)
{
    int64_t d = offset_ns - ref_offset_ns;
    *step_ms = d / 1000000;
    /* A threshold past what nanoseconds hold is never reached. */
    if (threshold_ms <= 0 || threshold_ms > INT64_MAX / 1000000)
        return false;
    /* Either way: a restore steps forward, a snapshot's clock may also
     * be ahead of the host that restores it. */
    int64_t mag = d < 0 ? -d : d;
    return mag > threshold_ms * 1000000;
}

static int arm_clock_fd(void)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    /* An absolute deadline far away: only a clock step wakes it up. */
    struct itimerspec its = {.it_value = {.tv_sec = now.tv_sec + 10LL * 365 * 86400}};
    return timerfd_settime(clock_fd, TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET, &its, NULL);
}

static void clock_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    uint64_t n;
    ssize_t r = read(clock_fd, &n, sizeof(n));
    bool stepped = r < 0 && errno == ECANCELED;
    if (arm_clock_fd() < 0) {
        log_warn("resume: unable to watch for clock steps: %s; turned off", strerror(errno));
        ev_io_stop(H.loop, &clock_io);
        close(clock_fd);
        clock_fd = -1;
        return;
    }
    int64_t off, step_ms;
    if (!stepped || wall_boot_offset_ns(&off) < 0)
        return;
    /* hearth's own steps (resume, time.sync, sandbox.init) moved the
     * reference along with the clock: they come out as no step here. */
    bool resume = resume_clock_step_is_resume(clock_ref_ns, off,
                                              sandbox_clock_detect_step_ms(), &step_ms);
    clock_ref_ns = off;
    if (!resume) {
        log_debug("wall clock stepped by %lld ms: within clock.detect_step_ms", (long long)step_ms);
        return;
    }
    log_info("wall clock stepped by %lld ms from outside", (long long)step_ms);
    resume_detected("clock_step");
}

bool resume_uevent_is_vmgenid(const char *buf, size_t n)
{
    /* "ACTION@DEVPATH" then NUL-separated KEY=VALUE strings; the last one
     * need not be terminated. */
    for (size_t off = 0; off < n;) {
        size_t l = strnlen(buf + off, n - off);
        if (l >= 13 && memcmp(buf + off, "NEW_VMGEN_ID=", 13) == 0)
            return true;
        off += l + 1;
    }
    return false;
}

int resume_uevent_filter(int fd)
{
    /* A kernel uevent starts "ACTION@DEVPATH"; the kernel's VM-generation
     * driver sends a change. Classic BPF loads are big-endian. */
    static struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x6368616e /* "chan" */, 0, 5),
        BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 4),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x6765 /* "ge" */, 0, 3),
        BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 6),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, '@', 0, 1),
        BPF_STMT(BPF_RET | BPF_K, 0xffffffff),
        BPF_STMT(BPF_RET | BPF_K, 0),
    };
    struct sock_fprog prog = {.len = sizeof(code) / sizeof(code[0]), .filter = code};
    return setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog));
}

static void uevent_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    char buf[8192];
    for (int i = 0; i < 16; i++) {
        struct sockaddr_nl from;
        socklen_t fl = sizeof(from);
        ssize_t n = recvfrom(uevent_fd, buf, sizeof(buf), MSG_DONTWAIT, (struct sockaddr *)&from,
                             &fl);
        if (n < 0) {
            if (errno != EAGAIN && errno != EINTR && errno != ENOBUFS)
                log_debug("uevent socket: %s", strerror(errno));
            return;
        }
        /* Only the kernel (port 0) speaks for the VM generation: a
         * process that may send on this socket cannot fake a restore. */
        if (fl < sizeof(from) || from.nl_pid != 0)
            continue;
        if (resume_uevent_is_vmgenid(buf, (size_t)n))
            resume_detected("vmgenid");
    }
}

/* The lag already accounted for: when the clock could not be stepped the
 * lag stays, and only a further jump is a new pause. */
static int64_t hw_baseline_ms;

static int hw_lag_ms(int64_t *lag_ms, int64_t *res, const char **src)
{
    struct timespec hw, sys;
    if (clock_hw_read(&hw, src, res) < 0 || clock_gettime(CLOCK_REALTIME, &sys) < 0)
        return -1;
    /* After a pause the system clock lags by the gap; the hardware clock
     * kept going. Only a lag counts: RTC truncation makes sys look ahead. */
    *lag_ms = clock_diff_ns(&hw, &sys) / 1000000;
    return 0;
}

/* Re-armed on the grid at every check, as the skills poll is (see
 * arm_poll in init/skills.c): a repeating timer would keep its first
 * phase on the monotonic clock, and this check is there precisely for
 * the wall clock that moves. */
static void arm_hw_timer(void)
{
    ev_timer_set(&hw_timer, hearth_grid_delay(sandbox_clock_check_ms()), 0.);
    ev_timer_start(H.loop, &hw_timer);
}

static void hw_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    const char *src;
    int64_t lag, res;

    arm_hw_timer();
    if (hw_lag_ms(&lag, &res, &src) < 0)
        return;
    if (resume_hw_clock_lags(lag - hw_baseline_ms, sandbox_clock_threshold_ms(), res)) {
        /* A lag seen within RESUME_COALESCE_MS of a resume is not taken as
         * the new baseline: the monotonic clock that window is counted on stops
         * while the VM does, so the host's pause right after its own
         * sandbox.resume lands here, and must be found by the next check. */
        if (!resume_detected(strcmp(src, "ptp0") == 0 ? "ptp_clock" : "rtc"))
            return;
        if (hw_lag_ms(&lag, &res, &src) == 0)
            hw_baseline_ms = lag > 0 ? lag : 0;
    }
}

bool resume_hw_clock_lags(int64_t lag_ms, int64_t threshold_ms, int64_t resolution_ms)
{
    return lag_ms > threshold_ms + resolution_ms;
}

void resume_detectors_start(void)
{
    /* The clock-step watcher in every mode: in a container beside a
     * platform's agent (CubeSandbox) a restore is told by nothing else.
     * Where the clock is the host's (plain podman), the host's own NTP
     * step beyond the threshold counts too; on_resume runs, no harm. */
    resume_clock_reference();
    sandbox_on_clock_set(resume_clock_reference);
    if (sandbox_clock_detect_step_ms() > 0) {
        clock_fd = timerfd_create(CLOCK_REALTIME, TFD_NONBLOCK | TFD_CLOEXEC);
        if (clock_fd < 0 || arm_clock_fd() < 0) {
            log_warn("resume: unable to watch for clock steps: %s", strerror(errno));
            if (clock_fd >= 0)
                close(clock_fd);
            clock_fd = -1;
        } else {
            ev_io_init(&clock_io, clock_cb, clock_fd, EV_READ);
            ev_io_start(H.loop, &clock_io);
        }
    }
    uevent_fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                       NETLINK_KOBJECT_UEVENT);
    struct sockaddr_nl sa = {.nl_family = AF_NETLINK, .nl_groups = 1};
    if (uevent_fd < 0 || bind(uevent_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        log_debug("uevent socket unavailable: %s", strerror(errno));
        if (uevent_fd >= 0)
            close(uevent_fd);
        uevent_fd = -1;
    } else {
        /* Unfiltered it still works, only with a wake-up per uevent. */
        if (resume_uevent_filter(uevent_fd) < 0)
            log_debug("uevent filter: %s", strerror(errno));
        ev_io_init(&uevent_io, uevent_cb, uevent_fd, EV_READ);
        ev_io_start(H.loop, &uevent_io);
    }
    /* Also only where hearth owns the clock: a host's RTC drifts from its
     * NTP-disciplined clock by seconds, which is not a resume. */
    if (sandbox_clock_allowed() && sandbox_clock_check_ms() > 0 && clock_hw_present()) {
        ev_timer_init(&hw_timer, hw_cb, 0., 0.);
        arm_hw_timer();
    }
}

static cJSON *detectors_json(void)
{
    cJSON *d = cJSON_CreateArray();
    if (d) {
        if (clock_fd >= 0)
            cJSON_AddItemToArray(d, cJSON_CreateString("clock_step"));
        if (uevent_fd >= 0)
            cJSON_AddItemToArray(d, cJSON_CreateString("vmgenid"));
        if (ev_is_active(&hw_timer))
            cJSON_AddItemToArray(d, cJSON_CreateString("hw_clock"));
    }
    return d;
}

void resume_status_json(cJSON *status)
{
    cJSON *s = cJSON_GetObjectItemCaseSensitive(status, "sandbox");
    if (s)
        cJSON_AddItemToObject(s, "detectors", detectors_json());
    cJSON_AddItemToObject(status, "last_resume",
                          last_resume ? cJSON_Duplicate(last_resume, 1) : cJSON_CreateNull());
}
