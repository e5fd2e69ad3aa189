/* err: see err.h. */
#include "err.h"

#include <stdio.h>
#include <string.h>

int err_vset(struct err *e, const char *fmt, va_list ap)
{
    if (e) {
        vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
        e->code = 0;
    }
    return -1;
}

int err_set(struct err *e, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    err_vset(e, fmt, ap);
    va_end(ap);
    return -1;
}

int err_unable(struct err *e, int errnum, const char *fmt, ...)
{
    va_list ap;

    if (!e)
        return -1;
    size_t n = sizeof("unable to ") - 1;
    memcpy(e->msg, "unable to ", n + 1);
    va_start(ap, fmt);
    int w = vsnprintf(e->msg + n, sizeof(e->msg) - n, fmt, ap);
    va_end(ap);
    if (w > 0)
        n += (size_t)w;
    if (errnum && n < sizeof(e->msg) - 1)
        snprintf(e->msg + n, sizeof(e->msg) - n, ": %s", strerror(errnum));
    e->code = errnum;
    return -1;
}

int err_wrap(struct err *e, const char *fmt, ...)
{
    va_list ap;
    char prev[sizeof(e->msg)];

    if (!e)
        return -1;
    /* The previous message is copied out first: the new one is written
     * over it. */
    memcpy(prev, e->msg, sizeof(prev));
    prev[sizeof(prev) - 1] = '\0';
    va_start(ap, fmt);
    int w = vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
    va_end(ap);
    size_t n = w > 0 ? (size_t)w : 0;
    if (n < sizeof(e->msg) - 1)
        snprintf(e->msg + n, sizeof(e->msg) - n, ": %s", prev);
    return -1;
}

int err_field(struct err *e, const char *path, const char *fmt, ...)
{
    va_list ap;

    if (!e)
        return -1;
    int w = snprintf(e->msg, sizeof(e->msg), "%s: ", path);
    size_t n = w > 0 ? (size_t)w : 0;
    if (n < sizeof(e->msg) - 1) {
        va_start(ap, fmt);
        vsnprintf(e->msg + n, sizeof(e->msg) - n, fmt, ap);
        va_end(ap);
    }
    e->code = 0;
    return -1;
}

int err_copy(struct err *e, const struct err *cause)
{
    if (e && e != cause) {
        if (cause)
            *e = *cause;
        else {
            e->msg[0] = '\0';
            e->code = 0;
        }
    }
    return -1;
}
