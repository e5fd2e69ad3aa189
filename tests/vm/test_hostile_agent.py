"""The hostile agent on the real kernel: hearth is the guest's PID 1 (the
Debian 6.1 kernel, cgroup2 with every controller and mounted with
nsdelegate, egress with the netdev layer and owned tables) and services
attack what it set up (tests/vm/attack.c, booted with
tests/vm/hostile.json). One boot serves every test here: the fixture
takes hearth's picture, lets the attacks run, and waits for them to end.

- `attack`: a root service with the default settings;
- `attack-admin`: one that keeps SYS_ADMIN, NET_ADMIN and NET_RAW
  (privileged), so it can unmount the read-only /sys and the control
  socket's mask, reach nf_tables and send raw frames: the cgroup namespace
  with nsdelegate, the peer check, the tables' owner and the netdev egress
  chain must still hold.

The resource limits have a boot of their own: tests/vm/test_limits.py.
The kernel's helpers with the baseline loosened by the config (the check
that the helper attack would succeed without it) have one too."""
import json
import os
import re
import shutil
import tempfile
import time

import pytest

from conftest import VM, attack_results as results, config_files

HERE = os.path.dirname(os.path.abspath(__file__))

NAMES = ("attack", "attack-admin")


def picture(vm):
    return {m: vm.result(m) for m in ("status", "egress.get", "mounts.list")}


@pytest.fixture(scope="module")
def hostile(image):
    root = tempfile.mkdtemp(prefix="hearth-vm-hostile-")
    dirs = {k: os.path.join(root, k) for k in ("state", "home", "workspace", "skills")}
    for p in dirs.values():
        os.makedirs(p)
    vm = VM(dirs["state"], ["--home", dirs["home"], "--workspace", dirs["workspace"],
                            "--skills", dirs["skills"], "--config", "hostile"])
    try:
        vm.start()
        # Every attacker waits for /workspace/go once started.
        for n in ("hermes",) + NAMES:
            vm.wait_for(lambda: vm.service(n)["state"] == "running", timeout=90,
                        what=f"{n} running")
        before = picture(vm)
        with open(os.path.join(dirs["workspace"], "go"), "w"):
            pass
        for n in NAMES:
            # Done, or ended without saying so (then the report so far is
            # the failure's explanation).
            vm.wait_for(lambda: results(vm, n).get("done") == "ok" or
                        vm.service(n)["state"] != "running", timeout=60, what=f"{n} done")
            assert results(vm, n).get("done") == "ok", (vm.service(n), results(vm, n))
        yield {"vm": vm, "before": before, "after": picture(vm), "dirs": dirs,
               "r": {n: results(vm, n) for n in NAMES}}
    finally:
        vm.kill()
        shutil.rmtree(root, ignore_errors=True)


def _contain_masked():
    """The masked paths as init/contain.c lists them."""
    src = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "init",
                            "contain.c")).read()
    body = re.search(r"contain_masked\[\] = \{(.*?)\};", src, re.S).group(1)
    return re.findall(r'"([^"]+)"', body)


def test_root_service_with_defaults_cannot_undo_hearth(hostile):
    vm, r = hostile["vm"], hostile["r"]["attack"]
    leaf = vm.service("attack")["cgroup"]
    assert leaf == "/sys/fs/cgroup/hearth/services/attack" and r["leaf"] == leaf, r
    # hearth stays in the root cgroup in vm mode; /sys is read-only and the
    # namespace is rooted at the leaf.
    assert r["cgroup_move_hearth"] == "EROFS" and r["cgroup_move_services"] == "EROFS", r
    assert r["freeze_services"] == "EROFS" and r["freeze_tree"] == "EROFS", r
    assert r["own_cgroup"] == "0::/"
    # The unix control socket's directory is masked.
    assert r["control_socket"] == "ENOENT"
    # PID 1: no ptrace, no way in through /proc/1.
    assert r["ptrace_pid1"] == "EPERM"
    assert r["proc1_root"] == "EACCES" and r["proc1_mem"] == "EACCES"
    # Kernel knobs behind read-only mounts.
    for k in ("core_pattern", "sysrq", "sys_power_state"):
        assert r[k] == "EROFS", (k, r[k])
    # The masked paths: a file is /dev/null, a directory an empty read-only
    # tmpfs; one the guest lacks is absent. These four every 6.1 guest has,
    # so the check cannot pass by finding nothing.
    masked = {k.split(":", 1)[1]: v for k, v in r.items() if k.startswith("masked:")}
    assert sorted(masked) == sorted(_contain_masked()), masked
    for path, v in masked.items():
        assert v in ("ENOENT", "dir:0:tmpfs:ro:EROFS", "chr:1:3:0"), (path, v)
    for path in ("/proc/keys", "/proc/interrupts", "/proc/timer_list", "/sys/firmware"):
        assert masked[path] != "ENOENT", (path, masked)
    # Mounts, namespaces, modules and keys: seccomp and no SYS_ADMIN.
    for k in ("mount_tmpfs", "umount_proc_sys", "umount_mask", "unshare_user", "unshare_mnt",
              "finit_module", "keyctl"):
        assert r[k] == "EPERM", (k, r[k])
    # Egress: no packet or raw sockets; the nf_tables batch deleting either
    # of hearth's tables is refused by the kernel (no NET_ADMIN).
    for k in ("af_packet", "raw_socket", "nft_delete_inet", "nft_delete_netdev"):
        assert r[k] == "EPERM", (k, r[k])
    # The host's port exists in the guest, yet not in the service's /dev,
    # and no node of it (or of the kernel log) can be made.
    assert r["vport_found"].startswith("vport"), r["vport_found"]
    assert r["open_vport"] == "ENOENT" and r["mknod_vport"] == "EPERM"
    assert r["open_kmsg"] == "ENOENT" and r["mknod_kmsg"] == "EPERM"
    # A process space of its own: its /proc holds its reaper (pid 1) and
    # itself; no pid of hearth's, hermes's or another service's answers a
    # signal; pidfd_getfd and process_madvise are refused by the filter.
    assert r["pid"] == "2" and r["proc_pids"] == "1,2", r
    assert r["kill_other_pid"] == "0", r
    assert r["pidfd_getfd"] == "EPERM" and r["process_madvise"] == "EPERM", r
    # kill -TERM 1 reaches its own reaper, which hands it on to no one (the
    # attacker is in its group already); hearth never sees it (below).
    assert r["kill_pid1"] == "ok"
    s = vm.service("attack")
    assert s["state"] == "running" and s["privileged"] is False and s["cgroup"] == leaf


def test_privileged_service_still_cannot_leave_its_cgroup(hostile):
    """With the read-only /sys unmounted, the move into hearth's cgroup
    (the root) or into another service's leaf reaches the kernel, which
    refuses it: the cgroup namespace on a hierarchy mounted with
    nsdelegate. With the socket's mask unmounted, the connection is made
    and the peer check refuses it. With NET_ADMIN, the nf_tables batch
    reaches nf_tables, and the tables' owner refuses it. With NET_RAW,
    frames pass below the inet hook and meet the netdev chain."""
    vm, r = hostile["vm"], hostile["r"]["attack-admin"]
    s = vm.service("attack-admin")
    assert s["privileged"] is True
    # Its root writable too: with the whole tree read-only the cgroup
    # files would stop the move before the kernel's cgroup check (it
    # could remount them, keeping SYS_ADMIN; this takes that step away).
    assert s["privileged_reasons"] == ["keeps CAP_NET_ADMIN", "keeps CAP_NET_RAW",
                                       "keeps CAP_SYS_ADMIN", "read_only_root off"], s
    assert r["leaf"] == s["cgroup"] == "/sys/fs/cgroup/hearth/services/attack-admin", r
    assert r["umount_sys"] == "ok"
    assert r["open_hearth_procs"] == "ok" and r["cgroup_move_hearth"] == "ENOENT", r
    assert r["open_sibling_procs"] == "ok" and r["cgroup_move_sibling"] == "ENOENT", r
    assert r["own_cgroup"] == "0::/"
    assert r["umount_mask"] == "ok" and r["control_socket"] == "ok"
    reply = json.loads(r["control_reply"])
    assert reply["error"]["message"] == "peer refused", reply
    assert r["nft_delete_inet"] == "EPERM" and r["nft_delete_netdev"] == "EPERM", r
    # With NET_RAW, a UDP datagram in a raw Ethernet frame: the netdev
    # egress chain drops the one to a denied address (10/8) and counts
    # it; the one to the allowed 10.0.2.100 goes.
    assert r["af_packet_denied"] == "ENOBUFS" and r["af_packet_allowed"] == "ok", r
    c0 = hostile["before"]["egress.get"]["counters"]["netdev"]
    c1 = hostile["after"]["egress.get"]["counters"]["netdev"]
    assert c1["deny4"]["packets"] - c0["deny4"]["packets"] == 1, (c0, c1)
    assert c1["allow4"]["packets"] - c0["allow4"]["packets"] == 1, (c0, c1)
    assert s["state"] == "running"


def test_hearth_unchanged_after_the_attacks(hostile):
    vm, before, after = hostile["vm"], hostile["before"], hostile["after"]
    eg0, eg1 = before["egress.get"], after["egress.get"]
    # Egress: still applied with every layer of this kernel, the same
    # policy and ruleset generation, nothing to repair.
    assert eg1["applied"] is True, eg1
    assert eg1["layers"] == {"inet": True, "netdev": ["eth0"], "owner": True, "watch": True}, eg1
    assert eg1["layers"] == eg0["layers"]
    assert eg1["policy"] == eg0["policy"]
    assert eg1["generation"] == eg0["generation"] and eg1["repairs"] == eg0["repairs"] == 0
    # Mounts as they were.
    assert [(m["target"], m["state"]) for m in after["mounts.list"]["mounts"]] == \
        [(m["target"], m["state"]) for m in before["mounts.list"]["mounts"]]
    assert all(m["state"] == "mounted" for m in after["mounts.list"]["mounts"])
    # PID 1 answers, in the same phase; the agent kept its process.
    st = after["status"]
    assert st["pid"] == 1 and st["phase"] == "running" and vm.result("ping") == {}
    h0 = [s for s in before["status"]["services"] if s["name"] == "hermes"][0]
    h1 = vm.service("hermes")
    assert (h1["state"], h1["pid"], h1["restarts"]) == ("running", h0["pid"], h0["restarts"])
    # The attacker's SIGTERM to its pid 1 went to its own reaper: hearth
    # got no signal to ignore.
    vm.result("events.subscribe", {"since": 0})
    assert vm.result("ping") == {}
    assert [e for e in vm.ctl.events if e.get("type") == "signal.ignored"] == []



# Written by hearth at boot in vm mode; each must read back so here.
BASELINE = {
    "kernel.modprobe": "", "kernel.usermodehelper.bset": "0 0",
    "kernel.usermodehelper.inheritable": "0 0", "kernel.core_pattern": "/dev/null",
    "fs.suid_dumpable": "0", "kernel.yama.ptrace_scope": "1", "kernel.kptr_restrict": "2",
    "kernel.dmesg_restrict": "1", "kernel.unprivileged_bpf_disabled": "1",
    "kernel.perf_event_paranoid": "3", "kernel.kexec_load_disabled": "1",
    "vm.unprivileged_userfaultfd": "0", "fs.protected_symlinks": "1",
    "fs.protected_hardlinks": "1", "fs.protected_fifos": "2", "fs.protected_regular": "2",
}


def test_kernel_helpers_run_nothing_the_service_wrote(hostile):
    """The module helper: the service plants its program at
    /sbin/modprobe (or cannot: a read-only root) and in its /tmp, then a
    socket of an unregistered family makes the kernel call
    request_module. With kernel.modprobe empty nothing runs: no marker on
    the share, none in the service's view. A crash with core dumps allowed
    writes nothing either (core_pattern /dev/null)."""
    vm, r = hostile["vm"], hostile["r"]["attack"]
    assert r["sysctl:kernel.modprobe"] == "", r
    assert r["sysctl:kernel.usermodehelper.bset"] == "0\t0", r
    assert r["sysctl:kernel.usermodehelper.inheritable"] == "0\t0", r
    assert r["sysctl:kernel.core_pattern"] == "/dev/null", r
    assert r["sysctl:fs.suid_dumpable"] == "0"
    assert r["sysctl:kernel.kptr_restrict"] == "2" and r["sysctl:kernel.dmesg_restrict"] == "1"
    assert r["sysctl:kernel.unprivileged_bpf_disabled"] == "1"
    assert r["sysctl:kernel.yama.ptrace_scope"] == "1"
    # /proc/sys stays read-only for the service: the value cannot be undone.
    assert r["write_modprobe_sysctl"] == "EROFS", r
    assert r["plant_sbin_modprobe"] in ("ok", "EROFS"), r
    assert r["plant_tmp_modprobe"] == "ok" and r["plant_modprobe_path"] == "empty", r
    assert r["socket_appletalk"] == "EAFNOSUPPORT", r
    assert r["modprobe_ran"] == "no", r
    assert not os.path.exists(os.path.join(hostile["dirs"]["workspace"], "modprobe-ran"))
    assert "module helper ran" not in vm.console_text()
    assert r["core_dumped"] == "no" and r["core_file"] == "no", r
    # The service's place for the OOM killer is the kernel's default, and
    # it cannot take hearth's -1000 for itself.
    assert r["oom_score_adj"] == "0" and r["oom_score_adj_lower"] == "EACCES", r


def test_status_shows_the_baseline_applied(hostile):
    st = hostile["after"]["status"]
    assert st["oom_score_adj"] == -1000, st
    sc = st["sysctl"]
    assert sc["baseline"] is True, sc
    rows = {e["name"]: e for e in sc["entries"]}
    for name, value in BASELINE.items():
        e = rows[name]
        assert (e["state"], e["value"], e["from"]) == ("applied", value, "baseline"), e
    # Every row applied or absent from this kernel; none failed.
    assert all(e["state"] in ("applied", "absent") for e in sc["entries"]), sc


@pytest.fixture(scope="module")
def loosened(image):
    """The same attack with the baseline loosened by the config:
    kernel.modprobe names a file on the workspace share (writable by the
    service, visible to the kernel) and core_pattern is "core". The
    helper runs; with the helpers' capability sets still cleared it runs
    without a capability."""
    root = tempfile.mkdtemp(prefix="hearth-vm-loose-")
    dirs = {k: os.path.join(root, k) for k in ("state", "home", "workspace", "skills")}
    for p in dirs.values():
        os.makedirs(p)
    with open(os.path.join(HERE, "hostile.json")) as f:
        cfg = json.load(f)
    cfg["services"] = [dict(s, after=["mounts", "egress"]) for s in cfg["services"]
                       if s["name"] == "attack"]
    cfg["sysctl"] = {"kernel.modprobe": "/workspace/modprobe", "kernel.core_pattern": "core"}
    vm = VM(dirs["state"], ["--home", dirs["home"], "--workspace", dirs["workspace"],
                            "--skills", dirs["skills"], "--config", "loose"],
            files=config_files({"loose": cfg}))
    try:
        vm.start()
        vm.wait_for(lambda: vm.service("attack")["state"] == "running", timeout=90,
                    what="attack running")
        with open(os.path.join(dirs["workspace"], "go"), "w"):
            pass
        vm.wait_for(lambda: results(vm, "attack").get("done") == "ok" or
                    vm.service("attack")["state"] != "running", timeout=60, what="attack done")
        yield {"vm": vm, "dirs": dirs, "r": results(vm, "attack"),
               "status": vm.result("status")}
    finally:
        vm.kill()
        shutil.rmtree(root, ignore_errors=True)


def test_loosened_baseline_lets_the_helper_run(loosened):
    """The check that the attack above is real: with kernel.modprobe set
    back by the config, the same socket call runs the planted program as
    uid 0 in hearth's namespaces (it writes to the share by hearth's
    mount), and status flags the rows as loosened."""
    r, st = loosened["r"], loosened["status"]["sysctl"]
    assert r["done"] == "ok", r
    assert r["sysctl:kernel.modprobe"] == "/workspace/modprobe"
    assert r["plant_modprobe_path"] == "ok", r
    mark = os.path.join(loosened["dirs"]["workspace"], "modprobe-ran")
    assert os.path.exists(mark), r
    with open(mark) as f:
        text = f.read()
    # Run as root, but without a capability: bset stayed cleared.
    assert text.startswith("uid 0 CapEff:\t0000000000000000 argv net-pf-5"), text
    assert r["modprobe_ran"] == text
    # core_pattern "core": the crash left a core in its directory.
    assert r["core_dumped"] == "yes" and r["core_file"] == "yes", r
    rows = {e["name"]: e for e in st["entries"]}
    for name in ("kernel.modprobe", "kernel.core_pattern"):
        assert rows[name]["loosened"] is True and rows[name]["from"] == "config", rows[name]
        assert rows[name]["state"] == "applied", rows[name]
    assert rows["kernel.usermodehelper.bset"]["value"] == "0 0"
