"""systemd's readiness protocol: ready.notify and health.watchdog_ms. The
service is a small python3 program (no systemd-notify in a musl image)
that sends, on the NOTIFY_SOCKET hearth gave it, each datagram the test
appends to a file (one Python bytes literal per line), and WATCHDOG=1
every 100 ms while a "ping" file exists."""
import json
import os
import subprocess
import time

import pytest

from conftest import HEARTH

SERVICE = r'''
import ast, json, os, signal, socket, sys, time
d = sys.argv[1]
env = {k: os.environ.get(k) for k in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")}
with open(os.path.join(d, "env.tmp"), "w") as f:
    json.dump(env, f)
os.rename(os.path.join(d, "env.tmp"), os.path.join(d, "env.json"))
addr = env["NOTIFY_SOCKET"]
addr = "\0" + addr[1:] if addr.startswith("@") else addr
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)

def term(sig, frame):
    # With a "hold" file: asks for more time to stop instead of stopping.
    if os.path.exists(os.path.join(d, "hold")):
        s.sendto(b"STOPPING=1\nEXTEND_TIMEOUT_USEC=30000000", addr)
        return
    sys.exit(0)

signal.signal(signal.SIGTERM, term)
# Lines already sent, kept across restarts so a new process does not
# send them again.
try:
    done = int(open(os.path.join(d, "done")).read())
except (OSError, ValueError):
    done = 0
last_ping = 0.0
while True:
    try:
        with open(os.path.join(d, "send"), "rb") as f:
            lines = f.read().split(b"\n")[:-1]
    except OSError:
        lines = []
    for line in lines[done:]:
        s.sendto(ast.literal_eval(line.decode()), addr)
    if len(lines) > done:
        done = len(lines)
        with open(os.path.join(d, "done"), "w") as f:
            f.write(str(done))
    if os.path.exists(os.path.join(d, "ping")) and time.monotonic() - last_ping >= 0.1:
        s.sendto(b"WATCHDOG=1", addr)
        last_ping = time.monotonic()
    time.sleep(0.02)
'''

# Another service: not the one whose socket it writes to.
INTRUDER = r'''
import json, os, socket, sys, time
d = sys.argv[1]
while not os.path.exists(os.path.join(d, "env.json")):
    time.sleep(0.02)
addr = json.load(open(os.path.join(d, "env.json")))["NOTIFY_SOCKET"]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
n = 0
while True:
    s.sendto(b"READY=1\nSTATUS=intruder\nWATCHDOG=trigger", "\0" + addr[1:])
    n += 1
    with open(os.path.join(d, "intruder.sent"), "w") as f:
        f.write(str(n))
    time.sleep(0.05)
'''


class Talker:
    def __init__(self, tmp_path, name="svc"):
        self.dir = tmp_path / name
        self.dir.mkdir()
        self.script = tmp_path / "talker.py"
        self.script.write_text(SERVICE)

    def service(self, name="svc", **extra):
        svc = {"name": name, "argv": ["/usr/bin/python3", str(self.script), str(self.dir)]}
        svc.update(extra)
        return svc

    def send(self, *msgs):
        with open(self.dir / "send", "ab") as f:
            for m in msgs:
                f.write(repr(m).encode() + b"\n")

    def ping(self, on):
        p = self.dir / "ping"
        if on:
            p.write_text("")
        elif p.exists():
            p.unlink()

    def env(self, hearth):
        p = self.dir / "env.json"
        hearth.wait_for(p.exists, what="the service's environment")
        return json.loads(p.read_text())


def _state(hearth, name, want):
    return hearth.wait_for(lambda: (lambda s: s if s["state"] == want else None)(
        hearth.service(name)), what=f"{name} {want}")


def _events(client, want, timeout=15.0):
    seen = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg = client.read_line()
        if msg.get("method") != "event":
            continue
        seen.append(msg["params"])
        if want(msg["params"]):
            return seen
    raise AssertionError(f"event not seen; got {seen}")


@pytest.mark.valgrind
def test_ready_notify_status_stopping_reloading(hearth, tmp_path):
    t = Talker(tmp_path)
    hearth.start(hearth.config(services=[
        t.service(ready={"notify": True, "timeout_ms": 0}),
        {"name": "after", "argv": ["sleep", "1000"], "after": ["svc"]}]))
    c = hearth.client()
    c.result("events.subscribe", {"since": 0})
    env = t.env(hearth)
    assert env["NOTIFY_SOCKET"].startswith("@hearth/notify/") and \
        env["NOTIFY_SOCKET"].endswith("/svc"), env
    # No watchdog configured: no WATCHDOG_USEC, and never a WATCHDOG_PID.
    assert env["WATCHDOG_USEC"] is None and env["WATCHDOG_PID"] is None
    t.send(b"STATUS=loading the model")
    s = hearth.wait_for(lambda: (lambda s: s if s["notify"]["status"] == "loading the model"
                                 else None)(hearth.service("svc")), what="STATUS shown")
    assert s["state"] == "starting" and s["notify"]["socket"] == env["NOTIFY_SOCKET"]
    assert hearth.service("after")["state"] == "waiting"

    t.send(b"READY=1\nSTATUS=serving")
    seen = _events(c, lambda p: p["type"] == "service.state" and p["service"] == "svc"
                   and p["state"] == "running")
    assert seen[-1]["cause"] == "notify" and seen[-1]["from"] == "starting"
    _state(hearth, "after", "running")
    s = hearth.service("svc")
    assert s["notify"]["status"] == "serving" and s["notify"]["messages"] >= 2
    assert s["notify"]["refused"] == 0 and not s["notify"]["reloading"]

    t.send(b"RELOADING=1\nSTATUS=reloading")
    hearth.wait_for(lambda: hearth.service("svc")["notify"]["reloading"], what="reloading")
    t.send(b"READY=1")
    hearth.wait_for(lambda: not hearth.service("svc")["notify"]["reloading"],
                    what="reload over")
    t.send(b"STOPPING=1")
    s = hearth.wait_for(lambda: (lambda s: s if s["notify"]["stopping"] else None)(
        hearth.service("svc")), what="stopping")
    # Said, not done: the service stays running until it exits.
    assert s["state"] == "running"
    c.close()


def test_ready_notify_timeout_names_the_last_status(hearth, tmp_path):
    t = Talker(tmp_path)
    hearth.start(hearth.config(services=[
        {"name": "keeper", "argv": ["sleep", "1000"], "main": True},
        t.service(restart="never", ready={"notify": True, "timeout_ms": 1500})]))
    t.env(hearth)
    t.send(b"STATUS=still loading")
    s = _state(hearth, "svc", "failed")
    assert s["error"] == ("not ready after 1500 ms: no READY=1 on NOTIFY_SOCKET "
                          "(last STATUS=still loading)"), s["error"]


def test_extend_timeout_usec_moves_the_ready_deadline(hearth, tmp_path):
    t = Talker(tmp_path)
    hearth.start(hearth.config(services=[
        {"name": "keeper", "argv": ["sleep", "1000"], "main": True},
        t.service(restart="never", ready={"notify": True, "timeout_ms": 2000})]))
    # 2 s leaves a loaded machine time to start python and send the
    # extension before the first deadline.
    t.env(hearth)
    t.send(b"EXTEND_TIMEOUT_USEC=6000000")
    s = hearth.wait_for(lambda: (lambda x: x if x["state"] != "starting" or x["since_ms"] >= 4000
                                 else None)(hearth.service("svc")), what="twice the timeout")
    # Twice the configured timeout has passed: without the extension it
    # would have been killed.
    assert s["state"] == "starting", s
    t.send(b"READY=1")
    _state(hearth, "svc", "running")

    # Extended, then silent: it fails once the extension is spent, and the
    # error says the deadline moved.
    hearth.rpc("services.restart", {"name": "svc"})
    hearth.wait_for(lambda: hearth.service("svc")["state"] == "starting", what="restarted")
    t.send(b"EXTEND_TIMEOUT_USEC=4000000")
    s = _state(hearth, "svc", "failed")
    assert "deadline extended by EXTEND_TIMEOUT_USEC" in s["error"], s["error"]
    assert "no READY=1 on NOTIFY_SOCKET" in s["error"]


@pytest.mark.valgrind
def test_extend_timeout_usec_while_stopping_is_bounded(hearth, tmp_path):
    t = Talker(tmp_path)
    hearth.start(hearth.config(services=[
        {"name": "keeper", "argv": ["sleep", "1000"], "main": True},
        t.service(ready={"notify": True}, stop={"timeout_ms": 2000})]))
    t.env(hearth)
    t.send(b"READY=1")
    _state(hearth, "svc", "running")
    (t.dir / "hold").write_text("")
    t0 = time.monotonic()
    hearth.rpc("services.stop", {"name": "svc"})
    hearth.wait_for(lambda: hearth.service("svc")["notify"]["stopping"], what="STOPPING=1")
    time.sleep(max(0.0, t0 + 3.0 - time.monotonic()))
    # Past stop.timeout_ms, still given time: the service asked for 30 s.
    assert hearth.service("svc")["state"] == "stopping"
    _state(hearth, "svc", "stopped")
    # ...but not 30 s: the kill came at twice stop.timeout_ms (bounded
    # here only against the 30 s asked for, not timed).
    assert time.monotonic() - t0 < 20
    assert "stop deadline extended" in hearth.log_text()
    assert "no exit 2000 ms after it was asked to stop, killing" in hearth.log_text()


def test_missed_watchdog_fails_health_and_restarts(hearth, tmp_path):
    t = Talker(tmp_path)
    t.ping(True)
    hearth.start(hearth.config(services=[
        t.service(health={"watchdog_ms": 600, "failures": 1}, backoff={"initial_ms": 100})]))
    env = t.env(hearth)
    assert env["WATCHDOG_USEC"] == "600000" and env["NOTIFY_SOCKET"].startswith("@hearth/")
    s = hearth.wait_for(lambda: (lambda s: s if s["health"]["status"] == "healthy"
                                 and s["health"]["checks"] >= 5 else None)(hearth.service("svc")),
                        what="healthy on pings")
    assert s["notify"]["watchdog_ms"] == 600 and s["notify"]["last_watchdog_ms"] < 600
    first_pid = s["pid"]

    c = hearth.client()
    c.result("events.subscribe", {"since": 0})
    t.ping(False)
    seen = _events(c, lambda p: p["type"] == "service.state" and p["state"] == "backoff")
    health = [p for p in seen if p["type"] == "service.health" and p.get("action")]
    assert len(health) == 1 and health[0]["action"] == "restart", seen
    assert health[0]["cause"] == "watchdog"
    assert health[0]["detail"] == "no WATCHDOG=1 within 600 ms"
    stop = [p for p in seen if p["type"] == "service.state" and p["state"] == "stopping"]
    assert stop and stop[0]["cause"] == "watchdog"
    assert seen[-1]["error"] == \
        "unhealthy: 1 health checks failed in a row: no WATCHDOG=1 within 600 ms"

    # Pinging again after the restart: healthy, a new process.
    t.ping(True)
    s = hearth.wait_for(lambda: (lambda s: s if s["state"] == "running" and s["pid"] != first_pid
                                 and s["health"]["status"] == "healthy" else None)(
        hearth.service("svc")), what="healthy after the restart")
    assert s["restarts"] >= 1
    c.close()


def test_watchdog_trigger_counts_at_once(hearth, tmp_path):
    t = Talker(tmp_path)
    t.ping(True)
    hearth.start(hearth.config(services=[
        {"name": "keeper", "argv": ["sleep", "1000"], "main": True},
        # A long deadline: only the trigger can fail it within the test.
        t.service(restart="never", health={"watchdog_ms": 60000, "failures": 2})]))
    hearth.wait_for(lambda: hearth.service("svc")["health"]["status"] == "healthy",
                    what="healthy")
    t.ping(False)
    t.send(b"WATCHDOG=trigger")
    h = hearth.wait_for(lambda: (lambda h: h if h["failures"] == 1 else None)(
        hearth.service("svc")["health"]), what="one failure")
    assert h["status"] == "failing" and h["last_failure"] == "WATCHDOG=trigger"
    t.send(b"WATCHDOG=trigger")
    s = _state(hearth, "svc", "failed")
    assert s["error"] == "unhealthy: 2 health checks failed in a row: WATCHDOG=trigger"


def test_foreign_sender_is_refused(hearth, tmp_path):
    t = Talker(tmp_path)
    intruder = tmp_path / "intruder.py"
    intruder.write_text(INTRUDER)
    hearth.start(hearth.config(services=[
        t.service(ready={"notify": True}, health={"watchdog_ms": 60000}),
        {"name": "intruder", "argv": ["/usr/bin/python3", str(intruder), str(t.dir)]}]))
    hearth.wait_for(lambda: (t.dir / "intruder.sent").exists() and
                    int((t.dir / "intruder.sent").read_text() or 0) >= 10,
                    what="the intruder's messages")
    s = hearth.wait_for(lambda: (lambda s: s if s["notify"]["refused"] >= 10 else None)(
        hearth.service("svc")), what="refusals counted")
    # Its READY=1, STATUS= and triggers did nothing.
    assert s["state"] == "starting" and s["notify"]["status"] == ""
    assert s["notify"]["messages"] == 0
    # A process outside hearth entirely (here: in hearth's network
    # namespace, not in its pid namespace) is refused too.
    # It also passes descriptors along: hearth closes them, keeping none.
    addr = t.env(hearth)["NOTIFY_SOCKET"]
    before = hearth.service("svc")["notify"]["refused"]
    fds_before = len(os.listdir(f"/proc/{hearth.pid}/fd"))
    subprocess.run(["nsenter", "-t", str(hearth.pid), "-n", "/usr/bin/python3", "-c",
                    "import os,socket,sys; s=socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); "
                    "s.connect('\\0' + sys.argv[1][1:]); r,w=os.pipe()\n"
                    "for i in range(50): socket.send_fds(s, [b'READY=1'], [r, w, r])",
                    addr], check=True)
    hearth.wait_for(lambda: hearth.service("svc")["notify"]["refused"] >= before + 50,
                    what="the outsider refused")
    # (A control connection of a moment ago may still be counted in
    # fds_before; 150 descriptors kept would be far more.)
    hearth.wait_for(lambda: len(os.listdir(f"/proc/{hearth.pid}/fd")) <= fds_before,
                    what="no descriptor kept")
    assert hearth.service("svc")["state"] == "starting"
    # The service's own READY=1 is taken.
    t.send(b"READY=1\nSTATUS=mine")
    s = _state(hearth, "svc", "running")
    assert s["notify"]["status"] == "mine"
    assert "refused a message" in hearth.log_text()


@pytest.mark.valgrind
def test_garbage_is_ignored_and_pings_still_count(hearth, tmp_path):
    t = Talker(tmp_path)
    t.ping(True)
    hearth.start(hearth.config(services=[
        t.service(ready={"notify": True}, health={"watchdog_ms": 1500, "failures": 1})]))
    t.send(b"READY=1\nSTATUS=ok")
    s = _state(hearth, "svc", "running")
    pid = s["pid"]
    garbage = [
        b"x" * 5000,                         # longer than a datagram may be
        b"STATUS=" + b"y" * 70000,           # far longer
        b"READY=1\0STATUS=nul",              # a NUL byte
        b"STATUS=\xff\xfe not utf-8",        # invalid UTF-8: ignored
        b"no equals sign\n=\n lower=case\nREADY=2\nWATCHDOG=maybe\nEXTEND_TIMEOUT_USEC=-5",
        b"MAINPID=1\nERRNO=2\nFDSTORE=1",     # understood elsewhere, ignored here
        b"\n\n\n",
        b"STATUS=tab\there \x1b[31mred\x1b[0m",
        b"STATUS=" + "é".encode() * 200,     # cut on a character boundary
    ]
    for _ in range(20):
        t.send(*garbage)
    hearth.wait_for(lambda: hearth.service("svc")["notify"]["ignored"] >= 20 * 5,
                    what="garbage counted")
    assert hearth.rpc("ping") is not None
    # The first WATCHDOG=1 since the start makes it healthy; on a busy
    # machine the garbage above can be counted before the talker's first
    # ping lands, so that one is waited for, not assumed.
    s = hearth.wait_for(lambda: (lambda x: x if x["health"]["status"] != "starting" else None)(
        hearth.service("svc")), what="the first watchdog ping")
    assert s["state"] == "running" and s["pid"] == pid
    assert s["health"]["status"] == "healthy" and s["health"]["failures"] == 0
    # The last datagram's STATUS, cut on a character boundary; under a
    # slow run (valgrind) the count above can be reached before the last
    # rounds are read, so the final status is waited for.
    s = hearth.wait_for(lambda: (lambda x: x if x["notify"]["status"] == "é" * 127 else None)(
        hearth.service("svc")), what="the last garbage round's STATUS")
    assert len(s["notify"]["status"].encode()) <= 255
    # Control characters are shown as '?'.
    t.send(b"STATUS=tab\there \x1b[31mred")
    hearth.wait_for(lambda: hearth.service("svc")["notify"]["status"] == "tab?here ?[31mred",
                    what="controls replaced")
    # Pings go on being answered: still healthy well past the deadline.
    time.sleep(2.0)
    s = hearth.service("svc")
    assert s["health"]["status"] == "healthy" and s["pid"] == pid
    assert s["notify"]["last_watchdog_ms"] < 1500


def test_notify_config_errors(tmp_path):
    cases = [
        ({"ready": {"notify": False}}, "services[0].ready.notify: only true is meaningful"),
        ({"ready": {"notify": True, "tcp": "127.0.0.1:1"}}, "services[0].ready: only one of"),
        ({"health": {"watchdog_ms": 1000, "interval_ms": 100}},
         "services[0].health.interval_ms: not used with watchdog_ms"),
        ({"health": {"watchdog_ms": 0}}, "services[0].health.watchdog_ms"),
    ]
    for extra, want in cases:
        cfg = tmp_path / "bad.json"
        svc = {"name": "a", "argv": ["true"]}
        svc.update(extra)
        cfg.write_text(json.dumps({"services": [svc]}))
        r = subprocess.run([HEARTH, "--check-config", str(cfg)], capture_output=True, text=True)
        assert r.returncode != 0, extra
        assert want in r.stdout + r.stderr, (extra, r.stdout + r.stderr)
