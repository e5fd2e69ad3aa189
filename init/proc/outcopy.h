/* outcopy: in container mode, a copy of every captured service output
 * line on hearth's own stdout (stdout lines) or stderr (stderr lines),
 * prefixed "SERVICE: ", so the runtime's log (podman logs, kubectl logs)
 * shows what the services print. Redacted text only: the caller passes
 * what it keeps in the ring. The runtime's log is read on a terminal, so
 * each line is escaped on the way (termsafe.h: controls, C1, broken
 * UTF-8; tabs kept).
 *
 * Never blocks: the lines go through descriptors of their own opened
 * non-blocking; a line the runtime's pipe has no room for is dropped and
 * the drops are counted in a note before the next line that fits. */
#ifndef HEARTH_OUTCOPY_H
#define HEARTH_OUTCOPY_H

#include <stddef.h>

#include "logring.h"

void outcopy_line(const char *service, enum log_stream st, const char *text, size_t len);

#endif
