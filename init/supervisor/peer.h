/* peer: who is on the other end of a unix control connection, or sent a
 * signal to PID 1. A service is a guest of hearth, never its peer: a
 * process is refused when it runs in a service's cgroup leaf, or in the
 * mount or cgroup namespace of a running service (when that differs from
 * hearth's own), and also when it cannot be identified at all: the checks
 * fail closed. */
#ifndef HEARTH_PEER_H
#define HEARTH_PEER_H

#include <stddef.h>
#include <sys/types.h>

#include "err.h"

/* Verdict on the local process pid (a pid of hearth's namespace). With
 * pidfd >= 0 (a pidfd of that process), the process is checked to be
 * still alive after its /proc entries were read, so a recycled pid cannot
 * pass. Returns 0 when it is not a service, 1 when it is one, -1 when it
 * could not be identified; why says which service or what failed. */
int peer_classify(pid_t pid, int pidfd, struct err *err);

/* The unix listener's check of an accepted connection: uid 0 (or
 * hearth's own), and, for a peer inside hearth's pid namespace, pinned by
 * a pidfd (SO_PEERPIDFD, else pidfd_open) and not a service. Fills peer
 * ("unix uid=0 pid=12"). Returns 0 to accept, -1 with why to refuse. */
int peer_check_unix(int fd, char *peer, size_t plen, struct err *err);

/* After the listeners are set up: without cgroup2 a unix listener says,
 * once and as a warning, that its peers are checked by uid only. */
struct config;
void peer_listeners_started(const struct config *cfg);

/* Whether a signal hearth acts on (termination) should be obeyed: the
 * kernel's and those from outside hearth's pid namespace (sender pid 0)
 * are; one from a service, or from a sender that cannot be identified
 * any more, is not (why says so). Returns 1 to obey, 0 to ignore. */
int peer_signal_allowed(pid_t sender, struct err *err);

#endif
