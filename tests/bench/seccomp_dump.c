/* bench helper: writes hearth's default seccomp program for a root
 * service (init/contain/seccomp.c, the default capability set) to stdout as raw
 * struct sock_filter records, the form bwrap --seccomp FD loads, so the
 * bwrap row runs its child under the same filter as hearth's. */
#include <linux/capability.h>
#include <stdio.h>

#include "seccomp.h"

#define BIT(n) (UINT64_C(1) << (n))

int main(void)
{
    /* svc_config_default_caps in init/config/svc_config.c */
    const uint64_t caps =
        BIT(CAP_CHOWN) | BIT(CAP_DAC_OVERRIDE) | BIT(CAP_FOWNER) | BIT(CAP_FSETID) |
        BIT(CAP_KILL) | BIT(CAP_SETGID) | BIT(CAP_SETUID) | BIT(CAP_SETPCAP) |
        BIT(CAP_SETFCAP) | BIT(CAP_NET_BIND_SERVICE) | BIT(CAP_SYS_CHROOT) |
        BIT(CAP_AUDIT_WRITE);
    struct seccomp_prog p;
    if (seccomp_build(caps, &p) < 0) {
        perror("seccomp_build");
        return 1;
    }
    if (fwrite(p.insns, sizeof(p.insns[0]), p.len, stdout) != p.len || fflush(stdout))
        return 1;
    return 0;
}
