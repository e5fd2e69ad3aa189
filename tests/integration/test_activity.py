"""Activity: status.activity, the `activity` event on each idle/busy
change, each source (a service's CPU, its output, bytes on the network,
a lease declared on its NOTIFY_SOCKET), the lease rules (rate limit,
reason and duration caps, expiry, release, the end of the service) and
sandbox.freeze refusing while a lease holds unless `force`."""
import json
import os
import subprocess
import time
import uuid

import pytest

from conftest import HEARTH, HEARTHCTL, ROOT

# Sends, on the NOTIFY_SOCKET hearth gave it, each datagram the test
# appends to a file (one Python bytes literal per line); prints a line for
# each line of a "say" file; burns CPU while a "burn" file exists.
SERVICE = r'''
import ast, json, os, socket, subprocess, sys, time
d = sys.argv[1]
addr = os.environ.get("NOTIFY_SOCKET") or ""
with open(os.path.join(d, "env.tmp"), "w") as f:
    json.dump({"NOTIFY_SOCKET": addr or None}, f)
os.rename(os.path.join(d, "env.tmp"), os.path.join(d, "env.json"))
addr = "\0" + addr[1:] if addr.startswith("@") else addr
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
sent = said = 0
while True:
    try:
        with open(os.path.join(d, "send"), "rb") as f:
            lines = f.read().split(b"\n")[:-1]
    except OSError:
        lines = []
    for line in lines[sent:]:
        s.sendto(ast.literal_eval(line.decode()), addr)
    sent = max(sent, len(lines))
    try:
        with open(os.path.join(d, "say")) as f:
            say = f.read().split("\n")[:-1]
    except OSError:
        say = []
    # One write per line: print() under PYTHONUNBUFFERED writes the text
    # and its newline apart, and a sample between them sees part a line.
    for line in say[said:]:
        os.write(1, (line + "\n").encode())
    said = max(said, len(say))
    # docs/hermes.md's shell helper, run as a child of the service.
    h = os.path.join(d, "helper")
    if os.path.exists(h):
        msg = open(h).read()
        os.unlink(h)
        subprocess.run(["sh", "-c", HELPER + '; hearth_busy "$0"', msg])
    end = time.monotonic() + 0.02
    if os.path.exists(os.path.join(d, "burn")):
        while time.monotonic() < end:
            pass
    else:
        time.sleep(0.02)
'''

# The shell helper of docs/hermes.md, taken from the page itself.
_doc = open(os.path.join(ROOT, "docs", "hermes.md")).read()
_sh = _doc[_doc.index("```sh\n# busy for 10 minutes"):]
HELPER = _sh[_sh.index("hearth_busy() {"):_sh.index("\n}\n") + 2]
SERVICE = SERVICE.replace("HELPER", repr(HELPER), 1)

# cpu_percent 50: the talker's polling loop is never taken for work.
FAST = {"idle_ms": 1000, "sample_ms": 200, "lease_interval_ms": 300, "cpu_percent": 50}


class Talker:
    def __init__(self, tmp_path, name="svc"):
        self.name = name
        self.dir = tmp_path / name
        self.dir.mkdir()
        self.script = tmp_path / "talker.py"
        self.script.write_text(SERVICE)

    def service(self, lease=True, **extra):
        s = {"name": self.name, "argv": ["/usr/bin/python3", str(self.script), str(self.dir)]}
        if lease is not None:
            s["activity"] = {"lease": lease}
        s.update(extra)
        return s

    def send(self, *msgs):
        with open(self.dir / "send", "ab") as f:
            for m in msgs:
                f.write(repr(m).encode() + b"\n")

    def say(self, text):
        with open(self.dir / "say", "a") as f:
            f.write(text + "\n")

    def burn(self, on):
        p = self.dir / "burn"
        if on:
            p.write_text("")
        elif p.exists():
            p.unlink()

    def env(self, hearth):
        p = self.dir / "env.json"
        hearth.wait_for(p.exists, what="the service's environment")
        return json.loads(p.read_text())


def activity(hearth):
    return hearth.rpc("status")["activity"]


def lease_stats(hearth, name):
    return next((l for l in activity(hearth)["leases"] if l["service"] == name), None)


def next_activity(client, timeout=15.0):
    """The next `activity` event on a subscribed client."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg = client.read_line()
        if msg.get("method") == "event" and msg["params"]["type"] == "activity":
            return msg["params"]
    raise AssertionError("no activity event")


def subscribed(hearth):
    c = hearth.client(timeout=20)
    c.result("events.subscribe", {})
    return c


def check_shape(a):
    assert isinstance(a["busy"], bool)
    assert isinstance(a["since_ms"], (int, float)) and a["since_ms"] >= 0
    assert isinstance(a["reasons"], list)
    for r in a["reasons"]:
        assert r["source"] in ("cpu", "egress", "output", "exec", "lease"), r
        assert isinstance(r["detail"], str) and r["detail"]
    if a["lease"] is not None:
        assert set(a["lease"]) == {"service", "reason", "until_ms"}


def test_idle_shape_and_no_sampling_without_a_listener(hearth, tmp_path):
    t = Talker(tmp_path)
    hearth.start(hearth.config([t.service()], activity=FAST))
    t.env(hearth)
    time.sleep(1.3)  # past idle_ms: the start-up is over
    a = activity(hearth)
    check_shape(a)
    assert a["busy"] is False and a["reasons"] == [] and a["lease"] is None
    assert a["enabled"] is True and a["idle_ms"] == 1000
    # Idle and nobody subscribed: the look above was a one-off sample and
    # no timer was left behind.
    assert a["sampling"] == "off"
    n = a["samples"]
    time.sleep(0.7)
    a = activity(hearth)
    assert a["samples"] == n + 1 and a["sampling"] == "off"
    # A listener turns periodic sampling on; the status look itself then
    # adds none.
    c = subscribed(hearth)
    hearth.wait_for(lambda: activity(hearth)["samples"] >= n + 4, what="samples while subscribed")
    assert activity(hearth)["sampling"] == "periodic"
    c.close()
    hearth.wait_for(lambda: activity(hearth)["sampling"] == "off", what="sampling to stop")


def test_busy_without_a_listener_samples_once_at_the_deadline(hearth, tmp_path):
    t = Talker(tmp_path, "talker")
    hearth.start(hearth.config([t.service(lease=None)], activity=dict(FAST, idle_ms=2000)))
    t.env(hearth)
    time.sleep(2.5)
    a = activity(hearth)
    assert a["busy"] is False and a["sampling"] == "off"
    n = a["samples"]
    lines = hearth.service("talker")["output_lines"]
    t.say("one line")
    # Waited for on services.list, which takes no sample (status does).
    hearth.wait_for(lambda: hearth.service("talker")["output_lines"] > lines, what="the line")
    a = activity(hearth)
    assert a["busy"] is True and a["samples"] == n + 1  # this look's own
    # Nobody subscribed: one timer, for the end of the spell (2 s after
    # the output), not a sample every 200 ms.
    assert a["sampling"] == "at_deadline"
    time.sleep(3.0)
    a = activity(hearth)
    assert a["busy"] is False and a["sampling"] == "off"
    # The first look, the one sample at the deadline, this look.
    assert a["samples"] == n + 3, a


@pytest.mark.valgrind
def test_cpu_makes_busy_then_idle(hearth, tmp_path):
    t = Talker(tmp_path, "burner")
    hearth.start(hearth.config([t.service(lease=None)], activity=dict(FAST, cpu_percent=20)))
    t.env(hearth)
    if not hearth.service("burner").get("cgroup"):
        pytest.skip("services have no cgroup on this host")
    time.sleep(1.3)
    c = subscribed(hearth)
    t.burn(True)
    ev = next_activity(c)
    assert ev["busy"] is True, ev
    check_shape(ev)
    cpu = [r for r in ev["reasons"] if r["source"] == "cpu"]
    assert cpu and cpu[0]["service"] == "burner" and "% of a CPU" in cpu[0]["detail"], ev
    a = activity(hearth)
    assert a["busy"] is True and a["since_ms"] == ev["since_ms"]
    t.burn(False)
    idle = next_activity(c)
    assert idle["busy"] is False and idle["reasons"] == [], idle
    # Idle comes no sooner than idle_ms after the last busy sample.
    assert idle["since_ms"] - ev["since_ms"] >= 1000


def test_output_makes_busy_then_idle(hearth, tmp_path):
    t = Talker(tmp_path, "talker")
    hearth.start(hearth.config([t.service(lease=None)], activity=FAST))
    t.env(hearth)
    time.sleep(1.3)
    assert activity(hearth)["busy"] is False
    c = subscribed(hearth)
    t.say("hello from the agent")
    ev = next_activity(c)
    assert ev["busy"] is True
    out = [r for r in ev["reasons"] if r["source"] == "output"]
    assert out and out[0]["service"] == "talker", ev
    assert "21 bytes of output" in out[0]["detail"], out
    ev2 = next_activity(c)
    assert ev2["busy"] is False and ev2["since_ms"] - ev["since_ms"] >= 1000


def test_output_threshold(hearth, tmp_path):
    t = Talker(tmp_path, "talker")
    hearth.start(hearth.config([t.service(lease=None)],
                               activity=dict(FAST, output_bytes=1000)))
    t.env(hearth)
    time.sleep(1.3)
    c = subscribed(hearth)
    t.say("short")
    time.sleep(0.8)
    assert activity(hearth)["busy"] is False
    t.say("x" * 2000)
    assert next_activity(c)["busy"] is True


@pytest.fixture
def lan_netns():
    """Two network namespaces of the test's own joined by a veth pair:
    what the service sends to 10.213.0.2 leaves hearth's namespace on the
    veth (and is counted) and reaches the peer namespace, nowhere else."""
    tag = uuid.uuid4().hex[:8]
    guest, peer = "hearth-act-" + tag, "hearth-actp-" + tag
    subprocess.run(["ip", "netns", "add", guest], check=True)
    subprocess.run(["ip", "netns", "add", peer], check=True)
    try:
        subprocess.run(["ip", "link", "add", "va" + tag, "netns", guest, "type", "veth",
                        "peer", "name", "vb" + tag, "netns", peer], check=True)
        for ns, dev, addr in ((guest, "va" + tag, "10.213.0.1/24"),
                              (peer, "vb" + tag, "10.213.0.2/24")):
            for cmd in (["ip", "addr", "add", addr, "dev", dev],
                        ["ip", "link", "set", dev, "up"],
                        ["ip", "link", "set", "lo", "up"]):
                subprocess.run(["ip", "netns", "exec", ns, *cmd], check=True)
        yield guest
    finally:
        for ns in (guest, peer):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


SENDER = r'''
import os, socket, sys, time
d = sys.argv[1]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
while True:
    if os.path.exists(os.path.join(d, "send")):
        for _ in range(20):
            s.sendto(b"x" * 1000, ("10.213.0.2", 9))
    time.sleep(0.05)
'''


def test_network_bytes_make_busy(hearth, tmp_path, lan_netns):
    script = tmp_path / "sender.py"
    script.write_text(SENDER)
    hearth.start(hearth.config(
        [{"name": "net", "argv": ["/usr/bin/python3", str(script), str(tmp_path)]}],
        activity=dict(FAST, egress_bytes=50000)), netns=lan_netns)
    time.sleep(1.3)
    c = subscribed(hearth)
    time.sleep(0.6)
    assert activity(hearth)["busy"] is False
    (tmp_path / "send").write_text("")
    ev = next_activity(c)
    assert ev["busy"] is True
    net = [r for r in ev["reasons"] if r["source"] == "egress"]
    assert net and "bytes on the network" in net[0]["detail"], ev
    os.unlink(tmp_path / "send")
    assert next_activity(c)["busy"] is False


@pytest.mark.valgrind
def test_lease_holds_until_released(hearth, tmp_path):
    t = Talker(tmp_path)
    hearth.start(hearth.config([t.service()], activity=FAST))
    env = t.env(hearth)
    assert env["NOTIFY_SOCKET"].startswith("@hearth/notify/"), env
    time.sleep(1.3)
    c = subscribed(hearth)
    t.send(b"HEARTH_BUSY=600\nHEARTH_BUSY_REASON=summarising the inbox")
    ev = next_activity(c)
    assert ev["busy"] is True
    assert ev["lease"]["service"] == "svc"
    assert ev["lease"]["reason"] == "summarising the inbox"
    lr = [r for r in ev["reasons"] if r["source"] == "lease"]
    assert lr and "summarising the inbox" in lr[0]["detail"] and lr[0]["service"] == "svc"
    # until_ms is on hearth's monotonic clock: 600 s after the change.
    a = activity(hearth)
    assert a["lease"] == ev["lease"]
    assert ev["lease"]["until_ms"] - ev["since_ms"] == 600000
    st = lease_stats(hearth, "svc")
    assert st["holds"] and st["taken"] == 1 and st["refused"] == 0
    # Well past idle_ms the lease still holds.
    time.sleep(1.5)
    assert activity(hearth)["busy"] is True
    time.sleep(0.4)  # past lease_interval_ms (a release is never limited anyway)
    t.send(b"HEARTH_BUSY=0")
    ev = next_activity(c)
    assert ev["busy"] is False and ev["lease"] is None
    st = lease_stats(hearth, "svc")
    assert not st["holds"] and st["released"] == 1


def test_lease_expires(hearth, tmp_path):
    t = Talker(tmp_path)
    hearth.start(hearth.config([t.service()], activity=FAST))
    t.env(hearth)
    time.sleep(1.3)
    c = subscribed(hearth)
    t.send(b"HEARTH_BUSY=2\nHEARTH_BUSY_REASON=short")
    ev = next_activity(c)
    assert ev["busy"] is True and ev["lease"]["reason"] == "short"
    t0 = time.monotonic()
    ev2 = next_activity(c, timeout=10)
    assert ev2["busy"] is False and ev2["lease"] is None
    assert 1.0 <= time.monotonic() - t0 <= 6.0
    # Its end is the lease's deadline (no sample timer decides it).
    assert ev2["since_ms"] >= ev["lease"]["until_ms"]
    assert "lease ended (short)" in hearth.log_text()


def test_lease_rate_limit_and_caps(hearth, tmp_path):
    t = Talker(tmp_path)
    hearth.start(hearth.config([t.service()], activity=dict(
        FAST, lease_interval_ms=60000, lease_max_ms=5000, lease_reason_max=10)))
    t.env(hearth)
    # The second and third come within lease_interval_ms: refused, the
    # first stands; one log line for the burst.
    t.send(b"HEARTH_BUSY=3600\nHEARTH_BUSY_REASON=r\xc3\xa9sum\xc3\xa9 of the week",
           b"HEARTH_BUSY=1\nHEARTH_BUSY_REASON=second",
           b"HEARTH_BUSY=1\nHEARTH_BUSY_REASON=third")
    st = hearth.wait_for(lambda: (lambda s: s if s and s["refused"] == 2 else None)(
        lease_stats(hearth, "svc")), what="two refusals")
    assert st["taken"] == 1 and st["capped"] == 1 and st["holds"]
    # Reason cut to 10 bytes on a character boundary ("résumé" is 8).
    assert st["reason"] == "résumé o"
    a = activity(hearth)
    assert a["lease"]["reason"] == "résumé o"
    # Duration cut to lease_max_ms: 5 s, not an hour.
    left = a["lease"]["until_ms"] - a["since_ms"]
    assert left == 5000, a
    log = hearth.log_text()
    assert log.count("lease refused") == 1, log
    assert "cut to 5 s" in log


def test_lease_from_the_documented_shell_helper(hearth, tmp_path):
    t = Talker(tmp_path)
    hearth.start(hearth.config([t.service()], activity=FAST))
    t.env(hearth)
    (t.dir / "helper").write_text("HEARTH_BUSY=600\nHEARTH_BUSY_REASON=nightly inbox summary")
    lease = hearth.wait_for(lambda: activity(hearth)["lease"], what="the helper's lease")
    assert lease["service"] == "svc" and lease["reason"] == "nightly inbox summary"
    time.sleep(0.4)
    (t.dir / "helper").write_text("HEARTH_BUSY=0")
    hearth.wait_for(lambda: activity(hearth)["lease"] is None, what="the helper's release")
    assert lease_stats(hearth, "svc")["refused"] == 0


# Another service: sends a lease to the first one's socket.
INTRUDER = r'''
import json, os, socket, sys, time
d = sys.argv[1]
while not os.path.exists(os.path.join(d, "env.json")):
    time.sleep(0.02)
addr = json.load(open(os.path.join(d, "env.json")))["NOTIFY_SOCKET"]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
n = 0
while True:
    s.sendto(b"HEARTH_BUSY=3600\nHEARTH_BUSY_REASON=intruder", "\0" + addr[1:])
    n += 1
    with open(os.path.join(d, "intruder.sent"), "w") as f:
        f.write(str(n))
    time.sleep(0.05)
'''


def test_foreign_lease_is_refused(hearth, tmp_path):
    t = Talker(tmp_path)
    intruder = tmp_path / "intruder.py"
    intruder.write_text(INTRUDER)
    hearth.start(hearth.config(
        [t.service(), {"name": "intruder", "argv": ["/usr/bin/python3", str(intruder),
                                                    str(t.dir)]}], activity=FAST))
    t.env(hearth)
    sent = t.dir / "intruder.sent"
    hearth.wait_for(lambda: sent.exists() and int(sent.read_text() or 0) >= 10,
                    what="the intruder's datagrams")
    svc = hearth.service("svc")
    assert svc["notify"]["refused"] >= 5, svc["notify"]
    a = activity(hearth)
    assert a["lease"] is None
    st = lease_stats(hearth, "svc")
    assert st["taken"] == 0 and not st["holds"]
    # The service's own lease still works beside the noise.
    t.send(b"HEARTH_BUSY=60\nHEARTH_BUSY_REASON=mine")
    lease = hearth.wait_for(lambda: activity(hearth)["lease"], what="the service's own lease")
    assert lease["reason"] == "mine" and lease["service"] == "svc"


def test_lease_refused_without_activity_lease(hearth, tmp_path):
    t = Talker(tmp_path)
    # ready.notify gives a NOTIFY_SOCKET, but leases were not granted.
    hearth.start(hearth.config([t.service(lease=False, ready={"notify": True})],
                               activity=FAST))
    t.env(hearth)
    t.send(b"READY=1\nHEARTH_BUSY=60\nHEARTH_BUSY_REASON=please")
    hearth.wait_for(lambda: hearth.service("svc")["state"] == "running", what="READY=1")
    st = hearth.wait_for(lambda: next((l for l in activity(hearth)["leases"]
                                       if l["service"] == "svc" and l["refused"]), None),
                         what="the refusal counted")
    assert st["allowed"] is False and not st["holds"]
    assert activity(hearth)["lease"] is None
    assert "activity.lease is not set" in hearth.log_text()


def test_no_notify_socket_without_lease_or_readiness(hearth, tmp_path):
    t = Talker(tmp_path)
    hearth.start(hearth.config([t.service(lease=None)], activity=FAST))
    assert t.env(hearth)["NOTIFY_SOCKET"] is None


def test_lease_ends_with_the_service(hearth, tmp_path):
    t = Talker(tmp_path)
    hearth.start(hearth.config([t.service(restart="never")], activity=FAST))
    t.env(hearth)
    t.send(b"HEARTH_BUSY=600\nHEARTH_BUSY_REASON=work")
    hearth.wait_for(lambda: activity(hearth)["lease"], what="the lease")
    hearth.rpc("services.stop", {"name": "svc"})
    hearth.wait_for(lambda: activity(hearth)["lease"] is None, what="the lease to end")
    assert "lease ended with the service" in hearth.log_text()


@pytest.mark.valgrind
def test_freeze_refused_while_a_lease_holds_unless_forced(hearth, tmp_path):
    t = Talker(tmp_path)
    hearth.start(hearth.config([t.service()], activity=FAST))
    t.env(hearth)
    t.send(b"HEARTH_BUSY=600\nHEARTH_BUSY_REASON=writing the report")
    hearth.wait_for(lambda: activity(hearth)["lease"], what="the lease")
    c = hearth.client()
    r = c.call("sandbox.freeze", {"timeout_ms": 2000})
    err = r["error"]
    assert err["code"] == -32003, err
    msg = err["message"]
    assert "svc" in msg and "writing the report" in msg and " s left" in msg, msg
    assert "force" in msg
    assert err["data"]["service"] == "svc" and err["data"]["reason"] == "writing the report"
    assert 590000 < err["data"]["left_ms"] <= 600000
    assert hearth.rpc("status")["sandbox"]["state"] == "running"
    bad = c.call("sandbox.freeze", {"force": "yes"})
    assert bad["error"]["code"] == -32602 and "force" in bad["error"]["message"]
    r = c.result("sandbox.freeze", {"timeout_ms": 2000, "force": True})
    assert r["frozen"] is True
    c.result("sandbox.resume", {})
    # The same through hearthctl: refused, then --force.
    ctl = [HEARTHCTL, "--connect", "unix:" + hearth.sock, "freeze", "--timeout-ms", "2000"]
    p = subprocess.run(ctl, capture_output=True, text=True, timeout=30)
    assert p.returncode != 0 and "writing the report" in p.stdout + p.stderr, p
    p = subprocess.run(ctl + ["--force"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p
    assert hearth.rpc("status")["sandbox"]["state"] == "frozen"
    c.result("sandbox.resume", {})
    # Released: a plain freeze goes through.
    time.sleep(0.4)
    t.send(b"HEARTH_BUSY=0")
    hearth.wait_for(lambda: activity(hearth)["lease"] is None, what="the release")
    assert c.result("sandbox.freeze", {"timeout_ms": 2000})["frozen"] is True
    c.result("sandbox.resume", {})


def test_activity_config_errors_name_the_key(tmp_path):
    for cfg, want in (({"activity": {"sample_ms": 10}}, "activity.sample_ms"),
                      ({"activity": {"idle": 1}}, "activity.idle"),
                      ({"activity": {"lease_reason_max": 1000}}, "activity.lease_reason_max"),
                      ({"services": [{"name": "a", "argv": ["true"],
                                      "activity": {"lease": 1}}]},
                       "services[0].activity.lease")):
        p = tmp_path / "h.json"
        p.write_text(json.dumps(cfg))
        r = subprocess.run([HEARTH, "--check-config", str(p)], capture_output=True,
                           text=True)
        assert r.returncode != 0 and want in r.stdout + r.stderr, (cfg, r.stdout, r.stderr)


def test_activity_disabled(hearth, tmp_path):
    t = Talker(tmp_path)
    hearth.start(hearth.config([t.service()], activity=dict(FAST, enabled=False)))
    t.env(hearth)
    c = subscribed(hearth)
    t.say("output")
    t.send(b"HEARTH_BUSY=60")
    hearth.wait_for(lambda: (lease_stats(hearth, "svc") or {}).get("refused") == 1,
                    what="refusal")
    a = activity(hearth)
    assert a["enabled"] is False and a["busy"] is False and a["sampling"] == "off"
    c.close()
