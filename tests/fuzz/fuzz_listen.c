/* fuzz_listen: the small string parsers of init/config/names.c that also take
 * text from outside the config file: control listen addresses
 * (names_parse_listen) and signal names (names_signal_number, used for
 * stop.signal, on_resume "signal:..." and service.signal requests).
 *
 * The input is one string (NUL-terminated heap copy; an embedded NUL ends
 * it early, as for any C caller).
 *
 * Checked beyond the sanitizers:
 *   - an accepted listen spec reproduces its input: the path after
 *     "unix:"/"serial:" exactly, or "vsock:%u" with a port in
 *     1..4294967294;
 *   - an error message is terminated, non-empty and printable ASCII
 *     (config quotes hostile values so they cannot forge log lines);
 *   - a signal number maps to a name that maps back to the number, and
 *     the name without its "SIG" prefix and in lower case works too. */
#include "config.h"

#include <ctype.h>

#include "err.h"
#include "fuzz_common.h"

static void check_listen(const char *s)
{
    struct listen_spec l;
    struct err err;
    int rc;

    memset(&l, 0x5a, sizeof(l));
    memset(err.msg, 'X', sizeof(err.msg));
    rc = names_parse_listen(s, &l, &err);
    if (rc < 0) {
        FUZZ_CHECK(rc == -1, "names_parse_listen returned %d", rc);
        FUZZ_CHECK(memchr(err.msg, '\0', sizeof(err.msg)) && err.msg[0], "bad err for %.80s", s);
        for (const char *p = err.msg; *p; p++)
            FUZZ_CHECK(*p >= 0x20 && *p < 0x7f, "unprintable byte 0x%02x in err: %s",
                       (unsigned char)*p, err.msg);
        /* A NULL err must be accepted too. */
        FUZZ_CHECK(names_parse_listen(s, NULL, NULL) == -1, "NULL err changed result");
        return;
    }
    FUZZ_CHECK(rc == 0, "names_parse_listen returned %d", rc);
    switch (l.kind) {
    case LISTEN_UNIX:
    case LISTEN_SERIAL: {
        const char *rest = strchr(s, ':') + 1;
        FUZZ_CHECK(strncmp(s, l.kind == LISTEN_UNIX ? "unix:" : "serial:",
                           l.kind == LISTEN_UNIX ? 5 : 7) == 0,
                   "kind %d for %s", l.kind, s);
        FUZZ_CHECK(memchr(l.path, '\0', sizeof(l.path)) != NULL, "path not terminated");
        FUZZ_CHECK(l.path[0] && strcmp(l.path, rest) == 0, "path %s for %s", l.path, s);
        break;
    }
    case LISTEN_VSOCK: {
        char again[32];
        FUZZ_CHECK(l.port >= 1 && l.port <= 0xfffffffeu, "vsock port %u", l.port);
        snprintf(again, sizeof(again), "vsock:%u", l.port);
        FUZZ_CHECK(strcmp(again, s) == 0, "%s parsed as port %u", s, l.port);
        break;
    }
    default:
        FUZZ_CHECK(0, "unknown kind %d for %s", l.kind, s);
    }
}

static void check_signal(const char *s)
{
    int sig = names_signal_number(s);
    const char *name;
    char lower[16];
    size_t i;

    if (sig == -1)
        return;
    FUZZ_CHECK(sig >= 1 && sig <= 64, "signal %d for %.80s", sig, s);
    name = names_signal_name(sig);
    FUZZ_CHECK(name && strncmp(name, "SIG", 3) == 0, "signal %d has no name", sig);
    FUZZ_CHECK(names_signal_number(name) == sig, "%s -> %d -> %s -> %d", s, sig, name,
               names_signal_number(name));
    FUZZ_CHECK(names_signal_number(name + 3) == sig, "bare %s not accepted", name + 3);
    for (i = 0; name[i] && i + 1 < sizeof(lower); i++)
        lower[i] = (char)tolower((unsigned char)name[i]);
    lower[i] = '\0';
    FUZZ_CHECK(names_signal_number(lower) == sig, "lower-case %s not accepted", lower);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fuzz_strndup(data, size);

    check_listen(s);
    check_signal(s);
    /* The same text after the prefixes the callers strip or add. */
    if (strncmp(s, "signal:", 7) == 0)
        check_signal(s + 7);
    free(s);
    return 0;
}
