#include "prom.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include <cJSON.h>

#include "termsafe.h"

/* A label value or HELP text with the format's escapes. HELP escapes
 * backslash and newline only; label values also the double quote. The
 * format has no escape for other controls: what termsafe would escape
 * (C0, C1, DEL, broken UTF-8, any of them a guest's) is written U+FFFD,
 * so a scrape stays valid and a terminal showing it safe. */
static void put_escaped(FILE *f, const char *s, bool quote)
{
    size_t len = strlen(s);

    for (size_t i = 0; i < len;) {
        char e[TERMSAFE_ESC_MAX];
        size_t used;
        bool esc;
        size_t l = termsafe_step(s + i, len - i, TERMSAFE_NL, e, &used, &esc);

        if (s[i] == '\\')
            fputs("\\\\", f);
        else if (s[i] == '\n')
            fputs("\\n", f);
        else if (s[i] == '"' && quote)
            fputs("\\\"", f);
        else if (esc)
            fputs("\xef\xbf\xbd", f);
        else
            fwrite(e, 1, l, f);
        i += used;
    }
}

static void put_value(FILE *f, double v)
{
    if (isnan(v))
        fputs("NaN", f);
    else if (v == floor(v) && fabs(v) < 1e15)
        fprintf(f, "%.0f", v);
    else
        fprintf(f, "%.17g", v);
}

struct fam {
    const char *name, *type, *help;
};

static void head(FILE *f, const struct fam *m)
{
    fprintf(f, "# HELP %s ", m->name);
    put_escaped(f, m->help, false);
    fprintf(f, "\n# TYPE %s %s\n", m->name, m->type);
}

/* One sample; labels are name/value pairs ending with NULL. Counter
 * names carry their _total suffix in the HELP and TYPE lines too, as the
 * text format 0.0.4 has them. */
static void sample(FILE *f, const struct fam *m, double v, const char *const *labels)
{
    fputs(m->name, f);
    if (labels && labels[0]) {
        fputc('{', f);
        for (size_t i = 0; labels[i]; i += 2) {
            fprintf(f, "%s%s=\"", i ? "," : "", labels[i]);
            put_escaped(f, labels[i + 1] ? labels[i + 1] : "", true);
            fputc('"', f);
        }
        fputc('}', f);
    }
    fputc(' ', f);
    put_value(f, v);
    fputc('\n', f);
}

static bool num(const cJSON *o, const char *k, double *v)
{
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!cJSON_IsNumber(n))
        return false;
    *v = n->valuedouble;
    return true;
}

static const char *str(const cJSON *o, const char *k)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(s) ? s->valuestring : "";
}

/* A family over the members of an array of objects: one sample per
 * element that has the member (scale applied), labelled by label_keys. */
static void per_item(FILE *f, const struct fam *m, const cJSON *arr, const char *member,
                     double scale, const char *label, const char *label_key, const char *label2,
                     const char *label2_key)
{
    const cJSON *it;
    bool any = false;
    cJSON_ArrayForEach(it, arr) {
        double v;
        if (!num(it, member, &v))
            continue;
        if (!any)
            head(f, m);
        any = true;
        const char *labels[] = {label, str(it, label_key), label2,
                                label2 ? str(it, label2_key) : NULL, NULL};
        sample(f, m, v * scale, labels);
    }
}

static void scalar(FILE *f, const struct fam *m, const cJSON *o, const char *member, double scale)
{
    double v;
    if (!num(o, member, &v))
        return;
    head(f, m);
    sample(f, m, v * scale, NULL);
}

static void egress(FILE *f, const cJSON *counters)
{
    static const struct fam pk = {"hearth_egress_packets_total", "counter",
                                  "Packets counted by an egress rule (layer inet or netdev)."};
    static const struct fam by = {"hearth_egress_bytes_total", "counter",
                                  "Bytes counted by an egress rule (layer inet or netdev)."};
    const struct fam *fams[] = {&pk, &by};
    const char *members[] = {"packets", "bytes"};
    const cJSON *nd = cJSON_GetObjectItemCaseSensitive(counters, "netdev"), *it;

    if (!cJSON_IsObject(counters))
        return;
    for (size_t k = 0; k < 2; k++) {
        head(f, fams[k]);
        for (int layer = 0; layer < 2; layer++) {
            const cJSON *set = layer ? nd : counters;
            cJSON_ArrayForEach(it, set) {
                double v;
                if (!cJSON_IsObject(it) || !it->string || !num(it, members[k], &v))
                    continue;
                if (!layer && strcmp(it->string, "netdev") == 0)
                    continue;
                const char *labels[] = {"layer", layer ? "netdev" : "inet", "rule", it->string,
                                        NULL};
                sample(f, fams[k], v, labels);
            }
        }
    }
}

int prom_write(FILE *f, const cJSON *r)
{
    static const struct fam mem_total = {"hearth_memory_total_bytes", "gauge",
                                         "Guest memory (MemTotal)."};
    static const struct fam mem_avail = {"hearth_memory_available_bytes", "gauge",
                                         "Guest memory available (MemAvailable)."};
    static const struct fam mem_free = {"hearth_memory_free_bytes", "gauge",
                                        "Guest memory free (MemFree)."};
    static const struct fam m_total = {"hearth_mount_size_bytes", "gauge",
                                       "Size of a configured mount's filesystem."};
    static const struct fam m_used = {"hearth_mount_used_bytes", "gauge",
                                      "Bytes used on a configured mount."};
    static const struct fam m_avail = {"hearth_mount_avail_bytes", "gauge",
                                       "Bytes available to unprivileged users on a mount."};
    static const struct fam i_total = {"hearth_mount_inodes", "gauge",
                                       "Inodes of a configured mount's filesystem."};
    static const struct fam i_used = {"hearth_mount_inodes_used", "gauge",
                                      "Inodes used on a configured mount."};
    static const struct fam m_pct = {"hearth_mount_used_percent", "gauge",
                                     "The larger of the bytes and inodes used, in percent."};
    static const struct fam m_low = {"hearth_mount_low", "gauge",
                                     "1 while disk.low holds for a writable mount."};
    static const struct fam m_up = {"hearth_mount_probe_ok", "gauge",
                                    "1 when the mount's statvfs answered in time."};
    static const struct fam s_cpu = {"hearth_service_cpu_seconds_total", "counter",
                                     "CPU time used by a service's cgroup (cpu.stat usage_usec)."};
    static const struct fam s_mem = {"hearth_service_memory_bytes", "gauge",
                                     "Memory charged to a service's cgroup (memory.current)."};
    static const struct fam s_pids = {"hearth_service_pids", "gauge",
                                      "Tasks in a service's cgroup (pids.current)."};
    static const struct fam s_rd = {"hearth_service_io_read_bytes_total", "counter",
                                    "Bytes a service's cgroup read from block devices (io.stat)."};
    static const struct fam s_wr = {"hearth_service_io_write_bytes_total", "counter",
                                    "Bytes a service's cgroup wrote to block devices (io.stat)."};
    static const struct fam h_rss = {"hearth_resident_memory_bytes", "gauge",
                                     "hearth's own resident memory."};
    static const struct fam h_fds = {"hearth_open_fds", "gauge", "hearth's open file descriptors."};
    static const struct fam h_mnt = {"hearth_mounts", "gauge",
                                     "Mounts in hearth's mount namespace."};
    static const struct fam h_kids = {"hearth_child_processes", "gauge",
                                      "hearth's child processes."};
    static const struct fam h_cg = {"hearth_cgroups", "gauge", "Cgroups in hearth's tree."};
    static const struct fam h_cl = {"hearth_control_clients", "gauge",
                                    "Control clients connected to hearth."};
    static const struct fam h_up = {"hearth_uptime_seconds", "gauge", "Time since hearth started."};

    if (!cJSON_IsObject(r))
        return -1;
    const cJSON *mem = cJSON_GetObjectItemCaseSensitive(r, "memory");
    const cJSON *mounts = cJSON_GetObjectItemCaseSensitive(r, "mounts");
    const cJSON *svcs = cJSON_GetObjectItemCaseSensitive(r, "services");
    const cJSON *self = cJSON_GetObjectItemCaseSensitive(r, "hearth");
    const cJSON *eg = cJSON_GetObjectItemCaseSensitive(r, "egress");

    scalar(f, &mem_total, mem, "total_bytes", 1);
    scalar(f, &mem_avail, mem, "available_bytes", 1);
    scalar(f, &mem_free, mem, "free_bytes", 1);
    per_item(f, &m_total, mounts, "bytes_total", 1, "target", "target", "type", "type");
    per_item(f, &m_used, mounts, "bytes_used", 1, "target", "target", "type", "type");
    per_item(f, &m_avail, mounts, "bytes_avail", 1, "target", "target", "type", "type");
    per_item(f, &i_total, mounts, "inodes_total", 1, "target", "target", "type", "type");
    per_item(f, &i_used, mounts, "inodes_used", 1, "target", "target", "type", "type");
    per_item(f, &m_pct, mounts, "used_percent", 1, "target", "target", "type", "type");
    /* Booleans as 0/1 gauges, one sample per mount. */
    const cJSON *it;
    bool any = false;
    cJSON_ArrayForEach(it, mounts) {
        if (!any)
            head(f, &m_up);
        any = true;
        const char *labels[] = {"target", str(it, "target"), "type", str(it, "type"), NULL};
        sample(f, &m_up, cJSON_GetObjectItemCaseSensitive(it, "error") ? 0 : 1, labels);
    }
    any = false;
    cJSON_ArrayForEach(it, mounts) {
        const cJSON *low = cJSON_GetObjectItemCaseSensitive(it, "low");
        if (!cJSON_IsBool(low))
            continue;
        if (!any)
            head(f, &m_low);
        any = true;
        const char *labels[] = {"target", str(it, "target"), "type", str(it, "type"), NULL};
        sample(f, &m_low, cJSON_IsTrue(low) ? 1 : 0, labels);
    }
    per_item(f, &s_cpu, svcs, "cpu_usec", 1e-6, "service", "name", NULL, NULL);
    per_item(f, &s_mem, svcs, "memory_bytes", 1, "service", "name", NULL, NULL);
    per_item(f, &s_pids, svcs, "pids", 1, "service", "name", NULL, NULL);
    per_item(f, &s_rd, svcs, "io_read_bytes", 1, "service", "name", NULL, NULL);
    per_item(f, &s_wr, svcs, "io_write_bytes", 1, "service", "name", NULL, NULL);
    egress(f, cJSON_GetObjectItemCaseSensitive(eg, "counters"));
    scalar(f, &h_rss, self, "rss_bytes", 1);
    scalar(f, &h_fds, self, "fds", 1);
    scalar(f, &h_mnt, self, "mounts", 1);
    scalar(f, &h_kids, self, "children", 1);
    scalar(f, &h_cg, self, "cgroups", 1);
    scalar(f, &h_cl, self, "clients", 1);
    scalar(f, &h_up, self, "uptime_ms", 1e-3);
    return 0;
}
