/* control listeners: the transports the host comes in by. Unix and vsock
 * sockets accept clients after a peer check (and refuse past
 * CONTROL_MAX_CLIENTS unless an idle one can go); a virtio-serial port is
 * one stream, parked while no host is connected. A listener that cannot
 * open yet is retried with backoff. */
#include "control_priv.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <termios.h>
#include <unistd.h>

#include <linux/vm_sockets.h>

#include <cJSON.h>

#include "err.h"
#include "hearth.h"
#include "log.h"
#include "peer.h"

#define RETRY_MAX_MS 60000

static struct listener listeners[CONFIG_MAX_LISTEN];
static size_t nlisteners;

static void listener_open(struct listener *l);

/* Returns 0 when the peer may talk to us; fills peer and why otherwise. */
static int check_peer(struct listener *l, int fd, char *peer, size_t plen, struct err *err)
{
    if (l->spec.kind == LISTEN_UNIX)
        return peer_check_unix(fd, peer, plen, err);
    if (l->spec.kind == LISTEN_VSOCK) {
        struct sockaddr_vm vm;
        socklen_t sl = sizeof(vm);
        memset(&vm, 0, sizeof(vm));
        if (getpeername(fd, (struct sockaddr *)&vm, &sl) < 0) {
            snprintf(peer, plen, "vsock ?");
            return err_unable(err, errno, "read the peer address");
        }
        snprintf(peer, plen, "vsock cid=%u port=%u", vm.svm_cid, vm.svm_port);
        for (size_t i = 0; i < control_cfg->n_allowed_cids; i++)
            if (control_cfg->allowed_cids[i] == vm.svm_cid)
                return 0;
        return err_set(err, "cid %u is not in control.allowed_cids", vm.svm_cid);
    }
    snprintf(peer, plen, "%s", l->name);
    return 0;
}

static void refuse(int fd, int code, const char *msg)
{
    size_t n;
    char *e = rpc_format_error(NULL, code, msg, NULL, &n);
    if (e) {
        /* Best effort on a fresh non-blocking socket: it has room. */
        ssize_t w = write(fd, e, n);
        (void)w;
        free(e);
    }
    close(fd);
}

static void accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    struct listener *l = w->data;
    char peer[96];
    struct err why;

    /* Bounded per wake-up so one listener cannot starve the loop. */
    for (int i = 0; i < 64; i++) {
        int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EAGAIN)
                return;
            log_warn("control %s: unable to accept a client: %s", l->name, strerror(errno));
            if (errno == EMFILE || errno == ENFILE || errno == ENOMEM || errno == ENOBUFS) {
                /* Level-triggered: pause rather than spin until fds free up. */
                ev_io_stop(loop, &l->io);
                ev_timer_set(&l->retry, 0.1, 0.);
                ev_timer_start(loop, &l->retry);
            }
            return;
        }
        if (check_peer(l, fd, peer, sizeof(peer), &why) < 0) {
            log_warn("refused control client on %s (%s): %s", l->name, peer, why.msg);
            refuse(fd, RPC_INVALID_REQUEST, "peer refused");
            continue;
        }
        if (control_nclients >= CONTROL_MAX_CLIENTS && !clients_evict_idle()) {
            log_warn("refused control client on %s (%s): %d clients already", l->name, peer,
                     CONTROL_MAX_CLIENTS);
            refuse(fd, RPC_ERR_BUSY, "too many clients");
            continue;
        }
        if (!client_new(fd, l, peer)) {
            log_warn("control %s: unable to accept a client: out of memory", l->name);
            close(fd);
            continue;
        }
        control_nclients++;
        l->sessions++;
        log_debug("control client %s connected on %s", peer, l->name);
    }
}

static void retry_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct listener *l = w->data;
    if (l->fd >= 0 && l->spec.kind != LISTEN_SERIAL) {
        /* A paused accept (fd exhaustion): resume. */
        ev_io_start(loop, &l->io);
        return;
    }
    listener_open(l);
}

void listener_retry(struct listener *l, int64_t max_ms)
{
    ev_timer_set(&l->retry, (double)l->retry_ms / 1000.0, 0.);
    ev_timer_start(H.loop, &l->retry);
    l->retry_ms *= 2;
    if (l->retry_ms > max_ms)
        l->retry_ms = max_ms;
}

static int mkdir_parents(const char *path)
{
    char buf[sizeof(((struct sockaddr_un *)0)->sun_path)];
    snprintf(buf, sizeof(buf), "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(buf, 0755) < 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return 0;
}

static int open_unix(struct listener *l)
{
    struct sockaddr_un sa;
    struct stat st;
    int fd;

    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", l->spec.path);
    if (mkdir_parents(l->spec.path) < 0) {
        snprintf(l->error, sizeof(l->error), "unable to create parent directory: %s",
                 strerror(errno));
        return -1;
    }
    if (lstat(l->spec.path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            snprintf(l->error, sizeof(l->error), "unable to use %s: it exists and is not a socket",
                     l->spec.path);
            errno = EEXIST;
            return -1;
        }
        unlink(l->spec.path); /* a stale socket from an earlier run */
    }
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(l->error, sizeof(l->error), "unable to create the socket: %s", strerror(errno));
        return -1;
    }
    /* The file is created 0600 by bind itself (umask 0177): no window
     * where others could connect, and no chmod by name afterwards that a
     * link swapped in after bind would redirect onto another file. */
    mode_t old = umask(0177);
    int rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    umask(old);
    if (rc < 0 || listen(fd, 256) < 0) {
        snprintf(l->error, sizeof(l->error), "unable to listen on %s: %s", l->spec.path,
                 strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

static int open_vsock(struct listener *l)
{
    struct sockaddr_vm sa;
    int fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    if (fd < 0) {
        snprintf(l->error, sizeof(l->error), "unable to create the socket: %s", strerror(errno));
        return -1;
    }
    memset(&sa, 0, sizeof(sa));
    sa.svm_family = AF_VSOCK;
    sa.svm_cid = VMADDR_CID_ANY;
    sa.svm_port = l->spec.port;
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 256) < 0) {
        snprintf(l->error, sizeof(l->error), "unable to listen on vsock port %u: %s", l->spec.port,
                 strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* "serial:NAME" without a slash names a virtio-serial port: its device is
 * found through /sys/class/virtio-ports/<dev>/name (no udev links). */
static int resolve_serial(const char *spec, char *out, size_t outlen)
{
    if (strchr(spec, '/')) {
        snprintf(out, outlen, "%s", spec);
        return 0;
    }
    DIR *d = opendir("/sys/class/virtio-ports");
    struct dirent *e;
    if (!d)
        return -1;
    while ((e = readdir(d))) {
        char path[300], name[128];
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "/sys/class/virtio-ports/%s/name", e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t n = read(fd, name, sizeof(name) - 1);
        close(fd);
        if (n <= 0)
            continue;
        name[n] = 0;
        name[strcspn(name, "\n")] = 0;
        if (strcmp(name, spec) == 0) {
            snprintf(out, outlen, "/dev/%s", e->d_name);
            closedir(d);
            return 0;
        }
    }
    closedir(d);
    errno = ENOENT;
    return -1;
}

static int open_serial(struct listener *l)
{
    char dev[256];
    int fd;

    if (resolve_serial(l->spec.path, dev, sizeof(dev)) < 0) {
        snprintf(l->error, sizeof(l->error), "unable to find a virtio-serial port named %s",
                 l->spec.path);
        return -1;
    }
    fd = open(dev, O_RDWR | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(l->error, sizeof(l->error), "unable to open %s: %s", dev, strerror(errno));
        return -1;
    }
    if (isatty(fd)) {
        /* A UART: raw bytes, no echo, no line discipline. */
        struct termios t;
        if (tcgetattr(fd, &t) == 0) {
            cfmakeraw(&t);
            tcsetattr(fd, TCSANOW, &t);
        }
    }
    return fd;
}

/* A virtio-serial port reads EOF and polls POLLHUP for as long as no host
 * is connected, so it cannot simply be watched. The kernel's virtio
 * console sends SIGIO to the port's owner when the host side opens: a
 * parked port keeps its fd, arms O_ASYNC and waits for that signal
 * (control_serial_kick) instead of being reopened on a timer, so an
 * unattended sandbox does not wake up. */
static void serial_async(struct listener *l, bool on)
{
    int fl = fcntl(l->fd, F_GETFL);
    if (fl < 0 || fcntl(l->fd, F_SETFL, on ? fl | O_ASYNC : fl & ~O_ASYNC) < 0)
        log_warn("control %s: unable to %s O_ASYNC: %s", l->name, on ? "set" : "clear",
                 strerror(errno));
}

static void serial_unpark(struct listener *l)
{
    l->parked = false;
    serial_async(l, false);
    l->serial = client_new(l->fd, l, l->name);
    l->sessions++;
    if (!l->serial) {
        close(l->fd);
        l->fd = -1;
        listener_retry(l, SERIAL_RETRY_MAX_MS);
        return;
    }
    log_debug("control %s: host connected", l->name);
}

void listener_serial_park(struct listener *l)
{
    l->parked = true;
    serial_async(l, true);
    /* The host may have come back between the EOF and O_ASYNC. */
    struct pollfd p = {.fd = l->fd, .events = POLLIN};
    if (poll(&p, 1, 0) == 1 && !(p.revents & POLLHUP))
        serial_unpark(l);
}

void control_serial_kick(void)
{
    for (size_t i = 0; i < nlisteners; i++) {
        struct listener *l = &listeners[i];
        if (l->spec.kind != LISTEN_SERIAL || !l->parked || l->fd < 0 || control_stopping)
            continue;
        struct pollfd p = {.fd = l->fd, .events = POLLIN};
        if (poll(&p, 1, 0) == 1 && !(p.revents & POLLHUP))
            serial_unpark(l);
    }
}

static void listener_open(struct listener *l)
{
    int fd = -1;

    switch (l->spec.kind) {
    case LISTEN_UNIX: fd = open_unix(l); break;
    case LISTEN_VSOCK: fd = open_vsock(l); break;
    case LISTEN_SERIAL: fd = open_serial(l); break;
    }
    if (fd < 0) {
        if (l->retry_ms == RETRY_MIN_MS)
            log_warn("control %s: %s; retrying", l->name, l->error);
        listener_retry(l, l->spec.kind == LISTEN_SERIAL ? SERIAL_RETRY_MAX_MS : RETRY_MAX_MS);
        return;
    }
    l->fd = fd;
    l->error[0] = 0;
    if (l->spec.kind == LISTEN_SERIAL) {
        /* SIGIO to hearth once O_ASYNC is set (only while parked). A UART
         * or a plain file cannot signal: it keeps the reopen timer. */
        l->sigio = !isatty(fd) && fcntl(fd, F_SETOWN, getpid()) == 0;
        l->parked = false;
        l->serial = client_new(fd, l, l->name);
        l->sessions++;
        if (!l->serial) {
            close(fd);
            l->fd = -1;
            listener_retry(l, SERIAL_RETRY_MAX_MS);
            return;
        }
        log_debug("control %s open", l->name);
        return;
    }
    l->retry_ms = RETRY_MIN_MS;
    ev_io_init(&l->io, accept_cb, fd, EV_READ);
    l->io.data = l;
    ev_io_start(H.loop, &l->io);
    log_info("control listening on %s", l->name);
}

int control_start(const struct config *cfg)
{
    int open_now = 0;

    control_cfg = cfg;
    clients_set_hooks(&(struct client_hooks){
        .lines = dispatch_lines, .retry = listener_retry, .serial_park = listener_serial_park});
    clients_start();
    nlisteners = cfg->n_listen;
    for (size_t i = 0; i < nlisteners; i++) {
        struct listener *l = &listeners[i];
        memset(l, 0, sizeof(*l));
        l->spec = cfg->listen[i];
        l->fd = -1;
        l->retry_ms = RETRY_MIN_MS;
        switch (l->spec.kind) {
        case LISTEN_UNIX: snprintf(l->name, sizeof(l->name), "unix:%s", l->spec.path); break;
        case LISTEN_VSOCK: snprintf(l->name, sizeof(l->name), "vsock:%u", l->spec.port); break;
        case LISTEN_SERIAL: snprintf(l->name, sizeof(l->name), "serial:%s", l->spec.path); break;
        }
        ev_init(&l->retry, retry_cb);
        l->retry.data = l;
        listener_open(l);
        if (l->fd >= 0)
            open_now++;
    }
    return open_now;
}

void control_stop(void)
{
    control_stopping = true;
    clients_stop();
    for (size_t i = 0; i < nlisteners; i++) {
        struct listener *l = &listeners[i];
        ev_timer_stop(H.loop, &l->retry);
        if (l->spec.kind != LISTEN_SERIAL && l->fd >= 0) {
            ev_io_stop(H.loop, &l->io);
            close(l->fd);
            if (l->spec.kind == LISTEN_UNIX)
                unlink(l->spec.path);
        } else if (l->spec.kind == LISTEN_SERIAL && l->parked && l->fd >= 0) {
            close(l->fd);
            l->parked = false;
        }
        l->fd = -1;
    }
}

cJSON *control_listeners_json(void)
{
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; arr && i < nlisteners; i++) {
        const struct listener *l = &listeners[i];
        cJSON *o = cJSON_CreateObject();
        if (!o)
            break;
        cJSON_AddStringToObject(o, "listen", l->name);
        cJSON_AddStringToObject(o, "state", l->fd < 0 ? "retrying" : l->parked ? "waiting" : "open");
        cJSON_AddNumberToObject(o, "sessions", (double)l->sessions);
        if (l->error[0] && l->fd < 0)
            cJSON_AddStringToObject(o, "error", l->error);
        cJSON_AddItemToArray(arr, o);
    }
    return arr;
}