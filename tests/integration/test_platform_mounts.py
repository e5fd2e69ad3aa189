"""Platform mounts (`mounts[].type: "platform"`): a mount hearth does not
make but waits for, as CubeSandbox's agent binds the agent's home into the
container after a snapshot restore. The test plays the platform: it
bind-mounts temp "host" directories into hearth's own mount namespace
from outside (nsenter), unmounts them and mounts others over them."""
import json
import os
import subprocess
import time

from conftest import HEARTH, HEARTHCTL

KEEP = {"name": "keep", "argv": ["sleep", "1000"], "main": True}


def _events(client, want, timeout=15.0):
    """Reads notifications until want(params) has matched; returns all read."""
    seen = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg = client.read_line()
        if msg.get("method") != "event":
            continue
        p = msg["params"]
        seen.append(p)
        if want(p):
            return seen
    raise AssertionError(f"event not seen; got {seen}")


def _ns(h, *cmd):
    """Runs cmd in hearth's mount namespace, as the platform's agent does
    (and its pid namespace: the /proc mounted there is that namespace's,
    where umount looks for /proc/self/mountinfo)."""
    r = subprocess.run(["nsenter", "-t", str(h.pid), "-m", "-p", *cmd], capture_output=True,
                       text=True, timeout=10)
    assert r.returncode == 0, f"{cmd}: {r.stderr}"


def _mount(h, target):
    for m in h.rpc("mounts.list")["mounts"]:
        if m["target"] == str(target):
            return m
    raise KeyError(target)


def _lines(h, name):
    return [l["line"] for l in h.rpc("logs.read", {"name": name, "lines": 100})["lines"]]


def _setup(tmp_path):
    """The image's own home (with a file of its own), a template, a public
    skill, and the config: the home a platform mount, seeded, with the
    skills overlay in it and an agent after mounts and skills."""
    g = tmp_path / "guest"
    (g / "home").mkdir(parents=True)
    (g / "home" / "image-file").write_text("the image's\n")
    tmpl = tmp_path / "tmpl"
    (tmpl / "skills").mkdir(parents=True)
    (tmpl / "config.yaml").write_text("model: default\n")
    pub = tmp_path / "public"
    (pub / "alpha").mkdir(parents=True)
    (pub / "alpha" / "SKILL.md").write_text("# alpha\n")
    home = g / "home"
    agent = {"name": "agent", "after": ["mounts", "skills"],
             "argv": ["sh", "-c", f"cat {home}/config.yaml; echo $$ > {home}/agent.pid; "
                                  "exec sleep 1000"]}
    extra = dict(
        mounts=[{"type": "platform", "target": str(home), "timeout_ms": 300}],
        seed=[{"target": str(home), "from": str(tmpl), "unless": "config.yaml"}],
        skills={"public": str(pub), "private": str(home / "skills")})
    return g, home, pub, agent, extra


def test_services_wait_until_the_platform_mounts_the_home(hearth, tmp_path):
    g, home, pub, agent, extra = _setup(tmp_path)
    host = tmp_path / "host-home"
    host.mkdir()
    hearth.start(hearth.config(services=[agent, KEEP], **extra))
    c = hearth.client()
    c.result("events.subscribe", {"since": 0})
    # timeout_ms passes: late, said in status and an event; still waiting.
    late = _events(c, lambda p: p["type"] == "mount.late")[-1]
    assert late["target"] == str(home) and late["timeout_ms"] == 300 and late["waited_ms"] >= 300
    st = hearth.rpc("status")
    assert st["phases"]["mounts"] is False and st["phases"]["skills"] is False
    assert st["mounts"]["waiting"] == 1 and st["mounts"]["waiting_for"] == [str(home)]
    assert st["mounts"]["late"] == [str(home)]
    a = hearth.service("agent")
    assert a["state"] == "waiting" and a["waiting_for"] == "mounts" and not a["pid"]
    m = _mount(hearth, home)
    assert m["type"] == "platform" and m["state"] == "waiting" and "source" not in m
    assert m["late"] is True and m["changes"] == 0 and "mount_id" not in m
    # hearthctl says what it waits for.
    out = subprocess.run([HEARTHCTL, "--connect", "unix:" + hearth.sock, "status"],
                         capture_output=True, text=True, timeout=10)
    assert f"mounts: waiting for the platform to mount {home} (late)" in out.stdout, out.stdout
    # Nothing was seeded or linked into the image's own directory.
    assert os.listdir(home) == ["image-file"]
    assert hearth.rpc("mounts.list")["seed"] == []
    err = c.error("skills.sync")
    assert "after mounts and seeding" in err["message"]

    boot_id = hearth.rpc("status")["identity"]
    assert boot_id["generation"] == 0 and boot_id["cause"] == "boot"

    # The platform binds the host directory over it.
    _ns(hearth, "mount", "--bind", str(host), str(home))
    seen = _events(c, lambda p: p["type"] == "service.state" and p["service"] == "agent"
                   and p["state"] == "starting")
    ev = [p for p in seen if p["type"] == "mount.changed"][-1]
    # A home that arrives after start is a restored copy's: its identity is
    # made anew before anything is seeded and before the agent starts.
    ids = [p for p in seen if p["type"] == "identity"]
    assert len(ids) == 1, ids
    assert ids[0]["cause"] == "platform_mounts" and ids[0]["generation"] == 1
    assert ids[0]["instance_id"] != boot_id["instance_id"]
    assert seen.index(ev) < seen.index(ids[0]) < seen.index(seen[-1])
    assert ev["target"] == str(home) and ev["change"] == "appeared" and ev["changes"] == 1
    assert ev["mount_id"] > 0 and ev["mounted_from"].endswith("/host-home")
    assert "previous_mount_id" not in ev
    hearth.wait_for(lambda: hearth.service("agent")["state"] == "running", what="agent running")
    assert hearth.rpc("status")["identity"]["instance_id"] == ids[0]["instance_id"]
    assert (host / "config.yaml").read_text() == "model: default\n"
    assert os.readlink(host / "skills" / "alpha") == str(pub / "alpha")
    hearth.wait_for(lambda: _lines(hearth, "agent") == ["model: default"], what="agent output")
    hearth.wait_for(lambda: (host / "agent.pid").exists(), what="the agent's file in the home")
    st = hearth.rpc("status")
    assert st["phases"]["mounts"] is True and st["phases"]["skills"] is True
    assert st["mounts"]["waiting"] == 0 and st["mounts"]["waiting_for"] == []
    assert "late" not in st["mounts"]
    m = _mount(hearth, home)
    assert m["state"] == "mounted" and m["changes"] == 1 and m["last_change"] == "appeared"
    assert m["mount_id"] == ev["mount_id"] and m["mounted_from"] == ev["mounted_from"]
    assert m["late"] is False and 0 <= m["last_change_ms"] < 60000
    assert hearth.rpc("mounts.list")["seed"][0]["result"] == "seeded"
    # Still nothing in the image's directory: everything went to the mount.
    assert os.listdir(home) == ["image-file"]
    c.close()


def test_unmounted_home_stops_the_agent_and_a_new_one_restarts_it(hearth, tmp_path):
    g, home, pub, agent, extra = _setup(tmp_path)
    first, second, third = (tmp_path / n for n in ("host-1", "host-2", "host-3"))
    for d in (first, second, third):
        d.mkdir()
    (first / "config.yaml").write_text("model: first\n")
    # The agent's web UI runs on it too (after the agent, not after mounts).
    web = {"name": "web", "after": ["agent"], "argv": ["sleep", "1000"]}
    # One that keeps failing sits in a long backoff when the home goes.
    flaky = {"name": "flaky", "after": ["mounts"], "argv": ["false"],
             "backoff": {"initial_ms": 60000, "max_ms": 60000}}
    # There before hearth starts (a runtime's -v): in place, no change.
    hearth.start(hearth.config(services=[agent, web, flaky, KEEP], **extra),
                 binds=[(first, home)])
    hearth.wait_for(lambda: hearth.service("web")["state"] == "running", what="web running")
    hearth.wait_for(lambda: hearth.service("flaky")["state"] == "backoff", what="flaky backoff")
    web_pid = hearth.service("web")["pid"]
    m = _mount(hearth, home)
    assert m["state"] == "mounted" and m["already"] is True and m["changes"] == 0
    assert m["mounted_from"].endswith("/host-1") and "last_change" not in m
    assert hearth.rpc("mounts.list")["seed"][0]["result"] == "already"
    hearth.wait_for(lambda: (first / "agent.pid").exists(), what="the agent's file")
    pid = hearth.service("agent")["pid"]
    c = hearth.client()
    c.result("events.subscribe", {})

    # The platform takes it away: the agent is stopped, not failed, and waits.
    _ns(hearth, "umount", "-l", str(home))
    seen = _events(c, lambda p: p["type"] == "service.state" and p["service"] == "agent"
                   and p["state"] == "waiting")
    gone = [p for p in seen if p["type"] == "mount.changed"]
    assert [(p["change"], p["target"]) for p in gone] == [("gone", str(home))]
    assert gone[0]["previous_mount_id"] == m["mount_id"] and "mount_id" not in gone[0]
    assert gone[0]["previous_from"].endswith("/host-1")
    rev = [p for p in seen if p["type"] == "phase.reached"]
    assert rev and rev[0]["phase"] == "mounts" and rev[0]["reached"] is False
    assert rev[0]["revoked"] is True and str(home) in rev[0]["reason"]
    stop = [p for p in seen if p["type"] == "service.state" and p["service"] == "agent"]
    assert stop[0]["from"] == "running" and stop[0]["state"] == "stopping"
    assert stop[0]["cause"] == "revoked"
    a = hearth.service("agent")
    assert a["state"] == "waiting" and a["waiting_for"] == "mounts" and a["restarts"] == 0
    assert "error" not in a
    # What runs on the agent is stopped with it, and waits for it.
    hearth.wait_for(lambda: hearth.service("web")["state"] == "waiting", what="web waiting")
    w = hearth.service("web")
    assert w["waiting_for"] == "agent" and w["restarts"] == 0 and not w["pid"]
    # Its backoff cut short: it waits for the home as well, not stopped.
    f = hearth.service("flaky")
    assert f["state"] == "waiting" and f["waiting_for"] == "mounts" and f["restarts"] == 1
    st = hearth.rpc("status")
    assert st["phases"]["mounts"] is False and st["mounts"]["waiting_for"] == [str(home)]
    m = _mount(hearth, home)
    assert m["state"] == "waiting" and m["last_change"] == "gone" and m["changes"] == 1
    time.sleep(0.3)
    assert hearth.service("agent")["state"] == "waiting"
    # The main service outlived it: the container did not end.
    assert hearth.service("keep")["state"] == "running"

    # Another, empty, home comes: seeded, and the agent starts again on it.
    _ns(hearth, "mount", "--bind", str(second), str(home))
    hearth.wait_for(lambda: (lambda s: s["state"] == "running" and s["pid"] != pid)(
        hearth.service("agent")), what="agent running again")
    assert (second / "config.yaml").read_text() == "model: default\n"
    assert os.readlink(second / "skills" / "alpha") == str(pub / "alpha")
    hearth.wait_for(lambda: (second / "agent.pid").exists(), what="the agent's file")
    m = _mount(hearth, home)
    assert m["last_change"] == "appeared" and m["changes"] == 2
    assert m["mounted_from"].endswith("/host-2")
    pid = hearth.service("agent")["pid"]
    hearth.wait_for(lambda: (lambda s: s["state"] == "running" and s["pid"] != web_pid)(
        hearth.service("web")), what="web running again")
    # Started again at once, not at the end of its backoff: it fails again.
    hearth.wait_for(lambda: hearth.service("flaky")["restarts"] == 2, what="flaky run again")

    # A third is mounted over it: replaced, the agent restarted on it.
    _ns(hearth, "mount", "--bind", str(third), str(home))
    seen = _events(c, lambda p: p["type"] == "mount.changed" and p["change"] == "replaced")
    rep = seen[-1]
    assert rep["previous_from"].endswith("/host-2") and rep["mounted_from"].endswith("/host-3")
    assert rep["mount_id"] != rep["previous_mount_id"] and rep["changes"] == 3
    hearth.wait_for(lambda: (lambda s: s["state"] == "running" and s["pid"] != pid)(
        hearth.service("agent")), what="agent running on the third home")
    hearth.wait_for(lambda: (third / "agent.pid").exists(), what="the agent's file")
    assert (third / "config.yaml").read_text() == "model: default\n"
    assert hearth.service("agent")["restarts"] == 0
    assert hearth.rpc("status")["phases"]["mounts"] is True
    # A home there from the start (a runtime's -v) is no restore: however it
    # changes later, the identity stays the boot's.
    assert hearth.rpc("status")["identity"]["generation"] == 0
    assert not [p for p in seen if p["type"] == "identity"]
    # The image's directory under them all was never written.
    assert os.listdir(home) == ["image-file"]
    c.close()


def test_mount_table_is_watched_not_polled(hearth, tmp_path):
    """The appearance is noticed at once (the mountinfo watch), and an idle
    hearth with a platform mount to wait for does not wake up: its CPU
    time stays flat while it waits."""
    g, home, pub, agent, extra = _setup(tmp_path)
    del extra["mounts"][0]["timeout_ms"]
    host = tmp_path / "host-home"
    host.mkdir()
    hearth.start(hearth.config(services=[agent, KEEP], **extra))
    hearth.wait_for(lambda: hearth.service("keep")["state"] == "running", what="keep running")
    assert "late" not in _mount(hearth, home) or _mount(hearth, home)["late"] is False
    time.sleep(0.5)

    def cpu():
        f = open(f"/proc/{hearth.pid}/stat").read().rsplit(")", 1)[1].split()
        return int(f[11]) + int(f[12])  # utime + stime, in ticks

    before = cpu()
    time.sleep(2)
    assert cpu() - before <= 2, "hearth kept waking up while it waited"
    t0 = time.monotonic()
    _ns(hearth, "mount", "--bind", str(host), str(home))
    hearth.wait_for(lambda: _mount(hearth, home)["state"] == "mounted", what="mounted")
    assert time.monotonic() - t0 < 2
    assert "unable to watch the mount table" not in hearth.log_text()


def test_nested_mount_waits_for_the_platform_mount(hearth, tmp_path):
    """A mount of hearth's under a platform mount's target is made only
    once the platform's is there (made before, it would be hidden), and
    again when a new one replaces it."""
    g, home, pub, agent, extra = _setup(tmp_path)
    cache = tmp_path / "host-cache"
    cache.mkdir()
    (cache / "c.txt").write_text("cached\n")
    host = tmp_path / "host-home"
    host.mkdir()
    extra["mounts"].append({"source": str(cache), "target": str(home / "cache"), "type": "bind",
                            "read_only": True})
    hearth.start(hearth.config(services=[agent, KEEP], **extra))
    hearth.wait_for(lambda: _mount(hearth, home / "cache")["state"] == "waiting", what="held")
    nested = _mount(hearth, home / "cache")
    assert nested["error"] == f"waiting for the platform mount at {home}"
    assert not (home / "cache").exists()
    _ns(hearth, "mount", "--bind", str(host), str(home))
    hearth.wait_for(lambda: hearth.service("agent")["state"] == "running", what="agent running")
    assert _mount(hearth, home / "cache")["state"] == "mounted"
    # Its mount point was made in the host's directory, not the image's.
    assert (host / "cache").is_dir() and not (home / "cache").exists()


def test_not_required_platform_mount_does_not_hold(hearth, tmp_path):
    g, home, pub, agent, extra = _setup(tmp_path)
    extra["mounts"][0]["required"] = False
    del extra["skills"]
    agent = {"name": "agent", "after": ["mounts"], "argv": ["sleep", "1000"]}
    hearth.start(hearth.config(services=[agent, KEEP], **extra))
    hearth.wait_for(lambda: hearth.rpc("status")["phases"]["mounts"], what="mounts reached")
    st = hearth.rpc("status")
    assert st["mounts"]["waiting"] == 0 and st["mounts"]["waiting_for"] == []
    assert _mount(hearth, home)["state"] == "waiting"
    # The seed into it is skipped rather than written into the image's directory.
    seed = hearth.wait_for(lambda: hearth.rpc("mounts.list")["seed"], what="seed report")[0]
    assert seed["result"] == "skipped"
    assert seed["error"] == f"the platform mount at {home} is not there"
    assert os.listdir(home) == ["image-file"]
    hearth.wait_for(lambda: hearth.service("agent")["state"] == "running", what="agent running")


def _check(tmp_path, mounts):
    p = tmp_path / "bad.json"
    p.write_text(json.dumps({"mounts": mounts}))
    return subprocess.run([HEARTH, "--check-config", str(p)], capture_output=True, text=True)


def test_bad_platform_mounts_are_refused_naming_the_key(tmp_path):
    ok = _check(tmp_path, [{"type": "platform", "target": "/root/.hermes", "owner": "0",
                            "required": True, "timeout_ms": 1}])
    assert ok.returncode == 0, ok.stdout + ok.stderr
    for entry, want in [
        ({"source": "/x"}, "mounts[1].source: not allowed in a platform mount"),
        ({"options": "ro"}, "mounts[1].options: not allowed in a platform mount"),
        ({"read_only": True}, "mounts[1].read_only: not allowed in a platform mount"),
        ({"timeout_ms": 0}, "mounts[1].timeout_ms: must be at least 1 in a platform mount"),
    ]:
        bad = [{"type": "tmpfs", "target": "/run/x"},
               dict({"type": "platform", "target": "/workspace"}, **entry)]
        r = _check(tmp_path, bad)
        assert r.returncode != 0 and want in r.stdout + r.stderr, (entry, r.stdout + r.stderr)
    r = _check(tmp_path, [{"type": "platform", "target": "/"}])
    assert "mounts[0].target: a platform mount cannot be at /" in r.stdout + r.stderr
    r = _check(tmp_path, [{"type": "platform", "target": "/workspace"},
                          {"type": "tmpfs", "target": "/workspace"}])
    assert ('mounts[1].target: "/workspace" is the target of the platform mount mounts[0]'
            in r.stdout + r.stderr), r.stdout + r.stderr
