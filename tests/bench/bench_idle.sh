#!/bin/sh
# Idle wake-ups: voluntary context switches per minute of a supervisor
# with one sleeping child and no traffic, beside tini, dumb-init and
# qemu-ga (no child). hearth runs first with every timer off (no health
# check, no skills poll): the design's "0 with polling off" row; then with
# the Hermes config's timers (rootfs/hermes/hearth.json: an HTTP health
# check of the stand-in agent's /health every 60 s, the skills overlay
# polled every 60 s, the agent's output to a log file), beside a shell
# loop making the same HTTP request on the same schedule. IDLE_SECONDS
# (default 20) sets the window; the Hermes rows use two whole periods at
# least, hearth's opening after its first probe, so that each holds two
# probes. BUILD may be relative: it is made absolute, since the stand-in
# agent runs in a working directory of its own.
set -eu
B=$(cd "$BUILD" && pwd)
mkdir -p "$B/bench"
musl-gcc -static -O2 -o "$B/bench/hermes" "$ROOT/rootfs/standin/hermes.c"
exec /usr/bin/python3 - "$B" "${IDLE_SECONDS:-20}" <<'PY'
import json, os, shutil, signal, subprocess, sys, tempfile, time

B, window = sys.argv[1], float(sys.argv[2])
# On tmpfs where there is one: on a disk, a skills poll whose directory
# blocks were evicted waits for the disk, and the row would count the
# page cache's misses instead of hearth's wake-ups.
tmp = tempfile.mkdtemp(prefix="hearth-idle-",
                       dir="/dev/shm" if os.path.isdir("/dev/shm") else None)

sys.path.insert(0, os.path.join(os.environ["ROOT"], "tests", "bench"))
from benchlib import which  # noqa: E402

def vcs(pid):
    with open(f"/proc/{pid}/status") as f:
        for l in f:
            if l.startswith("voluntary_ctxt_switches:"):
                return int(l.split()[1])

def stop(p):
    # SIGTERM first: each supervisor then stops its own child (hearth its
    # services, which live in sessions of their own); a SIGKILL would leave
    # them behind. Then the process group, for what a shell left running.
    for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            pass
        try:
            p.wait(wait)
            return
        except subprocess.TimeoutExpired:
            pass

def measure(argv, window=window, settle=1.0, up=None):
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        # Start-up is not idle: with up, until it says the supervised
        # agent answers (checked from here, so the supervisor does not
        # wake for it), then settle more.
        deadline = time.time() + 150
        while up and not up() and time.time() < deadline:
            time.sleep(0.1)
        time.sleep(settle)
        a = vcs(p.pid)
        time.sleep(window)
        b = vcs(p.pid)
        return f"{(b - a) * 60.0 / window:.1f}"
    finally:
        stop(p)

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
    pv = measure(argv(path)) if path else "failed: not installed"
    print(f"idle_wakeups_{name.replace('-', '_')}\t{fig}\t{hv}\t{name}\t{pv}")

# ---- activity tracking (init/sandbox/activity.c) ----
# On by default; here with a service that may hold leases (it gets a
# NOTIFY_SOCKET) and nobody subscribed: nothing is sampled, so 0 is
# expected. Then the same with one client subscribed to events, as a
# host's auto-pauser is: the sampler runs every activity.sample_ms.
import socket
acfg = os.path.join(tmp, "act.json")
asock = os.path.join(tmp, "act.sock")
act = {"enabled": True, "sample_ms": 5000, "idle_ms": 30000}
with open(acfg, "w") as f:
    json.dump({"control": {"listen": ["unix:" + asock]}, "activity": act,
               "services": [{"name": "idle", "argv": ["/bin/sleep", "100000"],
                             "activity": {"lease": True}}]}, f)
av = measure([os.path.join(B, "hearth"), "--mode", "supervisor", "-c", acfg, "--log", "warn"],
             settle=2.0)
print(f"idle_wakeups_activity\tidle wake-ups per minute, activity tracking on, lease-enabled "
      f"service, no subscriber\t{av}\t-\t-")

def measure_subscribed(argv, sock, window=window, settle=2.0):
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        time.sleep(settle)
        c = socket.socket(socket.AF_UNIX)
        c.connect(sock)
        c.sendall(b'{"jsonrpc":"2.0","id":1,"method":"events.subscribe","params":{}}\n')
        c.recv(65536)
        time.sleep(0.5)
        a = vcs(p.pid)
        time.sleep(window)
        b = vcs(p.pid)
        c.close()
        return f"{(b - a) * 60.0 / window:.1f}"
    finally:
        stop(p)

sv = measure_subscribed([os.path.join(B, "hearth"), "--mode", "supervisor", "-c", acfg,
                         "--log", "warn"], asock)
print(f"idle_wakeups_activity_subscribed\tidle wake-ups per minute, activity tracking on, one "
      f"event subscriber (sample_ms 5000)\t{sv}\t-\t-")

# ---- the Hermes config's timers ----
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    api = s.getsockname()[1]
home = os.path.join(tmp, "home")
public = os.path.join(tmp, "public")
for d in ("skills", "logs"):
    os.makedirs(os.path.join(home, d), exist_ok=True)
for i in range(20):
    os.makedirs(os.path.join(public, f"skill-{i}"), exist_ok=True)
    open(os.path.join(public, f"skill-{i}", "SKILL.md"), "w").close()
agent = os.path.join(B, "bench", "hermes")
workspace = os.path.join(tmp, "workspace")
os.makedirs(workspace, exist_ok=True)
# The stand-in's API server answers GET /health, as the gateway's does
# with API_SERVER_ENABLED (docs/hermes.md).
# It runs as root here (the bench machine has no hermes user to give it,
# and its home is a root-owned scratch directory): the stand-in, like the
# real gateway, refuses that unless told.
agent_env = {"HERMES_HOME": home, "HERMES_PORT": str(port), "HERMES_BIND": "127.0.0.1",
             "API_SERVER_ENABLED": "true", "API_SERVER_HOST": "127.0.0.1",
             "API_SERVER_PORT": str(api), "HERMES_ALLOW_ROOT_GATEWAY": "1",
             "API_SERVER_KEY": "bench-0123456789abcdef", "TIRITH_ENABLED": "false",
             "HERMES_GATEWAY_EXTERNAL_SUPERVISOR": "1", "INVOCATION_ID": "hearth"}
# The shipped config's schedule (rootfs/hermes/hearth.json).
with open(os.path.join(os.environ["ROOT"], "rootfs", "hermes", "hearth.json")) as f:
    shipped = json.load(f)
interval = shipped["services"][0]["health"]["interval_ms"]
poll = shipped["skills"]["poll_ms"]
hermes_cfg = os.path.join(tmp, "hermes.json")
with open(hermes_cfg, "w") as f:
    # The socket in a directory of its own: a service's namespace hides it.
    os.makedirs(os.path.join(tmp, "ctl"), exist_ok=True)
    json.dump({"control": {"listen": ["unix:" + os.path.join(tmp, "ctl", "ctl2.sock")]},
               "skills": {"public": public, "private": os.path.join(home, "skills"),
                          "ignore": ["._*", ".DS_Store", ".*"], "poll_ms": poll},
               "services": [{
                   "name": "hermes", "argv": [agent, "gateway", "run"],
                   "env": agent_env,
                   # As the shipped config: the API server (and /health)
                   # needs a key, made in the home's .env.
                   "secrets": [{"env": "API_SERVER_KEY", "file": os.path.join(home, ".env")}],
                   # Its workspace copy of the history lands here, not
                   # in whatever directory make bench was started from.
                   "cwd": workspace,
                   # Its home and workspace: a contained service's root
                   # is read-only and its /dev/shm, where tmp is, a
                   # private tmpfs; writable shows the host's directory.
                   "writable": [tmp],
                   "after": ["skills"], "restart": "always",
                   "ready": {"http": f"127.0.0.1:{api}/health", "timeout_ms": 60000},
                   "health": dict(shipped["services"][0]["health"],
                                  http=f"127.0.0.1:{api}/health"),
                   "log": {"file": os.path.join(home, "logs", "hermes.out")}}]}, f)
def agent_up():
    try:
        with socket.create_connection(("127.0.0.1", api), timeout=1) as c:
            c.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            return b" 200 " in c.recv(256)
    except OSError:
        return False

def first_check_done():
    # hearth's first probe comes at the first grid point more than half a
    # period after the agent is up; from then on every multiple of the
    # period in the window is one, so a window of two periods holds two.
    # Asked over the control socket: a wake-up, but before the window.
    try:
        with socket.socket(socket.AF_UNIX) as c:
            c.settimeout(2)
            c.connect(os.path.join(tmp, "ctl", "ctl2.sock"))
            c.sendall(b'{"jsonrpc":"2.0","id":1,"method":"status"}\n')
            buf = b""
            while not buf.endswith(b"\n"):
                d = c.recv(65536)
                if not d:
                    break
                buf += d
        svc = json.loads(buf)["result"]["services"][0]
        return svc.get("health", {}).get("checks", 0) >= 1
    except (OSError, ValueError, KeyError, IndexError):
        return False

hwin = max(window, 2 * interval / 1000.0)
# After the first probe (and the poll on the same grid point), then 2 s:
# start-up, the readiness probe (every 0.2 s until it passes) and the
# agent's start-up output are over.
hv = measure([os.path.join(B, "hearth"), "--mode", "supervisor", "-c", hermes_cfg,
              "--log", "warn"], window=hwin, settle=2.0, up=first_check_done)
# The peer: a shell loop making the same HTTP request on the same schedule
# (bash's /dev/tcp, so the probe is the shell's own connect, write and
# read, no child per probe beyond sleep), its agent started beside it.
ag = subprocess.Popen([agent, "gateway", "run"],
                      env=dict(os.environ, **agent_env),
                      cwd=workspace, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    req = "GET /health HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nConnection: close\\r\\n\\r\\n"
    loop = (f"while sleep {interval / 1000:g}; do {{ printf '{req}' >&3; read -r l <&3; }} "
            f"3<>/dev/tcp/127.0.0.1/{api} 2>/dev/null || echo down; done")
    pv = measure(["/bin/bash", "-c", loop], window=hwin, settle=2.0, up=agent_up)
finally:
    ag.kill()
    ag.wait()
print(f"idle_wakeups_hermes\tidle wake-ups per minute, Hermes config timers (HTTP health "
      f"{interval / 1000:g} s, skills poll {poll / 1000:g} s; target <= 4)\t{hv}\t"
      f"shell probe loop\t{pv}")
shutil.rmtree(tmp, ignore_errors=True)
PY
