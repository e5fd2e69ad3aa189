/* sandbox_priv: what sandbox.c shares with resume.c, the other file of the
 * sandbox module: moving the state, the step rows of a freeze or resume
 * report, and the periodic clock check's period. */
#ifndef HEARTH_SANDBOX_PRIV_H
#define HEARTH_SANDBOX_PRIV_H

#include <stdint.h>

#include "sandbox.h"

struct cJSON;

/* Moves to s and logs it; frozen is noted in the resume news file. */
void sandbox_set_state(enum sandbox_state s);
/* Appends {"name","result","ms"[,"detail"]} to steps; returns the row. */
struct cJSON *sandbox_step_row(struct cJSON *steps, const char *name, const char *result,
                               double ms, const char *detail);
/* Milliseconds since t0_ns (mono_ns). */
double sandbox_ms_since(int64_t t0_ns);
/* clock.check_ms: the period of the hardware clock comparison. */
int64_t sandbox_clock_check_ms(void);
/* clock.detect_step_ms: a wall-clock step larger than this, made by
 * someone else, is a resume (0: not watched). */
int64_t sandbox_clock_detect_step_ms(void);

#endif
