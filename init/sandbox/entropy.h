/* entropy: fresh randomness after a restore. A snapshot clones the CRNG
 * state of every sandbox made from it, so the host's bytes are mixed in
 * (RNDADDENTROPY) and the CRNG reseeded at once (RNDRESEEDCRNG); without
 * the host's bytes, hearth stirs in what it has (entropy_refresh). */
#ifndef HEARTH_ENTROPY_H
#define HEARTH_ENTROPY_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define ENTROPY_MAX_BYTES 4096 /* decoded; more is refused */

/* Adds len bytes to the kernel pool, crediting them as entropy, then
 * reseeds the CRNG. Returns 0, or -1 with err (the ioctl and errno). */
int entropy_add(const uint8_t *data, size_t len, struct err *err);

enum entropy_refresh_result {
    ENTROPY_RESEEDED, /* bytes written and the CRNG reseeded */
    ENTROPY_MIXED,    /* bytes written, the reseed refused (err says why) */
    ENTROPY_FAILED,   /* nothing written (err says why) */
};
/* Without bytes from the host: writes 32 bytes of the generator's own
 * output and the clocks' readings of this moment to dev (NULL:
 * /dev/urandom; mixed in, not credited), then asks for a reseed
 * (RNDRESEEDCRNG, which needs CAP_SYS_ADMIN). The readings are what
 * differs between sandboxes restored from one snapshot (each is restored
 * at its own moment); the reseed draws on the input pool, which also
 * holds each one's interrupts since. */
enum entropy_refresh_result entropy_refresh(const char *dev, struct err *err);
/* "reseeded", "mixed", "failed". */
const char *entropy_refresh_name(enum entropy_refresh_result r);

#endif
