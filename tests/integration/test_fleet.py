"""hearthctl over several sandboxes at once: `top` and one-call commands
against 50 shipped build/hearth instances, each PID 1 of its own pid,
mount, net, uts and ipc namespaces with its own unix socket, one of them
stopped with SIGSTOP (a stuck sandbox); the glob form of --connect;
refused and malformed targets; a hybrid vsock handshake and the activity
field through a scripted server on a unix socket the test made."""
import fcntl
import json
import os
import pty
import re
import shutil
import select
import signal
import socket
import struct
import subprocess
import tempfile
import termios
import threading
import time

import pytest

from conftest import HEARTHCTL, SLOW, Hearth, _need_root

N = 50
STUCK = 17


def expected(i):
    """Phase, services running and in all, and restarts instance i is set
    up to show."""
    k = 1 + i % 3
    if i % 5 == 4:
        return "wait_init", 1, k, 0  # only the first service is not after init
    if i % 7 == 3:
        return "running", k + 1, k + 2, 1  # flaky restarted once, crashy failed
    return "running", k, k, 0


def services(i, marker):
    k = 1 + i % 3
    out = []
    for j in range(k):
        s = {"name": f"s{j}", "argv": ["/bin/sleep", "100000"]}
        if i % 5 == 4 and j > 0:
            s["after"] = ["init"]
        out.append(s)
    if i % 7 == 3 and i % 5 != 4:
        out.append({"name": "crashy", "argv": ["/bin/sh", "-c", "exit 3"], "restart": "never"})
        out.append({"name": "flaky", "argv": [
            "/bin/sh", "-c", f'[ -e {marker} ] || {{ touch {marker}; exit 1; }}; exec sleep 100000']})
    return out


def status_matches(h, i):
    phase, running, total, restarts = expected(i)
    st = h.rpc("status")
    svcs = st["services"]
    return (st["phase"] == phase and len(svcs) == total and
            sum(s["state"] == "running" for s in svcs) == running and
            sum(s["restarts"] for s in svcs) == restarts)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    _need_root()
    base = tempfile.mkdtemp(prefix="hfleet-")
    hs = []
    try:
        for i in range(N):
            h = Hearth(tmp_path_factory.mktemp(f"h{i:02d}"))
            os.makedirs(f"{base}/s{i:02d}")
            shutil.rmtree(h.sockdir, ignore_errors=True)
            h.sockdir = f"{base}/s{i:02d}"
            h.sock = f"{h.sockdir}/hearth.sock"
            cfg = h.config(services(i, h.dir / "flaky-ran"))
            if i % 5 == 4:
                cfg["wait_for_init"] = {"enabled": True}
            h.start(cfg, wait=False, log="warn")
            hs.append(h)
        for i, h in enumerate(hs):
            h.wait_ready()
            h.wait_for(lambda: status_matches(h, i), what=f"instance {i} settled")
        os.kill(hs[STUCK].pid, signal.SIGSTOP)
        yield base, hs
    finally:
        for h in hs:
            try:
                os.kill(h.pid, signal.SIGCONT)
            except (OSError, AssertionError):
                pass
        for h in hs:
            h.stop()
        shutil.rmtree(base, ignore_errors=True)


def run(*args, timeout=120):
    t0 = time.monotonic()
    r = subprocess.run([HEARTHCTL, *args], capture_output=True, text=True, timeout=timeout)
    return r, (time.monotonic() - t0) * 1000


def table(out):
    """Rows of the top table: target -> the cells after it."""
    lines = out.splitlines()
    head = next(i for i, l in enumerate(lines) if l.startswith("TARGET"))
    assert lines[head].split() == ["TARGET", "PHASE", "SVC", "RESTARTS", "ACT", "CPU", "MEM",
                                   "DISK", "EGRESS"], lines[head]
    return {l.split()[0]: l.split()[1:] for l in lines[head + 1:] if l.strip()}


def spec(base, i):
    return f"unix:{base}/s{i:02d}/hearth.sock"


def test_top_once_lists_fifty_sandboxes_and_one_timeout(fleet):
    base, hs = fleet
    args = [a for i in range(N) for a in ("--connect", spec(base, i))]
    deadline = int(1500 * SLOW)
    r, ms = run(*args, "top", "--once", "--timeout-ms", str(deadline))
    assert r.returncode == 2, r.stderr  # one did not answer
    assert f"{N} sandboxes, {N - 1} answered, 1 not" in r.stdout
    rows = table(r.stdout)
    assert list(rows) == [spec(base, i) for i in range(N)]
    for i in range(N):
        cells = rows[spec(base, i)]
        if i == STUCK:
            assert cells == ["timeout"], cells
            continue
        phase, running, total, restarts = expected(i)
        assert cells[:3] == [phase, f"{running}/{total}", str(restarts)], (i, cells)
        # status.activity read on the spot for each sandbox
        assert cells[3] in ("busy", "idle"), (i, cells)
    # The stuck sandbox costs one deadline, waited for alongside the rest:
    # finishing takes the deadline plus slack, far below N deadlines.
    assert ms < deadline + 10000 * SLOW, ms


def test_top_json_names_the_deadline(fleet):
    base, hs = fleet
    r, _ = run("--json", "--connect", ",".join(spec(base, i) for i in (0, STUCK, 4)),
               "top", "--timeout-ms", "700")
    assert r.returncode == 2, r.stderr
    doc = json.loads(r.stdout)
    t = doc["targets"]
    assert [x["target"] for x in t] == [spec(base, i) for i in (0, STUCK, 4)]
    assert t[1] == {"target": spec(base, STUCK), "answered": False, "failed": "timeout",
                    "message": "timed out after 700 ms waiting for the reply"}
    assert t[0]["answered"] and t[0]["phase"] == "running"
    assert (t[0]["services_running"], t[0]["services_total"]) == (1, 1)
    assert t[2]["phase"] == "wait_init"
    assert (t[2]["services_running"], t[2]["services_total"]) == (1, 2)
    assert isinstance(t[0]["busy"], bool)  # status.activity
    assert t[0]["cpu_percent"] is None  # one sample: no delta


def test_stuck_sandboxes_are_waited_for_in_parallel(fleet):
    """Four stopped sandboxes: one after the other they would take four
    deadlines; in parallel the whole refresh ends within two."""
    base, hs = fleet
    extra = [3, 25, 40]
    for i in extra:
        os.kill(hs[i].pid, signal.SIGSTOP)
    try:
        deadline = int(1500 * SLOW)
        r, ms = run("--connect", f"unix:{base}/s*/hearth.sock", "top", "--once",
                    "--timeout-ms", str(deadline))
    finally:
        for i in extra:
            os.kill(hs[i].pid, signal.SIGCONT)
    assert r.returncode == 2
    rows = table(r.stdout)
    assert sorted(t for t, c in rows.items() if c == ["timeout"]) == \
        sorted(spec(base, i) for i in extra + [STUCK])
    assert ms < 2 * deadline, ms


def test_glob_expands_to_every_socket_in_order(fleet):
    base, hs = fleet
    r, _ = run("--json", "--connect", f"unix:{base}/s*/hearth.sock", "top",
               "--timeout-ms", str(int(1500 * SLOW)))
    assert r.returncode == 2
    t = json.loads(r.stdout)["targets"]
    assert [x["target"] for x in t] == [spec(base, i) for i in range(N)]
    for i, x in enumerate(t):
        if i == STUCK:
            assert x["failed"] == "timeout"
            continue
        phase, running, total, restarts = expected(i)
        assert (x["phase"], x["services_running"], x["services_total"], x["restarts"]) == \
            (phase, running, total, restarts), (i, x)
    # A pattern that matches nothing stays as it is, and says so.
    r, _ = run("--connect", f"unix:{base}/nope*/hearth.sock", "top", "--once")
    assert r.returncode == 2
    assert table(r.stdout) == {f"unix:{base}/nope*/hearth.sock":
                               ["unable", "to", "connect:", "No", "such", "file", "or", "directory"]}


def test_refused_and_malformed_targets_show_their_error(fleet, tmp_path):
    base, hs = fleet
    dead = str(tmp_path / "dead.sock")
    s = socket.socket(socket.AF_UNIX)
    s.bind(dead)  # a socket file nobody listens on: connect is refused
    s.close()
    r, _ = run("--connect", spec(base, 0), "--connect", "unix:" + dead,
               "--connect", "vsock:nope", "top", "--once")
    assert r.returncode == 2
    rows = table(r.stdout)
    assert rows[spec(base, 0)][:2] == ["running", "1/1"]
    assert " ".join(rows["unix:" + dead]) == "unable to connect: Connection refused"
    assert " ".join(rows["vsock:nope"]).startswith("bad connect spec")
    r, _ = run("--json", "--connect", "unix:" + dead, "top")
    assert json.loads(r.stdout)["targets"][0] == {
        "target": "unix:" + dead, "answered": False, "failed": "connect",
        "message": "unable to connect: Connection refused"}
    r, _ = run("--connect", spec(base, 0), "top", "--once")
    assert r.returncode == 0, r.stdout + r.stderr


def test_status_and_ping_over_several_targets(fleet):
    base, hs = fleet
    r, _ = run("-c", spec(base, 0), "-c", spec(base, 4), "status")
    assert r.returncode == 0, r.stderr
    parts = r.stdout.split(f"== {spec(base, 4)} ==")
    assert parts[0].startswith(f"== {spec(base, 0)} ==\nhearth ")
    assert "phase running" in parts[0] and "phase wait_init" in parts[1]
    r, _ = run("--json", "-t", "700", "-c", f"{spec(base, 1)},{spec(base, STUCK)}", "status")
    assert r.returncode == 2
    doc = json.loads(r.stdout)
    assert doc[0]["target"] == spec(base, 1)
    assert [s["name"] for s in doc[0]["result"]["services"]] == ["s0", "s1"]
    assert doc[1] == {"target": spec(base, STUCK), "failed": "timeout",
                      "message": "timed out after 700 ms waiting for the reply"}
    assert f"{spec(base, STUCK)}: timed out after 700 ms" not in r.stderr  # json: in the doc
    # An error answer is exit 1, and names the target.
    r, _ = run("-c", spec(base, 0), "-c", spec(base, 1), "services", "stop", "nope")
    assert r.returncode == 1
    assert f"hearthctl: {spec(base, 1)}: unable to call services.stop: " in r.stderr
    # Following a stream, and cp, stay with one sandbox.
    r, _ = run("-c", spec(base, 0), "-c", spec(base, 1), "events")
    assert r.returncode == 2 and "works on one sandbox" in r.stderr
    r, _ = run("-c", f"{spec(base, 0)},", "ping")
    assert r.returncode == 2 and "empty target" in r.stderr


# ---- a scripted server: hybrid vsock handshake, activity, a bad reply ----

class Scripted:
    """A unix socket server the test controls: an optional hybrid vsock
    handshake, then canned answers to status and metrics."""

    def __init__(self, path, status, handshake=None, garbage=False, hang_up=False):
        self.path, self.status, self.handshake, self.garbage = path, status, handshake, garbage
        self.hang_up = hang_up  # close each connection after its two replies
        self.seen = []
        self.accepts = 0
        self.cpu = 0
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(path)
        self.sock.listen(8)
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.accepts += 1
            threading.Thread(target=self.one, args=(c,), daemon=True).start()

    def one(self, c):
        try:
            self.talk(c)
        except OSError:
            pass  # hearthctl hung up (after a refused handshake, a bad reply)
        finally:
            c.close()

    def talk(self, c):
        f = c.makefile("rb")
        if self.handshake is not None:
            self.seen.append(f.readline().decode())
            c.sendall(self.handshake)
        answered = 0
        for line in f:
            req = json.loads(line)
            self.seen.append(req["method"])
            if self.garbage:
                c.sendall(b"this is not json\n")
                continue
            if req["method"] == "metrics":
                self.cpu += 100000  # 0.1 s of CPU between two calls
            result = self.status if req["method"] == "status" else {
                "services": [{"name": "a", "cpu_usec": self.cpu, "memory_bytes": 3 << 20}],
                "mounts": [{"target": "/h", "read_only": False, "used_percent": 93.5,
                            "low": True},
                           {"target": "/ro", "read_only": True, "used_percent": 99}],
                "egress": {"applied": True, "counters": {
                    "loopback": {"bytes": 999999}, "established": {"bytes": 1000},
                    "public": {"bytes": 1048}, "netdev": {"public": {"bytes": 77777}}}}}
            # A notification first: skipped, not taken for the reply.
            c.sendall(b'{"jsonrpc":"2.0","method":"event","params":{}}\n')
            c.sendall((json.dumps({"jsonrpc": "2.0", "id": req["id"], "result": result})
                       + "\n").encode())
            answered += 1
            if self.hang_up and answered == 2:
                return

    def close(self):
        self.sock.close()


STATUS = {"phase": "running", "sandbox": {"state": "frozen"},
          "services": [{"name": "a", "state": "running", "restarts": 2},
                       {"name": "b", "state": "backoff", "restarts": 5}],
          "activity": {"busy": True, "since_ms": 10, "reasons": [], "lease": None}}


def test_hybrid_vsock_handshake_activity_and_figures(tmp_path):
    path = str(tmp_path / "vmm.sock")
    srv = Scripted(path, STATUS, handshake=b"OK 1073741824\n")
    try:
        r, _ = run("--connect", f"hvsock:{path}:1024", "top", "--once")
        assert r.returncode == 0, r.stdout + r.stderr
        assert srv.seen[:3] == ["CONNECT 1024\n", "status", "metrics"]
        # frozen wins over the phase; busy from status.activity; the
        # fullest writable mount (low: "!"); egress without loopback and
        # the netdev copy: 1000 + 1048 bytes.
        assert table(r.stdout) == {f"hvsock:{path}:1024":
                                   ["frozen", "1/2", "7", "busy", "-", "3.0M", "94%!", "2.0K"]}
        r, _ = run("--json", "--connect", f"hvsock:{path}:1024", "top", "--once")
        t = json.loads(r.stdout)["targets"][0]
        assert t["busy"] is True and t["disk_used_percent"] == 93.5
        assert t["egress_bytes"] == 2048 and t["memory_bytes"] == 3 << 20
        # One target still goes through the same connect code, unchanged.
        r, _ = run("--connect", f"hvsock:{path}:5", "--json", "status")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["activity"]["busy"] is True
        assert srv.seen[-2:] == ["CONNECT 5\n", "status"]
        r, _ = run("--connect", "vsock:x", "ping")
        assert r.returncode == 2 and "bad connect spec 'vsock:x'" in r.stderr
        r, _ = run("--connect", "unix:/" + "x" * 200, "ping")
        assert r.returncode == 2 and "too long" in r.stderr  # ENAMETOOLONG
    finally:
        srv.close()


def test_refused_handshake_and_bad_reply(tmp_path):
    p1, p2 = str(tmp_path / "a.sock"), str(tmp_path / "b.sock")
    a = Scripted(p1, STATUS, handshake=b"NO \x1b[2Jsuch port\n")
    b = Scripted(p2, STATUS, garbage=True)
    try:
        r, _ = run("--connect", f"hvsock:{p1}:7,unix:{p2}", "top", "--once")
        assert r.returncode == 2
        rows = table(r.stdout)
        assert " ".join(rows[f"hvsock:{p1}:7"]) == "handshake refused: NO \\x1b[2Jsuch port"
        assert " ".join(rows[f"unix:{p2}"]) == "bad reply: not a JSON object"
    finally:
        a.close()
        b.close()


def test_refreshes_keep_the_connection_and_take_cpu_deltas(tmp_path):
    path = str(tmp_path / "s.sock")
    srv = Scripted(path, STATUS)
    try:
        r, _ = run("--connect", f"unix:{path}", "top", "-n", "3", "-d", "0.2", "--json")
        assert r.returncode == 0, r.stderr
        frames = [json.loads(l)["targets"][0] for l in r.stdout.splitlines()]
        assert len(frames) == 3
        assert srv.accepts == 1 and srv.seen == ["status", "metrics"] * 3
        assert frames[0]["cpu_percent"] is None
        # 0.1 s of CPU between answers at least 0.2 s apart (the refresh
        # interval, less the first answer's own wait): at most about 50%.
        for f in frames[1:]:
            assert 0 < f["cpu_percent"] <= 60, f
    finally:
        srv.close()


def test_a_connection_the_server_closed_is_made_again(tmp_path):
    path = str(tmp_path / "s.sock")
    srv = Scripted(path, STATUS, hang_up=True)
    try:
        r, _ = run("--connect", f"unix:{path}", "top", "-n", "3", "-d", "0.1", "--json")
        assert r.returncode == 0, r.stdout + r.stderr
        frames = [json.loads(l)["targets"][0] for l in r.stdout.splitlines()]
        assert [f["answered"] for f in frames] == [True] * 3
        assert srv.accepts == 3
    finally:
        srv.close()


def test_top_redraws_in_place_on_a_terminal(fleet):
    """stdout a pty of 80 columns: the cursor hidden, each frame drawn from
    the top left over the last, long targets cut to their tail, the
    cursor back at the end."""
    base, hs = fleet
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 80, 0, 0))
    p = subprocess.Popen([HEARTHCTL, "-c", spec(base, 0), "-c", spec(base, STUCK), "top",
                          "-n", "2", "-d", "0.2", "--timeout-ms", "300"],
                         stdout=slave, stderr=subprocess.PIPE)
    os.close(slave)
    out = b""
    while True:
        ready, _, _ = select.select([master], [], [], 30)
        assert ready, "no output from top"
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the other end closed
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert p.wait(timeout=30) == 2
    text = out.decode()
    assert text.startswith("\x1b[?25l\x1b[H\x1b[2J")
    assert text.endswith("\x1b[?25h")
    frames = text.split("\x1b[H")[2:]
    assert len(frames) == 2
    for fr in frames:
        lines = [l.replace("\x1b[K", "").rstrip("\r") for l in fr.split("\n")]
        assert all(len(l) <= 80 for l in lines), lines
        rows = [l for l in lines if l.startswith("...")]
        assert len(rows) == 2, lines
        assert re.match(r"^\.\.\.\S*s00/hearth\.sock\s+running\s+1/1\s+0\s+(busy|idle)\s", rows[0]), rows[0]
        assert re.match(r"^\.\.\.\S*s17/hearth\.sock\s+timeout$", rows[1]), rows[1]
    # The second frame has a CPU figure: a delta between two answers.
    assert re.search(r"s00/hearth\.sock\s+running\s+1/1\s+0\s+(busy|idle)\s+\d+\.\d%", frames[1])
