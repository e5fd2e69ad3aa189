"""Container mode copies each service line to hearth's stdout/stderr for
the runtime's log (init/proc/outcopy.c), and a runtime that stops reading
never blocks hearth: lines are dropped and counted instead."""
import fcntl
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

from conftest import HEARTH, Client, _need_root


def _wait(fn, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_unread_stdout_drops_lines_and_never_blocks_hearth(tmp_path):
    _need_root()
    sockdir = tempfile.mkdtemp(prefix="hearth-")
    sock = os.path.join(sockdir, "control.sock")
    cfg = {"control": {"listen": [f"unix:{sock}"]},
           "services": [{"name": "flood", "argv": ["sh", "-c", "echo first-line; exec yes flood-line"]}]}
    (tmp_path / "hearth.json").write_text(json.dumps(cfg))
    err = open(tmp_path / "stderr.log", "wb")
    # hearth's stdout is a pipe this test leaves unread until it is full.
    proc = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount", "--net", "--uts", "--ipc", "--mount-proc",
         HEARTH, "-c", str(tmp_path / "hearth.json"), "--mode", "container"],
        stdout=subprocess.PIPE, stderr=err)
    try:
        _wait(lambda: os.path.exists(sock), 10, "the control socket")
        c = Client(sock)
        # The pipe fills (64 KiB) within moments of `yes`; hearth goes on.
        _wait(lambda: c.result("status")["services"][0].get("output_lines", 0) > 100000, 30,
              "the flood captured well past what the pipe holds")
        t0 = time.monotonic()
        assert c.result("ping") is not None
        assert time.monotonic() - t0 < 5, "ping waited on the full pipe"
        # Now read: the first line came through, and once there is room
        # again a note counts what was dropped meanwhile.
        fl = fcntl.fcntl(proc.stdout, fcntl.F_GETFL)
        fcntl.fcntl(proc.stdout, fcntl.F_SETFL, fl | os.O_NONBLOCK)
        seen = b""

        def read_some():
            nonlocal seen
            try:
                while True:
                    d = os.read(proc.stdout.fileno(), 1 << 20)
                    if not d:
                        break
                    seen += d
                    if len(seen) > (8 << 20):
                        seen = seen[:1 << 20] + seen[-(1 << 20):]
            except BlockingIOError:
                pass
            return b"service output lines dropped (log pipe full)" in seen

        _wait(read_some, 30, "the dropped-lines note")
        assert seen.startswith(b"flood: first-line\n"), seen[:80]
        assert b"flood: flood-line\n" in seen
        c.close()
    finally:
        # SIGTERM to hearth itself (the child of unshare), not to unshare.
        try:
            with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as f:
                kids = f.read().split()
            if kids:
                os.kill(int(kids[0]), signal.SIGTERM)
        except OSError:
            pass
        try:
            # Keep reading so a full pipe cannot hold up the stop.
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
        err.close()
        shutil.rmtree(sockdir, ignore_errors=True)
    # Container mode: hearth exits with the main (only) service's status.
    assert proc.returncode == 143


def test_copied_lines_are_escaped_for_the_runtimes_log(tmp_path):
    """The runtime's log is read on an operator's terminal: a service's OSC,
    CSI, C1 (raw 0x9b and U+009B) and broken UTF-8 reach it escaped, the
    tab kept; logs.read still returns the line as the service wrote it."""
    _need_root()
    sockdir = tempfile.mkdtemp(prefix="hearth-")
    sock = os.path.join(sockdir, "control.sock")
    script = r"printf 'a\033]0;t\007 \033[2J \233 \302\233 \377\tb\n'; exec sleep 100000"
    cfg = {"control": {"listen": [f"unix:{sock}"]},
           "services": [{"name": "evil", "argv": ["sh", "-c", script]}]}
    (tmp_path / "hearth.json").write_text(json.dumps(cfg))
    proc = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount", "--net", "--uts", "--ipc", "--mount-proc",
         HEARTH, "-c", str(tmp_path / "hearth.json"), "--mode", "container"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    seen = b""
    try:
        _wait(lambda: os.path.exists(sock), 10, "the control socket")
        fl = fcntl.fcntl(proc.stdout, fcntl.F_GETFL)
        fcntl.fcntl(proc.stdout, fcntl.F_SETFL, fl | os.O_NONBLOCK)

        def line_seen():
            nonlocal seen
            try:
                seen += os.read(proc.stdout.fileno(), 1 << 16)
            except BlockingIOError:
                pass
            return b"\n" in seen

        _wait(line_seen, 10, "the copied line")
        assert seen == b"evil: a\\x1b]0;t\\x07 \\x1b[2J \\x9b \\u009b \\xff\tb\n", seen
        c = Client(sock)
        lines = c.result("logs.read", {"name": "evil"})["lines"]
        assert lines[0]["line"] == "a\x1b]0;t\x07 \x1b[2J \ufffd \u009b \ufffd\tb"
        c.close()
    finally:
        try:
            with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as f:
                kids = f.read().split()
            if kids:
                os.kill(int(kids[0]), signal.SIGTERM)
        except OSError:
            pass
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
        shutil.rmtree(sockdir, ignore_errors=True)
