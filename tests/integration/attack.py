"""A hostile agent: run by a service, it tries each way out of what hearth
set up and writes one JSON object {attack: outcome} to argv[1]. An outcome
is "ok" when the attack went through, else the errno name (or a short
reason). It never writes to a kernel knob or a cgroup file it managed to
open: opening for writing is the test (a read-only mount refuses there),
so a containment bug cannot change the host running the tests.

argv: OUT SOCK CONFIG"""
import ctypes
import errno
import json
import os
import socket
import stat
import subprocess
import sys

out, sock_path, config = sys.argv[1:4]
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
R = {}

SYS_finit_module = 313
SYS_keyctl = 250
SYS_ptrace = 101
PTRACE_ATTACH = 16
CLONE_NEWUSER = 0x10000000
CLONE_NEWNS = 0x00020000


def name(e):
    return errno.errorcode.get(e, str(e))


def call(fn, *args):
    r = fn(*args)
    return "ok" if r >= 0 else name(ctypes.get_errno())


def try_open_write(path):
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError as e:
        return name(e.errno)
    os.close(fd)
    return "ok"


def try_connect(path):
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(path)
        return "ok"
    except OSError as e:
        return name(e.errno)
    finally:
        s.close()


def find_own_leaf():
    """Its own namespace says "/", but the cgroup2 mount still shows the
    whole tree: find the directory whose cgroup.procs lists this pid."""
    roots = [p for p in ("/sys/fs/cgroup/unified", "/sys/fs/cgroup")
             if os.path.exists(os.path.join(p, "cgroup.procs"))]
    me = str(os.getpid())
    for root in roots:
        for d, subdirs, files in os.walk(root):
            if d.count("/") - root.count("/") > 8:
                subdirs[:] = []
            try:
                with open(os.path.join(d, "cgroup.procs")) as f:
                    if me in f.read().split():
                        return d
            except OSError:
                pass
    return None


leaf = find_own_leaf()
# The leaf is <hearth's cgroup>/hearth.<id>/services/<name>: hearth stays in
# the cgroup it started in, the parent of its tree.
tree = os.path.dirname(os.path.dirname(leaf)) if leaf else "/nonexistent/tree"
hearth_cg = os.path.dirname(tree)
R["hearth_cgroup"] = hearth_cg
# Move into hearth's own cgroup (outside every service leaf), then reach
# the control socket as a peer the old check would have let in.
R["cgroup_move"] = try_open_write(os.path.join(hearth_cg, "cgroup.procs"))
R["control_socket"] = try_connect(sock_path)
R["control_dir_entries"] = sorted(os.listdir(os.path.dirname(sock_path))) \
    if os.path.isdir(os.path.dirname(sock_path)) else "missing"
# Freeze hearth (its cgroup, and the services' parent).
R["freeze_hearth"] = try_open_write(os.path.join(hearth_cg, "cgroup.freeze"))
R["freeze_services"] = try_open_write(os.path.join(tree, "services", "cgroup.freeze"))
with open("/proc/self/cgroup") as f:
    R["own_cgroup"] = [l for l in f.read().splitlines() if l.startswith("0::")][0]
# Step out of its mount namespace through hearth's /proc entries.
for key, path in (("proc1_root", "/proc/1/root/"), ("proc1_cwd", "/proc/1/cwd/")):
    try:
        os.listdir(path)
        R[key] = "ok"
    except OSError as e:
        R[key] = name(e.errno)
R["proc1_mem"] = try_open_write("/proc/1/mem")
# Take over PID 1.
R["ptrace_pid1"] = call(libc.syscall, SYS_ptrace, PTRACE_ATTACH, 1, 0, 0)
# Kernel knobs.
R["core_pattern"] = try_open_write("/proc/sys/kernel/core_pattern")
R["sysrq"] = try_open_write("/proc/sysrq-trigger")
R["sys_write"] = try_open_write("/sys/kernel/mm/transparent_hugepage/enabled")
st = os.stat("/proc/kcore") if os.path.exists("/proc/kcore") else None
R["kcore"] = "missing" if st is None else ("chr" if stat.S_ISCHR(st.st_mode) else "readable")
# The OCI masked paths (contain_masked in init/contain/contain.c; the test checks
# the two lists agree): what each one is in this view.
MASKED = ["/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
          "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/proc/interrupts",
          "/sys/firmware", "/sys/devices/virtual/powercap"]


def mount_at(path):
    """(fstype, read-only) of the mount whose mount point is path, or None."""
    found = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            sep = parts.index("-")
            point = parts[4].encode().decode("unicode_escape")
            if point == path:  # the last one listed is the one on top
                found = (parts[sep + 1], "ro" in parts[5].split(","))
    return found


def masked_view(path):
    try:
        st = os.lstat(path)
    except OSError as e:
        return name(e.errno)
    if stat.S_ISDIR(st.st_mode):
        fstype, ro = mount_at(path) or (None, False)
        v = {"kind": "dir", "entries": sorted(os.listdir(path)), "fstype": fstype, "ro": ro}
        # Creating a file there: a read-only tmpfs refuses with EROFS (the
        # /proc directories refuse anyway, but their listing is not empty).
        probe = os.path.join(path, ".hearth-probe")
        try:
            os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            os.unlink(probe)
            v["create"] = "ok"
        except OSError as e:
            v["create"] = name(e.errno)
        return v
    v = {"kind": "chr" if stat.S_ISCHR(st.st_mode) else "other",
         "rdev": [os.major(st.st_rdev), os.minor(st.st_rdev)]}
    try:
        with open(path, "rb") as f:
            v["read"] = len(f.read(65536))
    except OSError as e:
        v["read"] = name(e.errno)
    return v


R["masked"] = {p: masked_view(p) for p in MASKED}
R["config_write"] = try_open_write(config)
try:
    with open(config, "rb") as f:
        R["config_read"] = len(f.read())
except OSError as e:
    R["config_read"] = name(e.errno)
# The image: read-only, so nothing hearth or another service runs from it
# can be replaced (the kernel's module helper, a probe's program).
R["etc_write"] = try_open_write("/etc/passwd")
try:
    fd = os.open("/hearth-attack-probe", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o755)
    os.close(fd)
    os.unlink("/hearth-attack-probe")
    R["root_create"] = "ok"
except OSError as e:
    R["root_create"] = name(e.errno)
# Devices: the disk under /, the kernel log; and what a service needs.
R["dev_entries"] = sorted(os.listdir("/dev"))
dev = os.stat("/").st_dev
try:
    with open(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}/uevent") as f:
        disk = [l.split("=", 1)[1].strip() for l in f if l.startswith("DEVNAME=")][0]
except (OSError, IndexError):
    disk = None
R["open_root_disk"] = "no disk" if disk is None else try_open_write("/dev/" + disk)
try:
    os.mknod(os.path.join(os.path.dirname(out), "disk"), stat.S_IFBLK | 0o600, dev)
    R["mknod_disk"] = "ok"
except OSError as e:
    R["mknod_disk"] = name(e.errno)
R["kmsg"] = try_open_write("/dev/kmsg")
try:
    a, b = os.openpty()
    os.close(a)
    os.close(b)
    R["openpty"] = "ok"
except OSError as e:
    R["openpty"] = name(e.errno)
R["dev_null"] = try_open_write("/dev/null")
# Mounts.
R["mount_tmpfs"] = call(libc.mount, b"none", b"/tmp", b"tmpfs", 0, None)
R["mount_cgroup2"] = call(libc.mount, b"none", b"/mnt", b"cgroup2", 0, None)
R["umount_proc_sys"] = call(libc.umount2, b"/proc/sys", 2)
R["umount_mask"] = call(libc.umount2, os.path.dirname(sock_path).encode(), 2)
# Namespaces: a new user namespace would bring every capability back.
R["unshare_user"] = call(libc.unshare, CLONE_NEWUSER)
R["unshare_mnt"] = call(libc.unshare, CLONE_NEWNS)
R["setns_pid1_mnt"] = "ok"
try:
    fd = os.open("/proc/1/ns/mnt", os.O_RDONLY)
    R["setns_pid1_mnt"] = call(libc.setns, fd, 0)
    os.close(fd)
except OSError as e:
    R["setns_pid1_mnt"] = name(e.errno)
# The kernel.
fd = os.open("/dev/null", os.O_RDONLY)
R["finit_module"] = call(libc.syscall, SYS_finit_module, fd, b"", 0)
os.close(fd)
R["keyctl"] = call(libc.syscall, SYS_keyctl, 0, 0, 0, 0, 0)
# Egress: raw frames and the ruleset.
try:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
    s.close()
    R["af_packet"] = "ok"
except OSError as e:
    R["af_packet"] = name(e.errno)
try:
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP)
    s.close()
    R["raw_socket"] = "ok"
except OSError as e:
    R["raw_socket"] = name(e.errno)
for key, args in (("nft_add_table", ["add", "table", "inet", "x"]),
                  ("nft_flush", ["flush", "ruleset"]),
                  ("nft_delete_hearth", ["delete", "table", "inet", "hearth"])):
    r = subprocess.run(["nft", *args], capture_output=True, text=True)
    R[key] = "ok" if r.returncode == 0 else (r.stderr.strip().splitlines() or ["failed"])[0]

tmp = out + ".tmp"
with open(tmp, "w") as f:
    json.dump(R, f)
os.rename(tmp, out)
