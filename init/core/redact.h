/* redact: keeps secrets out of what hearth shows (config.get, status,
 * services.list, events, captured service output, its own log lines).
 *
 * Two rules. By name: an env variable whose name holds KEY, TOKEN,
 * SECRET, PASSWORD, CREDENTIAL, DSN, AUTH or PASS (any case) has its
 * value replaced; so has the value after a command-line flag with such a
 * name (--api-key X, --token=X). By value: every value handed over by
 * sandbox.init's env or read from a service's env_files is registered,
 * and wherever one of at least REDACT_MIN_VALUE bytes appears, inside any
 * text, it is replaced. The password of a URL with userinfo
 * (scheme://user:PASSWORD@host) is replaced wherever it appears. */
#ifndef HEARTH_REDACT_H
#define HEARTH_REDACT_H

#include <stdbool.h>
#include <stddef.h>

struct cJSON;

#define REDACT_MARK "<redacted>"
/* Shorter values are not looked for: "1" or "true" would blank out
 * every number and flag in the output. */
#define REDACT_MIN_VALUE 6
/* The registry's bounds (values, bytes); past them further values are not
 * registered, and the caller is told once. */
#define REDACT_MAX_VALUES 512
#define REDACT_MAX_BYTES (512 * 1024)

/* True when an env variable (or a flag) of this name holds a secret. */
bool redact_name_is_secret(const char *name);

/* Registers a secret value (copied); short, empty and known ones are
 * ignored. Returns NULL, or why a value could not be kept for the caller
 * to log (the registry full: only the first time; out of memory). The
 * caller logs it because the log itself redacts through this module. */
const char *redact_add_value(const char *value);
/* Forgets every registered value (unit tests). */
void redact_reset(void);
/* How many values are registered, and the length of the longest. */
size_t redact_count(void);
size_t redact_longest(void);

/* Copies in[0..len) to out (at most cap - 1 bytes, NUL-terminated) with
 * each registered value and each URL password replaced by REDACT_MARK.
 * Returns the length written, or (size_t)-1 when nothing had to change
 * (out is then untouched, so callers keep using in). */
size_t redact_text(const char *in, size_t len, char *out, size_t cap);

/* Replaces secrets in every string value of a JSON tree (keys are kept):
 * registered values and URL passwords everywhere, the whole value of an
 * "env" member whose name is secret, and the value after a secret flag in
 * an "argv" array. Fails closed: a string that cannot be rewritten is
 * emptied. */
void redact_json(struct cJSON *tree);

#endif
