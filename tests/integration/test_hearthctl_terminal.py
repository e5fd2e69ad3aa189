"""The operator's terminal against a compromised guest: a fake guest, a
unix socket server the test made that speaks hearth's newline JSON-RPC,
puts OSC (ESC ] ... BEL), CSI (ESC [ ...), a raw 0x9b byte, U+009B (CSI
as UTF-8), other C1 controls and broken UTF-8 into every string field of
its replies and notifications. hearthctl's human output (exec's error,
logs and their follow, status, services, events, top, mounts, skills,
egress, version, a server error and its data) and its --json output must
show all of it escaped: no ESC, BEL, 0x9b or C2 9B byte reaches stdout or
stderr. exec's own stdout stays byte-exact (the bytes the operator asked
for)."""
import base64
import json
import os
import socket
import subprocess
import threading

from conftest import HEARTHCTL

# Placeholders for the bytes json.dumps cannot write: each is replaced in
# the encoded reply, so the guest's JSON carries them raw.
RAW = {"@9B@": b"\x9b", "@BAD@": b"\xff\xc0\xaf\xed\xa0\x80", "@C1@": b"\xc2\x9b"}
EVIL = ("\x1b]0;owned\x07 \x1b[2J\x1b[31m @9B@31m @C1@1m \u009b7m \u009d0;t\u009c "
        "\u0085 @BAD@ \x7f end")

# What must never reach the terminal; and what shows the text was escaped.
FORBIDDEN = [b"\x1b", b"\x07", b"\x9b", b"\x9d", b"\x9c", b"\x85", b"\xff", b"\xc0", b"\x7f"]
ESCAPED = [b"\\x1b]0;owned\\x07", b"\\x1b[2J", b"\\x9b31m", b"\\u009b1m", b"\\u009b7m",
           b"\\u009d0;t\\u009c", b"\\u0085", b"\\xff\\xc0\\xaf\\xed\\xa0\\x80", b"\\x7f end"]


def encode(msg):
    text = json.dumps(msg).encode()
    for k, v in RAW.items():
        text = text.replace(k.encode(), v)
    return text + b"\n"


def evil_service():
    return {"name": EVIL, "state": EVIL, "pid": 7, "restarts": 1, "since_ms": 5,
            "last_exit": {"signal": EVIL}, "health": {"status": EVIL},
            "privileged": True, "privileged_reasons": [EVIL]}


RESULTS = {
    "status": {"version": EVIL, "hostname": EVIL, "mode": EVIL, "phase": EVIL,
               "uptime_ms": 1000, "clients": 1, "sandbox": {"state": EVIL},
               "last_resume": {"cause": EVIL, "total_ms": 1.5, "ok": False},
               "mounts": {"failed": 1, "error": EVIL},
               "services": [evil_service()]},
    "services.list": {"services": [evil_service()]},
    "logs.read": {"lines": [{"wall": EVIL, "stream": EVIL, "line": EVIL + "\tTAB"},
                            {"t_ms": 12, "stream": "stdout", "line": EVIL}]},
    "events.subscribe": {},
    "metrics": {"services": [{"name": EVIL, "cpu_usec": 1, "memory_bytes": 1}],
                "mounts": [{"target": EVIL, "type": EVIL, "used_percent": 1}]},
    "mounts.list": {"mounts": [{"target": EVIL, "type": EVIL, "source": EVIL, "state": EVIL,
                                "read_only": True, "error": EVIL}]},
    "skills.list": {"public_dir": EVIL, "private_dir": EVIL, "public": [EVIL], "linked": [EVIL],
                    "shadowed": [], "private": [], "ignored": [],
                    "last": {"runs": 1, "trigger": EVIL, "error": EVIL}},
    "egress.get": {"policy": {"allowOut": [EVIL], "denyOut": [], "allowPublicTraffic": False},
                   "applied": False, "error": EVIL, "alwaysAllowed": [EVIL],
                   "layers": {"inet": True, "owner": True, "watch": True, "netdev": [EVIL]},
                   "counters": {EVIL: {"packets": 1, "bytes": 2}}},
    "version": {"version": EVIL, "protocol": 1, "features": [EVIL]},
}

# Notifications sent after a method's reply, then the connection closes.
NOTES = {
    "logs.read": [{"method": "log", "params": {"name": "svc", "wall": EVIL, "stream": EVIL,
                                               "line": EVIL}}],
    "events.subscribe": [{"method": "event", "params": {"seq": 3, "type": EVIL, EVIL: EVIL,
                                                        "plain": EVIL,
                                                        "obj": {"k": EVIL}}}],
    "exec.start": [],
}

EXEC_OUT = b"\x1b]0;raw\x07 \x9b bytes the command wrote\n"


class Guest:
    """A compromised guest's control socket: every reply is evil."""

    def __init__(self, path, errors=False, exec_ok=False):
        self.errors, self.exec_ok = errors, exec_ok
        self.seen = []
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
            threading.Thread(target=self.one, args=(c,), daemon=True).start()

    def one(self, c):
        try:
            self.talk(c)
        except OSError:
            pass
        finally:
            c.close()

    def talk(self, c):
        for line in c.makefile("rb"):
            req = json.loads(line)
            m = req.get("method")
            self.seen.append(m)
            if "id" not in req:
                continue
            # Notifications before a reply are skipped or queued: one
            # that is not followed must not be printed either.
            c.sendall(encode({"jsonrpc": "2.0", "method": "event", "params": {"type": EVIL}}))
            if self.errors or (m == "exec.start" and not self.exec_ok) or m not in RESULTS \
                    and m != "exec.start":
                c.sendall(encode({"jsonrpc": "2.0", "id": req["id"],
                                  "error": {"code": -32000, "message": EVIL,
                                            "data": {"why": EVIL}}}))
                continue
            if m == "exec.start":
                c.sendall(encode({"jsonrpc": "2.0", "id": req["id"], "result": {"id": 9}}))
                data = base64.b64encode(EXEC_OUT).decode()
                c.sendall(encode({"jsonrpc": "2.0", "method": "exec.output",
                                  "params": {"id": 9, "stream": "stdout", "data": data}}))
                c.sendall(encode({"jsonrpc": "2.0", "method": "exec.exit",
                                  "params": {"id": 9, "exit_code": 3}}))
                continue
            c.sendall(encode({"jsonrpc": "2.0", "id": req["id"], "result": RESULTS[m]}))
            if m in NOTES:
                for n in NOTES[m]:
                    c.sendall(encode({"jsonrpc": "2.0", **n}))
                return  # closed: a follow ends here

    def close(self):
        self.sock.close()


def ctl(*args):
    return subprocess.run([HEARTHCTL, *args], capture_output=True, timeout=60)


def assert_inert(r, want_escaped=True):
    out = r.stdout + r.stderr
    for b in FORBIDDEN:
        assert b not in out, (b, out)
    if want_escaped:
        for e in ESCAPED:
            assert e in out, (e, out)


def test_exec_error_from_the_guest_is_escaped(tmp_path):
    path = str(tmp_path / "g.sock")
    g = Guest(path)
    try:
        r = ctl("--connect", f"unix:{path}", "exec", "--", "true")
        assert r.returncode == 1, r
        assert r.stderr.startswith(b"hearthctl exec: \\x1b]0;owned\\x07 "), r.stderr
        assert_inert(r)
    finally:
        g.close()


def test_exec_output_stays_byte_exact(tmp_path):
    """The command's own stdout is what the operator asked for: passed
    through as it is, not escaped."""
    path = str(tmp_path / "g.sock")
    g = Guest(path, exec_ok=True)
    try:
        r = ctl("--connect", f"unix:{path}", "exec", "--", "cat")
        assert r.returncode == 3, r
        assert r.stdout == EXEC_OUT
    finally:
        g.close()


def test_every_human_printer_escapes_guest_text(tmp_path):
    path = str(tmp_path / "g.sock")
    g = Guest(path)
    try:
        for args in (["status"], ["services"], ["logs", "svc"], ["logs", "svc", "-f"],
                     ["events"], ["mounts"], ["skills"], ["egress"], ["version"]):
            r = ctl("--connect", f"unix:{path}", *args)
            assert r.returncode == 0, (args, r)
            # The services table cuts its cells (64 bytes): the escapes up
            # to the cut show there, every one of them elsewhere.
            assert_inert(r, want_escaped=args != ["services"])
            assert b"\\x1b]0;owned\\x07 \\x1b[2J\\x1b[31m \\x9b31m" in r.stdout, (args, r)
        # A log line's body keeps its tab; nothing else of it is raw.
        r = ctl("--connect", f"unix:{path}", "logs", "svc")
        assert b" end\tTAB\n" in r.stdout
        # The follow printed the notification after the reply: four
        # fields of the reply's two lines, three of the notification.
        r = ctl("--connect", f"unix:{path}", "logs", "svc", "-f")
        assert r.stdout.count(b"\\x1b]0;owned") == 4 + 3, r.stdout
        # The event sent before the reply, then the one after it.
        r = ctl("--connect", f"unix:{path}", "events")
        lines = r.stdout.splitlines()
        assert lines[0].startswith(b"- \\x1b]0;owned\\x07"), r.stdout
        assert lines[1].startswith(b"3 \\x1b]0;owned\\x07"), r.stdout
    finally:
        g.close()


def test_error_replies_and_their_data_are_escaped(tmp_path):
    path = str(tmp_path / "g.sock")
    g = Guest(path, errors=True)
    try:
        for args in (["ping"], ["status"], ["services", "restart", "x"], ["call", "any.thing"]):
            r = ctl("--connect", f"unix:{path}", *args)
            assert r.returncode == 1, (args, r)
            assert b"unable to call" in r.stderr and b"data: " in r.stderr
            assert_inert(r)
    finally:
        g.close()


def test_top_once_escapes_rows_and_errors(tmp_path):
    good, bad = str(tmp_path / "a.sock"), str(tmp_path / "b.sock")
    a, b = Guest(good), Guest(bad, errors=True)
    try:
        r = ctl("--connect", f"unix:{good},unix:{bad}", "top", "--once")
        assert r.returncode == 1, r
        assert_inert(r, want_escaped=False)
        # The cells are cut to their width: the start of the escape shows.
        assert b"\\x1b]0;owned" in r.stdout
        assert b"error: \\x1b]0;owned" in r.stdout
    finally:
        a.close()
        b.close()


def test_json_output_escapes_c1_and_broken_utf8(tmp_path):
    """--json is JSON-escaped, C1 and broken UTF-8 included; what was valid
    parses back to the same text."""
    good, bad = str(tmp_path / "a.sock"), str(tmp_path / "b.sock")
    a, b = Guest(good), Guest(bad, errors=True)
    try:
        for args in (["status"], ["logs", "svc", "-f"], ["events"], ["call", "services.list"]):
            r = ctl("--json", "--connect", f"unix:{good}", *args)
            assert r.returncode == 0, (args, r)
            assert_inert(r, want_escaped=False)
            assert b"\\u009b" in r.stdout and b"\\ufffd" in r.stdout and b"\\u001b" in r.stdout
        r = ctl("--json", "--connect", f"unix:{good}", "status")
        st = json.loads(r.stdout)
        assert st["services"][0]["health"]["status"].startswith("\x1b]0;owned\x07 \x1b[2J")
        assert "\u009b7m \u009d0;t\u009c \u0085" in st["phase"]
        for args in (["top", "--once"], ["status"]):
            r = ctl("--json", "--connect", f"unix:{good},unix:{bad}", *args)
            assert r.returncode == 1, (args, r)
            assert_inert(r, want_escaped=False)
            json.loads(r.stdout)
    finally:
        a.close()
        b.close()


def test_metrics_prometheus_labels_hold_no_controls(tmp_path):
    path = str(tmp_path / "g.sock")
    g = Guest(path)
    try:
        r = ctl("--connect", f"unix:{path}", "metrics", "--prometheus")
        assert r.returncode == 0, r
        assert_inert(r, want_escaped=False)
        assert "\ufffd]0;owned\ufffd" in r.stdout.decode()  # valid UTF-8 throughout
    finally:
        g.close()
