/* err: the one carrier of a failure's message up the call chain.
 *
 * A message reads `subject: unable to X: reason` (docs/architecture.md,
 * Conventions): the layer that fails writes `unable to X: reason`, each
 * caller that hands it up puts its own subject in front (err_wrap), and a
 * refused value names its field (err_field). Every helper returns -1, so
 * a failure is one line:
 *
 *     return err_unable(e, errno, "open %s", path);
 *
 * Every helper takes NULL for e (the caller does not want the text) and
 * cuts a message at ERR_MAX - 1 bytes, never mid-way through the NUL. */
#ifndef HEARTH_ERR_H
#define HEARTH_ERR_H

#include <stdarg.h>

/* The longest messages are a refused config value with its field path and
 * a reason that itself wraps a lower one (a mount's, a skill's); 1 KiB
 * holds all of them. */
#define ERR_MAX 1024

struct err {
    char msg[ERR_MAX];
    int code;   /* the errno of the first cause, 0 if there is none */
};

/* "unable to <fmt>: <strerror(errnum)>"; errnum 0: "unable to <fmt>"
 * alone. Sets code to errnum. */
int err_unable(struct err *e, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A message that is not an "unable to": a refused value without a field,
 * a state. Leaves code 0. */
int err_set(struct err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int err_vset(struct err *e, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/* "<fmt>: <the message e holds>"; code is kept. */
int err_wrap(struct err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* "<path>: <fmt>", for a refused value: path names its field
 * (services[0].after[1]). Leaves code 0. */
int err_field(struct err *e, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Copies cause into e (e and cause may be the same, either NULL). */
int err_copy(struct err *e, const struct err *cause);

/* The message, "" for NULL: for a caller that logs what it may not have
 * asked for. */
static inline const char *err_msg(const struct err *e)
{
    return e ? e->msg : "";
}

#endif
