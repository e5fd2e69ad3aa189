/* lifeline: a child goes on while hearth lives and ends at once when it
 * finds hearth gone, by its parent pid or by hearth's pidfd. "hearth" is
 * a child of the test here (it calls lifeline_init); each grandchild
 * says "alive" on a pipe if the check let it through, so the test needs
 * no wait for a process it is not the parent of. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lifeline.h"
#include "unit.h"

/* What the pipe got within 10 s: the grandchild's word, or "" (EOF: it
 * ended without one). */
static void read_word(int fd, char *out, size_t len)
{
    size_t n = 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    while (n < len - 1 && poll(&p, 1, 10000) > 0) {
        ssize_t r = read(fd, out + n, len - 1 - n);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    out[n] = 0;
}

/* "hearth" forks the grandchild, which (with gone) waits for hearth to
 * exit first, then holds and says "alive". */
static void run(bool gone, char *word, size_t len)
{
    int p[2];
    CHECK_EQ_INT(pipe(p), 0);
    pid_t h = fork();
    if (h == 0) {
        close(p[0]);
        if (lifeline_init() < 0)
            _exit(2);
        pid_t self = getpid();
        pid_t g = fork();
        if (g == 0) {
            if (gone)
                while (getppid() == self)
                    usleep(1000);
            lifeline_hold();
            if (write(p[1], "alive", 5) < 0)
                _exit(3);
            _exit(0);
        }
        if (gone)
            _exit(0);
        /* Alive: until the grandchild has spoken (its end closes the pipe). */
        int st;
        waitpid(g, &st, 0);
        _exit(0);
    }
    close(p[1]);
    read_word(p[0], word, len);
    close(p[0]);
    int st;
    CHECK_EQ_INT(waitpid(h, &st, 0), h);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

TEST(lifeline_child_goes_on_while_hearth_lives)
{
    char word[16];
    run(false, word, sizeof(word));
    CHECK_STR(word, "alive");
}

TEST(lifeline_child_of_a_gone_hearth_ends)
{
    char word[16];
    run(true, word, sizeof(word));
    CHECK_STR(word, "");
}

/* After an exec only the pidfd tells: one of a process that has exited
 * ends the holder; one of a live process does not. */
TEST(lifeline_pidfd_of_an_exited_hearth_ends_the_holder)
{
    for (int exited = 0; exited < 2; exited++) {
        int p[2];
        CHECK_EQ_INT(pipe(p), 0);
        pid_t h = fork();
        if (h == 0) {
            pause();
            _exit(0);
        }
        int fd = (int)syscall(SYS_pidfd_open, h, 0);
        CHECK(fd >= 0);
        if (exited) {
            kill(h, SIGKILL);
            int st;
            waitpid(h, &st, 0);
        }
        pid_t c = fork();
        if (c == 0) {
            close(p[0]);
            lifeline_hold_fd(fd);
            if (write(p[1], "alive", 5) < 0)
                _exit(3);
            _exit(0);
        }
        close(p[1]);
        close(fd);
        char word[16];
        read_word(p[0], word, sizeof(word));
        close(p[0]);
        int st;
        CHECK_EQ_INT(waitpid(c, &st, 0), c);
        if (exited) {
            CHECK_STR(word, "");
            CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 127);
        } else {
            CHECK_STR(word, "alive");
            CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
            kill(h, SIGKILL);
            waitpid(h, &st, 0);
        }
    }
}
