#!/bin/sh
# The cost of containment: hearth start -> service exec with the default
# containment (a copy of the mount namespace template, the service's
# read-only root and private /tmp and /dev/shm, its pid namespace with the
# reaper exec'd in it and a fresh /proc, its cgroup namespace,
# capabilities, the seccomp filter), beside the same service with
# isolation off, with isolation and seccomp off, and beside bwrap starting
# the same child in the same namespaces (pid, cgroup and mount: the root
# bound read-only, a fresh /proc and /dev, tmpfs on /tmp and /dev/shm, the
# same capabilities, and hearth's own seccomp program, written by
# seccomp_dump.c); the isolation-off start beside dumb-init. Measured as
# bench_peers.sh measures start -> exec (the stamp helper writes
# CLOCK_MONOTONIC at its exec), 40 starts each, taken in 5 rounds that
# alternate the commands so that load from other jobs falls on all of them
# alike; medians. Run as root so the namespaces are made. A second row
# takes hearth's own start-up out: the gap between two execs of a service
# that exits at once and is restarted without delay, with hearth's / shared
# (as in the VM: later starts copy the namespace template) and without.
set -eu
B="$BUILD"
mkdir -p "$B/bench"
cc -O2 -o "$B/bench/stamp" "$ROOT/tests/bench/stamp.c"
make -s -C "$ROOT" build/bench/seccomp_dump
exec /usr/bin/python3 - "$B" <<'PY'
import os, shutil, statistics, subprocess, sys, tempfile

B = sys.argv[1]
sys.path.insert(0, os.path.join(os.environ["ROOT"], "tests", "bench"))
from benchlib import (exec_latencies, hearth_config, row, stamp_gaps, stop,  # noqa: E402
                      wait_stamps, which)
HEARTH = os.path.join(B, "hearth")
STAMP = os.path.join(B, "bench", "stamp")
tmp = tempfile.mkdtemp(prefix="hearth-bench-contain-")
ROUNDS, PER_ROUND = 5, 8
# svc_config_default_caps (init/config/svc_config.c): what a root service keeps.
CAPS = ("CHOWN DAC_OVERRIDE FOWNER FSETID KILL SETGID SETUID SETPCAP SETFCAP "
        "NET_BIND_SERVICE SYS_CHROOT AUDIT_WRITE").split()


def hearth_cmd(extra):
    return lambda f: [
        HEARTH, "--mode", "supervisor", "--log", "warn", "-c",
        hearth_config(tmp, [dict({"name": "s", "argv": [STAMP, f], "restart": "never"}, **extra)],
                      f"c{os.path.basename(f)}.json")]


def bwrap_cmd(bwrap, bpf):
    """The same child in the same namespaces as a contained service. tmp
    is bound writable as hearth's `writable` shows it in the private
    /tmp. The filter is read from a descriptor at each start."""
    argv = [bwrap, "--unshare-pid", "--unshare-cgroup", "--ro-bind", "/", "/",
            "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/dev/shm",
            "--bind", tmp, tmp, "--cap-drop", "ALL"]
    for c in CAPS:
        argv += ["--cap-add", "CAP_" + c]

    def cmd(f):
        if bpf is None:
            return argv + [STAMP, f]
        os.lseek(bpf, 0, os.SEEK_SET)
        return argv + ["--seccomp", str(bpf), STAMP, f]
    return cmd


def seccomp_fd():
    """hearth's default filter for a root service in a file, open; None
    when it cannot be built."""
    path = os.path.join(tmp, "filter.bpf")
    with open(path, "wb") as f:
        if subprocess.run([os.path.join(B, "bench", "seccomp_dump")], stdout=f).returncode:
            return None
    return os.open(path, os.O_RDONLY) if os.path.getsize(path) else None


def alternate(cmds):
    """Latencies of each named command, ROUNDS rounds of PER_ROUND starts,
    the commands taken in turn; the median of each as text or "failed"."""
    lat = {name: [] for name in cmds}
    for _ in range(ROUNDS):
        for name, (cmd, fds) in cmds.items():
            lat[name] += exec_latencies(tmp, cmd, PER_ROUND, fds)
    return {n: f"{statistics.median(v):.2f}" if v else "failed" for n, v in lat.items()}


seq = [0]


def restart_gap(extra, n=200, shared=True):
    """One hearth, a service that exits at once and is restarted without
    delay: the gap between two execs is hearth's exit -> start -> exec path,
    with none of hearth's own start-up in it. shared: hearth runs in a
    mount namespace of its own whose / is shared, as in the VM, where
    hearth makes it so: only then does it keep the namespace template
    (contain_mounts_propagate), so later starts copy it. On a host whose /
    is private (shared False) every contained start builds its namespace."""
    seq[0] += 1
    f = os.path.join(tmp, f"r{seq[0]}")
    cfg = hearth_config(tmp, [{"name": "main", "argv": ["sleep", "1000"], "main": True},
                              dict({"name": "crash", "argv": [STAMP, f, "1"],
                                    "backoff": {"initial_ms": 0, "max_ms": 0}}, **extra)],
                        f"r{seq[0]}.json")
    wrap = ["unshare", "--mount", "--propagation", "shared", "--"] if shared else []
    p = subprocess.Popen(wrap + [HEARTH, "--mode", "supervisor", "--log", "warn", "-c", cfg],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_stamps(f, n, 30)
    stop(p)
    g = stamp_gaps(f, n) if os.path.exists(f) else []
    return f"{statistics.median(g):.3f}" if g else "failed"


FIG = "start -> child exec, contained (ms, median)"
if os.geteuid() != 0:
    for key, peer in [("exec_contained", "isolation off"), ("exec_contained_vs_bwrap", "bwrap"),
                      ("exec_uncontained_vs_dumb_init", "dumb-init")]:
        row(key, FIG, "failed: needs root", peer, "-")
else:
    cmds = {"on": (hearth_cmd({}), ()),
            "isolation off": (hearth_cmd({"isolation": False}), ()),
            "isolation+seccomp off": (hearth_cmd({"isolation": False, "seccomp": "off"}), ())}
    bwrap, dumb = which("bwrap"), which("dumb-init")
    bpf = seccomp_fd() if bwrap else None
    if bwrap:
        cmds["bwrap"] = (bwrap_cmd(bwrap, bpf), (bpf,) if bpf is not None else ())
    if dumb:
        cmds["dumb-init"] = (lambda f: [dumb, STAMP, f], ())
    got = alternate(cmds)
    on = got["on"]
    for name in ("isolation off", "isolation+seccomp off"):
        row("exec_contained", FIG, on, name, got[name])
    row("exec_contained_vs_bwrap",
        "start -> child exec, contained, beside bwrap making the same namespaces "
        + ("with hearth's seccomp program" if bpf is not None
           else "without a seccomp filter (hearth's program could not be written)")
        + " (ms, median)",
        on, "bwrap", got["bwrap"] if bwrap else "failed: not installed")
    row("exec_uncontained_vs_dumb_init", "start -> child exec, isolation off (ms, median)",
        got["isolation off"], "dumb-init", got["dumb-init"] if dumb else "failed: not installed")
    on = restart_gap({})
    for name, extra in [("isolation off", {"isolation": False}),
                        ("isolation+seccomp off", {"isolation": False, "seccomp": "off"})]:
        row("restart_exec_contained", "exit -> restarted child exec, contained (ms, median)", on,
            name, restart_gap(extra))
    row("restart_exec_contained_no_template",
        "exit -> restarted child exec, contained, / not shared: no template (ms, median)",
        restart_gap({}, shared=False), "isolation off", restart_gap({"isolation": False},
                                                                   shared=False))
shutil.rmtree(tmp, ignore_errors=True)
PY
