"""The clock-step watcher end to end in a real guest: a privileged service
steps the guest's wall clock (as a platform's agent puts it right after a
snapshot restore, telling hearth nothing) and hearth, which here may not
set the clock itself (clock.set false), runs the resume steps with cause
clock_step and a new identity. The machine's own clock is never touched:
only the guest's."""
import base64
import os
import subprocess
import time

from conftest import ROOT

HERE = os.path.dirname(os.path.abspath(__file__))
STEPPER_SRC = os.path.join(HERE, "clockstep.c")
STEPPER = os.path.join(ROOT, "build", "vmtest", "clockstep")
STEPPER_IN_IMAGE = "/usr/libexec/hearth-test/clockstep"
# Below the threshold, far beyond it, and twice in a row (one restore seen
# twice, as when the platform corrects the clock in two goes).
SMALL_S, BIG_S, TWICE_S, TWICE_GAP_MS = 3, 3600, 600, 200
THRESHOLD_MS = 5000

CONFIG = {
    "log": {"level": "info"},
    "control": {"listen": ["serial:org.hearth.ctl"]},
    # nf_tables and its parts: the egress step checks hearth's table
    # (local ports are kept from services by default).
    "modules": ["crc32c_generic", "virtio_pci", "virtio_console", "nf_tables", "nft_ct",
                "nft_reject_inet", "nft_socket", "nft_fib_inet"],
    "clock": {"set": False, "detect_step_ms": THRESHOLD_MS},
    "services": [{
        "name": "stepper", "user": "root", "restart": "never",
        "argv": [STEPPER_IN_IMAGE, str(SMALL_S), str(BIG_S), str(TWICE_S), str(TWICE_GAP_MS)],
        # The default filter refuses clock_settime; CAP_SYS_TIME is in no
        # default set.
        "caps_keep": ["SYS_TIME"], "seccomp": "off",
    }],
}


def stepper_files():
    """The stepper, built static, for make_vm(files=...)."""
    if not os.path.exists(STEPPER) or os.path.getmtime(STEPPER) < os.path.getmtime(STEPPER_SRC):
        os.makedirs(os.path.dirname(STEPPER), exist_ok=True)
        subprocess.run(["musl-gcc", "-static", "-Os", "-s", "-std=gnu11", "-Wall", "-Wextra",
                        "-Werror", "-D_GNU_SOURCE", "-o", STEPPER, STEPPER_SRC], check=True)
    with open(STEPPER, "rb") as f:
        return {STEPPER_IN_IMAGE: (f.read(), 0o755)}


def stepper_lines(vm):
    return [l["line"] for l in vm.result("logs.read", {"name": "stepper", "lines": 100})["lines"]]


def step(vm, sig, expect):
    """Signals the stepper and waits for its report of the step(s)."""
    n = stepper_lines(vm).count(expect)
    vm.result("services.signal", {"name": "stepper", "signal": sig})
    vm.wait_for(lambda: stepper_lines(vm).count(expect) >= n + (2 if sig == "SIGHUP" else 1),
                what=f"stepper: {expect}")


def identity(vm):
    return vm.result("status")["identity"]


def resumes(vm):
    return [e for e in vm.ctl.events if e.get("type") == "resume"]


def test_a_clock_step_from_outside_is_a_resume_with_a_new_identity(make_vm):
    vm = make_vm(shares=False, agent=False, configs={"identity": CONFIG},
                 files=stepper_files(), extra=["--config", "identity"]).start()
    st = vm.result("status")
    assert st["mode"] == "vm" and st["sandbox"]["clock"]["set"] is False, st["sandbox"]
    assert st["sandbox"]["clock"]["detect_step_ms"] == THRESHOLD_MS
    # The watcher runs though hearth may not set the clock; the hardware
    # clock comparison does not.
    assert "clock_step" in st["sandbox"]["detectors"], st["sandbox"]
    assert "hw_clock" not in st["sandbox"]["detectors"], st["sandbox"]
    id0 = st["identity"]
    assert len(id0["instance_id"]) == 32 and id0["generation"] == 0 and id0["cause"] == "boot"
    assert id0["crng"] == {"action": "none"}, id0
    # This small guest has no hardware RNG and few interrupts: its
    # generator may not be seeded seconds after boot (RNDRESEEDCRNG would
    # say ENODATA). The host's bytes seed it, as sandbox.init's would.
    vm.result("entropy.add", {"data": base64.b64encode(os.urandom(64)).decode()})
    vm.wait_for(lambda: "ready" in stepper_lines(vm), what="stepper ready")
    vm.result("events.subscribe", {})

    # A step within the threshold (an NTP correction) is no resume.
    step(vm, "SIGUSR1", f"stepped +{SMALL_S}")
    time.sleep(1.5)
    vm.result("ping")
    assert vm.result("status")["last_resume"] is None
    assert identity(vm)["instance_id"] == id0["instance_id"]

    # An hour forward: what a restore of an hour-old snapshot looks like
    # once the platform puts the clock right.
    step(vm, "SIGUSR2", f"stepped +{BIG_S}")
    lr = vm.wait_for(lambda: vm.result("status")["last_resume"], timeout=20,
                     what="resume noticed by the clock-step watcher")
    assert lr["cause"] == "clock_step", lr
    assert lr["ok"] is True, [s for s in lr["steps"] if s["result"] == "failed"]
    steps = {s["name"]: s for s in lr["steps"]}
    # hearth may not set the clock: the time step only reports how far
    # the system clock is from the hardware clock (an hour ahead of it).
    clock = steps["time"]["clock"]
    assert clock["action"] == "not_allowed" and clock["offset_ms"] < -(BIG_S - 60) * 1000, lr
    ident = steps["identity"]
    assert ident["result"] == "ok" and ident["generation"] == 1, ident
    # PID 1 of a VM holds CAP_SYS_ADMIN, and by now the kernel's
    # generator is seeded: it is reseeded.
    assert ident["instance_id"] != id0["instance_id"] and ident["crng"] == {"action": "reseeded"}
    assert "clocks_only" not in identity(vm)
    after = identity(vm)
    assert after["instance_id"] == ident["instance_id"] and after["cause"] == "clock_step"
    # The services' news says the clock moved.
    assert lr["resume_file"]["clock_stepped"] is True and lr["resume_file"]["generation"] == 1, lr
    vm.result("ping")
    idev = [e for e in vm.ctl.events if e.get("type") == "identity"]
    assert idev and idev[-1]["instance_id"] == after["instance_id"], vm.ctl.events

    # Two large steps 200 ms apart: one restore, one resume. (Past the
    # window of the one before: the monotonic clock counts it.)
    time.sleep(2)
    n = len(resumes(vm))
    step(vm, "SIGHUP", f"stepped +{TWICE_S}")
    time.sleep(2)
    vm.result("ping")
    got = resumes(vm)[n:]
    assert [e["cause"] for e in got] == ["clock_step"], got
    assert identity(vm)["generation"] == 2
