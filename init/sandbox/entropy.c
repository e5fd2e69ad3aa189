#include "entropy.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <linux/random.h>

#include "err.h"

int entropy_add(const uint8_t *data, size_t len, struct err *err)
{
    /* rand_pool_info ends in a flexible array: a union gives it room. */
    union {
        struct rand_pool_info info;
        uint32_t words[(sizeof(struct rand_pool_info) + ENTROPY_MAX_BYTES) / 4 + 1];
    } req;

    if (len == 0 || len > ENTROPY_MAX_BYTES)
        return err_set(err, "expected 1 to %d bytes", ENTROPY_MAX_BYTES);
    memset(&req, 0, sizeof(req));
    memcpy(req.info.buf, data, len);
    req.info.entropy_count = (int)(len * 8);
    req.info.buf_size = (int)len;
    int fd = open("/dev/urandom", O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return err_unable(err, errno, "open /dev/urandom");
    int rc = 0;
    if (ioctl(fd, RNDADDENTROPY, &req.info) < 0) {
        err_unable(err, errno, "add entropy (RNDADDENTROPY)");
        rc = -1;
    } else if (ioctl(fd, RNDRESEEDCRNG) < 0) {
        err_unable(err, errno, "reseed the CRNG (RNDRESEEDCRNG)");
        rc = -1;
    }
    close(fd);
    /* The bytes were secret: do not leave a copy on the stack. */
    explicit_bzero(&req, sizeof(req));
    return rc;
}

enum entropy_refresh_result entropy_refresh(const char *dev, struct err *err)
{
    struct {
        uint8_t rnd[32];
        struct timespec real, mono, boot;
    } in;
    const char *path = dev ? dev : "/dev/urandom";

    if (err)
        err->msg[0] = 0;
    memset(&in, 0, sizeof(in));
    /* Never blocks: before the generator is first seeded the bytes stay
     * zero and the readings alone go in. */
    if (getrandom(in.rnd, sizeof(in.rnd), GRND_NONBLOCK) != (ssize_t)sizeof(in.rnd))
        memset(in.rnd, 0, sizeof(in.rnd));
    clock_gettime(CLOCK_REALTIME, &in.real);
    clock_gettime(CLOCK_MONOTONIC, &in.mono);
    clock_gettime(CLOCK_BOOTTIME, &in.boot);
    int fd = open(path, O_WRONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        err_unable(err, errno, "open %s", path);
        explicit_bzero(&in, sizeof(in));
        return ENTROPY_FAILED;
    }
    enum entropy_refresh_result r = ENTROPY_RESEEDED;
    ssize_t w = write(fd, &in, sizeof(in));
    if (w != (ssize_t)sizeof(in)) {
        err_set(err, "unable to write to %s: %s", path,
                w < 0 ? strerror(errno) : "short write");
        r = ENTROPY_FAILED;
    } else if (ioctl(fd, RNDRESEEDCRNG) < 0) {
        /* ENODATA: the generator was never seeded, so there is no state
         * to replace yet; it seeds itself from this sandbox's own events. */
        err_set(err, "unable to reseed the CRNG (RNDRESEEDCRNG): %s%s", strerror(errno),
                errno == ENODATA ? ": the kernel's generator is not seeded yet" : "");
        r = ENTROPY_MIXED;
    }
    close(fd);
    explicit_bzero(&in, sizeof(in));
    return r;
}

const char *entropy_refresh_name(enum entropy_refresh_result r)
{
    static const char *const names[] = {"reseeded", "mixed", "failed"};
    return (unsigned)r < sizeof(names) / sizeof(names[0]) ? names[r] : "failed";
}
