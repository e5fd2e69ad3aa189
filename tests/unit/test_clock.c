#include "unit.h"

#include <stdio.h>

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "base64.h"
#include "entropy.h"

/* A fake wall clock: tests decide when hearth steps and by how much
 * without ever touching the machine's clock. */
static struct timespec fake_now;
static struct timespec fake_set_to;
static int fake_sets;
static int fake_set_errno;

static int fake_get(struct timespec *now)
{
    *now = fake_now;
    return 0;
}

static int fake_set(const struct timespec *to)
{
    if (fake_set_errno) {
        errno = fake_set_errno;
        return -1;
    }
    fake_set_to = *to;
    fake_now = *to;
    fake_sets++;
    return 0;
}

static const struct clock_ops fake_ops = {fake_get, fake_set};

static void fake_reset(time_t sec, long nsec)
{
    fake_now = (struct timespec){sec, nsec};
    fake_sets = 0;
    fake_set_errno = 0;
    clock_set_ops(&fake_ops);
}

TEST(clock_within_threshold_is_left_alone)
{
    struct clock_result r;
    fake_reset(1000, 0);
    struct timespec t = {1000, 50000000}; /* exactly 50 ms ahead */
    CHECK_EQ_INT(clock_sync(&t, true, 50, &r), 0);
    CHECK_EQ_INT(r.action, CLOCK_IN_SYNC);
    CHECK_EQ_INT(r.offset_ns, 50000000);
    CHECK_EQ_INT(fake_sets, 0);
    clock_set_ops(NULL);
}

TEST(clock_steps_forward_and_backward_past_threshold)
{
    struct clock_result r;
    fake_reset(1000, 900000000);
    struct timespec t = {1005, 100000000}; /* 4.2 s ahead: a paused VM */
    CHECK_EQ_INT(clock_sync(&t, true, 50, &r), 0);
    CHECK_EQ_INT(r.action, CLOCK_STEPPED);
    CHECK_EQ_INT(r.offset_ns, 4200000000LL);
    CHECK_EQ_INT(fake_sets, 1);
    CHECK_EQ_INT(fake_set_to.tv_sec, 1005);
    CHECK_EQ_INT(fake_set_to.tv_nsec, 100000000);

    fake_reset(1000, 0);
    struct timespec back = {999, 900000000}; /* 100 ms behind */
    CHECK_EQ_INT(clock_sync(&back, true, 50, &r), 0);
    CHECK_EQ_INT(r.action, CLOCK_STEPPED);
    CHECK_EQ_INT(r.offset_ns, -100000000);
    CHECK_EQ_INT(fake_sets, 1);
    clock_set_ops(NULL);
}

TEST(clock_not_allowed_reports_the_offset_only)
{
    struct clock_result r;
    fake_reset(2000, 0);
    struct timespec t = {2060, 0};
    CHECK_EQ_INT(clock_sync(&t, false, 50, &r), 0);
    CHECK_EQ_INT(r.action, CLOCK_NOT_ALLOWED);
    CHECK_EQ_INT(r.offset_ns, 60000000000LL);
    CHECK_EQ_INT(fake_sets, 0);
    CHECK_STR(clock_action_name(r.action), "not_allowed");
    clock_set_ops(NULL);
}

TEST(clock_set_failure_is_an_error_with_reason)
{
    struct clock_result r;
    fake_reset(2000, 0);
    fake_set_errno = EPERM;
    struct timespec t = {3000, 0};
    CHECK_EQ_INT(clock_sync(&t, true, 50, &r), -1);
    CHECK_EQ_INT(r.action, CLOCK_ERROR);
    CHECK_CONTAINS(r.error, "clock_settime");
    CHECK_EQ_INT(fake_sets, 0);
    clock_set_ops(NULL);
}

TEST(clock_threshold_zero_steps_any_difference)
{
    struct clock_result r;
    fake_reset(10, 0);
    struct timespec t = {10, 1};
    CHECK_EQ_INT(clock_sync(&t, true, 0, &r), 0);
    CHECK_EQ_INT(r.action, CLOCK_STEPPED);
    struct timespec same = {10, 1};
    CHECK_EQ_INT(clock_sync(&same, true, 0, &r), 0);
    CHECK_EQ_INT(r.action, CLOCK_IN_SYNC);
    clock_set_ops(NULL);
}

static long dec(const char *s, unsigned char *out, char *err)
{
    struct err e = {0};
    long r = base64_decode(s, strlen(s), out, 16, &e);
    if (err)
        snprintf(err, 96, "%s", e.msg);
    return r;
}

TEST(base64_decodes_with_and_without_padding)
{
    unsigned char b[16];
    char err[96];
    CHECK_EQ_INT(dec("QUJD", b, err), 3);
    CHECK(memcmp(b, "ABC", 3) == 0);
    CHECK_EQ_INT(dec("QUI=", b, err), 2);
    CHECK(memcmp(b, "AB", 2) == 0);
    CHECK_EQ_INT(dec("QQ==", b, err), 1);
    CHECK_EQ_INT(b[0], 'A');
    CHECK_EQ_INT(dec("QUI", b, err), 2);
    CHECK_EQ_INT(dec("", b, err), 0);
    CHECK_EQ_INT(dec("+/8=", b, err), 2);
    CHECK_EQ_INT(b[0], 0xfb);
    CHECK_EQ_INT(b[1], 0xff);
}

TEST(base64_refuses_bad_input_with_offset)
{
    unsigned char b[16];
    char err[96];
    CHECK_EQ_INT(dec("QU!D", b, err), -1);
    CHECK_CONTAINS(err, "offset 2");
    CHECK_EQ_INT(dec("QQ=A", b, err), -1); /* data after padding */
    CHECK_CONTAINS(err, "offset 3");
    CHECK_EQ_INT(dec("Q", b, err), -1);    /* 6 bits cannot be a byte */
    CHECK_EQ_INT(dec("QUJD=", b, err), -1); /* padding where none belongs */
    CHECK_EQ_INT(dec("QR==", b, err), -1);  /* non-zero leftover bits */
    CHECK_EQ_INT(dec("QUJD QUJD", b, err), -1);
    /* 17 bytes into a 16-byte buffer */
    CHECK_EQ_INT(dec("AAAAAAAAAAAAAAAAAAAAAAA=", b, err), -1);
    CHECK_CONTAINS(err, "more than 16");
}

#include "sandbox.h"

TEST(uevent_vmgenid_is_found_only_as_a_key)
{
    static const char yes[] = "change@/devices/virtual/misc/vmgenid\0ACTION=change\0"
                              "DEVPATH=/devices/virtual/misc/vmgenid\0NEW_VMGEN_ID=1";
    static const char no[] = "change@/devices/NEW_VMGEN_ID=1\0ACTION=change\0X=NEW_VMGEN_ID=1";
    static const char cut[] = "change@/x\0NEW_VMGEN_I";
    CHECK(resume_uevent_is_vmgenid(yes, sizeof(yes) - 1));
    CHECK(!resume_uevent_is_vmgenid(no, sizeof(no) - 1));
    CHECK(!resume_uevent_is_vmgenid(cut, sizeof(cut) - 1));
    CHECK(!resume_uevent_is_vmgenid("", 0));
}

TEST(hw_clock_lag_counts_only_beyond_threshold_and_resolution)
{
    /* RTC: whole seconds, so up to 1 s of apparent lag is noise. */
    CHECK(!resume_hw_clock_lags(1040, 50, 1000));
    CHECK(resume_hw_clock_lags(1051, 50, 1000));
    /* PTP: nanoseconds; the threshold alone decides. */
    CHECK(!resume_hw_clock_lags(50, 50, 0));
    CHECK(resume_hw_clock_lags(5000, 50, 0));
    /* The system clock ahead is never a pause. */
    CHECK(!resume_hw_clock_lags(-5000, 50, 0));
}

/* The uevent filter, on a datagram socketpair (the same classic BPF the
 * kernel runs on the uevent socket): an add or remove is dropped, a
 * change (the VM-generation one) passes, a message shorter than the
 * action is dropped. */
TEST(uevent_filter_lets_only_changes_through)
{
    int sv[2];
    char buf[256];
    CHECK(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0, sv) == 0);
    CHECK_EQ_INT(resume_uevent_filter(sv[1]), 0);
    static const char add[] = "add@/devices/virtual/bdi/0:45\0ACTION=add";
    static const char chg[] = "change@/devices/virtual/misc/vmgenid\0NEW_VMGEN_ID=1";
    CHECK(send(sv[0], add, sizeof(add) - 1, 0) == (ssize_t)(sizeof(add) - 1));
    CHECK(send(sv[0], "chan", 4, 0) == 4);
    CHECK(send(sv[0], chg, sizeof(chg) - 1, 0) == (ssize_t)(sizeof(chg) - 1));
    ssize_t n = recv(sv[1], buf, sizeof(buf), 0);
    CHECK_EQ_INT(n, (ssize_t)(sizeof(chg) - 1));
    CHECK(n > 7 && memcmp(buf, "change@", 7) == 0);
    CHECK(recv(sv[1], buf, sizeof(buf), 0) < 0 && errno == EAGAIN);
    close(sv[0]);
    close(sv[1]);
}
