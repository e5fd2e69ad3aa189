#!/bin/sh
# hearth beside the init/supervisor peers Debian ships (scripts/deps.sh
# --bench): stripped binary size, RSS while supervising one idle child,
# start -> child exec latency beside tini and dumb-init, and the cost of a
# crash -> restart beyond the configured delay beside s6-supervise.
# A peer that is not installed gets "failed: not installed" as its value.
set -eu
B="$BUILD"
mkdir -p "$B/bench"
cc -O2 -o "$B/bench/stamp" "$ROOT/tests/bench/stamp.c"
exec /usr/bin/python3 - "$B" <<'PY'
import os, shutil, statistics, subprocess, sys, tempfile, time

B = sys.argv[1]
sys.path.insert(0, os.path.join(os.environ["ROOT"], "tests", "bench"))
from benchlib import (exec_latency, hearth_config, row, stamp_gaps, stop,  # noqa: E402
                      wait_file, wait_path, wait_stamps, which)
HEARTH = os.path.join(B, "hearth")
STAMP = os.path.join(B, "bench", "stamp")
tmp = tempfile.mkdtemp(prefix="hearth-bench-")

def stripped_kib(path):
    out = os.path.join(tmp, "stripped")
    shutil.copy(path, out)
    subprocess.run(["strip", out], stderr=subprocess.DEVNULL)
    return os.path.getsize(out) // 1024

def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for l in f:
            if l.startswith("VmRSS:"):
                return int(l.split()[1])

def hearth_cfg(services, name="h.json"):
    return hearth_config(tmp, services, name)

# ---- size ----
# (beside qemu-ga: bench_core.sh's binary_bytes row, the target's.)
hsize = os.path.getsize(HEARTH) // 1024  # already stripped by the build
for peer in ["tini", "dumb-init", "s6-svscan"]:
    p = which(peer)
    row(f"size_vs_{peer.replace('-', '_')}", "binary size, stripped (KiB)", hsize, peer,
        stripped_kib(p) if p else "failed: not installed")

# ---- RSS while supervising one idle child ----
def status_kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for l in f:
            if l.startswith(field + ":"):
                return int(l.split()[1])


def rollup_kib(pid):
    """Pss (each page shared among the processes mapping it: a static
    binary's text in two processes counts half in each) and the private
    pages (what the process alone holds), from smaps_rollup."""
    got = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for l in f:
            k, _, v = l.partition(":")
            if k in ("Pss", "Private_Clean", "Private_Dirty"):
                got[k] = int(v.split()[0])
    return got["Pss"], got["Private_Clean"] + got["Private_Dirty"]


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(c) for c in f.read().split()]
    except OSError:
        return []


def comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def idle_rss(cmd, marker, inner=None):
    """The supervisor's VmRSS while its child is idle; with inner(pid), also
    what inner finds below it (a reaper: its pid), as (rss, inner's pid's
    VmRSS, its Pss, its private KiB) read at the same moment."""
    if os.path.exists(marker):
        os.unlink(marker)
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ok = wait_file(marker)
    time.sleep(0.2)
    r = rss_kib(p.pid) if ok and p.poll() is None else "failed"
    if inner:
        q = inner(p.pid) if r != "failed" else None
        r = (r, status_kib(q, "VmRSS"), *rollup_kib(q)) if q else (r,) + ("failed",) * 3
    stop(p)
    return r


def hearth_reaper(pid):
    """The service's reaper: hearth's child named hearth-reaper."""
    return next((c for c in children(pid) if comm(c) == "hearth-reaper"), None)


def bwrap_init(pid):
    """bwrap's pid 1 of the namespace it made: the child of the bwrap
    started, itself a bwrap."""
    return next((c for c in children(pid) if comm(c) == "bwrap"), None)


m = os.path.join(tmp, "m")
hr, reaper_rss, reaper_pss, reaper_priv = idle_rss(
    [HEARTH, "--mode", "supervisor", "-c",
     hearth_cfg([{"name": "idle", "argv": [STAMP, m, "0", "stay"]}]), "--log", "warn"], m,
    hearth_reaper)
# hearth and the service's reaper: the reaper is what containment adds to
# a service's idle memory; its Pss, as the binary's pages are hearth's.
hr_all = hr + reaper_pss if isinstance(reaper_pss, int) and isinstance(hr, int) else "failed"
peers = {
    "tini": lambda t: [t, "-s", "--", STAMP, m, "0", "stay"],
    "dumb-init": lambda t: [t, STAMP, m, "0", "stay"],
}
for name, mk in peers.items():
    t = which(name)
    pv = idle_rss(mk(t), m) if t else "failed: not installed"
    row(f"rss_one_child_vs_{name.replace('-', '_')}", "RSS supervising one idle child (KiB)", hr, name,
        pv)
    row(f"rss_one_child_reaper_vs_{name.replace('-', '_')}",
        "RSS supervising one idle contained child, its reaper counted (KiB; hearth VmRSS + "
        "the reaper's Pss)", hr_all, name, pv)
qga = which("qemu-ga")
if qga:
    sd = os.path.join(tmp, "qga-state"); os.makedirs(sd, exist_ok=True)
    p = subprocess.Popen([qga, "-m", "unix-listen", "-p", os.path.join(tmp, "qga.sock"), "-t", sd],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_path(os.path.join(tmp, "qga.sock"))
    time.sleep(0.3)
    qr = rss_kib(p.pid) if p.poll() is None else "failed"
    stop(p)
else:
    qr = "failed: not installed"
row("rss_vs_qemu_ga", "RSS idle agent (KiB; qemu-ga has no child)", hr, "qemu-ga", qr)
row("rss_reaper_vs_qemu_ga", "RSS idle agent, the service's reaper counted (KiB; qemu-ga has no "
    "child)", hr_all, "qemu-ga", qr)
# One reaper beside bwrap's own pid 1 in a pid namespace it made (the same
# job: reap the namespace, hand on signals), the same child below it.
bw = which("bwrap")
if bw:
    _, bw_rss, bw_pss, bw_priv = idle_rss([bw, "--unshare-pid", "--ro-bind", "/", "/", "--proc", "/proc",
                                  "--dev", "/dev", "--bind", tmp, tmp, STAMP, m, "0", "stay"], m,
                                 bwrap_init)
else:
    bw_rss = bw_pss = bw_priv = "failed: not installed"
row("reaper_pss_kib", "a service's reaper, Pss (KiB; bwrap: its pid 1 in the namespace)",
    reaper_pss, "bwrap", bw_pss)
row("reaper_private_kib", "a service's reaper, private pages (KiB; bwrap: its pid 1 in the "
    "namespace)", reaper_priv, "bwrap", bw_priv)
row("reaper_rss_kib", "a service's reaper, VmRSS (KiB; bwrap: its pid 1 in the namespace)",
    reaper_rss, "bwrap", bw_rss)

# ---- start -> child exec ----
hl = exec_latency(tmp, lambda f: [HEARTH, "--mode", "supervisor", "--log", "warn", "-c",
                             hearth_cfg([{"name": "s", "argv": [STAMP, f], "restart": "never"}],
                                        f"e{os.path.basename(f)}.json")])
direct = exec_latency(tmp, lambda f: [STAMP, f])
row("exec_direct", "start -> child exec, no supervisor (ms, median)", direct, "-", "-")
for name, mk in {"tini": lambda t, f: [t, "-s", "--", STAMP, f],
                 "dumb-init": lambda t, f: [t, STAMP, f]}.items():
    t = which(name)
    row(f"exec_vs_{name.replace('-', '_')}", "start -> child exec (ms, median)", hl, name,
        exec_latency(tmp, lambda f: mk(t, f)) if t else "failed: not installed")

# ---- crash -> restart beyond the configured delay ----
def cpu_ms(pid):
    # schedstat's first field is the time on CPU in ns; utime + stime in
    # /proc/PID/stat count whole clock ticks, and s6-supervise's handful of
    # restarts in a run often adds up to less than one.
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[0]) / 1e6
    except (OSError, ValueError, IndexError):
        with open(f"/proc/{pid}/stat") as f:
            parts = f.read().rsplit(")", 1)[1].split()
        return (int(parts[11]) + int(parts[12])) * 1000 / os.sysconf("SC_CLK_TCK")

crash = os.path.join(tmp, "crash")
n = 300
p = subprocess.Popen([HEARTH, "--mode", "supervisor", "--log", "warn", "-c",
                      hearth_cfg([{"name": "main", "argv": ["sleep", "1000"], "main": True},
                                  {"name": "crash", "argv": [STAMP, crash, "1"],
                                   "backoff": {"initial_ms": 0, "max_ms": 0}}], "crash.json")],
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
wait_stamps(crash, n, 30)
hcpu = cpu_ms(p.pid)
stop(p)
g = stamp_gaps(crash, n)
hgap = statistics.median(g)
hcount = len(open(crash).read().split())

s6 = which("s6-supervise")
if s6:
    sdir = os.path.join(tmp, "s6svc"); os.makedirs(sdir)
    crash6 = os.path.join(tmp, "crash6")
    with open(os.path.join(sdir, "run"), "w") as f:
        f.write(f"#!/bin/sh\nexec {STAMP} {crash6} 1\n")
    os.chmod(os.path.join(sdir, "run"), 0o755)
    p = subprocess.Popen([s6, sdir], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # s6-supervise waits out the rest of a second after a run that lasted
    # less than one: that second is its configured delay.
    wait_stamps(crash6, 5, 15, 0.05)
    scpu = cpu_ms(p.pid)
    stop(p)
    g6 = stamp_gaps(crash6, 5)
    s6extra = f"{statistics.median(g6) - 1000:.2f}"
    s6count = len(open(crash6).read().split())
    s6cpu = f"{scpu * 1000 / max(s6count, 1):.0f}"
else:
    s6extra = s6cpu = "failed: not installed"
row("restart_extra_ms", "crash -> restart beyond the delay (ms, median)", f"{hgap:.2f}", "s6-supervise", s6extra)
row("restart_cpu_us", "supervisor CPU per restart (us)", f"{hcpu * 1000 / max(hcount, 1):.0f}",
    "s6-supervise", s6cpu)
shutil.rmtree(tmp, ignore_errors=True)
PY
