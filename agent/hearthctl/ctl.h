/* hearthctl: the host-side client for hearth's control protocol; this
 * header joins its files.
 *
 *   base.c      out of memory, a bad reply, the SIGINT flag, guest text
 *               escaped for the terminal, the usage error and the params
 *               object's makers: what every other file uses
 *   conn.c      connect specs (unix, vsock, hybrid vsock), deadlines, line I/O
 *   call.c      one request and its reply; notifications kept and followed
 *   print.c     human output: tables, escaping of guest text (the one way
 *               a reply's strings reach the terminal), the printers
 *   commands.c  the command table, argument builders, usage (it names
 *               cp's and exec's entry points; they call nothing of it)
 *   cp.c        cp: a file copied in or out over files.* calls
 *   exec.c      exec: a command run in the sandbox, its stdin, output,
 *               terminal and exit status
 *   fleet.c     several targets (fleet.h): --connect lists and globs, calls
 *               to all of them in parallel under one deadline
 *   top.c       top: a row per sandbox, refreshed in place
 *   prom.c      metrics in the Prometheus text format
 *   main.c      options, then build, connect, call, print
 *
 * A new command is a builder and a printer (in a file of its own when they
 * are more than a few lines) declared below, and one row in cmds[] in
 * commands.c. A command with a loop of its own (several calls, a stream)
 * sets .run instead of .print: it is called once connected, with the open
 * connection in t->conn and t->timeout_ms. Every file of this folder is
 * built into hearthctl and only into it (the Makefile takes the folder
 * whole).
 *
 * Exit codes: 0 ok, 1 the server answered with an error, 2 usage,
 * connection, timeout or protocol errors. */
#ifndef HEARTHCTL_CTL_H
#define HEARTHCTL_CTL_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <linux/vm_sockets.h>

#include <cJSON.h>

#include "proto.h"
#include "linebuf.h"
#include "rpc.h"
#include "timebase.h"

#ifndef HEARTH_VERSION
#define HEARTH_VERSION "0.0.0"
#endif

#define EXIT_SERVER 1
#define EXIT_USAGE 2 /* also connection, timeout and protocol errors */

#define DEFAULT_TIMEOUT_MS 10000
#define REQUEST_MAX PROTO_MAX_REQUEST  /* the server's line limit */
#define LINE_MAX_BYTES (16u << 20)    /* replies can be large (logs, config) */
#define HANDSHAKE_MAX 256             /* hybrid vsock "OK <port>" line */
#define NOTES_MAX_BYTES (16u << 20)   /* notifications queued before a reply */
#define CELL_MAX 64                   /* one table cell, bytes incl. NUL */
#define METHOD_MAX 128

/* ---- conn.c ------------------------------------------------------------ */

enum io { IO_OK, IO_EOF, IO_TIMEOUT, IO_ERR, IO_TOOLONG, IO_INTR };

struct conn {
    const char *spec;
    int fd;
    struct linebuf in; /* the same line reader as the server's */
};

/* An absolute deadline timeout_ms from now; -1 (none) for 0. */
int64_t conn_deadline_after(int timeout_ms);
/* Strict decimal parse into [0, max]. */
bool conn_parse_ulong(const char *s, unsigned long long max, unsigned long long *out);
enum io conn_write(struct conn *c, const char *data, size_t len, int64_t deadline);
/* Next line without its "\n" (and "\r"), NUL-terminated, valid until the
 * next call. Lines longer than max bytes are IO_TOOLONG. */
enum io conn_read_line(struct conn *c, int64_t deadline, size_t max, char **line,
                       size_t *linelen);
/* Connects to spec within timeout_ms (0: no limit); returns 0, or an exit
 * code after saying why on stderr. */
int conn_open(struct conn *c, const char *spec, int timeout_ms);
void conn_close(struct conn *c);

/* The connect step alone, for fleet.c's many connections at once. */
struct ctl_addr {
    union {
        struct sockaddr sa;
        struct sockaddr_un un;
        struct sockaddr_vm vm;
    } u;
    socklen_t len;
    bool hvsock;      /* hvsock:UDS:PORT: "CONNECT PORT\n" first */
    uint32_t hv_port;
};
/* A connect spec into *a: 0, or -1 with errno EINVAL (not a spec) or
 * ENAMETOOLONG (a path over sun_path's 107 bytes). */
int conn_addr_parse(const char *spec, struct ctl_addr *a);
/* A non-blocking socket with its connect started: the fd, *pending set
 * while it goes on (wait for POLLOUT, then conn_connect_result). -1 with
 * errno; EAGAIN on a unix socket is a full listen backlog: retry. */
int conn_connect_start(const struct ctl_addr *a, bool *pending);
/* A pending connect's outcome once its socket polls writable: 0, or -1
 * with errno the connect's error. */
int conn_connect_result(int fd);

/* ---- call.c ------------------------------------------------------------ */

struct note {
    struct note *next;
    cJSON *msg;
};

struct ctl;
struct fleet;

/* Builder: turns the command's arguments into params (returns 0, or
 * EXIT_USAGE after printing why). Printer: human output of the result.
 * Note printer: one notification's params while following. */
typedef int (*build_fn)(struct ctl *t, int argc, char **argv, cJSON **params);
typedef int (*print_fn)(struct ctl *t, const cJSON *result);
typedef void (*note_fn)(struct ctl *t, const cJSON *params);

struct cmd {
    const char *name;   /* one or two words: "status", "services restart" */
    const char *method; /* NULL: the builder sets t->method */
    const char *args;   /* synopsis for usage */
    const char *help;
    build_fn build;     /* NULL: no arguments, params {} */
    print_fn print;     /* NULL: result pretty-printed as JSON */
    const char *notify; /* notification method printed when t->follow */
    note_fn on_note;
    bool note_by_name;  /* follow only notifications whose name is t->arg */
    bool hidden;        /* alias not listed in usage */
    /* Commands made of several calls: run after connecting, instead of
     * build + one call + print. */
    int (*run)(struct ctl *t, int argc, char **argv);
    /* Commands over every target at once (top, fleet.h): given the
     * targets and the global options instead of a connection. */
    int (*fleet)(struct fleet *f, int timeout_ms, bool json, int argc, char **argv);
};

struct ctl {
    struct conn conn;
    int timeout_ms;
    bool json;
    double next_id;
    double rtt_ms;        /* of the last call, for ping */
    const struct cmd *cmd;
    const char *method;   /* method actually called (call overrides) */
    bool follow;          /* keep reading notifications after the reply */
    bool quiet;           /* an error reply is the caller's to report */
    const char *arg;      /* builder -> printer: service name, action */
    /* Notifications that arrived before the reply, in order. */
    struct note *notes, **notes_tail;
    size_t notes_bytes;
    unsigned long notes_dropped;
};

/* ---- base.c: what the other files share, calling none of them -------- */

/* Set by SIGINT while following (call.c's handler); blocking waits return
 * IO_INTR. */
extern volatile sig_atomic_t base_got_sigint;

void base_die_oom(void) __attribute__((noreturn));
int base_bad_reply(const struct ctl *t, const char *why);

/* Guest-provided text goes to a host terminal: every string from a reply
 * printed in human form passes through one of these or print_safe_copy, which
 * escape C0 and C1 controls, DEL and broken UTF-8 (termsafe.h). base_put_text
 * keeps what keep names (TERMSAFE_TAB for a log line's body); base_put_safe
 * keeps nothing. */
void base_put_text(FILE *f, const char *s, unsigned keep);
void base_put_safe(FILE *f, const char *s);

/* For the params builders. "hearthctl: CMD: <fmt with what>" and the
 * command's usage; EXIT_USAGE. */
int base_usage_err(const struct ctl *t, const char *fmt, const char *what);
/* A params object and its members; out of memory exits. */
cJSON *base_new_object(void);
void base_add_str(cJSON *o, const char *k, const char *v);
void base_add_num(cJSON *o, const char *k, double v);

/* ---- call.c (the rest) -------------------------------------------------- */

/* Calls t->method with params (consumed). On 0, *reply is the whole reply
 * (caller deletes) and *result points into it. Otherwise the failure was
 * printed and the return value is the exit code. */
int call_method(struct ctl *t, cJSON *params, cJSON **reply, const cJSON **result);
/* call_method in two halves, so that a request can go out before the
 * reply to the one before it is read (cp keeps one chunk in flight). The
 * server answers a connection's requests in the order they came; replies
 * are read back in that order, with the same timeout from each send. */
struct call {
    double id;
    int64_t deadline, t0;
};
int call_send(struct ctl *t, cJSON *params, struct call *k);
int call_recv(struct ctl *t, const struct call *k, cJSON **reply, const cJSON **result);
/* Prints notifications until the server closes or SIGINT; no timeout. */
int call_follow(struct ctl *t);
/* Frees the notifications still queued. */
void call_notes_free(struct ctl *t);

/* ---- print.c ----------------------------------------------------------- */

/* base_put_safe's escaping into a bounded buffer; truncated with "..." if
 * needed. */
void print_safe_copy(char *dst, size_t n, const char *s);
const char *print_jstr(const cJSON *obj, const char *key);
bool print_jnum(const cJSON *obj, const char *key, double *out);
int print_flush_stdout(void);
int print_json(const cJSON *j, bool pretty);

int print_ping(struct ctl *t, const cJSON *res);
int print_version(struct ctl *t, const cJSON *res);
int print_status(struct ctl *t, const cJSON *res);
int print_services(struct ctl *t, const cJSON *res);
int print_state(struct ctl *t, const cJSON *res);
int print_logs(struct ctl *t, const cJSON *res);
int print_events(struct ctl *t, const cJSON *res);
int print_shutdown(struct ctl *t, const cJSON *res);
int print_mounts(struct ctl *t, const cJSON *res);
int print_skills(struct ctl *t, const cJSON *res);
int print_skills_sync(struct ctl *t, const cJSON *res);
int print_forked(struct ctl *t, const cJSON *res);
int print_steps(struct ctl *t, const cJSON *res);
int print_init(struct ctl *t, const cJSON *res);
int print_egress(struct ctl *t, const cJSON *res);
int print_metrics(struct ctl *t, const cJSON *res);
void print_note_event(struct ctl *t, const cJSON *p);
void print_note_log(struct ctl *t, const cJSON *p);

/* ---- commands.c -------------------------------------------------------- */

/* Longest match: "services restart x" picks the two-word entry. */
const struct cmd *commands_find(int argc, char **argv, int *words);
void commands_usage(FILE *f);

/* ---- cp.c -------------------------------------------------------------- */

int cp_build(struct ctl *t, int argc, char **argv, cJSON **params);
int cp_run(struct ctl *t, int argc, char **argv);

/* ---- top.c ------------------------------------------------------------- */

/* hearthctl top over f's targets; argv its own options; timeout_ms the
 * global --timeout, -1 when not given. Exit status: 0 every target
 * answered, 1 one answered with an error, 2 one did not (or usage). */
int top_main(struct fleet *f, int timeout_ms, bool json, int argc, char **argv);

/* ---- exec.c ------------------------------------------------------------ */

/* Its own loop over the connection: returns the command's exit status
 * (128+N for signal N), EXIT_SERVER when it could not start, EXIT_USAGE
 * on usage or connection errors. */
int exec_run(struct ctl *t, int argc, char **argv);

#endif
