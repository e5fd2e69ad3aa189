"""The control plane under bad input, many clients and stuck clients."""
import json
import threading
import os
import re
import shutil
import socket
import subprocess
import sys
import time

import pytest

from conftest import Client


@pytest.mark.valgrind
def test_bad_requests_get_the_right_error_and_ping_keeps_working(hearth):
    hearth.start(hearth.config())
    c = hearth.client()
    cases = [
        (b"{not json\n", -32700, None),
        (b'"just a string"\n', -32600, None),
        (b"[]\n", -32600, None),
        (b'{"id":1,"method":"ping"}\n', -32600, 1),
        (b'{"jsonrpc":"1.0","id":2,"method":"ping"}\n', -32600, 2),
        (b'{"jsonrpc":"2.0","id":3}\n', -32600, 3),
        (b'{"jsonrpc":"2.0","id":4,"method":42}\n', -32600, 4),
        (b'{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}\n', -32600, None),
        (b'{"jsonrpc":"2.0","id":6,"method":"ping","params":7}\n', -32600, 6),
        (b'{"jsonrpc":"2.0","id":7,"method":"no.such.method"}\n', -32601, 7),
        (b'{"jsonrpc":"2.0","id":8,"method":"status","params":{"x":1}}\n', -32602, 8),
        (b'{"jsonrpc":"2.0","id":9,"method":"status","params":[1]}\n', -32602, 9),
        (b'{"jsonrpc":"2.0","id":10,"method":"events.subscribe","params":{"since":-1}}\n', -32602, 10),
        (b'{"jsonrpc":"2.0","id":11,"method":"\xff\xfe"}\n', -32700, None),
        (b'{"jsonrpc":"2.0","id":12,"method":"ping"} trailing\n', -32700, None),
        (b'{"jsonrpc":"2.0","id":13,"method":"ping","extra":1}\n', -32600, 13),
        (b'{"jsonrpc":"2.0","id":14,"method":"ping","params":{"x":1}}\n', -32602, 14),
        (b'{"jsonrpc":"2.0","id":-15,"method":"no.such.method"}\n', -32601, -15),
        (b'{"jsonrpc":"2.0","id":9007199254740992,"method":"nope"}\n', -32601, 9007199254740992),
        (b'{"jsonrpc":"2.0","id":1.5,"method":"nope"}\n', -32601, 1.5),
    ]
    for raw, code, rid in cases:
        c.send_raw(raw)
        reply = c.read_line()
        assert reply["jsonrpc"] == "2.0"
        assert "error" in reply, (raw, reply)
        assert reply["error"]["code"] == code, (raw, reply)
        assert reply["error"]["message"]
        assert reply["id"] == rid, (raw, reply)
        assert c.result("ping") == {}
    # ping with empty params, and ids printed back exactly.
    c.send_raw(b'{"jsonrpc":"2.0","id":0,"method":"ping","params":{}}\n')
    assert c.read_line() == {"jsonrpc": "2.0", "id": 0, "result": {}}
    c.send_raw(b'{"jsonrpc":"2.0","id":-9007199254740992,"method":"ping"}\n')
    assert c.read_line() == {"jsonrpc": "2.0", "id": -9007199254740992, "result": {}}
    c.send_raw(b'{"jsonrpc":"2.0","id":"a\\"b","method":"ping"}\n')
    assert c.read_line() == {"jsonrpc": "2.0", "id": 'a"b', "result": {}}
    # Blank lines and notifications (no id) get no reply at all.
    c.send_raw(b'\n  \n{"jsonrpc":"2.0","method":"ping"}\n')
    assert c.call("ping")["id"] == c.next_id - 1
    c.close()


@pytest.mark.valgrind
def test_pipelined_requests_are_answered_in_order(hearth):
    hearth.start(hearth.config())
    c = hearth.client()
    # Small buffers, so hearth's read pause behind unread replies happens
    # whatever the machine's socket defaults are.
    c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    n = 2000
    payload = b"".join(
        (json.dumps({"jsonrpc": "2.0", "id": i, "method": "ping" if i % 3 else "version"}) + "\n").encode()
        for i in range(n))
    # Split at awkward boundaries so lines arrive in pieces. The sender is
    # a thread: hearth stops reading while its replies wait for a reader,
    # so a client that only writes would stall both ends.
    err = []

    def send():
        try:
            for k in range(0, len(payload), 777):
                c.send_raw(payload[k:k + 777])
        except OSError as e:
            err.append(e)
    t = threading.Thread(target=send, daemon=True)
    t.start()
    ids = [c.read_line()["id"] for _ in range(n)]
    t.join(10)
    assert not err
    assert ids == list(range(n))
    c.close()


@pytest.mark.valgrind
def test_oversize_request_is_refused_and_connection_closed(hearth):
    hearth.start(hearth.config())
    c = hearth.client()
    c.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"' + b"x" * (1 << 20) + b'"}}\n')
    reply = c.read_line()
    assert reply["error"]["code"] == -32600
    assert "1048576" in reply["error"]["message"]
    with pytest.raises((EOFError, ConnectionResetError, BrokenPipeError)):
        for _ in range(10):
            c.call("ping")
    c.close()
    # A request just under the limit is fine.
    c = hearth.client()
    big = '{"jsonrpc":"2.0","id":2,"method":"ping","params":{}}' + " " * ((1 << 20) - 60)
    assert len(big) <= (1 << 20)
    c.send_raw(big.encode() + b"\n")
    assert c.read_line()["id"] == 2
    c.close()
    assert hearth.rpc("ping") == {}


def test_200_concurrent_clients(hearth):
    hearth.start(hearth.config())
    clients, refused = [], 0
    for _ in range(200):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        for _ in range(500):
            try:
                s.connect(hearth.sock)
                break
            except BlockingIOError:  # backlog momentarily full
                time.sleep(0.01)
        clients.append(s)
    served = []
    for s in clients:
        try:
            s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
        except (BrokenPipeError, ConnectionResetError):
            pass  # a refused client may already be closed; its error line is still readable
    for s in clients:
        data = b""
        while b"\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        msg = json.loads(data.split(b"\n")[0])
        if "result" in msg:
            served.append(s)
        else:
            assert msg["error"]["code"] == -32001
            assert "too many clients" in msg["error"]["message"]
            refused += 1
    assert len(served) == 128 and refused == 72
    for s in clients:
        s.close()
    # Slots come back once hearth has seen the clients leave (until then a
    # newcomer may still be refused as the 129th).
    def released():
        c = hearth.client()
        try:
            c.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"status"}\n')
            r = c.read_line()
            return "result" in r and r["result"]["clients"] == 1
        except (EOFError, OSError):
            return False
        finally:
            c.close()
    hearth.wait_for(released, what="clients released")


def test_client_that_never_reads_is_dropped_without_blocking_others(hearth):
    hearth.start(hearth.config())
    stuck = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stuck.connect(hearth.sock)
    stuck.setblocking(False)
    req = b'{"jsonrpc":"2.0","id":1,"method":"status"}\n' * 256
    sent = 0
    t0 = time.monotonic()
    while time.monotonic() - t0 < 3:
        try:
            sent += stuck.send(req)
        except BlockingIOError:
            time.sleep(0.01)
        # Everyone else is served meanwhile.
        other = hearth.client(timeout=2)
        assert other.result("ping") == {}
        other.close()
    assert sent > 0
    # The stuck client is dropped once it has read nothing for 10 s.
    def dropped():
        return hearth.rpc("status")["clients"] == 1
    hearth.wait_for(dropped, timeout=20, what="stuck client dropped")
    assert "reads nothing" in hearth.log_text()
    stuck.close()


@pytest.mark.valgrind
def test_client_disconnecting_mid_reply(hearth):
    hearth.start(hearth.config())
    for _ in range(20):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(hearth.sock)
        s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"config.get"}\n' * 200)
        s.close()
    assert hearth.rpc("ping") == {}
    hearth.wait_for(lambda: hearth.rpc("status")["clients"] == 1, what="clients gone")


def test_peer_inside_a_service_cgroup_is_refused(hearth, tmp_path):
    if not os.path.exists("/sys/fs/cgroup/unified/cgroup.procs") and \
            not os.path.exists("/sys/fs/cgroup/cgroup.procs"):
        pytest.skip("no cgroup2 on this host")
    out = tmp_path / "peer.txt"
    script = (
        "import socket,sys,time\n"
        "s=socket.socket(socket.AF_UNIX)\n"
        f"s.connect({hearth.sock!r})\n"
        # hearth may have refused and closed before the request is sent:
        # the send then fails, and the refusal is still there to read.
        "try:\n"
        "    s.sendall(b'{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\\n')\n"
        "except OSError:\n"
        "    pass\n"
        "d=s.recv(4096)\n"
        f"open({str(out)!r},'wb').write(d)\n"
        "time.sleep(1000)\n")
    # isolation off: with it the socket's directory is masked and the
    # peer check is never reached; this tests the check itself.
    hearth.start(hearth.config(services=[{"name": "agent", "argv": ["/usr/bin/python3", "-c", script],
                                          "isolation": False}]))
    hearth.wait_for(lambda: out.exists() and out.stat().st_size > 0, what="peer result")
    reply = json.loads(out.read_bytes().split(b"\n")[0])
    assert "error" in reply and reply["error"]["message"] == "peer refused"
    assert "runs inside a service cgroup" in hearth.log_text()
    # The host side is still served.
    assert hearth.rpc("ping") == {}


CAP_DAC_OVERRIDE = 1
# Outside every service and outside hearth's namespaces: a host process
# that dropped root but kept CAP_DAC_OVERRIDE, so the socket's mode (0600,
# root's) and its directory's (0700) do not stop it; only the peer check can.
NON_ROOT_PEER = r"""
import json, os, socket, sys
st = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
r = {"uid": os.getuid(), "euid": os.geteuid(), "cap_eff": int(st["CapEff"], 16)}
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
    r["connect"] = "ok"
except OSError as e:
    r["connect"] = e.strerror
if r["connect"] == "ok":
    try:
        s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
    except OSError:
        pass  # refused and closed before the request went: the answer is still there
    data = b""
    while not data.endswith(b"\n"):
        d = s.recv(4096)
        if not d:
            break
        data += d
    r["reply"] = data.decode()
print(json.dumps(r))
"""


def _as_uid_1000(caps, sock):
    """NON_ROOT_PEER run as uid and gid 1000, with caps (setpriv syntax)
    as its inheritable and ambient sets."""
    if not shutil.which("setpriv"):
        pytest.skip("setpriv (util-linux) is not installed")
    cmd = ["setpriv", "--reuid", "1000", "--regid", "1000", "--clear-groups"]
    if caps:
        cmd += ["--inh-caps", caps, "--ambient-caps", caps]
    out = subprocess.run([*cmd, sys.executable, "-c", NON_ROOT_PEER, sock], capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_non_root_peer_with_dac_override_is_refused(hearth):
    hearth.start(hearth.config())
    # Without the capability the file mode stops it first.
    r = _as_uid_1000(None, hearth.sock)
    assert r["uid"] == 1000 and r["cap_eff"] == 0 and r["connect"] == "Permission denied", r
    # With it, it reaches hearth, which answers the refusal and closes.
    r = _as_uid_1000("+dac_override", hearth.sock)
    assert r["uid"] == 1000 and r["euid"] == 1000, r
    assert r["cap_eff"] == 1 << CAP_DAC_OVERRIDE, r
    assert r["connect"] == "ok", r
    reply = json.loads(r["reply"])
    assert reply["error"] == {"code": -32600, "message": "peer refused"}, reply
    assert "result" not in reply
    hearth.wait_for(lambda: re.search(r"refused control client on \S+ \(unix uid=1000 pid=0\): "
                                      r"uid 1000 is not root", hearth.log_text()),
                    what="the refusal in the log")
    # Nothing was run for it; root is still served.
    assert hearth.rpc("ping") == {}


def test_socket_is_private(hearth):
    hearth.start(hearth.config())
    assert (os.stat(hearth.sock).st_mode & 0o777) == 0o600
