"""exec.* methods: processes started by the host, with pipes or a pty;
their output buffer with offsets (reattach, drops), stdin, signals,
waits, limits, back-pressure, and `hearthctl exec`."""
import base64
import hashlib
import json
import os
import signal
import subprocess
import threading
import time

import pytest

from conftest import HEARTHCTL, SLOW, VALGRIND, Client
from ptyrun import PtyCommand

RSS_BOUND_KIB = float("inf") if VALGRIND else 48 * 1024


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


class ExecClient(Client):
    """A Client that keeps the notifications that arrive before a reply,
    for collect() to read in order."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.kept = []

    def read_line(self):
        if self.kept:
            return self.kept.pop(0)
        return super().read_line()

    def read_reply(self):
        while True:
            msg = super().read_line()
            if "id" in msg:
                return msg
            self.kept.append(msg)


def client(h, timeout=10.0):
    return ExecClient(h.sock, timeout)


def collect(c, pid, streams=None, until_exit=True):
    """Reads c's notifications for process pid until its exec.exit:
    returns ({stream: bytes}, exit params). Offsets must follow on."""
    out, nxt = {}, dict(streams or {})
    while True:
        m = c.read_line()
        p = m.get("params") or {}
        if m.get("method") == "exec.output" and p["id"] == pid:
            s = p["stream"]
            if s in nxt:
                assert p["offset"] == nxt[s], (p["offset"], nxt[s])
            data = base64.b64decode(p["data"])
            out[s] = out.get(s, b"") + data
            nxt[s] = p["offset"] + len(data)
        elif m.get("method") == "exec.exit" and p["id"] == pid:
            return out, p


def start(c, params):
    r = c.result("exec.start", params)
    assert isinstance(r["id"], int) and r["pid"] > 1
    return r["id"]


def reap_all(h):
    """Kills what a test left running and waits for it, so its cgroup
    leaf is gone before hearth exits."""
    c = client(h)
    for p in c.result("exec.list")["processes"]:
        if not p["exited"]:
            c.call("exec.signal", {"id": p["id"], "signal": "SIGKILL"})
            c.result("exec.wait", {"id": p["id"], "timeout_ms": 10000})
    c.close()


@pytest.fixture
def h(hearth):
    hearth.start(hearth.config())
    yield hearth
    if hearth.proc.poll() is None:
        reap_all(hearth)


@pytest.fixture
def c(h):
    cl = client(h)
    yield cl
    cl.close()


@pytest.mark.valgrind
def test_pipes_keep_stdout_and_stderr_apart_and_report_the_exit_code(c):
    pid = start(c, {"argv": ["sh", "-c", "echo out; echo err >&2; exit 3"]})
    out, ex = collect(c, pid, {"stdout": 0, "stderr": 0})
    assert out == {"stdout": b"out\n", "stderr": b"err\n"}
    assert ex["exited"] and ex["exit_code"] == 3 and ex["dropped"] == 0
    # Kept after the exit: wait answers at once, list shows it.
    w = c.result("exec.wait", {"id": pid})
    assert w == {"id": pid, "exited": True, "exit_code": 3}
    procs = {p["id"]: p for p in c.result("exec.list")["processes"]}
    assert procs[pid]["argv"] == ["sh", "-c", "echo out; echo err >&2; exit 3"]
    assert procs[pid]["streams"]["stdout"] == {"start": 0, "end": 4, "dropped": 0}


def test_env_cwd_and_user_are_applied(c):
    pid = start(c, {"argv": ["sh", "-c", 'echo "$FOO $(pwd) $(id -u)"'], "env": {"FOO": "bar"},
                    "cwd": "/tmp", "user": "nobody"})
    out, ex = collect(c, pid)
    assert out["stdout"] == b"bar /tmp 65534\n" and ex["exit_code"] == 0


def test_process_is_contained_like_a_service(c):
    # Its own cgroup leaf under the exec directory, and no capabilities
    # beyond a service's (CAP_SYS_ADMIN, bit 21, is never in the default).
    pid = start(c, {"argv": ["sh", "-c", "cat /proc/self/cgroup; grep CapEff /proc/self/status"]})
    out, ex = collect(c, pid)
    text = out["stdout"].decode()
    assert ex["exit_code"] == 0
    eff = int(text.split("CapEff:")[1].split()[0], 16)
    assert not eff & (1 << 21), text
    # A cgroup namespace rooted at its leaf: it sees itself at "/".
    assert "0::/\n" in text, text


NS_PROBE = "readlink /proc/self/ns/mnt /proc/self/ns/pid; cat /proc/1/comm; grep ^0:: /proc/self/cgroup"


def hearth_ns(h):
    return [os.readlink(f"/proc/{h.pid}/ns/{n}") for n in ("mnt", "pid")]


def test_isolation_off_runs_in_hearths_namespaces_still_in_its_leaf(h, c):
    # A default session: a mount and pid namespace of its own, whose
    # PID 1 is its reaper; not privileged.
    r = c.result("exec.start", {"argv": ["sh", "-c", NS_PROBE]})
    assert r["isolation"] is True and r["privileged"] is False and "privileged_reasons" not in r
    out, ex = collect(c, r["id"])
    mnt, pid, comm = out["stdout"].decode().splitlines()[:3]
    assert ex["exit_code"] == 0
    assert mnt != hearth_ns(h)[0] and pid != hearth_ns(h)[1] and comm == "hearth-reaper"
    # isolation false: hearth's own mount and pid namespaces (its PID 1 is
    # hearth), as a service with "isolation": false; still its own leaf
    # under @exec, seen from the root as there is no cgroup namespace.
    r = c.result("exec.start", {"argv": ["sh", "-c", NS_PROBE + "; sleep 30"],
                                "isolation": False, "attach": False})
    assert r["isolation"] is False and r["privileged"] is True
    assert r["privileged_reasons"] == ["isolation off"]
    listed = {p["id"]: p for p in c.result("exec.list")["processes"]}[r["id"]]
    assert listed["isolation"] is False and listed["privileged_reasons"] == ["isolation off"]
    assert f"exec {r['id']}: privileged: isolation off" in h.log_text()
    # The reported pid is the command itself (no reaper in between).
    assert open(f"/proc/{h.host_pid(r['pid'])}/comm").read().strip() == "sh"
    c.result("exec.attach", {"id": r["id"]})
    text = b""
    while text.count(b"\n") < 4:
        m = c.read_line()
        if m.get("method") == "exec.output":
            text += base64.b64decode(m["params"]["data"])
    mnt, pid, comm, cg = text.decode().splitlines()[:4]
    assert [mnt, pid] == hearth_ns(h) and comm == "hearth", text
    assert cg.startswith("0::/") and cg.endswith(f"/@exec/{r['id']}"), cg
    c.result("exec.signal", {"id": r["id"], "signal": "SIGKILL"})
    assert c.result("exec.wait", {"id": r["id"]})["signal"] == 9


def test_isolation_off_can_be_forbidden_by_the_config(hearth):
    hearth.start(hearth.config(exec={"allow_uncontained": False}))
    c = client(hearth)
    e = c.error("exec.start", {"argv": ["true"], "isolation": False})
    assert e["code"] == -32003 and e["message"].startswith("isolation:") \
        and "exec.allow_uncontained" in e["message"], e
    # Contained sessions are untouched.
    out, ex = collect(c, start(c, {"argv": ["true"], "isolation": True}))
    assert ex["exit_code"] == 0
    c.close()


def test_tty_is_a_real_pty_with_its_size_and_resize(c):
    pid = start(c, {"argv": ["tty"], "tty": True})
    out, ex = collect(c, pid)
    assert out["stdout"].startswith(b"/dev/pts/") and ex["exit_code"] == 0
    assert "stderr" not in out
    pid = start(c, {"argv": ["stty", "size"], "tty": True, "rows": 33, "cols": 101})
    out, _ = collect(c, pid)
    assert out["stdout"] == b"33 101\r\n"
    # Resize while it runs: the next `stty size` sees the new size.
    pid = start(c, {"argv": ["sh", "-c", "stty size; read x; stty size"], "tty": True,
                    "stdin": True, "rows": 10, "cols": 20})
    first = b""
    while b"10 20" not in first:
        m = c.read_line()
        if m.get("method") == "exec.output":
            first += base64.b64decode(m["params"]["data"])
    assert c.result("exec.resize", {"id": pid, "rows": 50, "cols": 132}) == {}
    assert c.result("exec.input", {"id": pid, "data": b64(b"\n")}) == {}
    out, ex = collect(c, pid)
    assert b"50 132" in out["stdout"] and ex["exit_code"] == 0


@pytest.mark.valgrind
def test_stdin_echo_through_cat_and_close(c):
    pid = start(c, {"argv": ["cat"], "stdin": True})
    assert c.result("exec.input", {"id": pid, "data": b64(b"hello\n")}) == {}
    assert c.result("exec.input", {"id": pid, "data": b64(b"world\n"), "close": True}) == {}
    out, ex = collect(c, pid)
    assert out["stdout"] == b"hello\nworld\n" and ex["exit_code"] == 0
    # With a tty, close sends the EOF character: cat ends too.
    pid = start(c, {"argv": ["cat"], "stdin": True, "tty": True})
    assert c.result("exec.input", {"id": pid, "data": b64(b"abc\n"), "close": True}) == {}
    out, ex = collect(c, pid)
    assert out["stdout"].count(b"abc") == 2 and ex["exit_code"] == 0  # echo + cat
    # Without stdin, the program reads /dev/null.
    pid = start(c, {"argv": ["cat"]})
    out, ex = collect(c, pid)
    assert out == {} and ex["exit_code"] == 0
    assert c.error("exec.input", {"id": pid, "data": b64(b"x")})["code"] == -32003


def test_signals_reach_the_process(c):
    pid = start(c, {"argv": ["sleep", "100"]})
    assert c.result("exec.signal", {"id": pid, "signal": "SIGTERM"}) == {}
    _, ex = collect(c, pid)
    assert ex["signal"] == 15 and ex["signal_name"] == "SIGTERM" and "exit_code" not in ex
    pid = start(c, {"argv": ["sleep", "100"]})
    assert c.result("exec.signal", {"id": pid, "signal": 9}) == {}
    _, ex = collect(c, pid)
    assert ex["signal"] == 9
    e = c.error("exec.signal", {"id": pid, "signal": "SIGTERM"})
    assert e["code"] == -32003 and "exited" in e["message"]
    e = c.error("exec.signal", {"id": pid, "signal": "SIGNOPE"})
    assert e["code"] == -32602 and e["message"].startswith("signal:")
    # Ctrl-C as a byte on a tty: the line discipline signals the program.
    pid = start(c, {"argv": ["sleep", "100"], "tty": True, "stdin": True})
    time.sleep(0.2)
    c.result("exec.input", {"id": pid, "data": b64(b"\x03")})
    _, ex = collect(c, pid)
    assert ex["signal"] == 2


def test_wait_is_deferred_until_the_exit_and_has_a_timeout(h, c):
    pid = start(c, {"argv": ["sleep", "0.5"], "attach": False})
    w = client(h)
    t0 = time.monotonic()
    assert w.result("exec.wait", {"id": pid, "timeout_ms": 50}) == {"id": pid, "exited": False}
    r = w.result("exec.wait", {"id": pid, "timeout_ms": 10000})
    assert r == {"id": pid, "exited": True, "exit_code": 0}
    assert time.monotonic() - t0 >= 0.3
    # Several waiters at once all get the answer.
    pid = start(c, {"argv": ["sleep", "0.3"], "attach": False})
    ws = [client(h) for _ in range(3)]
    for x in ws:
        x.send_raw((json.dumps({"jsonrpc": "2.0", "id": 1, "method": "exec.wait",
                                "params": {"id": pid}}) + "\n").encode())
    for x in ws:
        assert x.read_reply()["result"]["exit_code"] == 0
        x.close()
    assert w.error("exec.wait", {"id": 999999})["code"] == -32002
    w.close()


def test_start_is_refused_while_frozen_and_output_waits_for_the_thaw(hearth):
    hearth.start(hearth.config(), cgroup=True)
    c = client(hearth)
    pid = start(c, {"argv": ["sh", "-c", "read x; echo got $x"], "stdin": True})
    assert c.result("sandbox.freeze", {"timeout_ms": 5000})["frozen"] is True
    e = c.error("exec.start", {"argv": ["true"]})
    assert e["code"] == -32003 and "frozen" in e["message"]
    # Input is taken while frozen; the answer comes after the resume.
    assert c.result("exec.input", {"id": pid, "data": b64(b"x\n")}) == {}
    time.sleep(0.3)
    assert c.kept == [] and c.buf == b""
    assert c.result("sandbox.resume", {})["state"] == "running"
    out, ex = collect(c, pid, {"stdout": 0})
    assert out["stdout"] == b"got x\n" and ex["exit_code"] == 0
    c.close()


def test_timeout_kills_the_process(c):
    pid = start(c, {"argv": ["sleep", "30"], "timeout_ms": 200})
    _, ex = collect(c, pid)
    assert ex["signal"] == 9 and ex["timed_out"] is True


@pytest.mark.valgrind
def test_process_outlives_its_client_unless_kill_on_disconnect(h, c):
    a = client(h)
    keep = start(a, {"argv": ["sleep", "30"]})
    kill = start(a, {"argv": ["sleep", "30"], "kill_on_disconnect": True})
    a.close()

    def state():
        return {p["id"]: p for p in c.result("exec.list")["processes"]}

    h.wait_for(lambda: state()[kill]["exited"], what="kill_on_disconnect")
    s = state()
    assert s[kill]["signal"] == 9 and s[kill]["killed"] is True
    assert s[keep]["exited"] is False and s[keep]["attached"] is False


@pytest.mark.valgrind
def test_reattach_with_an_offset_loses_nothing(h):
    n = 30000
    expect = "".join(f"{i}\n" for i in range(1, n + 1)).encode()
    a = client(h)
    pid = start(a, {"argv": ["sh", "-c", f"seq 1 {n}; sleep 0.5; echo end"]})
    got = b""
    while len(got) < 1000:  # a little, then the client vanishes mid-stream
        m = a.read_line()
        if m.get("method") == "exec.output":
            assert m["params"]["offset"] == len(got)
            got += base64.b64decode(m["params"]["data"])
    a.close()
    b = client(h)
    r = b.result("exec.attach", {"id": pid, "offset": len(got)})
    assert r["streams"]["stdout"]["from"] == len(got) and r["streams"]["stdout"]["lost"] == 0
    assert r["dropped"] == 0
    out, ex = collect(b, pid, {"stdout": len(got)})
    assert got + out["stdout"] == expect + b"end\n" and ex["exit_code"] == 0
    b.close()


@pytest.mark.valgrind
def test_overflowed_buffer_reports_what_was_dropped(h, c):
    # Nobody attached: the ring keeps the newest 4096 bytes.
    pid = start(c, {"argv": ["sh", "-c", "seq 1 20000"], "attach": False,
                    "buffer_bytes": 4096})
    assert c.result("exec.wait", {"id": pid})["exit_code"] == 0
    expect = "".join(f"{i}\n" for i in range(1, 20001)).encode()
    st = {p["id"]: p for p in c.result("exec.list")["processes"]}[pid]["streams"]["stdout"]
    assert st["end"] == len(expect) and st["start"] == len(expect) - 4096
    assert st["dropped"] == len(expect) - 4096
    r = c.result("exec.attach", {"id": pid, "offset": 0})
    assert r["streams"]["stdout"] == {"from": len(expect) - 4096, "end": len(expect),
                                      "lost": len(expect) - 4096}
    assert r["dropped"] == len(expect) - 4096
    out, ex = collect(c, pid, {"stdout": len(expect) - 4096})
    assert out["stdout"] == expect[-4096:]
    assert ex["dropped"] == len(expect) - 4096
    e = c.error("exec.attach", {"id": pid, "offset": len(expect) + 1})
    assert e["code"] == -32602 and e["message"].startswith("offset:")


def test_100_mib_round_trip_through_cat(h):
    total, chunk = 100 * 1024 * 1024, 512 * 1024
    c = client(h, timeout=120)
    pid = start(c, {"argv": ["cat"], "stdin": True})
    sent = hashlib.sha256()
    block = os.urandom(chunk)

    def writer():
        # Requests are written without waiting for replies: hearth's
        # deferred exec.input replies and socket buffers pace this thread.
        for i in range(total // chunk):
            data = block[i % 7:] + block[:i % 7]
            sent.update(data)
            req = {"jsonrpc": "2.0", "id": f"in{i}", "method": "exec.input",
                   "params": {"id": pid, "data": b64(data)}}
            c.sock.sendall((json.dumps(req) + "\n").encode())
        c.sock.sendall((json.dumps({"jsonrpc": "2.0", "id": "close", "method": "exec.input",
                                    "params": {"id": pid, "close": True}}) + "\n").encode())

    t = threading.Thread(target=writer)
    t.start()
    got, off, replies = hashlib.sha256(), 0, 0
    while True:
        m = c.read_line()
        if "id" in m:
            assert "result" in m, m
            replies += 1
        elif m["method"] == "exec.output":
            assert m["params"]["offset"] == off
            d = base64.b64decode(m["params"]["data"])
            got.update(d)
            off += len(d)
        elif m["method"] == "exec.exit":
            assert m["params"]["exit_code"] == 0
            break
    t.join()
    assert off == total and got.hexdigest() == sent.hexdigest()
    assert replies == total // chunk + 1
    c.close()


def test_endless_output_does_not_stall_hearth_or_grow_it(h):
    # One client attached that never reads, one process with nobody
    # attached: both print without end; other clients stay answered.
    slow = client(h)
    a = start(slow, {"argv": ["yes"]})
    b = h.rpc("exec.start", {"argv": ["yes", "flood"], "attach": False})["id"]
    pid = h.pid
    c = client(h)
    peak = 0

    def flooded():
        procs = {p["id"]: p for p in c.result("exec.list")["processes"]}
        return procs if procs[b]["streams"]["stdout"]["dropped"] > 4 << 20 else None

    # Until the detached one has overrun its buffer a few times over.
    deadline = time.monotonic() + 10 * SLOW
    procs = None
    while procs is None and time.monotonic() < deadline:
        for _ in range(20):
            t0 = time.monotonic()
            assert c.result("ping") == {}
            assert time.monotonic() - t0 < 2 * SLOW
            peak = max(peak, rss_kib(pid))
        procs = flooded()
    assert procs, "the detached process never overran its buffer"
    # The unread client holds the process back: hearth read at most about
    # the soft limit plus one chunk and a socket's worth of it.
    assert procs[a]["streams"]["stdout"]["end"] < 16 * 1024 * 1024
    assert procs[b]["streams"]["stdout"]["dropped"] > 0
    assert peak < RSS_BOUND_KIB, peak
    slow.close()
    c.close()


def test_limits_are_refused_naming_the_field(hearth):
    hearth.start(hearth.config(exec={"max_processes": 2, "buffer_bytes": 65536}))
    c = client(hearth)
    ids = [start(c, {"argv": ["sleep", "30"], "attach": False}) for _ in range(2)]
    e = c.error("exec.start", {"argv": ["true"]})
    assert e["code"] == -32001 and "exec.max_processes" in e["message"]
    lst = c.result("exec.list")
    assert lst["max_processes"] == 2 and lst["buffer_bytes"] == 65536
    for i in ids:
        c.result("exec.signal", {"id": i, "signal": "SIGKILL"})
        assert c.result("exec.wait", {"id": i})["signal"] == 9
    # Exited ones do not count.
    start(c, {"argv": ["true"]})
    e = c.error("exec.start", {"argv": ["true"], "buffer_bytes": 65537})
    assert e["message"].startswith("buffer_bytes:") and "exec.buffer_bytes" in e["message"]
    cases = [
        ({"argv": ["x"] * 1025}, "argv:"),
        ({"argv": ["x" * 70000, "y" * 70000]}, "argv:"),
        ({"argv": ["true"], "env": {f"K{i}": "v" for i in range(257)}}, "env:"),
        ({"argv": ["true"], "env": {"A": "x" * 70000, "B": "y" * 70000}}, "env:"),
        ({"argv": ["true"], "cwd": "/" + "d" * 300}, "cwd:"),
        ({"argv": ["true"], "user": "u" * 300}, "user:"),
    ]
    for params, field in cases:
        e = c.error("exec.start", params)
        assert e["code"] == -32602 and e["message"].startswith(field), (params.keys(), e)
    c.close()


@pytest.mark.valgrind
def test_bad_params_get_errors_naming_the_field(c):
    cases = [
        ("exec.start", {}, "argv:"),
        ("exec.start", {"argv": []}, "argv:"),
        ("exec.start", {"argv": [""]}, "argv[0]:"),
        ("exec.start", {"argv": ["true", 3]}, "argv[1]:"),
        ("exec.start", {"argv": ["true"], "bogus": 1}, "bogus"),
        ("exec.start", {"argv": ["true"], "cwd": "tmp"}, "cwd:"),
        ("exec.start", {"argv": ["true"], "rows": 10}, "rows:"),
        ("exec.start", {"argv": ["true"], "tty": True, "cols": 0}, "cols:"),
        ("exec.start", {"argv": ["true"], "env": {"A=B": "x"}}, "env:"),
        ("exec.start", {"argv": ["true"], "env": {"A": 1}}, "env:"),
        ("exec.start", {"argv": ["true"], "timeout_ms": -1}, "timeout_ms:"),
        ("exec.start", {"argv": ["true"], "user": "no-such-user"}, "user:"),
        ("exec.start", {"argv": ["true"], "isolation": "off"}, "isolation:"),
        ("exec.start", {"argv": ["true"], "isolation": 0}, "isolation:"),
        ("exec.input", {"id": 1}, "data:"),
        ("exec.input", {"data": "eA=="}, "id:"),
        ("exec.resize", {"id": 1, "rows": 10}, "cols:"),
        ("exec.signal", {"id": 1}, "signal:"),
        ("exec.wait", {"id": 1, "timeout_ms": "x"}, "timeout_ms:"),
        ("exec.attach", {"id": 1, "offset": -3}, "offset:"),
        ("exec.list", {"x": 1}, "x"),
    ]
    for method, params, field in cases:
        e = c.error(method, params)
        assert e["code"] == -32602 and field in e["message"], (method, params, e)
    pid = start(c, {"argv": ["cat"], "stdin": True})
    e = c.error("exec.input", {"id": pid, "data": "!!!"})
    assert e["code"] == -32602 and e["message"].startswith("data:")
    e = c.error("exec.resize", {"id": pid, "rows": 5, "cols": 5})
    assert e["code"] == -32003 and "tty" in e["message"]
    for m in ("exec.input", "exec.resize", "exec.signal", "exec.attach", "exec.wait"):
        e = c.error(m, {"id": 424242, "data": "eA==", "rows": 1, "cols": 1, "signal": 1})
        assert e["code"] in (-32002, -32602), (m, e)
    e = c.error("exec.start", {"argv": ["/no/such/program"]})
    assert e["code"] == -32000 and e["message"] == \
        "argv[0]: /no/such/program: No such file or directory"
    e = c.error("exec.start", {"argv": ["true"], "cwd": "/no/such/dir"})
    assert e["message"] == "cwd: /no/such/dir: No such file or directory"
    c.result("exec.input", {"id": pid, "close": True})
    collect(c, pid)


@pytest.mark.valgrind
def test_attach_moves_the_stream_to_the_new_client(h, c):
    pid = start(c, {"argv": ["sh", "-c", "read x; echo got $x"], "stdin": True})
    b = client(h)
    r = b.result("exec.attach", {"id": pid})
    assert r["exited"] is False and r["streams"]["stdout"]["end"] == 0
    b.result("exec.input", {"id": pid, "data": b64(b"hi\n")})
    out, ex = collect(b, pid, {"stdout": 0})
    assert out["stdout"] == b"got hi\n"
    assert c.result("ping") == {}  # the first client got nothing more meanwhile
    assert c.buf == b"" and c.kept == []
    # Two attaches in one write: both answered, the output sent from the
    # last one's offset, once.
    reqs = [{"jsonrpc": "2.0", "id": 100 + k // 2, "method": "exec.attach",
             "params": {"id": pid, "offset": k}} for k in (0, 2)]
    b.send_raw("".join(json.dumps(r) + "\n" for r in reqs).encode())
    assert b.read_reply()["id"] == 100 and b.read_reply()["id"] == 101
    out, ex = collect(b, pid, {"stdout": 2})
    assert out["stdout"] == b"t hi\n" and ex["exit_code"] == 0
    b.close()


def test_hearthctl_exec_pipes_and_exit_status(h):
    r = subprocess.run([HEARTHCTL, "-c", "unix:" + h.sock, "exec", "--", "sh", "-c",
                        "echo out; echo err >&2; exit 7"], capture_output=True, timeout=30)
    assert r.returncode == 7 and r.stdout == b"out\n" and r.stderr == b"err\n"
    r = subprocess.run([HEARTHCTL, "-c", "unix:" + h.sock, "exec", "-i", "-e", "X=1",
                        "--cwd", "/tmp", "--", "sh", "-c", 'cat; echo "$X $(pwd)"'],
                       input=b"data\n", capture_output=True, timeout=30)
    assert r.returncode == 0 and r.stdout == b"data\n1 /tmp\n", r
    r = subprocess.run([HEARTHCTL, "-c", "unix:" + h.sock, "exec", "--", "sh", "-c",
                        "kill -TERM $$"], capture_output=True, timeout=30)
    assert r.returncode == 128 + 15
    r = subprocess.run([HEARTHCTL, "-c", "unix:" + h.sock, "exec", "--", "/no/such"],
                       capture_output=True, timeout=30)
    assert r.returncode == 1 and b"No such file" in r.stderr


def test_hearthctl_exec_no_isolation_runs_in_hearths_mount_namespace(h):
    base = [HEARTHCTL, "-c", "unix:" + h.sock, "exec"]
    r = subprocess.run([*base, "--no-isolation", "--", "readlink", "/proc/self/ns/mnt"],
                       capture_output=True, timeout=30)
    assert r.returncode == 0 and r.stdout.decode().strip() == hearth_ns(h)[0], r
    r = subprocess.run([*base, "--", "readlink", "/proc/self/ns/mnt"], capture_output=True,
                       timeout=30)
    assert r.returncode == 0 and r.stdout.decode().strip() != hearth_ns(h)[0], r


def test_hearthctl_exec_tty_through_a_pty(h):
    with PtyCommand([HEARTHCTL, "-c", "unix:" + h.sock, "exec", "-i", "-t", "--", "sh", "-c",
                     "tty; stty size; read x; echo got:$x; stty size; sleep 100"],
                    rows=40, cols=90) as p:
        first = p.read_until(b"\n", 10 * SLOW)
        out = first + p.read_until(b"40 90", 10 * SLOW)
        # hearthctl learns the size from its terminal
        assert b"/dev/pts/" in out, out
        assert b"40 90" in out, out
        # a resize of hearthctl's terminal reaches the command
        p.resize(30, 70)
        os.kill(p.pid, signal.SIGWINCH)
        time.sleep(0.3)
        p.write(b"abc\r")
        out = p.read_until(b"30 70", 10 * SLOW)
        assert b"got:abc" in out and b"30 70" in out, out
        # Ctrl-C is passed through as a byte: sleep gets SIGINT, not hearthctl
        p.write(b"\x03")
        status = p.wait()
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 128 + 2, status


def test_hearthctl_resize_while_the_start_is_unanswered_is_sent_after_it(h):
    """A window change before exec.start is answered is not lost: the
    command gets it once it runs, before the input that follows."""
    with PtyCommand([HEARTHCTL, "-c", "unix:" + h.sock, "exec", "-i", "-t", "--", "sh", "-c",
                     "read x; stty size; sleep 100"], rows=40, cols=90) as p:
        # Stopped, hearth cannot answer the start.
        h.signal(signal.SIGSTOP)
        try:
            # hearthctl has read its size and sent the start once its
            # terminal is raw; then the size changes (the kernel sends it
            # SIGWINCH).
            deadline = time.monotonic() + 10 * SLOW
            while not p.raw():
                assert time.monotonic() < deadline, "hearthctl never set its terminal raw"
                time.sleep(0.01)
            p.resize(30, 70)
        finally:
            h.signal(signal.SIGCONT)
        p.write(b"go\r")
        out = p.read_until(b"30 70", 10 * SLOW)
        assert b"30 70" in out, out


def test_an_open_session_keeps_the_sandbox_busy(c):
    # status.activity counts exec sessions: busy with source "exec" while
    # one runs, and that reason gone once it has ended.
    pid = start(c, {"argv": ["sleep", "30"]})
    act = c.result("status")["activity"]
    assert act["exec_sessions"] == 1, act
    assert act["busy"] and any(r["source"] == "exec" for r in act["reasons"]), act
    c.result("exec.signal", {"id": pid, "signal": "SIGKILL"})
    c.result("exec.wait", {"id": pid, "timeout_ms": 10000})
    act = c.result("status")["activity"]
    assert act["exec_sessions"] == 0, act
    assert not any(r["source"] == "exec" for r in act["reasons"]), act


def test_the_exit_is_sent_before_the_sandbox_turns_idle(c):
    # The last session's end makes the sandbox idle (an activity sample
    # and an event); the host hears about the exit first.
    c.result("events.subscribe", {})
    pid = start(c, {"argv": ["true"]})
    order = []
    while "idle" not in order:
        m = c.read_line()
        p = m.get("params") or {}
        if m.get("method") == "exec.exit" and p.get("id") == pid:
            order.append("exit")
        elif m.get("method") == "event" and p.get("type") == "activity" and not p.get("busy"):
            order.append("idle")
    assert order == ["exit", "idle"], order
