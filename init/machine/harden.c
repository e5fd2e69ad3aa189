#include "harden.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>

#include "kfile.h"
#include "log.h"

/* The baseline, in the order it is written (docs/security.md, "The
 * kernel's helpers and the sysctl baseline"). A helper row is one whose
 * loosening lets the kernel run a program as full root again. */
static const struct baseline {
    const char *name, *value;
    bool helper;
} baseline[] = {
    /* request_module() runs nothing when the path is empty: a socket of
     * an unknown family or a missing device no longer execs
     * /sbin/modprobe. hearth loads its modules itself (finit_module). */
    {"kernel.modprobe", "", true},
    /* The uevent helper, run on every device event where it is set. */
    {"kernel.hotplug", "", true},
    /* Whatever helper still runs gets no capability (two 32-bit words). */
    {"kernel.usermodehelper.bset", "0\t0", true},
    {"kernel.usermodehelper.inheritable", "0\t0", true},
    /* A plain path, no "|program": no core is written either, since the
     * kernel dumps only into a new regular file and /dev/null exists. */
    {"kernel.core_pattern", "/dev/null", true},
    {"fs.suid_dumpable", "0", true},
    /* Attach only to one's own descendants: the agent's strace and gdb
     * keep working, nothing reaches another service or hearth. */
    {"kernel.yama.ptrace_scope", "1", false},
    {"kernel.kptr_restrict", "2", false},
    {"kernel.dmesg_restrict", "1", false},
    /* 1 is final until reboot (2 could be lowered again). */
    {"kernel.unprivileged_bpf_disabled", "1", false},
    /* 3 where the kernel knows it (Debian's), else read as 2. */
    {"kernel.perf_event_paranoid", "3", false},
    {"kernel.kexec_load_disabled", "1", false},
    {"vm.unprivileged_userfaultfd", "0", false},
    {"dev.tty.ldisc_autoload", "0", false},
    {"fs.protected_symlinks", "1", false},
    {"fs.protected_hardlinks", "1", false},
    {"fs.protected_fifos", "2", false},
    {"fs.protected_regular", "2", false},
};

#define BASELINE_N (sizeof(baseline) / sizeof(baseline[0]))
_Static_assert(BASELINE_N <= HARDEN_ROWS_MAX - SYSCTL_CFG_MAX, "HARDEN_ROWS_MAX too small");

static struct harden_row rows[HARDEN_ROWS_MAX];
static size_t nrows;
static bool own;

static const struct sysctl_entry *config_entry(const struct sysctl_cfg *cfg, const char *name)
{
    for (size_t i = 0; cfg && i < cfg->n; i++)
        if (strcmp(cfg->v[i].name, name) == 0)
            return &cfg->v[i];
    return NULL;
}

static void row_init(struct harden_row *r, const char *name, const char *value, bool from_config)
{
    memset(r, 0, sizeof(*r));
    snprintf(r->name, sizeof(r->name), "%s", name);
    r->has_wanted = value != NULL;
    snprintf(r->wanted, sizeof(r->wanted), "%s", value ? value : "");
    r->from_config = from_config;
    r->state = HARDEN_PENDING;
}

size_t harden_plan(const struct sysctl_cfg *cfg, bool own_kernel, struct harden_row *out,
                   size_t max)
{
    size_t n = 0;

    for (size_t i = 0; own_kernel && i < BASELINE_N && n < max; i++) {
        const struct baseline *b = &baseline[i];
        const struct sysctl_entry *e = config_entry(cfg, b->name);
        struct harden_row *r = &out[n++];
        row_init(r, b->name, e ? e->value : b->value, e != NULL);
        r->loosened = e && b->helper && (!e->value || strcmp(e->value, b->value) != 0);
    }
    for (size_t i = 0; cfg && i < cfg->n && n < max; i++) {
        bool in_baseline = false;
        for (size_t k = 0; own_kernel && k < BASELINE_N; k++)
            in_baseline |= strcmp(baseline[k].name, cfg->v[i].name) == 0;
        if (!in_baseline)
            row_init(&out[n++], cfg->v[i].name, cfg->v[i].value, true);
    }
    return n;
}

/* The kernel's text with its trailing newline gone and every run of
 * blanks made one space, so "0\t0" and "0 0" read alike. */
static void normalise(const char *in, char *out, size_t len)
{
    size_t o = 0;
    bool blank = false;

    for (const char *p = in; *p && o + 1 < len; p++) {
        if (*p == ' ' || *p == '\t' || *p == '\n') {
            blank = true;
            continue;
        }
        if (blank && o)
            out[o++] = ' ';
        blank = false;
        if (o + 1 < len)
            out[o++] = *p;
    }
    out[o] = '\0';
}

/* Reads the sysctl into r->value (normalised). 0, or -1 with errno. */
static int read_back(const char *path, struct harden_row *r)
{
    char buf[SYSCTL_VALUE_MAX + 2];
    if (kfile_read(path, buf, sizeof(buf)) < 0)
        return -1;
    normalise(buf, r->value, sizeof(r->value));
    r->has_value = true;
    return 0;
}

static bool matches(const struct harden_row *r)
{
    char want[SYSCTL_VALUE_MAX + 1];
    normalise(r->wanted, want, sizeof(want));
    return r->has_value && strcmp(want, r->value) == 0;
}

static int write_value(const char *path, const char *value)
{
    char line[SYSCTL_VALUE_MAX + 2];
    snprintf(line, sizeof(line), "%s\n", value);
    return kfile_write(path, line);
}

static void apply_row(const char *root, struct harden_row *r)
{
    char path[512], q[NAMES_QUOTE_MAX];

    if (names_sysctl_path(root, r->name, path, sizeof(path)) < 0) {
        /* The schema refused such names already; a row is never trusted. */
        r->state = HARDEN_FAILED;
        snprintf(r->error, sizeof(r->error), "bad sysctl name");
        return;
    }
    int rc = read_back(path, r);
    if (rc < 0 && errno == ENOENT) {
        r->state = HARDEN_ABSENT;
        log_debug("sysctl %s: absent from this kernel; skipped", r->name);
        return;
    }
    if (!r->has_wanted) {
        r->state = rc == 0 ? HARDEN_KEPT : HARDEN_FAILED;
        if (rc < 0)
            snprintf(r->error, sizeof(r->error), "unable to read: %s", strerror(errno));
        return;
    }
    if (rc == 0 && matches(r)) {
        r->state = HARDEN_APPLIED;
        r->already = true;
        return;
    }
    /* A sysctl that cannot be read (write-only) is still written. */
    if (write_value(path, r->wanted) < 0) {
        r->state = errno == ENOENT ? HARDEN_ABSENT : HARDEN_FAILED;
        if (r->state == HARDEN_FAILED) {
            snprintf(r->error, sizeof(r->error), "unable to write %s: %s",
                     names_quote(r->wanted, q, sizeof(q)), strerror(errno));
            read_back(path, r);
        }
        return;
    }
    r->has_value = false;
    if (read_back(path, r) < 0 && errno != EACCES) {
        r->state = HARDEN_FAILED;
        snprintf(r->error, sizeof(r->error), "unable to read back: %s", strerror(errno));
        return;
    }
    if (r->has_value && !matches(r)) {
        r->state = HARDEN_FAILED;
        snprintf(r->error, sizeof(r->error), "read back %s",
                 names_quote(r->value, q, sizeof(q)));
        return;
    }
    r->state = HARDEN_APPLIED;
}

int harden_apply(const char *root, const struct sysctl_cfg *cfg, bool own_kernel)
{
    char q[NAMES_QUOTE_MAX];
    int failed = 0, absent = 0, applied = 0;

    own = own_kernel;
    nrows = harden_plan(cfg, own_kernel, rows, HARDEN_ROWS_MAX);
    if (!own_kernel && !nrows) {
        log_info("sysctl: the kernel is not hearth's in this mode; no baseline set");
        return 0;
    }
    for (size_t i = 0; i < nrows; i++) {
        struct harden_row *r = &rows[i];
        if (r->loosened)
            log_warn("sysctl %s: %s by the config, loosening the baseline: the kernel may run "
                     "a program as full root",
                     r->name, r->has_wanted ? names_quote(r->wanted, q, sizeof(q)) : "kept");
        apply_row(root ? root : "/proc/sys", r);
        if (r->state == HARDEN_FAILED) {
            log_warn("sysctl %s: %s", r->name, r->error);
            failed++;
        }
        absent += r->state == HARDEN_ABSENT;
        applied += r->state == HARDEN_APPLIED;
    }
    log_info("sysctl: %s%d applied, %d absent, %d failed", own_kernel ? "baseline: " : "",
             applied, absent, failed);
    return failed;
}

static const char *const state_names[] = {"pending", "applied", "kept", "absent", "failed"};

cJSON *harden_json(void)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddBoolToObject(o, "baseline", own);
    if (!own)
        cJSON_AddStringToObject(o, "reason", "the kernel is not hearth's in this mode");
    cJSON *a = cJSON_AddArrayToObject(o, "entries");
    for (size_t i = 0; a && i < nrows; i++) {
        const struct harden_row *r = &rows[i];
        cJSON *e = cJSON_CreateObject();
        if (!e)
            break;
        cJSON_AddStringToObject(e, "name", r->name);
        if (r->has_wanted)
            cJSON_AddStringToObject(e, "wanted", r->wanted);
        if (r->has_value)
            cJSON_AddStringToObject(e, "value", r->value);
        cJSON_AddStringToObject(e, "state", state_names[r->state]);
        cJSON_AddStringToObject(e, "from", r->from_config ? "config" : "baseline");
        if (r->error[0])
            cJSON_AddStringToObject(e, "error", r->error);
        if (r->already)
            cJSON_AddBoolToObject(e, "already", 1);
        if (r->loosened)
            cJSON_AddBoolToObject(e, "loosened", 1);
        cJSON_AddItemToArray(a, e);
    }
    return o;
}

int harden_oom_protect(void)
{
    int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC | O_NOCTTY);
    ssize_t w = -1;
    if (fd >= 0) {
        w = write(fd, "-1000", 5);
        int e = errno;
        close(fd);
        errno = e;
    }
    if (w == 5)
        return 0;
    log_info("unable to set hearth's oom_score_adj to -1000: %s; the OOM killer may pick it",
             strerror(errno));
    return -1;
}
