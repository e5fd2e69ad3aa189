/* identity: what makes this sandbox this one and no other. Sandboxes
 * restored from one memory snapshot start as exact copies of hearth as it
 * was when the snapshot was taken, so whatever hearth drew at random
 * before it is shared by all of them. After every resume (a restore looks
 * like one) the identity is made again: the kernel's generator is stirred
 * and reseeded, a new instance id drawn, hearth's own pseudo-random
 * generator (restart jitter) seeded afresh, and the resume generation
 * counted on. Created once at boot the same way, but for the generator,
 * which at boot is this boot's own.
 *
 * status.identity and the "identity" event show it: {instance_id,
 * generation, cause, refreshed_at, crng: {action[, error]}[, clocks_only]}. */
#ifndef HEARTH_IDENTITY_H
#define HEARTH_IDENTITY_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"
#include <stdint.h>

struct cJSON;

#define IDENTITY_ID_BYTES 16
#define IDENTITY_ID_HEX (IDENTITY_ID_BYTES * 2)

/* Boot: generation 0, cause "boot". */
void identity_boot(void);
/* After a resume (cause as the resume's): a new generation, then as at
 * boot. detail gets a line for the resume report. Returns 0, or -1 when
 * nothing could be written to the kernel's generator. */
int identity_refresh(const char *cause, struct err *detail);

/* The resume generation: 0 at boot, one more per resume. */
uint64_t identity_generation(void);
/* The current instance id: IDENTITY_ID_HEX lowercase hex digits. */
const char *identity_instance_id(void);
/* status.identity. */
struct cJSON *identity_json(void);

/* The device the kernel's generator is fed through (NULL: /dev/urandom);
 * for unit tests, which must not feed the machine's. */
void identity_set_device(const char *path);

/* The id's text: lowercase hex, NUL-terminated (exposed for unit tests). */
void identity_format_id(const uint8_t id[IDENTITY_ID_BYTES], char out[IDENTITY_ID_HEX + 1]);
/* Whether text is an id as identity_format_id writes it. */
bool identity_id_valid(const char *text);

#endif
