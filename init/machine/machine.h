/* machine: what a PID 1 of a VM owns — the API filesystems, the hostname,
 * the loopback interface, and powering off. */
#ifndef HEARTH_MACHINE_H
#define HEARTH_MACHINE_H

#include "hearth.h"

/* Mounts /proc /sys /dev /dev/pts /dev/shm /run /tmp and cgroup2 from a
 * declarative table, skipping what is already mounted. Failures are
 * logged and counted, never fatal. Returns the number of failures. */
int machine_mount_api(void);
/* Sets the hostname (vm and container modes own their UTS namespace). */
/* Lifts the kernel's rate limit on /dev/kmsg writers
 * (kernel.printk_devkmsg = on). 0, or -1 with errno. */
int machine_kmsg_unlimit(void);
int machine_set_hostname(const char *name);
/* Brings "lo" up. */
int machine_loopback_up(void);
/* sync, unmount what can be unmounted (bounded), then reboot(2). Only
 * returns if the reboot call itself fails. */
void machine_power(enum shutdown_action action);

#endif
