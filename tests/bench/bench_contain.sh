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
import os, shutil, statistics, subprocess, sys, tempfile

B = sys.argv[1]
sys.path.insert(0, os.path.join(os.environ["ROOT"], "tests", "bench"))
from benchlib import exec_latency, hearth_config, row, stamp_gaps, stop, wait_stamps  # noqa: E402
HEARTH = os.path.join(B, "hearth")
STAMP = os.path.join(B, "bench", "stamp")
tmp = tempfile.mkdtemp(prefix="hearth-bench-contain-")


def contained_exec(extra):
    return exec_latency(tmp, lambda f: [
        HEARTH, "--mode", "supervisor", "--log", "warn", "-c",
        hearth_config(tmp, [dict({"name": "s", "argv": [STAMP, f], "restart": "never"}, **extra)],
                      f"c{os.path.basename(f)}.json")])


seq = [0]


def restart_gap(extra, n=200):
    """One hearth, a service that exits at once and is restarted without
    delay: the gap between two execs is hearth's exit -> start -> exec path,
    with none of hearth's own start-up in it."""
    seq[0] += 1
    f = os.path.join(tmp, f"r{seq[0]}")
    cfg = hearth_config(tmp, [{"name": "main", "argv": ["sleep", "1000"], "main": True},
                              dict({"name": "crash", "argv": [STAMP, f, "1"],
                                    "backoff": {"initial_ms": 0, "max_ms": 0}}, **extra)],
                        f"r{seq[0]}.json")
    p = subprocess.Popen([HEARTH, "--mode", "supervisor", "--log", "warn", "-c", cfg],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_stamps(f, n, 30)
    stop(p)
    g = stamp_gaps(f, n) if os.path.exists(f) else []
    return f"{statistics.median(g):.3f}" if g else "failed"


if os.geteuid() != 0:
    row("exec_contained", "start -> child exec, contained (ms, median)", "needs root",
        "isolation off", "-")
else:
    settings = [("isolation off", {"isolation": False}),
                ("isolation+seccomp off", {"isolation": False, "seccomp": "off"})]
    on = contained_exec({})
    for name, extra in settings:
        row("exec_contained", "start -> child exec, contained (ms, median)", on, name,
            contained_exec(extra))
    on = restart_gap({})
    for name, extra in settings:
        row("restart_exec_contained", "exit -> restarted child exec, contained (ms, median)", on,
            name, restart_gap(extra))
shutil.rmtree(tmp, ignore_errors=True)
PY
