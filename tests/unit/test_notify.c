/* The sd_notify message parser (init/proc/notify.c) and the per-service
 * socket: what a service may say, and everything else it might send. */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "notify.h"
#include "err.h"
#include "unit.h"

static int parse(const char *s, struct notify_msg *m)
{
    return notify_parse(s, strlen(s), m);
}

TEST(notify_parse_known_keys)
{
    struct notify_msg m;

    CHECK_EQ_INT(parse("READY=1", &m), 0);
    CHECK(m.ready && !m.watchdog && !m.has_status);
    CHECK_EQ_INT(m.understood, 1);
    CHECK_EQ_INT(parse("READY=1\nSTATUS=serving 3 chats\nWATCHDOG=1\n", &m), 0);
    CHECK(m.ready && m.watchdog && m.has_status);
    CHECK_STR(m.status, "serving 3 chats");
    CHECK_EQ_INT(m.understood, 3);
    CHECK_EQ_INT(m.ignored, 0);
    CHECK_EQ_INT(parse("STOPPING=1\nRELOADING=1", &m), 0);
    CHECK(m.stopping && m.reloading && !m.ready);
    CHECK_EQ_INT(parse("WATCHDOG=trigger", &m), 0);
    CHECK(m.watchdog_trigger && !m.watchdog);
    CHECK_EQ_INT(parse("EXTEND_TIMEOUT_USEC=5000000", &m), 0);
    CHECK(m.has_extend);
    CHECK_EQ_INT(m.extend_usec, 5000000);
    /* The last STATUS= of a datagram wins; an empty one clears it. */
    CHECK_EQ_INT(parse("STATUS=a\nSTATUS=b", &m), 0);
    CHECK_STR(m.status, "b");
    CHECK_EQ_INT(parse("STATUS=", &m), 0);
    CHECK(m.has_status);
    CHECK_STR(m.status, "");
}

TEST(notify_parse_ignores_what_it_does_not_understand)
{
    struct notify_msg m;

    /* Understood by systemd, not acted on here. */
    CHECK_EQ_INT(parse("MAINPID=42\nWATCHDOG_USEC=1000\nERRNO=5\nFDSTORE=1", &m), 0);
    CHECK_EQ_INT(m.unknown, 4);
    CHECK_EQ_INT(m.understood, 0);
    CHECK_EQ_INT(m.ignored, 0);
    /* Malformed lines and values. */
    CHECK_EQ_INT(parse("READY=2\nREADY=\nWATCHDOG=yes\nno equals\n=1\nlower=1\nREADY =1", &m), 0);
    CHECK(!m.ready && !m.watchdog);
    CHECK_EQ_INT(m.ignored, 7);
    CHECK_EQ_INT(parse("EXTEND_TIMEOUT_USEC=-1\nEXTEND_TIMEOUT_USEC=1e6\n"
                       "EXTEND_TIMEOUT_USEC=99999999999999999999\nEXTEND_TIMEOUT_USEC=", &m), 0);
    CHECK(!m.has_extend);
    CHECK_EQ_INT(m.ignored, 4);
    CHECK_EQ_INT(parse("EXTEND_TIMEOUT_USEC=18446744073709551615", &m), 0);
    CHECK(m.has_extend && m.extend_usec == UINT64_MAX);
    /* Blank lines and a missing final newline are fine. */
    CHECK_EQ_INT(parse("\n\nREADY=1\n\n", &m), 0);
    CHECK(m.ready);
    CHECK_EQ_INT(m.ignored, 0);
    /* A CR is part of the value: "1\r" is not "1". */
    CHECK_EQ_INT(parse("READY=1\r\n", &m), 0);
    CHECK(!m.ready);
}

TEST(notify_parse_refuses_whole_datagrams)
{
    struct notify_msg m;
    static char big[NOTIFY_DATAGRAM_MAX + 1];

    CHECK_EQ_INT(notify_parse("", 0, &m), -1);
    CHECK_EQ_INT(notify_parse("READY=1\0STATUS=x", 16, &m), -1);
    CHECK(!m.ready);
    memset(big, 'x', sizeof(big));
    memcpy(big, "READY=1\n", 8);
    CHECK_EQ_INT(notify_parse(big, sizeof(big), &m), -1);
    CHECK(!m.ready);
    CHECK_EQ_INT(notify_parse(big, sizeof(big) - 1, &m), 0);
    CHECK(m.ready);
}

TEST(notify_parse_status_is_clean_utf8)
{
    struct notify_msg m;
    char buf[NOTIFY_DATAGRAM_MAX];

    /* Invalid UTF-8: the value is ignored whole. */
    CHECK_EQ_INT(parse("STATUS=ok\nSTATUS=bad \xff\xfe", &m), 0);
    CHECK_STR(m.status, "ok");
    CHECK_EQ_INT(m.ignored, 1);
    CHECK_EQ_INT(parse("STATUS=\xed\xa0\x80", &m), 0); /* a surrogate */
    CHECK(!m.has_status);
    /* Controls become '?'. */
    CHECK_EQ_INT(parse("STATUS=a\tb\x1b[0m\x7f", &m), 0);
    CHECK_STR(m.status, "a?b?[0m?");
    /* Cut on a character boundary: 200 two-byte characters are 400
     * bytes; 127 of them fit in 255. */
    strcpy(buf, "STATUS=");
    for (int i = 0; i < 200; i++)
        strcat(buf, "\xc3\xa9");
    CHECK_EQ_INT(parse(buf, &m), 0);
    CHECK_EQ_INT(strlen(m.status), 254);
    CHECK_EQ_INT((unsigned char)m.status[253], 0xa9);
    /* Plain ASCII fills the buffer exactly. */
    memset(buf + 7, 'z', 1000);
    buf[1007] = 0;
    CHECK_EQ_INT(parse(buf, &m), 0);
    CHECK_EQ_INT(strlen(m.status), NOTIFY_STATUS_MAX - 1);
}

TEST(notify_socket_round_trip)
{
    char addr[NOTIFY_ADDR_MAX], buf[NOTIFY_DATAGRAM_MAX];
    struct err err;
    int fd = notify_open("unit-svc", addr, sizeof(addr), &err);
    CHECK(fd >= 0);
    if (fd < 0) {
        fprintf(stderr, "  notify_open: %s\n", err.msg);
        return;
    }
    CHECK(strncmp(addr, "@hearth/notify/", 15) == 0);
    CHECK(strlen(addr) > 20 && strcmp(addr + strlen(addr) - 9, "/unit-svc") == 0);

    struct sockaddr_un su;
    memset(&su, 0, sizeof(su));
    su.sun_family = AF_UNIX;
    memcpy(su.sun_path + 1, addr + 1, strlen(addr) - 1);
    socklen_t sl = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(addr));
    int c = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    CHECK(c >= 0);
    CHECK(sendto(c, "READY=1", 7, 0, (struct sockaddr *)&su, sl) == 7);

    struct notify_sender from;
    bool trunc;
    ssize_t n = notify_recv(fd, buf, sizeof(buf), &from, &trunc);
    CHECK_EQ_INT(n, 7);
    CHECK(!trunc && from.creds);
    CHECK_EQ_INT(from.pid, getpid());
    CHECK_EQ_INT(from.uid, getuid());
    CHECK(memcmp(buf, "READY=1", 7) == 0);

    /* Longer than the buffer: flagged, the rest is lost. */
    static char big[8192];
    memset(big, 'x', sizeof(big));
    CHECK(sendto(c, big, sizeof(big), 0, (struct sockaddr *)&su, sl) == (ssize_t)sizeof(big));
    n = notify_recv(fd, buf, sizeof(buf), &from, &trunc);
    CHECK(trunc);
    /* Descriptors passed along are closed, not kept. */
    int p[2];
    CHECK(pipe(p) == 0);
    union {
        char b[CMSG_SPACE(sizeof(int))];
        struct cmsghdr a;
    } ctl;
    struct iovec iov = {.iov_base = "WATCHDOG=1", .iov_len = 10};
    struct msghdr mh = {.msg_name = &su, .msg_namelen = sl, .msg_iov = &iov, .msg_iovlen = 1,
                        .msg_control = ctl.b, .msg_controllen = sizeof(ctl.b)};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &p[0], sizeof(int));
    CHECK(sendmsg(c, &mh, 0) == 10);
    close(p[0]);
    n = notify_recv(fd, buf, sizeof(buf), &from, &trunc);
    CHECK_EQ_INT(n, 10);
    /* With the only read end gone, the write end sees EPIPE. */
    char one = 1;
    struct sigaction ign = {.sa_handler = SIG_IGN}, old;
    sigaction(SIGPIPE, &ign, &old);
    CHECK(write(p[1], &one, 1) < 0 && errno == EPIPE);
    sigaction(SIGPIPE, &old, NULL);
    close(p[1]);
    /* Nothing waiting: EAGAIN, never a block. */
    CHECK(notify_recv(fd, buf, sizeof(buf), &from, &trunc) < 0 && errno == EAGAIN);
    /* The name is taken while the socket lives. */
    int again = notify_open("unit-svc", addr, sizeof(addr), &err);
    CHECK(again < 0);
    CHECK_CONTAINS(err.msg, "Address already in use");
    close(c);
    close(fd);
}

TEST(notify_pid_session_of_self)
{
    CHECK_EQ_INT(notify_pid_session(getpid()), getsid(0));
    CHECK_EQ_INT(notify_pid_session(-5), -1);
}
