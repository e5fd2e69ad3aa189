/* hearthctl exec: runs a command in the sandbox like `docker exec`.
 *
 * One exec.start (attached, killed when this client goes), then a poll
 * loop over the connection, stdin and a self-pipe for signals: output
 * notifications are written to stdout / stderr, stdin goes up as
 * exec.input requests (a few in flight at most, so a fast producer waits
 * for the command), SIGWINCH becomes exec.resize, and exec.exit ends it
 * with the command's status (128+N for a signal). Writes to the
 * connection never block: hearth stops reading requests while a client's
 * output waits, so a client blocked in write would never read again.
 *
 * With -t and a terminal on stdin, the terminal is put in raw mode
 * (Ctrl-C, Ctrl-D and the rest go to the command as bytes) and restored
 * on every way out. */
#include "ctl.h"

#include <cJSON.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "base64.h"
#include "bytebuf.h"

#define IN_CHUNK (192 * 1024)         /* stdin bytes per exec.input */
#define IN_FLIGHT_MAX 4               /* exec.input requests without reply */
#define OUT_HIGH (2u << 20)           /* stop reading stdin above this queue */
#define LINE_MAX_LEN (4u << 20)       /* longest line accepted from hearth */

static struct termios saved_tio;
static bool tio_saved;
static int sig_pipe[2] = {-1, -1};

static void restore_tty(void)
{
    if (tio_saved) {
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_tio);
        tio_saved = false;
    }
}

static void on_signal(int sig)
{
    unsigned char b = (unsigned char)sig;
    int saved = errno;
    if (sig_pipe[1] >= 0 && write(sig_pipe[1], &b, 1) < 0) {
        /* full: a signal is already waiting to be handled */
    }
    errno = saved;
}

struct xconn {
    int fd;
    char *in;           /* bytes read, not yet a whole line */
    size_t in_len, in_cap;
    struct bytebuf out; /* requests not yet written */
};

static int queue(struct xconn *x, const char *s, size_t n)
{
    struct bytebuf *b = &x->out;
    if (b->off && b->off == b->len)
        b->off = b->len = 0;
    if (bytebuf_room(b) < n + 1) {
        bytebuf_compact(b);
        size_t cap = bytebuf_grown_cap(b->cap, 65536, b->len + n + 1, SIZE_MAX);
        if (cap > b->cap && bytebuf_resize(b, cap) < 0)
            return -1;
    }
    bytebuf_put(b, s, n);
    bytebuf_put(b, "\n", 1);
    return 0;
}

static unsigned long next_id = 1;

/* Queues a request; params is consumed. Returns its id, 0 on failure. */
static unsigned long request(struct xconn *x, const char *method, cJSON *params)
{
    cJSON *req = cJSON_CreateObject();
    unsigned long id = next_id++;
    if (!req) {
        cJSON_Delete(params);
        return 0;
    }
    cJSON_AddStringToObject(req, "jsonrpc", "2.0");
    cJSON_AddNumberToObject(req, "id", (double)id);
    cJSON_AddStringToObject(req, "method", method);
    cJSON_AddItemToObject(req, "params", params);
    char *s = cJSON_PrintUnformatted(req);
    cJSON_Delete(req);
    if (!s)
        return 0;
    int rc = queue(x, s, strlen(s));
    cJSON_free(s);
    return rc == 0 ? id : 0;
}

static int write_all(int fd, const uint8_t *d, size_t n)
{
    while (n) {
        ssize_t w = write(fd, d, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN) {
                struct pollfd p = {.fd = fd, .events = POLLOUT};
                poll(&p, 1, -1);
                continue;
            }
            return -1;
        }
        d += w;
        n -= (size_t)w;
    }
    return 0;
}

static bool window_size(unsigned *rows, unsigned *cols)
{
    struct winsize ws;
    if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) < 0 || !ws.ws_row || !ws.ws_col)
        return false;
    *rows = ws.ws_row;
    *cols = ws.ws_col;
    return true;
}

/* Queues exec.resize with the terminal's size now; true when sent. */
static bool send_resize(struct xconn *x, double exec_id)
{
    unsigned rows, cols;
    if (!window_size(&rows, &cols))
        return false;
    cJSON *p = cJSON_CreateObject();
    cJSON_AddNumberToObject(p, "id", exec_id);
    cJSON_AddNumberToObject(p, "rows", rows);
    cJSON_AddNumberToObject(p, "cols", cols);
    return request(x, "exec.resize", p) != 0;
}

static void x_usage(void)
{
    fputs("usage: hearthctl exec [-i] [-t] [--user U] [--cwd D] [-e K=V]... [--no-isolation]\n"
          "                      [--] CMD [ARG]...\n"
          "  -i          pass stdin to the command\n"
          "  -t          give it a terminal (raw mode here; window size followed)\n"
          "  --user U    run as user U (and --group G)\n"
          "  --cwd D     working directory (absolute)\n"
          "  -e K=V      set an environment variable\n"
          "  --no-isolation  hearth's own mount and pid namespaces, as a service with\n"
          "              \"isolation\": false (its cgroup, user, capabilities and\n"
          "              seccomp filter stay)\n"
          "exit status: the command's (128+N when killed by signal N); 1 when it could\n"
          "not start, 2 usage, connection or protocol errors.\n",
          stderr);
}

/* Parses the arguments into exec.start params; NULL after printing why. */
static cJSON *parse_args(int argc, char **argv, bool *interactive, bool *tty)
{
    cJSON *p = cJSON_CreateObject(), *env = cJSON_CreateObject();
    int i = 0;
    if (!p || !env)
        goto bad;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (a[0] != '-' || a[1] == 0)
            break;
        if (strcmp(a, "--user") == 0 || strcmp(a, "-u") == 0 || strcmp(a, "--cwd") == 0 ||
            strcmp(a, "-w") == 0 || strcmp(a, "--group") == 0 || strcmp(a, "-e") == 0 ||
            strcmp(a, "--env") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "hearthctl exec: %s needs a value\n", a);
                goto bad;
            }
            const char *v = argv[++i];
            if (a[1] == 'e' || strcmp(a, "--env") == 0) {
                const char *eq = strchr(v, '=');
                if (!eq || eq == v) {
                    fprintf(stderr, "hearthctl exec: -e '%s': expected KEY=VALUE\n", v);
                    goto bad;
                }
                char key[256];
                snprintf(key, sizeof(key), "%.*s", (int)(eq - v), v);
                cJSON_DeleteItemFromObjectCaseSensitive(env, key);
                cJSON_AddStringToObject(env, key, eq + 1);
            } else {
                const char *k = strcmp(a, "--cwd") == 0 || strcmp(a, "-w") == 0 ? "cwd"
                                : strcmp(a, "--group") == 0                      ? "group"
                                                                                 : "user";
                cJSON_DeleteItemFromObjectCaseSensitive(p, k);
                cJSON_AddStringToObject(p, k, v);
            }
            continue;
        }
        /* Short flags, combined as in -it. */
        if (a[1] != '-') {
            for (const char *f = a + 1; *f; f++) {
                if (*f == 'i')
                    *interactive = true;
                else if (*f == 't')
                    *tty = true;
                else {
                    fprintf(stderr, "hearthctl exec: unknown option '-%c'\n", *f);
                    goto bad;
                }
            }
            continue;
        }
        if (strcmp(a, "--interactive") == 0)
            *interactive = true;
        else if (strcmp(a, "--tty") == 0)
            *tty = true;
        else if (strcmp(a, "--no-isolation") == 0) {
            cJSON_DeleteItemFromObjectCaseSensitive(p, "isolation");
            cJSON_AddBoolToObject(p, "isolation", false);
        }
        else {
            fprintf(stderr, "hearthctl exec: unknown option '%s'\n", a);
            goto bad;
        }
    }
    if (i >= argc) {
        fputs("hearthctl exec: no command given\n", stderr);
        goto bad;
    }
    cJSON *av = cJSON_AddArrayToObject(p, "argv");
    for (; av && i < argc; i++)
        cJSON_AddItemToArray(av, cJSON_CreateString(argv[i]));
    if (*tty) {
        const char *term = getenv("TERM");
        if (!cJSON_GetObjectItemCaseSensitive(env, "TERM"))
            cJSON_AddStringToObject(env, "TERM", term && *term ? term : "xterm");
        unsigned rows, cols;
        cJSON_AddBoolToObject(p, "tty", true);
        if (window_size(&rows, &cols)) {
            cJSON_AddNumberToObject(p, "rows", rows);
            cJSON_AddNumberToObject(p, "cols", cols);
        }
    }
    if (cJSON_GetArraySize(env) > 0)
        cJSON_AddItemToObject(p, "env", env);
    else
        cJSON_Delete(env);
    env = NULL;
    cJSON_AddBoolToObject(p, "stdin", *interactive);
    /* Like an ssh session: the command does not outlive hearthctl. */
    cJSON_AddBoolToObject(p, "kill_on_disconnect", true);
    return p;
bad:
    cJSON_Delete(env);
    cJSON_Delete(p);
    x_usage();
    return NULL;
}

/* Status of the command from an exec.exit or exec.wait result. */
static int exit_status(const cJSON *r)
{
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(r, "exit_code");
    const cJSON *sig = cJSON_GetObjectItemCaseSensitive(r, "signal");
    if (cJSON_IsNumber(code))
        return code->valueint & 255;
    if (cJSON_IsNumber(sig))
        return 128 + sig->valueint;
    return EXIT_SERVER;
}

/* One line from hearth. Returns -1 to go on, else the final status. */
static int handle_line(struct xconn *x, const char *line, size_t len, unsigned long start_id,
                       double *exec_id, int *in_flight)
{
    cJSON *m = cJSON_ParseWithLength(line, len);
    int rc = -1;
    if (!m) {
        fputs("hearthctl exec: bad reply: not JSON\n", stderr);
        return EXIT_USAGE;
    }
    const cJSON *method = cJSON_GetObjectItemCaseSensitive(m, "method");
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(m, "params");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(m, "id");
    const cJSON *error = cJSON_GetObjectItemCaseSensitive(m, "error");
    if (cJSON_IsString(method)) {
        const cJSON *pid = cJSON_GetObjectItemCaseSensitive(params, "id");
        if (!cJSON_IsNumber(pid) || pid->valuedouble != *exec_id)
            goto out;
        if (strcmp(method->valuestring, "exec.output") == 0) {
            const cJSON *data = cJSON_GetObjectItemCaseSensitive(params, "data");
            const cJSON *st = cJSON_GetObjectItemCaseSensitive(params, "stream");
            if (!cJSON_IsString(data) || !cJSON_IsString(st))
                goto out;
            size_t dl = strlen(data->valuestring);
            uint8_t *buf = malloc(dl / 4 * 3 + 3);
            long n = buf ? base64_decode(data->valuestring, dl, buf, dl / 4 * 3 + 3, NULL) : -1;
            if (n > 0)
                write_all(strcmp(st->valuestring, "stderr") == 0 ? STDERR_FILENO : STDOUT_FILENO,
                          buf, (size_t)n);
            free(buf);
        } else if (strcmp(method->valuestring, "exec.exit") == 0) {
            rc = exit_status(params);
        }
        goto out;
    }
    if (!cJSON_IsNumber(id))
        goto out;
    if ((unsigned long)id->valuedouble == start_id) {
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(m, "result");
        const cJSON *eid = cJSON_GetObjectItemCaseSensitive(r, "id");
        if (cJSON_IsObject(error)) {
            const cJSON *msg = cJSON_GetObjectItemCaseSensitive(error, "message");
            restore_tty();
            fputs("hearthctl exec: ", stderr);
            base_put_safe(stderr, cJSON_IsString(msg) ? msg->valuestring : "error");
            fputc('\n', stderr);
            rc = EXIT_SERVER;
        } else if (cJSON_IsNumber(eid)) {
            *exec_id = eid->valuedouble;
        } else {
            fputs("hearthctl exec: bad reply to exec.start\n", stderr);
            rc = EXIT_USAGE;
        }
        goto out;
    }
    /* exec.input / exec.resize replies: an input refused because the
     * command has gone is no news; its exit follows. */
    if (*in_flight > 0)
        (*in_flight)--;
out:
    cJSON_Delete(m);
    (void)x;
    return rc;
}

/* argv holds what follows "exec"; the connection is t->conn, and
 * t->timeout_ms bounds the wait for the start only. */
int exec_run(struct ctl *t, int argc, char **argv)
{
    int fd = t->conn.fd, timeout_ms = t->timeout_ms;
    bool interactive = false, tty = false, stdin_open;
    double exec_id = -1;
    int in_flight = 0, rc = -1;
    /* A resize while exec.start is unanswered: the size went out with
     * the start already read, so it is sent once the command exists. */
    bool resize_pending = false;
    struct xconn x = {.fd = fd};
    uint8_t *inbuf = NULL;
    char *b64 = NULL;

    cJSON *params = parse_args(argc, argv, &interactive, &tty);
    if (!params)
        return EXIT_USAGE;
    stdin_open = interactive;
    unsigned long start_id = request(&x, "exec.start", params);
    inbuf = malloc(IN_CHUNK);
    b64 = malloc(BASE64_ENCODED_SIZE(IN_CHUNK));
    x.in_cap = 65536;
    x.in = malloc(x.in_cap);
    if (!start_id || !inbuf || !b64 || !x.in || pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
        fputs("hearthctl exec: out of memory\n", stderr);
        rc = EXIT_USAGE;
        goto done;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGWINCH, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (tty && isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved_tio) == 0) {
        struct termios raw = saved_tio;
        cfmakeraw(&raw);
        tio_saved = true;
        if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) < 0)
            tio_saved = false;
    }
    /* Until the start is answered, only its reply is waited for, within
     * the usual timeout; after that the command runs as long as it does. */
    int wait_ms = timeout_ms > 0 ? timeout_ms : -1;
    while (rc < 0) {
        struct pollfd pf[3] = {{.fd = fd, .events = POLLIN}, {.fd = sig_pipe[0], .events = POLLIN},
                               {.fd = -1}};
        bool started = exec_id >= 0;
        /* Before any input is read: the command sees its size first. */
        if (started && resize_pending) {
            resize_pending = false;
            if (send_resize(&x, exec_id))
                in_flight++;
        }
        if (bytebuf_pending(&x.out) > 0)
            pf[0].events |= POLLOUT;
        if (started && stdin_open && in_flight < IN_FLIGHT_MAX &&
            bytebuf_pending(&x.out) < OUT_HIGH)
            pf[2] = (struct pollfd){.fd = STDIN_FILENO, .events = POLLIN};
        int n = poll(pf, 3, started ? -1 : wait_ms);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            rc = EXIT_USAGE;
            break;
        }
        if (n == 0) {
            fputs("hearthctl exec: timed out waiting for exec.start\n", stderr);
            rc = EXIT_USAGE;
            break;
        }
        if (pf[1].revents) {
            unsigned char s;
            while (read(sig_pipe[0], &s, 1) == 1) {
                if (s == SIGWINCH) {
                    if (!tty)
                        continue;
                    if (!started)
                        resize_pending = true;
                    else if (send_resize(&x, exec_id))
                        in_flight++;
                } else {
                    /* Ended from outside: the command goes with the
                     * connection (kill_on_disconnect). */
                    rc = 128 + s;
                }
            }
        }
        if (pf[2].revents) {
            ssize_t r = read(STDIN_FILENO, inbuf, IN_CHUNK);
            if (r < 0 && (errno == EINTR || errno == EAGAIN))
                continue;
            cJSON *p = cJSON_CreateObject();
            cJSON_AddNumberToObject(p, "id", exec_id);
            if (r > 0) {
                base64_encode(inbuf, (size_t)r, b64);
                cJSON_AddStringToObject(p, "data", b64);
            } else {
                cJSON_AddBoolToObject(p, "close", true);
                stdin_open = false;
            }
            if (request(&x, "exec.input", p))
                in_flight++;
        }
        if (pf[0].revents & POLLOUT && bytebuf_write(x.fd, &x.out) < 0) {
            restore_tty();
            fprintf(stderr, "hearthctl exec: unable to send to hearth: %s\n", strerror(errno));
            rc = EXIT_USAGE;
            break;
        }
        if (pf[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            if (x.in_len == x.in_cap) {
                if (x.in_cap >= LINE_MAX_LEN) {
                    fputs("hearthctl exec: line from hearth too long\n", stderr);
                    rc = EXIT_USAGE;
                    break;
                }
                char *nb = realloc(x.in, x.in_cap * 2);
                if (!nb) {
                    rc = EXIT_USAGE;
                    break;
                }
                x.in = nb;
                x.in_cap *= 2;
            }
            ssize_t r = read(fd, x.in + x.in_len, x.in_cap - x.in_len);
            if (r < 0 && (errno == EINTR || errno == EAGAIN))
                continue;
            if (r <= 0) {
                restore_tty();
                fputs("hearthctl exec: connection closed before the command ended\n", stderr);
                rc = EXIT_USAGE;
                break;
            }
            x.in_len += (size_t)r;
            size_t start = 0;
            for (;;) {
                char *nl = memchr(x.in + start, '\n', x.in_len - start);
                if (!nl)
                    break;
                size_t ll = (size_t)(nl - (x.in + start));
                int h = handle_line(&x, x.in + start, ll, start_id, &exec_id, &in_flight);
                start += ll + 1;
                if (h >= 0) {
                    rc = h;
                    break;
                }
            }
            memmove(x.in, x.in + start, x.in_len - start);
            x.in_len -= start;
        }
        if (bytebuf_pending(&x.out) > 0 && bytebuf_write(x.fd, &x.out) < 0) {
            rc = EXIT_USAGE;
            break;
        }
    }
done:
    restore_tty();
    free(inbuf);
    free(b64);
    free(x.in);
    bytebuf_release(&x.out);
    return rc;
}
