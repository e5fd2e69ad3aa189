/* fuzz_notify: the sd_notify message parser (init/proc/notify.c), which reads
 * whatever a service (or anything in its network namespace that knows
 * the socket's name) sends to NOTIFY_SOCKET.
 *
 * Checked beyond the sanitizers:
 *   - a datagram that is empty, longer than NOTIFY_DATAGRAM_MAX or holds a
 *     NUL is refused whole, and nothing else is;
 *   - every non-empty line is counted exactly once (understood, ignored
 *     or unknown), so no line is silently lost;
 *   - STATUS text is terminated, shorter than NOTIFY_STATUS_MAX, valid
 *     UTF-8, and free of control characters;
 *   - the flags agree with the text: READY=1 / WATCHDOG=1 / WATCHDOG=trigger
 *     are set exactly when such a line is there;
 *   - the lease keys: a HEARTH_BUSY=0 line is never lost, a lease is
 *     never set without a HEARTH_BUSY= line, and the reason holds to the
 *     same rules as STATUS. */
#include "notify.h"
#include "utf8.h"

#include "fuzz_common.h"

static bool has_line(const uint8_t *d, size_t n, const char *want)
{
    size_t wl = strlen(want);
    for (size_t i = 0; i + wl <= n; i++)
        if ((i == 0 || d[i - 1] == '\n') && memcmp(d + i, want, wl) == 0 &&
            (i + wl == n || d[i + wl] == '\n'))
            return true;
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct notify_msg m;
    /* A heap copy of exactly size bytes, so reading past it is caught. */
    char *buf = malloc(size ? size : 1);
    if (!buf)
        abort();
    memcpy(buf, data, size);
    int rc = notify_parse(buf, size, &m);
    bool refuse = size == 0 || size > NOTIFY_DATAGRAM_MAX || memchr(data, 0, size);
    FUZZ_CHECK((rc < 0) == refuse, "rc %d for %zu bytes", rc, size);
    if (rc == 0) {
        unsigned lines = 0;
        for (size_t i = 0; i < size; i++)
            if (data[i] != '\n' && (i + 1 == size || data[i + 1] == '\n'))
                lines++;
        FUZZ_CHECK(m.understood + m.ignored + m.unknown == lines, "%u+%u+%u lines of %u",
                   m.understood, m.ignored, m.unknown, lines);
        FUZZ_CHECK(m.ready == has_line(data, size, "READY=1"), "READY flag");
        FUZZ_CHECK(m.watchdog == has_line(data, size, "WATCHDOG=1"), "WATCHDOG flag");
        FUZZ_CHECK(m.watchdog_trigger == has_line(data, size, "WATCHDOG=trigger"), "trigger");
    }
    FUZZ_CHECK(memchr(m.status, 0, sizeof(m.status)) != NULL, "status not terminated");
    size_t sl = strlen(m.status);
    FUZZ_CHECK(sl < NOTIFY_STATUS_MAX, "status %zu bytes", sl);
    FUZZ_CHECK(utf8_invalid_at(m.status, sl) < 0, "status not UTF-8");
    for (size_t i = 0; i < sl; i++)
        FUZZ_CHECK((unsigned char)m.status[i] >= 0x20 && m.status[i] != 0x7f,
                   "control byte in status");
    FUZZ_CHECK(m.has_status || sl == 0, "status without STATUS=");
    size_t rl = strnlen(m.busy_reason, sizeof(m.busy_reason));
    FUZZ_CHECK(rl < NOTIFY_STATUS_MAX, "reason not terminated");
    FUZZ_CHECK(utf8_invalid_at(m.busy_reason, rl) < 0, "reason not UTF-8");
    for (size_t i = 0; i < rl; i++)
        FUZZ_CHECK((unsigned char)m.busy_reason[i] >= 0x20 && m.busy_reason[i] != 0x7f,
                   "control byte in reason");
    FUZZ_CHECK(m.has_busy_reason || rl == 0, "reason without HEARTH_BUSY_REASON=");
    if (rc == 0 && !memmem(data, size, "HEARTH_BUSY=", 12))
        FUZZ_CHECK(!m.has_busy, "lease without HEARTH_BUSY=");
    if (rc == 0 && has_line(data, size, "HEARTH_BUSY=0"))
        FUZZ_CHECK(m.has_busy, "release lost");
    free(buf);
    return 0;
}
