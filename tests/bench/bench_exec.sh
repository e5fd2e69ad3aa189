#!/bin/sh
# exec of /bin/true, request to exit status, over the control channel:
# hearth's exec.start (its reply, then the exec.exit notification) beside
# qemu-ga's guest-exec + guest-exec-status polled until "exited", both
# driven by the same Python client over a unix socket, one command at a
# time. hearth runs /bin/true contained as a host session is (its own
# cgroup leaf, a copy of the mount namespace template, a pid namespace of
# its own with the reaper exec'd as its PID 1 and a fresh /proc,
# capabilities, seccomp; a host session keeps the guest's writable root
# and /tmp), qemu-ga as a plain child. The second row asks for
# "isolation": false, as a service with isolation off runs: hearth's own
# mount and pid namespaces, no reaper, still its cgroup leaf,
# capabilities and seccomp filter. Median of 200 runs after 20 warm-up
# runs each.
set -eu
B="$BUILD"
tmp=$(mktemp -d /tmp/hearth-bench.XXXXXX)
/usr/bin/python3 - "$B/hearth" "$tmp" <<'PY'
import os, shutil, statistics, sys, time
sys.path.insert(0, os.path.join(os.environ["ROOT"], "tests", "bench"))
from benchlib import Conn, row, start_hearth, start_qga, stop

hearth, tmp = sys.argv[1], sys.argv[2]
WARM, RUNS = 20, 200
procs = []


def run_hearth(c, i, isolation=True):
    params = {"argv": ["/bin/true"]}
    if not isolation:
        params["isolation"] = False
    c.send({"jsonrpc": "2.0", "id": i, "method": "exec.start", "params": params})
    while True:
        m = c.line()
        if m.get("id") == i and "error" in m:
            raise RuntimeError(m["error"]["message"])
        if m.get("method") == "exec.exit":
            return m["params"].get("exit_code")


def run_qga(c, i):
    pid = c.call({"execute": "guest-exec", "arguments": {"path": "/bin/true"}})["return"]["pid"]
    while True:
        r = c.call({"execute": "guest-exec-status", "arguments": {"pid": pid}})["return"]
        if r["exited"]:
            return r.get("exitcode")


def median_ms(fn, c):
    for i in range(WARM):
        fn(c, i + 1)
    got = []
    for i in range(RUNS):
        t = time.monotonic()
        code = fn(c, WARM + i + 1)
        got.append((time.monotonic() - t) * 1000)
        if code != 0:
            return f"failed: /bin/true exited {code}"
    return f"{statistics.median(got):.2f}"


try:
    sock = start_hearth(hearth, tmp, procs)
    try:
        hv = median_ms(run_hearth, Conn(sock))
    except (RuntimeError, OSError, EOFError) as e:
        hv = f"failed: {e}"
    try:
        uv = median_ms(lambda c, i: run_hearth(c, i, isolation=False), Conn(sock))
    except (RuntimeError, OSError, EOFError) as e:
        uv = f"failed: {e}"
    qga = start_qga(tmp, procs)
    if not qga:
        pv = "failed: qemu-ga not installed"
    else:
        try:
            pv = median_ms(run_qga, Conn(qga))
        except (KeyError, OSError, EOFError) as e:
            pv = f"failed: {e}"
    row("exec_true_vs_qemu_ga",
        "exec /bin/true, request to exit status, same Python client (ms p50; lower is better)",
        hv, "qemu-ga", pv)
    row("exec_true_uncontained_vs_qemu_ga",
        "exec /bin/true, isolation off, request to exit status, same Python client "
        "(ms p50; lower is better)",
        uv, "qemu-ga", pv)
finally:
    for p in procs:
        stop(p)
    shutil.rmtree(tmp, ignore_errors=True)
PY
