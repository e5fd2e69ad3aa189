/* harden: what hearth sets in the kernel against its own services before
 * the first one starts. In vm mode hearth owns the kernel and writes a
 * baseline of sysctls: the kernel's helpers (module loading, hotplug,
 * core dumps), which run a program as full root outside every namespace,
 * cgroup and seccomp filter, are pointed at nothing and stripped of
 * capabilities, and the usual restrictions on pointers, the kernel log,
 * BPF, perf, ptrace, kexec and links in sticky directories are set. The
 * config's `sysctl` section overrides an entry (null leaves the kernel's
 * value) or adds its own; in container and supervisor modes only those
 * are written. Also hearth's own oom_score_adj (-1000) in every mode. */
#ifndef HEARTH_HARDEN_H
#define HEARTH_HARDEN_H

#include <stdbool.h>
#include <stddef.h>

#include "names.h"
#include "sections.h"

struct cJSON;

/* Baseline rows plus the config's own keys. */
#define HARDEN_ROWS_MAX (32 + SYSCTL_CFG_MAX)

enum harden_state {
    HARDEN_PENDING, /* planned, not applied yet */
    HARDEN_APPLIED, /* written (or already so) and read back as wanted */
    HARDEN_KEPT,    /* null in the config: the kernel's value left alone */
    HARDEN_ABSENT,  /* the kernel has no such sysctl (not built in) */
    HARDEN_FAILED,  /* refused, or read back otherwise: see error */
};

struct harden_row {
    char name[NAMES_SYSCTL_MAX + 1];
    char wanted[SYSCTL_VALUE_MAX + 1];
    char value[SYSCTL_VALUE_MAX + 1]; /* read back; "" with has_value false when unread */
    char error[160];
    bool has_wanted;  /* false: kept (null in the config) */
    bool has_value;
    bool from_config; /* named in the config (an override or the operator's own) */
    bool loosened;    /* a helper row set back from the baseline by the config */
    bool already;     /* the kernel held the wanted value: nothing written */
    enum harden_state state;
};

/* The rows to apply, without touching the kernel: with own_kernel the
 * baseline in its order, each overridden by a config entry of the same
 * name, then the config's other entries; without it the config's entries
 * alone. Returns the number of rows (at most max). */
size_t harden_plan(const struct sysctl_cfg *cfg, bool own_kernel, struct harden_row *rows,
                   size_t max);

/* Plans and applies the rows under root (NULL: /proc/sys): each read
 * first and written only when it differs, then read back. Logs a
 * loosened row as a warning, a failure as a warning, an absent one at
 * debug; keeps the rows for harden_json. Returns the number of failures. */
int harden_apply(const char *root, const struct sysctl_cfg *cfg, bool own_kernel);

/* status.sysctl: {baseline: bool, reason?, entries: [{name, wanted?,
 * value?, state, from, error?, already?, loosened?}]} of the last apply. */
struct cJSON *harden_json(void);

/* Sets hearth's own oom_score_adj to -1000, so the OOM killer never
 * picks PID 1 (services get theirs back in launch.c). A failure (not
 * root) is logged at info, once. 0 or -1. */
int harden_oom_protect(void);

#endif
