"""Seeding a home on a bind-mounted temp "host" directory from a template."""
import os
import stat

KEEP = {"name": "keep", "argv": ["sleep", "1000"], "main": True}


def _template(tmp_path):
    t = tmp_path / "tmpl"
    (t / "skills").mkdir(parents=True)
    (t / "memories").mkdir()
    (t / "config.yaml").write_text("model: default\n")
    (t / ".env").write_text("A=1\n")
    os.chmod(t / ".env", 0o600)
    (t / "memories" / "MEMORY.md").write_text("# memory\n")
    os.symlink("memories/MEMORY.md", t / "current")
    return t


def _cfg(h, tmp_path, home, unless="config.yaml"):
    g = tmp_path / "guest" / "home"
    seed = {"target": str(g), "from": str(tmp_path / "tmpl")}
    if unless:
        seed["unless"] = unless
    return h.config(mounts=[{"source": str(home), "target": str(g), "type": "bind"}],
                    seed=[seed],
                    services=[{"name": "agent", "after": ["mounts"], "restart": "never",
                               "argv": ["cat", str(g / "config.yaml")]}, KEEP])


def _seed_result(h):
    return h.wait_for(lambda: h.rpc("mounts.list")["seed"], what="seed report")[0]


def test_empty_home_is_seeded(hearth, tmp_path):
    _template(tmp_path)
    home = tmp_path / "host-home"
    home.mkdir()
    hearth.start(_cfg(hearth, tmp_path, home))
    r = _seed_result(hearth)
    assert r["result"] == "seeded"
    assert (home / "config.yaml").read_text() == "model: default\n"
    assert stat.S_IMODE(os.stat(home / ".env").st_mode) == 0o600
    assert (home / "memories" / "MEMORY.md").read_text() == "# memory\n"
    assert os.readlink(home / "current") == "memories/MEMORY.md"
    assert (home / "skills").is_dir()
    assert not (home / ".hearth-seeding").exists()
    # Seeding came before the service: it read the seeded file.
    hearth.wait_for(lambda: [l["line"] for l in hearth.rpc("logs.read", {"name": "agent"})["lines"]]
                    == ["model: default"], what="agent output")


def test_seeded_home_is_untouched(hearth, tmp_path):
    _template(tmp_path)
    home = tmp_path / "host-home"
    home.mkdir()
    (home / "config.yaml").write_text("model: mine\n")
    hearth.start(_cfg(hearth, tmp_path, home))
    assert _seed_result(hearth)["result"] == "already"
    assert (home / "config.yaml").read_text() == "model: mine\n"
    assert sorted(os.listdir(home)) == ["config.yaml"]


def test_interrupted_seed_is_redone_without_overwriting(hearth, tmp_path):
    _template(tmp_path)
    home = tmp_path / "host-home"
    (home / "memories").mkdir(parents=True)
    # What a seed cut off by a crash leaves: its marker, a temp file, some
    # files (one already changed by the agent), and no config.yaml.
    (home / ".hearth-seeding").write_text("")
    (home / ".hearth-copy.tmp").write_text("half a fi")
    (home / "memories" / "MEMORY.md").write_text("# changed by the agent\n")
    hearth.start(_cfg(hearth, tmp_path, home, unless=None))
    assert _seed_result(hearth)["result"] == "seeded"
    assert (home / "memories" / "MEMORY.md").read_text() == "# changed by the agent\n"
    assert (home / "config.yaml").read_text() == "model: default\n"
    assert (home / ".env").exists() and (home / "skills").is_dir()
    assert not (home / ".hearth-seeding").exists()
    assert not (home / ".hearth-copy.tmp").exists()


def test_missing_template_is_reported(hearth, tmp_path):
    home = tmp_path / "host-home"
    home.mkdir()
    hearth.start(_cfg(hearth, tmp_path, home))
    r = _seed_result(hearth)
    assert r["result"] == "failed" and str(tmp_path / "tmpl") in r["error"]
    assert os.listdir(home) == []


def test_late_home_is_seeded_before_its_service_starts(hearth, tmp_path):
    """The home share appears late: the service that waits for "mounts" must
    not start before the home is seeded (the phase means mounted and seeded).
    A template big enough that the copy takes a while, config.yaml last."""
    t = _template(tmp_path)
    (t / "many").mkdir()
    for i in range(300):
        (t / "many" / f"f{i}").write_text(str(i))
    home = tmp_path / "host-home"
    g = tmp_path / "guest" / "home"
    cfg = hearth.config(
        mounts=[{"source": str(home), "target": str(g), "type": "bind", "timeout_ms": 20000}],
        seed=[{"target": str(g), "from": str(tmp_path / "tmpl"), "unless": "config.yaml"}],
        services=[{"name": "agent", "after": ["mounts"], "restart": "never",
                   "argv": ["cat", str(g / "config.yaml"), str(g / "memories" / "MEMORY.md")]},
                  KEEP])
    hearth.start(cfg)
    hearth.wait_for(lambda: hearth.rpc("mounts.list")["mounts"][0]["attempts"] >= 2,
                    what="retries")
    assert hearth.service("agent")["state"] == "waiting"
    home.mkdir()
    lines = hearth.wait_for(
        lambda: [l["line"] for l in hearth.rpc("logs.read", {"name": "agent"})["lines"]] or None,
        what="agent output")
    assert lines == ["model: default", "# memory"]
    assert _seed_result(hearth)["result"] == "seeded"
    assert hearth.service("agent")["last_exit"] == {"code": 0}
    assert len(os.listdir(home / "many")) == 300


def test_seed_user_and_group_own_what_seeding_makes(hearth, tmp_path):
    """seed[].user and .group: the target seeding makes and every copy
    belong to the agent (hearth's view of the accounts is the test's
    own /etc/passwd and /etc/group); an unknown user seeds nothing."""
    from test_mounts import _accounts
    _template(tmp_path)
    home = tmp_path / "host-home"
    home.mkdir()
    g = tmp_path / "guest" / "home"
    cfg = hearth.config(
        mounts=[{"source": str(home), "target": str(g), "type": "bind"}],
        seed=[{"target": str(g / "agent"), "from": str(tmp_path / "tmpl"), "unless": "config.yaml",
               "user": "agent", "group": "staff"},
              {"target": str(g / "ghost"), "from": str(tmp_path / "tmpl"), "user": "ghost"}],
        services=[KEEP])
    hearth.start(cfg, binds=_accounts(tmp_path))
    reports = hearth.wait_for(lambda: (lambda s: s if len(s) == 2 else None)(
        hearth.rpc("mounts.list")["seed"]), what="seed report")
    assert reports[0]["result"] == "seeded", reports
    assert reports[1]["result"] == "failed", reports
    assert 'no user "ghost" in the image\'s /etc/passwd' in reports[1]["error"], reports
    assert not (home / "ghost").exists()
    seen = []
    for d, dirs, files in os.walk(home / "agent"):
        for p in [d] + [os.path.join(d, x) for x in dirs + files]:
            st = os.lstat(p)
            assert (st.st_uid, st.st_gid) == (10000, 10002), p
            seen.append(os.path.relpath(p, home / "agent"))
    assert {".", "config.yaml", ".env", "memories/MEMORY.md", "current", "skills"} <= set(seen)
    # The mount's root, which seeding did not make, stays as it was.
    assert (os.stat(home).st_uid, os.stat(home).st_gid) == (0, 0)
    assert stat.S_IMODE(os.stat(home / "agent" / ".env").st_mode) == 0o600
