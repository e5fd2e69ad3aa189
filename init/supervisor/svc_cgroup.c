/* A service's cgroup leaf: killing what is left in it, replacing a leaf
 * cgroup.kill was used on, and the OOM kills counted from memory.events. */
#include "service_priv.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cJSON.h>
#include <ev.h>

#include "cgroup.h"
#include "events.h"
#include "hearth.h"
#include "log.h"

/* Kills everything in the leaf. Some kernels then SIGKILL every child
 * clone3 places into that leaf later on (the count of kills the child
 * was forked under is taken from the parent's cgroup, not the target's),
 * so the next spawn recreates the leaf first, or falls back to a fork. */
void svc_leaf_kill(struct service *s)
{
    if (!s->leaf.path[0])
        return;
    cgroup_kill(s->leaf.path);
    s->leaf.killed = true;
}

/* Before a spawn: a leaf cgroup.kill was used on is replaced by a fresh
 * one when it is empty. Returns the leaf clone3 may place the child in,
 * or NULL when the child has to move itself. */
const char *svc_leaf_for_spawn(struct service *s)
{
    if (!s->leaf.path[0])
        return NULL;
    if (!s->leaf.killed)
        return s->leaf.path;
    uint64_t used = 0;
    bool have_used = cgroup_cpu_usec(s->leaf.path, &used) == 0;
    if (!cgroup_is_empty(s->leaf.path) || cgroup_service_recreate(s->leaf.path) < 0) {
        log_debug("service %s: cgroup %s not recreated (%s); forking", s->cfg->name, s->leaf.path,
                  strerror(errno));
        return NULL;
    }
    s->leaf.killed = false;
    if (have_used)
        s->leaf.cpu_usec_before += used;
    /* The old watch went with the old leaf; counts go on from the new one. */
    s->leaf.oom_known = false;
    s->leaf.oom_wd = -1;
    svc_oom_watch(s);
    return s->leaf.path;
}

/* ---- OOM kills: memory.events of each leaf, watched with inotify ---- */

/* The kernel signals a change of a cgroup's memory.events as a file
 * modification; poll() on it would report readable at all times, so one
 * inotify descriptor carries the news for every leaf. */
static int ino_fd = -1;
static ev_io ino_io;

void svc_oom_check(struct service *s)
{
    uint64_t n;
    if (!s->leaf.oom_known || !s->leaf.path[0] || cgroup_oom_kills(s->leaf.path, &n) < 0 ||
        n <= s->leaf.oom_count)
        return;
    uint64_t added = n - s->leaf.oom_count;
    s->leaf.oom_count = n;
    s->leaf.oom_kills += added;
    s->leaf.oom_this_run = true;
    log_warn("service %s: the kernel's OOM killer ended %llu process%s in its cgroup",
             s->cfg->name, (unsigned long long)added, added == 1 ? "" : "es");
    cJSON *p = cJSON_CreateObject();
    if (p) {
        cJSON_AddStringToObject(p, "service", s->cfg->name);
        cJSON_AddNumberToObject(p, "oom_kills", (double)s->leaf.oom_kills);
        cJSON_AddNumberToObject(p, "new", (double)added);
        cJSON_AddNumberToObject(p, "pid", s->pid);
    }
    events_emit("service.oom", p);
}

static void ino_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    ssize_t n;

    do
        n = read(ino_fd, buf, sizeof(buf));
    while (n < 0 && errno == EINTR);
    if (n <= 0)
        return;
    for (char *p = buf; p + sizeof(struct inotify_event) <= buf + n;) {
        const struct inotify_event *e = (const struct inotify_event *)p;
        for (size_t i = 0; i < nsvcs; i++) {
            if (svcs[i].leaf.oom_wd == e->wd) {
                if (e->mask & IN_IGNORED)
                    svcs[i].leaf.oom_wd = -1; /* the leaf went away */
                else
                    svc_oom_check(&svcs[i]);
            }
        }
        p += sizeof(struct inotify_event) + e->len;
    }
}

/* Once per leaf: the baseline count and a watch. Without a memory
 * controller on the leaf there is nothing to watch, and status says so by
 * leaving out oom_kills. */
void svc_oom_watch(struct service *s)
{
    char path[CGROUP_PATH_MAX + 32];
    if (s->leaf.oom_known || !s->leaf.path[0] ||
        cgroup_oom_kills(s->leaf.path, &s->leaf.oom_count) < 0)
        return;
    s->leaf.oom_known = true;
    if (ino_fd < 0) {
        ino_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (ino_fd < 0) {
            log_warn("service %s: unable to watch memory.events (inotify): %s", s->cfg->name,
                     strerror(errno));
            return;
        }
        ev_io_init(&ino_io, ino_cb, ino_fd, EV_READ);
        ev_io_start(H.loop, &ino_io);
    }
    snprintf(path, sizeof(path), "%s/memory.events", s->leaf.path);
    s->leaf.oom_wd = inotify_add_watch(ino_fd, path, IN_MODIFY);
    if (s->leaf.oom_wd < 0)
        log_warn("service %s: unable to watch %s: %s", s->cfg->name, path, strerror(errno));
}

/* Kill whatever is left in the leaf once the main process is gone, so no
 * descendant outlives its service. */
void svc_sweep(struct service *s)
{
    if (s->leaf.path[0] && !cgroup_is_empty(s->leaf.path))
        svc_leaf_kill(s);
}

/* The inotify descriptor, once every service is down. */
void svc_cgroup_free(void)
{
    if (ino_fd >= 0) {
        ev_io_stop(H.loop, &ino_io);
        close(ino_fd);
        ino_fd = -1;
    }
}
