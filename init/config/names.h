/* names: the name <-> number tables of hearth's config (signals,
 * capabilities, resource limits, the phases a service may wait for), the
 * control listen specs, and the quoting every config error uses for a
 * value it names. Pure lookups: no state, no I/O. */
#ifndef HEARTH_NAMES_H
#define HEARTH_NAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* Room for a quoted value in an error message (names_quote). */
#define NAMES_QUOTE_MAX 96
#define NAMES_ERR_MAX 512

enum listen_kind { LISTEN_UNIX, LISTEN_VSOCK, LISTEN_SERIAL };

struct listen_spec {
    enum listen_kind kind;
    char path[108];   /* unix socket path, or serial device path / port name */
    uint32_t port;    /* vsock port */
};

/* Quotes a value for an error message into buf (n >= 8): printable ASCII
 * as is, anything else as \xNN, cut after a bounded length, so a hostile
 * value can neither forge log lines nor crowd the path out. Returns buf. */
const char *names_quote(const char *s, char *buf, size_t n);
/* Strict unsigned decimal: digits only, no sign, no blanks, no leading
 * zeros, value <= max. */
bool names_parse_udec(const char *s, uint64_t max, uint64_t *out);

/* Parses "unix:PATH", "vsock:PORT" or "serial:PATH"; out may be NULL to
 * only check. */
int names_parse_listen(const char *s, struct listen_spec *out, struct err *err);
/* Signal by name ("SIGTERM", "TERM") or number; -1 when unknown. */
int names_signal_number(const char *name);
const char *names_signal_name(int sig);
/* Capability number for "CAP_NET_ADMIN" or "NET_ADMIN" (any case); -1
 * when unknown. */
int names_cap_number(const char *name);
/* RLIMIT_* resource for a rlimits key ("nofile", "nproc", ...); -1 when
 * unknown. */
int names_rlimit_number(const char *name);
/* The rlimits keys, ", "-separated, for an error message. */
void names_rlimit_names(char *buf, size_t n);
/* Whether an env name looks secret (redact_name_is_secret: contains KEY,
 * TOKEN, SECRET, PASSWORD, CREDENTIAL, DSN, AUTH or PASS, in any case):
 * such values are never shown. */
bool names_env_is_secret(const char *name);
/* Whether the len bytes at name are an environment variable name:
 * letters, digits and '_', not starting with a digit, not empty. The one
 * rule for config `env` keys, `env_files` lines and sandbox.init's env. */
bool names_env_valid(const char *name, size_t len);
/* The longest sysctl name hearth takes ("kernel.yama.ptrace_scope"). */
#define NAMES_SYSCTL_MAX 128
/* Maps a sysctl name to its file: "kernel.yama.ptrace_scope" ->
 * "<root>/kernel/yama/ptrace_scope". A name is components of letters,
 * digits, '_' and '-' joined by single dots: no '/', no empty component,
 * so no "..", and nothing outside root. 0, or -1 (a bad name, or a path
 * longer than len; errno EINVAL or ENAMETOOLONG). */
int names_sysctl_path(const char *root, const char *name, char *buf, size_t len);
/* Lifecycle phases a service may be "after", NULL-terminated. */
extern const char *const names_after_phases[];

#endif
