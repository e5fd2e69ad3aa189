/* childjob on a loop of its own, with real children: a small result is
 * read at the exit alone (the pipe unwatched until then), a result larger
 * than a pipe holds arrives whole (the child asks for reading), one past
 * its bound or its deadline, or cancelled, is killed and reported as such, a descendant
 * left holding the pipe does not hold up the end, and only one child runs
 * per job. */
#include "unit.h"

#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ev.h>

#include "childjob.h"
#include "err.h"
#include "hearth.h"
#include "reaper.h"

static struct {
    bool done;
    enum childjob_end end;
    int status;
    size_t len;
    bool intact;
} got;

static void on_done(struct childjob *j, enum childjob_end end, int status, const char *data,
                    size_t len)
{
    got.done = true;
    got.end = end;
    got.status = status;
    got.len = len;
    got.intact = true;
    for (size_t i = 0; i < len; i++)
        got.intact &= data[i] == (char)('a' + i % 26);
    ev_break(H.loop, EVBREAK_ALL);
}

/* Writes (size_t)arg bytes of a known pattern. */
static void writer(int wfd, void *arg)
{
    size_t n = (size_t)arg, off = 0;
    char buf[4096];
    while (off < n) {
        size_t k = n - off < sizeof(buf) ? n - off : sizeof(buf);
        for (size_t i = 0; i < k; i++)
            buf[i] = (char)('a' + (off + i) % 26);
        if (childjob_write(wfd, buf, k) < 0)
            _exit(3);
        off += k;
    }
}

/* Leaves a grandchild holding the pipe open, then writes 10 bytes. The
 * grandchild goes once the job's end closes the read end (POLLERR on its
 * write end), or after 20 s. */
static void leaver(int wfd, void *arg)
{
    pid_t g = fork();
    if (g == 0) {
        struct pollfd pf = {.fd = wfd, .events = 0};
        poll(&pf, 1, 20000);
        _exit(0);
    }
    *(volatile pid_t *)arg = g; /* shared with the test */
    writer(wfd, (void *)(size_t)10);
}

static void sleeper(int wfd, void *arg)
{
    sleep(20);
}

static void reap_cb(struct ev_loop *loop, ev_timer *w, int revents) { reaper_reap(); }
static void stop_cb(struct ev_loop *loop, ev_timer *w, int revents) { ev_break(loop, EVBREAK_ALL); }

/* Runs the loop until the job is done (or 15 s, a hang). */
static void run_until_done(void)
{
    ev_timer reap, stop;
    ev_timer_init(&reap, reap_cb, 0.002, 0.002);
    ev_timer_init(&stop, stop_cb, 15., 0.);
    ev_timer_start(H.loop, &reap);
    ev_timer_start(H.loop, &stop);
    ev_now_update(H.loop);
    ev_run(H.loop, 0);
    ev_timer_stop(H.loop, &reap);
    ev_timer_stop(H.loop, &stop);
}

TEST(childjob_result_deadline_and_bound)
{
    struct ev_loop *saved = H.loop;
    struct childjob j = {0};
    struct err err;

    H.loop = ev_loop_new(EVBACKEND_EPOLL | EVFLAG_NOENV);
    CHECK(H.loop != NULL);

    /* 300 KiB: more than a pipe holds, so the loop reads as it comes. */
    memset(&got, 0, sizeof(got));
    CHECK_EQ_INT(childjob_start(&j, 10000, 1 << 20, writer, (void *)(size_t)(300 * 1024), on_done,
                                &err),
                 0);
    CHECK(childjob_running(&j));
    /* One child per job. */
    CHECK_EQ_INT(childjob_start(&j, 10000, 1 << 20, writer, (void *)1, on_done, &err),
                 -1);
    CHECK(strstr(err.msg, "already running") != NULL);
    run_until_done();
    CHECK(got.done);
    CHECK_EQ_INT(got.end, CHILDJOB_EXITED);
    CHECK(WIFEXITED(got.status) && WEXITSTATUS(got.status) == 0);
    CHECK_EQ_INT(got.len, 300 * 1024);
    CHECK(got.intact);
    CHECK(j.draining); /* the full pipe made the child ask */
    CHECK(!childjob_running(&j));

    /* Past its bound: killed, and said so. */
    memset(&got, 0, sizeof(got));
    CHECK_EQ_INT(childjob_start(&j, 10000, 64 * 1024, writer, (void *)(size_t)(300 * 1024), on_done,
                                &err),
                 0);
    run_until_done();
    CHECK(got.done);
    CHECK_EQ_INT(got.end, CHILDJOB_TOO_BIG);
    CHECK(WIFSIGNALED(got.status) && WTERMSIG(got.status) == SIGKILL);

    /* Past its deadline: killed, and said so; the job can start again. */
    memset(&got, 0, sizeof(got));
    CHECK_EQ_INT(childjob_start(&j, 100, 1024, sleeper, NULL, on_done, &err), 0);
    run_until_done();
    CHECK(got.done);
    CHECK_EQ_INT(got.end, CHILDJOB_TIMEOUT);
    CHECK(WIFSIGNALED(got.status) && WTERMSIG(got.status) == SIGKILL);
    CHECK(!childjob_running(&j) && j.killed == 0);

    /* Cancelled by its owner: killed, said so, and free again; a cancel
     * with no child running does nothing. */
    memset(&got, 0, sizeof(got));
    CHECK_EQ_INT(childjob_start(&j, 10000, 1024, sleeper, NULL, on_done, &err), 0);
    childjob_cancel(&j);
    childjob_cancel(&j); /* once is enough */
    CHECK(!got.done);    /* the owner hears from the loop, not inside the call */
    run_until_done();
    CHECK(got.done);
    CHECK_EQ_INT(got.end, CHILDJOB_CANCELLED);
    CHECK(WIFSIGNALED(got.status) && WTERMSIG(got.status) == SIGKILL);
    CHECK(!childjob_running(&j) && j.killed == 0);
    memset(&got, 0, sizeof(got));
    childjob_cancel(&j);
    CHECK(!got.done);

    /* A small result: only the eventfd is watched, the pipe is read at
     * the exit. */
    memset(&got, 0, sizeof(got));
    CHECK_EQ_INT(childjob_start(&j, 10000, 1024, writer, (void *)(size_t)10, on_done, &err),
                 0);
    CHECK(!ev_is_active(&j.io) && ev_is_active(&j.kick_io));
    run_until_done();
    CHECK(got.done && got.end == CHILDJOB_EXITED && got.len == 10 && got.intact);
    CHECK(!j.draining);

    /* A grandchild keeps the write end open: the exit still ends the job
     * with what was written, without waiting for the grandchild. */
    memset(&got, 0, sizeof(got));
    pid_t *gpid = mmap(NULL, sizeof(pid_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                       -1, 0);
    CHECK(gpid != MAP_FAILED);
    *gpid = 0;
    CHECK_EQ_INT(childjob_start(&j, 10000, 1024, leaver, gpid, on_done, &err), 0);
    run_until_done();
    CHECK(got.done && got.end == CHILDJOB_EXITED && got.len == 10 && got.intact);
    /* Ended while the grandchild still held the pipe. */
    CHECK(*gpid > 0 && kill(*gpid, 0) == 0);
    munmap(gpid, sizeof(pid_t));

    ev_loop_destroy(H.loop);
    H.loop = saved;
}
