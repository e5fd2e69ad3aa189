/* termsafe: text a guest wrote made safe for a terminal or a log line.
 *
 * A compromised guest chooses the bytes of every service name, log line,
 * error message and path it reports. Written raw to an operator's
 * terminal, ESC (OSC, CSI), the 8-bit C1 controls (0x9b is CSI on many
 * terminals, as a raw byte or as U+009B) and broken UTF-8 (which a
 * terminal may decode as C1) retitle the window, move the cursor, rewrite
 * what was printed before or answer back into the input. This is the one
 * escaper for such text, shared by hearthctl (every human form it prints)
 * and hearth (its own log lines, the copy of service output in container
 * mode):
 *
 *   C0 controls and DEL      \xNN (tab and newline only where asked)
 *   U+0080..U+009F (UTF-8)   \u0080..\u009f
 *   a byte that breaks UTF-8 \xNN (so a raw 0x9b is \x9b)
 *   anything else            itself (valid UTF-8 passes)
 *
 * Backslash is not escaped: the escaped text is for reading, not for
 * decoding back. Depends on utf8 alone; linked into hearthctl too. */
#ifndef HEARTH_TERMSAFE_H
#define HEARTH_TERMSAFE_H

#include <stdbool.h>
#include <stddef.h>

/* What may pass: a log line's body keeps its tabs; nothing else here
 * keeps a newline except a caller printing text meant to span lines. */
#define TERMSAFE_TAB 1u
#define TERMSAFE_NL 2u

/* The longest escape: "\u009b". */
#define TERMSAFE_ESC_MAX 6

/* The text standing for the character (or the byte that breaks UTF-8) at
 * s, len > 0 bytes left: written to out, its length returned (1 to
 * TERMSAFE_ESC_MAX when escaped, else the character's own length, up to
 * 4); *used is how many bytes of s it stands for. *escaped, when not
 * NULL, says whether it was escaped. */
size_t termsafe_step(const char *s, size_t len, unsigned keep, char out[TERMSAFE_ESC_MAX],
                     size_t *used, bool *escaped);

/* s[0..len) escaped into dst (n bytes, always NUL-terminated when
 * n > 0). A cut falls between escapes and characters, never inside one.
 * Returns the length the whole escaped text needs (without the NUL), as
 * snprintf does: a return >= n means it was cut. */
size_t termsafe_copy(char *dst, size_t n, const char *s, size_t len, unsigned keep);

/* Whether s[0..len) would pass termsafe_copy unchanged. */
bool termsafe_clean(const char *s, size_t len, unsigned keep);

/* JSON text from a printer that passes DEL and bytes >= 0x80 through as
 * they are (cJSON's), made safe for a terminal without changing what it
 * parses to where it was valid: DEL and U+0080..U+009F as \u007f and
 * \u0080..\u009f, each byte that breaks UTF-8 as \ufffd. Outside strings JSON text is ASCII, so the pass
 * needs no parse. A malloc'd string, or NULL when out of memory. */
char *termsafe_json(const char *json);

#endif
