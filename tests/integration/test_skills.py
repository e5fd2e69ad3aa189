"""The public-skills overlay on bind-mounted temp "host" directories: the
public share read-only, the private skills inside the agent's home."""
import os
import signal
import subprocess
import time

import pytest

from conftest import HEARTHCTL

KEEP = {"name": "keep", "argv": ["sleep", "1000"], "main": True}


def _setup(tmp_path, public=("alpha", "beta", "gamma"), poll_ms=0):
    pub, home = tmp_path / "host-skills", tmp_path / "host-home"
    pub.mkdir()
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


def _publish(pub, name, text=None):
    """Publishes a skill as a host would: made beside the share, then
    renamed in, so no run ever sees it without its SKILL.md (a directory
    without one is a category)."""
    tmp = pub.parent / (".new-" + name.replace("/", "-"))
    tmp.mkdir()
    (tmp / "SKILL.md").write_text(text or f"# {name} (public)\n")
    (pub / name).parent.mkdir(parents=True, exist_ok=True)
    os.rename(tmp, pub / name)


def _first_run(h, linked):
    """Waits for the first reconcile to have finished (the phase "skills"
    is reached then), not only for one of its links: the walk runs in a
    child and may still be making the others."""
    h.wait_for(lambda: linked() and h.rpc("status")["phases"]["skills"], what="first overlay")


def _paths(items):
    return sorted(e["path"] for e in items)


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
    assert _paths(sl["public"]) == ["alpha", "beta", "gamma"]
    assert sl["linked"] == [{"path": "alpha", "name": "alpha"}]
    # beta loses to the agent's skill, gamma to a file standing at its path.
    assert sorted(sl["shadowed"], key=lambda e: e["path"]) == [
        {"path": "beta", "name": "beta", "by": "beta"},
        {"path": "gamma", "name": "gamma", "by": "gamma"}]
    # Only the agent's skills: not its file, not its empty directory.
    assert sl["private"] == [{"path": "beta", "name": "beta"}]
    assert sl["clashes"] == [] and sl["other"] == []
    assert sorted(sl["ignored"]) == [".DS_Store", "._alpha"]
    assert sl["last"]["trigger"] == "boot" and sl["last"]["created"] == 1
    assert hearth.rpc("status")["phases"]["skills"] is True


@pytest.mark.valgrind
def test_sync_links_new_and_removes_stale(hearth, tmp_path):
    pub, priv, g, extra = _setup(tmp_path)
    hearth.start(hearth.config(services=[KEEP], **extra))
    _first_run(hearth, lambda: os.path.islink(priv / "beta"))
    _publish(pub, "delta")
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
    _first_run(hearth, lambda: os.path.islink(priv / "alpha"))
    # With nothing changing, the timer alone keeps reconciling.
    hearth.wait_for(lambda: hearth.rpc("skills.list")["last"]["trigger"] == "poll",
                    what="a poll run")
    runs = hearth.rpc("skills.list")["last"]["runs"]
    hearth.wait_for(lambda: hearth.rpc("skills.list")["last"]["runs"] >= runs + 2,
                    what="more poll runs")
    _publish(pub, "epsilon")
    hearth.wait_for(lambda: os.path.islink(priv / "epsilon"), what="new skill picked up")
    assert hearth.rpc("skills.list")["last"]["trigger"] in ("poll", "inotify")


def test_poll_stays_on_the_timer_grid(hearth, tmp_path):
    """Every poll lands on the shared timer grid (multiples of poll_ms on
    the wall clock, where the health checks of the same period land), not
    only the first. A repeating timer kept the phase of its first arming:
    after the loop was once late by more than a period (here: hearth
    stopped for 2.4 s), or after a clock step, the poll stayed off the grid
    for good, and a sandbox whose poll and health check had shared a
    wake-up paid two from then on (make soak found it)."""
    period = 1000
    pub, priv, g, extra = _setup(tmp_path, poll_ms=period)
    hearth.start(hearth.config(services=[KEEP], **extra))
    _first_run(hearth, lambda: os.path.islink(priv / "alpha"))

    def polls(n):
        """The wall-clock ms at which each of the next n poll runs began
        (a run's time_ms is when its walk ended; less its duration_us,
        when the timer started it, however long a loaded machine made the
        walk)."""
        seen, last = [], hearth.rpc("skills.list")["last"]["runs"]
        deadline = time.monotonic() + 15
        while len(seen) < n and time.monotonic() < deadline:
            r = hearth.rpc("skills.list")["last"]
            if r["runs"] != last and r["trigger"] == "poll":
                seen.append(r["time_ms"] - r["duration_us"] // 1000)
            last = r["runs"]
            time.sleep(0.05)
        assert len(seen) == n, seen
        return seen

    def phase(ms):
        return ms % period

    # On the grid from the start: within 150 ms after a multiple of 1 s.
    assert all(phase(t) < 150 for t in polls(2)), "the first polls are on the grid"
    # Stopped 2.3 s, continued 400 ms past a grid point: the poll due
    # meanwhile runs at once, off the grid, as it must. (Late by less
    # than a period, a repeating timer kept its phase: libev restarts
    # the repeat from the late moment only past a whole period.)
    time.sleep((period - time.time() * 1000 % period) / 1000.0 + 0.1)
    hearth.signal(signal.SIGSTOP)
    time.sleep(2.3)
    hearth.signal(signal.SIGCONT)
    late = polls(3)
    # The ones after it are back on the grid.
    assert all(phase(t) < 150 for t in late[1:]), late


def test_inotify_picks_up_changes_without_polling(hearth, tmp_path):
    pub, priv, g, extra = _setup(tmp_path)
    hearth.start(hearth.config(services=[KEEP], **extra))
    _first_run(hearth, lambda: os.path.islink(priv / "alpha"))
    if not hearth.rpc("skills.list")["inotify"]:
        import pytest
        pytest.skip("no inotify on this filesystem")
    _publish(pub, "zeta")
    hearth.wait_for(lambda: os.path.islink(priv / "zeta"), what="new skill via inotify")
    assert hearth.rpc("skills.list")["last"]["trigger"] == "inotify"


@pytest.mark.valgrind
def test_fork_gives_a_private_copy(hearth, tmp_path):
    pub, priv, g, extra = _setup(tmp_path)
    (pub / "alpha" / "lib").mkdir()
    (pub / "alpha" / "lib" / "tool.py").write_text("print(1)\n")
    hearth.start(hearth.config(services=[KEEP], **extra))
    _first_run(hearth, lambda: os.path.islink(priv / "alpha"))
    c = hearth.client()
    e = c.call("skills.fork", {"name": "nope"})["error"]
    assert e["code"] == -32002
    e = c.call("skills.fork", {"name": "a/../b"})["error"]
    assert e["code"] == -32602 and e["message"].startswith("name:")
    e = c.call("skills.fork", {"name": "a/b/c"})["error"]  # deeper than skills.depth
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
    assert {"path": "alpha", "name": "alpha", "by": "alpha"} in sl["shadowed"]
    assert "alpha" not in _paths(sl["linked"])
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
    _first_run(hearth, lambda: os.path.islink(priv / "alpha"))
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


# ---------------------------------------------------------------------------
# The two-level layout: skills/<category>/<skill>/SKILL.md beside flat skills.

def _cat_setup(tmp_path, **skills_keys):
    pub, priv, g, extra = _setup(tmp_path, public=("alpha",))
    for n in ("devops/deploy", "devops/backup", "data/query"):
        (pub / n).mkdir(parents=True)
        (pub / n / "SKILL.md").write_text(f"# {n} (public)\n")
    (pub / "devops" / "DESCRIPTION.md").write_text("devops tools\n")
    (pub / ".hub").mkdir()
    (pub / ".bundled_manifest").write_text("public manifest\n")
    extra["skills"].update(skills_keys)
    return pub, priv, g, extra


@pytest.mark.valgrind
def test_categories_merged_skill_by_skill(hearth, tmp_path):
    pub, priv, g, extra = _cat_setup(tmp_path)
    # Hermes's own: a bundled devops category with a skill of the same
    # name as a public one, its hub state, its manifest, a private category.
    (priv / "devops" / "backup").mkdir(parents=True)
    (priv / "devops" / "backup" / "SKILL.md").write_text("# backup (mine)\n")
    (priv / ".hub").mkdir()
    (priv / ".hub" / "lock.json").write_text("{}\n")
    (priv / ".bundled_manifest").write_text("mine\n")
    (priv / "mine" / "tool").mkdir(parents=True)
    (priv / "mine" / "tool" / "SKILL.md").write_text("# tool\n")
    hearth.start(hearth.config(services=[KEEP], **extra))
    _first_run(hearth, lambda: os.path.islink(priv / "devops" / "deploy"))
    assert os.readlink(priv / "devops" / "deploy") == str(g / "skills" / "devops" / "deploy")
    assert (priv / "devops" / "backup" / "SKILL.md").read_text() == "# backup (mine)\n"
    assert os.readlink(priv / "data" / "query") == str(g / "skills" / "data" / "query")
    assert (priv / "data").is_dir() and not os.path.islink(priv / "data")
    assert (priv / "data" / ".hearth-category").exists()       # made by hearth
    assert not (priv / "devops" / ".hearth-category").exists()  # the agent's
    assert os.readlink(priv / "alpha") == str(g / "skills" / "alpha")
    assert (priv / ".bundled_manifest").read_text() == "mine\n"
    assert os.listdir(priv / ".hub") == ["lock.json"]
    assert os.listdir(priv / "mine") == ["tool"]
    sl = hearth.rpc("skills.list")
    # Skills only: the category's DESCRIPTION.md is linked but listed
    # apart, and no category is listed as a skill.
    assert _paths(sl["public"]) == ["alpha", "data/query", "devops/backup", "devops/deploy"]
    assert sl["other"] == ["devops/DESCRIPTION.md"]
    assert os.readlink(priv / "devops" / "DESCRIPTION.md") == str(
        g / "skills" / "devops" / "DESCRIPTION.md")
    assert sl["shadowed"] == [{"path": "devops/backup", "name": "backup", "by": "devops/backup"}]
    assert _paths(sl["linked"]) == ["alpha", "data/query", "devops/deploy"]
    assert sorted(sl["ignored"]) == [".DS_Store", "._alpha", ".bundled_manifest", ".hub"]
    cats = {c["name"]: c["private"] for c in sl["categories"]}
    assert cats == {"devops": "own", "data": "hearth"}
    assert sl["marker"] == "SKILL.md" and sl["depth"] == 2 and sl["pending"] == 0
    assert sorted(sl["private"], key=lambda e: e["path"]) == [
                             {"path": "devops/backup", "name": "backup"},
                             {"path": "mine/tool", "name": "tool"}]
    for lst in ("public", "private", "linked", "shadowed"):
        paths = [e["path"] for e in sl[lst]]
        assert not [p for p in paths if p.endswith(".md") or p in ("devops", "data", "mine")], \
            (lst, paths)
    r = hearth.rpc("skills.sync")
    assert r["created"] == 0 and r["removed"] == 0 and r["categories"] == 2
    # A public skill gone: its link goes. A public category gone: hearth's
    # directory goes once empty; the agent's own never does.
    import shutil
    shutil.rmtree(pub / "data")
    shutil.rmtree(pub / "devops")
    r = hearth.rpc("skills.sync")
    assert r["errors"] == 0 and r["categories_removed"] == 1
    assert not os.path.lexists(priv / "data")
    assert sorted(os.listdir(priv / "devops")) == ["backup"]
    assert sorted(os.listdir(priv)) == [".bundled_manifest", ".hub", "alpha", "devops", "mine"]
    # Nothing was ever written to the public share.
    assert sorted(os.listdir(pub)) == [".DS_Store", "._alpha", ".bundled_manifest", ".hub",
                                       "alpha"]


def test_fork_a_category_skill(hearth, tmp_path):
    pub, priv, g, extra = _cat_setup(tmp_path)
    hearth.start(hearth.config(services=[KEEP], **extra))
    _first_run(hearth, lambda: os.path.islink(priv / "devops" / "deploy"))
    out = _ctl(hearth, "skills", "fork", "devops/deploy")
    assert out.returncode == 0, out.stderr
    assert (priv / "devops" / "deploy").is_dir() and not os.path.islink(priv / "devops" / "deploy")
    assert (priv / "devops" / "deploy" / "SKILL.md").read_text() == "# devops/deploy (public)\n"
    assert {"path": "devops/deploy", "name": "deploy", "by": "devops/deploy"} in \
        hearth.rpc("skills.list")["shadowed"]
    e = hearth.client().call("skills.fork", {"name": "devops/../../etc"})["error"]
    assert e["code"] == -32602


def test_category_linked_whole_becomes_a_directory_the_agent_can_write(hearth, tmp_path):
    pub, priv, g, extra = _cat_setup(tmp_path)
    # What an older hearth left: the public category linked whole, which
    # made creating a skill in it fail (read-only).
    os.symlink(g / "skills" / "devops", priv / "devops")
    mk = (f"while [ -L {g}/home/skills/devops ]; do sleep 0.02; done; "
          f"mkdir {g}/home/skills/devops/mine && echo '# mine' > {g}/home/skills/devops/mine/SKILL.md "
          f"&& echo created")
    hearth.start(hearth.config(services=[
        KEEP, {"name": "agent", "after": ["skills"], "restart": "never",
               "argv": ["sh", "-c", mk]}], **extra))
    lines = lambda: [l["line"] for l in hearth.rpc("logs.read", {"name": "agent"})["lines"]]
    hearth.wait_for(lambda: "created" in lines(), what="a skill made inside the category")
    assert not os.path.islink(priv / "devops") and (priv / "devops").is_dir()
    assert os.readlink(priv / "devops" / "deploy") == str(g / "skills" / "devops" / "deploy")
    assert (priv / "devops" / "mine" / "SKILL.md").read_text() == "# mine\n"
    assert not os.path.lexists(priv / ".hearth-category.tmp")
    assert hearth.rpc("skills.list")["last"]["categories_converted"] in (0, 1)
    r = hearth.rpc("skills.sync")
    assert r["errors"] == 0 and r["created"] == 0
    assert (priv / "devops" / "mine" / "SKILL.md").exists()


def test_planted_category_link_is_never_followed(hearth, tmp_path):
    pub, priv, g, extra = _cat_setup(tmp_path)
    outside = tmp_path / "host-home" / "elsewhere"
    outside.mkdir()
    os.symlink(outside, priv / "devops")
    hearth.start(hearth.config(services=[KEEP], **extra))
    _first_run(hearth, lambda: os.path.islink(priv / "data" / "query"))
    r = hearth.rpc("skills.sync")
    assert r["errors"] == 0
    assert os.listdir(outside) == []
    assert os.readlink(priv / "devops") == str(outside)
    sl = hearth.rpc("skills.list")
    assert {"path": "devops", "name": "devops", "by": "devops", "category": True} in sl["shadowed"]
    assert {"name": "devops", "private": "shadowed"} in sl["categories"]


def test_interrupted_category_run_is_completed(hearth, tmp_path):
    pub, priv, g, extra = _cat_setup(tmp_path)
    # A run stopped before a category got its name, and one stopped inside
    # a category between a link and its rename.
    (priv / ".hearth-category.tmp").mkdir()
    (priv / ".hearth-category.tmp" / ".hearth-category").write_text("")
    (priv / "devops").mkdir()
    (priv / "devops" / ".hearth-category").write_text("")
    os.symlink("/nowhere", priv / "devops" / ".hearth-link.tmp")
    hearth.start(hearth.config(services=[KEEP], **extra))
    _first_run(hearth, lambda: os.path.islink(priv / "devops" / "deploy"))
    assert not os.path.lexists(priv / ".hearth-category.tmp")
    assert not os.path.lexists(priv / "devops" / ".hearth-link.tmp")
    assert sorted(os.listdir(priv / "devops")) == [".hearth-category", "DESCRIPTION.md",
                                                  "backup", "deploy"]
    assert {"name": "devops", "private": "hearth"} in hearth.rpc("skills.list")["categories"]


def test_agent_creating_skills_during_reconcile(hearth, tmp_path):
    """The agent writes skills into merged categories while hearth
    reconciles them over and over: none of its skills is lost or replaced,
    every public skill without a private twin ends up linked. Every skill
    has a name of its own (c-k): names shared across categories would
    clash."""
    pub, priv, g, extra = _setup(tmp_path, public=())
    for c in range(20):
        for k in range(25):
            (pub / f"cat{c}" / f"s{c}-{k}").mkdir(parents=True)
            (pub / f"cat{c}" / f"s{c}-{k}" / "SKILL.md").write_text("x\n")
    # The agent races hearth: its skills land in every category, some with
    # public names, made as hearth reconciles.
    script = (f"cd {g}/home/skills; while [ ! -d cat19 ]; do sleep 0.01; done; "
              "for c in $(seq 0 19); do for k in 3 7 30 31; do "
              "mkdir -p cat$c/s$c-$k.tmp && echo mine > cat$c/s$c-$k.tmp/SKILL.md && "
              "mv -T cat$c/s$c-$k.tmp cat$c/s$c-$k 2>/dev/null || rm -rf cat$c/s$c-$k.tmp; "
              "done; done; "
              "echo done")
    hearth.start(hearth.config(services=[
        KEEP, {"name": "agent", "after": ["skills"], "restart": "never",
               "argv": ["sh", "-c", script]}], **extra))
    lines = lambda: [l["line"] for l in hearth.rpc("logs.read", {"name": "agent"})["lines"]]
    while "done" not in lines():
        r = hearth.rpc("skills.sync")
        assert r["errors"] == 0, r
    r = hearth.rpc("skills.sync")
    assert r["errors"] == 0
    for c in range(20):
        d = priv / f"cat{c}"
        assert d.is_dir() and not d.is_symlink()
        for k in (30, 31):  # private-only: the agent's, intact
            assert (d / f"s{c}-{k}" / "SKILL.md").read_text() == "mine\n"
        for k in range(25):
            e = d / f"s{c}-{k}"
            if k in (3, 7) and not e.is_symlink():
                # The agent's won the race for the name: intact, its own.
                assert (e / "SKILL.md").read_text() == "mine\n"
            else:
                assert os.readlink(e) == str(g / "skills" / f"cat{c}" / f"s{c}-{k}")
        assert not os.path.lexists(d / ".hearth-link.tmp")


def test_depth_and_marker_keys(hearth, tmp_path):
    # skills.depth 1: the flat overlay, every top-level entry linked whole.
    pub, priv, g, extra = _cat_setup(tmp_path, depth=1)
    hearth.start(hearth.config(services=[KEEP], **extra))
    _first_run(hearth, lambda: os.path.islink(priv / "devops"))
    assert os.readlink(priv / "devops") == str(g / "skills" / "devops")
    assert hearth.rpc("skills.list")["categories"] == []
    hearth.stop()


def test_marker_key(hearth, tmp_path):
    # skills.marker: another file makes a skill; SKILL.md alone does not.
    pub, priv, g, extra = _cat_setup(tmp_path, marker="README")
    (pub / "data" / "query" / "README").write_text("x\n")
    hearth.start(hearth.config(services=[KEEP], **extra))
    _first_run(hearth, lambda: os.path.islink(priv / "data" / "query"))
    # alpha has no README: at the top, a category (with nothing in it
    # but its SKILL.md, linked as an entry of that category).
    assert (priv / "alpha").is_dir() and not os.path.islink(priv / "alpha")
    assert os.readlink(priv / "alpha" / "SKILL.md") == str(g / "skills" / "alpha" / "SKILL.md")
    assert hearth.rpc("skills.list")["marker"] == "README"


@pytest.mark.parametrize("user", ["root", "nobody"])
def test_links_belong_to_the_agent(hearth, tmp_path, user):
    """A link is made whole with its owner: at its name in one step when
    the agent is hearth's own user (root), through a temporary name and a
    chown otherwise; either way each link, and each category directory,
    is the agent's, and no temporary name is left."""
    pub, priv, g, extra = _setup(tmp_path, public=("alpha", "beta", "cat/gamma"))
    (priv).chmod(0o777)  # a non-root agent's home is its own to write
    hearth.start(hearth.config(services=[
        KEEP, {"name": "agent", "after": ["skills"], "user": user, "argv": ["sleep", "1000"]}],
        **extra))
    _first_run(hearth, lambda: os.path.islink(priv / "cat" / "gamma"))
    uid = 0 if user == "root" else 65534
    for p in (priv / "alpha", priv / "beta", priv / "cat" / "gamma"):
        assert os.readlink(p).startswith(str(g / "skills"))
        assert os.lstat(p).st_uid == uid, p
    assert os.lstat(priv / "cat").st_uid == uid
    assert sorted(os.listdir(priv)) == ["alpha", "beta", "cat"]
    assert hearth.rpc("skills.list")["last"]["created"] == 3


def test_walk_result_larger_than_a_pipe(hearth, tmp_path):
    """A walk whose result does not fit in a pipe (the skills.list lists
    of 3,000 skills, well over 64 KiB): the walk child asks hearth to read
    its pipe as it writes, and the result arrives whole; a small one (the
    no-op sync after it) is read at the child's exit."""
    names = [f"a-rather-long-skill-name-to-fill-the-lists-{i:05d}" for i in range(3000)]
    pub, priv, g, extra = _setup(tmp_path, public=names)
    hearth.start(hearth.config(services=[KEEP], **extra))
    _first_run(hearth, lambda: os.path.islink(priv / names[-1]))
    sl = hearth.rpc("skills.list")
    assert len(sl["public"]) == 3000 and len(sl["linked"]) == 3000
    assert _paths(sl["public"]) == sorted(names)
    assert "filled its pipe; reading as it writes" in hearth.log_text()
    r = hearth.rpc("skills.sync")
    assert r["errors"] == 0 and r["created"] == 0 and r["removed"] == 0, r
    assert len(os.listdir(priv)) == 3000


# ---------------------------------------------------------------------------
# Names: Hermes finds a skill by its name, wherever it sits.

def _skill(root, rel, name=None, body=""):
    (root / rel).mkdir(parents=True, exist_ok=True)
    front = f"---\nname: {name}\ndescription: d\n---\n" if name else ""
    (root / rel / "SKILL.md").write_text(front + f"# {rel}\n" + body)


def _names_setup(tmp_path):
    pub, priv, g, extra = _setup(tmp_path, public=())
    _skill(pub, "research/lab-notebook", "lab-notebook")
    _skill(pub, "research/arxiv", "arxiv")
    return pub, priv, g, extra


def test_private_skill_shadows_a_public_one_of_its_name_elsewhere(hearth, tmp_path):
    pub, priv, g, extra = _names_setup(tmp_path)
    _skill(priv, "software-development/lab-notebook", "lab-notebook")
    hearth.start(hearth.config(services=[KEEP], **extra))
    _first_run(hearth, lambda: os.path.islink(priv / "research" / "arxiv"))
    assert not os.path.lexists(priv / "research" / "lab-notebook")
    sl = hearth.rpc("skills.list")
    assert sl["shadowed"] == [{"path": "research/lab-notebook", "name": "lab-notebook",
                               "by": "software-development/lab-notebook"}]
    assert sl["private"] == [{"path": "software-development/lab-notebook",
                              "name": "lab-notebook"}]
    assert sl["linked"] == [{"path": "research/arxiv", "name": "arxiv"}]
    assert sl["last"]["shadowed"] == 1 and sl["last"]["clashes"] == 0
    # Logged once, when it appeared; not again at every run that finds it.
    for _ in range(3):
        r = hearth.rpc("skills.sync")
        assert r["shadowed"] == 1 and r["created"] == 0 and r["errors"] == 0
    line = "research/lab-notebook (name lab-notebook) not linked: the agent's own skill " \
           "of that name is software-development/lab-notebook"
    assert hearth.log_text().count(line) == 1
    # The agent's skill goes: the public one is linked, and that is logged.
    import shutil
    shutil.rmtree(priv / "software-development")
    r = hearth.rpc("skills.sync")
    assert r["shadowed"] == 0 and r["created"] == 1
    assert os.readlink(priv / "research" / "lab-notebook") == \
        str(g / "skills" / "research" / "lab-notebook")
    assert "no skill is shadowed or clashes by name any more" in hearth.log_text()


def test_link_made_earlier_goes_when_the_agent_makes_a_skill_of_its_name(hearth, tmp_path):
    """The agent's skill of a name, made after hearth linked a public one
    of that name elsewhere (the private dir my-notes, named lab-notebook
    in its front matter): the link goes, the sync event says so."""
    pub, priv, g, extra = _names_setup(tmp_path)
    hearth.start(hearth.config(services=[KEEP], **extra))
    _first_run(hearth, lambda: os.path.islink(priv / "research" / "lab-notebook"))
    sub = hearth.client()
    sub.result("events.subscribe", {"since": 0})
    _skill(priv, "my-notes", "lab-notebook")
    r = hearth.rpc("skills.sync")
    assert r["removed"] == 1 and r["shadowed"] == 1, r
    assert not os.path.lexists(priv / "research" / "lab-notebook")
    assert os.readlink(priv / "research" / "arxiv") == str(g / "skills" / "research" / "arxiv")
    while True:
        ev = sub.read_line()["params"]
        if ev["type"] == "skills.sync" and ev["removed"] == 1:
            break
    sub.close()
    assert ev["shadowed"] == 1 and ev["clashes"] == 0
    sl = hearth.rpc("skills.list")
    assert sl["shadowed"] == [{"path": "research/lab-notebook", "name": "lab-notebook",
                               "by": "my-notes"}]
    assert sl["private"] == [{"path": "my-notes", "name": "lab-notebook"}]
    assert sl["pending"] == 0
    out = _ctl(hearth, "skills")
    assert out.returncode == 0, out.stderr
    assert "shadowed  1: research/lab-notebook <- my-notes" in out.stdout
    assert "private   1: my-notes (lab-notebook)" in out.stdout


def test_public_skills_of_one_name_clash_and_the_first_by_path_is_linked(hearth, tmp_path):
    pub, priv, g, extra = _names_setup(tmp_path)
    _skill(pub, "tools/lab-notebook", "lab-notebook")
    _skill(pub, "zoo/notebook-2", "arxiv")  # the front matter's name clashes
    hearth.start(hearth.config(services=[KEEP], **extra))
    _first_run(hearth, lambda: os.path.islink(priv / "research" / "lab-notebook"))
    assert not os.path.lexists(priv / "tools" / "lab-notebook")
    assert not os.path.lexists(priv / "zoo" / "notebook-2")
    r = hearth.rpc("skills.sync")
    assert r["clashes"] == 2 and r["shadowed"] == 0 and r["errors"] == 0
    sl = hearth.rpc("skills.list")
    assert sorted(sl["clashes"], key=lambda e: e["path"]) == [
        {"path": "tools/lab-notebook", "name": "lab-notebook", "by": "research/lab-notebook"},
        {"path": "zoo/notebook-2", "name": "arxiv", "by": "research/arxiv"}]
    assert _paths(sl["linked"]) == ["research/arxiv", "research/lab-notebook"]
    assert "tools/lab-notebook (name lab-notebook) not linked: the public skill of that " \
           "name linked is research/lab-notebook" in hearth.log_text()
    out = _ctl(hearth, "skills", "sync")
    assert out.returncode == 0 and ", clashes 2," in out.stdout


def test_hostile_markers_are_never_followed_or_waited_on(hearth, tmp_path):
    """The agent's tree may hold a FIFO named SKILL.md (opening it for
    reading would wait for a writer), a SKILL.md that is a link to a file
    naming a public skill, and one far larger than any front matter: the
    walk neither hangs, nor follows the link, nor reads past its bound.
    Each is a skill by its directory's name."""
    pub, priv, g, extra = _names_setup(tmp_path)
    _skill(pub, "research/paper-digest", "paper-digest")
    (priv / "fifo-skill").mkdir()
    os.mkfifo(priv / "fifo-skill" / "SKILL.md")
    (priv / "linked-skill").mkdir()
    decoy = tmp_path / "host-home" / "decoy.md"
    decoy.write_text("---\nname: lab-notebook\n---\n")
    os.symlink(decoy, priv / "linked-skill" / "SKILL.md")
    # The name lies past the bound on what is read: none is learnt.
    (priv / "huge").mkdir()
    (priv / "huge" / "SKILL.md").write_text("---\ndescription: " + "x" * (8 << 20) +
                                           "\nname: paper-digest\n---\n")
    # A link the agent made to a directory of its own is never entered.
    _skill(tmp_path / "host-home", "elsewhere/arxiv", "arxiv")
    os.symlink(tmp_path / "host-home" / "elsewhere" / "arxiv", priv / "my-arxiv")
    hearth.start(hearth.config(services=[KEEP], **extra))
    _first_run(hearth, lambda: os.path.islink(priv / "research" / "paper-digest"))
    r = hearth.rpc("skills.sync")
    assert r["errors"] == 0 and r["shadowed"] == 0 and r["duration_us"] < 10_000_000, r
    for n in ("lab-notebook", "arxiv", "paper-digest"):
        assert os.readlink(priv / "research" / n) == str(g / "skills" / "research" / n)
    sl = hearth.rpc("skills.list")
    assert sorted(sl["private"], key=lambda e: e["path"]) == [
                             {"path": "fifo-skill", "name": "fifo-skill"},
                             {"path": "huge", "name": "huge"},
                             {"path": "linked-skill", "name": "linked-skill"}]
    assert sl["shadowed"] == [] and sl["clashes"] == []


# ---------------------------------------------------------------------------
# The check: a run over trees unchanged since the last whole run is
# answered by the stats of what that run read (read_dirs false).

def _checked(h):
    """Lets the trees settle (what changed in the last 2 s is read at every
    run), then syncs twice: the first reads and records its reads, the
    second is answered by their stats, with the same counts."""
    time.sleep(2.1)
    first = h.rpc("skills.sync")
    r = h.rpc("skills.sync")
    assert r["read_dirs"] is False, r
    for k in ("public", "linked", "shadowed", "clashes", "ignored", "errors", "categories"):
        assert r[k] == first[k], (k, first, r)
    assert r["created"] == r["removed"] == 0
    return r


@pytest.mark.valgrind
def test_settled_trees_are_answered_by_their_stats_and_edits_still_show(hearth, tmp_path):
    """On a share that sends no inotify events (virtio-fs), a SKILL.md
    edited in place is seen by its stat alone: same size, its mtime put
    back, only the ctime tells. The agent's swap of a category for a link
    is seen too, and the link is never followed."""
    pub, priv, g, extra = _names_setup(tmp_path)
    _skill(priv, "my-notes", "journal")
    hearth.start(hearth.config(services=[KEEP], **extra))
    _first_run(hearth, lambda: os.path.islink(priv / "research" / "arxiv"))
    r = _checked(hearth)
    assert r["linked"] == 2 and r["shadowed"] == 0
    md = pub / "research" / "lab-notebook" / "SKILL.md"
    st = md.stat()
    text = md.read_text().replace("name: lab-notebook", "name: journal     ")
    assert len(text) == st.st_size
    with open(md, "r+") as f:
        f.write(text)
    os.utime(md, ns=(st.st_atime_ns, st.st_mtime_ns))
    r = hearth.rpc("skills.sync")
    assert r["read_dirs"] is True and r["removed"] == 1 and r["shadowed"] == 1, r
    assert not os.path.lexists(priv / "research" / "lab-notebook")
    _checked(hearth)
    own = tmp_path / "host-home" / "elsewhere"
    own.mkdir()
    for e in os.listdir(priv / "research"):
        os.unlink(priv / "research" / e)
    os.rmdir(priv / "research")
    os.symlink(own, priv / "research")
    r = hearth.rpc("skills.sync")
    assert r["read_dirs"] is True and r["errors"] == 0 and r["linked"] == 0, r
    assert os.listdir(own) == []
