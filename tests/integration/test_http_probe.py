"""ready.http and health.http: a GET on loopback whose 2xx passes, against
a small HTTP peer run as a service in hearth's network namespace (one the
test makes, with loopback up), which answers as a file tells it (200,
503, slowly, garbage, or closes)."""
import json
import os
import subprocess
import time

import pytest

from conftest import HEARTH


@pytest.fixture
def netns():
    name = f"hearth-http-{os.getpid()}-{time.monotonic_ns() % 100000}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)

PEER = r'''
import os, socket, sys, threading, time
port, mode_file = int(sys.argv[1]), sys.argv[2]

def mode():
    try:
        with open(mode_file) as f:
            return f.read().strip() or "200"
    except OSError:
        return "200"

def serve(c):
    try:
        c.settimeout(5)
        data = b""
        while b"\r\n\r\n" not in data and len(data) < 65536:
            chunk = c.recv(4096)
            if not chunk:
                break
            data += chunk
        with open(mode_file + ".requests", "ab") as f:
            f.write(data.split(b"\r\n")[0] + b"\n")
        m = mode()
        if m == "200":
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                      b"Content-Length: 2\r\nConnection: close\r\n\r\nok")
        elif m == "big":
            c.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + b"x" * 300000)
        elif m == "503":
            c.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 7\r\n\r\ndrained")
        elif m == "slow":
            time.sleep(2)
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        elif m == "garbage":
            c.sendall(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")
        # "close": no answer at all
    except OSError:
        pass
    finally:
        c.close()

s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen(64)
print("listening", flush=True)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
'''

PORT = 18642


def _peer(tmp_path, mode="200", **extra):
    script = tmp_path / "peer.py"
    script.write_text(PEER)
    mode_file = tmp_path / "mode"
    mode_file.write_text(mode)
    svc = {"name": "peer", "argv": ["/usr/bin/python3", str(script), str(PORT), str(mode_file)]}
    svc.update(extra)
    return svc, mode_file


def test_ready_http_waits_for_a_2xx(hearth, tmp_path, netns):
    peer, mode = _peer(tmp_path, "503",
                       ready={"http": f"127.0.0.1:{PORT}/health", "timeout_ms": 0})
    hearth.start(hearth.config(services=[
        peer, {"name": "after", "argv": ["sleep", "1000"], "after": ["peer"]}]), netns=netns)
    hearth.wait_for(lambda: (tmp_path / "mode.requests").exists() and
                    len((tmp_path / "mode.requests").read_text().split("\n")) > 3,
                    what="probes answered 503")
    assert hearth.service("peer")["state"] == "starting"
    assert hearth.service("after")["state"] == "waiting"
    mode.write_text("200")
    hearth.wait_for(lambda: hearth.service("after")["state"] == "running", what="after running")
    assert hearth.service("peer")["state"] == "running"
    reqs = (tmp_path / "mode.requests").read_text().splitlines()
    assert reqs and all(r == "GET /health HTTP/1.1" for r in reqs), reqs


def test_ready_http_timeout_names_the_answer(hearth, tmp_path, netns):
    peer, mode = _peer(tmp_path, "503", restart="never",
                       ready={"http": f"127.0.0.1:{PORT}/ready", "timeout_ms": 1500})
    hearth.start(hearth.config(services=[
        {"name": "keeper", "argv": ["sleep", "1000"], "main": True}, peer]), netns=netns)
    s = hearth.wait_for(lambda: (lambda x: x if x["state"] == "failed" else None)(
        hearth.service("peer")), what="not ready")
    assert s["error"].startswith("not ready after 1500 ms: http 127.0.0.1:18642/ready: "
                                 "status 503 Service Unavailable"), s["error"]


CASES = [
    ("503", "http 127.0.0.1:18642/health: status 503 Service Unavailable"),
    ("garbage", 'http 127.0.0.1:18642/health: bad status line "SSH-2.0-OpenSSH_9.6"'),
    ("slow", "http 127.0.0.1:18642/health: timed out after 400 ms waiting for the status line"),
    ("close", "http 127.0.0.1:18642/health: connection closed without an answer"),
]


def test_health_http_answers(hearth, tmp_path, netns):
    peer, mode = _peer(tmp_path, "200")
    hearth.start(hearth.config(services=[
        peer,
        {"name": "api", "argv": ["sleep", "1000"], "after": ["peer"],
         "health": {"http": f"127.0.0.1:{PORT}/health", "interval_ms": 100,
                    "timeout_ms": 400, "failures": 1000}}]), netns=netns)

    def healthy():
        h = hearth.service("api")["health"]
        return h if h["status"] == "healthy" and h["checks"] >= 2 else None

    hearth.wait_for(healthy, what="healthy on 200")
    for m, detail in CASES:
        mode.write_text(m)
        h = hearth.wait_for(lambda: (lambda h: h if h.get("last_failure") == detail
                                     and h["status"] == "failing" else None)(
            hearth.service("api")["health"]), what=f"failure on {m}")
        assert h["failures"] >= 1
        if m == "slow":
            # The loop is never held by a probe in flight: status answers
            # while the slow answer is still being waited for (the probe's
            # timeout is far longer than this call's bound, a hang).
            t0 = time.monotonic()
            hearth.rpc("status")
            assert time.monotonic() - t0 < 2.0
        mode.write_text("200")
        hearth.wait_for(lambda: hearth.service("api")["health"]["status"] == "healthy",
                        what=f"healthy after {m}")
    # A big body passes and is not kept: hearth reads at most 64 KiB of it.
    mode.write_text("big")
    checks = hearth.service("api")["health"]["checks"]
    h = hearth.wait_for(lambda: (lambda h: h if h["checks"] >= checks + 3 else None)(
        hearth.service("api")["health"]), what="checks on a big body")
    assert h["status"] == "healthy" and h["failures"] == 0
    assert hearth.service("api")["state"] == "running"


def test_health_http_refused_restarts_per_policy(hearth, tmp_path, netns):
    hearth.start(hearth.config(services=[
        {"name": "keeper", "argv": ["sleep", "1000"], "main": True},
        {"name": "api", "argv": ["sleep", "1000"], "restart": "never",
         # Nothing listens there in the test's network namespace.
         "health": {"http": "127.0.0.1:9/health", "interval_ms": 100, "failures": 2}}]),
        netns=netns)
    s = hearth.wait_for(lambda: (lambda x: x if x["state"] == "failed" else None)(
        hearth.service("api")), what="failed after health")
    assert "unhealthy: 2 health checks failed in a row: http 127.0.0.1:9/health: unable to connect: " \
           "Connection refused" == s["error"]


def test_health_http_bad_target_is_a_config_error(tmp_path):
    cfg = tmp_path / "bad.json"
    cfg.write_text(json.dumps({"services": [
        {"name": "a", "argv": ["true"], "health": {"http": "127.0.0.1:80/a b"}}]}))
    r = subprocess.run([HEARTH, "--check-config", str(cfg)], capture_output=True, text=True)
    assert r.returncode != 0
    assert "services[0].health.http: bad target" in r.stdout + r.stderr
