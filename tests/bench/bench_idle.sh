#!/bin/sh
# Idle wake-ups: voluntary context switches per minute of a supervisor
# with one sleeping child and no traffic, beside tini, dumb-init and
# qemu-ga (no child). hearth runs with the Hermes-like timers off (no
# health check, no skills poll): the design's "0 with polling off" row.
# IDLE_SECONDS (default 20) sets the window.
set -eu
B="$BUILD"
exec /usr/bin/python3 - "$B" "${IDLE_SECONDS:-20}" <<'PY'
import json, os, shutil, subprocess, sys, tempfile, time

B, window = sys.argv[1], float(sys.argv[2])
tmp = tempfile.mkdtemp(prefix="hearth-idle-")

def which(name):
    return shutil.which(name) or (os.path.exists(f"/usr/sbin/{name}") and f"/usr/sbin/{name}") or None

def vcs(pid):
    with open(f"/proc/{pid}/status") as f:
        for l in f:
            if l.startswith("voluntary_ctxt_switches:"):
                return int(l.split()[1])

def measure(argv):
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.0)  # start-up is not idle
        a = vcs(p.pid)
        time.sleep(window)
        b = vcs(p.pid)
        return f"{(b - a) * 60.0 / window:.1f}"
    finally:
        p.kill()
        p.wait()

cfg = os.path.join(tmp, "h.json")
with open(cfg, "w") as f:
    json.dump({"control": {"listen": ["unix:" + os.path.join(tmp, "ctl.sock")]},
               "services": [{"name": "idle", "argv": ["/bin/sleep", "100000"]}]}, f)
hv = measure([os.path.join(B, "hearth"), "--mode", "supervisor", "-c", cfg, "--log", "warn"])
fig = "idle wake-ups per minute, one sleeping child, no traffic"
peers = [("tini", lambda t: [t, "-s", "--", "/bin/sleep", "100000"]),
         ("dumb-init", lambda t: [t, "/bin/sleep", "100000"]),
         ("qemu-ga", lambda t: [t, "-m", "unix-listen", "-p", os.path.join(tmp, "qga.sock"),
                                "-t", tmp])]
for name, argv in peers:
    path = which(name)
    pv = measure(argv(path)) if path else "absent"
    print(f"idle_wakeups_{name.replace('-', '_')}\t{fig}\t{hv}\t{name}\t{pv}")
shutil.rmtree(tmp, ignore_errors=True)
PY
