#!/bin/sh
# The cost of containment: hearth start -> service exec with the service in
# its own mount and cgroup namespaces, masks and the seccomp filter (the
# default), beside the same service with isolation off, and with isolation
# and seccomp off. Measured as bench_peers.sh measures start -> exec (a
# helper stamps CLOCK_MONOTONIC at exec), median of 40 runs each, run as
# root so the namespaces are made. A second row takes hearth's own start-up
# out: the gap between two execs of a service that exits at once and is
# restarted without delay (as bench_peers.sh measures restarts).
set -eu
B="$BUILD"
mkdir -p "$B/bench"
cc -O2 -o "$B/bench/stamp" "$ROOT/tests/bench/stamp.c"
exec /usr/bin/python3 - "$B" <<'PY'
import json, os, shutil, signal, statistics, subprocess, sys, tempfile, time

B = sys.argv[1]
sys.path.insert(0, os.path.join(os.environ["ROOT"], "tests", "bench"))
from benchlib import row, stop, wait_file, which  # noqa: E402
HEARTH = os.path.join(B, "hearth")
STAMP = os.path.join(B, "bench", "stamp")
tmp = tempfile.mkdtemp(prefix="hearth-bench-contain-")
# The control socket in a directory of its own: a contained service's
# namespace hides that directory.
os.makedirs(os.path.join(tmp, "ctl"))

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

def restart_gap(extra, n=200):
    """One hearth, a service that exits at once and is restarted without
    delay: the gap between two execs is hearth's exit -> start -> exec path,
    with none of hearth's own start-up in it."""
    seq[0] += 1
    f = os.path.join(tmp, f"r{seq[0]}")
    cfg = os.path.join(tmp, f"r{seq[0]}.json")
    with open(cfg, "w") as fh:
        json.dump({"control": {"listen": ["unix:" + os.path.join(tmp, "ctl", "ctl.sock")]},
                   "services": [{"name": "main", "argv": ["sleep", "1000"], "main": True},
                                dict({"name": "crash", "argv": [STAMP, f, "1"],
                                      "backoff": {"initial_ms": 0, "max_ms": 0}}, **extra)]}, fh)
    p = subprocess.Popen([HEARTH, "--mode", "supervisor", "--log", "warn", "-c", cfg],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t = time.monotonic() + 30
    while time.monotonic() < t:
        if os.path.exists(f) and len(open(f).read().split()) > n:
            break
        time.sleep(0.01)
    stop(p)
    ts = [int(x) for x in open(f).read().split()][:n + 1] if os.path.exists(f) else []
    g = [(b - a) / 1e6 for a, b in zip(ts, ts[1:])]
    return f"{statistics.median(g):.3f}" if g else "failed"

if os.geteuid() != 0:
    row("exec_contained", "start -> child exec, contained (ms, median)", "needs root",
        "isolation off", "-")
else:
    settings = [("isolation off", {"isolation": False}),
                ("isolation+seccomp off", {"isolation": False, "seccomp": "off"})]
    on = exec_latency({})
    for name, extra in settings:
        row("exec_contained", "start -> child exec, contained (ms, median)", on, name,
            exec_latency(extra))
    on = restart_gap({})
    for name, extra in settings:
        row("restart_exec_contained", "exit -> restarted child exec, contained (ms, median)", on,
            name, restart_gap(extra))
shutil.rmtree(tmp, ignore_errors=True)
PY
