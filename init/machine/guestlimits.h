/* guestlimits: what the services together may take from the guest. Every
 * service and exec session lives below one cgroup (cgroup.h's services
 * directory) whose memory.max leaves a reserve to hearth and the kernel,
 * so no service, nor all of them, can take the guest down (a tmpfs
 * filled to the last page ended in "System is deadlocked on memory");
 * each service's private /tmp and /dev/shm are capped (contain.h), and
 * each gets a pids.max unless it sets its own (svc_spawn.c).
 *
 * The guest's memory is MemTotal, or the memory.max of the cgroup hearth
 * was started in when that is lower (a container's limit). Defaults: a
 * reserve of a quarter of it, at most 64 MiB; a quarter of it for each
 * private tmpfs. */
#ifndef HEARTH_GUESTLIMITS_H
#define HEARTH_GUESTLIMITS_H

#include <stdint.h>

struct config;
struct cJSON;

#define GUESTLIMITS_RESERVE_MAX_DEFAULT (64 * 1024 * 1024)

/* Once at boot, after the cgroup tree exists: works the figures out,
 * writes the services' memory.max and hands the tmpfs sizes to contain. */
void guestlimits_setup(const struct config *cfg);

/* status.limits: {"memory_total", "memory_reserve", "services_memory_max",
 * "pids_max", "tmp_bytes", "shm_bytes", "error"?}; 0 where not applied. */
struct cJSON *guestlimits_status_json(void);

/* The default reserve for a guest of total bytes; exposed for unit tests. */
int64_t guestlimits_default_reserve(int64_t total);

#endif
