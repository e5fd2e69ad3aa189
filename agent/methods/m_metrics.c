#include "m_metrics.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>

#include "cgroup.h"
#include "control.h"
#include "diskuse.h"
#include "egress.h"
#include "hearth.h"
#include "kfile.h"
#include "params.h"
#include "redact.h"
#include "service.h"

/* One "Key:   N kB" line of a /proc status-like text, in bytes; -1 when
 * absent. */
static int64_t kib_field(const char *text, const char *key)
{
    size_t kl = strlen(key);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, key, kl) == 0 && p[kl] == ':') {
            char *end;
            long long v = strtoll(p + kl + 1, &end, 10);
            return end == p + kl + 1 ? -1 : (int64_t)v * 1024;
        }
    }
    return -1;
}

static void add_if(cJSON *o, const char *k, int64_t v)
{
    if (v >= 0)
        cJSON_AddNumberToObject(o, k, (double)v);
}

static cJSON *memory_json(void)
{
    char buf[4096];
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    if (kfile_read("/proc/meminfo", buf, sizeof(buf)) <= 0) {
        cJSON_AddStringToObject(o, "error", "unable to read /proc/meminfo");
        return o;
    }
    add_if(o, "total_bytes", kib_field(buf, "MemTotal"));
    add_if(o, "available_bytes", kib_field(buf, "MemAvailable"));
    add_if(o, "free_bytes", kib_field(buf, "MemFree"));
    return o;
}

static cJSON *services_json(void)
{
    cJSON *a = cJSON_CreateArray();
    const char *name, *leaf;
    uint64_t before;

    for (size_t i = 0; a && (leaf = service_cgroup_at(i, &name, &before)) != NULL; i++) {
        cJSON *o = cJSON_CreateObject();
        if (!o)
            break;
        cJSON_AddItemToArray(a, o);
        cJSON_AddStringToObject(o, "name", name);
        cJSON_AddStringToObject(o, "state", service_state_of((int)i));
        if (!leaf[0])
            continue; /* no cgroups: nothing to read */
        uint64_t v, w;
        if (cgroup_cpu_usec(leaf, &v) == 0)
            cJSON_AddNumberToObject(o, "cpu_usec", (double)(before + v));
        if (cgroup_memory_bytes(leaf, &v) == 0)
            cJSON_AddNumberToObject(o, "memory_bytes", (double)v);
        if (cgroup_pids_current(leaf, &v) == 0)
            cJSON_AddNumberToObject(o, "pids", (double)v);
        if (cgroup_io_bytes(leaf, &v, &w) == 0) {
            cJSON_AddNumberToObject(o, "io_read_bytes", (double)v);
            cJSON_AddNumberToObject(o, "io_write_bytes", (double)w);
        }
    }
    return a;
}

static int64_t count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int64_t n = 0;
    if (!d)
        return -1;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    closedir(d);
    return n - 1; /* the directory's own fd */
}

/* Lines (sep '\n') or words (sep ' ') of a /proc file, read in pieces
 * since neither file has a bound on its length; -1 when unreadable. */
static int64_t count_in_file(const char *path, char sep)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char buf[4096];
    int64_t n = 0;
    ssize_t got;
    char last = sep;
    while ((got = read(fd, buf, sizeof(buf))) > 0) {
        for (ssize_t i = 0; i < got; i++)
            n += buf[i] == sep;
        last = buf[got - 1];
    }
    close(fd);
    if (got < 0)
        return -1;
    /* children ends each pid with a space; a last word without one counts. */
    return n + (last != sep && last != '\n');
}

/* What a sandbox that runs for a month must keep flat besides its memory
 * and descriptors (tests/soak): the mounts of hearth's namespace, its
 * child processes (the services' reapers, probes and sync children under
 * way) and the cgroups of its tree. */
static void counts_json(cJSON *o)
{
    char path[64];
    add_if(o, "mounts", count_in_file("/proc/self/mountinfo", '\n'));
    snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int)getpid());
    add_if(o, "children", count_in_file(path, ' '));
    add_if(o, "cgroups", cgroup_tree_count());
}

static cJSON *self_json(void)
{
    char buf[4096];
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    if (kfile_read("/proc/self/status", buf, sizeof(buf)) > 0)
        add_if(o, "rss_bytes", kib_field(buf, "VmRSS"));
    add_if(o, "fds", count_fds());
    counts_json(o);
    cJSON_AddNumberToObject(o, "clients", (double)control_client_count());
    cJSON_AddNumberToObject(o, "uptime_ms", (double)(mono_ms() - H.boot_mono_ms));
    return o;
}

/* Only the counters of egress.get: bytes and packets per rule. */
static cJSON *egress_counters_json(void)
{
    cJSON *e = egress_json(), *o = cJSON_CreateObject();
    if (!e || !o) {
        cJSON_Delete(e);
        return o;
    }
    bool applied = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "applied"));
    cJSON_AddBoolToObject(o, "applied", applied);
    /* While a policy is applied: the local ports alone have no place here. */
    cJSON *c = applied ? cJSON_DetachItemFromObjectCaseSensitive(e, "counters") : NULL;
    if (c)
        cJSON_AddItemToObject(o, "counters", c);
    cJSON *ce = applied ? cJSON_DetachItemFromObjectCaseSensitive(e, "counters_error") : NULL;
    if (ce)
        cJSON_AddItemToObject(o, "counters_error", ce);
    cJSON_Delete(e);
    return o;
}

static cJSON *build(void)
{
    cJSON *r = cJSON_CreateObject();
    if (!r)
        return NULL;
    cJSON_AddNumberToObject(r, "time_ms", (double)wall_ms());
    cJSON_AddItemToObject(r, "memory", memory_json());
    cJSON_AddItemToObject(r, "mounts", diskuse_json());
    cJSON_AddItemToObject(r, "disk", diskuse_settings_json());
    cJSON_AddItemToObject(r, "services", services_json());
    cJSON_AddItemToObject(r, "egress", egress_counters_json());
    cJSON_AddItemToObject(r, "hearth", self_json());
    /* Mount targets and errors come from the config and the host. */
    redact_json(r);
    return r;
}

static void probed(void *ctx)
{
    struct rpc_error e = {0};
    cJSON *r = build();
    if (!r)
        rpc_error_set(&e, RPC_INTERNAL_ERROR, "metrics: out of memory");
    control_complete((uint64_t)(uintptr_t)ctx, r, &e);
}

int m_metrics(struct client *c, cJSON *params, cJSON **result, struct rpc_error *err)
{
    if (params_only(params, no_params, err) < 0)
        return -1;
    /* statvfs runs in a child (diskuse.h): the reply waits for it, the
     * loop does not. */
    if (!diskuse_can_wait()) {
        rpc_error_set(err, RPC_ERR_STATE, "metrics: %d requests already wait for the mount probe",
                      DISKUSE_WAITERS_MAX);
        return -1;
    }
    uint64_t ticket = control_defer(c);
    diskuse_probe(probed, (void *)(uintptr_t)ticket);
    return 0;
}
