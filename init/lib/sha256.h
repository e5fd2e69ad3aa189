/* sha256: SHA-256 (FIPS 180-4), for checking file transfers end to end:
 * hearth hashes a range of a guest file (files.hash), hearthctl the same
 * range of its copy. Streaming: init, update any number of times, final. */
#ifndef HEARTH_SHA256_H
#define HEARTH_SHA256_H

#include <stddef.h>
#include <stdint.h>

struct sha256 {
    uint32_t h[8];
    uint64_t bytes;
    uint8_t block[64];
    size_t fill;
};

void sha256_init(struct sha256 *s);
void sha256_update(struct sha256 *s, const void *data, size_t len);
void sha256_final(struct sha256 *s, uint8_t out[32]);
/* final, as 64 lowercase hex digits and a NUL. */
void sha256_hex(struct sha256 *s, char out[65]);

#endif
