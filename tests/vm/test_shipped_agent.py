"""The shipped agent turned hostile, on the real kernel: the image booted
with the shipped Hermes sandbox (rootfs/hermes/hearth.json, its machine
sections, the shares with their owner among them, those of
rootfs/qemu/hearth.json, as `make run` boots them: hermes_config.py), its
hermes service's program replaced by the attacker (tests/vm/attack.c,
installed as /usr/bin/hermes and run with the shipped argv; hermes-web-ui
stays the stand-in). Nothing in the config changes: what the attacker
gets is what the shipped agent gets. One boot."""
import json
import os

from conftest import ATTACK, ROOT, attack_results as results

STANDIN = os.path.join(ROOT, "build", "standin", "hermes")
HERMES_UID = 10000


def picture(vm):
    st = vm.result("status")
    svcs = {s["name"]: {k: s.get(k) for k in ("state", "pid", "restarts", "privileged")}
            for s in st["services"]}
    egress = vm.result("egress.get")
    # The probes' traffic counts, and the last check ages.
    egress.pop("counters")
    egress.pop("verified_ms_ago", None)
    return {"phase": st["phase"], "services": svcs, "egress": egress,
            "mounts": vm.result("mounts.list")}


def test_the_shipped_agent_as_attacker(make_vm, hostdirs):
    with open(ATTACK, "rb") as f:
        attack = f.read()
    with open(STANDIN, "rb") as f:
        standin = f.read()
    vm = make_vm(extra=["--config", "hermes"], agent=False,
                 files={"/usr/bin/hermes": (attack, 0o755),
                        "/usr/bin/hermes-web-ui": (standin, 0o755)}).start()
    cfg = vm.result("config.get")
    hermes_cfg = [s for s in cfg["services"] if s["name"] == "hermes"][0]
    assert hermes_cfg["user"] == "hermes" and hermes_cfg["argv"][:3] == ["hermes", "gateway", "run"]
    assert "HERMES_ALLOW_ROOT_GATEWAY" not in hermes_cfg["env"]
    assert [s["user"] for s in cfg["services"]] == ["hermes", "hermes"], cfg["services"]
    for n in ("hermes", "web-ui"):
        vm.wait_for(lambda: vm.service(n)["state"] == "running", timeout=120, what=f"{n} running")
    before = picture(vm)
    assert before["services"]["hermes"]["privileged"] is False, before

    # The shares belong to the agent before it runs (mounts[].owner), and
    # the seeded home with them (seed[].user).
    home, ws = hostdirs["home"], hostdirs["workspace"]
    for d in (home, ws, os.path.join(home, "config.yaml"), os.path.join(home, "logs")):
        st = os.lstat(d)
        assert (st.st_uid, st.st_gid) == (HERMES_UID, HERMES_UID), d

    with open(os.path.join(ws, "go"), "w"):
        pass
    vm.wait_for(lambda: results(vm, "hermes").get("done") == "ok" or
                vm.service("hermes")["state"] != "running", timeout=90, what="the attack")
    r = results(vm, "hermes")
    assert r.get("done") == "ok", (vm.service("hermes"), r)

    # Who it is: the image's hermes, no capability left, the seccomp filter.
    assert r["ids"] == f"{HERMES_UID}:{HERMES_UID}:{HERMES_UID}:{HERMES_UID}", r
    assert r["CapEff"] == r["CapPrm"] == r["CapAmb"] == r["CapBnd"] == "0000000000000000", r
    assert r["NoNewPrivs"] == "1" and r["Seccomp"] == "2", r
    assert r["setuid_root"] == "EPERM", r
    # The image is read-only to it, its own program too.
    # The image: root's files refused by their mode (EACCES comes before
    # the mount's read-only flag), and nothing can be added: every mount of
    # it is read-only (EROFS), /root included.
    for k in ("write_sbin_hearth", "write_passwd", "write_hermes_binary"):
        assert r[k] == "EACCES", (k, r[k])
    for k in ("create_sbin", "create_etc", "create_root"):
        assert r[k] == "EROFS", (k, r[k])
    for d in ("/", "/sbin", "/etc", "/usr/bin"):
        assert r[f"mount_ro:{d}"] == "ro", (d, r)
    # hearth's config is hidden; /root is passed through, never listed.
    assert r["read_config"] == "ENOENT" and r["list_etc_hearth"] == "empty", r
    assert r["list_root"] == "EACCES", r
    # Its home and workspace are its own.
    assert r["create_home"] == "ok" and r["create_workspace"] == "ok", r
    for d in (home, ws):
        st = os.lstat(os.path.join(d, "hostile-agent-was-here"))
        assert (st.st_uid, st.st_gid) == (HERMES_UID, HERMES_UID), d
    # No other process: its reaper and itself; ptrace of pid 1 refused.
    assert r["proc_pids"] == "1,2" and r["kill_other_pid"] == "0", r
    assert r["ptrace_pid1"] == "EPERM", r
    # No control channel: no socket, the host's port absent from its /dev.
    assert r["control_socket"] == "ENOENT" and r["open_vport"] == "ENOENT", r
    # Its /tmp: a tmpfs of its own, empty at its start; what it leaves
    # there is not in hearth's /tmp.
    assert (r["tmp_fs"], r["tmp_entries"], r["create_tmp"]) == ("tmpfs", "empty", "ok"), r
    seen = vm.call("files.stat", {"path": "/tmp/hostile-agent-was-here"})
    assert "error" in seen, seen

    # hearth, its egress and mounts, and the web-ui service: unchanged.
    after = picture(vm)
    assert after == before, json.dumps({"before": before, "after": after}, indent=1)
    assert vm.result("ping") is not None
    vm.result("system.shutdown", {})
    assert vm.wait_exit(120) == 0
