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
  chain must still hold;
- `envd`: the platform's envd as it would run beside the agent, a
  listener on every address at TCP 49983 (and 49984, not denied), reached
  from the host through a forwarded port as well.

The resource limits have a boot of their own: tests/vm/test_limits.py.
The kernel's helpers with the baseline loosened by the config (the check
that the helper attack would succeed without it) have one too."""
import base64
import json
import os
import re
import shutil
import socket
import tempfile
import time

import pytest

from conftest import ATTACK_IN_IMAGE, VM, attack_results as results, config_files, free_port

HERE = os.path.dirname(os.path.abspath(__file__))

NAMES = ("attack", "attack-admin")
# envd's port, which deny_local_ports closes by default.
ENVD = 49983
# hostile.json's network: the guest's own address.
OWN = "10.0.2.15"


def picture(vm):
    return {m: vm.result(m) for m in ("status", "egress.get", "mounts.list")}


@pytest.fixture(scope="module")
def hostile(image):
    root = tempfile.mkdtemp(prefix="hearth-vm-hostile-")
    dirs = {k: os.path.join(root, k) for k in ("state", "home", "workspace", "skills")}
    for p in dirs.values():
        os.makedirs(p)
    # The platform's way in to envd: a host port forwarded to the guest's.
    envd_port = free_port()
    vm = VM(dirs["state"], ["--home", dirs["home"], "--workspace", dirs["workspace"],
                            "--skills", dirs["skills"], "--config", "hostile",
                            "--hostfwd", f"tcp:127.0.0.1:{envd_port}-:{ENVD}"])
    try:
        vm.start()
        # Every attacker waits for /workspace/go once started.
        for n in ("hermes", "envd") + NAMES:
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
               "r": {n: results(vm, n) for n in NAMES}, "envd_port": envd_port}
    finally:
        vm.kill()
        shutil.rmtree(root, ignore_errors=True)


def platform_connect(vm, host, port):
    """`attack connect HOST PORT` as an exec session of the platform's (the
    host's hands, outside every service): (exit status, its report)."""
    pid = vm.result("exec.start", {"argv": [ATTACK_IN_IMAGE, "connect", host, str(port)]})["id"]
    w = vm.wait_for(lambda: (lambda r: r if r.get("exited") else None)(
        vm.result("exec.wait", {"id": pid, "timeout_ms": 1000})), timeout=60,
        what=f"the exec session to {host}:{port}")
    # The output is whole once exec.exit has come (it follows the last
    # exec.output); a call reads what the connection holds.
    vm.wait_for(lambda: vm.result("ping") == {} and
                any(e.get("id") == pid and "exited" in e for e in vm.ctl.events),
                what=f"exec.exit of the session to {host}:{port}")
    out = b"".join(base64.b64decode(e["data"]) for e in vm.ctl.events
                   if e.get("id") == pid and "data" in e)
    return w["exit_code"], json.loads(out.decode().strip().splitlines()[-1])


def test_platform_port_closed_to_services_open_to_the_platform(hostile):
    """The shipped hearth with the default `deny_local_ports` (hostile.json
    sets none): the agent, a root service with the default settings,
    tries envd's port on loopback (both families) and on the guest's own
    addresses, and every TCP listener the namespace has. Refused at once on
    49983 and only there; the platform reaches the same port from an exec
    session and from outside the guest; hearth's own probe of it passed
    (envd became running through its tcp ready check)."""
    vm, r = hostile["vm"], hostile["r"]["attack"]
    own = r["own_addresses"].split(",")
    assert OWN in own, r["own_addresses"]
    addrs = ["127.0.0.1", "[::1]"] + [f"[{a}]" if ":" in a else a for a in own]
    for a in addrs:
        assert r[f"connect:{a}:{ENVD}"] == "ECONNREFUSED", (a, r)
        # Not everything local: the port beside it, on the same address.
        assert r[f"connect:{a}:{ENVD + 1}"] == "ok", (a, r)

    # Every TCP listener in the guest is a service's: the agent's own
    # (9119) and envd's. hearth has none (its control plane is serial
    # and unix here), so there is none of hearth's to close.
    listen = vm.result("config.get")["control"]["listen"]
    assert listen and all(x.split(":", 1)[0] in ("serial", "unix", "vsock") for x in listen), listen
    listeners = r["tcp_listeners"].split(",")
    assert sorted(listeners) == sorted(["127.0.0.1:9119", f"[::1]:{ENVD}", f"[::1]:{ENVD + 1}"]), \
        listeners
    assert r["listener:127.0.0.1:9119"] == "ok", r
    assert r[f"listener:[::1]:{ENVD}"] == "ECONNREFUSED", r
    assert r[f"listener:[::1]:{ENVD + 1}"] == "ok", r

    # The rule that refused them: one packet per attempt, and nothing else
    # in the guest tried.
    eg0, eg1 = hostile["before"]["egress.get"], hostile["after"]["egress.get"]
    assert eg1["local_ports"] == {"deny": [f"tcp:{ENVD}"], "applied": True,
                                  "services_only": True}, eg1["local_ports"]
    tries = len(addrs) + 1
    port = f"tcp:{ENVD}"
    assert eg1["counters"]["localports"][port]["packets"] - \
        eg0["counters"]["localports"][port]["packets"] == tries, (eg0["counters"], eg1["counters"])

    # hearth's own connection (envd's ready probe, as hearth) went through.
    e = vm.service("envd")
    assert e["state"] == "running" and not e.get("failed_starts"), e

    # The platform: an exec session, in the guest, on loopback and on the
    # guest's own address; it is counted by the chain's exec rule.
    for host in ("127.0.0.1", "::1", OWN):
        code, rep = platform_connect(vm, host, ENVD)
        assert (code, rep["result"], rep["greeting"]) == (0, "ok", f"envd {ENVD}"), (host, rep)
    eg2 = vm.result("egress.get")
    assert eg2["counters"]["localports"]["exec"]["packets"] - \
        eg1["counters"]["localports"]["exec"]["packets"] >= 3, eg2["counters"]
    assert eg2["counters"]["localports"][port] == eg1["counters"]["localports"][port]

    # And from outside the guest, through the NIC: the platform's inbound
    # path is untouched.
    with socket.create_connection(("127.0.0.1", hostile["envd_port"]), timeout=30) as s:
        s.settimeout(30)
        assert s.recv(64) == f"envd {ENVD}\n".encode()
    # Its answers left as the answers of a connection from outside, in
    # both layers: on this kernel the packet still has its route and mark
    # at the egress hook, and the connection was marked as it came in.
    eg3 = vm.result("egress.get")["counters"]
    for path in (("replies",), ("netdev", "replies"), ("inbound", "connections")):
        a, b = eg2["counters"], eg3
        for k in path:
            a, b = a[k], b[k]
        assert b["packets"] > a["packets"], (path, eg2["counters"], eg3)


# The kernel modules a fallback boot goes without, and what it keeps.
FALLBACKS = {
    # No socket expression: the ports closed to every process.
    "no_socket": ("nft_socket",),
    # No fib expression either: the local chain refused, the policy kept.
    "no_socket_no_fib": ("nft_socket", "nft_fib_inet"),
}


@pytest.fixture(scope="module", params=sorted(FALLBACKS))
def fallback(image, request):
    """hostile.json's policy on a kernel missing the local ports' modules
    (the config leaves them out, and kernel.modprobe is empty: nothing
    loads them on demand): envd, and two one-shot clients as services,
    one to envd's port on loopback, one to an address the policy denies
    (10/8 but the allowed 10.0.2.100; on QEMU's own network, should it
    get out of the guest at all)."""
    root = tempfile.mkdtemp(prefix="hearth-vm-lpfall-")
    dirs = {k: os.path.join(root, k) for k in ("state", "home", "workspace", "skills")}
    for p in dirs.values():
        os.makedirs(p)
    with open(os.path.join(HERE, "hostile.json")) as f:
        cfg = json.load(f)
    cfg["modules"] = [m for m in cfg["modules"] if m not in FALLBACKS[request.param]]
    envd = [s for s in cfg["services"] if s["name"] == "envd"][0]
    client = {"user": "root", "restart": "never", "after": ["mounts", "egress", "envd"]}
    cfg["services"] = [envd,
                       dict(client, name="to-envd", argv=[ATTACK_IN_IMAGE, "connect", "127.0.0.1",
                                                          str(ENVD)]),
                       dict(client, name="to-denied", argv=[ATTACK_IN_IMAGE, "connect",
                                                            "10.0.2.50", "80"])]
    envd_port = free_port()
    vm = VM(dirs["state"], ["--home", dirs["home"], "--workspace", dirs["workspace"],
                            "--skills", dirs["skills"], "--config", "lpfall",
                            "--hostfwd", f"tcp:127.0.0.1:{envd_port}-:{ENVD}"],
            files=config_files({"lpfall": cfg}))
    try:
        vm.start()
        # Each client's one line: its connection's outcome.
        done = {"to-envd": f"connect:127.0.0.1:{ENVD}", "to-denied": "connect:10.0.2.50:80"}
        for n, key in done.items():
            vm.wait_for(lambda: key in results(vm, n), timeout=90, what=f"{n} done")
        vm.result("events.subscribe", {"since": 0})
        assert vm.result("ping") == {}
        yield {"vm": vm, "case": request.param, "envd_port": envd_port,
               "egress": vm.result("egress.get"),
               **{n: results(vm, n)[key] for n, key in done.items()},
               "events": [e for e in vm.ctl.events if e.get("type") == "egress"]}
    finally:
        vm.kill()
        shutil.rmtree(root, ignore_errors=True)


def test_local_ports_fallback_on_a_kernel_without_their_modules(fallback):
    """The kernel refuses the local ports' rules (ENOENT: no such
    expression): the egress policy is applied whole all the same, with every
    layer, and the local ports go only as far as the kernel makes them.
    Without `socket` they are closed to every process but hearth's own
    probes, the platform's exec session included, while its inbound path
    from outside still works;
    without `fib` too, they are not closed, and egress.get and the egress
    event say why."""
    vm, eg = fallback["vm"], fallback["egress"]
    # The policy: applied with every layer, and it holds.
    assert eg["applied"] is True and "error" not in eg, eg
    assert eg["layers"] == {"inet": True, "netdev": ["eth0"], "owner": True, "watch": True,
                            "replies": True}, eg
    assert eg["policy"]["allowPublicTraffic"] is False, eg
    assert fallback["to-denied"] == "ECONNREFUSED", fallback
    assert eg["counters"]["deny4-tcp"]["packets"] == 1, eg["counters"]
    lp = eg["local_ports"]
    ev = fallback["events"]
    assert ev and ev[-1]["applied"] is True, ev
    if fallback["case"] == "no_socket":
        assert lp["applied"] is True and lp["services_only"] is False, lp
        assert lp["services_only_error"].startswith(
            "the kernel refuses the socket cgroup match: No such file or directory"), lp
        assert "error" not in lp, lp
        assert ev[-1]["local_ports"] is True and "local_ports_error" not in ev[-1], ev
        # Closed to the agent, and to the platform's exec session too;
        # hearth's own probe (envd's ready check) passes by its mark.
        assert fallback["to-envd"] == "ECONNREFUSED", fallback
        e = vm.service("envd")
        assert e["state"] == "running" and not e.get("failed_starts"), e
        code, rep = platform_connect(vm, "127.0.0.1", ENVD)
        assert (code, rep["result"]) == (1, "ECONNREFUSED"), rep
        assert "exec" not in eg["counters"]["localports"], eg["counters"]
    else:
        assert lp["applied"] is False and lp["services_only"] is False, lp
        assert lp["error"].startswith("refused by the kernel: No such file or directory"), lp
        assert lp["error"].endswith("the egress policy is applied without them"), lp
        assert "services_only_error" not in lp, lp
        assert ev[-1]["local_ports"] is False, ev
        assert ev[-1]["local_ports_error"] == lp["error"], ev
        assert "localports" not in eg["counters"], eg["counters"]
        # Not closed: the agent reaches envd (what the error warns of).
        assert fallback["to-envd"] == "ok", fallback
    # Inbound from outside the guest, as ever.
    with socket.create_connection(("127.0.0.1", fallback["envd_port"]), timeout=30) as s:
        s.settimeout(30)
        assert s.recv(64) == f"envd {ENVD}\n".encode()


def _contain_masked():
    """The masked paths as init/contain/contain.c lists them."""
    src = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "init",
                            "contain", "contain.c")).read()
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
    assert eg1["layers"] == {"inet": True, "netdev": ["eth0"], "owner": True, "watch": True,
                             "replies": True}, eg1
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
