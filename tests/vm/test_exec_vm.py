"""exec inside the image: `hearthctl exec -t` over the virtio-serial
control channel through a real pty, and a process's output kept across
a host that goes away, sandbox.freeze, a QMP stop/cont and
sandbox.resume."""
import base64
import os
import signal
import subprocess
import time

from conftest import HEARTHCTL, ROOT
from ptyrun import PtyCommand

HERE = os.path.dirname(os.path.abspath(__file__))
PROBE_SRC = os.path.join(HERE, "exec_probe.c")
PROBE = os.path.join(ROOT, "build", "vmtest", "exec_probe")
PROBE_IN_IMAGE = "/usr/libexec/hearth-test/exec_probe"


def probe_files():
    """The probe, built static, for make_vm(files=...): the image has no
    shell."""
    if not os.path.exists(PROBE) or os.path.getmtime(PROBE) < os.path.getmtime(PROBE_SRC):
        os.makedirs(os.path.dirname(PROBE), exist_ok=True)
        subprocess.run(["musl-gcc", "-static", "-Os", "-s", "-std=gnu11", "-Wall", "-Wextra",
                        "-Werror", "-D_GNU_SOURCE", "-o", PROBE, PROBE_SRC], check=True)
    with open(PROBE, "rb") as f:
        return {PROBE_IN_IMAGE: (f.read(), 0o755)}


def test_hearthctl_exec_tty_over_virtio_serial(make_vm):
    vm = make_vm(files=probe_files()).start()
    vm.require("exec.start", "exec.resize")
    # One stream on the serial port: the test's connection steps aside.
    vm.disconnect()
    with PtyCommand([HEARTHCTL, "--connect", f"unix:{vm.ctl_path}", "exec", "-it", "--",
                     PROBE_IN_IMAGE, "tty", "5"], rows=40, cols=90) as p:
        out = p.read_until(b"40 90", 60)
        assert b"/dev/pts/" in out and b"40 90" in out, out
        p.resize(30, 70)
        os.kill(p.pid, signal.SIGWINCH)
        time.sleep(0.5)
        p.write(b"abc\r")
        out = p.read_until(b"30 70", 30)
        assert b"got:abc" in out and b"30 70" in out, out
        status = p.wait()
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 5, status
    # The same without a tty: stdout and stderr apart, the status passed on.
    r = subprocess.run([HEARTHCTL, "--connect", f"unix:{vm.ctl_path}", "exec", "--",
                        PROBE_IN_IMAGE, "streams"], capture_output=True, timeout=60)
    assert (r.returncode, r.stdout, r.stderr) == (3, b"out\n", b"err\n"), r
    vm.connect()


def outputs(events, pid):
    """The exec.output notifications of process pid the control kept."""
    return [e for e in events if e.get("id") == pid and "offset" in e and "data" in e]


def test_exec_output_kept_across_freeze_pause_and_resume(make_vm):
    vm = make_vm(files=probe_files()).start()
    vm.require("exec.start", "exec.attach", "sandbox.freeze")
    n = 60
    pid = vm.result("exec.start", {"argv": [PROBE_IN_IMAGE, "lines", str(n), "50"]})["id"]
    vm.wait_for(lambda: len(outputs(vm.ctl.events, pid)) >= 3 or vm.result("ping") is None,
                what="first lines")
    got = b""
    for e in outputs(vm.ctl.events, pid):
        assert e["offset"] == len(got)
        got += base64.b64decode(e["data"])
    # The host goes away mid-stream, freezes the sandbox and pauses the VM.
    vm.disconnect()
    vm.connect()
    r = vm.result("sandbox.freeze", {"timeout_ms": 5000})
    assert r["frozen"] is True, r
    time.sleep(0.5)
    end = {p["id"]: p for p in vm.result("exec.list")["processes"]}[pid]["streams"]["stdout"]["end"]
    time.sleep(0.5)
    # Frozen with the services: no more output meanwhile.
    assert {p["id"]: p for p in vm.result("exec.list")["processes"]}[pid]["streams"]["stdout"][
        "end"] == end
    vm.qmp.cmd("stop")
    time.sleep(1)
    vm.qmp.cmd("cont")
    r = vm.result("sandbox.resume", {})
    assert r["state"] == "running", r
    # A new connection picks up where the old one stopped. (Over the one
    # serial stream hearth may not have seen the host go: what it sent
    # before the attach reply belongs to the old position and is left.)
    a = vm.result("exec.attach", {"id": pid, "offset": len(got)})
    vm.ctl.events.clear()
    assert a["streams"]["stdout"]["lost"] == 0 and a["dropped"] == 0, a
    w = vm.result("exec.wait", {"id": pid, "timeout_ms": 60000})
    assert w["exited"] is True and w["exit_code"] == 0, w
    for e in outputs(vm.ctl.events, pid):
        assert e["offset"] == len(got), (e["offset"], len(got))
        got += base64.b64decode(e["data"])
    assert got == b"".join(f"line{i}\n".encode() for i in range(n))
    ex = [e for e in vm.ctl.events if e.get("id") == pid and "exited" in e]
    assert ex and ex[0]["exit_code"] == 0, vm.ctl.events[-3:]
