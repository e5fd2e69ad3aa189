#include "unit.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

int unit_failures;
static struct unit_test *head, **tail = &head;

void unit_register(struct unit_test *t)
{
    *tail = t;
    tail = &t->next;
}

/* Per-test deadline: a test that hangs fails by name instead of holding
 * the whole run until an outer timeout kills it without saying where.
 * Seconds, UNIT_TIMEOUT or 120: the whole suite takes seconds, so this
 * only ever fires on a real hang, loaded machine or not. */
static unsigned timeout_s = 120;
static const char *current;
static volatile sig_atomic_t passed, failed;

static void put(const char *s)
{
    ssize_t r = write(STDOUT_FILENO, s, strlen(s));
    (void)r;
}

static void put_num(long n)
{
    char buf[24], *p = buf + sizeof(buf) - 1;
    *p = '\0';
    do
        *--p = (char)('0' + n % 10);
    while ((n /= 10) > 0);
    put(p);
}

/* Only async-signal-safe calls: the test may be anywhere, even in stdio
 * (stdout is line-buffered, so every finished test's line is out). The
 * hung test cannot be left safely, so the run ends here with the usual
 * counts line, the timed-out test among the failures. */
static void on_alarm(int sig)
{
    (void)sig;
    put("FAIL ");
    put(current);
    put(" (timed out after ");
    put_num(timeout_s);
    put(" s; the remaining tests did not run)\n");
    put_num(passed);
    put(" passed, ");
    put_num(failed + 1);
    put(" failed\n");
    _exit(1);
}

int main(int argc, char **argv)
{
    const char *only = argc > 1 ? argv[1] : NULL;
    const char *env = getenv("UNIT_TIMEOUT");
    struct sigaction sa = {.sa_handler = on_alarm};

    if (env && atoi(env) > 0)
        timeout_s = (unsigned)atoi(env);
    setvbuf(stdout, NULL, _IOLBF, 0);
    sigaction(SIGALRM, &sa, NULL);

    for (struct unit_test *t = head; t; t = t->next) {
        if (only && !strstr(t->name, only))
            continue;
        unit_failures = 0;
        current = t->name;
        alarm(timeout_s);
        t->fn();
        alarm(0);
        if (unit_failures) {
            printf("FAIL %s\n", t->name);
            failed++;
        } else {
            printf("ok   %s\n", t->name);
            passed++;
        }
    }
    printf("%d passed, %d failed\n", (int)passed, (int)failed);
    return failed ? 1 : 0;
}
