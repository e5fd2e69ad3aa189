#!/bin/sh
# hearthctl top over 50 sandboxes: 50 supervisor-mode hearths, each with
# one idle service and its own unix socket; one `hearthctl top --once`
# (every connect at once, status and metrics from each) beside a shell
# loop of 50 sequential `hearthctl status` calls, the way a script polls
# a fleet without it. Medians of 15 runs each, in ms.
set -eu
B="$BUILD"
tmp=$(mktemp -d /tmp/hearth-bench-fleet.XXXXXX)
exec /usr/bin/python3 - "$B" "$tmp" <<'PY'
import json, os, shutil, statistics, subprocess, sys, time

B, tmp = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(os.environ["ROOT"], "tests", "bench"))
from benchlib import row, stop  # noqa: E402
N, RUNS = 50, 15
CTL = os.path.join(B, "hearthctl")
procs = []


def timed(cmd, **kw):
    t = time.perf_counter_ns()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kw)
    assert r.returncode == 0, r.stderr
    return (time.perf_counter_ns() - t) / 1e6


try:
    for i in range(N):
        d = os.path.join(tmp, f"s{i:02d}")
        os.makedirs(d)
        with open(os.path.join(d, "h.json"), "w") as f:
            json.dump({"control": {"listen": ["unix:" + os.path.join(d, "hearth.sock")]},
                       "services": [{"name": "agent", "argv": ["/bin/sleep", "100000"]}]}, f)
        procs.append(subprocess.Popen([os.path.join(B, "hearth"), "--mode", "supervisor", "-c",
                                       os.path.join(d, "h.json"), "--log", "warn"]))
    socks = [os.path.join(tmp, f"s{i:02d}", "hearth.sock") for i in range(N)]
    t_end = time.monotonic() + 20
    while not all(os.path.exists(s) for s in socks) and time.monotonic() < t_end:
        time.sleep(0.02)
    glob = f"unix:{tmp}/s*/hearth.sock"
    # Every sandbox answers before anything is timed.
    timed([CTL, "--connect", glob, "top", "--once"])
    loop = "for s in " + " ".join(socks) + '; do "$0" --connect unix:$s status; done'
    top = statistics.median(timed([CTL, "--connect", glob, "top", "--once"])
                            for _ in range(RUNS))
    seq = statistics.median(timed(["sh", "-c", loop, CTL]) for _ in range(RUNS))
    row("fleet_top_50_ms", "hearthctl top --once over 50 sandboxes (ms, status+metrics each)",
        f"{top:.1f}", "50x hearthctl status", f"{seq:.1f}")
finally:
    for p in procs:
        stop(p)
    shutil.rmtree(tmp, ignore_errors=True)
PY
