#include "clock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cJSON.h>
#include <linux/rtc.h>

#include "log.h"
#include "timebase.h"

static int real_get(struct timespec *now) { return clock_gettime(CLOCK_REALTIME, now); }
static int real_set(const struct timespec *to) { return clock_settime(CLOCK_REALTIME, to); }

static const struct clock_ops real_ops = {real_get, real_set};
static const struct clock_ops *ops = &real_ops;

void clock_set_ops(const struct clock_ops *o) { ops = o ? o : &real_ops; }

int64_t clock_diff_ns(const struct timespec *a, const struct timespec *b)
{
    return ((int64_t)a->tv_sec - (int64_t)b->tv_sec) * 1000000000LL +
           ((int64_t)a->tv_nsec - (int64_t)b->tv_nsec);
}

const char *clock_action_name(enum clock_action a)
{
    switch (a) {
    case CLOCK_IN_SYNC: return "in_sync";
    case CLOCK_STEPPED: return "stepped";
    case CLOCK_NOT_ALLOWED: return "not_allowed";
    default: return "error";
    }
}

int clock_sync(const struct timespec *target, bool allowed, int64_t threshold_ms,
               struct clock_result *r)
{
    struct timespec now;

    memset(r, 0, sizeof(*r));
    if (ops->get(&now) < 0) {
        r->action = CLOCK_ERROR;
        snprintf(r->error, sizeof(r->error), "unable to read the clock: %s", strerror(errno));
        return -1;
    }
    r->offset_ns = clock_diff_ns(target, &now);
    int64_t mag = r->offset_ns < 0 ? -r->offset_ns : r->offset_ns;
    if (mag <= threshold_ms * 1000000LL) {
        r->action = CLOCK_IN_SYNC;
        return 0;
    }
    if (!allowed) {
        r->action = CLOCK_NOT_ALLOWED;
        return 0;
    }
    if (ops->set(target) < 0) {
        r->action = CLOCK_ERROR;
        snprintf(r->error, sizeof(r->error), "unable to set the clock (clock_settime): %s",
                 strerror(errno));
        return -1;
    }
    r->action = CLOCK_STEPPED;
    log_info("wall clock stepped by %lld ms", (long long)(r->offset_ns / 1000000));
    return 0;
}

cJSON *clock_result_json(const struct clock_result *r)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddStringToObject(o, "action", clock_action_name(r->action));
    if (r->action != CLOCK_ERROR || r->offset_ns)
        cJSON_AddNumberToObject(o, "offset_ms", (double)r->offset_ns / 1e6);
    if (r->error[0])
        cJSON_AddStringToObject(o, "error", r->error);
    return o;
}

/* The dynamic POSIX clock id of an open /dev/ptpN (linux/posix-timers.h). */
#define FD_TO_CLOCKID(fd) ((~(clockid_t)(fd) << 3) | 3)

static int ptp_fd = -2; /* -2: not tried yet; kept open once found */

static int read_ptp(struct timespec *hw)
{
    if (ptp_fd == -2)
        ptp_fd = open("/dev/ptp0", O_RDONLY | O_CLOEXEC);
    if (ptp_fd < 0)
        return -1;
    if (clock_gettime(FD_TO_CLOCKID(ptp_fd), hw) < 0) {
        int saved = errno;
        close(ptp_fd);
        ptp_fd = -2;
        errno = saved;
        return -1;
    }
    return 0;
}

static int read_rtc(struct timespec *hw)
{
    struct rtc_time t;
    int fd = open("/dev/rtc0", O_RDONLY | O_CLOEXEC | O_NONBLOCK);

    if (fd < 0)
        return -1;
    int rc = ioctl(fd, RTC_RD_TIME, &t);
    int saved = errno;
    close(fd);
    if (rc < 0) {
        errno = saved;
        return -1;
    }
    /* An RTC keeps UTC (struct tm's fields: years since 1900, month 0-11). */
    if (t.tm_mon < 0 || t.tm_mon > 11 || t.tm_mday < 1 || t.tm_mday > 31 || t.tm_hour < 0 ||
        t.tm_hour > 23 || t.tm_min < 0 || t.tm_min > 59 || t.tm_sec < 0 || t.tm_sec > 60) {
        errno = EINVAL;
        return -1;
    }
    hw->tv_sec = (time_t)timebase_utc_seconds(t.tm_year + 1900LL, t.tm_mon + 1, t.tm_mday,
                                              t.tm_hour, t.tm_min, t.tm_sec);
    hw->tv_nsec = 0;
    return 0;
}

int clock_hw_read(struct timespec *hw, const char **source, int64_t *resolution_ms)
{
    if (read_ptp(hw) == 0) {
        *source = "ptp0";
        *resolution_ms = 0;
        return 0;
    }
    if (read_rtc(hw) == 0) {
        *source = "rtc0";
        /* RTC_RD_TIME has whole seconds: up to 1 s behind by itself. */
        *resolution_ms = 1000;
        return 0;
    }
    if (errno == ENOENT)
        errno = ENODEV;
    return -1;
}

bool clock_hw_present(void)
{
    return access("/dev/ptp0", F_OK) == 0 || access("/dev/rtc0", F_OK) == 0;
}
