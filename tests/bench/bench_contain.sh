#!/bin/sh
# The cost of containment: hearth start -> service exec with the service in
# its own mount and cgroup namespaces, masks and the seccomp filter (the
# default), beside the same service with isolation off, and with isolation
# and seccomp off. Measured as bench_peers.sh measures start -> exec (a
# helper stamps CLOCK_MONOTONIC at exec), median of 40 runs each, run as
# root so the namespaces are made.
set -eu
B="$BUILD"
mkdir -p "$B/bench"
cc -O2 -o "$B/bench/stamp" "$ROOT/tests/bench/stamp.c"
exec /usr/bin/python3 - "$B" <<'PY'
import json, os, shutil, signal, statistics, subprocess, sys, tempfile, time

B = sys.argv[1]
HEARTH = os.path.join(B, "hearth")
STAMP = os.path.join(B, "bench", "stamp")
tmp = tempfile.mkdtemp(prefix="hearth-bench-contain-")
# The control socket in a directory of its own: a contained service's
# namespace hides that directory.
os.makedirs(os.path.join(tmp, "ctl"))

def row(key, fig, hv, peer, pv):
    print(f"{key}\t{fig}\t{hv}\t{peer}\t{pv}")

def wait_file(path, timeout=5):
    t = time.monotonic() + timeout
    while time.monotonic() < t:
        if os.path.exists(path) and os.path.getsize(path) > 0:
            return True
        time.sleep(0.002)
    return False

def stop(p):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill(); p.wait()

seq = [0]

def exec_latency(extra, runs=40):
    lat = []
    for _ in range(runs):
        seq[0] += 1
        f = os.path.join(tmp, f"x{seq[0]}")
        cfg = os.path.join(tmp, f"c{seq[0]}.json")
        with open(cfg, "w") as fh:
            json.dump({"control": {"listen": ["unix:" + os.path.join(tmp, "ctl", "ctl.sock")]},
                       "services": [dict({"name": "s", "argv": [STAMP, f], "restart": "never"},
                                         **extra)]}, fh)
        t0 = time.monotonic_ns()
        p = subprocess.Popen([HEARTH, "--mode", "supervisor", "--log", "warn", "-c", cfg],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not wait_file(f):
            stop(p); continue
        with open(f) as fh:
            lat.append((int(fh.read().split()[0]) - t0) / 1e6)
        p.wait(5) if p.poll() is None else None
        stop(p)
    return f"{statistics.median(lat):.2f}" if lat else "failed"

if os.geteuid() != 0:
    row("exec_contained", "start -> child exec, contained (ms, median)", "needs root",
        "isolation off", "-")
else:
    on = exec_latency({})
    off = exec_latency({"isolation": False})
    bare = exec_latency({"isolation": False, "seccomp": "off"})
    row("exec_contained", "start -> child exec, contained (ms, median)", on, "isolation off", off)
    row("exec_contained", "start -> child exec, contained (ms, median)", on,
        "isolation+seccomp off", bare)
shutil.rmtree(tmp, ignore_errors=True)
PY
