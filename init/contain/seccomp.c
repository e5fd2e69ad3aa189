#include "seccomp.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/seccomp.h>


#if defined(__x86_64__)

#define NEVER (-1) /* no capability lifts the denial */

/* Refused with EPERM unless the service keeps cap. Modeled on what the
 * OCI runtimes refuse by default, plus io_uring: its queued operations
 * never pass through this filter. */
static const struct {
    int nr;
    int cap;
} denied[] = {
    {SYS_kexec_load, NEVER},
    {SYS_kexec_file_load, NEVER},
    {SYS_init_module, CAP_SYS_MODULE},
    {SYS_finit_module, CAP_SYS_MODULE},
    {SYS_delete_module, CAP_SYS_MODULE},
    {SYS_create_module, NEVER},
    {SYS_get_kernel_syms, NEVER},
    {SYS_query_module, NEVER},
    {SYS_bpf, CAP_BPF},
    {SYS_perf_event_open, CAP_PERFMON},
    {SYS_keyctl, NEVER},
    {SYS_add_key, NEVER},
    {SYS_request_key, NEVER},
    {SYS_userfaultfd, CAP_SYS_PTRACE},
    {SYS_open_by_handle_at, CAP_DAC_READ_SEARCH},
    {SYS_acct, CAP_SYS_PACCT},
    {SYS_swapon, CAP_SYS_ADMIN},
    {SYS_swapoff, CAP_SYS_ADMIN},
    {SYS_reboot, CAP_SYS_BOOT},
    {SYS_settimeofday, CAP_SYS_TIME},
    {SYS_clock_settime, CAP_SYS_TIME},
    {SYS_clock_adjtime, CAP_SYS_TIME},
    {SYS_adjtimex, CAP_SYS_TIME},
    {SYS_iopl, CAP_SYS_RAWIO},
    {SYS_ioperm, CAP_SYS_RAWIO},
    {SYS_mount, CAP_SYS_ADMIN},
    {SYS_umount2, CAP_SYS_ADMIN},
    {SYS_pivot_root, CAP_SYS_ADMIN},
    {SYS_open_tree, CAP_SYS_ADMIN},
    {SYS_move_mount, CAP_SYS_ADMIN},
    {SYS_fsopen, CAP_SYS_ADMIN},
    {SYS_fsconfig, CAP_SYS_ADMIN},
    {SYS_fsmount, CAP_SYS_ADMIN},
    {SYS_fspick, CAP_SYS_ADMIN},
    {SYS_mount_setattr, CAP_SYS_ADMIN},
    {SYS_setns, CAP_SYS_ADMIN},
    {SYS_quotactl, CAP_SYS_ADMIN},
    {SYS_lookup_dcookie, CAP_SYS_ADMIN},
    {SYS_nfsservctl, NEVER},
    {SYS_uselib, NEVER},
    {SYS__sysctl, NEVER},
    {SYS_vhangup, CAP_SYS_TTY_CONFIG},
    {SYS_syslog, CAP_SYSLOG},
    {SYS_ptrace, CAP_SYS_PTRACE},
    {SYS_process_vm_readv, CAP_SYS_PTRACE},
    {SYS_process_vm_writev, CAP_SYS_PTRACE},
    {SYS_kcmp, CAP_SYS_PTRACE},
    /* Another process's descriptors and memory advice: the same check as
     * ptrace, refused outright unless the service may trace. */
    {SYS_pidfd_getfd, CAP_SYS_PTRACE},
    {SYS_process_madvise, CAP_SYS_PTRACE},
    {SYS_io_uring_setup, NEVER},
    {SYS_io_uring_enter, NEVER},
    {SYS_io_uring_register, NEVER},
};

/* Namespace flags. CLONE_NEWTIME (0x80) exists for unshare only: in
 * clone's first argument those bits are the exit signal. */
#define NS_FLAGS_CLONE 0x7e020000u /* NEWNS NEWCGROUP NEWUTS NEWIPC NEWUSER NEWPID NEWNET */
#define NS_FLAGS_UNSHARE (NS_FLAGS_CLONE | 0x80u)
#define X32_SYSCALL_BIT 0x40000000u

#define OFF_NR offsetof(struct seccomp_data, nr)
#define OFF_ARCH offsetof(struct seccomp_data, arch)
#define OFF_ARG0_LO offsetof(struct seccomp_data, args[0]) /* little-endian */

enum target { T_NEXT, T_DENY, T_ENOSYS, T_CLONE, T_UNSHARE, T_NTARGETS };

/* Labels past the fixed targets: one per branch of the search tree. */
#define MAX_LABELS (T_NTARGETS + 64)

struct builder {
    struct seccomp_prog *p;
    /* per instruction: where jt and jf go, resolved once labels are placed */
    unsigned char jt[SECCOMP_MAX_INSNS], jf[SECCOMP_MAX_INSNS];
    int label[MAX_LABELS];
    int nlabels;
    bool overflow;
};

static void emit(struct builder *b, unsigned short code, unsigned k, int jt, int jf)
{
    if (b->p->len >= SECCOMP_MAX_INSNS) {
        b->overflow = true;
        return;
    }
    b->jt[b->p->len] = (unsigned char)jt;
    b->jf[b->p->len] = (unsigned char)jf;
    b->p->insns[b->p->len++] = (struct sock_filter)BPF_STMT(code, k);
}

static void place(struct builder *b, int t) { b->label[t] = b->p->len; }

static int new_label(struct builder *b)
{
    if (b->nlabels >= MAX_LABELS) {
        b->overflow = true;
        return T_DENY; /* never placed past the overflow */
    }
    return b->nlabels++;
}

/* Classic BPF jumps are forward and at most 255 instructions long. */
static int resolve(struct builder *b)
{
    for (unsigned short i = 0; i < b->p->len; i++) {
        if (BPF_CLASS(b->p->insns[i].code) != BPF_JMP)
            continue;
        for (int w = 0; w < 2; w++) {
            int t = w ? b->jf[i] : b->jt[i];
            int off = t == T_NEXT ? 0 : b->label[t] - (i + 1);
            if (off < 0 || off > 255) {
                errno = EOVERFLOW;
                return -1;
            }
            if (w)
                b->p->insns[i].jf = (unsigned char)off;
            else
                b->p->insns[i].jt = (unsigned char)off;
        }
    }
    return 0;
}

/* One call the filter does not simply allow, and where it goes. */
struct rule {
    unsigned nr;
    int target;
};

/* At most this many numbers are compared one by one at a leaf. */
#define LEAF_RULES 4

/* The rules lo..hi-1 (sorted by number) as a search tree: a JGE per
 * branch, a few JEQs and an allow at each leaf. An allowed call runs
 * about a dozen instructions rather than one per refused number, and the
 * kernel, which runs the filter for every system call number when it is
 * installed (to cache the ones it always allows), takes a fraction of
 * the time to install it. */
static void emit_tree(struct builder *b, const struct rule *r, size_t lo, size_t hi)
{
    if (hi - lo <= LEAF_RULES) {
        for (size_t i = lo; i < hi; i++)
            emit(b, BPF_JMP | BPF_JEQ | BPF_K, r[i].nr, r[i].target, T_NEXT);
        emit(b, BPF_RET | BPF_K, SECCOMP_RET_ALLOW, T_NEXT, T_NEXT);
        return;
    }
    size_t mid = lo + (hi - lo) / 2;
    int upper = new_label(b);
    emit(b, BPF_JMP | BPF_JGE | BPF_K, r[mid].nr, upper, T_NEXT);
    emit_tree(b, r, lo, mid);
    place(b, upper);
    emit_tree(b, r, mid, hi);
}

static bool kept(uint64_t caps, int cap) { return cap != NEVER && (caps >> cap) & 1; }

int seccomp_build(uint64_t caps, struct seccomp_prog *out)
{
    struct builder b;
    struct rule rules[sizeof(denied) / sizeof(denied[0]) + 3];
    size_t n = 0;
    bool ns_ok = kept(caps, CAP_SYS_ADMIN);

    memset(&b, 0, sizeof(b));
    memset(out, 0, sizeof(*out));
    b.p = out;
    b.nlabels = T_NTARGETS;
    for (int t = 0; t < MAX_LABELS; t++)
        b.label[t] = -1;
    for (size_t i = 0; i < sizeof(denied) / sizeof(denied[0]); i++)
        if (!kept(caps, denied[i].cap))
            rules[n++] = (struct rule){(unsigned)denied[i].nr, T_DENY};
    if (!ns_ok) {
        rules[n++] = (struct rule){SYS_clone, T_CLONE};
        rules[n++] = (struct rule){SYS_unshare, T_UNSHARE};
    }
    rules[n++] = (struct rule){SYS_clone3, T_ENOSYS};
    for (size_t i = 1; i < n; i++) /* a few dozen: insertion sort */
        for (size_t j = i; j > 0 && rules[j - 1].nr > rules[j].nr; j--) {
            struct rule t = rules[j];
            rules[j] = rules[j - 1];
            rules[j - 1] = t;
        }
    /* Another ABI (i386 through int 0x80, x32) has other numbers: the
     * checks below would read them wrongly, so such calls are refused. */
    emit(&b, BPF_LD | BPF_W | BPF_ABS, OFF_ARCH, T_NEXT, T_NEXT);
    emit(&b, BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, T_NEXT, T_DENY);
    emit(&b, BPF_LD | BPF_W | BPF_ABS, OFF_NR, T_NEXT, T_NEXT);
    emit(&b, BPF_JMP | BPF_JGE | BPF_K, X32_SYSCALL_BIT, T_DENY, T_NEXT);
    emit_tree(&b, rules, 0, n);
    if (!ns_ok) {
        place(&b, T_CLONE);
        emit(&b, BPF_LD | BPF_W | BPF_ABS, OFF_ARG0_LO, T_NEXT, T_NEXT);
        emit(&b, BPF_JMP | BPF_JSET | BPF_K, NS_FLAGS_CLONE, T_DENY, T_NEXT);
        emit(&b, BPF_RET | BPF_K, SECCOMP_RET_ALLOW, T_NEXT, T_NEXT);
        place(&b, T_UNSHARE);
        emit(&b, BPF_LD | BPF_W | BPF_ABS, OFF_ARG0_LO, T_NEXT, T_NEXT);
        emit(&b, BPF_JMP | BPF_JSET | BPF_K, NS_FLAGS_UNSHARE, T_DENY, T_NEXT);
        emit(&b, BPF_RET | BPF_K, SECCOMP_RET_ALLOW, T_NEXT, T_NEXT);
    }
    place(&b, T_ENOSYS);
    emit(&b, BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS, T_NEXT, T_NEXT);
    place(&b, T_DENY);
    emit(&b, BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM, T_NEXT, T_NEXT);
    if (b.overflow) {
        errno = E2BIG;
        return -1;
    }
    return resolve(&b);
}

#else

int seccomp_build(uint64_t caps, struct seccomp_prog *out)
{
    (void)caps;
    memset(out, 0, sizeof(*out));
    errno = ENOTSUP;
    return -1;
}

#endif

int seccomp_install(const struct seccomp_prog *p)
{
    struct sock_fprog prog = {.len = p->len, .filter = (struct sock_filter *)p->insns};
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
}

bool seccomp_supported(void)
{
    /* A NULL filter: EFAULT means filters exist, EINVAL that they do not. */
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, NULL, 0, 0) < 0 && errno == EFAULT;
}
