/* execproc's private parts, shared by its files: the process record
 * (execproc.c: the table, start, output, exit, attach), the child's side
 * of a start (exec_child.c) and the operations on a running process
 * (exec_input.c: stdin, resize, signal). */
#ifndef HEARTH_EXECPROC_PRIV_H
#define HEARTH_EXECPROC_PRIV_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <ev.h>

#include "bytebuf.h"
#include "cgroup.h"
#include "execproc.h"
#include "launch.h"
#include "rpc.h"

struct stream {
    int fd;
    ev_io io;
    bool open;        /* fd valid, EOF not seen */
    bool reading;
    uint8_t *ring;
    size_t cap;
    uint64_t end;     /* bytes read from the process so far */
    uint64_t sent;    /* offset the attached client has been sent up to */
    uint64_t hw;      /* highest offset ever sent to a client */
    uint64_t dropped; /* bytes that left the ring before any client got them */
};

struct waiter {
    uint64_t ticket;
    ev_timer timer;
    struct proc *p;
};

struct proc {
    uint64_t id;
    pid_t pid;
    char leaf[CGROUP_PATH_MAX];
    char **argv;          /* copy, for exec.list */
    size_t argc;
    char user[64];
    char cwd[EXEC_MAX_PATH];
    bool tty;
    int master;           /* pty master (also out[0].fd), -1 with pipes */
    int in_fd;            /* stdin pipe's write end, or a dup of master */
    ev_io in_io;
    struct bytebuf in;    /* an exec.input's data not yet written */
    bool in_close;        /* end input once in is written */
    uint64_t in_ticket;
    struct stream out[2];
    int report_fd;        /* child's exec report; EOF means it ran */
    int reaper_fd;        /* its pid namespace's reaper reports the main
                           * process's end here (pidreaper.h), -1 */
    bool ns_offer;        /* its child was asked for the namespace template */
    ev_io report_io;
    uint64_t start_ticket;
    bool started;         /* the start reply has gone */
    char start_error[200];
    struct client *client;
    bool kill_on_disconnect;
    bool uncontained;     /* isolation off (exec_request) */
    char privileged[256]; /* contain_privileged's reasons, "" when none */
    ev_timer timeout, grace, expire, kick;
    bool reaped, finished, timed_out, killed;
    bool start_failed;    /* freed once reaped */
    bool pumping, repump;
    bool exit_pending;    /* attached after the end: exec.exit follows the output */
    int wstatus;
    int64_t started_ms, exited_ms;
    struct waiter waiters[EXEC_MAX_WAITERS];
};

struct child_report {
    int stage;                  /* enum launch_step */
    int err;
    char what[160];
};

/* The process of this id; NULL with err naming the field. */
struct proc *execproc_find(uint64_t id, struct rpc_error *err);

/* In the child between fork and exec: the terminal or pipes, the leaf,
 * containment, identity, cwd, seccomp, exec. A failure is written to
 * errfd as a child_report. Plain syscalls only. */
void __attribute__((noreturn))
exec_child_run(const struct proc *p, const struct exec_request *r, const struct launch_plan *plan,
               int errfd, int in_r, int out_w, int err_w, int slave, bool placed);
/* A pty pair: the master non-blocking, sized; both close-on-exec. */
int exec_open_pty(unsigned rows, unsigned cols, int *master, int *slave);
/* Closes the valid ones of fds and marks them -1. */
void exec_close_fds(int *fds, size_t n);

#endif
