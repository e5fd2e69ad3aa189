/* Containment: the capability policy, the privileged verdict, and the
 * seccomp filter run through a small classic-BPF interpreter. */
#include "unit.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/seccomp.h>

#include <cJSON.h>

#include "config.h"
#include "contain.h"
#include "err.h"
#include "nstemplate.h"
#include "seccomp.h"
#include "userns.h"

#define BIT(n) (UINT64_C(1) << (n))
#define RET_EPERM (SECCOMP_RET_ERRNO | EPERM)
#define RET_ENOSYS (SECCOMP_RET_ERRNO | ENOSYS)
#define CLONE_NEWUSER_ 0x10000000u
#define CLONE_NEWNS_ 0x00020000u
#define CLONE_NEWTIME_ 0x00000080u
#define CLONE_NEWPID_ 0x20000000u

/* Runs the program over one seccomp_data the way the kernel would for
 * the instructions the builder uses (absolute word loads, K jumps, K
 * returns). Anything else, a jump out of the program or falling off its
 * end, is a failure (returned as 0xdead). */
static unsigned steps; /* instructions the last run executed */

static uint32_t run(const struct seccomp_prog *p, int nr, uint32_t arch, uint64_t arg0)
{
    struct seccomp_data d;
    uint32_t acc = 0;

    steps = 0;

    memset(&d, 0, sizeof(d));
    d.nr = nr;
    d.arch = arch;
    d.args[0] = arg0;
    for (unsigned pc = 0; pc < p->len; pc++) {
        const struct sock_filter *f = &p->insns[pc];
        steps++;
        switch (f->code) {
        case BPF_LD | BPF_W | BPF_ABS:
            if (f->k + 4 > sizeof(d))
                return 0xdead;
            memcpy(&acc, (const char *)&d + f->k, 4);
            break;
        case BPF_JMP | BPF_JEQ | BPF_K:
            pc += acc == f->k ? f->jt : f->jf;
            break;
        case BPF_JMP | BPF_JGE | BPF_K:
            pc += acc >= f->k ? f->jt : f->jf;
            break;
        case BPF_JMP | BPF_JSET | BPF_K:
            pc += (acc & f->k) ? f->jt : f->jf;
            break;
        case BPF_RET | BPF_K:
            return f->k;
        default:
            return 0xdead;
        }
    }
    return 0xdead;
}

TEST(seccomp_default_filter)
{
    struct seccomp_prog p;
    CHECK_EQ_INT(seccomp_build(0, &p), 0);
    CHECK(p.len > 10 && p.len <= SECCOMP_MAX_INSNS);
    const uint32_t x86 = AUDIT_ARCH_X86_64;

    /* Ordinary calls pass. */
    CHECK_EQ_INT(run(&p, SYS_read, x86, 0), SECCOMP_RET_ALLOW);
    CHECK_EQ_INT(run(&p, SYS_openat, x86, 0), SECCOMP_RET_ALLOW);
    CHECK_EQ_INT(run(&p, SYS_execve, x86, 0), SECCOMP_RET_ALLOW);
    CHECK_EQ_INT(run(&p, SYS_socket, x86, 0), SECCOMP_RET_ALLOW);
    /* What undoes hearth's setup or reaches the kernel is refused. */
    static const int refused[] = {SYS_kexec_load, SYS_kexec_file_load, SYS_init_module,
                                  SYS_finit_module, SYS_delete_module, SYS_bpf,
                                  SYS_perf_event_open, SYS_keyctl, SYS_add_key, SYS_request_key,
                                  SYS_userfaultfd, SYS_open_by_handle_at, SYS_acct, SYS_swapon,
                                  SYS_swapoff, SYS_reboot, SYS_settimeofday, SYS_clock_settime,
                                  SYS_clock_adjtime, SYS_adjtimex, SYS_iopl, SYS_ioperm,
                                  SYS_mount, SYS_umount2, SYS_pivot_root, SYS_move_mount,
                                  SYS_fsopen, SYS_fsmount, SYS_fsconfig, SYS_open_tree, SYS_setns,
                                  SYS_ptrace, SYS_process_vm_readv, SYS_process_vm_writev,
                                  SYS_quotactl, SYS_lookup_dcookie, SYS_nfsservctl, SYS_vhangup,
                                  SYS_io_uring_setup};
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
        if (run(&p, refused[i], x86, 0) != RET_EPERM) {
            fprintf(stderr, "  syscall %d not refused\n", refused[i]);
            unit_failures++;
        }
    /* clone3 falls back to clone, whose flags the filter reads. */
    CHECK_EQ_INT(run(&p, SYS_clone3, x86, 0), RET_ENOSYS);
    CHECK_EQ_INT(run(&p, SYS_clone, x86, 0x003d0f00 /* a thread */), SECCOMP_RET_ALLOW);
    CHECK_EQ_INT(run(&p, SYS_clone, x86, 17 /* fork: SIGCHLD */), SECCOMP_RET_ALLOW);
    CHECK_EQ_INT(run(&p, SYS_clone, x86, CLONE_NEWUSER_ | 17), RET_EPERM);
    CHECK_EQ_INT(run(&p, SYS_clone, x86, CLONE_NEWNS_), RET_EPERM);
    /* In clone's first argument 0x80 is part of the exit signal. */
    CHECK_EQ_INT(run(&p, SYS_clone, x86, CLONE_NEWTIME_), SECCOMP_RET_ALLOW);
    CHECK_EQ_INT(run(&p, SYS_unshare, x86, CLONE_NEWUSER_), RET_EPERM);
    CHECK_EQ_INT(run(&p, SYS_unshare, x86, CLONE_NEWTIME_), RET_EPERM);
    CHECK_EQ_INT(run(&p, SYS_unshare, x86, 0x00000400 /* CLONE_FILES */), SECCOMP_RET_ALLOW);
    /* The flags' upper half is not where namespace bits live. */
    CHECK_EQ_INT(run(&p, SYS_unshare, x86, UINT64_C(1) << 40), SECCOMP_RET_ALLOW);
    /* Other ABIs: i386 and x32 numbers are refused whatever they are. */
    CHECK_EQ_INT(run(&p, SYS_read, AUDIT_ARCH_I386, 0), RET_EPERM);
    CHECK_EQ_INT(run(&p, SYS_read | 0x40000000, x86, 0), RET_EPERM);
}

TEST(seccomp_every_number_and_the_path_to_allow)
{
    /* Every number the filter refuses without capabilities. */
    static const int refused[] = {
        SYS_kexec_load, SYS_kexec_file_load, SYS_init_module, SYS_finit_module,
        SYS_delete_module, SYS_create_module, SYS_get_kernel_syms, SYS_query_module, SYS_bpf,
        SYS_perf_event_open, SYS_keyctl, SYS_add_key, SYS_request_key, SYS_userfaultfd,
        SYS_open_by_handle_at, SYS_acct, SYS_swapon, SYS_swapoff, SYS_reboot,
        SYS_settimeofday, SYS_clock_settime, SYS_clock_adjtime, SYS_adjtimex, SYS_iopl,
        SYS_ioperm, SYS_mount, SYS_umount2, SYS_pivot_root, SYS_open_tree, SYS_move_mount,
        SYS_fsopen, SYS_fsconfig, SYS_fsmount, SYS_fspick, SYS_mount_setattr, SYS_setns,
        SYS_quotactl, SYS_lookup_dcookie, SYS_nfsservctl, SYS_uselib, SYS__sysctl,
        SYS_vhangup, SYS_syslog, SYS_ptrace, SYS_process_vm_readv, SYS_process_vm_writev,
        SYS_kcmp, SYS_pidfd_getfd, SYS_process_madvise, SYS_io_uring_setup, SYS_io_uring_enter,
        SYS_io_uring_register};
    struct seccomp_prog p;
    unsigned longest = 0;
    CHECK_EQ_INT(seccomp_build(0, &p), 0);
    for (int nr = 0; nr < 1024; nr++) {
        bool deny = false;
        for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
            deny |= refused[i] == nr;
        uint32_t want = deny ? RET_EPERM : nr == SYS_clone3 ? RET_ENOSYS : SECCOMP_RET_ALLOW;
        uint32_t got = run(&p, nr, AUDIT_ARCH_X86_64, 0);
        if (got != want) {
            fprintf(stderr, "  syscall %d: %#x, expected %#x\n", nr, got, want);
            unit_failures++;
        }
        if (got == SECCOMP_RET_ALLOW && steps > longest)
            longest = steps;
    }
    /* A search, not a list: an allowed call passes a few comparisons
     * (the list it replaced took one per refused number, ~55). */
    if (longest > 16) {
        fprintf(stderr, "  an allowed call runs %u instructions\n", longest);
        unit_failures++;
    }
}

TEST(seccomp_kept_capabilities_lift_their_calls)
{
    struct seccomp_prog p;
    const uint32_t x86 = AUDIT_ARCH_X86_64;
    CHECK_EQ_INT(seccomp_build(BIT(CAP_SYS_ADMIN) | BIT(CAP_SYS_PTRACE) | BIT(CAP_SYS_TIME), &p), 0);
    CHECK_EQ_INT(run(&p, SYS_mount, x86, 0), SECCOMP_RET_ALLOW);
    CHECK_EQ_INT(run(&p, SYS_setns, x86, 0), SECCOMP_RET_ALLOW);
    CHECK_EQ_INT(run(&p, SYS_unshare, x86, CLONE_NEWNS_), SECCOMP_RET_ALLOW);
    CHECK_EQ_INT(run(&p, SYS_clone, x86, CLONE_NEWUSER_), SECCOMP_RET_ALLOW);
    CHECK_EQ_INT(run(&p, SYS_ptrace, x86, 0), SECCOMP_RET_ALLOW);
    CHECK_EQ_INT(run(&p, SYS_pidfd_getfd, x86, 0), SECCOMP_RET_ALLOW);
    CHECK_EQ_INT(run(&p, SYS_clock_settime, x86, 0), SECCOMP_RET_ALLOW);
    /* Not lifted by these: modules, kexec, keyrings. */
    CHECK_EQ_INT(run(&p, SYS_finit_module, x86, 0), RET_EPERM);
    CHECK_EQ_INT(run(&p, SYS_kexec_load, x86, 0), RET_EPERM);
    CHECK_EQ_INT(run(&p, SYS_keyctl, x86, 0), RET_EPERM);
    CHECK_EQ_INT(run(&p, SYS_clone3, x86, 0), RET_ENOSYS);
    /* Even with every capability, kexec and io_uring stay refused. */
    CHECK_EQ_INT(seccomp_build(~UINT64_C(0), &p), 0);
    CHECK_EQ_INT(run(&p, SYS_kexec_file_load, x86, 0), RET_EPERM);
    CHECK_EQ_INT(run(&p, SYS_io_uring_setup, x86, 0), RET_EPERM);
    CHECK_EQ_INT(run(&p, SYS_finit_module, x86, 0), SECCOMP_RET_ALLOW);
}

static struct config *parse(const char *json, char *err)
{
    struct err e = {0};
    struct config * r = config_parse(json, strlen(json), &e);
    if (err)
        snprintf(err, CONFIG_ERR_MAX, "%s", e.msg);
    return r;
}

#define SVC(extra) "{\"services\":[{\"name\":\"a\",\"argv\":[\"/bin/a\"]" extra "}]}"

static void policy(const char *json, struct contain_policy *pol)
{
    char err[CONFIG_ERR_MAX] = "";
    struct config *c = parse(json, err);
    CHECK_STR(err, "");
    memset(pol, 0, sizeof(*pol));
    if (c) {
        contain_policy_of(&c->services[0], pol);
        config_free(c);
    }
}

TEST(contain_capabilities_by_allowlist)
{
    struct contain_policy pol;
    char why[256];
    const uint64_t def = BIT(CAP_CHOWN) | BIT(CAP_DAC_OVERRIDE) | BIT(CAP_FOWNER) |
                         BIT(CAP_FSETID) | BIT(CAP_KILL) | BIT(CAP_SETGID) | BIT(CAP_SETUID) |
                         BIT(CAP_SETPCAP) | BIT(CAP_SETFCAP) | BIT(CAP_NET_BIND_SERVICE) |
                         BIT(CAP_SYS_CHROOT) | BIT(CAP_AUDIT_WRITE);

    policy(SVC(""), &pol);
    CHECK(pol.isolation && pol.seccomp);
    CHECK_EQ_INT(contain_caps(&pol, true), def);
    CHECK(!(contain_caps(&pol, true) & BIT(CAP_NET_RAW)));
    CHECK_EQ_INT(contain_caps(&pol, false), 0);
    CHECK_EQ_INT(contain_privileged(&pol, why, sizeof(why)), 0);
    CHECK_STR(why, "");

    /* caps_drop subtracts from the default. */
    policy(SVC(",\"caps_drop\":[\"CHOWN\",\"NET_ADMIN\"]"), &pol);
    CHECK_EQ_INT(contain_caps(&pol, true), def & ~BIT(CAP_CHOWN));

    /* caps_keep replaces it, for root and for other users (ambient). */
    policy(SVC(",\"caps_keep\":[\"CAP_NET_BIND_SERVICE\",\"net_admin\"],\"caps_drop\":[\"NET_BIND_SERVICE\"]"),
           &pol);
    CHECK_EQ_INT(contain_caps(&pol, true), BIT(CAP_NET_ADMIN));
    CHECK_EQ_INT(contain_caps(&pol, false), BIT(CAP_NET_ADMIN));
    CHECK_EQ_INT(contain_privileged(&pol, why, sizeof(why)), 1);
    CHECK_STR(why, "keeps CAP_NET_ADMIN");

    /* An empty caps_keep keeps nothing. */
    policy(SVC(",\"caps_keep\":[]"), &pol);
    CHECK_EQ_INT(contain_caps(&pol, true), 0);

    /* A dropped dangerous capability is no longer a reason. */
    policy(SVC(",\"caps_keep\":[\"SYS_PTRACE\",\"NET_RAW\"],\"caps_drop\":[\"SYS_PTRACE\"]"), &pol);
    CHECK_EQ_INT(contain_privileged(&pol, why, sizeof(why)), 1);
    CHECK_STR(why, "keeps CAP_NET_RAW");
}

TEST(contain_privileged_reasons)
{
    struct contain_policy pol;
    char why[256];

    policy(SVC(",\"isolation\":false,\"seccomp\":\"off\",\"caps_keep\":[\"SYS_ADMIN\",\"CHOWN\"]"),
           &pol);
    CHECK(!pol.isolation && !pol.seccomp);
    CHECK_EQ_INT(contain_privileged(&pol, why, sizeof(why)), 3);
    CHECK_STR(why, "keeps CAP_SYS_ADMIN, isolation off, seccomp off");
    policy(SVC(",\"isolation\":true,\"seccomp\":\"default\""), &pol);
    CHECK_EQ_INT(contain_privileged(&pol, why, sizeof(why)), 0);
    /* A short buffer cuts the text, never the count. */
    policy(SVC(",\"caps_keep\":[\"NET_ADMIN\",\"NET_RAW\",\"MKNOD\",\"DAC_READ_SEARCH\"]"), &pol);
    CHECK_EQ_INT(contain_privileged(&pol, why, 12), 4);
    CHECK_EQ_INT(strlen(why), 11);
}

TEST(contain_config_keys_checked)
{
    char err[CONFIG_ERR_MAX] = "";
    struct config *c = parse(SVC(",\"caps_keep\":[\"CHOWN\",\"CAP_WIZARD\"]"), err);
    CHECK(c == NULL);
    CHECK_STR(err, "services[0].caps_keep[1]: unknown capability \"CAP_WIZARD\"");
    c = parse(SVC(",\"seccomp\":\"strict\""), err);
    CHECK(c == NULL);
    CHECK_CONTAINS(err, "services[0].seccomp: expected one of");
    c = parse(SVC(",\"isolation\":\"no\""), err);
    CHECK(c == NULL);
    CHECK_CONTAINS(err, "services[0].isolation: expected");
}

/* The shipped configs get their containment from the defaults: no
 * capability list by hand, nothing privileged. */
TEST(contain_shipped_configs_are_contained)
{
    static const char *const files[] = {"rootfs/hermes/hearth.json", "rootfs/qemu/hearth.json",
                                        "rootfs/qemu/disk.json", "rootfs/oci/hearth.json"};
    for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++) {
        char why[256];
        struct err err = {0};
        struct config *c = config_load(files[f], &err);
        CHECK_STR(err.msg, "");
        for (size_t i = 0; c && i < c->n_services; i++) {
            struct contain_policy pol;
            contain_policy_of(&c->services[i], &pol);
            CHECK(!pol.keep_given && pol.isolation && pol.seccomp);
            CHECK_EQ_INT(contain_privileged(&pol, why, sizeof(why)), 0);
            CHECK(!cJSON_GetObjectItemCaseSensitive(c->services[i].json, "caps_drop"));
            /* No shipped service runs as root (docs/security.md: the
             * shipped agent is not root). */
            const char *user = c->services[i].user;
            CHECK(user && strcmp(user, "hermes") == 0);
            CHECK(!c->services[i].group);
            const cJSON *env = cJSON_GetObjectItemCaseSensitive(c->services[i].json, "env");
            CHECK(!cJSON_GetObjectItemCaseSensitive(env, "HERMES_ALLOW_ROOT_GATEWAY"));
        }
        config_free(c);
    }
}

/* What the child is told to hide and make read-only, and the capability
 * plan, for root and for another user. */
TEST(contain_prepare_plan)
{
    char dir[] = "/tmp/hearth-contain-XXXXXX", json[1024], sockdir[64];
    struct err err = {0};
    struct contain_plan p;
    struct stat st;

    if (!mkdtemp(dir)) {
        CHECK(!"mkdtemp");
        return;
    }
    snprintf(sockdir, sizeof(sockdir), "%s/run/ctl", dir);
    snprintf(json, sizeof(json),
             "{\"control\":{\"listen\":[\"unix:%s/c.sock\",\"vsock:1025\",\"unix:/top.sock\","
             "\"unix:%s/second.sock\"]},"
             "\"services\":[{\"name\":\"a\",\"argv\":[\"/bin/a\"]},"
             "{\"name\":\"b\",\"argv\":[\"/bin/b\"],\"caps_keep\":[\"NET_BIND_SERVICE\"],"
             "\"isolation\":false,\"seccomp\":\"off\"}]}",
             sockdir, sockdir);
    struct config *c = parse(json, err.msg);
    CHECK_STR(err.msg, "");
    if (!c)
        return;
    /* hearth's config is hidden where it exists (a missing one would
     * keep the template from ever matching). */
    char cfgpath[300];
    snprintf(cfgpath, sizeof(cfgpath), "%s/h.json", dir);
    FILE *cf = fopen(cfgpath, "w");
    if (cf)
        fclose(cf);
    contain_set_tmpfs_defaults(5 << 20, 6 << 20);
    CHECK_EQ_INT(contain_prepare(&c->services[0], c, cfgpath, true, "/sys/fs/cgroup/x", &p,
                                 &err),
                 0);
    CHECK_EQ_INT(p.caps, svc_config_default_caps);
    CHECK(!p.ambient);
    if (geteuid() == 0) {
        size_t etc = stat("/etc/hearth", &st) == 0;
        CHECK(p.isolate);
        CHECK_EQ_INT(p.n_hide, 3 + etc);
        CHECK_STR(p.hide[0], sockdir);
        CHECK_STR(p.hide[1], "/top.sock");
        if (etc)
            CHECK_STR(p.hide[2], "/etc/hearth");
        CHECK_STR(p.hide[2 + etc], cfgpath);
        CHECK_EQ_INT(p.n_ro, 0);
        /* Its own part: a read-only root, nothing writable but what it
         * names, the default tmpfs sizes. */
        CHECK(p.ro_root);
        CHECK_EQ_INT(p.n_rw, 0);
        CHECK_EQ_INT(p.tmp_bytes, 5 << 20);
        CHECK_EQ_INT(p.shm_bytes, 6 << 20);
        /* A socket directory not made yet is made, so it can be hidden. */
        CHECK(stat(sockdir, &st) == 0 && S_ISDIR(st.st_mode));
    }
    CHECK(p.seccomp == seccomp_supported());
    CHECK(!p.seccomp || p.prog.len > 0);
    /* A user namespace only where hearth lacks CAP_SYS_ADMIN; the clone
     * makes the pid namespace, and with a user namespace the mount one. */
    CHECK(p.userns == (p.isolate && userns_needed()));
    CHECK_EQ_INT(contain_clone_flags(&p), (p.pidns ? CLONE_NEWPID_ : 0) |
                                              (p.userns ? CLONE_NEWUSER_ | CLONE_NEWNS_ : 0));
    CHECK(p.userns_go[0] == -1 && p.userns_go[1] == -1 && p.join_user == -1);
    /* Not root: nothing kept. */
    CHECK_EQ_INT(contain_prepare(&c->services[0], c, NULL, false, NULL, &p, &err), 0);
    CHECK_EQ_INT(p.caps, 0);
    CHECK(!p.ambient && !p.cgroupns);
    /* Not root with caps_keep: ambient; opted out of isolation and the filter. */
    CHECK_EQ_INT(contain_prepare(&c->services[1], c, NULL, false, "/x", &p, &err), 0);
    CHECK_EQ_INT(p.caps, BIT(CAP_NET_BIND_SERVICE));
    CHECK(p.ambient && !p.isolate && !p.cgroupns && !p.seccomp);
    CHECK_EQ_INT(p.n_hide + p.n_ro, 0);
    config_free(c);
    CHECK(rmdir(sockdir) == 0);
    snprintf(sockdir, sizeof(sockdir), "%s/run", dir);
    rmdir(sockdir);
    unlink(cfgpath);
    rmdir(dir);
}

/* Joining a running service's namespaces: only those that are not
 * hearth's own are opened (this process's are, so none), and a process
 * that is gone is an error that leaves nothing held. */
TEST(contain_join_opens_only_foreign_namespaces)
{
    struct contain_plan p;
    struct err err = {0};

    memset(&p, 0, sizeof(p));
    CHECK_EQ_INT(contain_join_open(&p, getpid(), &err), 0);
    CHECK(p.join);
    CHECK_EQ_INT(p.join_user, -1);
    CHECK_EQ_INT(p.join_mnt, -1);
    CHECK_EQ_INT(p.join_cgroup, -1);
    CHECK_EQ_INT(p.join_pid, -1);
    contain_join_close(&p);
    CHECK(!p.join);

    pid_t gone = fork();
    if (gone == 0)
        _exit(0);
    CHECK(gone > 0);
    waitpid(gone, NULL, 0);
    CHECK_EQ_INT(contain_join_open(&p, gone, &err), -1);
    CHECK(!p.join);
    CHECK_CONTAINS(err.msg, "the service's main process is gone");

    /* A child in a mount namespace of its own: that one is opened. */
    if (geteuid() != 0)
        return;
    int go[2];
    CHECK(pipe(go) == 0);
    pid_t own = fork();
    if (own == 0) {
        char c;
        close(go[1]);
        if (unshare(CLONE_NEWNS_) < 0)
            _exit(1);
        _exit(read(go[0], &c, 1) < 0);
    }
    close(go[0]);
    CHECK(own > 0);
    /* Until the child has unshared, its namespace is this one. */
    for (int i = 0; i < 500; i++) {
        char a[64] = "", b[64] = "", path[64];
        snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)own);
        if (readlink(path, a, sizeof(a) - 1) > 0 && readlink("/proc/self/ns/mnt", b, sizeof(b) - 1) > 0 &&
            strcmp(a, b) != 0)
            break;
        usleep(10000);
    }
    CHECK_EQ_INT(contain_join_open(&p, own, &err), 0);
    CHECK(p.join && p.join_mnt >= 0 && p.join_pid == -1);
    contain_join_close(&p);
    CHECK(!p.join && p.join_mnt == -1);
    close(go[1]);
    waitpid(own, NULL, 0);
}

/* The namespace template's bookkeeping, with this process standing in for
 * the child: a plan whose child was asked sends its namespace, and the
 * template then fits plans with the same hidden and read-only paths only,
 * and not once a hidden directory was made anew. Whether it is kept at all
 * follows whether mounts propagate here (/ shared or not). */
TEST(nstemplate_fits_same_plans_only)
{
    char dir[] = "/tmp/hearth-nstmpl-XXXXXX", hidden[64], moved[64];
    struct contain_plan p, q;

    if (!mkdtemp(dir)) {
        CHECK(!"mkdtemp");
        return;
    }
    snprintf(hidden, sizeof(hidden), "%s/ctl", dir);
    snprintf(moved, sizeof(moved), "%s/old", dir);
    CHECK_EQ_INT(mkdir(hidden, 0755), 0);
    memset(&p, 0, sizeof(p));
    p.ns_fd = p.snap_fd = -1;
    p.isolate = true;
    p.n_hide = 1;
    snprintf(p.hide[0], sizeof(p.hide[0]), "%s", hidden);
    p.n_ro = 1;
    snprintf(p.ro[0], sizeof(p.ro[0]), "/etc/hearth");
    q = p;
    CHECK_EQ_INT(contain_template_for(&p), -1);
    /* A plan that keeps CAP_SYS_ADMIN is never asked. */
    q.caps = BIT(CAP_SYS_ADMIN);
    CHECK(!contain_snapshot_offer(&q));
    CHECK(contain_snapshot_offer(&p));
    CHECK(p.snap_fd >= 0);
    /* Only one request at a time. */
    q.caps = 0;
    CHECK(!contain_snapshot_offer(&q));
    int child_end = dup(p.snap_fd);
    contain_snapshot_forked(&p, true);
    CHECK_EQ_INT(p.snap_fd, -1);
    nstemplate_send(child_end);
    close(child_end);
    contain_snapshot_take();
    int fd = contain_template_for(&p);
    if (contain_mounts_propagate()) {
        CHECK(fd >= 0);
        /* The same paths fit; another read-only path does not. */
        CHECK_EQ_INT(contain_template_for(&q), fd);
        snprintf(q.ro[0], sizeof(q.ro[0]), "/etc/other");
        CHECK_EQ_INT(contain_template_for(&q), -1);
        /* The hidden directory made anew is another one. */
        CHECK_EQ_INT(rename(hidden, moved), 0);
        CHECK_EQ_INT(mkdir(hidden, 0755), 0);
        CHECK_EQ_INT(contain_template_for(&p), -1);
        rmdir(moved);
    } else {
        CHECK_EQ_INT(fd, -1);
    }
    rmdir(hidden);
    rmdir(dir);
}

/* The child's maps: hearth's own ranges, each mapped to itself. */
TEST(userns_identity_maps_each_range_to_itself)
{
    char out[256];
    CHECK_EQ_INT(userns_identity("         0          0 4294967295\n", out, sizeof(out)), 0);
    CHECK_STR(out, "0 0 4294967295\n");
    /* A rootless container's: root is the host's 1000, the rest subuids. */
    CHECK_EQ_INT(userns_identity("0 1000 1\n1 100000 65536\n", out, sizeof(out)), 0);
    CHECK_STR(out, "0 0 1\n1 1 65536\n");
    CHECK_EQ_INT(userns_identity("", out, sizeof(out)), -1);
    CHECK_EQ_INT(errno, ENODATA);
    CHECK_EQ_INT(userns_identity("0 0 4294967295\n", out, 8), -1);
    CHECK_EQ_INT(errno, E2BIG);
}

/* Whether the kernel would mount a fresh /proc in a user namespace: only
 * while some proc mount shows all of proc, nothing mounted over it but
 * the empty binfmt_misc directory. */
TEST(userns_proc_shared_judged_from_mountinfo)
{
    /* unshare --mount-proc: the fresh one covers the host's (which has
     * binfmt_misc below it): visible. */
    CHECK(!userns_proc_shared_in(
        "27 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
        "30 27 0:21 / /proc rw,relatime - proc proc rw\n"
        "31 30 0:40 / /proc/sys/fs/binfmt_misc rw,relatime - autofs systemd-1 rw\n"
        "90 27 0:61 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw\n"));
    /* podman's: /proc/bus and the like are proc bound read-only over
     * parts of itself, /proc/kcore has /dev/null over it: refused. */
    CHECK(userns_proc_shared_in(
        "76 1 0:43 / / rw - overlay overlay rw\n"
        "77 76 0:44 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw\n"
        "52 77 0:44 /bus /proc/bus ro,nosuid,nodev,noexec,relatime - proc proc rw\n"
        "55 77 0:44 /sys /proc/sys ro,nosuid,nodev,noexec,relatime - proc proc rw\n"
        "57 77 0:45 /null /proc/kcore rw,nosuid,noexec - tmpfs tmpfs rw\n"));
    /* A read-only proc will not do for a read-write one; no proc at all
     * neither. */
    CHECK(userns_proc_shared_in("77 76 0:44 / /proc ro,nosuid - proc proc rw\n"));
    CHECK(userns_proc_shared_in("76 1 0:43 / / rw - overlay overlay rw\n"));
    /* A mount beside /proc (a path that only starts the same) is none of
     * its business. */
    CHECK(!userns_proc_shared_in("77 76 0:44 / /proc rw - proc proc rw\n"
                                 "78 76 0:45 / /procfoo rw - tmpfs tmpfs rw\n"));
}

/* The kernel refusing a user namespace: what is missing and the setting
 * to change, kept for status until a start gets one again. */
TEST(userns_refusal_names_the_setting)
{
    struct err msg;
    userns_granted();
    CHECK(!userns_refused(EIO, &msg));
    CHECK_STR(userns_refusal(), "");
    CHECK(userns_refused(ENOSPC, &msg));
    CHECK_CONTAINS(msg.msg, "containment: no CAP_SYS_ADMIN and no user namespace");
    CHECK_CONTAINS(msg.msg, "user.max_user_namespaces");
    CHECK_CONTAINS(msg.msg, "--cap-add SYS_ADMIN");
    CHECK_CONTAINS(userns_refusal(), "raise user.max_user_namespaces");
    /* Whole within an RPC error's message (exec.start). */
    CHECK(strlen(msg.msg) < 256);
    CHECK(userns_refused(EPERM, &msg));
    CHECK_CONTAINS(msg.msg, "Operation not permitted");
    CHECK(strlen(msg.msg) < 256);
    CHECK(userns_refused(EINVAL, &msg));
    CHECK_CONTAINS(msg.msg, "CONFIG_USER_NS");
    userns_granted();
    CHECK_STR(userns_refusal(), "");
}

/* What status says of a service's containment. */
TEST(contain_describe_by_policy)
{
    struct contain_policy pol;
    struct err why;
    struct service_config sc = {.name = "x"};

    contain_policy_of(&sc, &pol);
    const char *mode = contain_describe(&pol, &why);
    if (geteuid() != 0) {
        CHECK_STR(mode, "none");
        CHECK_CONTAINS(why.msg, "hearth is not root");
    } else if (userns_needed()) {
        CHECK_STR(mode, "userns");
        CHECK_CONTAINS(why.msg, "CAP_SYS_ADMIN");
    } else {
        CHECK_STR(mode, "full");
        CHECK_STR(why.msg, "");
    }
    pol.isolation = false;
    CHECK_STR(contain_describe(&pol, &why), "none");
    CHECK_STR(why.msg, "isolation off");
}
