"""Resource limits on the real kernel (the guest's cgroup2 has every
controller): each limit a service's config sets is enforced in the
service's own leaf, as the service reads back from the leaf itself
(tests/vm/attack.c), while the guest has room to spare. A build of hearth
with the limit writes left out (build/hearth-mutant-nolimits) must fail
these same checks, or they would prove nothing.

One boot runs the limit services, a vsock client that control.allowed_cids
refuses and, last, a reboot; a second boot runs the same config on the
mutant."""
import json
import os
import shutil
import subprocess
import tempfile
import time

import pytest

from conftest import ROOT, VM, attack_results, config_files

ATTACK = "/usr/libexec/hearth-test/attack"
MUTANT = os.path.join(ROOT, "build", "hearth-mutant-nolimits")
MIB = 1 << 20
# No shares in these VMs: the attack modes start at once.
NOW = {"ATTACK_NOW": "1"}
# In hearth's /run, which services see read-only: the host makes it.
FILL_GO = "/run/fill-go"
LIMITS = {
    "log": {"level": "info"},
    "control": {"listen": ["serial:org.hearth.ctl", "vsock:1025"], "allowed_cids": [2]},
    "modules": ["virtio_pci", "virtio_console", "vsock_loopback"],
    # No clock check (test_boot_options.py has it every second).
    "clock": {"check_ms": 0},
    "services": [
        # pids_max 8: the service's reaper, the service and 6 children.
        {"name": "forks", "argv": [ATTACK, "forks"], "env": NOW, "user": "root",
         "restart": "never", "limits": {"pids_max": 8}},
        # memory_max 32 MiB against a hog asking for 96 MiB.
        {"name": "hog", "argv": [ATTACK, "hog", "96"], "env": NOW, "user": "root",
         "restart": "never", "limits": {"memory_max": 32 * MIB}},
        # memory_high 16 MiB and no memory_max: 18 MiB get through,
        # throttled, without a kill.
        {"name": "throttle", "argv": [ATTACK, "throttle", "18"], "env": NOW, "user": "root",
         "restart": "never", "limits": {"memory_high": 16 * MIB}},
        # Fills its private /tmp and /dev/shm, then memory, once told to:
        # every limit is hearth's default (test_a_fill_leaves_the_guest_alive).
        {"name": "fill", "argv": [ATTACK, "fill"], "env": {"ATTACK_GO": FILL_GO},
         "user": "root", "restart": "never"},
        # A guest-side vsock client: its CID is 1 (the loopback transport).
        {"name": "probe", "argv": [ATTACK, "vsock", "1", "1025"], "env": NOW, "user": "root",
         "restart": "never"},
    ],
}
LIMIT_SERVICES = ("forks", "hog", "throttle")


def boot(root, hearth=None):
    files = config_files({"limits": LIMITS})
    if hearth:
        with open(hearth, "rb") as f:
            files["/sbin/hearth"] = (f.read(), 0o755)
    vm = VM(os.path.join(root, "state"),
            ["--no-shares", "--append", "hearth.config=/etc/hearth/limits.json"], files=files)
    vm.start()
    return vm


def ended(vm, name):
    s = vm.service(name)
    return "done" in attack_results(vm, name) or (s["state"] != "running" and s["last_exit"])


def limit_failures(vm):
    """{limit: what was seen} for each limit of LIMITS its leaf did not
    enforce; empty when every one held."""
    for n in LIMIT_SERVICES:
        vm.wait_for(lambda: ended(vm, n), timeout=180, what=f"{n} ended")
    r = {n: attack_results(vm, n) for n in LIMIT_SERVICES}
    failed = {}

    rf = r["forks"]
    leaf = vm.service("forks")["cgroup"]
    if not (rf.get("leaf") == leaf == "/sys/fs/cgroup/hearth/services/forks" and
            rf.get("pids_max") == "8" and rf.get("forked") == "6" and
            rf.get("fork_error") == "EAGAIN" and rf.get("pids_current") == "8" and
            rf.get("pids_events") == "max 1"):
        failed["pids_max"] = rf

    # The guest had more than the hog asked for: only the leaf's own
    # memory.max can have stopped it, below 32 MiB, with its OOM killer.
    rh, hog = r["hog"], vm.service("hog")
    if not (int(rh.get("mem_available_mib", "0")) > 96 and rh["touched"] and
            16 <= rh["touched"][-1] < 32 and "done" not in rh and
            hog["last_exit"] == {"signal": "SIGKILL", "reason": "oom-killed"} and
            hog.get("oom_kills") == 1):
        failed["memory_max"] = (rh, hog)

    # Over memory.high the kernel reclaims and throttles (the leaf's
    # "high" counter moves) and kills nobody.
    rt, thr = r["throttle"], vm.service("throttle")
    if not (rt.get("memory_high") == str(16 * MIB) and rt["touched"][-1:] == [18] and
            rt.get("done") == "ok" and int(rt.get("events_high", "0")) > 0 and
            rt.get("events_oom_kill") == "0" and rt.get("events_oom") == "0" and
            thr["state"] == "running" and thr.get("oom_kills") == 0):
        failed["memory_high"] = (rt, thr)
    return failed


@pytest.fixture(scope="module")
def limits_vm(image):
    root = tempfile.mkdtemp(prefix="hearth-vm-limits-")
    vm = boot(root)
    try:
        yield vm
    finally:
        vm.kill()
        shutil.rmtree(root, ignore_errors=True)


def test_limits_hold_in_the_leaf(limits_vm):
    vm = limits_vm
    assert {s["name"]: s["limits"] for s in vm.result("config.get")["services"]
            if "limits" in s} == {s["name"]: s["limits"] for s in LIMITS["services"]
                                  if "limits" in s}
    assert limit_failures(vm) == {}
    # hearth and the other services are untouched by the kills.
    st = vm.result("status")
    assert st["pid"] == 1 and st["phase"] == "running"
    assert vm.service("throttle")["restarts"] == 0


def test_a_fill_leaves_the_guest_alive(limits_vm):
    """A root service with no limits of its own fills its /tmp, its
    /dev/shm and then memory: each tmpfs stops at its default size, the
    services' cgroup (the guest's memory less the reserve) stops the
    rest with an OOM kill of the filler alone, and hearth answers
    throughout. Without the reserve and the caps the same fill ended in
    "Kernel panic - not syncing: System is deadlocked on memory"."""
    vm = limits_vm
    lim = vm.result("status")["limits"]
    total = lim["memory_total"]
    assert 0 < lim["memory_reserve"] <= 64 * MIB and lim["memory_reserve"] <= total // 4, lim
    assert lim["services_memory_max"] == total - lim["memory_reserve"], lim
    assert lim["tmp_bytes"] == lim["shm_bytes"] == total // 4 and lim["pids_max"] == 2048, lim
    vm.result("files.write", {"path": FILL_GO, "data": ""})
    worst, pings = 0.0, 0
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        t = time.monotonic()
        assert vm.result("ping") is not None
        worst = max(worst, time.monotonic() - t)
        pings += 1
        s = vm.service("fill")
        if s["state"] != "running" and s["last_exit"]:
            break
        time.sleep(0.2)
    r, s = attack_results(vm, "fill"), vm.service("fill")
    page = 4096
    cap = -(-(total // 4) // page) * page
    assert r.get("tmp_size") == str(cap), r
    # Each tmpfs took what its cap allows and said ENOSPC.
    assert r.get("tmp_fill") == "ENOSPC" and r.get("shm_fill") == "ENOSPC", r
    assert cap // MIB - 1 <= int(r["tmp_fill_mib"]) <= cap // MIB, r
    assert cap // MIB - 1 <= int(r["shm_fill_mib"]) <= cap // MIB, r
    # Then the services' memory.max: the filler alone is killed.
    assert s["last_exit"] == {"signal": "SIGKILL", "reason": "oom-killed"} and \
        s.get("oom_kills", 0) >= 1, s
    assert r["pids_max"] == "2048" and r["services_memory_max"] == str(lim["services_memory_max"]), r
    # hearth answered every ping meanwhile (a liveness bound for a loaded
    # TCG guest, not a speed figure), and nothing else changed.
    assert pings > 3 and worst < 3.0, (pings, worst)
    st = vm.result("status")
    assert st["pid"] == 1 and st["phase"] == "running"
    assert vm.service("throttle")["state"] == "running" and vm.service("throttle")["restarts"] == 0


def test_vsock_peer_outside_allowed_cids_is_refused(limits_vm):
    vm = limits_vm
    assert 1 not in LIMITS["control"]["allowed_cids"]
    listeners = {c["listen"]: c for c in vm.result("status")["control"]}
    assert listeners["vsock:1025"]["state"] == "open", listeners
    vm.wait_for(lambda: "vsock_reply" in attack_results(vm, "probe"), what="probe answered")
    r = attack_results(vm, "probe")
    # The kernel accepted the connection; hearth refused the peer.
    assert r["vsock_connect"] == "ok", r
    assert '"message":"peer refused"' in r["vsock_reply"], r


def test_clock_check_off(limits_vm):
    assert LIMITS["clock"]["check_ms"] == 0
    sb = limits_vm.result("status")["sandbox"]
    # The hardware-clock check is not running; the other detectors are.
    assert sb["clock"]["set"] is True and set(sb["detectors"]) == {"clock_step", "vmgenid"}, sb


def test_reboot(limits_vm):
    vm = limits_vm
    vm.result("events.subscribe", {})
    assert vm.result("system.shutdown", {"action": "reboot"}) == \
        {"shutting_down": True, "action": "reboot"}
    # Services stop, then the guest restarts, which QEMU (-no-reboot)
    # turns into its own clean exit; the events until then are read.
    events = []
    try:
        while True:
            events.append(json.loads(vm.ctl.ls.line()).get("params", {}))
    except (OSError, EOFError):
        pass
    assert vm.wait_exit(60) == 0
    console = vm.console_text()
    assert "reboot: Restarting system" in console and "Power down" not in console, console
    shutdown = [e for e in vm.ctl.events + events if e.get("type") == "shutdown"]
    assert shutdown and shutdown[0]["action"] == "reboot", vm.ctl.events + events


def test_limit_checks_fail_against_a_build_without_limit_writes(image, tmp_path):
    """The mutation check: the same checks, the same config, on a hearth
    compiled with HEARTH_MUTANT_NO_LIMITS (cgroup.c skips every limit
    write). Each limit's check must fail on its own."""
    subprocess.run(["make", "-s", "-C", ROOT, "build/hearth-mutant-nolimits"], check=True,
                   stdout=subprocess.DEVNULL)
    vm = boot(str(tmp_path), hearth=MUTANT)
    try:
        assert vm.result("status")["pid"] == 1
        failed = limit_failures(vm)
        assert set(failed) == {"pids_max", "memory_max", "memory_high"}, failed
        # Failed because nothing was limited, not because nothing ran.
        assert attack_results(vm, "forks")["pids_max"] == "max"
        assert attack_results(vm, "throttle")["memory_high"] == "max"
    finally:
        vm.kill()
