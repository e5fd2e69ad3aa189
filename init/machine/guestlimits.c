#include "guestlimits.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "cgroup.h"
#include "config.h"
#include "contain.h"
#include "kfile.h"
#include "log.h"

static struct {
    int64_t total, reserve, services_max, pids_max, tmp, shm;
    char error[160];
} L;

/* MemTotal from /proc/meminfo, in bytes; 0 when unreadable. */
static int64_t mem_total(void)
{
    char buf[256];
    if (kfile_read("/proc/meminfo", buf, sizeof(buf)) <= 0)
        return 0;
    const char *p = strstr(buf, "MemTotal:");
    return p ? strtoll(p + 9, NULL, 10) * 1024 : 0;
}

int64_t guestlimits_default_reserve(int64_t total)
{
    int64_t r = total / 4;
    return r < GUESTLIMITS_RESERVE_MAX_DEFAULT ? r : GUESTLIMITS_RESERVE_MAX_DEFAULT;
}

void guestlimits_setup(const struct config *cfg)
{
    memset(&L, 0, sizeof(L));
    L.total = mem_total();
    int64_t own = cgroup_own_memory_max();
    if (own > 0 && (!L.total || own < L.total))
        L.total = own;
    L.pids_max = cfg->limits.pids_max;
    L.tmp = cfg->limits.tmp_bytes > 0 ? cfg->limits.tmp_bytes : L.total / 4;
    L.shm = cfg->limits.shm_bytes > 0 ? cfg->limits.shm_bytes : L.total / 4;
    contain_set_tmpfs_defaults(L.tmp, L.shm);

    int64_t reserve = cfg->limits.memory_reserve >= 0 ? cfg->limits.memory_reserve
                                                       : guestlimits_default_reserve(L.total);
    if (!reserve || !L.total)
        return;
    if (reserve >= L.total) {
        snprintf(L.error, sizeof(L.error),
                 "limits.memory_reserve: %lld bytes leave nothing of the guest's %lld to services",
                 (long long)reserve, (long long)L.total);
        log_warn("%s; not applied", L.error);
        return;
    }
    if (!cgroup_available()) {
        snprintf(L.error, sizeof(L.error), "limits.memory_reserve: services have no cgroup here");
        log_warn("%s; not applied", L.error);
        return;
    }
    if (cgroup_services_memory_max(L.total - reserve) < 0) {
        snprintf(L.error, sizeof(L.error), "limits.memory_reserve: %s",
                 errno == ENOENT ? "the memory controller is not enabled for service cgroups"
                                 : strerror(errno));
        log_warn("%s; not applied", L.error);
        return;
    }
    L.reserve = reserve;
    L.services_max = L.total - reserve;
    log_debug("services may take %lld of %lld bytes; %lld kept for hearth and the kernel",
              (long long)L.services_max, (long long)L.total, (long long)L.reserve);
}

cJSON *guestlimits_status_json(void)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddNumberToObject(o, "memory_total", (double)L.total);
    cJSON_AddNumberToObject(o, "memory_reserve", (double)L.reserve);
    cJSON_AddNumberToObject(o, "services_memory_max", (double)L.services_max);
    cJSON_AddNumberToObject(o, "pids_max", (double)L.pids_max);
    cJSON_AddNumberToObject(o, "tmp_bytes", (double)L.tmp);
    cJSON_AddNumberToObject(o, "shm_bytes", (double)L.shm);
    if (L.error[0])
        cJSON_AddStringToObject(o, "error", L.error);
    return o;
}
