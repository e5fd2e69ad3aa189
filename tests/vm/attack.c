/* A hostile service for the VM tests: run by hearth, the guest's PID 1, it
 * tries the ways out of what hearth set up and reports one JSON line per
 * attempt on stdout ({"attack":NAME,"result":OUTCOME}), read back by the
 * test through logs.read. OUTCOME is "ok" when the attempt went through,
 * else the errno name. Every mode waits for /workspace/go (the test writes
 * it once it has its picture of hearth), ends with a "done" line and then
 * sleeps, so the service stays as hearth left it.
 *
 *   attack contained SOCK    a root service with the default settings
 *   attack privileged SOCK   one that keeps SYS_ADMIN, NET_ADMIN and
 *                            NET_RAW: the read-only /sys and the socket's
 *                            mask can be unmounted, the ruleset reached,
 *                            frames sent; the layers behind must hold
 *   attack forks             fork until the cgroup's pids.max says no
 *                            (or 64 children)
 *   attack hog MIB           touch MIB MiB of memory, 1 MiB at a time
 *   attack throttle MIB      the same, then report the leaf's memory.high
 *                            and memory.events
 *   attack vsock CID PORT    connect to hearth's vsock listener, send a
 *                            ping, report the reply line
 *   attack tick              print a numbered line every 100 ms, forever
 *   attack envd PORT...      a stand-in for the platform's envd (E2B's, on
 *                            TCP 49983 in every CubeSandbox template, no
 *                            access token): listens on every address of
 *                            each port and greets each connection with
 *                            "envd PORT\n"; starts at once, serves forever
 *   attack connect HOST PORT one connection, as the agent or the platform
 *                            would make it: reports it and the greeting,
 *                            exits 0 when a greeting came; starts at once
 *   attack clockback SEC     step the wall clock back by SEC seconds once
 *                            (needs CAP_SYS_TIME: caps_keep SYS_TIME), as
 *                            `date -s` by someone in the guest would
 *
 * Run under the name "hermes" (put at /usr/bin/hermes over the stand-in
 * agent) with the shipped argv, "gateway run ...", it is the shipped
 * Hermes service turned hostile (tests/vm/test_shipped_agent.py): it
 * answers the readiness and health probes on 127.0.0.1:8642 and :9119 as
 * the gateway would, waits for /workspace/go, reports who it is (uid,
 * gid, CapEff, CapPrm, NoNewPrivs, Seccomp) and what it can reach (the
 * image's /sbin and /etc, hearth's config, /root, its home, other pids,
 * the control channel, its /tmp), then goes on answering the probes.
 *
 * Run under the name "modprobe" (the kernel's module helper, planted by
 * the contained mode), it writes /workspace/modprobe-ran (hearth's view
 * of the share the test reads from the host) with its uid and
 * capabilities, and a line to /dev/kmsg: the proof that request_module
 * ran a program the service wrote.
 *
 * With ATTACK_NOW set in the environment a mode starts at once instead of
 * waiting for /workspace/go (a VM without shares).
 *
 * Kernel knobs and cgroup files are opened for writing, never written,
 * except the single pid written into cgroup.procs where the open already
 * got past the read-only mount: that write is the migration under test. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>
#include <linux/vm_sockets.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netpacket/packet.h>
#include <poll.h>
#include <linux/magic.h>
#include <sched.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PTRACE_ATTACH_REQ 16
/* linux/netfilter.h would bring linux/in.h, which clashes with musl's. */
#define NFPROTO_INET_ 1
#define NFPROTO_NETDEV_ 5
#define GO "/workspace/go"

static const char *errname(int e)
{
    static char buf[32];
    switch (e) {
    case EPERM: return "EPERM";
    case ENOENT: return "ENOENT";
    case EROFS: return "EROFS";
    case EACCES: return "EACCES";
    case EAGAIN: return "EAGAIN";
    case EBUSY: return "EBUSY";
    case EINVAL: return "EINVAL";
    case ENOSYS: return "ENOSYS";
    case ENXIO: return "ENXIO";
    case ENOTDIR: return "ENOTDIR";
    case EEXIST: return "EEXIST";
    case ENOBUFS: return "ENOBUFS";
    case ECONNREFUSED: return "ECONNREFUSED";
    case EOPNOTSUPP: return "EOPNOTSUPP";
    case EAFNOSUPPORT: return "EAFNOSUPPORT";
    case ENOSPC: return "ENOSPC";
    case ENOMEM: return "ENOMEM";
    default: snprintf(buf, sizeof(buf), "errno %d", e); return buf;
    }
}

static void report(const char *attack, const char *result)
{
    char line[4096];
    size_t n = (size_t)snprintf(line, sizeof(line), "{\"attack\":\"%s\",\"result\":\"", attack);
    for (const char *p = result; *p && n < sizeof(line) - 8; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '"' || c == '\\')
            n += (size_t)snprintf(line + n, sizeof(line) - n, "\\%c", c);
        else if (c < 0x20)
            n += (size_t)snprintf(line + n, sizeof(line) - n, "\\u%04x", c);
        else
            line[n++] = (char)c;
    }
    n += (size_t)snprintf(line + n, sizeof(line) - n, "\"}\n");
    /* One write per line: hearth reads the pipe as the lines come. */
    if (write(1, line, n) < 0)
        _exit(3);
}

static void outcome(const char *attack, int rc)
{
    report(attack, rc < 0 ? errname(errno) : "ok");
}

static void open_write(const char *attack, const char *path)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd >= 0)
        close(fd);
    outcome(attack, fd);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void wait_go(void)
{
    const char *go = getenv("ATTACK_GO");
    while (access(go ? go : GO, F_OK) != 0)
        sleep_ms(50);
}

static void rest(void)
{
    report("done", "ok");
    for (;;)
        pause();
}

static int read_text(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    if (n < 0)
        return -1;
    buf[n] = 0;
    return (int)n;
}

/* Whether cgroup.procs in dir lists pid. */
static int lists_pid(const char *dir, pid_t pid)
{
    char path[512], buf[8192];
    snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
    if (read_text(path, buf, sizeof(buf)) < 0)
        return 0;
    for (char *save = NULL, *t = strtok_r(buf, "\n", &save); t; t = strtok_r(NULL, "\n", &save))
        if (atoi(t) == pid)
            return 1;
    return 0;
}

/* Its own namespace says "0::/", but the cgroup2 mount still shows the
 * whole tree: the leaf is the directory whose cgroup.procs lists it. */
static int find_leaf(const char *dir, int depth, char *out, size_t len)
{
    if (lists_pid(dir, getpid())) {
        snprintf(out, len, "%s", dir);
        return 0;
    }
    if (depth == 0)
        return -1;
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    struct dirent *e;
    int rc = -1;
    while (rc < 0 && (e = readdir(d))) {
        char sub[512];
        if (e->d_type != DT_DIR || e->d_name[0] == '.')
            continue;
        snprintf(sub, sizeof(sub), "%s/%s", dir, e->d_name);
        rc = find_leaf(sub, depth - 1, out, len);
    }
    closedir(d);
    return rc;
}

static void dirname_of(const char *path, char *out, size_t len)
{
    snprintf(out, len, "%s", path);
    char *slash = strrchr(out, '/');
    if (slash && slash != out)
        *slash = 0;
}

static void own_cgroup(void)
{
    char buf[1024];
    if (read_text("/proc/self/cgroup", buf, sizeof(buf)) < 0) {
        report("own_cgroup", errname(errno));
        return;
    }
    char *l = strstr(buf, "0::");
    if (l)
        l[strcspn(l, "\n")] = 0;
    report("own_cgroup", l ? l : "no cgroup2 line");
}

static int connect_unix(const char *path)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

static void put_msg(char *buf, size_t *off, uint16_t type, uint16_t flags, uint32_t seq,
                    uint8_t family, uint16_t res_id, const char *table)
{
    struct nlmsghdr *h = (struct nlmsghdr *)(buf + *off);
    struct nfgenmsg *g = (struct nfgenmsg *)NLMSG_DATA(h);
    memset(h, 0, NLMSG_SPACE(sizeof(*g)));
    h->nlmsg_type = type;
    h->nlmsg_flags = NLM_F_REQUEST | flags;
    h->nlmsg_seq = seq;
    g->nfgen_family = family;
    g->version = NFNETLINK_V0;
    g->res_id = htons(res_id);
    h->nlmsg_len = NLMSG_LENGTH(sizeof(*g));
    if (table) {
        struct nlattr *a = (struct nlattr *)((char *)h + NLMSG_ALIGN(h->nlmsg_len));
        size_t n = strlen(table) + 1;
        a->nla_type = NFTA_TABLE_NAME;
        a->nla_len = (uint16_t)(NLA_HDRLEN + n);
        memcpy((char *)a + NLA_HDRLEN, table, n);
        memset((char *)a + NLA_HDRLEN + n, 0, NLA_ALIGN(a->nla_len) - a->nla_len);
        h->nlmsg_len = NLMSG_ALIGN(h->nlmsg_len) + NLA_ALIGN(a->nla_len);
    }
    *off += NLMSG_ALIGN(h->nlmsg_len);
}

/* One nf_tables transaction deleting table FAMILY hearth: "ok" only if
 * the kernel acknowledged the deletion, else the error it answered. */
static void nft_delete(const char *attack, uint8_t family)
{
    char buf[512] __attribute__((aligned(4)));
    size_t off = 0;
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
    if (fd < 0) {
        report(attack, errname(errno));
        return;
    }
    struct timeval tv = {3, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    put_msg(buf, &off, NFNL_MSG_BATCH_BEGIN, 0, 1, AF_UNSPEC, NFNL_SUBSYS_NFTABLES, NULL);
    put_msg(buf, &off, (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_DELTABLE, NLM_F_ACK, 2, family, 0,
            "hearth");
    put_msg(buf, &off, NFNL_MSG_BATCH_END, 0, 3, AF_UNSPEC, NFNL_SUBSYS_NFTABLES, NULL);
    struct sockaddr_nl k = {.nl_family = AF_NETLINK};
    if (sendto(fd, buf, off, 0, (struct sockaddr *)&k, sizeof(k)) < 0) {
        report(attack, errname(errno));
        close(fd);
        return;
    }
    const char *result = "no answer";
    for (int done = 0; !done;) {
        char in[8192] __attribute__((aligned(4)));
        ssize_t n = recv(fd, in, sizeof(in), 0);
        if (n <= 0)
            break;
        for (struct nlmsghdr *h = (struct nlmsghdr *)in; NLMSG_OK(h, (size_t)n);
             h = NLMSG_NEXT(h, n)) {
            if (h->nlmsg_type != NLMSG_ERROR)
                continue;
            struct nlmsgerr *e = (struct nlmsgerr *)NLMSG_DATA(h);
            if (e->error != 0) {
                result = errname(-e->error);
                done = 1;
                break;
            }
            if (h->nlmsg_seq == 2) {
                result = "ok";
                done = 1;
                break;
            }
        }
    }
    report(attack, result);
    close(fd);
}

/* The virtio-serial port hearth serves the host on, found as hearth
 * finds it (the image has no udev links). */
static int find_port(char *name, size_t len, char *devno, size_t dlen)
{
    DIR *d = opendir("/sys/class/virtio-ports");
    struct dirent *e;
    int rc = -1;
    while (d && rc < 0 && (e = readdir(d))) {
        char path[512], buf[128];
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "/sys/class/virtio-ports/%s/name", e->d_name);
        if (read_text(path, buf, sizeof(buf)) < 0 || strncmp(buf, "org.hearth.ctl", 14) != 0)
            continue;
        snprintf(path, sizeof(path), "/sys/class/virtio-ports/%s/dev", e->d_name);
        if (read_text(path, devno, dlen) < 0)
            continue;
        devno[strcspn(devno, "\n")] = 0;
        snprintf(name, len, "%s", e->d_name);
        rc = 0;
    }
    if (d)
        closedir(d);
    return rc;
}

static void try_mknod(const char *attack, unsigned maj, unsigned min)
{
    const char *path = "/tmp/hearth-attack-node";
    int rc = mknod(path, S_IFCHR | 0600, makedev(maj, min));
    outcome(attack, rc);
    if (rc == 0)
        unlink(path);
}

/* The OCI masked paths (contain_masked in init/contain/contain.c): each one as
 * this view shows it. A directory: "dir:N:FSTYPE:RO:CREATE" (N entries
 * besides . and .., FSTYPE "tmpfs" or "other", RO "ro" or "rw", CREATE
 * the outcome of creating a file in it); a file: "chr:MAJ:MIN:BYTES" or
 * "file:BYTES" (the bytes a read gives); absent: the errno name. */
static const char *const masked[] = {
    "/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
    "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/proc/interrupts",
    "/sys/firmware", "/sys/devices/virtual/powercap", NULL,
};

static void masked_paths(void)
{
    char attack[96], result[96], probe[128];
    struct stat st;

    for (const char *const *m = masked; *m; m++) {
        snprintf(attack, sizeof(attack), "masked:%s", *m);
        if (lstat(*m, &st) < 0) {
            report(attack, errname(errno));
            continue;
        }
        if (S_ISDIR(st.st_mode)) {
            struct statfs sf;
            int n = 0;
            DIR *d = opendir(*m);
            for (struct dirent *e; d && (e = readdir(d));)
                if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
                    n++;
            if (d)
                closedir(d);
            bool tmpfs = statfs(*m, &sf) == 0 && sf.f_type == TMPFS_MAGIC;
            bool ro = statfs(*m, &sf) == 0 && (sf.f_flags & ST_RDONLY);
            snprintf(probe, sizeof(probe), "%s/.hearth-probe", *m);
            int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
            const char *create = fd >= 0 ? "ok" : errname(errno);
            if (fd >= 0) {
                close(fd);
                unlink(probe);
            }
            snprintf(result, sizeof(result), "dir:%d:%s:%s:%s", n, tmpfs ? "tmpfs" : "other",
                     ro ? "ro" : "rw", create);
        } else {
            char buf[4096];
            ssize_t got = -1;
            int fd = open(*m, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
            if (fd >= 0) {
                got = read(fd, buf, sizeof(buf));
                close(fd);
            }
            if (S_ISCHR(st.st_mode))
                snprintf(result, sizeof(result), "chr:%u:%u:%zd", major(st.st_rdev),
                         minor(st.st_rdev), got);
            else
                snprintf(result, sizeof(result), "file:%zd", got);
        }
        report(attack, result);
    }
}

/* The value of a sysctl as the service reads it, trailing newline gone. */
static void report_sysctl(const char *name)
{
    char path[160], buf[300], key[96];
    snprintf(path, sizeof(path), "/proc/sys/%s", name);
    for (char *p = path + 10; *p; p++)
        if (*p == '.')
            *p = '/';
    snprintf(key, sizeof(key), "sysctl:%s", name);
    if (read_text(path, buf, sizeof(buf)) < 0) {
        report(key, errname(errno));
        return;
    }
    buf[strcspn(buf, "\n")] = 0;
    report(key, buf);
}

/* Copies this very program to path, executable: what the kernel would
 * run as its module helper. */
static int plant(const char *path)
{
    char buf[65536];
    int in = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return -1;
    unlink(path);
    int out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
    if (out < 0) {
        int e = errno;
        close(in);
        errno = e;
        return -1;
    }
    ssize_t n;
    int rc = 0;
    while ((n = read(in, buf, sizeof(buf))) > 0)
        if (write(out, buf, (size_t)n) != n) {
            rc = -1;
            break;
        }
    int e = errno;
    close(in);
    close(out);
    errno = e;
    return rc < 0 || n < 0 ? -1 : 0;
}

#define HELPER_MARK "/workspace/modprobe-ran"

/* The kernel's helpers: request_module() runs kernel.modprobe as root in
 * the first namespaces, and a crash runs a "|program" core_pattern. The
 * program is planted where the kernel would look (/sbin/modprobe, the
 * path kernel.modprobe names), then a socket of a family nothing
 * registered makes the kernel ask for net-pf-5. */
static void helpers(void)
{
    static const char *const knobs[] = {
        "kernel.modprobe", "kernel.hotplug", "kernel.usermodehelper.bset",
        "kernel.usermodehelper.inheritable", "kernel.core_pattern", "fs.suid_dumpable",
        "kernel.yama.ptrace_scope", "kernel.kptr_restrict", "kernel.dmesg_restrict",
        "kernel.unprivileged_bpf_disabled", "kernel.perf_event_paranoid",
        "kernel.kexec_load_disabled", "fs.protected_symlinks", "fs.protected_regular", NULL};
    char mp[300];

    for (const char *const *k = knobs; *k; k++)
        report_sysctl(*k);
    /* /proc/sys is read-only: kernel.modprobe stays what hearth set. */
    open_write("write_modprobe_sysctl", "/proc/sys/kernel/modprobe");
    outcome("plant_sbin_modprobe", plant("/sbin/modprobe"));
    /* A place the service can always write, though the kernel only runs
     * what kernel.modprobe names. */
    outcome("plant_tmp_modprobe", plant("/tmp/modprobe"));
    if (read_text("/proc/sys/kernel/modprobe", mp, sizeof(mp)) >= 0) {
        mp[strcspn(mp, "\n")] = 0;
        if (mp[0] == '/' && strcmp(mp, "/sbin/modprobe") != 0)
            outcome("plant_modprobe_path", plant(mp));
        else
            report("plant_modprobe_path", mp[0] ? "same" : "empty");
    }
    /* Its own place in the OOM killer's order: the kernel's default, not
     * hearth's -1000, and no way back down to it. */
    char oom[32];
    if (read_text("/proc/self/oom_score_adj", oom, sizeof(oom)) >= 0) {
        oom[strcspn(oom, "\n")] = 0;
        report("oom_score_adj", oom);
    }
    int ofd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    int orc = ofd < 0 ? -1 : (int)write(ofd, "-1000", 5);
    int oerr = errno;
    if (ofd >= 0)
        close(ofd);
    errno = oerr;
    outcome("oom_score_adj_lower", orc < 0 ? -1 : 0);

    unlink(HELPER_MARK);
    int fd = socket(5 /* AF_APPLETALK */, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd >= 0)
        close(fd);
    outcome("socket_appletalk", fd);
    /* request_module waits for the helper; a moment more for the share. */
    sleep_ms(500);
    char mark[512];
    report("modprobe_ran", read_text(HELPER_MARK, mark, sizeof(mark)) >= 0 ? mark : "no");

    /* A crash with core dumps allowed: with a "|program" pattern the
     * kernel would run it as root; a plain path writes at most a file. */
    struct rlimit rl = {RLIM_INFINITY, RLIM_INFINITY};
    if (setrlimit(RLIMIT_CORE, &rl) < 0) {
        getrlimit(RLIMIT_CORE, &rl);
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_CORE, &rl);
    }
    pid_t p = fork();
    if (p == 0) {
        if (chdir("/tmp") < 0)
            _exit(2);
        signal(SIGSEGV, SIG_DFL);
        raise(SIGSEGV);
        _exit(3);
    }
    int st = 0;
    if (p > 0 && waitpid(p, &st, 0) == p)
        report("core_dumped", WIFSIGNALED(st) && WCOREDUMP(st) ? "yes" : "no");
    else
        report("core_dumped", errname(errno));
    struct stat sb;
    report("core_file", stat("/tmp/core", &sb) == 0 ? "yes" : "no");
}

/* Run by the kernel as its module helper (see helpers()). */
static int as_modprobe(int argc, char **argv)
{
    char status[4096] = "", line[600];
    const char *cap = "CapEff: ?";
    if (read_text("/proc/self/status", status, sizeof(status)) >= 0) {
        char *c = strstr(status, "CapEff:");
        if (c) {
            c[strcspn(c, "\n")] = 0;
            cap = c;
        }
    }
    snprintf(line, sizeof(line), "uid %d %s argv %s", (int)getuid(), cap,
             argc > 3 ? argv[3] : "?");
    int fd = open(HELPER_MARK, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
        if (write(fd, line, strlen(line)) < 0) {
            /* the kmsg line below still tells */
        }
        close(fd);
    }
    fd = open("/dev/kmsg", O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
        char k[700];
        int n = snprintf(k, sizeof(k), "attack: module helper ran: %s\n", line);
        if (write(fd, k, (size_t)n) < 0) {
            /* nothing more to say */
        }
        close(fd);
    }
    return 0;
}

/* ---- the machine's own ports ---------------------------------------- */

/* host:port as a report key: [v6]:port. */
static void host_port(const char *host, int port, char *out, size_t len)
{
    snprintf(out, len, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
}

/* One TCP connection to host:port within 5 s, and the first line the
 * listener sends within 2 s (none from a listener that waits to be
 * spoken to). Returns 0 once connected, else the errno (ETIMEDOUT for
 * no answer at all). */
static int tcp_connect(const char *host, int port, char *greeting, size_t glen)
{
    struct sockaddr_storage ss = {0};
    socklen_t sl;
    int family = strchr(host, ':') ? AF_INET6 : AF_INET;
    greeting[0] = 0;
    if (family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons((uint16_t)port);
        if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1)
            return EINVAL;
        sl = sizeof(*a);
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_port = htons((uint16_t)port);
        if (inet_pton(AF_INET, host, &a->sin_addr) != 1)
            return EINVAL;
        sl = sizeof(*a);
    }
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return errno;
    int e = 0;
    if (connect(fd, (struct sockaddr *)&ss, sl) < 0) {
        e = errno;
        if (e == EINPROGRESS) {
            struct pollfd pf = {.fd = fd, .events = POLLOUT};
            socklen_t el = sizeof(e);
            if (poll(&pf, 1, 5000) <= 0)
                e = ETIMEDOUT;
            else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) < 0)
                e = errno;
        }
    }
    if (e == 0) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        ssize_t n = poll(&pf, 1, 2000) > 0 ? read(fd, greeting, glen - 1) : 0;
        greeting[n > 0 ? n : 0] = 0;
        greeting[strcspn(greeting, "\r\n")] = 0;
    }
    close(fd);
    return e;
}

/* Reports connect:HOST:PORT ("ok" or the errno); returns the errno. */
static int try_port(const char *prefix, const char *host, int port)
{
    char key[96], addr[80], greeting[64];
    host_port(host, port, addr, sizeof(addr));
    snprintf(key, sizeof(key), "%s:%s", prefix, addr);
    int e = tcp_connect(host, port, greeting, sizeof(greeting));
    report(key, e ? errname(e) : "ok");
    return e;
}

/* The machine's own addresses but loopback's: IPv4 from getifaddrs; IPv6
 * from /proc/net/if_inet6, which has the flags getifaddrs leaves out: an
 * address still in duplicate detection (tentative) is not local yet, nor
 * one that failed it, and a link-local one needs a scope. Returns how
 * many. */
static int own_addresses(char addrs[][64], int max)
{
    struct ifaddrs *ifa, *i;
    static char buf[8192];
    int n = 0;
    if (getifaddrs(&ifa) == 0) {
        for (i = ifa; i && n < max; i = i->ifa_next)
            if (i->ifa_addr && !(i->ifa_flags & IFF_LOOPBACK) && i->ifa_addr->sa_family == AF_INET)
                inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, addrs[n++], 64);
        freeifaddrs(ifa);
    }
    if (read_text("/proc/net/if_inet6", buf, sizeof(buf)) <= 0)
        return n;
    char *save = NULL;
    for (char *l = strtok_r(buf, "\n", &save); l && n < max; l = strtok_r(NULL, "\n", &save)) {
        char hex[33];
        unsigned idx, plen, scope, flags;
        struct in6_addr a;
        if (sscanf(l, "%32s %x %x %x %x", hex, &idx, &plen, &scope, &flags) != 5 || strlen(hex) != 32)
            continue;
        /* Scope 0 is global; 0x10 host (::1), 0x20 link. 0x40 tentative,
         * 0x08 duplicate detection failed. */
        if (scope != 0 || (flags & (0x40 | 0x08)))
            continue;
        for (int k = 0; k < 16; k++) {
            unsigned v;
            sscanf(hex + 2 * k, "%2x", &v);
            a.s6_addr[k] = (uint8_t)v;
        }
        inet_ntop(AF_INET6, &a, addrs[n++], 64);
    }
    return n;
}

/* Every TCP listener of the network namespace (/proc/net/tcp and tcp6,
 * state 0A), as an address to reach it by (loopback for the wildcard)
 * and a port. Returns how many. */
static int tcp_listeners(char hosts[][64], int *ports, int max)
{
    static const char *const files[] = {"/proc/net/tcp", "/proc/net/tcp6"};
    static char buf[65536];
    int n = 0;
    for (int f = 0; f < 2; f++) {
        if (read_text(files[f], buf, sizeof(buf)) <= 0)
            continue;
        char *save = NULL;
        for (char *l = strtok_r(buf, "\n", &save); l && n < max; l = strtok_r(NULL, "\n", &save)) {
            unsigned w[4] = {0}, port, st;
            if (f == 0 && sscanf(l, " %*d: %8X:%4X %*8X:%*4X %2X", &w[0], &port, &st) != 3)
                continue;
            if (f == 1 && sscanf(l, " %*d: %8X%8X%8X%8X:%4X %*32X:%*4X %2X", &w[0], &w[1], &w[2],
                                 &w[3], &port, &st) != 6)
                continue;
            if (st != 0x0A)
                continue;
            /* The kernel prints each 32-bit word of the address as it
             * lies in memory. */
            if (f == 0) {
                struct in_addr a = {.s_addr = w[0]};
                if (a.s_addr == 0)
                    a.s_addr = htonl(INADDR_LOOPBACK);
                inet_ntop(AF_INET, &a, hosts[n], 64);
            } else {
                struct in6_addr a;
                memcpy(&a, w, sizeof(a));
                if (IN6_IS_ADDR_UNSPECIFIED(&a))
                    a = in6addr_loopback;
                inet_ntop(AF_INET6, &a, hosts[n], 64);
            }
            ports[n++] = (int)port;
        }
    }
    return n;
}

/* As the agent: envd's port and a port beside it on loopback (both
 * families) and on every address of the machine's own, then every TCP
 * listener there is. */
static void local_ports(void)
{
    char addrs[16][64], hosts[32][64], list[512] = "";
    int ports[32];
    int n = own_addresses(addrs, 16);
    for (int i = 0; i < n; i++)
        snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", i ? "," : "", addrs[i]);
    report("own_addresses", list);
    static const char *const loopback[] = {"127.0.0.1", "::1"};
    for (int port = 49983; port <= 49984; port++) {
        for (int i = 0; i < 2; i++)
            try_port("connect", loopback[i], port);
        for (int i = 0; i < n; i++)
            try_port("connect", addrs[i], port);
    }
    int m = tcp_listeners(hosts, ports, 32);
    list[0] = 0;
    for (int i = 0; i < m; i++) {
        char hp[80];
        host_port(hosts[i], ports[i], hp, sizeof(hp));
        snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", i ? "," : "", hp);
    }
    report("tcp_listeners", list);
    for (int i = 0; i < m; i++)
        try_port("listener", hosts[i], ports[i]);
}

/* Listens on port on every address: IPv6 taking IPv4 too where there is
 * IPv6, else IPv4 alone. */
static int listen_any(int port)
{
    int one = 1, zero = 0;
    int s = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s >= 0) {
        struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port),
                                  .sin6_addr = in6addr_any};
        setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
        if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(s, 64) == 0)
            return s;
        close(s);
    }
    s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_ANY)};
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(s, 64) < 0) {
        close(s);
        return -1;
    }
    return s;
}

static void envd(int argc, char **argv)
{
    int fds[8], ports[8], n = 0;
    for (int i = 2; i < argc && n < 8; i++) {
        ports[n] = atoi(argv[i]);
        fds[n] = listen_any(ports[n]);
        char key[32];
        snprintf(key, sizeof(key), "envd_listen:%d", ports[n]);
        report(key, fds[n] < 0 ? errname(errno) : "ok");
        if (fds[n] >= 0)
            n++;
    }
    for (;;) {
        struct pollfd pf[8];
        for (int i = 0; i < n; i++)
            pf[i] = (struct pollfd){.fd = fds[i], .events = POLLIN};
        if (poll(pf, (nfds_t)n, -1) <= 0)
            continue;
        for (int i = 0; i < n; i++) {
            if (!(pf[i].revents & POLLIN))
                continue;
            int c = accept4(fds[i], NULL, NULL, SOCK_CLOEXEC);
            if (c < 0)
                continue;
            char line[32];
            int len = snprintf(line, sizeof(line), "envd %d\n", ports[i]);
            if (write(c, line, (size_t)len) < 0)
                line[0] = 0;
            close(c);
        }
    }
}

/* One line {"attack":"connect:HOST:PORT","result":...,"greeting":...}
 * on stdout; exit 0 when the listener greeted. */
static int connect_once(const char *host, int port)
{
    char addr[80], greeting[64];
    host_port(host, port, addr, sizeof(addr));
    int e = tcp_connect(host, port, greeting, sizeof(greeting));
    printf("{\"attack\":\"connect:%s\",\"result\":\"%s\",\"greeting\":\"%s\"}\n", addr,
           e ? errname(e) : "ok", greeting);
    fflush(stdout);
    return e == 0 && greeting[0] ? 0 : 1;
}

static void contained(const char *sock)
{
    char leaf[512], services[512], tree[512], path[600], buf[64];

    snprintf(buf, sizeof(buf), "%d", (int)getpid());
    report("pid", buf);
    if (find_leaf("/sys/fs/cgroup", 4, leaf, sizeof(leaf)) < 0)
        snprintf(leaf, sizeof(leaf), "/nonexistent/services/leaf");
    report("leaf", leaf);
    dirname_of(leaf, services, sizeof(services));
    dirname_of(services, tree, sizeof(tree));

    /* Into hearth's cgroup (the root in vm mode) or the services' parent,
     * then the control socket as a peer outside every service leaf. */
    open_write("cgroup_move_hearth", "/sys/fs/cgroup/cgroup.procs");
    snprintf(path, sizeof(path), "%s/cgroup.procs", services);
    open_write("cgroup_move_services", path);
    outcome("control_socket", connect_unix(sock));
    snprintf(path, sizeof(path), "%s/cgroup.freeze", services);
    open_write("freeze_services", path);
    snprintf(path, sizeof(path), "%s/cgroup.freeze", tree);
    open_write("freeze_tree", path);
    own_cgroup();

    /* PID 1 itself. */
    outcome("ptrace_pid1", (int)syscall(SYS_ptrace, PTRACE_ATTACH_REQ, 1, 0, 0));
    DIR *d = opendir("/proc/1/root/");
    if (d)
        closedir(d);
    outcome("proc1_root", d ? 0 : -1);
    int fd = open("/proc/1/mem", O_RDWR | O_CLOEXEC);
    if (fd >= 0)
        close(fd);
    outcome("proc1_mem", fd);

    /* Kernel knobs. */
    open_write("core_pattern", "/proc/sys/kernel/core_pattern");
    open_write("sysrq", "/proc/sysrq-trigger");
    open_write("sys_power_state", "/sys/power/state");
    masked_paths();

    /* Mounts, namespaces, modules, keys. */
    outcome("mount_tmpfs", mount("none", "/tmp", "tmpfs", 0, NULL));
    outcome("umount_proc_sys", umount2("/proc/sys", MNT_DETACH));
    dirname_of(sock, path, sizeof(path));
    outcome("umount_mask", umount2(path, MNT_DETACH));
    outcome("unshare_user", unshare(CLONE_NEWUSER));
    outcome("unshare_mnt", unshare(CLONE_NEWNS));
    fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    outcome("finit_module", (int)syscall(SYS_finit_module, fd, "", 0));
    close(fd);
    outcome("keyctl", (int)syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -3, 0, 0, 0));

    /* Egress: frames below the inet hook, and the ruleset itself. */
    fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(0x0003 /* ETH_P_ALL */));
    if (fd >= 0)
        close(fd);
    outcome("af_packet", fd);
    fd = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_UDP);
    if (fd >= 0)
        close(fd);
    outcome("raw_socket", fd);
    nft_delete("nft_delete_inet", NFPROTO_INET_);
    nft_delete("nft_delete_netdev", NFPROTO_NETDEV_);

    /* The host's channel and the kernel log: absent from its /dev, and
     * no node of them can be made. */
    char port[64], devno[32];
    unsigned maj = 0, min = 0;
    if (find_port(port, sizeof(port), devno, sizeof(devno)) == 0 &&
        sscanf(devno, "%u:%u", &maj, &min) == 2) {
        report("vport_found", port);
        snprintf(path, sizeof(path), "/dev/%s", port);
        fd = open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
        if (fd >= 0)
            close(fd);
        outcome("open_vport", fd);
        try_mknod("mknod_vport", maj, min);
    } else {
        report("vport_found", "no");
    }
    open_write("open_kmsg", "/dev/kmsg");
    try_mknod("mknod_kmsg", 1, 11);

    /* The process space: its own pid namespace shows its reaper and
     * itself; no other pid answers, not hearth's, not another service's. */
    char pids[64] = "";
    DIR *pd = opendir("/proc");
    for (struct dirent *e; pd && (e = readdir(pd));)
        if (e->d_name[0] >= '1' && e->d_name[0] <= '9' && strlen(pids) + 12 < sizeof(pids))
            snprintf(pids + strlen(pids), sizeof(pids) - strlen(pids), "%s%s",
                     pids[0] ? "," : "", e->d_name);
    if (pd)
        closedir(pd);
    report("proc_pids", pids);
    int first = 0;
    for (int p = 3; p < 65536 && !first; p++)
        if (kill(p, 0) == 0 || errno != ESRCH)
            first = p;
    snprintf(buf, sizeof(buf), "%d", first);
    report("kill_other_pid", buf);
    outcome("pidfd_getfd", (int)syscall(438, -1, 0, 0));
    outcome("process_madvise", (int)syscall(440, -1, 0, 0, 0, 0));
    /* The kernel's helpers, as full root outside every namespace. */
    helpers();
    /* The machine's own ports: the platform's envd and every listener. */
    local_ports();

    /* Last: power the sandbox off. pid 1 here is its own reaper, which
     * takes the signal; hearth never sees it. */
    outcome("kill_pid1", kill(1, SIGTERM));
    rest();
}

/* ---- the shipped agent turned hostile ------------------------------- */

static int listen_tcp(int port)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), one = 1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (s < 0)
        return -1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(s, 8) < 0) {
        close(s);
        return -1;
    }
    return s;
}

/* Answers every connection on the listeners with a 200 (the gateway's
 * /health), for up to ms (forever when ms < 0), or until GO appears
 * when go is set. */
static void serve(const int *lfd, int n, long ms, int go)
{
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        if (go && access(GO, F_OK) == 0)
            return;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long spent = (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
        if (ms >= 0 && spent >= ms)
            return;
        struct pollfd pf[2];
        for (int i = 0; i < n; i++)
            pf[i] = (struct pollfd){.fd = lfd[i], .events = POLLIN};
        if (poll(pf, (nfds_t)n, 100) <= 0)
            continue;
        for (int i = 0; i < n; i++) {
            if (!(pf[i].revents & POLLIN))
                continue;
            int c = accept4(lfd[i], NULL, NULL, SOCK_CLOEXEC);
            if (c < 0)
                continue;
            char buf[1024];
            struct pollfd cp = {.fd = c, .events = POLLIN};
            if (poll(&cp, 1, 200) > 0 && read(c, buf, sizeof(buf)) < 0)
                buf[0] = 0;
            static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                     "Content-Length: 16\r\nConnection: close\r\n\r\n"
                                     "{\"status\":\"ok\"}";
            if (write(c, ok, sizeof(ok) - 1) < 0)
                buf[0] = 0;
            close(c);
        }
    }
}

/* A line of /proc/self/status ("CapEff:\t0000000000000000" -> the value). */
static void status_field(const char *attack, const char *field)
{
    char buf[4096], value[64] = "missing";
    if (read_text("/proc/self/status", buf, sizeof(buf)) > 0) {
        size_t n = strlen(field);
        for (char *save = NULL, *l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
            if (strncmp(l, field, n) == 0 && l[n] == ':') {
                const char *v = l + n + 1;
                while (*v == ' ' || *v == '\t')
                    v++;
                snprintf(value, sizeof(value), "%s", v);
            }
    }
    report(attack, value);
}

/* Creates path; what lands in the image is taken away again, what lands
 * on its own shares (keep) stays for the test to find. */
static void create_file(const char *attack, const char *path, bool keep)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd >= 0) {
        close(fd);
        if (!keep)
            unlink(path);
    }
    outcome(attack, fd);
}

static void open_create(const char *attack, const char *path)
{
    create_file(attack, path, false);
}

/* The names in a directory, comma-separated ("empty" for none); only the
 * numeric ones with pids_only (/proc). */
static void list_dir_of(const char *attack, const char *path, bool pids_only)
{
    char out[512] = "";
    DIR *d = opendir(path);
    if (!d) {
        outcome(attack, -1);
        return;
    }
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
            (!pids_only || (e->d_name[0] >= '1' && e->d_name[0] <= '9')) &&
            strlen(out) + strlen(e->d_name) + 2 < sizeof(out))
            snprintf(out + strlen(out), sizeof(out) - strlen(out), "%s%s", out[0] ? "," : "",
                     e->d_name);
    closedir(d);
    report(attack, out[0] ? out : "empty");
}

static void list_dir(const char *attack, const char *path)
{
    list_dir_of(attack, path, false);
}

static void shipped_agent(void)
{
    int lfd[2], n = 0;
    char buf[256], port[64], devno[32], path[128];

    for (int i = 0, ports[] = {8642, 9119}; i < 2; i++)
        if ((lfd[n] = listen_tcp(ports[i])) >= 0)
            n++;
    serve(lfd, n, -1, 1);

    /* Who it is. */
    snprintf(buf, sizeof(buf), "%u:%u:%u:%u", (unsigned)getuid(), (unsigned)geteuid(),
             (unsigned)getgid(), (unsigned)getegid());
    report("ids", buf);
    for (const char *const *f = (const char *const[]){"CapEff", "CapPrm", "CapBnd", "CapAmb",
                                                      "NoNewPrivs", "Seccomp", NULL}; *f; f++)
        status_field(*f, *f);
    outcome("setuid_root", setuid(0));

    /* The image: root's files refused by their mode, and below that every
     * mount of it read-only, so nothing can be added either. */
    struct statvfs sv;
    for (const char *const *d = (const char *const[]){"/", "/sbin", "/etc", "/usr/bin", NULL}; *d;
         d++) {
        snprintf(path, sizeof(path), "mount_ro:%s", *d);
        report(path, statvfs(*d, &sv) < 0 ? errname(errno) : sv.f_flag & ST_RDONLY ? "ro" : "rw");
    }
    open_write("write_sbin_hearth", "/sbin/hearth");
    open_create("create_sbin", "/sbin/planted");
    open_create("create_etc", "/etc/planted");
    open_write("write_passwd", "/etc/passwd");
    open_write("write_hermes_binary", "/usr/bin/hermes");
    /* hearth's config: hidden. */
    int fd = open("/etc/hearth/hearth.json", O_RDONLY | O_CLOEXEC);
    if (fd >= 0)
        close(fd);
    outcome("read_config", fd);
    list_dir("list_etc_hearth", "/etc/hearth");
    /* /root: passed through to the home, never listed; the home is its own. */
    list_dir("list_root", "/root");
    open_create("create_root", "/root/planted");
    create_file("create_home", "/root/.hermes/hostile-agent-was-here", true);
    create_file("create_workspace", "/workspace/hostile-agent-was-here", true);

    /* Other processes. */
    list_dir_of("proc_pids", "/proc", true);
    int first = 0;
    for (int p = 2; p < 65536 && !first; p++)
        if (p != getpid() && (kill(p, 0) == 0 || errno != ESRCH))
            first = p;
    snprintf(buf, sizeof(buf), "%d", first);
    report("kill_other_pid", buf);
    outcome("ptrace_pid1", (int)syscall(SYS_ptrace, PTRACE_ATTACH_REQ, 1, 0, 0));

    /* The control channel: the unix socket (where a config has one) and
     * the virtio-serial port the host talks on. */
    outcome("control_socket", connect_unix("/run/hearth/control.sock"));
    if (find_port(port, sizeof(port), devno, sizeof(devno)) == 0) {
        snprintf(path, sizeof(path), "/dev/%s", port);
        fd = open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
        if (fd >= 0)
            close(fd);
        outcome("open_vport", fd);
    } else {
        report("open_vport", "no port found");
    }

    /* Its /tmp: a tmpfs of its own, empty when it starts, writable; the
     * file left there is looked for in hearth's /tmp by the test. */
    struct statfs sf;
    list_dir("tmp_entries", "/tmp");
    report("tmp_fs", statfs("/tmp", &sf) == 0 && sf.f_type == TMPFS_MAGIC ? "tmpfs" : "other");
    fd = open("/tmp/hostile-agent-was-here", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0)
        close(fd);
    outcome("create_tmp", fd);

    report("done", "ok");
    serve(lfd, n, -1, 0);
    _exit(0);
}

/* A UDP datagram to dst as a raw Ethernet frame on eth0: it never meets
 * the inet output hook, only the netdev egress chain. */
static void raw_udp(const char *attack, const char *dst)
{
    unsigned char f[14 + 20 + 8 + 12] = {0};
    struct sockaddr_ll ll = {.sll_family = AF_PACKET, .sll_protocol = htons(0x0800),
                             .sll_ifindex = (int)if_nametoindex("eth0"), .sll_halen = 6};
    struct in_addr src, to;
    memset(ll.sll_addr, 0xff, 6);
    memset(f, 0xff, 6); /* broadcast: no neighbour needed */
    f[12] = 0x08;
    unsigned char *ip = f + 14, *udp = ip + 20;
    inet_pton(AF_INET, "10.0.2.15", &src);
    inet_pton(AF_INET, dst, &to);
    ip[0] = 0x45;
    ip[3] = 20 + 8 + 12;
    ip[8] = 64;
    ip[9] = IPPROTO_UDP;
    memcpy(ip + 12, &src, 4);
    memcpy(ip + 16, &to, 4);
    uint32_t sum = 0;
    for (int i = 0; i < 20; i += 2)
        sum += (uint32_t)(ip[i] << 8 | ip[i + 1]);
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    ip[10] = (unsigned char)(~sum >> 8);
    ip[11] = (unsigned char)~sum;
    udp[0] = 0x9c, udp[1] = 0x40; /* 40000 */
    udp[3] = 9;                   /* discard */
    udp[5] = 8 + 12;
    memcpy(udp + 8, "hearth-test", 12);
    int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        report(attack, errname(errno));
        return;
    }
    outcome(attack, (int)sendto(fd, f, sizeof(f), 0, (struct sockaddr *)&ll, sizeof(ll)));
    close(fd);
}

static void privileged(const char *sock)
{
    char leaf[512], services[512], path[600], buf[64];

    snprintf(buf, sizeof(buf), "%d", (int)getpid());
    report("pid", buf);
    if (find_leaf("/sys/fs/cgroup", 4, leaf, sizeof(leaf)) < 0)
        snprintf(leaf, sizeof(leaf), "/nonexistent/services/leaf");
    report("leaf", leaf);
    dirname_of(leaf, services, sizeof(services));

    /* The read-only /sys goes: what is left is the cgroup namespace at
     * its leaf, on a hierarchy mounted with nsdelegate. */
    outcome("umount_sys", umount2("/sys", MNT_DETACH));
    int fd = open("/sys/fs/cgroup/cgroup.procs", O_WRONLY | O_CLOEXEC);
    outcome("open_hearth_procs", fd);
    if (fd >= 0) {
        outcome("cgroup_move_hearth", (int)write(fd, buf, strlen(buf)));
        close(fd);
    }
    snprintf(path, sizeof(path), "%s/hermes/cgroup.procs", services);
    fd = open(path, O_WRONLY | O_CLOEXEC);
    outcome("open_sibling_procs", fd);
    if (fd >= 0) {
        outcome("cgroup_move_sibling", (int)write(fd, buf, strlen(buf)));
        close(fd);
    }
    own_cgroup();

    /* The socket's mask goes too: the peer check is what is left. */
    dirname_of(sock, path, sizeof(path));
    outcome("umount_mask", umount2(path, MNT_DETACH));
    fd = connect_unix(sock);
    outcome("control_socket", fd);
    if (fd >= 0) {
        static const char ping[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n";
        char reply[1024];
        struct timeval tv = {5, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        /* A refused peer is answered and closed at accept, maybe before
         * the request is written: the write may fail, the answer stays. */
        signal(SIGPIPE, SIG_IGN);
        ssize_t w = write(fd, ping, sizeof(ping) - 1);
        (void)w;
        ssize_t n = read(fd, reply, sizeof(reply) - 1);
        if (n < 0)
            report("control_reply", errname(errno));
        else {
            reply[n] = 0;
            reply[strcspn(reply, "\n")] = 0;
            report("control_reply", n ? reply : "closed");
        }
        close(fd);
    }

    /* With NET_ADMIN the kernel processes the batch: the tables' owner
     * is what refuses it. */
    nft_delete("nft_delete_inet", NFPROTO_INET_);
    nft_delete("nft_delete_netdev", NFPROTO_NETDEV_);

    /* With NET_RAW, frames below the IP stack: the netdev egress chain
     * drops the one to a denied address (the send fails with ENOBUFS)
     * and lets the allowed one go. */
    raw_udp("af_packet_denied", "10.0.2.101");
    raw_udp("af_packet_allowed", "10.0.2.100");
    rest();
}

static void leaf_file(const char *leaf, const char *name, const char *attack)
{
    char path[600], buf[256];
    snprintf(path, sizeof(path), "%s/%s", leaf, name);
    if (read_text(path, buf, sizeof(buf)) < 0) {
        report(attack, errname(errno));
        return;
    }
    buf[strcspn(buf, "\n")] = 0;
    report(attack, buf);
}

static void forks(void)
{
    char leaf[512], buf[64];
    /* Far above any pids_max a test sets; bounded so a build that sets
     * none ends quickly. */
    pid_t kids[64];
    int n = 0;

    if (find_leaf("/sys/fs/cgroup", 4, leaf, sizeof(leaf)) < 0)
        snprintf(leaf, sizeof(leaf), "/nonexistent");
    report("leaf", leaf);
    leaf_file(leaf, "pids.max", "pids_max");
    for (; n < (int)(sizeof(kids) / sizeof(kids[0])); n++) {
        pid_t p = fork();
        if (p == 0) {
            for (;;)
                pause();
        }
        if (p < 0)
            break;
        kids[n] = p;
    }
    int e = errno;
    snprintf(buf, sizeof(buf), "%d", n);
    report("forked", buf);
    report("fork_error", n < (int)(sizeof(kids) / sizeof(kids[0])) ? errname(e) : "none");
    leaf_file(leaf, "pids.current", "pids_current");
    leaf_file(leaf, "pids.events", "pids_events");
    for (int i = 0; i < n; i++)
        kill(kids[i], SIGKILL);
    for (int i = 0; i < n; i++)
        waitpid(kids[i], NULL, 0);
    rest();
}

static void hog(long mib)
{
    char buf[64], mem[4096];

    /* What the guest has free: more than the hog asks for, so an OOM kill
     * can only come from the service's own cgroup limit. */
    if (read_text("/proc/meminfo", mem, sizeof(mem)) > 0) {
        char *a = strstr(mem, "MemAvailable:");
        snprintf(buf, sizeof(buf), "%ld", a ? strtol(a + 13, NULL, 10) / 1024 : -1L);
        report("mem_available_mib", buf);
    }
    for (long i = 1; i <= mib; i++) {
        char *p = malloc(1 << 20);
        if (!p) {
            report("malloc", "failed");
            break;
        }
        memset(p, 0x5a, 1 << 20);
        snprintf(buf, sizeof(buf), "%ld", i);
        report("touched_mib", buf);
    }
    rest();
}

/* Touches MIB MiB like hog; memory.high throttles it without a kill, so it
 * gets through and reports what the leaf counted. */
static void throttle(long mib)
{
    char leaf[512], buf[64];

    if (find_leaf("/sys/fs/cgroup", 4, leaf, sizeof(leaf)) < 0)
        snprintf(leaf, sizeof(leaf), "/nonexistent");
    report("leaf", leaf);
    leaf_file(leaf, "memory.high", "memory_high");
    char *p = malloc((size_t)mib << 20);
    if (!p) {
        report("malloc", "failed");
        rest();
    }
    for (long i = 1; i <= mib; i++) {
        memset(p + ((i - 1) << 20), 0x5a, 1 << 20);
        snprintf(buf, sizeof(buf), "%ld", i);
        report("touched_mib", buf);
    }
    char ev[1024], path[600];
    snprintf(path, sizeof(path), "%s/memory.events", leaf);
    if (read_text(path, ev, sizeof(ev)) < 0) {
        report("memory_events", errname(errno));
        rest();
    }
    /* One line per counter: "high N", "oom_kill N", ... */
    for (char *line = strtok(ev, "\n"); line; line = strtok(NULL, "\n")) {
        char *sp = strchr(line, ' ');
        if (!sp)
            continue;
        *sp = 0;
        char name[80];
        snprintf(name, sizeof(name), "events_%s", line);
        report(name, sp + 1);
    }
    rest();
}

static void vsock_ping(unsigned cid, unsigned port)
{
    struct sockaddr_vm sa = {.svm_family = AF_VSOCK, .svm_cid = cid, .svm_port = port};
    int fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        report("vsock_socket", errname(errno));
        rest();
    }
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        report("vsock_connect", errname(errno));
        rest();
    }
    report("vsock_connect", "ok");
    static const char ping[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n";
    if (write(fd, ping, sizeof(ping) - 1) < 0)
        report("vsock_write", errname(errno));
    char line[512];
    size_t n = 0;
    while (n < sizeof(line) - 1) {
        ssize_t r = read(fd, line + n, 1);
        if (r <= 0 || line[n] == '\n')
            break;
        n++;
    }
    line[n] = 0;
    report("vsock_reply", n ? line : "none");
    close(fd);
    rest();
}

/* Writes 1 MiB blocks into dir/fill until the write fails; reports how
 * many and why it stopped. The file is kept: its pages stay taken. */
static void fill_dir(const char *dir, const char *attack)
{
    static char block[1 << 20];
    char path[256], buf[64];
    long n = 0;
    int e = 0;

    memset(block, 0x5a, sizeof(block));
    snprintf(path, sizeof(path), "%s/fill", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        report(attack, errname(errno));
        return;
    }
    for (;;) {
        ssize_t w = write(fd, block, sizeof(block));
        if (w < (ssize_t)sizeof(block)) {
            e = w < 0 ? errno : ENOSPC;
            break;
        }
        n++;
    }
    close(fd);
    snprintf(buf, sizeof(buf), "%ld", n);
    report(attack, errname(e));
    snprintf(path, sizeof(path), "%s_mib", attack);
    report(path, buf);
}

/* The guest-wide fill: the private /tmp and /dev/shm to the last byte
 * they take, then anonymous memory until the services' cgroup stops it.
 * Each tmpfs is capped and the services together leave a reserve, so the
 * guest lives on and only this service is killed. */
static void fill(void)
{
    char buf[64], leaf[512], parent[512];
    struct statvfs sv;
    if (find_leaf("/sys/fs/cgroup", 4, leaf, sizeof(leaf)) == 0) {
        leaf_file(leaf, "pids.max", "pids_max");
        dirname_of(leaf, parent, sizeof(parent));
        leaf_file(parent, "memory.max", "services_memory_max");
    }
    if (statvfs("/tmp", &sv) == 0) {
        snprintf(buf, sizeof(buf), "%llu", (unsigned long long)sv.f_blocks * sv.f_frsize);
        report("tmp_size", buf);
    }
    fill_dir("/tmp", "tmp_fill");
    fill_dir("/dev/shm", "shm_fill");
    for (long i = 1;; i++) {
        char *p = malloc(1 << 20);
        if (!p) {
            report("malloc", "failed");
            break;
        }
        memset(p, 0x5a, 1 << 20);
        if (i % 16 == 0) {
            snprintf(buf, sizeof(buf), "%ld", i);
            report("touched_mib", buf);
        }
    }
    rest();
}

static void tick(void)
{
    char buf[32];
    for (long i = 1;; i++) {
        snprintf(buf, sizeof(buf), "%ld", i);
        report("tick", buf);
        sleep_ms(100);
    }
}

static void clockback(long sec)
{
    struct timespec now;
    char buf[64];

    if (clock_gettime(CLOCK_REALTIME, &now) < 0) {
        report("clockback", errname(errno));
        rest();
    }
    snprintf(buf, sizeof(buf), "%lld", (long long)now.tv_sec);
    report("wall_before", buf);
    now.tv_sec -= sec;
    report("clockback", clock_settime(CLOCK_REALTIME, &now) == 0 ? "ok" : errname(errno));
    rest();
}

int main(int argc, char **argv)
{
    const char *base = strrchr(argv[0], '/');
    if (strcmp(base ? base + 1 : argv[0], "modprobe") == 0)
        return as_modprobe(argc, argv);
    if (strcmp(base ? base + 1 : argv[0], "hermes") == 0 && argc >= 3 &&
        strcmp(argv[1], "gateway") == 0 && strcmp(argv[2], "run") == 0)
        shipped_agent();
    if (argc < 2) {
        fprintf(stderr, "usage: attack contained|privileged SOCK | forks | hog MIB | throttle MIB"
                        " | vsock CID PORT | tick | fill | envd PORT... | connect HOST PORT | clockback SEC\n");
        return 2;
    }
    /* The platform's envd and a client of it start at once. */
    if (strcmp(argv[1], "envd") == 0 && argc >= 3)
        envd(argc, argv);
    if (strcmp(argv[1], "connect") == 0 && argc == 4)
        return connect_once(argv[2], atoi(argv[3]));
    if (!getenv("ATTACK_NOW"))
        wait_go();
    if (strcmp(argv[1], "contained") == 0 && argc == 3)
        contained(argv[2]);
    else if (strcmp(argv[1], "privileged") == 0 && argc == 3)
        privileged(argv[2]);
    else if (strcmp(argv[1], "forks") == 0)
        forks();
    else if (strcmp(argv[1], "hog") == 0 && argc == 3)
        hog(atol(argv[2]));
    else if (strcmp(argv[1], "throttle") == 0 && argc == 3)
        throttle(atol(argv[2]));
    else if (strcmp(argv[1], "vsock") == 0 && argc == 4)
        vsock_ping((unsigned)strtoul(argv[2], NULL, 10), (unsigned)strtoul(argv[3], NULL, 10));
    else if (strcmp(argv[1], "tick") == 0)
        tick();
    else if (strcmp(argv[1], "fill") == 0)
        fill();
    else if (strcmp(argv[1], "clockback") == 0 && argc == 3)
        clockback(atol(argv[2]));
    fprintf(stderr, "attack: unknown mode %s\n", argv[1]);
    return 2;
}
