#include "entropy.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <linux/random.h>

static int b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

long entropy_base64_decode(const char *in, size_t inlen, uint8_t *out, size_t outcap,
                           char *err, size_t errlen)
{
    uint32_t acc = 0;
    int bits = 0;
    size_t n = 0, pad = 0, i;

    for (i = 0; i < inlen; i++) {
        unsigned char c = (unsigned char)in[i];
        if (c == '=') {
            pad++;
            continue;
        }
        int v = b64_value(c);
        if (v < 0 || pad) {
            snprintf(err, errlen, "invalid base64 at offset %zu", i);
            return -1;
        }
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (n >= outcap) {
                snprintf(err, errlen, "more than %zu bytes", outcap);
                return -1;
            }
            out[n++] = (uint8_t)(acc >> bits);
        }
    }
    /* 6 leftover bits cannot come from whole bytes; padding at most 2 and
     * only where it completes a group of 4. */
    size_t chars = inlen - pad;
    if (bits >= 6 || pad > 2 || (pad && (chars + pad) % 4 != 0) ||
        (acc & ((1u << bits) - 1)) != 0) {
        snprintf(err, errlen, "invalid base64 (truncated or bad padding)");
        return -1;
    }
    return (long)n;
}

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
        snprintf(err, errlen, "open /dev/urandom: %s", strerror(errno));
        return -1;
    }
    int rc = 0;
    if (ioctl(fd, RNDADDENTROPY, &req.info) < 0) {
        snprintf(err, errlen, "RNDADDENTROPY: %s", strerror(errno));
        rc = -1;
    } else if (ioctl(fd, RNDRESEEDCRNG) < 0) {
        snprintf(err, errlen, "RNDRESEEDCRNG: %s", strerror(errno));
        rc = -1;
    }
    close(fd);
    /* The bytes were secret: do not leave a copy on the stack. */
    explicit_bzero(&req, sizeof(req));
    return rc;
}
