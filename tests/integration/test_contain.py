"""Contained services: a root service with default settings is a guest of
PID 1. It tries each way to undo what hearth set up (attack.py) and each
fails; hearth's egress, mounts and services are unchanged afterwards.
Mounts hearth adds after a service started still reach it; a service
that opts out (isolation off, a kept NET_ADMIN) is shown as privileged."""
import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ATTACK = os.path.join(HERE, "attack.py")
PY = "/usr/bin/python3"
NFT = shutil.which("nft")
CGROUP2 = os.path.exists("/sys/fs/cgroup/unified/cgroup.procs") or \
    os.path.exists("/sys/fs/cgroup/cgroup.procs")
KEEP = {"name": "keep", "argv": ["sleep", "1000"]}


def _running(h, name):
    return h.wait_for(lambda: (lambda s: s if s["state"] == "running" else None)(h.service(name)),
                      what=f"{name} running")


def _nsenter(h, *cmd, ns="-n"):
    return subprocess.run(["nsenter", "-t", str(h.pid), ns, *cmd], capture_output=True, text=True)


@pytest.mark.skipif(not NFT or not CGROUP2, reason="needs nft and cgroup2")
def test_root_service_with_defaults_cannot_undo_hearth(hearth, tmp_path):
    out, go = tmp_path / "attack.json", tmp_path / "go"
    hearth.start(hearth.config(
        egress={"allowPublicTraffic": True, "allowOut": ["10.10.0.0/16"]},
        mounts=[{"source": "tmpfs", "target": str(tmp_path / "m"), "type": "tmpfs"}],
        services=[KEEP, {"name": "agent", "user": "root", "restart": "never",
                         "writable": [str(tmp_path)],
                         "after": ["egress", "mounts", "keep"],
                         "argv": ["sh", "-c", f"while [ ! -e {go} ]; do sleep 0.05; done; exec "
                                  f"{PY} {ATTACK} {out} {hearth.sock} {tmp_path / 'hearth.json'}"]}]),
        cgroup=True)
    before = {m: hearth.rpc(m) for m in ("mounts.list", "egress.get")}
    rules_before = _nsenter(hearth, NFT, "-s", "list", "ruleset").stdout
    assert "table inet hearth" in rules_before
    # The attack starts once the picture of hearth before it is taken.
    _running(hearth, "agent")
    go.write_text("")
    hearth.wait_for(lambda: out.exists(), timeout=20, what="attack results")
    r = json.loads(out.read_text())
    leaf = _running(hearth, "keep")["cgroup"]
    hearth_cg = os.path.dirname(os.path.dirname(os.path.dirname(leaf)))
    assert hearth_cg == hearth.cgroup
    assert r["hearth_cgroup"] == hearth_cg and os.path.exists(hearth_cg + "/cgroup.procs")

    # cgroups: /sys is read-only and the namespace is rooted at its leaf.
    assert r["cgroup_move"] == "EROFS"
    assert r["freeze_hearth"] == "EROFS" and r["freeze_services"] == "EROFS", r
    assert r["own_cgroup"] == "0::/"
    # The control socket's directory is an empty mask.
    # The socket's directory is masked; this one is below /tmp, and the
    # service's /tmp is its own, so it is not even there.
    assert r["control_socket"] == "ENOENT" and r["control_dir_entries"] in ([], "missing"), r
    # PID 1, kernel knobs, hearth's config.
    assert r["ptrace_pid1"] == "EPERM"
    # hearth's root, cwd and memory through /proc: the kernel wants the
    # caller's capabilities to cover hearth's, and a service's do not.
    assert r["proc1_root"] == "EACCES" and r["proc1_cwd"] == "EACCES"
    assert r["proc1_mem"] == "EACCES"
    assert r["core_pattern"] == "EROFS"
    assert r["sysrq"] == ("EROFS" if os.path.exists("/proc/sysrq-trigger") else "ENOENT")
    assert r["sys_write"] in ("EROFS", "ENOENT")
    assert r["kcore"] == ("chr" if os.path.exists("/proc/kcore") else "missing")
    _assert_masked(r["masked"])
    # hearth's config is masked (/dev/null over it): nothing to read, and
    # a write lands nowhere.
    assert r["config_read"] == 0 and r["config_write"] in ("ok", "EROFS"), r
    assert r["etc_write"] == "EROFS" and r["root_create"] == "EROFS", r
    # Devices: a /dev of its own, without the disks or the kernel log.
    assert r["dev_entries"] == ["fd", "full", "mqueue", "null", "ptmx", "pts", "random", "shm",
                                "stderr", "stdin", "stdout", "tty", "urandom", "zero"] or \
        r["dev_entries"] == ["fd", "full", "null", "ptmx", "pts", "random", "shm", "stderr",
                             "stdin", "stdout", "tty", "urandom", "zero"], r["dev_entries"]
    assert r["open_root_disk"] in ("ENOENT", "no disk") and r["kmsg"] == "ENOENT"
    assert r["mknod_disk"] == "EPERM"
    assert r["openpty"] == "ok" and r["dev_null"] == "ok"
    # Mounts and namespaces.
    for k in ("mount_tmpfs", "mount_cgroup2", "umount_proc_sys", "umount_mask", "unshare_user",
              "unshare_mnt"):
        assert r[k] == "EPERM", (k, r[k])
    # Not even hearth's namespace handle can be opened (no ptrace access).
    assert r["setns_pid1_mnt"] in ("EACCES", "EPERM")
    # The kernel.
    assert r["finit_module"] == "EPERM" and r["keyctl"] == "EPERM"
    # Egress: no raw frames, no ruleset changes.
    assert r["af_packet"] == "EPERM" and r["raw_socket"] == "EPERM"
    for k in ("nft_add_table", "nft_flush", "nft_delete_hearth"):
        assert "Operation not permitted" in r[k], (k, r[k])

    # hearth is unchanged: same ruleset, mounts and policy; still serving;
    # the service itself is as hearth left it, and nothing is flagged.
    assert _nsenter(hearth, NFT, "-s", "list", "ruleset").stdout == rules_before
    assert hearth.rpc("egress.get")["policy"] == before["egress.get"]["policy"]
    assert [(m["target"], m["state"]) for m in hearth.rpc("mounts.list")["mounts"]] == \
        [(m["target"], m["state"]) for m in before["mounts.list"]["mounts"]]
    assert hearth.rpc("ping") == {}
    agent = hearth.service("agent")
    assert agent["privileged"] is False and "privileged_reasons" not in agent
    assert hearth.service("keep")["state"] == "running"
    assert hearth.rpc("status")["phase"] == "running"


def _contain_masked():
    """The masked paths as init/contain/contain.c lists them."""
    src = open(os.path.join(HERE, "..", "..", "init", "contain", "contain.c")).read()
    body = re.search(r"contain_masked\[\] = \{(.*?)\};", src, re.S).group(1)
    return re.findall(r'"([^"]+)"', body)


def _assert_masked(seen):
    """Each masked path that exists in hearth's own view (the same kernel's
    /proc, the host's /sys) is, in the service's, an empty read-only tmpfs
    (a directory) or /dev/null (a file); a path hearth lacks stays absent."""
    masked = _contain_masked()
    assert sorted(seen) == sorted(masked), "attack.py's MASKED differs from contain.c"
    checked = 0
    for path in masked:
        if not os.path.exists(path):
            assert seen[path] == "ENOENT", (path, seen[path])
        elif os.path.isdir(path):
            assert seen[path] == {"kind": "dir", "entries": [], "fstype": "tmpfs", "ro": True,
                                  "create": "EROFS"}, (path, seen[path])
            checked += 1
        else:
            assert seen[path] == {"kind": "chr", "rdev": [1, 3], "read": 0}, (path, seen[path])
            checked += 1
    # /proc/keys, /proc/interrupts, /proc/timer_list exist on every kernel
    # these tests run on: the check can never pass by finding nothing.
    assert checked >= 3, seen


def _status_fields(h, name):
    pid = h.host_pid(_running(h, name)["pid"])
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


# CHOWN DAC_OVERRIDE FOWNER FSETID KILL SETGID SETUID SETPCAP NET_BIND_SERVICE
# SYS_CHROOT AUDIT_WRITE SETFCAP
DEFAULT_CAPS = sum(1 << c for c in (0, 1, 3, 4, 5, 6, 7, 8, 10, 18, 29, 31))
CAP_NET_ADMIN, CAP_NET_BIND_SERVICE = 12, 10


def test_capability_sets_by_allowlist(hearth):
    hearth.start(hearth.config(services=[
        {"name": "root", "argv": ["sleep", "1000"]},
        {"name": "nobody", "argv": ["sleep", "1000"], "user": "nobody"},
        {"name": "binder", "argv": ["sleep", "1000"], "user": "nobody",
         "caps_keep": ["NET_BIND_SERVICE"]},
        {"name": "lean", "argv": ["sleep", "1000"], "caps_drop": ["CAP_CHOWN", "KILL"]}]))
    st = _status_fields(hearth, "root")
    for k in ("CapBnd", "CapEff", "CapPrm"):
        assert int(st[k], 16) == DEFAULT_CAPS, (k, st[k])
    assert int(st["CapInh"], 16) == 0 and int(st["CapAmb"], 16) == 0
    assert st["NoNewPrivs"] == "1" and st["Seccomp"] == "2"
    st = _status_fields(hearth, "nobody")
    for k in ("CapBnd", "CapEff", "CapPrm", "CapInh", "CapAmb"):
        assert int(st[k], 16) == 0, (k, st[k])
    # A non-root service keeps what it names through exec: as ambient.
    st = _status_fields(hearth, "binder")
    for k in ("CapBnd", "CapEff", "CapPrm", "CapInh", "CapAmb"):
        assert int(st[k], 16) == 1 << CAP_NET_BIND_SERVICE, (k, st[k])
    st = _status_fields(hearth, "lean")
    assert int(st["CapEff"], 16) == DEFAULT_CAPS & ~(1 | 1 << 5)
    assert int(st["CapBnd"], 16) == DEFAULT_CAPS & ~(1 | 1 << 5)


def test_opting_out_is_flagged_privileged(hearth, tmp_path):
    out = tmp_path / "seen"
    hearth.start(hearth.config(services=[
        {"name": "tool", "isolation": False,
         "argv": ["sh", "-c", f"ls {hearth.sockdir} > {out}; exec sleep 1000"]},
        {"name": "netadm", "argv": ["sleep", "1000"], "caps_keep": ["NET_ADMIN", "CHOWN"],
         "seccomp": "off"},
        KEEP]))
    for name in ("tool", "netadm", "keep"):
        _running(hearth, name)
    tool, netadm, keep = (hearth.service(n) for n in ("tool", "netadm", "keep"))
    assert tool["privileged"] is True and tool["privileged_reasons"] == ["isolation off"]
    assert netadm["privileged"] is True
    assert netadm["privileged_reasons"] == ["keeps CAP_NET_ADMIN", "seccomp off"]
    assert keep["privileged"] is False
    log = hearth.log_text()
    assert "service tool: privileged: isolation off" in log
    assert "service netadm: privileged: keeps CAP_NET_ADMIN, seccomp off" in log
    # Without isolation the control socket's directory is visible...
    hearth.wait_for(lambda: out.exists() and out.read_text(), what="listing")
    assert "control.sock" in out.read_text()
    # ...and without the filter, nothing refuses what the capability allows.
    st = _status_fields(hearth, "netadm")
    assert st["Seccomp"] == "0" and int(st["CapEff"], 16) == (1 << CAP_NET_ADMIN | 1)
    # hearthctl names them under its table.
    from conftest import HEARTHCTL
    r = subprocess.run([HEARTHCTL, "--connect", "unix:" + hearth.sock, "services"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-2:] == [
        "privileged: tool (isolation off)",
        "privileged: netadm (keeps CAP_NET_ADMIN, seccomp off)"], r.stdout


def test_mask_that_cannot_be_applied_fails_the_start_by_name(hearth, tmp_path):
    # A second control socket whose directory is a symlink loop: it cannot
    # be listened on, nor masked. The service must not run without the mask.
    loop = tmp_path / "loop"
    os.symlink(loop, loop)
    cfg = hearth.config(services=[KEEP, {"name": "agent", "argv": ["sleep", "1000"],
                                         "restart": "never"}])
    cfg["control"]["listen"].append(f"unix:{loop}/ctl.sock")
    hearth.start(cfg)
    s = hearth.wait_for(lambda: (lambda x: x if x["state"] == "failed" else None)(
        hearth.service("agent")), what="agent failed")
    assert s["error"].startswith(f"containment: unable to inspect {loop}: "), s["error"]
    assert s["pid"] == 0
    assert hearth.rpc("ping") == {}


def test_mounts_hearth_adds_later_reach_a_running_service(hearth, tmp_path):
    """A read-only bind mount is lost (as after a resume where the share
    went away) while the service runs; hearth's resume puts it back, and
    the service sees the new mount, read-only, without restarting."""
    src, target, out = tmp_path / "src", tmp_path / "g" / "data", tmp_path / "seen"
    src.mkdir()
    (src / "marker").write_text("from the host\n")
    probe = (f"while :; do if [ -e {target}/marker ]; then s=present; else s=absent; fi; "
             f"if touch {target}/w 2>/dev/null; then s=$s-rw; else s=$s-ro; fi; "
             f"echo $s > {out}.tmp; mv {out}.tmp {out}; sleep 0.05; done")
    hearth.start(hearth.config(
        mounts=[{"source": str(src), "target": str(target), "type": "bind", "read_only": True}],
        services=[{"name": "agent", "after": ["mounts"], "argv": ["sh", "-c", probe]}]))
    pid = _running(hearth, "agent")["pid"]
    hearth.wait_for(lambda: out.exists() and out.read_text().strip() == "present-ro",
                    what="the mount seen read-only")
    # Gone from hearth's namespace: the service's copy goes with it.
    r = _nsenter(hearth, "umount", str(target), ns="-m")
    assert r.returncode == 0, r.stderr
    hearth.wait_for(lambda: out.read_text().strip() == "absent-ro" or
                    out.read_text().strip() == "absent-rw", what="the mount gone in the service")
    # A resume notices it and mounts it again: a mount hearth adds now.
    hearth.rpc("sandbox.resume", {})
    hearth.wait_for(lambda: out.read_text().strip() == "present-ro",
                    what="the remount seen read-only in the service")
    assert hearth.service("agent")["pid"] == pid
    assert not (src / "w").exists()


def _view(path):
    """A service's view of its namespace, written by VIEW: its namespace
    id, then its mount points and its /dev, one per line."""
    ns, *rest = path.read_text().split("\n--\n")
    return ns.strip(), rest[0].split(), rest[1].split()


VIEW = ("{{ readlink /proc/self/ns/mnt; echo --; awk '{{print $5}}' /proc/self/mountinfo | sort; "
        "echo --; ls /dev; }} > {out}.tmp && mv {out}.tmp {out}")


def test_later_starts_copy_the_namespace_template(hearth, tmp_path):
    """The first contained start builds its namespace and hands it to
    hearth; starts after it copy that template instead of building one.
    Each copy is a namespace of its own with the same mounts, masks and
    /dev; a privileged service (one that keeps CAP_SYS_ADMIN and could
    change its own mounts) is never made the template, so what it mounts
    reaches no other service; and a mount hearth adds after the template
    was taken is in the copies made after it."""
    leak, added, src = tmp_path / "leak", tmp_path / "added", tmp_path / "src"
    for d in (leak, added, src):
        d.mkdir()
    (src / "marker").write_text("x")
    views = {n: tmp_path / f"{n}.view" for n in ("priv", "first", "second", "third")}
    mounted = tmp_path / "mounted"
    hold = "exec sleep 1000"
    cfg = hearth.config(services=[
        # First to start: it could be the template, and must not be.
        # Ready once its mount is made: the starts after it come later.
        {"name": "priv", "caps_keep": ["SYS_ADMIN"], "seccomp": "off",
         "ready": {"file": str(mounted)},
         "argv": ["sh", "-c", f"mount -t tmpfs leak {leak} && touch {mounted}; "
                  + VIEW.format(out=views["priv"]) + f"; {hold}"]},
        {"name": "first", "after": ["priv"],
         "argv": ["sh", "-c", VIEW.format(out=views["first"]) + f"; {hold}"]},
        {"name": "second", "after": ["first"],
         "argv": ["sh", "-c", VIEW.format(out=views["second"]) + f"; {hold}"]},
    ])
    go = tmp_path / "go"
    # Started again and again until the mount below is made: its start
    # after that copies the template.
    cfg["services"].append(
        {"name": "third", "after": ["second"], "backoff": {"initial_ms": 20, "max_ms": 20},
         "argv": ["sh", "-c", f"[ -e {go} ] || exit 1; cat {added}/marker > {views['third']}.m; "
                  + VIEW.format(out=views["third"]) + f"; {hold}"]})
    hearth.start(cfg)
    for n in ("priv", "first", "second"):
        hearth.wait_for(lambda: views[n].exists(), what=f"{n}'s view")
    log = hearth.log_text()
    assert "contain: later starts copy a namespace template" in log, log
    priv, first, second = (_view(views[n]) for n in ("priv", "first", "second"))
    # The privileged service's own mount stays its own.
    assert str(leak) in priv[1]
    assert str(leak) not in first[1] and str(leak) not in second[1]
    # The copy has what a built namespace has, in a namespace of its own.
    assert second[0] != first[0] and second[0] != priv[0] and first[0] != priv[0]
    assert second[1] == first[1] and second[2] == first[2]
    assert "null" in second[2] and "kmsg" not in second[2]
    assert hearth.sockdir in second[1]  # the control socket's directory, masked
    # A mount hearth adds now reaches starts made from the template.
    r = _nsenter(hearth, "mount", "--bind", str(src), str(added), ns="-m")
    assert r.returncode == 0, r.stderr
    go.write_text("")
    hearth.wait_for(lambda: views["third"].exists(), what="third's view")
    third = _view(views["third"])
    assert str(added) in third[1] and str(leak) not in third[1]
    assert (tmp_path / "third.view.m").read_text() == "x"
    assert third[0] not in (first[0], second[0], priv[0])


def test_own_dev_serves_a_non_root_service(hearth):
    script = ("echo x > /dev/null && head -c 4 /dev/urandom | od -An -tx1 > /dev/null && "
              "/usr/bin/python3 -c 'import os; os.openpty()' && echo ok; "
              "touch /dev/new 2>/dev/null || echo ro; exec sleep 1000")
    hearth.start(hearth.config(services=[{"name": "agent", "user": "nobody",
                                          "argv": ["sh", "-c", script]}]))
    lines = hearth.wait_for(lambda: (lambda l: l if len(l) >= 2 else None)(
        [x["line"] for x in hearth.rpc("logs.read", {"name": "agent"})["lines"]]), what="output")
    assert lines[:2] == ["ok", "ro"], lines


def test_check_config_names_privileged_services(tmp_path):
    from conftest import HEARTH
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"services": [
        {"name": "agent", "argv": ["/bin/a"]},
        {"name": "web", "argv": ["/bin/w"], "caps_keep": ["NET_ADMIN"], "isolation": False}]}))
    r = subprocess.run([HEARTH, "--check-config", str(cfg)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        f"{cfg}: ok (2 services)",
        f"{cfg}: services[1] (web) is privileged: keeps CAP_NET_ADMIN, isolation off"]
    # The shipped configs have none, and none of their services is root:
    # each runs as the image's hermes user, which owns its shares.
    root = os.path.dirname(os.path.dirname(HERE))
    for f in ("rootfs/hermes/hearth.json", "rootfs/qemu/hearth.json", "rootfs/qemu/disk.json",
              "rootfs/oci/hearth.json"):
        r = subprocess.run([HEARTH, "--check-config", os.path.join(root, f)], capture_output=True,
                           text=True)
        assert r.returncode == 0 and "privileged" not in r.stdout, (f, r.stdout, r.stderr)
        with open(os.path.join(root, f)) as fh:
            shipped = json.load(fh)
        for svc in shipped["services"]:
            assert svc.get("user") == "hermes" and "group" not in svc, (f, svc["name"])
            assert "HERMES_ALLOW_ROOT_GATEWAY" not in svc.get("env", {}), (f, svc["name"])
        for m in shipped.get("mounts", []):
            if m["target"] in ("/root/.hermes", "/workspace"):
                assert m.get("owner") == "hermes", (f, m)
        assert all(s.get("user") == "hermes" for s in shipped.get("seed", [])), f


def test_contained_inside_a_user_namespace(tmp_path):
    """hearth as root of a user namespace (a rootless container): device
    nodes cannot be made there, so the service's /dev binds the image's;
    the rest of the containment holds as it does elsewhere."""
    from conftest import HEARTH, _need_root
    _need_root()
    out, ctl = tmp_path / "out", tmp_path / "ctl"
    ctl.mkdir()
    script = (f"{{ ls /dev; echo x > /dev/null && echo null-ok; "
              f"{PY} -c 'import os; os.openpty(); print(\"pty-ok\")'; "
              f"grep -E '^(CapEff|Seccomp):' /proc/self/status; ls -A {ctl} | wc -l; "
              f"(: > /proc/sys/kernel/core_pattern) || echo sysctl-refused; }} > {out}.tmp 2>/dev/null; "
              f"mv {out}.tmp {out}; exec sleep 1000")
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"control": {"listen": [f"unix:{ctl}/c.sock"]},
                               "services": [{"name": "a", "argv": ["sh", "-c", script],
                                             "writable": [str(tmp_path)]}]}))
    log = open(tmp_path / "hearth.log", "wb")
    p = subprocess.Popen(["unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount",
                          "--mount-proc", HEARTH, "-c", str(cfg), "--log", "debug"],
                         stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 10
        while not out.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert out.exists(), (tmp_path / "hearth.log").read_text()
        lines = out.read_text().split("\n")
    finally:
        # unshare ignores SIGTERM while it waits: stop hearth itself.
        with open(f"/proc/{p.pid}/task/{p.pid}/children") as f:
            for kid in f.read().split():
                os.kill(int(kid), 15)
        p.wait(10)
        log.close()
    assert "ptmx" in lines and "null" in lines and "kmsg" not in lines, lines
    assert "null-ok" in lines and "pty-ok" in lines
    assert f"CapEff:\t{DEFAULT_CAPS:016x}" in lines and "Seccomp:\t2" in lines
    assert "0" in lines and "sysctl-refused" in lines, lines


def test_exec_sessions_copy_the_namespace_template(hearth):
    """exec.start contains its command as a service's: the first session
    builds the namespace and hands it over, the next ones copy it; each
    is a namespace of its own with the same mounts and /dev."""
    from conftest import HEARTHCTL
    hearth.start(hearth.config(services=[]))
    script = ("readlink /proc/self/ns/mnt; echo --; awk '{print $5}' /proc/self/mountinfo | sort; "
              "echo --; ls /dev")
    views = []
    for _ in range(3):
        r = subprocess.run([HEARTHCTL, "-c", "unix:" + hearth.sock, "exec", "--", "sh", "-c",
                            script], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        ns, mounts, dev = r.stdout.split("\n--\n")
        views.append((ns.strip(), mounts.split(), dev.split()))
    assert "contain: later starts copy a namespace template" in hearth.log_text()
    assert views[1][1:] == views[0][1:] and views[2][1:] == views[0][1:]
    assert hearth.sockdir in views[2][1] and "kmsg" not in views[2][2]
    # Each session in a namespace of its own, never hearth's (nor the
    # template, which no process lives in: even the session that built
    # it moved on to a copy before its exec, so a namespace number may
    # come back once a session has ended).
    own = os.readlink(f"/proc/{hearth.pid}/ns/mnt")
    assert all(v[0] != own for v in views), (own, [v[0] for v in views])


def test_a_control_directory_made_anew_is_hidden_again(hearth, tmp_path):
    """The template masks each control socket's directory as it was. A
    directory removed and made anew since is another one: the next start
    builds its namespace again, and the new directory is hidden too."""
    from conftest import HEARTHCTL
    extra = tmp_path / "extra"
    cfg = hearth.config(services=[])
    cfg["control"]["listen"].append(f"unix:{extra}/ctl.sock")
    hearth.start(cfg)

    def ls_extra():
        r = subprocess.run([HEARTHCTL, "-c", "unix:" + hearth.sock, "exec", "--", "sh", "-c",
                            f"ls -A {extra}"], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        return r.stdout.split()

    assert ls_extra() == [] and ls_extra() == []  # built, then copied
    assert "contain: later starts copy a namespace template" in hearth.log_text()
    os.rename(extra, tmp_path / "extra.old")
    extra.mkdir()
    (extra / "visible").write_text("x")
    assert ls_extra() == []
    assert ls_extra() == []


def test_a_missing_writable_path_names_its_reason_once(hearth, tmp_path):
    """A writable path that is not there stops the start; its error says
    why once (safepath's reason is not given a second time by the start's
    report)."""
    gone = tmp_path / "not-there"
    hearth.start(hearth.config(services=[KEEP, {
        "name": "agent", "restart": "never", "writable": [str(gone)], "argv": ["true"]}]))
    s = hearth.wait_for(lambda: (lambda x: x if x.get("error") else None)(hearth.service("agent")),
                        what="agent's error")
    err = s["error"]
    reason = os.strerror(2)
    assert err.startswith("containment: ") and str(gone) in err, err
    assert err.endswith(reason) and err.count(reason) == 1, err
