"""hearth as a container's entrypoint beside another init: the shape of a
platform whose own agent is PID 1 of the pid namespace hearth joins
(CubeSandbox, Kata). Here the test makes that namespace itself: its PID 1
is a shell that starts a few dozen processes (so hearth's pid is not one
a service's namespace also has) and then only sleeps and reaps. hearth
joins it from outside with nsenter, in a mount namespace of its own, as a
runtime's entrypoint does: not PID 1, its parent out of sight.

What must hold there: hearth finds container mode by itself, makes its
mounts shared, a default root service can neither see nor signal it, and
when hearth is killed with SIGKILL nothing it started (a service, its
child, an exec session) runs on under the other init."""
import json
import os
import random
import signal
import shutil
import subprocess
import tempfile
import time

import pytest

from conftest import HEARTH, SLOW, Client, _need_root

# The platform's init: pids 2..41 used and reaped, then a loop that reaps
# whatever is handed to it (orphans of a killed hearth land here).
# READY is written once the pids are used, so hearth never starts before.
PLATFORM_INIT = ('i=0; while [ $i -lt 40 ]; do sleep 0 & i=$((i+1)); done; wait; '
                 ': > "$READY"; while :; do sleep 1; done')


def _children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def _wait(pred, timeout, what):
    deadline = time.monotonic() + timeout * SLOW
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _running_with(marker):
    """Host pids of live (not zombie) processes whose command line holds
    marker, wherever they are."""
    found = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{p}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmd and state != "Z":
            found.append(int(p))
    return found


def _ns_pid(host_pid):
    with open(f"/proc/{host_pid}/status") as f:
        for line in f:
            if line.startswith("NSpid:"):
                return int(line.split()[-1])
    raise AssertionError(f"no NSpid for {host_pid}")


class Beside:
    """A test-made pid namespace with a shell as its init, and hearth
    joining it as a runtime's entrypoint would."""

    def __init__(self, tmp_path):
        self.dir = tmp_path
        self.sockdir = tempfile.mkdtemp(prefix="hearth-")
        self.sock = os.path.join(self.sockdir, "control.sock")
        self.log_path = tmp_path / "hearth.log"
        ready = tmp_path / "platform.ready"
        self.platform = subprocess.Popen(
            ["unshare", "--pid", "--fork", "--mount", "--net", "--uts", "--ipc", "--mount-proc",
             "sh", "-c", PLATFORM_INIT], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env={**os.environ, "READY": str(ready)})
        self.init = _wait(lambda: (_children(self.platform.pid) or [None])[0], 5,
                          "the platform's init")
        _wait(ready.exists, 20, "the platform's init to use its first pids")
        self.hearth = None

    def start(self, cfg):
        cfg = {"control": {"listen": ["unix:" + self.sock]}, **cfg}
        path = self.dir / "hearth.json"
        path.write_text(json.dumps(cfg))
        self.log = open(self.log_path, "wb")
        # nsenter forks into the namespace; unshare execs hearth in a mount
        # namespace of its own (propagation as it was: hearth decides).
        self.hearth = subprocess.Popen(
            ["nsenter", "-t", str(self.init), "--pid", "--mount", "--net", "--uts", "--ipc", "--",
             "unshare", "--mount", "--propagation", "unchanged", "--",
             HEARTH, "-c", str(path), "--log", "debug"],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10 * SLOW
        while True:
            assert self.hearth.poll() is None, "hearth exited early:\n" + self.log_text()
            try:
                c = Client(self.sock, timeout=2)
                c.result("ping")
                c.close()
                break
            except (OSError, EOFError):
                assert time.monotonic() < deadline, "hearth not ready:\n" + self.log_text()
                time.sleep(0.05)
        self.pid = _children(self.hearth.pid)[0]
        return self

    def rpc(self, method, params=None):
        c = Client(self.sock)
        try:
            return c.result(method, params)
        finally:
            c.close()

    def log_text(self):
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def close(self):
        if self.hearth and self.hearth.poll() is None:
            try:
                os.kill(self.pid, signal.SIGTERM)
                self.hearth.wait(timeout=20 * SLOW)
            except Exception:
                self.hearth.kill()
                self.hearth.wait()
        # The platform's init ends last; its namespace (and anything in
        # it, should a test have failed) with it.
        try:
            os.kill(self.init, signal.SIGKILL)
        except OSError:
            pass
        self.platform.wait(timeout=10)
        shutil.rmtree(self.sockdir, ignore_errors=True)


@pytest.fixture
def beside(tmp_path):
    _need_root()
    if not shutil.which("nsenter"):
        pytest.skip("nsenter (util-linux) is not installed")
    b = Beside(tmp_path)
    yield b
    b.close()


def test_beside_another_init_hearth_is_out_of_reach_and_takes_everything_with_it(beside, tmp_path):
    marker = f"{random.randrange(10**8, 10**9)}"  # sleep takes one fraction
    out = tmp_path / "agent.out"
    pidfile = tmp_path / "hearth.pid"
    # A default service (root, contained): it waits for hearth's pid,
    # looks for it, tries to kill it, leaves a child behind and sleeps.
    script = (f'while [ ! -s {pidfile} ]; do sleep 0.05; done; hp=$(cat {pidfile}); '
              f'{{ [ -e /proc/$hp ] && echo "seen=yes" || echo "seen=no"; '
              f'cat /proc/[0-9]*/comm | grep -qx hearth && echo comm=hearth || echo comm=none; '
              f'kill -9 $hp 2>&1; echo "kill=$?"; }} > {out}.tmp; mv {out}.tmp {out}; '
              f'sleep 86401.{marker} & exec sleep 86400.{marker}')
    b = beside.start({"services": [{"name": "agent", "argv": ["sh", "-c", script],
                                    "writable": ["/tmp"]}]})
    st = b.rpc("status")
    assert st["mode"] == "container", st
    assert _ns_pid(b.pid) > 40, "hearth's pid would be a service's too"
    assert _ns_pid(b.pid) != 1
    # Its mounts are shared, so later binds reach the services.
    with open(f"/proc/{b.pid}/mountinfo") as f:
        root = [ln for ln in f if ln.split()[4] == "/"]
    assert root and "shared:" in root[-1], root
    session = b.rpc("exec.start", {"argv": ["sleep", f"86402.{marker}"]})
    assert session["pid"] > 1

    pidfile.write_text(str(_ns_pid(b.pid)))
    _wait(out.exists, 10, "the agent's report")
    report = out.read_text()
    assert "seen=no" in report and "comm=none" in report, report
    assert "No such process" in report and "kill=1" in report, report
    assert b.hearth.poll() is None, "the agent killed hearth"

    # Everything runs: the service, its child, the session.
    live = _wait(lambda: len(_running_with(marker)) >= 3 and _running_with(marker), 5,
                 "the service, its child and the session")
    os.kill(b.pid, signal.SIGKILL)
    b.hearth.wait(timeout=10)
    deadline = time.monotonic() + 5 * SLOW
    while _running_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = _running_with(marker)
    assert left == [], f"still running after hearth was killed: {left} (of {live})"
    assert len(live) == 3, [open(f"/proc/{p}/cmdline").read() for p in live]
    # The platform's init is still there: the namespace did not simply end.
    assert os.path.exists(f"/proc/{beside.init}")


def test_beside_another_init_sigterm_is_an_orderly_stop(beside, tmp_path):
    b = beside.start({"services": [
        {"name": "agent", "argv": ["sh", "-c", "trap 'exit 7' TERM; while :; do sleep 0.1; done"],
         "main": True}]})
    _wait(lambda: b.rpc("services.list")["services"][0]["state"] == "running", 10, "running")
    # From inside the shared namespace, by a process of the platform's
    # (no service), which lives on while hearth identifies it.
    subprocess.run(["nsenter", "-t", str(beside.init), "--pid", "--mount", "--", "sh", "-c",
                    'kill -TERM "$0" && sleep 2', str(_ns_pid(b.pid))], check=True)
    assert b.hearth.wait(timeout=20 * SLOW) == 7, b.log_text()
    assert "shutdown" in b.log_text().lower() or "stopping" in b.log_text().lower()
