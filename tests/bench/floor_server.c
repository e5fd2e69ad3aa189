/* The floor for the ping rows: the least a server can do for one request
 * line on a unix socket. Blocking, one connection at a time, no parsing:
 * every newline read is answered with the same fixed line, the size of
 * hearth's ping reply. Connections are served one after another until
 * SIGTERM.
 *
 *   floor_server SOCK        (prints "ready" once listening) */
#define _GNU_SOURCE /* accept4 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static const char reply[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n";

static void die(const char *what)
{
    fprintf(stderr, "floor_server: %s: %s\n", what, strerror(errno));
    exit(1);
}

/* Answers one connection until EOF; the replies for one read go out in
 * one write, as a pipelined client expects from any sane server. */
static void serve(int c)
{
    static char out[64 * 1024 / sizeof reply * sizeof reply];
    char in[64 * 1024 / sizeof reply];
    for (;;) {
        ssize_t r = read(c, in, sizeof in);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            if (errno == ECONNRESET)
                return;
            die("read");
        }
        if (r == 0)
            return;
        size_t n = 0;
        for (ssize_t i = 0; i < r; i++)
            if (in[i] == '\n') {
                memcpy(out + n, reply, sizeof reply - 1);
                n += sizeof reply - 1;
            }
        for (size_t off = 0; off < n;) {
            ssize_t w = write(c, out + off, n - off);
            if (w < 0) {
                if (errno == EINTR)
                    continue;
                if (errno == EPIPE || errno == ECONNRESET)
                    return;
                die("write");
            }
            off += (size_t)w;
        }
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: floor_server SOCK\n");
        return 2;
    }
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    if (strlen(argv[1]) >= sizeof a.sun_path) {
        fprintf(stderr, "floor_server: path too long\n");
        return 2;
    }
    strcpy(a.sun_path, argv[1]);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        die("socket");
    if (bind(s, (struct sockaddr *)&a, sizeof a) < 0)
        die("bind");
    if (listen(s, 64) < 0)
        die("listen");
    /* A client that goes away mid-reply must not kill the floor. */
    if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
        die("signal");
    if (puts("ready") == EOF || fflush(stdout) == EOF)
        die("stdout");
    for (;;) {
        int c = accept4(s, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            die("accept");
        }
        serve(c);
        if (close(c) < 0)
            die("close");
    }
}
