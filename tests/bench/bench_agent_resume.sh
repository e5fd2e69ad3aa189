#!/bin/sh
# Resume -> the agent answering its health endpoint again, with the shipped
# Hermes config (rootfs/hermes/hearth.json: the hermes service's restart,
# backoff, exit codes, ready and health checks, stop budget, on_resume,
# secrets and log; the skills overlay's settings) around the Hermes
# stand-in (rootfs/standin/hermes.c), in supervisor mode. The clock runs
# from sending sandbox.resume (the host's call after a pause; a detector's
# resume runs the same steps) to the first GET /health that answers 200
# from the agent that runs after the resume: with on_resume restart:SIGUSR1
# (the shipped setting) that is the restarted process (its pid in hearth's
# status differs from the one before the resume), so the
# figure holds the drain the stand-in models (about 1 s on an idle gateway,
# as Hermes 0.18.2 measured), the exit 75 and the new start. A second row
# takes the same config with on_resume none: the agent that was paused
# answers on. The peer: the same agent started cold without hearth, start
# -> healthy. The stand-in starts at once (HERMES_STANDIN_START_MS unset);
# the real gateway takes 2.9-6 s to healthy, which both the restart and the
# cold start would add. Median of RUNS resumes and RUNS cold starts.
set -eu
B=$(cd "$BUILD" && pwd)
mkdir -p "$B/bench"
musl-gcc -static -O2 -o "$B/bench/hermes" "$ROOT/rootfs/standin/hermes.c"
exec /usr/bin/python3 - "$B" <<'PY'
import json, os, shutil, signal, socket, statistics, subprocess, sys, tempfile, time

B = sys.argv[1]
sys.path.insert(0, os.path.join(os.environ["ROOT"], "tests", "bench"))
from benchlib import Conn, row, wait_path  # noqa: E402

RUNS = 5
tmp = tempfile.mkdtemp(prefix="hearth-bench-resume-",
                       dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
agent = os.path.join(B, "bench", "hermes")
with open(os.path.join(os.environ["ROOT"], "rootfs", "hermes", "hearth.json")) as f:
    shipped = json.load(f)
svc = next(s for s in shipped["services"] if s["name"] == "hermes")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


home = os.path.join(tmp, "home")
workspace = os.path.join(tmp, "workspace")
public = os.path.join(tmp, "public")
for d in (os.path.join(home, "skills"), os.path.join(home, "logs"), workspace):
    os.makedirs(d, exist_ok=True)
for i in range(20):
    os.makedirs(os.path.join(public, f"skill-{i}"), exist_ok=True)
    open(os.path.join(public, f"skill-{i}", "SKILL.md"), "w").close()
# The stand-in's test line port (9119 by default) on a free port too.
api, line = free_port(), free_port()
# The shipped environment, its paths and ports moved into tmp; as root
# here (no hermes user on the bench machine), which the gateway refuses
# unless told.
env = dict(svc["env"], HERMES_HOME=home, API_SERVER_PORT=str(api), HERMES_PORT=str(line),
           HERMES_BIND="127.0.0.1", HERMES_ALLOW_ROOT_GATEWAY="1")
health_path = svc["ready"]["http"].split("/", 1)[1]


def config(on_resume):
    s = {k: v for k, v in svc.items() if k not in ("user", "after", "cwd", "env", "argv")}
    s.update({
        "argv": [agent, "gateway", "run"], "env": env, "cwd": workspace,
        "after": ["skills"],
        "secrets": [dict(x, file=os.path.join(home, os.path.basename(x["file"])))
                    for x in svc["secrets"]],
        "ready": dict(svc["ready"], http=f"127.0.0.1:{api}/{health_path}"),
        "health": dict(svc["health"], http=f"127.0.0.1:{api}/{health_path}"),
        "log": dict(svc["log"], file=os.path.join(home, "logs", "hermes.out")),
        # A contained service's root is read-only: its home, workspace
        # and skills live in tmp.
        "writable": [tmp],
        "on_resume": on_resume,
    })
    sk = dict(shipped["skills"], public=public, private=os.path.join(home, "skills"))
    path = os.path.join(tmp, f"hermes-{on_resume.replace(':', '-')}.json")
    os.makedirs(os.path.join(tmp, "ctl"), exist_ok=True)
    with open(path, "w") as f:
        # The socket in a directory of its own: a service's namespace hides it.
        json.dump({"control": {"listen": ["unix:" + os.path.join(tmp, "ctl", "ctl.sock")]},
                   "skills": sk, "services": [s]}, f)
    return path


def healthy():
    try:
        with socket.create_connection(("127.0.0.1", api), timeout=1) as c:
            c.sendall(f"GET /{health_path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      "Connection: close\r\n\r\n".encode())
            return b" 200 " in c.recv(256)
    except OSError:
        return False


def agent_pid(c):
    """The agent's pid as hearth knows it (the stand-in's own getpid() is
    the same in every start: its pid namespace), once it is running;
    None before."""
    c.send({"jsonrpc": "2.0", "id": "s", "method": "status"})
    while True:
        m = c.line()
        if m.get("id") == "s":
            break
    sv = m.get("result", {}).get("services", [{}])[0]
    return sv.get("pid") if sv.get("state") == "running" else None


def wait_up(c, timeout=60, not_pid=None):
    """Waits until the agent (another process than not_pid) answers its
    health endpoint; its pid, or None at the timeout. hearth is asked over
    c, a connection of its own."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        pid = agent_pid(c)
        if pid is not None and pid != not_pid and healthy():
            return pid
        time.sleep(0.005)
    return None


def stop(p):
    # SIGTERM: hearth stops its service (the stand-in in a session of its
    # own); then the group, for anything left.
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


def resume_to_health(on_resume):
    """Median ms from sandbox.resume to the agent after it answering, and
    what the resume's on_resume step did; or ("failed: ...", None)."""
    p = subprocess.Popen([os.path.join(B, "hearth"), "--mode", "supervisor", "-c",
                          config(on_resume), "--log", "warn"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        sock = os.path.join(tmp, "ctl", "ctl.sock")
        if not wait_path(sock, 1000, 0.01):
            return "failed: hearth's control socket never appeared", None
        c, q = Conn(sock), Conn(sock)
        got, did = [], None
        for i in range(RUNS):
            pid = wait_up(q)
            if pid is None:
                return "failed: the agent never answered its health endpoint", None
            time.sleep(0.5)   # its start settled, as after a pause
            t = time.monotonic()
            c.send({"jsonrpc": "2.0", "id": i + 1, "method": "sandbox.resume", "params": {}})
            restarts = on_resume.startswith("restart")
            now = wait_up(q, 60, pid if restarts else None)
            dt = (time.monotonic() - t) * 1000
            while True:
                m = c.line()
                if m.get("id") == i + 1:
                    break
            if "error" in m:
                return f"failed: sandbox.resume: {m['error']['message']}", None
            step = next((s for s in m["result"]["steps"] if s["name"] == "on_resume"), {})
            did = (step.get("services") or {}).get("hermes", "nothing")
            if now is None:
                return "failed: the agent did not answer within 60 s of the resume", did
            got.append(dt)
        return f"{statistics.median(got):.1f}", did
    finally:
        stop(p)


def cold_start():
    """Median ms from starting the agent (no hearth) to its first 200."""
    got = []
    with open(os.path.join(home, ".env"), "a") as f:
        # hearth's secret is gone with hearth's run; a key of the same form.
        f.write("API_SERVER_KEY=bench-0123456789abcdef\n")
    for _ in range(RUNS):
        t = time.monotonic()
        p = subprocess.Popen([agent, "gateway", "run"], env=dict(os.environ, **env),
                             cwd=workspace, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            while not healthy():
                if p.poll() is not None or time.monotonic() - t > 60:
                    return "failed: the agent started alone never answered"
                time.sleep(0.002)
            got.append((time.monotonic() - t) * 1000)
        finally:
            stop(p)
    return f"{statistics.median(got):.1f}"


try:
    shipped_v, did = resume_to_health(svc["on_resume"])
    none_v, _ = resume_to_health("none")
    cold = cold_start()
    row("resume_health_hermes_ms",
        f"sandbox.resume -> Hermes stand-in /health 200, shipped config (on_resume "
        f"{svc['on_resume']}: the resume did {did}; ms, median; peer: its cold start -> healthy)",
        shipped_v, "cold start", cold)
    row("resume_health_hermes_none_ms",
        "sandbox.resume -> Hermes stand-in /health 200, shipped config with on_resume none "
        "(ms, median; peer: its cold start -> healthy)", none_v, "cold start", cold)
finally:
    shutil.rmtree(tmp, ignore_errors=True)
PY
