"""What the kernel command line, the config's machine keys and the
sandbox flows do in a real guest, with hearth as PID 1.

One boot (module fixture `cover`) is given the kernel command line APPEND
and the config COVER, installed beside the image's own: it serves the
command-line keys, `modules`, `control.allowed_cids` (a guest-side vsock
client, CID 1), `sandbox.freeze`, `clock.check_ms` (a pause nobody
announces) and, last, a snapshot restore with a VM generation ID device.
A second boot gets a config hearth must refuse: the vm-mode fallback."""
import json
import os
import shutil
import tempfile
import time

import pytest

from conftest import ROOT, VM, attack_results, config_files

ATTACK = "/usr/libexec/hearth-test/attack"
NOW = {"ATTACK_NOW": "1"}
COVER = {
    "hostname": "from-config",
    "log": {"level": "info"},
    "control": {"listen": ["serial:org.hearth.ctl", "vsock:1025"], "allowed_cids": [1]},
    # no_such_module is in no kernel: it fails, the others load.
    "modules": ["virtio_pci", "virtio_console", "vsock_loopback", "no_such_module"],
    "clock": {"check_ms": 1000},
    "services": [
        {"name": "probe", "argv": [ATTACK, "vsock", "1", "1025"], "env": NOW, "user": "root",
         "restart": "never"},
        {"name": "ticker", "argv": [ATTACK, "tick"], "env": NOW, "user": "root"},
    ],
}
# printk.devkmsg=on: /dev/kmsg would otherwise drop all but 10 of hearth's
# lines per 5 s; ignore_loglevel: every kernel log line reaches the console.
KMSG = "printk.devkmsg=on ignore_loglevel"
APPEND = ("hearth.config=/etc/hearth/cover.json hearth.hostname=cmdline-host "
          "hearth.log=debug " + KMSG)
COVER_ARGS = ["--no-shares", "--vmgenid", "--append", APPEND]
# A debug line of hearth's own that every boot with a serial listener logs.
DEBUG_LINE = "hearth: control serial:org.hearth.ctl open"
INFO_LINE = "hearth: hearth "  # "hearth VERSION starting in vm mode"


def cover_vm(state):
    return VM(state, COVER_ARGS, files=config_files({"cover": COVER}))


@pytest.fixture(scope="module")
def cover(image):
    root = tempfile.mkdtemp(prefix="hearth-vm-cover-")
    vm = cover_vm(os.path.join(root, "state"))
    vms = [vm]
    try:
        vm.start()
        yield {"vm": vm, "root": root, "vms": vms}
    finally:
        for v in vms:
            v.kill()
        shutil.rmtree(root, ignore_errors=True)


def test_command_line_keys(cover):
    vm = cover["vm"]
    st = vm.result("status")
    # hearth.config= chose the file, hearth.hostname= overrode its hostname.
    assert "hearth.config=/etc/hearth/cover.json" in APPEND
    assert st["config"] == "/etc/hearth/cover.json" and "config_error" not in st, st
    assert [s["name"] for s in vm.result("config.get")["services"]] == \
        [s["name"] for s in COVER["services"]]
    assert COVER["hostname"] == "from-config" and "hearth.hostname=cmdline-host" in APPEND
    assert st["hostname"] == "cmdline-host"
    # hearth.log=debug overrode the file's "info": debug lines reach the
    # kernel log (the console). The fallback boot below, at
    # hearth.log=info, has the same line at info level only.
    assert COVER["log"]["level"] == "info" and "hearth.log=debug" in APPEND
    console = vm.console_text()
    assert DEBUG_LINE in console and "hearth: hostname cmdline-host" in console, console


def test_modules_loaded_and_failed(cover):
    vm = cover["vm"]
    mods = {m["name"]: m for m in vm.result("status")["modules"]}
    assert set(mods) >= set(COVER["modules"]), mods
    for name in ("virtio_pci", "virtio_console", "vsock_loopback"):
        assert mods[name]["state"] == "loaded", mods[name]
    bad = mods["no_such_module"]
    assert bad["state"] == "failed" and bad["error"].startswith("not found in /lib/modules/"), bad


def test_vsock_peer_in_allowed_cids_is_answered(cover):
    vm = cover["vm"]
    assert COVER["control"]["allowed_cids"] == [1]
    vm.wait_for(lambda: "vsock_reply" in attack_results(vm, "probe"), what="probe answered")
    r = attack_results(vm, "probe")
    assert r["vsock_connect"] == "ok", r
    assert json.loads(r["vsock_reply"]) == {"jsonrpc": "2.0", "id": 1, "result": {}}, r


def ticks(vm):
    return vm.service("ticker")["output_lines"]


def test_freeze_and_resume(cover):
    vm = cover["vm"]
    vm.wait_for(lambda: ticks(vm) > 3, what="ticker ticking")
    r = vm.result("sandbox.freeze", {"timeout_ms": 5000})
    assert r["frozen"] is True, r
    steps = {s["name"]: s["result"] for s in r["steps"]}
    assert steps == {"sync": "ok", "freeze": "ok", "suspend": "ok"}, r
    st = vm.result("status")
    assert st["frozen"] is True and st["sandbox"]["state"] == "frozen", st["sandbox"]
    # Lines already in the pipe may still arrive; then nothing does.
    time.sleep(0.5)
    n = ticks(vm)
    time.sleep(1.0)
    assert ticks(vm) == n
    # A frozen service keeps its process and answers nothing but status.
    assert vm.service("ticker")["state"] == "running"
    again = vm.result("sandbox.freeze", {})
    assert again["frozen"] is True and again["steps"][0]["detail"] == "already frozen", again

    r = vm.result("sandbox.resume", {})
    steps = {s["name"]: s for s in r["steps"]}
    assert r["state"] == "running" and steps["thaw"]["result"] == "ok", r
    assert vm.result("status")["frozen"] is False
    vm.wait_for(lambda: ticks(vm) > n + 3, what="ticker ticking again")


def last_resume(vm):
    return vm.result("status")["last_resume"]


def test_unannounced_pause_found_by_the_clock_check(cover):
    vm = cover["vm"]
    st = vm.result("status")
    assert COVER["clock"]["check_ms"] == 1000
    assert "hw_clock" in st["sandbox"]["detectors"], st["sandbox"]
    # The host resumes the sandbox and at once pauses the VM: the first
    # check after the pause falls within a second (of the guest's
    # monotonic clock, stopped by the pause) of that resume, when
    # detections only log; a later check must still find the pause.
    before = vm.result("sandbox.resume", {})
    assert before["cause"] == "host"
    vm.qmp.cmd("stop")
    time.sleep(3)
    vm.qmp.cmd("cont")
    # The host says nothing: within a check or two the system clock is
    # seen lagging the RTC by the pause, and the resume steps run. (The
    # default check_ms, 30 s, would make this wait up to 30 s.)
    try:
        lr = vm.wait_for(lambda: (lambda x: x if x and x != before else None)(last_resume(vm)),
                         timeout=10, what="resume noticed by the clock check")
    except AssertionError as e:
        raise AssertionError(f"{e}: {vm.result('status')['sandbox']}\n{vm.console_text()}")
    assert lr["cause"] == "rtc", lr
    time_step = {s["name"]: s for s in lr["steps"]}["time"]
    assert time_step["source"] == "rtc0" and time_step["clock"]["action"] == "stepped", lr
    # The pause, less up to a second of the RTC's truncation.
    assert time_step["clock"]["offset_ms"] > 1900, lr


def test_restore_with_a_vm_generation_id(cover, tmp_path):
    """QEMU gives the guest a VM generation ID (run-vm --vmgenid) and a new
    one on restore. The uevent listener is up, but this image's 6.1
    kernel's vmgenid driver only reseeds the RNG and sends no uevent (later
    kernels send NEW_VMGEN_ID): the restore is found by the clock check,
    and the identity the snapshot held is drawn again."""
    vm = cover["vm"]
    with open(os.path.join(ROOT, "build", "kernel", "package")) as f:
        kernel = f.read().strip()
    assert kernel.startswith("linux-image-6.1."), \
        f"{kernel}: a kernel whose vmgenid sends a uevent must see cause vmgenid; update this test"
    assert "vmgenid" in vm.result("status")["sandbox"]["detectors"]
    gen0 = vm.qmp.cmd("query-vm-generation-id")["guid"]
    before = last_resume(vm)
    id0 = vm.result("status")["identity"]
    snap = str(tmp_path / "snap")
    vm.disconnect()
    vm.qmp.cmd("stop")
    vm.qmp.cmd("migrate", uri=f"exec:cat > {snap}")
    vm.wait_for(lambda: vm.qmp.cmd("query-migrate").get("status") == "completed", timeout=120,
                what="migration")
    vm.qmp.cmd("quit")
    vm.wait_exit(30)
    time.sleep(2)

    vm2 = cover_vm(os.path.join(cover["root"], "restored"))
    cover["vms"].append(vm2)
    vm2.start(incoming=snap)
    assert vm2.qmp.cmd("query-vm-generation-id")["guid"] != gen0
    lr = vm2.wait_for(lambda: (lambda x: x if x and x != before else None)(last_resume(vm2)),
                      timeout=30, what="restore noticed")
    assert lr["cause"] == "rtc", lr
    # What the snapshot held is drawn again: a copy restored from it is
    # told apart by its instance id, one generation on.
    id1 = vm2.result("status")["identity"]
    assert id1["instance_id"] != id0["instance_id"], (id0, id1)
    assert id1["generation"] == id0["generation"] + 1 and id1["cause"] == "rtc", (id0, id1)
    # The restored guest runs on: the same services, the ticker ticking.
    n = ticks(vm2)
    vm2.wait_for(lambda: ticks(vm2) > n, what="ticker ticking after the restore")


# A config hearth refuses (a restart policy that does not exist), whose
# control and modules are valid by themselves.
BAD = {
    "control": {"listen": ["serial:org.hearth.ctl"]},
    "modules": ["virtio_pci", "virtio_console"],
    "hostname": "never-applied",
    "services": [{"name": "agent", "argv": [ATTACK, "tick"], "restart": "sometimes"}],
}


def test_refused_config_runs_the_defaults_and_says_why(make_vm):
    vm = make_vm(extra=["--append", "hearth.config=/etc/hearth/bad.json hearth.log=info " + KMSG],
                 shares=False, agent=False, configs={"bad": BAD}).start()
    st = vm.result("status")
    assert st["mode"] == "vm" and st["pid"] == 1 and st["phase"] == "running"
    assert st["config"] == "/etc/hearth/bad.json"
    assert "services[0].restart" in st["config_error"], st["config_error"]
    # The built-in defaults: no services, no hostname; but the file's own
    # listeners and their modules, so this host can still get in.
    assert st["services"] == [] and st["hostname"] != BAD["hostname"]
    assert [c["listen"] for c in st["control"]] == BAD["control"]["listen"]
    assert "virtio_console" in {m["name"] for m in st["modules"] if m["state"] == "loaded"}
    cfg = vm.result("config.get")
    assert cfg == {"control": BAD["control"], "modules": BAD["modules"]}, cfg
    console = vm.console_text()
    assert "hearth: config /etc/hearth/bad.json refused" in console, console
    assert "running the built-in defaults with the refused file's control and modules" in console
    # hearth.log=info: info lines reach the console, debug lines do not.
    assert INFO_LINE in console and DEBUG_LINE not in console, console
