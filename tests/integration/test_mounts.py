"""Host-shared mounts: real bind mounts of temp "host" directories inside
hearth's own mount namespace, nested mounts, late sources, failures."""
import os
import subprocess
import time

from conftest import HEARTHCTL

# The service reports what each access did, by errno name.
PROBE = r'''
import errno, os, sys
for path in sys.argv[1:]:
    try:
        with open(path, "w") as f:
            f.write("written by the service\n")
        print("ok", path)
    except OSError as e:
        print(errno.errorcode[e.errno], path)
'''


# Container mode ends with its main service: one-shot probes run beside it.
KEEP = {"name": "keep", "argv": ["sleep", "1000"], "main": True}


def _mount(h, target):
    for m in h.rpc("mounts.list")["mounts"]:
        if m["target"] == target:
            return m
    raise KeyError(target)


def _lines(h, name):
    return [l["line"] for l in h.rpc("logs.read", {"name": name, "lines": 100})["lines"]]


def _wait_lines(h, name, n):
    return h.wait_for(lambda: (lambda ls: ls if len(ls) >= n else None)(_lines(h, name)),
                      what=f"{n} lines from {name}")


def test_bind_rw_and_ro(hearth, tmp_path):
    rw, ro = tmp_path / "host-rw", tmp_path / "host-ro"
    rw.mkdir()
    ro.mkdir()
    (ro / "shared.txt").write_text("central\n")
    g = tmp_path / "guest"
    cfg = hearth.config(
        mounts=[{"source": str(rw), "target": str(g / "rw"), "type": "bind"},
                {"source": str(ro), "target": str(g / "ro"), "type": "bind", "read_only": True}],
        services=[{"name": "probe", "after": ["mounts"], "restart": "never",
                   "argv": ["/usr/bin/python3", "-c", PROBE, str(g / "rw" / "out.txt"),
                            str(g / "ro" / "new.txt"), str(g / "ro" / "shared.txt")]}, KEEP])
    hearth.start(cfg)
    lines = _wait_lines(hearth, "probe", 3)
    assert lines[0] == f"ok {g / 'rw' / 'out.txt'}"
    assert lines[1] == f"EROFS {g / 'ro' / 'new.txt'}"
    assert lines[2] == f"EROFS {g / 'ro' / 'shared.txt'}"
    # The write went through to the host directory; the ro one is untouched.
    assert (rw / "out.txt").read_text() == "written by the service\n"
    assert sorted(os.listdir(ro)) == ["shared.txt"]
    assert (ro / "shared.txt").read_text() == "central\n"
    m = _mount(hearth, str(g / "ro"))
    assert m["state"] == "mounted" and m["read_only"] is True and m["type"] == "bind"
    assert _mount(hearth, str(g / "rw"))["read_only"] is False
    st = hearth.rpc("status")
    assert st["phases"]["mounts"] is True
    assert st["mounts"]["mounted"] == 2 and st["mounts"]["failed"] == 0
    # The mounts live in hearth's namespace only: the test's view of the
    # target directory is the empty directory hearth created.
    assert os.listdir(g / "ro") == []


def test_nested_mounts_in_listed_order(hearth, tmp_path):
    a, b = tmp_path / "host-a", tmp_path / "host-b"
    a.mkdir()
    b.mkdir()
    (b / "deep.txt").write_text("from b\n")
    g = tmp_path / "guest"
    cfg = hearth.config(
        mounts=[{"source": str(a), "target": str(g / "a"), "type": "bind"},
                {"target": str(g / "a" / "inner"), "type": "tmpfs", "options": "size=1m,mode=0755"},
                {"source": str(b), "target": str(g / "a" / "inner" / "b"), "type": "bind",
                 "read_only": True}],
        services=[{"name": "look", "after": ["mounts"], "restart": "never",
                   "argv": ["sh", "-c", f"cat {g}/a/inner/b/deep.txt; "
                            f"stat -f -c %T {g}/a/inner"]}, KEEP])
    hearth.start(cfg)
    lines = _wait_lines(hearth, "look", 2)
    assert lines[0] == "from b"
    assert lines[1] == "tmpfs"
    # "inner" was created inside host-a, i.e. after host-a was mounted; the
    # mount point for b was created inside the tmpfs, not in host-a.
    assert (a / "inner").is_dir() and os.listdir(a / "inner") == []
    assert [m["state"] for m in hearth.rpc("mounts.list")["mounts"]] == ["mounted"] * 3


def test_late_source_is_retried_then_mounted(hearth, tmp_path):
    late = tmp_path / "host-late"
    g = tmp_path / "guest"
    cfg = hearth.config(
        mounts=[{"source": str(late), "target": str(g / "late"), "type": "bind",
                 "timeout_ms": 20000}],
        services=[{"name": "user", "after": ["mounts"], "restart": "never",
                   "argv": ["cat", str(g / "late" / "hello.txt")]},
                  {"name": "free", "argv": ["sleep", "1000"], "main": True}])
    hearth.start(cfg)
    hearth.wait_for(lambda: _mount(hearth, str(g / "late"))["attempts"] >= 2, what="retries")
    m = _mount(hearth, str(g / "late"))
    assert m["state"] == "waiting" and "No such file" in m["error"]
    user = hearth.service("user")
    assert user["state"] == "waiting" and user.get("waiting_for") == "mounts"
    # Not held by the mount; its exec may still be under way on a loaded machine.
    hearth.wait_for(lambda: hearth.service("free")["state"] == "running", what="free running")
    # The share appears (hot-plugged late): mounted, and the dependant starts.
    late.mkdir()
    (late / "hello.txt").write_text("finally\n")
    hearth.wait_for(lambda: _mount(hearth, str(g / "late"))["state"] == "mounted",
                    what="mounted after the source appeared")
    assert _wait_lines(hearth, "user", 1) == ["finally"]
    assert hearth.rpc("status")["phases"]["mounts"] is True


def test_missing_required_mount_reported_and_dependants_held(hearth, tmp_path):
    g = tmp_path / "guest"
    cfg = hearth.config(
        mounts=[{"source": str(tmp_path / "never"), "target": str(g / "home"), "type": "bind",
                 "timeout_ms": 300}],
        seed=[{"target": str(g / "home"), "from": str(tmp_path)}],
        services=[{"name": "agent", "after": ["mounts"], "argv": ["sleep", "1000"]},
                  {"name": "other", "argv": ["sleep", "1000"]}])
    hearth.start(cfg)
    hearth.wait_for(lambda: _mount(hearth, str(g / "home"))["state"] == "failed", what="failure")
    st = hearth.rpc("status")
    assert st["phases"]["mounts"] is False
    assert st["mounts"]["failed"] == 1 and str(g / "home") in st["mounts"]["error"]
    assert "No such file" in st["mounts"]["error"]
    out = subprocess.run([HEARTHCTL, "--connect", "unix:" + hearth.sock, "status"],
                         capture_output=True, text=True, timeout=10)
    assert out.returncode == 0, out.stderr
    assert f"mounts: 1 required failed: {g / 'home'}: unable to mount" in out.stdout
    time.sleep(0.3)
    assert hearth.service("agent")["state"] == "waiting"
    assert hearth.service("other")["state"] == "running"
    # The failure is an event, and the seed into the failed mount was skipped.
    c = hearth.client()
    c.result("events.subscribe", {"since": 0})
    seen = []
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and "mount.failed" not in seen:
        msg = c.read_line()
        if msg.get("method") == "event":
            seen.append(msg["params"]["type"])
            if msg["params"]["type"] == "mount.failed":
                assert msg["params"]["target"] == str(g / "home")
                assert msg["params"]["required"] is True
    c.close()
    assert "mount.failed" in seen
    seed = hearth.rpc("mounts.list")["seed"]
    assert seed[0]["result"] == "skipped" and "failed" in seed[0]["error"]
    assert not os.listdir(g / "home")


def test_optional_mount_failure_does_not_hold(hearth, tmp_path):
    g = tmp_path / "guest"
    cfg = hearth.config(
        mounts=[{"source": str(tmp_path / "never"), "target": str(g / "opt"), "type": "bind",
                 "timeout_ms": 100, "required": False}],
        services=[{"name": "agent", "after": ["mounts"], "argv": ["sleep", "1000"]}])
    hearth.start(cfg)
    hearth.wait_for(lambda: hearth.service("agent")["state"] == "running", what="agent running")
    m = _mount(hearth, str(g / "opt"))
    assert m["state"] == "failed" and m["required"] is False
    assert hearth.rpc("status")["phases"]["mounts"] is True


def test_host_mounts_mapped_by_rule(hearth, tmp_path):
    hm = ('[{"hostPath":"/data/shared/hermes-homes/h1","mountPath":"%s","readOnly":false},'
          '{"hostPath":"/data/shared/hermes-common-skills","mountPath":"%s","readOnly":true}]'
          % (tmp_path / "g" / "home", tmp_path / "g" / "skills"))
    hearth.start(hearth.config(host_mounts=hm, host_mounts_rule={"tag": "hm-"}))
    ms = hearth.rpc("mounts.list")["mounts"]
    assert [(m["source"], m["target"], m["type"], m["read_only"], m["from"]) for m in ms] == [
        ("hm-h1", str(tmp_path / "g" / "home"), "virtiofs", False, "host_mounts"),
        ("hm-hermes-common-skills", str(tmp_path / "g" / "skills"), "virtiofs", True,
         "host_mounts")]
    # No such virtio-fs tag in a namespace: retried, not mounted.
    assert ms[0]["state"] in ("waiting", "failed") and ms[0]["required"] is True
    assert hearth.rpc("status")["phases"]["mounts"] is False


def test_host_mounts_rule_owner_goes_to_the_writable_shares(hearth, tmp_path):
    """host_mounts_rule.owner: each writable entry of host_mounts gets it
    (given to its root as mounts[].owner is, once mounted); read-only
    entries and subpath mode's shared tag do not."""
    hm = ('[{"hostPath":"/data/shared/homes/h1","mountPath":"%s"},'
          '{"hostPath":"/data/shared/skills","mountPath":"%s","readOnly":true}]'
          % (tmp_path / "g" / "home", tmp_path / "g" / "skills"))
    hearth.start(hearth.config(host_mounts=hm, host_mounts_rule={
        "mode": "subpath", "tag": "shared", "host_root": "/data/shared", "owner": "hermes"}))
    ms = hearth.rpc("mounts.list")["mounts"]
    assert [(m["target"], m.get("owner")) for m in ms] == [
        ("/run/hearth/shares/shared", None), (str(tmp_path / "g" / "home"), "hermes"),
        (str(tmp_path / "g" / "skills"), None)], ms


def test_host_mounts_subpath_rule(hearth, tmp_path):
    hm = '[{"hostPath":"/data/shared/homes/h1","mountPath":"%s"}]' % (tmp_path / "g" / "home")
    hearth.start(hearth.config(host_mounts=hm, host_mounts_rule={
        "mode": "subpath", "tag": "shared", "host_root": "/data/shared"}))
    ms = hearth.rpc("mounts.list")["mounts"]
    assert [(m["source"], m["target"], m["type"]) for m in ms] == [
        ("shared", "/run/hearth/shares/shared", "virtiofs"),
        ("/run/hearth/shares/shared/homes/h1", str(tmp_path / "g" / "home"), "bind")]
    assert ms[1]["state"] == "pending"


def test_data_survives_a_rebuild(hearth, tmp_path):
    """A service writes into its home; hearth stops; a new hearth on the same
    host dirs (a rebuilt sandbox) sees the data and does not seed again."""
    home, tmpl = tmp_path / "host-home", tmp_path / "tmpl"
    home.mkdir()
    tmpl.mkdir()
    (tmpl / "config.yaml").write_text("default\n")
    g = tmp_path / "guest" / "home"
    def cfg(h, script):
        return h.config(
            mounts=[{"source": str(home), "target": str(g), "type": "bind"}],
            seed=[{"target": str(g), "from": str(tmpl), "unless": "config.yaml"}],
            services=[{"name": "agent", "after": ["mounts"], "restart": "never",
                       "argv": ["sh", "-c", script]}, KEEP])
    hearth.start(cfg(hearth, f"echo 'tuned by the agent' > {g}/config.yaml; echo memory > {g}/notes; "
                     "echo done"))
    _wait_lines(hearth, "agent", 1)
    assert hearth.rpc("mounts.list")["seed"][0]["result"] == "seeded"
    hearth.stop()
    (tmp_path / "second").mkdir()
    h2 = type(hearth)(tmp_path / "second")
    try:
        h2.start(cfg(h2, f"cat {g}/config.yaml {g}/notes"))
        assert _wait_lines(h2, "agent", 2) == ["tuned by the agent", "memory"]
        assert h2.rpc("mounts.list")["seed"][0]["result"] == "already"
    finally:
        h2.stop()


def test_mount_already_in_place_is_left_alone(hearth, tmp_path):
    src = tmp_path / "host"
    src.mkdir()
    (src / "f").write_text("x")
    g = tmp_path / "guest" / "m"
    entry = {"source": str(src), "target": str(g), "type": "bind", "read_only": True}
    hearth.start(hearth.config(mounts=[entry, dict(entry)], services=[
        {"name": "look", "argv": ["sh", "-c", f"grep -c ' {g} ' /proc/self/mountinfo"],
         "after": ["mounts"], "restart": "never", "writable": [str(tmp_path)]}, KEEP]))
    ms = hearth.rpc("mounts.list")["mounts"]
    assert [m["state"] for m in ms] == ["mounted", "mounted"]
    assert "already" not in ms[0] and ms[1]["already"] is True
    # Mounted once, not stacked twice, in hearth's own namespace. (A
    # service's count here would also hold the copy its writable test
    # directory brings over its private /tmp.)
    with open(f"/proc/{hearth.pid}/mountinfo") as f:
        assert sum(1 for line in f if f" {g} " in line) == 1
    assert _wait_lines(hearth, "look", 1) in (["1"], ["2"])


def test_log_file_on_a_mount_is_opened_after_it(hearth, tmp_path):
    # The config loads before the mounts: a service's log file on the
    # agent's home mount must be opened when the service starts, on the
    # mount, not at load time in the directory the mount then hides.
    home = tmp_path / "home-host"
    (home / "logs").mkdir(parents=True)
    g = tmp_path / "guest"
    cfg = hearth.config(
        mounts=[{"source": str(home), "target": str(g / "home"), "type": "bind"}],
        services=[{"name": "agent", "after": ["mounts"], "restart": "never",
                   "argv": ["sh", "-c", "echo first line; sleep 1000"],
                   "log": {"file": str(g / "home" / "logs" / "agent.out")}}, KEEP])
    hearth.start(cfg)
    _wait_lines(hearth, "agent", 1)
    log = home / "logs" / "agent.out"
    hearth.wait_for(lambda: log.exists() and "first line" in log.read_text(), what="log on the mount")
    assert log.read_text().rstrip("\n").endswith(" first line")
    # Nothing landed under the mount point (the test sees what is beneath).
    assert not (g / "home" / "logs").exists()
    # A restart opens it again and appends.
    hearth.rpc("services.restart", {"name": "agent"})
    hearth.wait_for(lambda: log.read_text().count("first line") == 2, what="second start logged")


# The image's accounts as hearth reads them at boot (bound over its own
# /etc/passwd and /etc/group): the agent's user, its group and another.
OWNER_PASSWD = ("root:x:0:0:root:/root:/bin/sh\n"
                "agent:x:10000:10001:agent:/home/agent:/bin/sh\n")
OWNER_GROUP = "root:x:0:\nagent:x:10001:\nstaff:x:10002:\n"


def _accounts(tmp_path):
    passwd, group = tmp_path / "passwd", tmp_path / "group"
    passwd.write_text(OWNER_PASSWD)
    group.write_text(OWNER_GROUP)
    return [(passwd, "/etc/passwd"), (group, "/etc/group")]


def test_mount_owner_is_given_to_the_agent(hearth, tmp_path):
    """mounts[].owner: the root of each share belongs to the named user
    (and its group, or the one named) once mounted; what is below is left
    alone; a name the image's accounts do not know fails the mount."""
    hosts = {k: tmp_path / f"host-{k}" for k in ("user", "group", "num", "ghost", "same")}
    for d in hosts.values():
        d.mkdir()
    (hosts["user"] / "inside").mkdir()
    os.chown(hosts["same"], 10000, 10001)
    g = tmp_path / "guest"
    owners = {"user": "agent", "group": "agent:staff", "num": "10005:10006", "ghost": "ghost",
              "same": "agent"}
    mounts = [{"source": str(hosts[k]), "target": str(g / k), "type": "bind", "owner": owners[k],
               "required": k != "ghost"} for k in owners]
    hearth.start(hearth.config(mounts=mounts, services=[KEEP]), binds=_accounts(tmp_path))
    hearth.wait_for(lambda: hearth.rpc("status")["phases"]["mounts"], what="mounts phase")

    def owner(p):
        st = os.lstat(p)
        return (st.st_uid, st.st_gid)

    assert owner(hosts["user"]) == (10000, 10001)
    assert owner(hosts["group"]) == (10000, 10002)
    assert owner(hosts["num"]) == (10005, 10006)
    assert owner(hosts["same"]) == (10000, 10001)
    assert owner(hosts["user"] / "inside") == (0, 0), "only the share's root is given"
    assert owner(hosts["ghost"]) == (0, 0)
    for k in ("user", "group", "num", "same"):
        m = _mount(hearth, str(g / k))
        assert (m["state"], m["owner"]) == ("mounted", owners[k]), m
    ghost = _mount(hearth, str(g / "ghost"))
    assert ghost["state"] == "failed" and ghost["owner"] == "ghost", ghost
    assert 'owner ghost: no user "ghost" in the image\'s /etc/passwd' in ghost["error"], ghost
    # The failed share was taken away again: nothing is mounted there.
    assert all(not l.split()[4] == str(g / "ghost")
               for l in open(f"/proc/{hearth.pid}/mountinfo").read().splitlines())
    log = hearth.log_text()
    assert f"mount {g / 'user'}: its root given to agent (10000:10001)" in log
    assert f"mount {g / 'same'}: its root given" not in log, "unchanged when it already matches"


def test_bad_owner_is_refused_with_its_path(tmp_path):
    from conftest import HEARTH
    import json
    cases = [
        ({"mounts": [{"source": "/a", "target": "/b", "type": "bind", "owner": "a b"}]},
         "mounts[0].owner"),
        ({"mounts": [{"source": "/a", "target": "/b", "type": "bind", "owner": "a:"}]},
         "mounts[0].owner"),
        ({"mounts": [{"source": "/a", "target": "/b", "type": "bind", "owner": "a:b:c"}]},
         "mounts[0].owner"),
        ({"mounts": [{"source": "/a", "target": "/b", "type": "bind", "owner": "a",
                      "read_only": True}]}, "mounts[0].owner"),
        ({"host_mounts_rule": {"owner": "a,b"}}, "host_mounts_rule.owner"),
        ({"seed": [{"target": "/h", "from": "/t", "user": "x/y"}]}, "seed[0].user"),
        ({"seed": [{"target": "/h", "from": "/t", "group": ""}]}, "seed[0].group"),
    ]
    for cfg, path in cases:
        p = tmp_path / "c.json"
        p.write_text(json.dumps(cfg))
        r = subprocess.run([HEARTH, "--check-config", str(p)], capture_output=True, text=True)
        assert r.returncode != 0 and path in r.stderr, (cfg, r.stdout, r.stderr)
