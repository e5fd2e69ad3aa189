#include "outcopy.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "hearth.h"
#include "log.h"
#include "termsafe.h"

/* -1: not decided yet; -2: off (not container mode, or unusable). */
static int fds[2] = {-1, -1};
static uint64_t dropped;
static uint64_t dropped_noted;

/* A description of its own for each of fd 1 and fd 2, so O_NONBLOCK does
 * not change the one hearth's log lines share with whoever gave it. */
static int open_copy(int fd)
{
    char path[32];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    int nfd = open(path, O_WRONLY | O_APPEND | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (nfd >= 0)
        return nfd;
    /* A socket cannot be reopened through /proc: the copy stays off
     * rather than risk blocking the loop on a shared blocking one. */
    log_warn("outcopy: unable to reopen fd %d: %s; service output is not copied to it", fd,
             strerror(errno));
    return -2;
}

static void decide(void)
{
    if (fds[0] != -1)
        return;
    if (H.mode != MODE_CONTAINER) {
        fds[0] = fds[1] = -2;
        return;
    }
    fds[0] = open_copy(1);
    fds[1] = open_copy(2);
}

void outcopy_line(const char *service, enum log_stream st, const char *text, size_t len)
{
    decide();
    int fd = fds[st == STREAM_STDERR ? 1 : 0];
    if (fd < 0)
        return;
    char buf[LOGRING_LINE_MAX + 160];
    size_t n = 0;
    if (dropped != dropped_noted) {
        int k = snprintf(buf, sizeof(buf), "hearth: %llu service output lines dropped (log pipe full)\n",
                         (unsigned long long)(dropped - dropped_noted));
        if (k > 0 && (size_t)k < sizeof(buf))
            n = (size_t)k;
    }
    int k = snprintf(buf + n, sizeof(buf) - n, "%s: ", service);
    if (k < 0 || (size_t)k >= sizeof(buf) - n)
        return;
    n += (size_t)k;
    /* The runtime's log is read on an operator's terminal (podman logs):
     * the agent's output reaches it escaped, as hearthctl shows it. A
     * line longer than the buffer once escaped is cut. */
    size_t room = sizeof(buf) - n - 1, need = termsafe_copy(buf + n, room, text, len, TERMSAFE_TAB);
    n += need < room ? need : strlen(buf + n);
    buf[n++] = '\n';
    /* One write per line: a pipe takes up to PIPE_BUF bytes whole, and a
     * short write of a longer line is as good as the runtime gets. */
    ssize_t w = write(fd, buf, n);
    if (w < 0) {
        dropped++;
        return;
    }
    dropped_noted = dropped;
}
