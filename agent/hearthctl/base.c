/* hearthctl's base: what every other file of the folder uses and that
 * calls none of them back: the exits on running out of memory and on a
 * reply that is not what the protocol says, the SIGINT flag, guest text
 * escaped on its way to the host's terminal, and what every params
 * builder uses (commands.c's, cp.c's): the usage error and the params
 * object's makers. */
#include "ctl.h"
#include "termsafe.h"

#include <stdlib.h>
#include <string.h>

volatile sig_atomic_t base_got_sigint;

void base_die_oom(void)
{
    fputs("hearthctl: out of memory\n", stderr);
    exit(EXIT_USAGE);
}

int base_bad_reply(const struct ctl *t, const char *why)
{
    fprintf(stderr, "hearthctl: bad reply from %s: %s\n", t->conn.spec, why);
    return EXIT_USAGE;
}

/* Every guest-provided string hearthctl prints in human form passes
 * here, through termsafe's one escaper: no C0 or C1 control, DEL or
 * broken UTF-8 reaches the operator's terminal (a compromised guest
 * could otherwise retitle the window, move the cursor, rewrite what was
 * printed before or answer back into the terminal's input). */
void base_put_text(FILE *f, const char *s, unsigned keep)
{
    size_t len = strlen(s);

    for (size_t i = 0; i < len;) {
        char e[TERMSAFE_ESC_MAX];
        size_t used, l = termsafe_step(s + i, len - i, keep, e, &used, NULL);

        fwrite(e, 1, l, f);
        i += used;
    }
}

void base_put_safe(FILE *f, const char *s)
{
    base_put_text(f, s, 0);
}

/* ---- params builders' pieces ------------------------------------------ */

static void cmd_usage(const struct cmd *c)
{
    fprintf(stderr, "usage: hearthctl [OPTIONS] %s%s%s\n", c->name, c->args[0] ? " " : "",
            c->args);
}

int base_usage_err(const struct ctl *t, const char *fmt, const char *what)
{
    fputs("hearthctl: ", stderr);
    fputs(t->cmd->name, stderr);
    fputs(": ", stderr);
    fprintf(stderr, fmt, what);
    fputc('\n', stderr);
    cmd_usage(t->cmd);
    return EXIT_USAGE;
}

cJSON *base_new_object(void)
{
    cJSON *o = cJSON_CreateObject();

    if (!o)
        base_die_oom();
    return o;
}

void base_add_str(cJSON *o, const char *k, const char *v)
{
    if (!cJSON_AddStringToObject(o, k, v))
        base_die_oom();
}

void base_add_num(cJSON *o, const char *k, double v)
{
    if (!cJSON_AddNumberToObject(o, k, v))
        base_die_oom();
}
