/* seccomp: the default system-call filter for services, a small classic
 * BPF program written by hand (no library). It refuses, with EPERM, the
 * calls a contained service has no business making: loading kernels and
 * modules, bpf, perf, keyrings, userfaultfd, handles that escape a mount,
 * mounting, new namespaces, ptrace, setting the clock, rebooting, raw
 * I/O ports, io_uring (whose operations the filter could not see). A call
 * that a kept capability is meant to allow (mount with CAP_SYS_ADMIN,
 * ptrace with CAP_SYS_PTRACE, ...) is let through for that service.
 * clone3 gets ENOSYS, so the C library falls back to clone, whose flags a
 * classic filter can read (clone3's live in memory it cannot). The refused
 * numbers are a search tree, not a list: short to run and to install. */
#ifndef HEARTH_SECCOMP_H
#define HEARTH_SECCOMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/filter.h>

#define SECCOMP_MAX_INSNS 160

struct seccomp_prog {
    struct sock_filter insns[SECCOMP_MAX_INSNS];
    unsigned short len;
};

/* Builds the filter for a service keeping the capabilities in caps (bit
 * n = capability n). Returns 0, or -1 with errno ENOTSUP on an
 * architecture the filter does not know (the caller says so and runs the
 * service without it only where its config allows). */
int seccomp_build(uint64_t caps, struct seccomp_prog *out);
/* In the child: installs the filter (no_new_privs must be set, or the
 * caller hold CAP_SYS_ADMIN). -1 with errno. */
int seccomp_install(const struct seccomp_prog *p);
/* Whether this kernel has seccomp filters at all (prctl probe). */
bool seccomp_supported(void);

#endif
