#include "entropy.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
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
