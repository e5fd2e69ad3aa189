"""Local ports services may not reach (egress.deny_local_ports): hearth as
PID 1 in a fresh network namespace, with listeners the test puts there
on 127.0.0.1, ::1 and the namespace's own address on a veth (10.77.0.1) at the
platform's envd port 49983 and at 49984, which is not listed. A root
service with the default config is refused at once; the test itself and
an exec session from the host are not. No traffic leaves the namespace."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import HEARTH

OWN = "10.77.0.1"

# Accepts and closes on every address and port given (host:port); UDP
# echoes on the udp ones.
SERVER = r"""
import socket, sys, threading
def tcp(host, port):
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, port)); s.listen(64)
    while True:
        c, _ = s.accept(); c.sendall(b"hi\n"); c.close()
def udp(host, port):
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind((host, port))
    while True:
        d, a = u.recvfrom(100); u.sendto(d, a)
for t in sys.argv[1:]:
    proto, host, port = t.split("|")
    threading.Thread(target=tcp if proto == "tcp" else udp, args=(host, int(port)),
                     daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
"""

# For each "proto|host|port": "ok", the errno name, or "timeout", with
# the milliseconds it took. Exit status: 0 when every one was "ok".
CLIENT = r"""
import errno, json, socket, sys, time
res = {}
for t in sys.argv[2:]:
    proto, host, port = t.split("|")
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    t0 = time.monotonic()
    try:
        s = socket.socket(fam, socket.SOCK_STREAM if proto == "tcp" else socket.SOCK_DGRAM)
        s.settimeout(5)
        s.connect((host, int(port)))
        if proto == "udp":
            s.send(b"x")
        r = "ok" if s.recv(10) else "bad"
    except socket.timeout:
        r = "timeout"
    except OSError as e:
        r = errno.errorcode.get(e.errno, str(e.errno))
    res[t] = [r, int((time.monotonic() - t0) * 1000)]
out = sys.argv[1]
if out != "-":
    with open(out + ".tmp", "w") as f:
        json.dump(res, f)
    import os; os.rename(out + ".tmp", out)
else:
    print(json.dumps(res))
sys.exit(0 if all(v[0] == "ok" for v in res.values()) else 1)
"""

ENVD = ["tcp|127.0.0.1|49983", "tcp|::1|49983", "tcp|%s|49983" % OWN]
OTHER = ["tcp|127.0.0.1|49984", "tcp|%s|49984" % OWN]
UDP = ["udp|127.0.0.1|5353"]


def sh(*cmd):
    subprocess.run(cmd, check=True, capture_output=True)


class Box:
    """hearth's own network namespace (the fresh one the harness made, so
    hearth keeps its cgroup2 mount), entered from the test: a veth pair
    there, one end holding OWN, and the listeners."""

    def __init__(self, hearth):
        self.n = ["nsenter", "-t", str(hearth.pid), "-n"]
        sh(*self.n, "ip", "link", "set", "lo", "up")
        sh(*self.n, "ip", "link", "add", "lpa0", "type", "veth", "peer", "name", "lpb0")
        sh(*self.n, "ip", "addr", "add", OWN + "/24", "dev", "lpa0")
        sh(*self.n, "ip", "link", "set", "lpa0", "up")
        sh(*self.n, "ip", "link", "set", "lpb0", "up")
        self.server = subprocess.Popen(
            [*self.n, sys.executable, "-c", SERVER, *ENVD, *OTHER, *UDP],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert self.server.stdout.readline().strip() == b"ready"

    def reach(self, targets):
        """From the test itself: outside every cgroup of hearth's."""
        out = subprocess.run([*self.n, sys.executable, "-c", CLIENT, "-", *targets],
                             capture_output=True, text=True, timeout=60)
        return json.loads(out.stdout)

    def nft(self, *args):
        return subprocess.run([*self.n, "nft", *args], capture_output=True, text=True)

    def close(self):
        self.server.kill()
        self.server.wait()


def needs():
    if os.geteuid() != 0:
        pytest.skip("namespace tests need root")
    if not shutil.which("nft") or not shutil.which("nsenter"):
        pytest.skip("nft and nsenter (to look from outside) are needed")


def boot(hearth, tmp_path, targets, **extra):
    """hearth with a root service (default config) that waits for the
    listeners, tries every target once and leaves the results in a file.
    Returns the box and the results' path."""
    needs()
    script = tmp_path / "client.py"
    script.write_text(CLIENT)
    out, go = tmp_path / "agent.json", tmp_path / "go"
    svc = {"name": "agent", "argv": [
        "/bin/sh", "-c", 'while [ ! -e "$0" ]; do sleep 0.05; done; "$@"; exec sleep 1000',
        str(go), sys.executable, str(script), str(out), *targets]}
    hearth.start(hearth.config([svc], **extra), cgroup=True)
    box = Box(hearth)
    hearth.boxes.append(box)
    go.touch()
    return box, out


@pytest.fixture
def hearth(hearth):
    hearth.boxes = []
    yield hearth
    for b in hearth.boxes:
        b.close()


def results(hearth, out):
    return hearth.wait_for(lambda: out.exists() and json.loads(out.read_text()),
                           timeout=30, what="the service's results")


def refused_fast(r):
    return r[0] == "ECONNREFUSED" and r[1] < 2000


def test_default_closes_envd_to_services_only(hearth, tmp_path):
    box, out = boot(hearth, tmp_path, ENVD + OTHER)
    res = results(hearth, out)
    for t in ENVD:
        assert refused_fast(res[t]), (t, res)
    for t in OTHER:
        assert res[t][0] == "ok", (t, res)

    # Not from a service: the test itself, and the host's exec session.
    mine = box.reach(ENVD)
    assert all(v[0] == "ok" for v in mine.values()), mine
    script = tmp_path / "client.py"
    pid = hearth.rpc("exec.start", {"argv": [sys.executable, str(script), "-", *ENVD]})["id"]
    w = hearth.wait_for(lambda: (lambda r: r if r.get("exited") else None)(
        hearth.rpc("exec.wait", {"id": pid, "timeout_ms": 1000})), what="the exec session")
    assert w["exit_code"] == 0, w

    eg = hearth.rpc("egress.get")
    assert eg["configured"] is False and eg["applied"] is False
    assert eg["local_ports"] == {"deny": ["tcp:49983"], "applied": True, "services_only": True}
    # The refusals were counted by the port's own rule; the exec session
    # returned early.
    local = eg["counters"]["localports"]
    assert local["tcp:49983"]["packets"] >= 3
    assert local["exec"]["packets"] >= 3
    # The table as nft reads it: the services cgroup, the fib check, the
    # reset.
    chain = box.nft("list", "chain", "inet", "hearth", "localports").stdout
    assert "fib daddr type != local" in chain and "return" in chain, chain
    assert "tcp dport 49983" in chain and "reject with tcp reset" in chain, chain
    output = box.nft("list", "chain", "inet", "hearth", "output").stdout
    assert "socket cgroupv2 level" in output and "jump localports" in output, output


def test_list_ranges_udp_and_empty(hearth, tmp_path):
    egress = {"deny_local_ports": ["tcp:49984-49990", "udp:5353"]}
    box, out = boot(hearth, tmp_path, ENVD + OTHER + UDP, egress=egress)
    res = results(hearth, out)
    for t in OTHER:
        assert refused_fast(res[t]), (t, res)
    # UDP: the reject drops the datagram on its way out, and the send
    # itself fails at once.
    assert res[UDP[0]][0] in ("EPERM", "ECONNREFUSED") and res[UDP[0]][1] < 2000, res
    # Replacing the list leaves 49983 open: only what is listed is closed.
    for t in ENVD:
        assert res[t][0] == "ok", (t, res)
    eg = hearth.rpc("egress.get")
    assert "deny_local_ports" not in eg["policy"]
    assert eg["local_ports"]["deny"] == ["tcp:49984-49990", "udp:5353"]

    # egress.set: [] opens them all; the chain is gone.
    eg = hearth.rpc("egress.set", {"deny_local_ports": []})
    assert eg["local_ports"] == {"deny": [], "applied": False, "services_only": False}
    assert box.nft("list", "chain", "inet", "hearth", "localports").returncode != 0
    out.unlink()
    hearth.rpc("services.restart", {"name": "agent"})
    res = results(hearth, out)
    assert all(v[0] == "ok" for v in res.values()), res

    # egress.set without the key: the default again.
    eg = hearth.rpc("egress.set", {"allowPublicTraffic": True})
    assert eg["local_ports"]["deny"] == ["tcp:49983"] and eg["local_ports"]["applied"] is True
    out.unlink()
    hearth.rpc("services.restart", {"name": "agent"})
    res = results(hearth, out)
    for t in ENVD:
        assert refused_fast(res[t]), (t, res)


@pytest.mark.parametrize("bad", ["tcp:0", "tcp:65536", "sctp:5", "tcp:20-10", "tcp:",
                                 "tcp:49983 ", "udp:053"])
def test_a_bad_entry_is_refused_naming_the_field(hearth, tmp_path, bad):
    needs()
    hearth.start(hearth.config(), cgroup=True)
    c = hearth.client()
    e = c.error("egress.set", {"deny_local_ports": ["tcp:49983", bad]})
    c.close()
    assert e["code"] == -32602 and e["message"].startswith("egress.deny_local_ports[1]: "), e
    # Nothing changed: the default still stands.
    assert hearth.rpc("egress.get")["local_ports"]["deny"] == ["tcp:49983"]
    cfg = tmp_path / "bad.json"
    cfg.write_text(json.dumps({"egress": {"deny_local_ports": [bad]}}))
    r = subprocess.run([HEARTH, "--check-config", str(cfg)], capture_output=True, text=True)
    assert r.returncode != 0 and "egress.deny_local_ports[0]" in r.stdout + r.stderr, r
