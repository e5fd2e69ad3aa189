#include "peer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cgroup.h"
#include "config.h"
#include "err.h"
#include "kfile.h"
#include "log.h"
#include "service.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif
#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

struct nsid {
    dev_t dev;
    ino_t mnt, cg;
};

/* A service's namespaces, kept per main pid once they are its own: a
 * process that later joins or creates other namespaces does not move the
 * service's record. */
static struct {
    pid_t pid;
    bool ok;
    struct nsid ns;
} svc_ns[CONFIG_MAX_SERVICES];

static struct nsid self_ns;
static bool self_ns_read;

static int ns_of(pid_t pid, struct nsid *out)
{
    char path[64];
    struct stat st;

    if (pid > 0)
        snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)pid);
    else
        snprintf(path, sizeof(path), "/proc/self/ns/mnt");
    if (stat(path, &st) < 0)
        return -1;
    out->dev = st.st_dev;
    out->mnt = st.st_ino;
    memcpy(path + strlen(path) - 3, "cgroup", 7);
    if (stat(path, &st) < 0) {
        /* Kernels before 4.6 have no cgroup namespaces at all. */
        if (errno != ENOENT || pid <= 0)
            return -1;
        out->cg = 0;
        return 0;
    }
    out->cg = st.st_ino;
    return 0;
}

/* The name of the running service whose mount or cgroup namespace p is
 * in, when that namespace is not hearth's own; NULL otherwise. Services
 * that share hearth's namespaces are told apart by cgroup alone. */
static const char *service_sharing_ns(const struct nsid *p, const char **which)
{
    if (!self_ns_read) {
        if (ns_of(0, &self_ns) < 0)
            return NULL;
        self_ns_read = true;
    }
    const char *name;
    pid_t pid;
    for (size_t i = 0; i < CONFIG_MAX_SERVICES && (pid = service_pid_at(i, &name)) >= 0; i++) {
        if (pid == 0)
            continue;
        /* Read again until both namespaces differ from hearth's: a child
         * enters its own only after fork (and may not have yet). */
        if (svc_ns[i].pid != pid || !svc_ns[i].ok || svc_ns[i].ns.mnt == self_ns.mnt ||
            svc_ns[i].ns.cg == self_ns.cg) {
            svc_ns[i].pid = pid;
            svc_ns[i].ok = ns_of(pid, &svc_ns[i].ns) == 0;
        }
        if (!svc_ns[i].ok || svc_ns[i].ns.dev != p->dev)
            continue;
        if (svc_ns[i].ns.mnt != self_ns.mnt && svc_ns[i].ns.mnt == p->mnt) {
            *which = "mount";
            return name;
        }
        if (svc_ns[i].ns.cg && svc_ns[i].ns.cg != self_ns.cg && svc_ns[i].ns.cg == p->cg) {
            *which = "cgroup";
            return name;
        }
    }
    return NULL;
}

static int pidfd_alive(int pidfd)
{
    return syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) == 0;
}

int peer_classify(pid_t pid, int pidfd, struct err *err)
{
    int in = cgroup_pid_service(pid);
    if (in < 0)
        return err_set(err, "unable to identify pid %d: its cgroup is unreadable (gone?)",
                       (int)pid);
    if (in > 0) {
        err_set(err, "pid %d runs inside a service cgroup", (int)pid);
        return 1;
    }
    struct nsid ns;
    if (ns_of(pid, &ns) < 0) {
        /* An unprivileged hearth (development) cannot read another
         * user's namespaces; its services run as itself, so such a
         * process is none of them. */
        if (errno == EACCES && geteuid() != 0)
            goto alive;
        return err_unable(err, errno, "identify pid %d: its namespaces are unreadable",
                 (int)pid);
    }
    const char *which = NULL, *svc = service_sharing_ns(&ns, &which);
    if (svc) {
        err_set(err, "pid %d is in the %s namespace of service %s", (int)pid, which, svc);
        return 1;
    }
alive:
    /* What was read belongs to the pinned process only if it still runs:
     * otherwise the pid may name another process by now. */
    if (pidfd >= 0 && !pidfd_alive(pidfd))
        return err_set(err, "pid %d exited while it was being identified", (int)pid);
    return 0;
}

/* The pid a pidfd refers to, from its fdinfo: -1 when the process has
 * exited, 0 when it is outside hearth's pid namespace. */
static int pidfd_pid(int pidfd, pid_t *out)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
    if (kfile_read(path, buf, sizeof(buf)) <= 0)
        return -1;
    const char *p = strstr(buf, "\nPid:");
    if (!p)
        return -1;
    *out = (pid_t)strtol(p + 5, NULL, 10);
    return 0;
}

static void warn_uid_only(void)
{
    static bool warned;
    if (warned || cgroup_available())
        return;
    warned = true;
    log_warn("control: no cgroup2: unix peers are checked by uid (and the namespaces of "
             "services that have their own) only; a service running as root can reach the "
             "control socket");
}

void peer_listeners_started(const struct config *cfg)
{
    for (size_t i = 0; cfg && i < cfg->n_listen; i++)
        if (cfg->listen[i].kind == LISTEN_UNIX)
            warn_uid_only();
}

int peer_check_unix(int fd, char *peer, size_t plen, struct err *err)
{
    struct ucred cr;
    socklen_t sl = sizeof(cr);

    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &sl) < 0) {
        snprintf(peer, plen, "unix ?");
        return err_unable(err, errno, "read the peer's credentials");
    }
    snprintf(peer, plen, "unix uid=%u pid=%d", (unsigned)cr.uid, (int)cr.pid);
    /* Root, or our own user when hearth runs unprivileged (development). */
    if (cr.uid != 0 && cr.uid != geteuid())
        return err_set(err, "uid %u is not root", (unsigned)cr.uid);
    /* Pid 0: the peer is outside hearth's pid namespace (the host of a
     * container, or a test), where no service can be. A peer that has
     * exited keeps its old number, so it is never 0. */
    if (cr.pid == 0)
        return 0;
    warn_uid_only();
    /* Pin the peer: SO_PEERPIDFD names the very process that connected
     * (kernel 6.5+); before that, pidfd_open on its pid, which leaves a
     * narrow window where an exited peer's pid was already reused. */
    int pidfd = -1;
    socklen_t pl = sizeof(pidfd);
    bool from_socket = getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &pl) == 0;
    if (!from_socket) {
        /* Kernels that know the option answer EINVAL or ESRCH for a peer
         * that has exited; falling back to pidfd_open on its pid then
         * could pin another process that reused it. Only a kernel without
         * the option (ENOPROTOOPT) falls back. */
        if (errno == ESRCH || errno == EINVAL)
            return err_set(err, "unable to identify pid %d: it has exited", (int)cr.pid);
        if (errno != ENOPROTOOPT && errno != EOPNOTSUPP)
            return err_unable(err, errno, "pin pid %d", (int)cr.pid);
        pidfd = (int)syscall(SYS_pidfd_open, cr.pid, 0);
        if (pidfd < 0)
            return err_set(err, "unable to identify pid %d: %s", (int)cr.pid,
                           errno == ESRCH ? "it has exited" : strerror(errno));
    }
    if (from_socket) {
        pid_t now = -1;
        if (pidfd_pid(pidfd, &now) < 0 || now != cr.pid) {
            err_set(err, "unable to identify pid %d: %s", (int)cr.pid,
                    now == -1 ? "it has exited" : "its pid changed");
            close(pidfd);
            return -1;
        }
    }
    int rc = peer_classify(cr.pid, pidfd, err);
    close(pidfd);
    return rc == 0 ? 0 : -1;
}

int peer_signal_allowed(pid_t sender, struct err *err)
{
    if (sender <= 0)
        return 1;
    int pidfd = (int)syscall(SYS_pidfd_open, sender, 0);
    if (pidfd < 0) {
        err_set(err, "unable to identify sender pid %d: %s", (int)sender,
                errno == ESRCH ? "it has exited" : strerror(errno));
        return 0;
    }
    int rc = peer_classify(sender, pidfd, err);
    close(pidfd);
    return rc == 0;
}
