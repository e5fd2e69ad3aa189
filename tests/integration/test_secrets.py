"""A service's `secrets`: a per-sandbox key made at its start in a file
the service reads itself (API_SERVER_KEY in the Hermes home's .env),
owned by the service, never overwritten, never following what the agent
planted there."""
import os
import pwd
import re
import shutil
import stat
import tempfile
import time

import pytest

from conftest import Hearth

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
KEY_LINE = re.compile(r"API_SERVER_KEY=([A-Za-z0-9_-]+)\n")
NOBODY = pwd.getpwnam("nobody")


@pytest.fixture
def home():
    """A home the service user owns, below the host's /tmp (the fixture
    makes /tmp writable for services; pytest's own directories are not
    open to nobody)."""
    d = tempfile.mkdtemp(prefix="hearth-secret-", dir="/tmp")
    os.chmod(d, 0o755)
    h = os.path.join(d, "home")
    os.mkdir(h, 0o700)
    os.chown(h, NOBODY.pw_uid, NOBODY.pw_gid)
    yield h
    shutil.rmtree(d, ignore_errors=True)


def svc(home, script="exec sleep 1000", **extra):
    s = {"name": "agent", "argv": ["sh", "-c", script], "user": "nobody", "group": "nogroup",
         "secrets": [{"env": "API_SERVER_KEY", "file": os.path.join(home, ".env")}],
         "restart": "never"}
    s.update(extra)
    return s


def state(h):
    return [x["state"] for x in h.service("agent").get("secrets", [])]


def running(h):
    return h.wait_for(lambda: (lambda s: s if s["state"] == "running" else None)(h.service("agent")),
                      what="agent running")


def failed(h):
    return h.wait_for(lambda: (lambda s: s if s["state"] == "failed" else None)(h.service("agent")),
                      what="agent failed")


# What the service itself reads from the file (the way Hermes does, at
# its start): written beside it for the test to compare.
SEE = 'set -a; . {env}; echo "$API_SERVER_KEY" > {home}/seen; exec sleep 1000'


def key_of(path):
    m = KEY_LINE.fullmatch(open(path).read())
    assert m, open(path).read()
    return m.group(1)


def test_generated_owned_kept_across_restarts_and_reboots(hearth, home):
    env = os.path.join(home, ".env")
    cfg = hearth.config(services=[svc(home, SEE.format(env=env, home=home))])
    hearth.start(cfg)
    running(hearth)
    assert hearth.wait_for(lambda: state(hearth) == ["generated"] or None, what="generated")
    st = os.lstat(env)
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
    assert (st.st_uid, st.st_gid) == (NOBODY.pw_uid, NOBODY.pw_gid)
    key = key_of(env)
    assert len(key) == 48
    seen = os.path.join(home, "seen")
    hearth.wait_for(lambda: os.path.exists(seen) and open(seen).read(), what="the service's read")
    assert open(seen).read() == key + "\n"
    # The value is nowhere in what hearth says.
    assert key not in hearth.log_text()
    assert key not in str(hearth.rpc("status")) and key not in str(hearth.rpc("services.list"))
    assert not [n for n in os.listdir(home) if n.endswith(".hearth-new")]

    os.unlink(seen)
    hearth.rpc("services.restart", {"name": "agent"})
    hearth.wait_for(lambda: os.path.exists(seen) and open(seen).read(), what="read after restart")
    assert state(hearth) == ["present"] and key_of(env) == key
    assert open(seen).read() == key + "\n"

    hearth.stop()
    os.unlink(seen)
    hearth.start(cfg)
    hearth.wait_for(lambda: os.path.exists(seen) and open(seen).read(), what="read after reboot")
    assert state(hearth) == ["present"] and key_of(env) == key
    assert stat.S_IMODE(os.lstat(env).st_mode) == 0o600


def test_not_made_when_the_environment_has_it(hearth, home, tmp_path):
    env = os.path.join(home, ".env")
    hearth.start(hearth.config(services=[svc(home, env={"API_SERVER_KEY": "from-config"})]))
    running(hearth)
    assert state(hearth) == ["from_env"] and not os.path.exists(env)


def test_not_made_when_an_env_file_has_it(hearth, home):
    env = os.path.join(home, ".env")
    other = os.path.join(home, "other.env")
    with open(other, "w") as f:
        f.write("API_SERVER_KEY=from-env-file\n")
    os.chown(other, NOBODY.pw_uid, NOBODY.pw_gid)
    hearth.start(hearth.config(services=[svc(home, env_files=[other])]))
    running(hearth)
    assert state(hearth) == ["from_env"] and not os.path.exists(env)


def test_not_made_when_sandbox_init_gives_it(hearth, home):
    env = os.path.join(home, ".env")
    hearth.start(hearth.config(services=[svc(home, after=["init"])],
                               wait_for_init={"enabled": True}))
    hearth.rpc("sandbox.init", {"env": {"API_SERVER_KEY": "from-the-host"}})
    running(hearth)
    assert state(hearth) == ["from_env"] and not os.path.exists(env)


def test_an_empty_value_in_the_environment_does_not_count(hearth, home):
    env = os.path.join(home, ".env")
    hearth.start(hearth.config(services=[svc(home, env={"API_SERVER_KEY": ""})]))
    running(hearth)
    assert state(hearth) == ["generated"] and len(key_of(env)) == 48


def test_a_line_in_the_file_is_kept_byte_for_byte(hearth, home):
    env = os.path.join(home, ".env")
    text = b"# operator's\nexport API_SERVER_KEY='chosen by hand'\r\nOTHER=1"
    with open(env, "wb") as f:
        f.write(text)
    os.chmod(env, 0o644)
    hearth.start(hearth.config(services=[svc(home)]))
    running(hearth)
    assert state(hearth) == ["present"]
    assert open(env, "rb").read() == text
    assert stat.S_IMODE(os.lstat(env).st_mode) == 0o644 and os.lstat(env).st_uid == 0


def test_added_to_a_file_without_it(hearth, home):
    env = os.path.join(home, ".env")
    old = b"# provider keys\nOPENAI_API_KEY=sk-x\nAPI_SERVER_KEY=\nLAST=no-newline"
    with open(env, "wb") as f:
        f.write(old)
    os.chmod(env, 0o644)
    hearth.start(hearth.config(services=[svc(home, secrets=[
        {"env": "API_SERVER_KEY", "file": env, "chars": 64}])]))
    running(hearth)
    assert state(hearth) == ["generated"]
    new = open(env, "rb").read()
    assert new.startswith(old + b"\n")
    assert re.fullmatch(rb"API_SERVER_KEY=[A-Za-z0-9_-]{64}\n", new[len(old) + 1:])
    st = os.lstat(env)
    assert stat.S_IMODE(st.st_mode) == 0o600 and (st.st_uid, st.st_gid) == (NOBODY.pw_uid, NOBODY.pw_gid)


@pytest.mark.parametrize("plant", ["link", "dir_link", "fifo", "directory"])
def test_what_the_agent_planted_fails_the_start(hearth, home, plant):
    env = os.path.join(home, ".env")
    victim = os.path.join(os.path.dirname(home), "victim")
    with open(victim, "w") as f:
        f.write("untouched\n")
    os.chmod(victim, 0o666)
    path = env
    if plant == "link":
        os.symlink(victim, env)
        why = "a symbolic link is in the way (not followed)"
    elif plant == "dir_link":
        os.symlink(os.path.dirname(home), os.path.join(home, "sub"))
        path = os.path.join(home, "sub", "victim")
        why = "its directory: a symbolic link is in the way (not followed)"
    elif plant == "fifo":
        os.mkfifo(env, 0o666)
        why = "a FIFO, not a regular file"
    else:
        os.mkdir(env)
        why = "a directory, not a regular file"
    t0 = time.monotonic()
    hearth.start(hearth.config(services=[
        {"name": "keep", "argv": ["sleep", "1000"]},
        svc(home, secrets=[{"env": "OTHER", "file": os.path.join(home, "fine.env")},
                           {"env": "API_SERVER_KEY", "file": path}])]))
    s = failed(hearth)
    assert s["error"] == f"services[1].secrets[1] {path}: {why}"
    assert state(hearth) == ["generated", "failed"]
    assert time.monotonic() - t0 < 8
    assert open(victim).read() == "untouched\n"
    # hearth itself goes on answering.
    assert hearth.service("keep")["state"] == "running"


def test_two_sandboxes_make_different_keys(hearth, home, tmp_path):
    home2 = os.path.join(os.path.dirname(home), "home2")
    os.mkdir(home2, 0o700)
    os.chown(home2, NOBODY.pw_uid, NOBODY.pw_gid)
    (tmp_path / "b").mkdir()
    h2 = Hearth(tmp_path / "b")
    try:
        hearth.start(hearth.config(services=[svc(home)]))
        h2.start(h2.config(services=[svc(home2)]))
        running(hearth)
        running(h2)
        a, b = key_of(os.path.join(home, ".env")), key_of(os.path.join(home2, ".env"))
        assert len(a) == len(b) == 48 and a != b
    finally:
        h2.stop()


def test_the_shipped_template_carries_no_env_file():
    """Every home is seeded from this template: a .env in it would give
    every sandbox the same key (docs/hermes.md)."""
    tmpl = os.path.join(ROOT, "rootfs", "hermes", "home")
    assert os.path.isdir(tmpl)
    for dirpath, _, files in os.walk(tmpl):
        assert ".env" not in files, dirpath
        for name in files:
            with open(os.path.join(dirpath, name), errors="replace") as f:
                assert not re.search(r"^\s*(export\s+)?API_SERVER_KEY\s*=", f.read(), re.M), name
