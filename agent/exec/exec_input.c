/* Operations on a running exec process: its stdin (written without
 * blocking, the reply deferred while the program reads slower than the
 * host writes), its terminal size, signals. */
#include "execproc_priv.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "control.h"
#include "hearth.h"
#include "log.h"

static void input_done(struct proc *p, const char *error)
{
    uint64_t t = p->in_ticket;
    p->in_ticket = 0;
    bytebuf_release(&p->in);
    ev_io_stop(H.loop, &p->in_io);
    if (!t)
        return;
    struct rpc_error e = {0};
    if (error)
        rpc_error_set(&e, RPC_ERR_FAILED, "%s", error);
    control_complete(t, error ? NULL : rpc_empty_result(), &e);
}

static void end_input(struct proc *p)
{
    if (p->in_fd < 0)
        return;
    if (p->tty) {
        /* A pty has no half-close: the line discipline's EOF character
         * ends a read for the program, as a terminal's Ctrl-D does. */
        struct termios t;
        char eof = 4;
        if (tcgetattr(p->in_fd, &t) == 0 && t.c_cc[VEOF])
            eof = (char)t.c_cc[VEOF];
        if (write(p->in_fd, &eof, 1) < 0)
            log_debug("exec %llu: EOF not written: %s", (unsigned long long)p->id,
                      strerror(errno));
        return;
    }
    ev_io_stop(H.loop, &p->in_io);
    close(p->in_fd);
    p->in_fd = -1;
}

static void in_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    struct proc *p = w->data;
    char msg[160];
    int r = bytebuf_write(p->in_fd, &p->in);
    if (r == 0)
        return;
    if (r < 0) {
        snprintf(msg, sizeof(msg), "unable to write its input: %s", strerror(errno));
        input_done(p, msg);
        return;
    }
    if (p->in_close)
        end_input(p);
    input_done(p, NULL);
}

int exec_input(struct client *c, uint64_t id, const uint8_t *data, size_t len, bool close_after,
               struct rpc_error *err)
{
    struct proc *p = execproc_find(id, err);
    if (!p)
        return -1;
    if (p->in_fd < 0 || p->reaped) {
        rpc_error_set(err, RPC_ERR_STATE, "id: process %llu has no open stdin",
                      (unsigned long long)id);
        return -1;
    }
    if (p->in_ticket) {
        rpc_error_set(err, RPC_ERR_BUSY, "id: an earlier input to process %llu is still "
                      "being written", (unsigned long long)id);
        return -1;
    }
    if (len) {
        if (bytebuf_resize(&p->in, len) < 0) {
            rpc_error_set(err, RPC_INTERNAL_ERROR, "out of memory");
            return -1;
        }
        bytebuf_put(&p->in, data, len);
        int r = bytebuf_write(p->in_fd, &p->in);
        if (r < 0) {
            rpc_error_set(err, RPC_ERR_FAILED, "unable to write its input: %s", strerror(errno));
            input_done(p, NULL);
            return -1;
        }
        if (r == 0) {
            /* The program reads slower than the host writes: the reply
             * waits, and so does the client's next request. */
            p->in_close = close_after;
            ev_io_init(&p->in_io, in_cb, p->in_fd, EV_WRITE);
            p->in_io.data = p;
            ev_io_start(H.loop, &p->in_io);
            p->in_ticket = control_defer(c);
            return 1;
        }
        bytebuf_release(&p->in);
    }
    if (close_after)
        end_input(p);
    return 0;
}

int exec_resize(uint64_t id, unsigned rows, unsigned cols, struct rpc_error *err)
{
    struct proc *p = execproc_find(id, err);
    if (!p)
        return -1;
    int fd = p->master >= 0 ? p->master : p->in_fd;
    if (!p->tty || fd < 0) {
        rpc_error_set(err, RPC_ERR_STATE, "id: process %llu has no tty",
                      (unsigned long long)id);
        return -1;
    }
    struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
    if (ioctl(fd, TIOCSWINSZ, &ws) < 0) {
        rpc_error_set(err, RPC_ERR_FAILED, "unable to resize: %s", strerror(errno));
        return -1;
    }
    return 0;
}

int exec_signal(uint64_t id, int sig, struct rpc_error *err)
{
    struct proc *p = execproc_find(id, err);
    if (!p)
        return -1;
    if (p->reaped || p->pid <= 0) {
        rpc_error_set(err, RPC_ERR_STATE, "id: process %llu has exited",
                      (unsigned long long)id);
        return -1;
    }
    /* It leads its own process group (setsid): the signal reaches what it
     * started, as a terminal's would. */
    if (kill(-p->pid, sig) < 0 && kill(p->pid, sig) < 0) {
        rpc_error_set(err, RPC_ERR_FAILED, "unable to signal: %s", strerror(errno));
        return -1;
    }
    return 0;
}
