/* execproc: processes the host starts inside the sandbox (exec.*). Each
 * runs contained like a service (its own cgroup leaf under the services
 * tree's "@exec" directory, the default capabilities, mount namespace and
 * seccomp filter; with isolation off, hearth's own mount and pid
 * namespaces, as a service with "isolation": false) with a pty or with
 * pipes, and has a bounded output
 * buffer per stream addressed by absolute offsets, so a client that
 * comes back attaches where it left off and is told what it lost.
 *
 * At most one client is attached to a process; output goes to it as
 * exec.output notifications and the end as exec.exit. While its queue is
 * over the control soft limit the process's pipe or pty is not read, so a
 * flood stops the process, never hearth. A process with no client keeps
 * running and its oldest output gives way (counted as dropped). */
#ifndef HEARTH_EXECPROC_H
#define HEARTH_EXECPROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rpc.h"

struct client;
struct cJSON;
struct env_var;

/* The request limits that are not configurable (exec.max_processes and
 * exec.buffer_bytes have their defaults in config.h). */
#define EXEC_MIN_BUFFER_BYTES 4096
#define EXEC_MAX_ARGV 1024              /* argv entries */
#define EXEC_MAX_ARGV_BYTES (128 * 1024) /* argv strings together */
#define EXEC_MAX_ENV 256                /* env entries */
#define EXEC_MAX_ENV_BYTES (128 * 1024)  /* env keys and values together */
#define EXEC_MAX_PATH 256               /* cwd, user, group */
#define EXEC_KEEP_MS (10 * 60 * 1000)   /* an exited process is kept this long */
#define EXEC_MAX_WAITERS 8              /* exec.wait replies pending per process */
#define EXEC_MAX_INPUT (1024 * 1024)    /* bytes of one exec.input */

enum exec_stream { EXEC_STDOUT, EXEC_STDERR };

struct exec_request {
    char **argv;                /* NULL-terminated, borrowed */
    size_t argc;
    struct env_var *env;        /* borrowed */
    size_t n_env;
    const char *cwd, *user, *group; /* NULL: "/", hearth's own */
    bool tty;
    unsigned rows, cols;        /* tty only; 0: 24 x 80 */
    bool stdin_open;
    uint64_t timeout_ms;        /* 0: none */
    bool kill_on_disconnect;
    bool attach;                /* the starting client is attached */
    uint64_t buffer_bytes;      /* 0: exec.buffer_bytes */
    /* isolation false: run as a service with "isolation": false runs
     * (no mount or pid namespace of its own, no masks; its leaf, user,
     * capabilities and seccomp filter as before). */
    bool uncontained;
};

/* Starts a process for client c. The reply is deferred (control_defer)
 * until the command was executed or failed to be; returns 0 then, or -1
 * with err when it was refused before any fork (a limit, a bad user). */
int exec_start(struct client *c, const struct exec_request *r, struct rpc_error *err);
/* Writes bytes to the process's stdin (pty or pipe); close_after ends its
 * input once they are written (a pipe is closed, a pty gets its EOF
 * character). Returns 0 when all is written (reply {}), 1 when the
 * pipe was full and the reply is deferred until the rest is, or -1. */
int exec_input(struct client *c, uint64_t id, const uint8_t *data, size_t len, bool close_after,
               struct rpc_error *err);
int exec_resize(uint64_t id, unsigned rows, unsigned cols, struct rpc_error *err);
int exec_signal(uint64_t id, int sig, struct rpc_error *err);
/* Defers c's reply until the process exits (or timeout_ms passes: the
 * reply then says it still runs). An exited one is answered at once. */
int exec_wait(struct client *c, uint64_t id, uint64_t timeout_ms, struct cJSON **result,
              struct rpc_error *err);
/* Attaches c from the given offsets (stdout or the pty; stderr): the
 * output still held from there is sent, then what follows. */
int exec_attach(struct client *c, uint64_t id, uint64_t off_out, uint64_t off_err,
                struct cJSON **result, struct rpc_error *err);
struct cJSON *exec_list_json(void);

/* Shutdown: every running process is killed (SIGKILL to its leaf), so
 * none outlives hearth and its cgroup tree can go. */
void exec_kill_all(void);

/* The limits in force (exec.max_processes, exec.buffer_bytes of the
 * config, or their defaults). */
void exec_limits(size_t *max_processes, size_t *buffer_bytes);

#endif
