"""How service processes are set up: env_files, identity, limits, capabilities."""
import base64
import os
import shutil
import signal

import pytest

CAP_NET_ADMIN = 12
CAP_SYS_ADMIN = 21


def _status_fields(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


def _running_pid(h, name):
    """The service's pid as the test sees it."""
    pid = h.wait_for(lambda: (lambda s: s["pid"] if s["state"] == "running" else None)(h.service(name)),
                     what=f"{name} running")
    return h.host_pid(pid)


def test_env_files_override_env_and_missing_file_is_fine(hearth, tmp_path):
    envf = tmp_path / "agent.env"
    envf.write_text("# secrets\nexport API_KEY='sk-secret'\nMODE=prod\n")
    out = tmp_path / "env.out"
    hearth.start(hearth.config(services=[{
        "name": "agent", "argv": ["sh", "-c", f"env > {out}; exec sleep 1000"],
        "env": {"MODE": "dev", "KEEP": "yes"},
        "env_files": [str(envf), str(tmp_path / "missing.env")]}]))
    hearth.wait_for(lambda: out.exists() and "MODE=" in out.read_text(), what="env dump")
    env = dict(l.split("=", 1) for l in out.read_text().splitlines() if "=" in l)
    assert env["MODE"] == "prod" and env["KEEP"] == "yes" and env["API_KEY"] == "sk-secret"
    assert "sk-secret" not in hearth.log_text()


def test_malformed_env_file_is_a_clear_error(hearth, tmp_path):
    envf = tmp_path / "bad.env"
    envf.write_text("GOOD=1\nthis is not an assignment\n")
    hearth.start(hearth.config(services=[
        {"name": "keep", "argv": ["sleep", "1000"]},
        {"name": "agent", "argv": ["sleep", "1000"], "env_files": [str(envf)]}]))
    s = hearth.wait_for(lambda: (lambda x: x if x["state"] == "failed" else None)(hearth.service("agent")),
                        what="agent failed")
    assert s["error"] == f"env_files[0] {envf}:2: expected KEY=VALUE"


def test_non_root_user_umask_rlimit_oom(hearth, tmp_path):
    # The output goes through hearth's capture: nobody cannot write to the
    # test's private temp directory.
    script = "echo $(id -u) $(id -g) $(umask) $(ulimit -n) $HOME; exec sleep 1000"
    hearth.start(hearth.config(services=[{
        "name": "agent", "argv": ["sh", "-c", script], "user": "nobody", "umask": "027",
        "rlimits": {"nofile": 321}, "oom_score_adj": 500}]))
    pid = _running_pid(hearth, "agent")
    lines = hearth.wait_for(lambda: hearth.rpc("logs.read", {"name": "agent"})["lines"], what="id output")
    uid, gid, umask, nofile, home = lines[0]["line"].split()
    assert home == "/nonexistent"
    assert uid == "65534" and gid == "65534"
    assert umask in ("0027", "027") and nofile == "321"
    with open(f"/proc/{pid}/oom_score_adj") as f:
        assert f.read().strip() == "500"


def test_caps_dropped_and_no_new_privs(hearth):
    hearth.start(hearth.config(services=[{
        "name": "agent", "argv": ["sleep", "1000"],
        "caps_drop": ["CAP_NET_ADMIN", "CAP_SYS_ADMIN", "BPF"]}]))
    pid = _running_pid(hearth, "agent")
    st = _status_fields(pid)
    bnd, eff = int(st["CapBnd"], 16), int(st["CapEff"], 16)
    assert not bnd & (1 << CAP_NET_ADMIN) and not bnd & (1 << CAP_SYS_ADMIN)
    assert not eff & (1 << CAP_NET_ADMIN) and not eff & (1 << CAP_SYS_ADMIN)
    assert eff & 1  # CAP_CHOWN kept: only the listed ones go
    assert st["NoNewPrivs"] == "1"
    # Nothing hearth blocks or ignores (nor what its own parent left
    # ignored, such as libc-reserved real-time signals) reaches the service.
    assert int(st["SigBlk"], 16) == 0 and int(st["SigIgn"], 16) == 0


@pytest.mark.skipif(not shutil.which("nft"), reason="nft is not installed")
def test_net_admin_only_when_kept(hearth, tmp_path):
    out = tmp_path / "nft.out"
    nft = shutil.which("nft")
    script = f"{nft} add table inet sneaky > {out}.tmp 2>&1; echo rc=$? >> {out}.tmp; mv {out}.tmp {out}; exec sleep 1000"
    hearth.start(hearth.config(services=[
        {"name": "agent", "argv": ["sh", "-c", script], "caps_drop": ["CAP_NET_ADMIN"]},
        {"name": "control", "argv": ["sh", "-c", script.replace("sneaky", "allowed").replace(str(out), str(out) + "2")],
         "caps_keep": ["NET_ADMIN"]}]))
    hearth.wait_for(lambda: out.exists(), what="nft attempt")
    text = out.read_text()
    assert "rc=0" not in text and ("Operation not permitted" in text or "rc=1" in text)
    # The same command with the capability kept works, so the refusal is
    # the capability (not on the default list).
    hearth.wait_for(lambda: (tmp_path / "nft.out2").exists(), what="control attempt")
    assert "rc=0" in (tmp_path / "nft.out2").read_text()


def test_service_is_born_in_its_cgroup_leaf(hearth, tmp_path):
    import os
    if not os.path.exists("/sys/fs/cgroup/unified/cgroup.procs") and \
            not os.path.exists("/sys/fs/cgroup/cgroup.procs"):
        pytest.skip("no cgroup2 on this host")
    out = tmp_path / "cg"
    hearth.start(hearth.config(services=[{
        "name": "agent", "argv": ["sh", "-c", f"cat /proc/self/cgroup > {out}; exec sleep 1000"]}]))
    hearth.wait_for(lambda: out.exists() and out.read_text(), what="cgroup dump")
    leaf = hearth.service("agent")["cgroup"]
    # Seen from outside, the service is in its leaf; inside, its cgroup
    # namespace is rooted there, so it sees itself at "/".
    with open(f"/proc/{_running_pid(hearth, 'agent')}/cgroup") as f:
        line = [l for l in f.read().splitlines() if l.startswith("0::")][0]
    assert leaf.endswith(line[3:]) and line.endswith("/services/agent")
    inside = [l for l in out.read_text().splitlines() if l.startswith("0::")][0]
    assert inside == "0::/"
    # From kernel 5.7 on it is placed by clone3 itself, not moved after
    # the fork.
    assert "spawned pid" in hearth.log_text()
    import re
    major, minor = (int(x) for x in re.match(r"(\d+)\.(\d+)", os.uname().release).groups())
    if (major, minor) >= (5, 7):
        assert "into its cgroup (clone3)" in hearth.log_text()


def test_leaf_killed_once_still_hosts_the_next_run(hearth, tmp_path):
    """After cgroup.kill has emptied a leaf, the next run must live: some
    kernels kill every child clone3 places in such a leaf, so hearth gives
    the service a fresh leaf."""
    import os
    armed = tmp_path / "armed"
    hearth.start(hearth.config(services=[{
        "name": "stubborn",
        "argv": ["sh", "-c", f"trap '' TERM; : > {armed}; while :; do sleep 0.05; done"],
        "stop": {"timeout_ms": 200}}]))
    # The stop must find the trap set, or SIGTERM alone ends the shell.
    hearth.wait_for(armed.exists, what="the TERM trap set")
    hearth.rpc("services.stop", {"name": "stubborn"})
    hearth.wait_for(lambda: hearth.service("stubborn")["state"] == "stopped", what="killed")
    assert "killing" in hearth.log_text()
    hearth.rpc("services.start", {"name": "stubborn"})
    # Waited for, not slept on: a fixed pause could end before a loaded
    # machine has started the shell. A run the kernel kills at birth
    # never gets here as running with the same pid and no restart.
    s = hearth.wait_for(lambda: (lambda x: x if x["state"] == "running" and x["pid"] else None)(
        hearth.service("stubborn")), what="the next run")
    pid = hearth.host_pid(s["pid"])
    with open(f"/proc/{pid}/cgroup") as f:
        assert f.read().strip().endswith("/services/stubborn")
    again = hearth.service("stubborn")
    assert again["state"] == "running" and again["pid"] == s["pid"], again
    assert again["restarts"] == 0, again
    assert os.path.isdir(s["cgroup"])


def test_cgroup_limits_applied_or_refused_by_name(hearth):
    """A limit lands in the service's leaf where the controller is enabled
    for service cgroups; where it is not (a host that keeps the controller
    on cgroup v1), the service does not start and says which limit."""
    limits = {"memory_max": 64 << 20, "memory_high": 48 << 20, "pids_max": 32}
    hearth.start(hearth.config(services=[
        {"name": "keeper", "argv": ["sleep", "1000"], "main": True},
        {"name": "capped", "argv": ["sleep", "1000"], "limits": limits, "restart": "never"}]))
    keeper = hearth.wait_for(lambda: (lambda x: x if x["state"] == "running" else None)(hearth.service("keeper")),
                             what="keeper running")
    leaf = keeper.get("cgroup")
    if not leaf:
        pytest.skip("services have no cgroup on this host")
    with open(os.path.join(os.path.dirname(leaf), "cgroup.controllers")) as f:
        have = f.read().split()
    s = hearth.wait_for(lambda: (lambda x: x if x["state"] in ("running", "failed") else None)(
        hearth.service("capped")), what="capped settled")
    if "memory" in have and "pids" in have:
        assert s["state"] == "running", s
        files = {"memory.max": limits["memory_max"], "memory.high": limits["memory_high"],
                 "pids.max": limits["pids_max"]}
        for name, want in files.items():
            with open(os.path.join(s["cgroup"], name)) as f:
                assert int(f.read()) == want, name
        assert s["memory_bytes"] > 0
        with open(os.path.join(leaf, "memory.max")) as f:
            assert f.read().strip() == "max"   # no limits: the kernel's default
    else:
        missing = "memory" if "memory" not in have else "pids"
        field = "memory_max" if missing == "memory" else "pids_max"
        assert s["state"] == "failed"
        assert s["error"] == f"limits.{field}: the {missing} controller is not enabled for service cgroups"
        assert hearth.service("keeper")["state"] == "running"


def test_an_orderly_exit_removes_the_whole_cgroup_tree(hearth, tmp_path):
    """hearth removes the tree it built when it ends in order, even when
    the last processes of a leaf are still exiting at that moment (a
    service's children killed in the sweep) and when an exec leaf sits a
    level further down (services/@exec/<id>)."""
    import os
    armed = tmp_path / "armed"
    hearth.start(hearth.config(services=[{
        "name": "parent",
        "argv": ["sh", "-c", "trap '' TERM; for i in 1 2 3 4; do sleep 1000 & done; "
                 f": > {armed}; wait"],
        "stop": {"timeout_ms": 300}}]))
    hearth.wait_for(armed.exists, what="the children started")
    leaf = hearth.service("parent")["cgroup"]
    if not leaf:
        pytest.skip("services have no cgroup on this host")
    started = hearth.rpc("exec.start", {"argv": ["sleep", "1000"]})
    execs = hearth.rpc("exec.list")["processes"]
    assert any(p["id"] == started["id"] for p in execs), execs
    tree = os.path.dirname(os.path.dirname(leaf))
    assert os.path.isdir(os.path.join(tree, "services", "@exec")), os.listdir(tree + "/services")
    hearth.signal(signal.SIGTERM)
    hearth.proc.wait(timeout=30)
    assert not os.path.exists(tree), [d for d, _, _ in os.walk(tree)]
    assert "unable to remove" not in hearth.log_text()


IMAGE_PASSWD = ("root:x:0:0:root:/root:/bin/sh\n"
                "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
IMAGE_GROUP = "root:x:0:\nnogroup:x:65534:\n"


def test_identity_is_fixed_at_boot(hearth, tmp_path):
    """A root service rewrites /etc/passwd (nobody -> uid 0) and kills the
    nobody service: the restart, and exec.start as nobody, still run as
    65534 without a capability. hearth's /etc/passwd and /etc/group are
    the test's own files, bound over the image's in its namespace."""
    passwd, group = tmp_path / "passwd", tmp_path / "group"
    passwd.write_text(IMAGE_PASSWD)
    group.write_text(IMAGE_GROUP)
    go, done = tmp_path / "go", tmp_path / "done"
    forged = "root:x:0:0:root:/root:/bin/sh\\nnobody:x:0:0:nobody:/root:/bin/sh\\n"
    # Written in place (a rename over a bound file is refused), as the
    # attacker's own view of /etc/passwd. The attacker may write the
    # image here (read_only_root off: a privileged service), and cannot
    # reach the victim (a process space of its own): the victim is
    # killed from outside, as a crash or an OOM kill would end it.
    attack = (f'while [ ! -s {go} ]; do sleep 0.05; done; '
              f'printf "{forged}" > /etc/passwd && printf "nogroup:x:0:\\n" > /etc/group && '
              f'echo ok > {done}; exec sleep 1000')
    hearth.start(hearth.config(services=[
        {"name": "victim", "argv": ["sleep", "1000"], "user": "nobody", "group": "nogroup",
         "restart": "always", "backoff": {"initial_ms": 50, "max_ms": 50}},
        {"name": "evil", "argv": ["sh", "-c", attack], "read_only_root": False}]),
        binds=[(passwd, "/etc/passwd"), (group, "/etc/group")])
    first = hearth.wait_for(lambda: (lambda s: s["pid"] if s["state"] == "running" else None)(
        hearth.service("victim")), what="victim running")
    st = _status_fields(hearth.main_pid(first))
    assert st["Uid"].split() == ["65534"] * 4 and st["Gid"].split() == ["65534"] * 4

    go.write_text(str(first))
    hearth.wait_for(lambda: done.exists(), what="the attack")
    os.kill(hearth.host_pid(first), signal.SIGKILL)
    # The attack did land: hearth's own /etc/passwd now says uid 0.
    assert "nobody:x:0:0" in passwd.read_text() and group.read_text() == "nogroup:x:0:\n"
    again = hearth.wait_for(lambda: (lambda s: s["pid"] if s["state"] == "running"
                                     and s["pid"] != first else None)(hearth.service("victim")),
                            what="victim restarted")
    assert hearth.service("victim")["restarts"] >= 1
    st = _status_fields(hearth.main_pid(again))
    assert st["Uid"].split() == ["65534"] * 4, st["Uid"]
    assert st["Gid"].split() == ["65534"] * 4, st["Gid"]
    assert int(st["CapEff"], 16) == 0 and int(st["CapPrm"], 16) == 0

    # exec.start names the user and the group after the rewrite; its
    # output arrives as notifications before the wait's reply.
    c = hearth.client()
    try:
        r = c.result("exec.start", {"argv": ["sh", "-c", "id -u; id -g; grep ^CapEff /proc/self/status"],
                                    "user": "nobody", "group": "nogroup"})
        w = c.result("exec.wait", {"id": r["id"], "timeout_ms": 10000})
        assert w["exited"] and w["exit_code"] == 0, w
        text = b"".join(base64.b64decode(p["data"]) for p in c.events
                        if p.get("id") == r["id"] and p.get("stream") == "stdout").decode()
    finally:
        c.close()
    assert text.split() == ["65534", "65534", "CapEff:", "0000000000000000"], text
    # A name the image did not have at boot is still unknown.
    passwd.write_text(IMAGE_PASSWD + "intruder:x:0:0::/root:/bin/sh\n")
    e = hearth.client().error("exec.start", {"argv": ["true"], "user": "intruder"})
    assert e["code"] == -32602
    assert e["message"] == "user: no user intruder in /etc/passwd (as read at boot)"


def test_passwd_past_its_bound_is_refused_whole(hearth, tmp_path):
    """An /etc/passwd past 1 MiB at boot: no name resolves from it (never a
    cut table), the start fails naming the user and why; numbers still run."""
    passwd, group = tmp_path / "passwd", tmp_path / "group"
    passwd.write_text(IMAGE_PASSWD + "#" * (1 << 20) + "\n")
    group.write_text(IMAGE_GROUP)
    hearth.start(hearth.config(services=[
        # The first service is the main one: it must outlive the test.
        {"name": "numeric", "argv": ["sleep", "1000"], "user": "65534"},
        {"name": "named", "argv": ["sleep", "1000"], "user": "nobody", "restart": "never"}]),
        binds=[(passwd, "/etc/passwd"), (group, "/etc/group")])
    s = hearth.wait_for(lambda: (lambda x: x if x["state"] == "failed" else None)(
        hearth.service("named")), what="named failed")
    assert s["error"] == ("user: no user nobody: /etc/passwd was refused at boot "
                          "(larger than 1048576 bytes)"), s["error"]
    assert "accounts: /etc/passwd refused: larger than 1048576 bytes" in hearth.log_text()
    pid = _running_pid(hearth, "numeric")
    assert _status_fields(pid)["Uid"].split() == ["65534"] * 4
