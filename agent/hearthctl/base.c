/* hearthctl's base: what every other file of the folder uses and that
 * calls none of them back: the exits on running out of memory and on a
 * reply that is not what the protocol says, the SIGINT flag, and guest
 * text escaped on its way to the host's terminal. */
#include "ctl.h"
#include "termsafe.h"

#include <stdlib.h>
#include <string.h>

volatile sig_atomic_t got_sigint;

void die_oom(void)
{
    fputs("hearthctl: out of memory\n", stderr);
    exit(EXIT_USAGE);
}

int bad_reply(const struct ctl *t, const char *why)
{
    fprintf(stderr, "hearthctl: bad reply from %s: %s\n", t->conn.spec, why);
    return EXIT_USAGE;
}

/* Every guest-provided string hearthctl prints in human form passes
 * here, through termsafe's one escaper: no C0 or C1 control, DEL or
 * broken UTF-8 reaches the operator's terminal (a compromised guest
 * could otherwise retitle the window, move the cursor, rewrite what was
 * printed before or answer back into the terminal's input). */
void put_text(FILE *f, const char *s, unsigned keep)
{
    size_t len = strlen(s);

    for (size_t i = 0; i < len;) {
        char e[TERMSAFE_ESC_MAX];
        size_t used, l = termsafe_step(s + i, len - i, keep, e, &used, NULL);

        fwrite(e, 1, l, f);
        i += used;
    }
}

void put_safe(FILE *f, const char *s)
{
    put_text(f, s, 0);
}
