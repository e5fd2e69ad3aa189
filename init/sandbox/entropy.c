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

int entropy_add(const uint8_t *data, size_t len, char *err, size_t errlen)
{
    /* rand_pool_info ends in a flexible array: a union gives it room. */
    union {
        struct rand_pool_info info;
        uint32_t words[(sizeof(struct rand_pool_info) + ENTROPY_MAX_BYTES) / 4 + 1];
    } req;

    if (len == 0 || len > ENTROPY_MAX_BYTES) {
        snprintf(err, errlen, "expected 1 to %d bytes", ENTROPY_MAX_BYTES);
        return -1;
    }
    memset(&req, 0, sizeof(req));
    memcpy(req.info.buf, data, len);
    req.info.entropy_count = (int)(len * 8);
    req.info.buf_size = (int)len;
    int fd = open("/dev/urandom", O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "unable to open /dev/urandom: %s", strerror(errno));
        return -1;
    }
    int rc = 0;
    if (ioctl(fd, RNDADDENTROPY, &req.info) < 0) {
        snprintf(err, errlen, "unable to add entropy (RNDADDENTROPY): %s", strerror(errno));
        rc = -1;
    } else if (ioctl(fd, RNDRESEEDCRNG) < 0) {
        snprintf(err, errlen, "unable to reseed the CRNG (RNDRESEEDCRNG): %s", strerror(errno));
        rc = -1;
    }
    close(fd);
    /* The bytes were secret: do not leave a copy on the stack. */
    explicit_bzero(&req, sizeof(req));
    return rc;
}

enum entropy_refresh_result entropy_refresh(const char *dev, char *err, size_t errlen)
{
    struct {
        uint8_t rnd[32];
        struct timespec real, mono, boot;
    } in;
    const char *path = dev ? dev : "/dev/urandom";

    err[0] = 0;
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
        snprintf(err, errlen, "unable to open %s: %s", path, strerror(errno));
        explicit_bzero(&in, sizeof(in));
        return ENTROPY_FAILED;
    }
    enum entropy_refresh_result r = ENTROPY_RESEEDED;
    ssize_t w = write(fd, &in, sizeof(in));
    if (w != (ssize_t)sizeof(in)) {
        snprintf(err, errlen, "unable to write to %s: %s", path,
                 w < 0 ? strerror(errno) : "short write");
        r = ENTROPY_FAILED;
    } else if (ioctl(fd, RNDRESEEDCRNG) < 0) {
        /* ENODATA: the generator was never seeded, so there is no state
         * to replace yet; it seeds itself from this sandbox's own events. */
        snprintf(err, errlen, "unable to reseed the CRNG (RNDRESEEDCRNG): %s%s", strerror(errno),
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
