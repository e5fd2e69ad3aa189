/* notify: systemd's readiness protocol (sd_notify(3)) on hearth's side. A
 * service with ready.notify, health.watchdog_ms or activity.lease gets a
 * datagram socket of its own, named in its NOTIFY_SOCKET; this module owns
 * that socket (opening it, receiving one datagram with its sender's
 * credentials) and the parser of what arrives ("READY=1\nSTATUS=...\n"). What a message
 * does to the service, and whether its sender belongs to the service, is
 * svc_notify.c's business. */
#ifndef HEARTH_NOTIFY_H
#define HEARTH_NOTIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"

/* The longest datagram taken; a longer one is dropped whole. */
#define NOTIFY_DATAGRAM_MAX 4096
/* STATUS= text kept, in bytes with the terminator (cut on a character
 * boundary). */
#define NOTIFY_STATUS_MAX 256
/* sun_path: "@hearth/notify/<16 hex>/<service name>". */
#define NOTIFY_ADDR_MAX 108

/* What one datagram said. Lines are KEY=VALUE separated by '\n'; a line
 * that is not, a value that is not understood, or an unknown key is
 * ignored and counted, never an error. */
struct notify_msg {
    bool ready;            /* READY=1 */
    bool stopping;         /* STOPPING=1 */
    bool reloading;        /* RELOADING=1 */
    bool watchdog;         /* WATCHDOG=1 */
    bool watchdog_trigger; /* WATCHDOG=trigger */
    bool has_status;       /* STATUS= (the last one of the datagram) */
    char status[NOTIFY_STATUS_MAX]; /* valid UTF-8, controls as '?' */
    bool has_extend;       /* EXTEND_TIMEOUT_USEC= */
    uint64_t extend_usec;
    /* hearth's own keys (activity.h): a lease, "busy for N seconds,
     * because R"; HEARTH_BUSY=0 releases it. systemd ignores them. */
    bool has_busy;         /* HEARTH_BUSY= */
    uint64_t busy_sec;
    bool has_busy_reason;  /* HEARTH_BUSY_REASON= (the last one) */
    char busy_reason[NOTIFY_STATUS_MAX]; /* as status: valid UTF-8, controls as '?' */
    unsigned understood;   /* assignments acted on */
    unsigned ignored;      /* malformed lines and values */
    unsigned unknown;      /* well-formed assignments of other keys (MAINPID=, ...) */
};

/* Parses one datagram. Returns 0, or -1 when it is refused whole (empty,
 * longer than NOTIFY_DATAGRAM_MAX, or holding a NUL byte, which no
 * sd_notify message carries); m is filled either way. */
int notify_parse(const char *buf, size_t len, struct notify_msg *m);

/* Opens a service's socket: an abstract unix datagram socket (see
 * notify.c for why abstract), close-on-exec, non-blocking, with
 * SO_PASSCRED, bound to a name unique to this hearth. addr gets the name
 * as NOTIFY_SOCKET spells it ("@hearth/notify/..."). Returns the fd, or
 * -1 with err. */
int notify_open(const char *service, char *addr, size_t addrlen, struct err *err);

struct notify_sender {
    bool creds;   /* SCM_CREDENTIALS came with it */
    pid_t pid;    /* in hearth's pid namespace; 0 from outside it */
    uid_t uid;
};

/* Receives one datagram into buf (len bytes; a longer one sets *truncated
 * and its excess is lost). Any descriptors passed with it are closed at
 * once. Returns its length (0 for an empty one), or -1 with errno (EAGAIN
 * when none is waiting). */
ssize_t notify_recv(int fd, char *buf, size_t len, struct notify_sender *from, bool *truncated);

/* The session (setsid leader) pid runs in, from /proc/PID/stat; -1 when
 * unreadable. Services lead their own session: without cgroups this is
 * how a descendant is told from a stranger. */
pid_t notify_pid_session(pid_t pid);

#endif
