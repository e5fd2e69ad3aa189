#!/bin/sh
# Dozens per node: DENSITY_N (50) sandboxes of the OCI image under podman
# (runc, a private store under build/bench/podman), each with its own home
# and workspace bound in and the stand-in agent as its Hermes. Measured:
#   - time from the first `podman run` to every sandbox's agent ready;
#   - at idle over DENSITY_IDLE_S (600) seconds: the 50 hearths' summed
#     RSS (and with their services' reapers, by Pss), CPU time and
#     wake-ups (context switches) per minute, summed over all 50;
#   - hearthctl top --once over all of them, beside 50 sequential
#     `hearthctl status` calls.
# The control sockets reach the host through a bound /run/hearth per
# sandbox. Rows carry "failed: REASON" when podman or the image is missing.
set -eu
B="$BUILD"
exec /usr/bin/python3 - "$B" <<'PY'
import glob, json, os, shutil, statistics, subprocess, sys, time, uuid

B = sys.argv[1]
ROOT = os.environ["ROOT"]
sys.path.insert(0, os.path.join(ROOT, "tests", "bench"))
from benchlib import row  # noqa: E402

N = int(os.environ.get("DENSITY_N", "50"))
IDLE_S = float(os.environ.get("DENSITY_IDLE_S", "600"))
WORK = os.path.join(B, "bench", "density")
STORE = os.path.join(B, "bench", "podman")
VERSION = open(os.path.join(ROOT, "VERSION")).read().strip()
IMAGE = f"localhost/hearth-hermes:{VERSION}"
CTL = os.path.join(B, "hearthctl")
PODMAN = ["podman", "--root", os.path.join(STORE, "root"), "--runroot", os.path.join(STORE, "run"),
          "--tmpdir", os.path.join(STORE, "tmp"), "--runtime", "runc",
          "--cgroup-manager", "cgroupfs", "--events-backend", "file"]
KEYS = [("density_start_all_ms", f"{N} sandboxes (podman, stand-in agent): first run → every agent ready (ms)"),
        ("density_hearth_rss_kib", f"{N} idle sandboxes: hearths' RSS summed (KiB)"),
        ("density_hearth_pss_kib", f"{N} idle sandboxes: hearths + their services' reapers, Pss summed (KiB)"),
        ("density_cpu_ms_per_min", f"{N} idle sandboxes: hearths' CPU summed (ms per minute)"),
        ("density_wakeups_per_min", f"{N} idle sandboxes: hearths' wake-ups summed (context switches per minute)"),
        ("density_top_ms", f"hearthctl top --once over {N} podman sandboxes (ms)")]


def fail_all(why):
    for k, fig in KEYS:
        row(k, fig, f"failed: {why}", "-", "-")
    sys.exit(0)


def podman(*args, timeout=120, check=True):
    r = subprocess.run(PODMAN + list(args), capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise RuntimeError(f"podman {args[0]}: {r.stderr.strip()[-300:]}")
    return r


def proc_status(pid, field):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def cpu_ticks(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])          # utime + stime


def pss(pid):
    try:
        for line in open(f"/proc/{pid}/smaps_rollup"):
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def children(pid):
    out = []
    for t in glob.glob(f"/proc/{pid}/task/*/children"):
        out += [int(x) for x in open(t).read().split()]
    return out


def reapers(pid):
    """hearth's children that are its services' reapers (hearth-reaper)."""
    out = []
    for c in children(pid):
        try:
            if open(f"/proc/{c}/cmdline", "rb").read().split(b"\0")[0].endswith(b"hearth-reaper"):
                out.append(c)
        except OSError:
            pass
    return out


def ctl(sock, *args, timeout=10):
    r = subprocess.run([CTL, "--json", "--connect", "unix:" + sock, *args],
                       capture_output=True, text=True, timeout=timeout)
    return json.loads(r.stdout) if r.returncode == 0 and r.stdout.strip() else None


def agent_ready(sock):
    st = ctl(sock, "status")
    if not st:
        return False
    return any(s["name"] == "hermes" and s.get("state") == "running" for s in st.get("services", []))


missing = [t for t in ("podman", "runc", "umoci", "busybox") if not shutil.which(t)]
if missing:
    fail_all(f"{', '.join(missing)} not installed")
if os.geteuid() != 0:
    fail_all("podman runs as root here")
shutil.rmtree(WORK, ignore_errors=True)
for d in ("root", "run", "tmp"):
    os.makedirs(os.path.join(STORE, d), exist_ok=True)
os.makedirs(WORK)
r = subprocess.run([os.path.join(ROOT, "rootfs", "build-oci.sh"), "--out", os.path.join(WORK, "oci")],
                   capture_output=True, text=True, timeout=300)
if r.returncode != 0:
    fail_all("build-oci.sh: " + (r.stderr.strip().splitlines() or ["?"])[-1])
podman("rm", "-a", "-f", timeout=300)
podman("load", "-i", os.path.join(WORK, "oci", "hearth-hermes.tar"), timeout=300)

names, socks = [], []
try:
    t0 = time.monotonic()
    for i in range(N):
        d = os.path.join(WORK, f"s{i:02d}")
        for sub in ("home", "ws", "run"):
            os.makedirs(os.path.join(d, sub))
        os.chown(os.path.join(d, "home"), 10000, 10000)
        os.chown(os.path.join(d, "ws"), 10000, 10000)
        name = "hearth-density-" + uuid.uuid4().hex[:8]
        podman("run", "-d", "--name", name, "--network", "none",
               "--ulimit", "nofile=20000:20000", "--ulimit", "nproc=4096:4096",
               "--cap-add", "SYS_ADMIN", "--cap-add", "NET_ADMIN",
               "-v", f"{d}/home:/root/.hermes", "-v", f"{d}/ws:/workspace",
               "-v", f"{d}/run:/run/hearth", IMAGE)
        names.append(name)
        socks.append(os.path.join(d, "run", "control.sock"))
    pending = set(range(N))
    deadline = time.monotonic() + 300 + 5 * N
    while pending and time.monotonic() < deadline:
        pending = {i for i in pending if not agent_ready(socks[i])}
        if pending:
            time.sleep(0.2)
    if pending:
        raise RuntimeError(f"{len(pending)} of {N} agents not ready: s{min(pending):02d}")
    start_ms = (time.monotonic() - t0) * 1000
    pids = [int(podman("inspect", n, "--format", "{{.State.Pid}}").stdout.strip()) for n in names]
    for p in pids:
        comm = open(f"/proc/{p}/comm").read().strip()
        if comm != "hearth":
            raise RuntimeError(f"container pid {p} is {comm}, not hearth")
    time.sleep(min(30.0, IDLE_S / 10))                   # the start's echoes settle
    ticks = os.sysconf("SC_CLK_TCK")
    c0 = sum(cpu_ticks(p) for p in pids)
    w0 = sum(proc_status(p, "voluntary_ctxt_switches") + proc_status(p, "nonvoluntary_ctxt_switches")
             for p in pids)
    t1 = time.monotonic()
    time.sleep(IDLE_S)
    minutes = (time.monotonic() - t1) / 60
    c1 = sum(cpu_ticks(p) for p in pids)
    w1 = sum(proc_status(p, "voluntary_ctxt_switches") + proc_status(p, "nonvoluntary_ctxt_switches")
             for p in pids)
    rss = sum(proc_status(p, "VmRSS") for p in pids)
    pss_all = sum(pss(p) + sum(pss(r) for r in reapers(p)) for p in pids)
    glob_spec = f"unix:{WORK}/s*/run/control.sock"
    subprocess.run([CTL, "--connect", glob_spec, "top", "--once"], capture_output=True, timeout=60)
    tops = []
    for _ in range(9):
        t = time.perf_counter_ns()
        r = subprocess.run([CTL, "--connect", glob_spec, "top", "--once"], capture_output=True, timeout=60)
        if r.returncode != 0:
            raise RuntimeError("hearthctl top: " + r.stderr.decode(errors="replace")[-200:])
        tops.append((time.perf_counter_ns() - t) / 1e6)
    seqs = []
    for _ in range(3):
        t = time.perf_counter_ns()
        for s in socks:
            subprocess.run([CTL, "--connect", "unix:" + s, "status"], capture_output=True, timeout=30)
        seqs.append((time.perf_counter_ns() - t) / 1e6)
    row(KEYS[0][0], KEYS[0][1], f"{start_ms:.0f}", "-", "-")
    row(KEYS[1][0], KEYS[1][1], str(rss), "-", "-")
    row(KEYS[2][0], KEYS[2][1], str(pss_all), "-", "-")
    row(KEYS[3][0], KEYS[3][1], f"{(c1 - c0) * 1000 / ticks / minutes:.1f}", "-", "-")
    row(KEYS[4][0], KEYS[4][1], f"{(w1 - w0) / minutes:.1f}", "-", "-")
    row(KEYS[5][0], KEYS[5][1], f"{statistics.median(tops):.1f}", f"{N}x hearthctl status",
        f"{statistics.median(seqs):.1f}")
except Exception as e:  # noqa: BLE001  (every row says why)
    fail_all(str(e).replace("\t", " ").replace("\n", " ")[:200])
finally:
    for n in names:
        podman("rm", "-f", "-t", "0", n, check=False, timeout=60)
    shutil.rmtree(WORK, ignore_errors=True)
PY
