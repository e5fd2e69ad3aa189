#include "log.h"
#include "redact.h"
#include "termsafe.h"
#include "timebase.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static enum log_level g_level = HLOG_INFO;
static int g_fd = 2;
static enum log_sink g_sink = LOG_SINK_STDERR;

static const char *const level_names[] = {"error", "warn", "info", "debug"};
/* kmsg priorities: err=3, warning=4, info=6, debug=7 */
static const int kmsg_prio[] = {3, 4, 6, 7};

void log_open(enum log_sink sink)
{
    int saved = errno;
    int fd = -1;

    if (sink == LOG_SINK_KMSG)
        fd = open("/dev/kmsg", O_WRONLY | O_CLOEXEC | O_NOCTTY);
    else if (sink == LOG_SINK_CONSOLE)
        fd = open("/dev/console", O_WRONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd >= 0) {
        if (g_fd > 2)
            close(g_fd);
        g_fd = fd;
        g_sink = sink;
    } else {
        g_sink = LOG_SINK_STDERR;
    }
    errno = saved;
}

void log_set_level(enum log_level lvl) { g_level = lvl; }

int log_fd(void) { return g_sink == LOG_SINK_STDERR || g_fd < 0 ? 2 : g_fd; }

const char *log_level_name(enum log_level lvl)
{
    if ((unsigned)lvl > HLOG_DEBUG)
        return "?";
    return level_names[lvl];
}

int log_level_parse(const char *s, enum log_level *out)
{
    for (unsigned i = 0; i <= HLOG_DEBUG; i++) {
        if (strcmp(s, level_names[i]) == 0) {
            *out = (enum log_level)i;
            return 0;
        }
    }
    if (strcmp(s, "warning") == 0) {
        *out = HLOG_WARN;
        return 0;
    }
    return -1;
}

void log_vmsg(enum log_level lvl, const char *fmt, va_list ap)
{
    int saved = errno;
    char line[LOG_LINE_MAX + 32];
    /* Formatted at twice the record's size: a secret cut by the limit
     * would not match, but one that begins within the record is whole
     * here, so it is redacted before the record is cut. */
    char raw[LOG_LINE_MAX * 2], red[LOG_LINE_MAX], msg[LOG_LINE_MAX];
    const char *text = raw;
    int n;

    if (lvl > g_level)
        goto out;
    vsnprintf(raw, sizeof(raw), fmt, ap);
    /* One line per record: embedded newlines would forge records. */
    for (char *p = raw; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    /* No secret value reaches the console, kmsg or stderr. */
    if (redact_text(raw, strlen(raw), red, sizeof(red)) != (size_t)-1)
        text = red;
    /* Names, paths and messages in a record may be a guest's: no control
     * (C0, C1) or broken UTF-8 reaches the console an operator watches. */
    termsafe_copy(msg, sizeof(msg), text, strlen(text), TERMSAFE_TAB);
    if (g_sink == LOG_SINK_KMSG) {
        /* The kernel stamps kmsg records itself. */
        n = snprintf(line, sizeof(line), "<%d>hearth: %s\n", kmsg_prio[lvl], msg);
    } else {
        int64_t us = mono_us();
        n = snprintf(line, sizeof(line), "[%5lld.%06ld] hearth %s: %s\n",
                     (long long)(us / 1000000), (long)(us % 1000000), level_names[lvl], msg);
    }
    if (n < 0)
        goto out;
    if ((size_t)n >= sizeof(line)) {
        n = sizeof(line) - 1;
        line[n - 1] = '\n';
    }
    /* Best effort, never blocking for long: a full console drops the line. */
    if (write(g_fd, line, (size_t)n) < 0 && g_fd != 2) {
        ssize_t r = write(2, line, (size_t)n);
        (void)r;
    }
out:
    errno = saved;
}

void log_msg(enum log_level lvl, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_vmsg(lvl, fmt, ap);
    va_end(ap);
}
