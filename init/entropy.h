/* entropy: fresh randomness after a restore. A snapshot clones the CRNG
 * state of every sandbox made from it, so the host's bytes are mixed in
 * (RNDADDENTROPY) and the CRNG reseeded at once (RNDRESEEDCRNG). */
#ifndef HEARTH_ENTROPY_H
#define HEARTH_ENTROPY_H

#include <stddef.h>
#include <stdint.h>

#define ENTROPY_MAX_BYTES 4096 /* decoded; more is refused */

/* Adds len bytes to the kernel pool, crediting them as entropy, then
 * reseeds the CRNG. Returns 0, or -1 with err (the ioctl and errno). */
int entropy_add(const uint8_t *data, size_t len, char *err, size_t errlen);

#endif
