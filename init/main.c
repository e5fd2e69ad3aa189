/* hearth: PID 1 for microVM sandboxes. main() owns the boot sequence: it
 * may bail out before the loop starts (bad arguments, or a bad config in
 * container/supervisor mode), never inside it. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/reboot.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cJSON.h>
#include <ev.h>

#include "accounts.h"
#include "cgroup.h"
#include "cmdline.h"
#include "config.h"
#include "contain.h"
#include "control.h"
#include "envd.h"
#include "err.h"
#include "execproc.h"
#include "egress.h"
#include "events.h"
#include "harden.h"
#include "hearth.h"
#include "identity.h"
#include "jsonalloc.h"
#include "guestlimits.h"
#include "lifeline.h"
#include "launch.h"
#include "log.h"
#include "machine.h"
#include "methods.h"
#include "modules.h"
#include "mounts.h"
#include "activity.h"
#include "diskuse.h"
#include "resumefile.h"
#include "network.h"
#include "peer.h"
#include "pidreaper.h"
#include "reaper.h"
#include "seed.h"
#include "sandbox.h"
#include "service.h"
#include "shutdown.h"
#include "skills.h"
#include "textpages.h"

static ev_io sig_watcher;
static int sig_fd = -1;

static void usage(int fd)
{
    dprintf(fd,
            "usage: hearth [-c FILE] [--mode vm|container|supervisor] [--log LEVEL]\n"
            "       hearth --check-config FILE\n"
            "       hearth --version\n");
}

static int parse_mode(const char *s, enum hearth_mode *m)
{
    if (strcmp(s, "vm") == 0)
        *m = MODE_VM;
    else if (strcmp(s, "container") == 0)
        *m = MODE_CONTAINER;
    else if (strcmp(s, "supervisor") == 0)
        *m = MODE_SUPERVISOR;
    else
        return -1;
    return 0;
}

/* PID 1 with no /proc yet is the first process of a kernel; PID 1 with a
 * /proc is a container's init (runtimes mount it), unless the kernel
 * command line says hearth.mode=vm. Not PID 1 but with a parent out of
 * sight (a parent pid of 0: the parent is in an outer pid namespace) is
 * a container's entrypoint that joined a pid namespace another init owns
 * (podman's --pid container:X); a shell or a service manager is always
 * in sight of what it starts. Anything else supervises. An entrypoint
 * whose parent is that other init (pid 1 in sight) cannot be told from a
 * process a host's init started: the image says --mode container. */
static enum hearth_mode detect_mode(void)
{
    char v[32];

    if (getpid() != 1)
        return getppid() == 0 ? MODE_CONTAINER : MODE_SUPERVISOR;
    if (access("/proc/self/stat", F_OK) < 0)
        return MODE_VM;
    if (getenv("container"))
        return MODE_CONTAINER;
    cmdline_load(NULL);
    enum hearth_mode m;
    if (cmdline_get("hearth.mode", v, sizeof(v)) == 0 && parse_mode(v, &m) == 0)
        return m;
    return MODE_CONTAINER;
}

/* As PID 1 (vm and container modes), a termination signal from a
 * service is ignored: the agent must not power the sandbox off with
 * `kill -TERM 1`. The kernel's own signals (Ctrl-Alt-Del) and those sent
 * from outside hearth's pid namespace (a container runtime's stop) carry
 * sender pid 0 and are obeyed; so is a sender identified as no service.
 * One that cannot be identified any more (it exited at once) is ignored
 * too: the check fails closed. In supervisor mode hearth is no PID 1 and
 * a developer's `kill` must work. */
static bool termination_allowed(const struct signalfd_siginfo *si)
{
    char name[16];
    struct err why;
    if (H.mode == MODE_SUPERVISOR)
        return true;
    if (peer_signal_allowed((pid_t)si->ssi_pid, &why))
        return true;
    snprintf(name, sizeof(name), "%s", si->ssi_signo == SIGTERM ? "SIGTERM"
                                       : si->ssi_signo == SIGINT ? "SIGINT"
                                       : si->ssi_signo == SIGPWR ? "SIGPWR" : "signal");
    log_warn("%s from pid %u ignored: %s", name, (unsigned)si->ssi_pid, why.msg);
    cJSON *ev = cJSON_CreateObject();
    if (ev) {
        cJSON_AddStringToObject(ev, "signal", name);
        cJSON_AddNumberToObject(ev, "pid", (double)si->ssi_pid);
        cJSON_AddStringToObject(ev, "reason", why.msg);
        events_emit("signal.ignored", ev);
    }
    return false;
}

static void on_signal(struct ev_loop *loop, ev_io *w, int revents)
{
    struct signalfd_siginfo si[16];
    ssize_t n = read(sig_fd, si, sizeof(si));

    if (n < 0) {
        if (errno != EAGAIN && errno != EINTR)
            log_error("unable to read signals: %s", strerror(errno));
        return;
    }
    bool reaped = false;
    for (ssize_t i = 0; i < n / (ssize_t)sizeof(si[0]); i++) {
        int sig = (int)si[i].ssi_signo;
        switch (sig) {
        case SIGCHLD:
            if (!reaped)
                reaper_reap(); /* drains every exit so far: once a batch */
            reaped = true;
            break;
        case SIGIO:
            control_serial_kick();
            break;
        case SIGTERM:
        case SIGPWR:
            if (!termination_allowed(&si[i]))
                break;
            shutdown_request(H.mode == MODE_VM ? SHUTDOWN_POWEROFF : SHUTDOWN_EXIT,
                             sig == SIGTERM ? "SIGTERM" : "SIGPWR");
            break;
        case SIGINT:
            if (!termination_allowed(&si[i]))
                break;
            /* In a VM the kernel turns Ctrl-Alt-Del into SIGINT: reboot. */
            shutdown_request(H.mode == MODE_VM ? SHUTDOWN_REBOOT : SHUTDOWN_EXIT, "SIGINT");
            break;
        default:
            log_debug("signal %d ignored", sig);
            break;
        }
    }
    /* Signals coalesce: a SIGCHLD may stand for exits not yet seen, and
     * one read after a batch without it costs a call on a rare signal. */
    if (!reaped)
        reaper_reap();
}

static int setup_signals(void)
{
    sigset_t set;

    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGPWR);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGUSR2);
    sigaddset(&set, SIGQUIT);
    sigaddset(&set, SIGIO);
    if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
        return -1;
    /* Peers that vanish mid-write must not kill us. */
    signal(SIGPIPE, SIG_IGN);
    launch_learn_signals();
    sig_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    return sig_fd < 0 ? -1 : 0;
}

/* Whether a service may look for a unix control socket as it starts: one
 * without isolation (or under a hearth that cannot isolate, not root)
 * sees hearth's directories as they are, so the listeners open before it
 * starts. A contained service's view hides their directories whatever
 * the order. */
static bool listeners_first(const struct config *cfg)
{
    bool unix_listener = false;
    for (size_t i = 0; i < cfg->n_listen; i++)
        unix_listener |= cfg->listen[i].kind == LISTEN_UNIX;
    if (!unix_listener || !cfg->n_services)
        return false;
    if (geteuid() != 0)
        return true;
    for (size_t i = 0; i < cfg->n_services; i++) {
        struct contain_policy pol;
        contain_policy_of(&cfg->services[i], &pol);
        if (!pol.isolation)
            return true;
    }
    return false;
}

/* At shutdown the endpoint goes first (no new command through it), then
 * every exec session. */
static void end_sessions(void)
{
    envd_stop();
    exec_kill_all();
}

static void main_done(int status)
{
    if (H.mode == MODE_VM)
        return; /* a VM keeps running; the host decides */
    char why[64];
    snprintf(why, sizeof(why), "main service ended with status %d", status);
    shutdown_request(SHUTDOWN_EXIT, why);
}

/* After each pass over the mounts: seed the homes they brought (in the
 * background), then release "mounts" and lay the skills overlay (the first
 * time, that also starts its triggers). */
static void on_seeded(void)
{
    mounts_phase_ready();
    skills_start(mounts_path_blocked);
}

/* A platform mount went or was replaced: the seed copy and the skills
 * work under way beneath it stop (they run again when it is back). */
static void on_mount_left(const char *target, const char *why)
{
    seed_mount_left(target, why);
    skills_mount_left(target, why);
}

static void on_mounts_done(void)
{
    diskuse_rearm();
    seed_start(H.cfg, mounts_path_blocked, on_seeded);
}

static struct config *load_config(const char *path, bool explicit_path)
{
    struct err err;
    struct config *cfg;

    snprintf(H.config_path, sizeof(H.config_path), "%s", path);
    if (!explicit_path && access(path, F_OK) < 0 && errno == ENOENT) {
        log_info("no %s: built-in defaults", path);
        return config_default(&err);
    }
    cfg = config_load(path, &err);
    if (cfg)
        return cfg;
    log_error("config %s refused: %s", path, err.msg);
    snprintf(H.config_error, sizeof(H.config_error), "%s", err.msg);
    if (H.mode != MODE_VM)
        return NULL;
    /* A VM must stay reachable: run the built-in defaults so the host can
     * read config_error in status and fix the image, over the listeners
     * the file names when those are valid by themselves (the built-in
     * vsock and unix ones may not reach this host at all). */
    bool kept;
    cfg = config_fallback(path, &kept);
    log_warn("running the built-in defaults%s",
             kept ? " with the refused file's control and modules" : "");
    return cfg;
}

/* hearth's options, each a letter and a long name; those with a value
 * take it from the next word, after "=" (--config=FILE) or attached to
 * the letter (-cFILE). */
static const struct {
    char letter;
    bool value;
    const char *name;
} opts[] = {
    {'c', true, "config"}, {'m', true, "mode"},     {'l', true, "log"},
    {'C', true, "check-config"}, {'V', false, "version"}, {'h', false, "help"},
};

/* The option at argv[*i] and after: its letter, with *val its value;
 * 0 when the words are done ("--" ends them); '?' for one hearth does
 * not know or that lacks its value. Words that are not options are
 * passed over (the kernel hands PID 1 the words of its command line it
 * did not recognise). */
static int next_opt(int argc, char **argv, int *i, const char **val)
{
    while (*i < argc && (argv[*i][0] != '-' || argv[*i][1] == 0))
        (*i)++;
    if (*i >= argc || strcmp(argv[*i], "--") == 0)
        return 0;
    const char *w = argv[(*i)++], *v = NULL;
    size_t k, n = sizeof(opts) / sizeof(opts[0]);
    if (w[1] == '-') {
        size_t len = strcspn(w + 2, "=");
        for (k = 0; k < n; k++)
            if (strlen(opts[k].name) == len && strncmp(w + 2, opts[k].name, len) == 0)
                break;
        if (k < n && w[2 + len] == '=')
            v = w + 3 + len;
    } else {
        for (k = 0; k < n && opts[k].letter != w[1]; k++)
            ;
        if (k < n && w[2])
            v = w + 2;
    }
    if (k == n || (v && !opts[k].value))
        return '?';
    if (opts[k].value && !v) {
        if (*i >= argc)
            return '?';
        v = argv[(*i)++];
    }
    *val = v;
    return opts[k].letter;
}

int main(int argc, char **argv)
{
    const char *config_path = NULL, *log_arg = NULL;
    bool mode_forced = false;
    enum hearth_mode mode = MODE_SUPERVISOR;
    enum log_level lvl;
    char buf[256];
    int o;

    /* The reaper of a service's pid namespace (pidreaper.h): hearth's
     * binary again, in that role alone, before anything else runs. */
    if (argc > 0 && strcmp(argv[0], PIDREAPER_ARGV0) == 0)
        return pidreaper_main(argc, argv);
    /* The E2B-compatible endpoint's parser (envd.h): hearth's binary in
     * that role, started by hearth with its listener and links. */
    if (argc > 0 && strcmp(argv[0], ENVD_ARGV0) == 0)
        return envd_role_main(argc, argv);
    /* Before the first cJSON object. */
    jsonalloc_install();

    H.boot_mono_ms = mono_ms();
    H.boot_us = mono_us();
    /* Not dumpable: no core file of hearth's memory, /proc/1 owned by
     * root, and ptrace needs CAP_SYS_PTRACE, which services do not keep. */
    int dumpable_rc = prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    int dumpable_errno = errno;
    pidreaper_init();
    /* The kernel hands init the words of its command line it did not
     * recognise; as PID 1, unknown arguments are ignored, not fatal. */
    int argi = 1;
    const char *arg = NULL;
    while ((o = next_opt(argc, argv, &argi, &arg)) != 0) {
        switch (o) {
        case 'c': config_path = arg; break;
        case 'm':
            if (parse_mode(arg, &mode) < 0) {
                dprintf(2, "hearth: --mode: expected vm, container or supervisor\n");
                return 2;
            }
            mode_forced = true;
            break;
        case 'l': log_arg = arg; break;
        case 'C': {
            struct err err;
            struct config *cfg = config_load(arg, &err);
            if (!cfg) {
                dprintf(2, "%s: %s\n", arg, err.msg);
                return 1;
            }
            dprintf(1, "%s: ok (%zu services)\n", arg, cfg->n_services);
            /* Valid is not the same as contained: say which services could
             * undo hearth's setup, as the boot log would. */
            for (size_t i = 0; i < cfg->n_services; i++) {
                struct contain_policy pol;
                char why[256];
                contain_policy_of(&cfg->services[i], &pol);
                if (contain_privileged(&pol, why, sizeof(why)))
                    dprintf(1, "%s: services[%zu] (%s) is privileged: %s\n", arg, i,
                           cfg->services[i].name, why);
            }
            config_free(cfg);
            return 0;
        }
        case 'V': dprintf(1, "hearth %s\n", HEARTH_VERSION); return 0;
        case 'h': usage(1); return 0;
        default:
            if (getpid() != 1) {
                dprintf(2, "hearth: %s: unknown option or missing value\n", argv[argi - 1]);
                usage(2);
                return 2;
            }
        }
    }
    if (log_arg && log_level_parse(log_arg, &lvl) < 0) {
        dprintf(2, "hearth: --log: expected error, warn, info or debug\n");
        return 2;
    }

    H.mode = mode_forced ? mode : detect_mode();
    H.phase = PHASE_BOOT;
    if (H.mode == MODE_VM) {
        umask(022);
        int failures = machine_mount_api();
        log_open(LOG_SINK_KMSG);
        if (failures)
            log_warn("machine: unable to mount %d of its filesystems", failures);
        cmdline_load(NULL);
        /* The kernel lets a /dev/kmsg writer through 10 records in 5 s
         * unless printk.devkmsg says otherwise: hearth's own lines about a
         * boot or a failing service were dropped past that. A choice made
         * on the command line stands (the kernel then locks the knob). */
        if (cmdline_get("printk.devkmsg", buf, sizeof(buf)) != 0 && machine_kmsg_unlimit() < 0)
            log_warn("unable to lift the /dev/kmsg rate limit: %s; some log lines may be dropped",
                     strerror(errno));
        /* Ctrl-Alt-Del becomes SIGINT instead of an instant reboot. */
        reboot(RB_DISABLE_CAD);
        if (!config_path && cmdline_get("hearth.config", buf, sizeof(buf)) == 0)
            config_path = strdup(buf);
        if (!log_arg && cmdline_get("hearth.log", buf, sizeof(buf)) == 0 &&
            log_level_parse(buf, &lvl) == 0)
            log_arg = "cmdline";
    }
    if (log_arg)
        log_set_level(lvl);
    /* putenv, not setenv: the text is static, and setenv's copy is code
     * hearth's binary carries for this one line. */
    static char default_path[] = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
    if (!getenv("PATH"))
        putenv(default_path);

    if (setup_signals() < 0) {
        log_error("unable to set up signals: %s", strerror(errno));
        if (H.mode != MODE_VM)
            return 1;
    }
    if (dumpable_rc < 0)
        log_warn("unable to mark hearth non-dumpable: %s", strerror(dumpable_errno));
    /* Not PID 1 (supervisor mode, or a container's entrypoint beside
     * another init): what a service leaves behind is still hearth's to
     * reap, and hearth's pidfd is ready before the first fork so that
     * every child can die with it (lifeline.h). */
    if (getpid() != 1 && prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
        log_warn("unable to become a subreaper: %s", strerror(errno));
    if (lifeline_init() < 0 && getpid() != 1)
        log_warn("unable to open a pidfd of hearth: %s; a service that starts as hearth is "
                 "killed may outlive it", strerror(errno));

    H.cfg = load_config(config_path ? config_path : CONFIG_DEFAULT_PATH, config_path != NULL);
    if (!H.cfg) {
        if (H.config_error[0])
            return 1;
        log_error("unable to build the default config: out of memory");
        return 1;
    }
    if (!log_arg)
        log_set_level(H.cfg->log_level);
    /* Who a named user is, fixed here, before any service runs: a root
     * service that rewrites /etc/passwd later changes nothing that
     * hearth starts (restarts, exec.start, the owners of log files). */
    accounts_boot();
    /* Before any child: the OOM killer never picks PID 1, and the
     * kernel's helpers run nothing a service could write (in vm mode
     * hearth owns the kernel; elsewhere only the config's own keys). */
    harden_oom_protect();
    harden_apply(NULL, &H.cfg->sysctl, H.mode == MODE_VM);

    H.loop = ev_loop_new(EVBACKEND_EPOLL | EVFLAG_NOENV | EVFLAG_NOTIMERFD | EVFLAG_NOSIGMASK);
    if (!H.loop) {
        log_error("unable to create the event loop: %s", strerror(errno));
        if (H.mode != MODE_VM)
            return 1;
        /* Without a loop a PID 1 can still reap; nothing else. */
        for (;;)
            if (waitpid(-1, NULL, 0) < 0)
                pause();
    }
    ev_io_init(&sig_watcher, on_signal, sig_fd, EV_READ);
    if (sig_fd >= 0)
        ev_io_start(H.loop, &sig_watcher);

    log_info("hearth %s starting in %s mode", HEARTH_VERSION, hearth_mode_name(H.mode));
    if (H.mode != MODE_SUPERVISOR) {
        const char *hn = H.cfg->hostname;
        if (H.mode == MODE_VM && cmdline_get("hearth.hostname", buf, sizeof(buf)) == 0)
            hn = buf;
        if (hn)
            machine_set_hostname(hn);
    }
    if (H.mode == MODE_VM) {
        machine_loopback_up();
        /* Before the listeners: the control channel's own driver
         * (virtio_console, vsock) may be one of the listed modules. */
        int64_t t0 = mono_us();
        int mfail = modules_load(NULL, H.cfg->modules, H.cfg->n_modules);
        H.modules_us = mono_us() - t0;
        if (mfail)
            log_warn("modules: unable to load %d of %zu", mfail, H.cfg->n_modules);
    }
    /* The instance id and the seed of the restart jitter, before any
     * client can ask for them or service be started (a resume draws them
     * again). In vm mode after the modules: a driver's probe feeds the
     * kernel's generator. */
    identity_boot();
    cgroup_setup(H.mode == MODE_VM);
    guestlimits_setup(H.cfg);
    shutdown_set_hooks(&(struct shutdown_hooks){
        .end_sessions = end_sessions, .flush = control_flush, .stop = control_stop});
    control_set_handler(methods_handle_line);
    bool early = listeners_first(H.cfg);
    if (early) {
        control_start(H.cfg);
        peer_listeners_started(H.cfg);
    }

    hearth_set_phase(PHASE_SETUP);
    service_init(H.cfg);
    service_on_main_done(main_done);
    /* Mounts run in the background (sources may appear late) and mark
     * "mounts"; seeding and the skills overlay ("skills") follow them. */
    skills_init(H.cfg);
    mounts_on_left(on_mount_left);
    mounts_start(H.cfg, on_mounts_done);
    /* Mount usage and disk.low (its timer only while a writable mount is
     * mounted), and the resume news file (generation 0) before any
     * service can look for it. */
    diskuse_setup(H.cfg);
    /* Busy or idle; samples only while an event subscriber listens. */
    activity_setup(H.cfg);
    activity_set_watchers(control_subscriber_count);
    resumefile_setup(H.cfg);
    contain_readonly_dir(resumefile_dir());
    /* Phases no setup module claims are reached at once; each module
     * listed here marks its own phase when its work is done. */
    /* Every phase is owned by its module: network and egress here,
     * mounts and skills above, init by the sandbox module. */
    egress_boot(H.cfg);
    network_boot(H.cfg);
    /* Owns the "init" phase (wait_for_init) and the resume detectors. */
    sandbox_setup(H.cfg);
    resume_detectors_start();
    /* The endpoint's port is hearth's before any service could bind it. */
    envd_listen(H.cfg);
    hearth_set_phase(PHASE_STARTING);
    service_start_all();
    /* Otherwise the control listeners open after the first services'
     * forks, not before: no contained service can reach them (its view
     * hides their directories, which contain_prepare makes itself), and a
     * unix socket's bind on a disk may wait for the filesystem's journal.
     * The host connects a moment later; the events of the start wait in
     * the replay ring. */
    if (!early) {
        control_start(H.cfg);
        peer_listeners_started(H.cfg);
    }
    envd_start(H.cfg);
    /* With wait_for_init the host watches for wait_init to send its
     * sandbox.init; sandbox.c moves on to running when it arrives. */
    hearth_set_phase(sandbox_waiting_for_init() ? PHASE_WAIT_INIT : PHASE_RUNNING);
    H.running_us = mono_us();
    log_info("ready in %lld ms", (long long)(mono_ms() - H.boot_mono_ms));
    /* Start-up's code is done with: what the loop runs faults back in. */
    struct err terr;
    if (textpages_release(&terr) < 0)
        log_warn("%s", terr.msg);

    for (;;) {
        ev_run(H.loop, 0);
        if (H.mode != MODE_VM && H.phase == PHASE_STOPPED)
            break;
        /* The loop only ends on purpose outside vm mode. */
        log_error("event loop ended unexpectedly; restarting it");
    }
    service_free();
    return H.exit_status;
}
