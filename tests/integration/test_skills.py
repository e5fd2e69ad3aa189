"""The public-skills overlay on bind-mounted temp "host" directories: the
public share read-only, the private skills inside the agent's home."""
import os
import subprocess

import pytest

from conftest import HEARTHCTL

KEEP = {"name": "keep", "argv": ["sleep", "1000"], "main": True}


def _setup(tmp_path, public=("alpha", "beta", "gamma"), poll_ms=0):
    pub, home = tmp_path / "host-skills", tmp_path / "host-home"
    for n in public:
        (pub / n).mkdir(parents=True)
        (pub / n / "SKILL.md").write_text(f"# {n} (public)\n")
    (pub / "._alpha").write_text("resource fork")
    (pub / ".DS_Store").write_text("finder")
    (home / "skills").mkdir(parents=True)
    g = tmp_path / "guest"
    skills = {"public": str(g / "skills"), "private": str(g / "home" / "skills"),
              "ignore": ["._*", ".DS_Store"]}
    if poll_ms:
        skills["poll_ms"] = poll_ms
    extra = dict(
        mounts=[{"source": str(home), "target": str(g / "home"), "type": "bind"},
                {"source": str(pub), "target": str(g / "skills"), "type": "bind",
                 "read_only": True}],
        skills=skills)
    return pub, home / "skills", g, extra


def _ctl(h, *args):
    return subprocess.run([HEARTHCTL, "--connect", "unix:" + h.sock, *args],
                          capture_output=True, text=True, timeout=10)


@pytest.mark.valgrind
def test_overlay_rules(hearth, tmp_path):
    pub, priv, g, extra = _setup(tmp_path)
    # A private skill of the same name, and a regular file named like one.
    (priv / "beta").mkdir()
    (priv / "beta" / "SKILL.md").write_text("# beta (mine)\n")
    (priv / "gamma").write_text("not a directory, still mine\n")
    (priv / "own").mkdir()
    hearth.start(hearth.config(services=[
        {"name": "agent", "after": ["mounts", "skills"], "argv": ["sleep", "1000"]}], **extra))
    hearth.wait_for(lambda: hearth.service("agent")["state"] == "running", what="agent")
    assert os.readlink(priv / "alpha") == str(g / "skills" / "alpha")
    assert (priv / "beta" / "SKILL.md").read_text() == "# beta (mine)\n"
    assert (priv / "gamma").read_text() == "not a directory, still mine\n"
    assert not os.path.lexists(priv / "._alpha")
    assert not os.path.lexists(priv / ".DS_Store")
    assert sorted(os.listdir(priv)) == ["alpha", "beta", "gamma", "own"]
    # Nothing was written to the public share.
    assert sorted(os.listdir(pub)) == [".DS_Store", "._alpha", "alpha", "beta", "gamma"]
    sl = hearth.rpc("skills.list")
    assert sorted(sl["public"]) == ["alpha", "beta", "gamma"]
    assert sl["linked"] == ["alpha"]
    assert sorted(sl["shadowed"]) == ["beta", "gamma"]
    assert sorted(sl["private"]) == ["beta", "gamma", "own"]
    assert sorted(sl["ignored"]) == [".DS_Store", "._alpha"]
    assert sl["last"]["trigger"] == "boot" and sl["last"]["created"] == 1
    assert hearth.rpc("status")["phases"]["skills"] is True


@pytest.mark.valgrind
def test_sync_links_new_and_removes_stale(hearth, tmp_path):
    pub, priv, g, extra = _setup(tmp_path)
    hearth.start(hearth.config(services=[KEEP], **extra))
    hearth.wait_for(lambda: os.path.islink(priv / "beta"), what="first overlay")
    (pub / "delta").mkdir()
    (pub / "beta" / "SKILL.md").unlink()
    (pub / "beta").rmdir()
    r = hearth.rpc("skills.sync")
    assert r["trigger"] == "sync" and r["errors"] == 0
    assert os.readlink(priv / "delta") == str(g / "skills" / "delta")
    assert not os.path.lexists(priv / "beta")
    assert sorted(os.listdir(priv)) == ["alpha", "delta", "gamma"]
    # A second sync has nothing to do.
    r = hearth.rpc("skills.sync")
    assert r["created"] == 0 and r["removed"] == 0 and r["linked"] == 3
    assert r["runs"] >= 3 and r["duration_us"] >= 0


def test_poll_picks_up_changes(hearth, tmp_path):
    pub, priv, g, extra = _setup(tmp_path, poll_ms=100)
    hearth.start(hearth.config(services=[KEEP], **extra))
    hearth.wait_for(lambda: os.path.islink(priv / "alpha"), what="first overlay")
    # With nothing changing, the timer alone keeps reconciling.
    hearth.wait_for(lambda: hearth.rpc("skills.list")["last"]["trigger"] == "poll",
                    what="a poll run")
    runs = hearth.rpc("skills.list")["last"]["runs"]
    hearth.wait_for(lambda: hearth.rpc("skills.list")["last"]["runs"] >= runs + 2,
                    what="more poll runs")
    (pub / "epsilon").mkdir()
    hearth.wait_for(lambda: os.path.islink(priv / "epsilon"), what="new skill picked up")
    assert hearth.rpc("skills.list")["last"]["trigger"] in ("poll", "inotify")


def test_inotify_picks_up_changes_without_polling(hearth, tmp_path):
    pub, priv, g, extra = _setup(tmp_path)
    hearth.start(hearth.config(services=[KEEP], **extra))
    hearth.wait_for(lambda: os.path.islink(priv / "alpha"), what="first overlay")
    if not hearth.rpc("skills.list")["inotify"]:
        import pytest
        pytest.skip("no inotify on this filesystem")
    (pub / "zeta").mkdir()
    hearth.wait_for(lambda: os.path.islink(priv / "zeta"), what="new skill via inotify")
    assert hearth.rpc("skills.list")["last"]["trigger"] == "inotify"


@pytest.mark.valgrind
def test_fork_gives_a_private_copy(hearth, tmp_path):
    pub, priv, g, extra = _setup(tmp_path)
    (pub / "alpha" / "lib").mkdir()
    (pub / "alpha" / "lib" / "tool.py").write_text("print(1)\n")
    hearth.start(hearth.config(services=[KEEP], **extra))
    hearth.wait_for(lambda: os.path.islink(priv / "alpha"), what="first overlay")
    c = hearth.client()
    e = c.call("skills.fork", {"name": "nope"})["error"]
    assert e["code"] == -32002
    e = c.call("skills.fork", {"name": "a/b"})["error"]
    assert e["code"] == -32602 and e["message"].startswith("name:")
    e = c.call("skills.fork", {})["error"]
    assert e["code"] == -32602 and e["message"].startswith("name:")
    c.close()
    out = _ctl(hearth, "skills", "fork", "alpha")
    assert out.returncode == 0, out.stderr
    assert "forked alpha" in out.stdout
    assert not os.path.islink(priv / "alpha") and (priv / "alpha").is_dir()
    assert (priv / "alpha" / "lib" / "tool.py").read_text() == "print(1)\n"
    assert (priv / "alpha" / "SKILL.md").read_text() == "# alpha (public)\n"
    assert not os.path.lexists(priv / ".hearth-fork.tmp")
    sl = hearth.rpc("skills.list")
    assert "alpha" in sl["shadowed"] and "alpha" not in sl["linked"]
    # The private copy survives later reconciles, and cannot be forked again.
    hearth.rpc("skills.sync")
    assert (priv / "alpha").is_dir() and not os.path.islink(priv / "alpha")
    out = _ctl(hearth, "skills", "fork", "alpha")
    assert out.returncode == 1 and "already private" in out.stderr


def test_agent_edits_forked_skill_but_not_public(hearth, tmp_path):
    pub, priv, g, extra = _setup(tmp_path)
    probe = (f"sleep 0.5; echo x >> {g}/home/skills/beta/SKILL.md 2>/dev/null && echo linked-writable "
             f"|| echo linked-readonly; while [ -L {g}/home/skills/beta ]; do sleep 0.05; done; "
             f"echo '# beta (edited)' > {g}/home/skills/beta/SKILL.md && echo fork-writable")
    hearth.start(hearth.config(services=[
        KEEP, {"name": "agent", "after": ["skills"], "restart": "never",
               "argv": ["sh", "-c", probe]}], **extra))
    lines = lambda: [l["line"] for l in hearth.rpc("logs.read", {"name": "agent"})["lines"]]
    hearth.wait_for(lambda: "linked-readonly" in lines(), what="write through the link refused")
    hearth.rpc("skills.fork", {"name": "beta"})
    hearth.wait_for(lambda: "fork-writable" in lines(), what="write into the fork")
    assert (priv / "beta" / "SKILL.md").read_text() == "# beta (edited)\n"
    assert (pub / "beta" / "SKILL.md").read_text() == "# beta (public)\n"


def test_hearthctl_mounts_and_skills(hearth, tmp_path):
    pub, priv, g, extra = _setup(tmp_path)
    hearth.start(hearth.config(services=[KEEP], **extra))
    hearth.wait_for(lambda: os.path.islink(priv / "alpha"), what="first overlay")
    out = _ctl(hearth, "mounts")
    assert out.returncode == 0, out.stderr
    rows = out.stdout.splitlines()
    assert rows[0].split() == ["TARGET", "TYPE", "SOURCE", "STATE"]
    assert rows[2].split()[:4] == [str(g / "skills"), "bind", str(pub), "mounted"]
    assert "(ro)" in rows[2]
    out = _ctl(hearth, "skills")
    assert out.returncode == 0, out.stderr
    assert "linked    3: " in out.stdout and "ignored   2: " in out.stdout
    out = _ctl(hearth, "skills", "sync")
    assert out.returncode == 0 and out.stdout.startswith("last sync: sync, linked 3")
    out = _ctl(hearth, "skills", "fork")
    assert out.returncode == 2 and "missing skill NAME" in out.stderr


def test_skills_off_without_config(hearth, tmp_path):
    hearth.start(hearth.config(services=[KEEP]))
    c = hearth.client()
    e = c.call("skills.sync")["error"]
    assert e["code"] == -32003 and "not configured" in e["message"]
    assert c.result("status")["phases"]["skills"] is True
    c.close()


def test_overlay_waits_for_a_late_home(hearth, tmp_path):
    pub, priv, g, extra = _setup(tmp_path)
    home = tmp_path / "host-home"
    os.rename(home, tmp_path / "later")
    extra["mounts"][0]["timeout_ms"] = 20000
    hearth.start(hearth.config(services=[
        KEEP, {"name": "agent", "after": ["skills"], "argv": ["sleep", "1000"]}], **extra))
    c = hearth.client()
    e = c.call("skills.sync")["error"]
    assert e["code"] == -32003 and "after mounts" in e["message"]
    st = c.result("status")
    assert st["phases"]["skills"] is False and st["phases"]["mounts"] is False
    c.close()
    assert hearth.service("agent")["state"] == "waiting"
    # Nothing was written into the image's directory under the mount point.
    assert not os.path.exists(g / "home" / "skills")
    os.rename(tmp_path / "later", home)
    hearth.wait_for(lambda: hearth.service("agent")["state"] == "running", what="agent")
    assert os.readlink(priv / "alpha") == str(g / "skills" / "alpha")
