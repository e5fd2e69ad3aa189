"""skills.mode "external_dirs": no links; Hermes's config.yaml lists the
public skills under skills.external_dirs, kept there by hearth, on
bind-mounted temp "host" directories like test_skills.py's."""
import os

KEEP = {"name": "keep", "argv": ["sleep", "1000"], "main": True}

USER_YAML = """\
# the agent's own config: comments and order stay
model:
  provider: custom   # LAN model
  default: m

skills:
  disabled: [x]
agent:
  restart_drain_timeout: 180
"""


def _setup(tmp_path, yaml_text=USER_YAML, yaml_mode=0o640, yaml_uid=1234):
    pub, home = tmp_path / "host-skills", tmp_path / "host-home"
    for n in ("alpha", "beta"):
        (pub / n).mkdir(parents=True)
        (pub / n / "SKILL.md").write_text(f"# {n} (public)\n")
    (pub / "cat" / "gamma").mkdir(parents=True)
    (pub / "cat" / "gamma" / "SKILL.md").write_text("# gamma\n")
    priv = home / "skills"
    priv.mkdir(parents=True)
    g = tmp_path / "guest"
    if yaml_text is not None:
        y = home / "config.yaml"
        y.write_text(yaml_text)
        os.chown(y, yaml_uid, yaml_uid)
        y.chmod(yaml_mode)
    extra = dict(
        mounts=[{"source": str(home), "target": str(g / "home"), "type": "bind"},
                {"source": str(pub), "target": str(g / "skills"), "type": "bind",
                 "read_only": True}],
        skills={"public": str(g / "skills"), "private": str(g / "home" / "skills"),
                "mode": "external_dirs", "config_yaml": str(g / "home" / "config.yaml")})
    return pub, home, priv, g, extra


def _ready(h):
    h.wait_for(lambda: h.rpc("status")["phases"]["skills"], what="phase skills")


def _links(d):
    out = []
    for root, dirs, files in os.walk(d):
        for n in dirs + files:
            if os.path.islink(os.path.join(root, n)):
                out.append(os.path.relpath(os.path.join(root, n), d))
    return sorted(out)


def test_external_dirs_edits_yaml_and_lays_no_links(hearth, tmp_path):
    pub, home, priv, g, extra = _setup(tmp_path)
    # What an earlier hearth in "links" mode laid, and the agent's own.
    os.symlink(str(g / "skills" / "alpha"), priv / "alpha")
    (priv / "cat").mkdir()
    (priv / "cat" / ".hearth-category").write_text("")
    os.symlink(str(g / "skills" / "cat" / "gamma"), priv / "cat" / "gamma")
    os.symlink("/elsewhere", priv / "mine-link")
    (priv / "beta").mkdir()
    (priv / "beta" / "SKILL.md").write_text("# beta (mine)\n")
    hearth.start(hearth.config(services=[
        KEEP, {"name": "agent", "after": ["mounts", "skills"], "user": "nobody",
               "argv": ["sleep", "1000"]}], **extra))
    _ready(hearth)
    y = home / "config.yaml"
    text = USER_YAML.replace(
        "skills:\n", "skills:\n  external_dirs:\n    - " + str(g / "skills") + "\n")
    assert y.read_text() == text
    st = os.stat(y)
    assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (1234, 1234, 0o640)
    # hearth's old links and its emptied category are gone; the agent's stay.
    assert _links(priv) == ["mine-link"]
    assert sorted(os.listdir(priv)) == ["beta", "mine-link"]
    assert not [n for n in os.listdir(home) if n.endswith(".hearth-tmp")]
    r = hearth.rpc("skills.sync")
    assert r["mode"] == "external_dirs" and r["external_dirs"] == "present"
    assert r["created"] == 0 and r["errors"] == 0 and "error" not in r
    assert y.read_text() == text and os.stat(y).st_ino == st.st_ino  # not rewritten
    s = hearth.rpc("status")["skills"]
    assert s["external_dirs"] == "present" and s["config_yaml"] == str(g / "home" / "config.yaml")
    sl = hearth.rpc("skills.list")
    assert sl["mode"] == "external_dirs" and sl["linked"] == [] and sl["pending"] == 0
    assert sorted(sl["public"]) == ["alpha", "beta", "cat"]
    assert sl["external_dirs"] == {"file": str(g / "home" / "config.yaml"), "state": "present"}
    # skills.fork has no link to copy in this mode.
    e = hearth.client().call("skills.fork", {"name": "alpha"})["error"]
    assert "external_dirs" in e["message"]


def test_external_dirs_entry_restored_and_hostile_files(hearth, tmp_path):
    pub, home, priv, g, extra = _setup(tmp_path)
    hearth.start(hearth.config(services=[KEEP], **extra))
    _ready(hearth)
    y = home / "config.yaml"
    entry = "    - " + str(g / "skills") + "\n"
    assert entry in y.read_text()
    # The agent drops the entry: the next run puts it back.
    y.write_text(y.read_text().replace(entry, ""))
    r = hearth.rpc("skills.sync")
    assert r["external_dirs"] == "added" and entry in y.read_text()
    # A YAML hearth cannot read with confidence: left as it is, the
    # error names the file and line, everywhere it is reported.
    bad = "model: x\nskills: &s\n  a: 1\n"
    y.write_text(bad)
    r = hearth.rpc("skills.sync")
    want = str(g / "home" / "config.yaml") + ":2: skills is an anchor"
    assert r["external_dirs"] == "error" and want in r["error"] and r["errors"] == 1
    assert y.read_text() == bad
    assert want in hearth.rpc("status")["skills"]["error"]
    sl = hearth.rpc("skills.list")
    assert sl["external_dirs"]["state"] == "error" and want in sl["external_dirs"]["error"]
    hearth.wait_for(lambda: want in hearth.log_text(), what="the error in the log")
    # config.yaml replaced by a link to another file: never followed.
    victim = tmp_path / "victim.yaml"
    victim.write_text("a: 1\n")
    y.unlink()
    os.symlink(victim, y)
    r = hearth.rpc("skills.sync")
    assert r["external_dirs"] == "error" and str(g / "home" / "config.yaml") in r["error"]
    assert victim.read_text() == "a: 1\n" and os.path.islink(y)
    assert hearth.rpc("status")["phases"]["skills"] is True


def test_external_dirs_missing_yaml_is_made_for_the_agent(hearth, tmp_path):
    pub, home, priv, g, extra = _setup(tmp_path, yaml_text=None)
    hearth.start(hearth.config(services=[
        KEEP, {"name": "agent", "after": ["skills"], "user": "nobody",
               "argv": ["sleep", "1000"]}], **extra))
    _ready(hearth)
    y = home / "config.yaml"
    assert y.read_text() == "skills:\n  external_dirs:\n    - " + str(g / "skills") + "\n"
    st = os.stat(y)
    assert (st.st_uid, st.st_mode & 0o7777) == (65534, 0o600)
    assert _links(priv) == []
    assert hearth.rpc("skills.sync")["external_dirs"] == "present"
