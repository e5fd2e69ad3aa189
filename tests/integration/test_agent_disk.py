"""What the agent leaves on disk never blocks or misleads PID 1: FIFOs,
symbolic links, directories and stale temp names planted where hearth
opens, renames or creates files (env_files, the service log and its
rotation, resolv.conf's temp name, seed targets, bind-file targets, the
private skills directory, skills.fork), as root and as a non-root service.
Each test checks that hearth answers ping within a second, that the file
outside the tree is untouched, and that the error names the path."""
import json
import os
import signal
import shutil
import stat
import subprocess
import tempfile
import threading
import time
import types

import pytest

from conftest import HEARTH, Client

KEEP = {"name": "keep", "argv": ["sleep", "1000"], "main": True}
USERS = ["root", "nobody"]


def ping_fast(h):
    """PID 1 answers within a second."""
    t0 = time.monotonic()
    c = Client(h.sock, timeout=1)
    try:
        assert c.result("ping") is not None
    finally:
        c.close()
    assert time.monotonic() - t0 < 1.0


@pytest.fixture
def open_dir():
    """A directory every user can traverse (tmp_path's parents are 0700,
    which would hide the planted files from a non-root service)."""
    d = tempfile.mkdtemp(prefix="hearth-disk-")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def secret_file(tmp_path):
    s = tmp_path / "root-secret"
    s.write_text("TOKEN=root-only\n")
    os.chmod(s, 0o600)
    return s


def failed(h, name):
    return h.wait_for(lambda: (lambda s: s if s.get("error") else None)(h.service(name)),
                      what=f"{name} error")


# ---- env_files ------------------------------------------------------------

@pytest.mark.parametrize("user", USERS)
def test_env_file_fifo_then_restart(hearth, open_dir, user):
    home = os.path.join(open_dir, "home", ".hermes")
    os.makedirs(home)
    envf = os.path.join(home, ".env")
    with open(envf, "w") as f:
        f.write("A=1\n")
    hearth.start(hearth.config(services=[KEEP, {
        "name": "agent", "argv": ["sleep", "1000"], "user": user, "env_files": [envf]}]))
    hearth.wait_for(lambda: hearth.service("agent")["state"] == "running", what="agent")
    os.unlink(envf)
    os.mkfifo(envf, 0o666)
    c = hearth.client()
    c.call("services.restart", {"name": "agent"})
    c.close()
    ping_fast(hearth)
    s = failed(hearth, "agent")
    assert s["error"] == f"env_files[0] {envf}: a FIFO, not a regular file"
    ping_fast(hearth)


@pytest.mark.parametrize("user", USERS)
def test_env_file_link_to_a_root_secret_is_not_read(hearth, open_dir, tmp_path, user):
    secret = secret_file(tmp_path)
    envf = os.path.join(open_dir, ".env")
    os.symlink(secret, envf)
    out = os.path.join(open_dir, "env.out")
    hearth.start(hearth.config(services=[KEEP, {
        "name": "agent", "argv": ["sh", "-c", f"env > {out}; exec sleep 1000"],
        "user": user, "env_files": [envf]}]))
    s = failed(hearth, "agent")
    assert s["error"].startswith(f"env_files[0] {envf}: ")
    assert "symbolic link" in s["error"]
    assert not os.path.exists(out)
    ping_fast(hearth)
    assert secret.read_text() == "TOKEN=root-only\n"


def test_env_file_readable_only_by_root_stays_out_of_a_nobody_service(hearth, open_dir):
    envf = os.path.join(open_dir, ".env")
    with open(envf, "w") as f:
        f.write("TOKEN=root-only\n")
    os.chmod(envf, 0o600)
    hearth.start(hearth.config(services=[KEEP, {
        "name": "agent", "argv": ["sleep", "1000"], "user": "nobody", "env_files": [envf]}]))
    s = failed(hearth, "agent")
    assert s["error"] == f"env_files[0] {envf}: Permission denied"


# ---- the service log file -------------------------------------------------

def _flood(n=4000):
    return ["sh", "-c", f"i=0; while [ $i -lt {n} ]; do echo line-$i-xxxxxxxxxxxxxxxxxxxxxxxx; "
            "i=$((i+1)); done; exec sleep 1000"]


@pytest.mark.parametrize("user", USERS)
def test_log_rotation_with_directories_in_the_way(hearth, open_dir, user):
    logs = os.path.join(open_dir, "logs")
    os.makedirs(logs)
    f = os.path.join(logs, "hermes.out")
    # The rename aside fails: hearth truncates on the fd instead.
    os.makedirs(f + ".1" + "/x")
    os.makedirs(f + ".2" + "/x")
    hearth.start(hearth.config(services=[KEEP, {
        "name": "agent", "argv": _flood(), "user": user,
        "log": {"file": f, "max_bytes": 8192, "keep": 2}}]))
    hearth.wait_for(lambda: hearth.service("agent")["output_lines"] >= 4000, what="output")
    ping_fast(hearth)
    st = os.lstat(f)
    assert stat.S_ISREG(st.st_mode) and st.st_size <= 8192 + 200
    assert os.path.isdir(f + ".1") and os.path.isdir(f + ".2")
    want = 65534 if user == "nobody" else 0
    assert st.st_uid == want and st.st_gid == want
    assert f"unable to rotate {f}" in hearth.log_text()


@pytest.mark.parametrize("user", USERS)
def test_log_file_in_missing_directories(hearth, open_dir, tmp_path, user):
    """A fresh home has no logs directory: hearth makes the missing levels,
    0750 and the service's own, and writes the log there. A FIFO or a file
    where a directory belongs, or a link the agent planted on the way, is
    reported and never followed or waited on."""
    home = os.path.join(open_dir, "home")
    f = os.path.join(home, ".hermes", "logs", "hermes.out")
    os.mkfifo(os.path.join(open_dir, "fifo"))
    open(os.path.join(open_dir, "plain"), "w").close()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, os.path.join(open_dir, "link"))
    blocked = {n: os.path.join(open_dir, n, "logs", "x.out") for n in ("fifo", "plain", "link")}
    talk = ["sh", "-c", "echo agent-text; exec sleep 1000"]
    hearth.start(hearth.config(services=[KEEP, {
        "name": "agent", "argv": talk, "user": user, "log": {"file": f}}] + [
        {"name": n, "argv": talk, "log": {"file": p}} for n, p in blocked.items()]))
    hearth.wait_for(lambda: os.path.exists(f) and "agent-text" in open(f).read(),
                    what="the log written")
    want = 65534 if user == "nobody" else 0
    for d in (home, os.path.dirname(os.path.dirname(f)), os.path.dirname(f)):
        st = os.lstat(d)
        assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o750, d
        assert (st.st_uid, st.st_gid) == (want, want), d
    assert os.stat(f).st_uid == want
    hearth.wait_for(lambda: all(hearth.service(n)["output_lines"] >= 1 for n in blocked),
                    what="output")
    ping_fast(hearth)
    text = hearth.log_text()
    why = {n: [l for l in text.splitlines() if f"unable to open log file {p}: " in l]
           for n, p in blocked.items()}
    assert all(why.values()), why
    assert why["fifo"][0].endswith("Not a directory") and why["plain"][0].endswith("Not a directory")
    assert "a symbolic link" in why["link"][0], why
    assert list(elsewhere.iterdir()) == []
    assert stat.S_ISFIFO(os.lstat(os.path.join(open_dir, "fifo")).st_mode)


def test_log_file_fifo_and_link_to_root_file(hearth, open_dir, tmp_path):
    secret = secret_file(tmp_path)
    logs = os.path.join(open_dir, "logs")
    os.makedirs(logs)
    fifo = os.path.join(logs, "a.out")
    os.mkfifo(fifo)
    link = os.path.join(logs, "b.out")
    os.symlink(secret, link)
    hard = os.path.join(logs, "c.out")
    os.link(secret, hard)
    hearth.start(hearth.config(services=[KEEP] + [
        {"name": n, "argv": ["sh", "-c", "echo agent-text; exec sleep 1000"],
         "log": {"file": p, "max_bytes": 100, "keep": 0}}
        for n, p in (("a", fifo), ("b", link), ("c", hard))]))
    hearth.wait_for(lambda: all(hearth.service(n)["output_lines"] >= 1 for n in "abc"),
                    what="output")
    ping_fast(hearth)
    text = hearth.log_text()
    assert f"unable to open log file {fifo}: " in text
    assert f"unable to open log file {link}: a symbolic link" in text
    assert f"unable to open log file {hard}: has other hard links" in text
    assert secret.read_text() == "TOKEN=root-only\n"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_log_file_replaced_by_a_fifo_before_rotation(hearth, open_dir):
    logs = os.path.join(open_dir, "logs")
    os.makedirs(logs)
    f = os.path.join(logs, "hermes.out")
    go = os.path.join(open_dir, "go")
    script = (f"echo first; while [ ! -e {go} ]; do sleep 0.05; done; "
              "i=0; while [ $i -lt 300 ]; do echo line-$i-xxxxxxxxxxxxxxxxxxxxxxxx; "
              "i=$((i+1)); done; exec sleep 1000")
    hearth.start(hearth.config(services=[KEEP, {
        "name": "agent", "argv": ["sh", "-c", script],
        "log": {"file": f, "max_bytes": 4096, "keep": 1}}]))
    hearth.wait_for(lambda: os.path.exists(f) and os.path.getsize(f) > 0, what="first line")
    # The agent moves the log aside and plants a FIFO under its name while
    # hearth holds the old file open: rotation moves the FIFO by its
    # directory's fd (never opening it) and starts a fresh regular file.
    os.rename(f, f + ".mine")
    os.mkfifo(f)
    open(go, "w").close()
    hearth.wait_for(lambda: hearth.service("agent")["output_lines"] >= 301, what="output")
    ping_fast(hearth)
    st = os.lstat(f)
    assert stat.S_ISREG(st.st_mode) and 0 < st.st_size <= 4096 + 200
    assert os.path.getsize(f + ".mine") <= 4096 + 200


# ---- resolv.conf's temp name ---------------------------------------------

@pytest.mark.parametrize("kind", ["fifo", "link", "dir"])
def test_resolv_conf_temp_name_planted_then_resume(hearth, tmp_path, kind):
    secret = secret_file(tmp_path)
    etc = tmp_path / "etc"
    etc.mkdir()
    rc = etc / "resolv.conf"
    hearth.start(hearth.config(services=[KEEP],
                               network={"dns": ["192.0.2.53"], "resolv_conf": str(rc)}))
    assert rc.read_text() == "nameserver 192.0.2.53\n"
    tmp = etc / "resolv.conf.hearth-tmp"
    if kind == "fifo":
        os.mkfifo(tmp)
    elif kind == "link":
        os.symlink(secret, tmp)
    else:
        (tmp / "sub").mkdir(parents=True)
    # A resume rewrites resolv.conf only when its content differs: the
    # agent changed it too, so the rewrite meets the planted name.
    rc.write_text("nameserver 203.0.113.9\n")
    hearth.rpc("sandbox.freeze", {"timeout_ms": 2000})
    c = Client(hearth.sock, timeout=1)
    t0 = time.monotonic()
    r = c.call("sandbox.resume", {})
    c.close()
    assert time.monotonic() - t0 < 1.0
    ping_fast(hearth)
    assert secret.read_text() == "TOKEN=root-only\n"
    if kind == "dir":
        err = hearth.rpc("network.get").get("resolv_conf_error", "")
        assert f"unable to create {etc}/resolv.conf.hearth-tmp" in err, (r, err)
        step = next(s for s in r["result"]["steps"] if s["name"] == "network")
        assert step["result"] == "failed" and step["resolv_conf"] == "failed", step
    else:
        assert rc.read_text() == "nameserver 192.0.2.53\n"
        assert not os.path.lexists(tmp)
        assert os.path.isfile(rc) and not os.path.islink(rc)


# ---- seeding and bind-file targets ----------------------------------------

def test_seed_target_behind_a_link_is_refused(hearth, tmp_path):
    t = tmp_path / "tmpl"
    t.mkdir()
    (t / "config.yaml").write_text("model: x\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    g = tmp_path / "guest"
    g.mkdir()
    os.symlink(outside, g / "home")
    hearth.start(hearth.config(services=[KEEP],
                               seed=[{"target": str(g / "home"), "from": str(t)}]))
    r = hearth.wait_for(lambda: hearth.rpc("mounts.list")["seed"], what="seed report")[0]
    ping_fast(hearth)
    assert r["result"] == "failed"
    assert r["error"].startswith(f"unable to open {g / 'home'}: a symbolic link")
    assert os.listdir(outside) == []


def test_seed_marker_fifo_does_not_block(hearth, tmp_path):
    t = tmp_path / "tmpl"
    t.mkdir()
    (t / "config.yaml").write_text("model: x\n")
    home = tmp_path / "home"
    home.mkdir()
    os.mkfifo(home / ".hearth-seeding")
    hearth.start(hearth.config(services=[KEEP], seed=[{"target": str(home), "from": str(t)}]))
    r = hearth.wait_for(lambda: hearth.rpc("mounts.list")["seed"], what="seed report")[0]
    ping_fast(hearth)
    # A marker means "interrupted": completed, and the marker removed.
    assert r["result"] == "seeded", r
    assert (home / "config.yaml").read_text() == "model: x\n"
    assert not os.path.lexists(home / ".hearth-seeding")


@pytest.mark.parametrize("kind", ["fifo", "link"])
def test_bind_file_target_planted(hearth, tmp_path, kind):
    secret = secret_file(tmp_path)
    src = tmp_path / "src.yaml"
    src.write_text("from the host\n")
    g = tmp_path / "guest"
    g.mkdir()
    target = g / "config.yaml"
    if kind == "fifo":
        os.mkfifo(target)
    else:
        os.symlink(secret, target)
    hearth.start(hearth.config(services=[KEEP], mounts=[
        {"source": str(src), "target": str(target), "type": "bind", "required": False}]))
    m = hearth.wait_for(lambda: (lambda l: l[0] if l and l[0].get("error") else None)(
        hearth.rpc("mounts.list")["mounts"]), what="mount error")
    ping_fast(hearth)
    assert str(target) in m["error"]
    assert secret.read_text() == "TOKEN=root-only\n"
    with open("/proc/self/mountinfo") as f:
        assert str(secret) not in f.read()


# ---- the private skills directory and skills.fork -------------------------

def _skills(tmp_path, names=("alpha",)):
    pub = tmp_path / "pub"
    for n in names:
        (pub / n).mkdir(parents=True)
        (pub / n / "SKILL.md").write_text(f"# {n}\n")
    return pub


def test_fork_of_a_link_out_of_public_is_refused(hearth, tmp_path):
    pub = _skills(tmp_path)
    priv = tmp_path / "priv"
    priv.mkdir()
    hearth.start(hearth.config(services=[KEEP],
                               skills={"public": str(pub), "private": str(priv)}))
    hearth.wait_for(lambda: os.path.islink(priv / "alpha"), what="overlay")
    os.symlink(f"{pub}/../../proc/kmsg", priv / "evil")
    c = Client(hearth.sock, timeout=1)
    e = c.call("skills.fork", {"name": "evil"})["error"]
    c.close()
    assert "leaves its directory" in e["message"] and f"{pub}/../../proc/kmsg" in e["message"]
    ping_fast(hearth)
    assert os.path.islink(priv / "evil")


def test_fork_of_30000_files_keeps_the_loop_answering(hearth, tmp_path):
    pub = _skills(tmp_path)
    big = pub / "alpha" / "data"
    big.mkdir()
    for i in range(30000):
        (big / f"f{i}").write_bytes(b"x")
    priv = tmp_path / "priv"
    priv.mkdir()
    hearth.start(hearth.config(services=[KEEP],
                               skills={"public": str(pub), "private": str(priv)}))
    hearth.wait_for(lambda: os.path.islink(priv / "alpha"), what="overlay")
    result = {}

    def fork():
        c = Client(hearth.sock, timeout=120)
        result["r"] = c.call("skills.fork", {"name": "alpha"})
        c.close()

    th = threading.Thread(target=fork)
    began = time.monotonic()
    th.start()
    worst, pings = 0.0, 0
    while th.is_alive():
        t0 = time.monotonic()
        c = Client(hearth.sock, timeout=120)
        assert c.result("ping") is not None
        c.close()
        worst = max(worst, time.monotonic() - t0)
        pings += 1
        time.sleep(0.05)
    th.join()
    took = time.monotonic() - began
    assert result["r"].get("result") == {"name": "alpha", "forked": True}, result
    # A loop that did the copy itself would hold a ping for about the whole
    # copy; one that hands it to a child answers in a small part of it (or
    # within a second), however slow a loaded machine makes both.
    assert pings >= 2 and (worst < 1.0 or worst < took / 4), (worst, took, pings)
    assert len(os.listdir(priv / "alpha" / "data")) == 30000


def test_private_dir_swapped_for_a_link_to_a_root_dir(hearth, tmp_path):
    pub = _skills(tmp_path, ("alpha", "beta"))
    rootdir = tmp_path / "root-owned"
    rootdir.mkdir()
    os.chmod(rootdir, 0o700)
    priv = tmp_path / "priv"
    priv.mkdir()
    hearth.start(hearth.config(services=[KEEP],
                               skills={"public": str(pub), "private": str(priv)}))
    hearth.wait_for(lambda: os.path.islink(priv / "alpha"), what="overlay")
    os.rename(priv, tmp_path / "priv.old")
    os.symlink(rootdir, priv)
    c = Client(hearth.sock, timeout=1)
    r = c.call("skills.sync")
    e = c.call("skills.fork", {"name": "alpha"})["error"]
    c.close()
    assert "error" in r and str(priv) in r["error"]["message"], r
    assert "symbolic link" in r["error"]["message"]
    assert f"unable to open {priv}: a symbolic link" in e["message"]
    ping_fast(hearth)
    assert os.listdir(rootdir) == []


def test_private_skills_and_forks_belong_to_a_non_root_agent(hearth, open_dir):
    pub = os.path.join(open_dir, "pub", "alpha")
    os.makedirs(pub)
    with open(os.path.join(pub, "SKILL.md"), "w") as f:
        f.write("# alpha\n")
    home = os.path.join(open_dir, "home")
    os.makedirs(home)
    os.chown(home, 65534, 65534)
    priv = os.path.join(home, "skills")
    hearth.start(hearth.config(
        services=[KEEP, {"name": "agent", "user": "nobody", "after": ["skills"],
                         "argv": ["sleep", "1000"]}],
        skills={"public": os.path.join(open_dir, "pub"), "private": priv}))
    hearth.wait_for(lambda: os.path.islink(os.path.join(priv, "alpha")), what="overlay")
    st = os.lstat(priv)
    assert st.st_uid == 65534 and st.st_gid == 65534
    assert os.lstat(os.path.join(priv, "alpha")).st_uid == 65534
    hearth.rpc("skills.fork", {"name": "alpha"})
    for p in (os.path.join(priv, "alpha"), os.path.join(priv, "alpha", "SKILL.md")):
        assert os.lstat(p).st_uid == 65534, p
    ping_fast(hearth)


def test_categories_belong_to_a_non_root_agent(hearth, open_dir):
    pub = os.path.join(open_dir, "pub", "devops", "deploy")
    os.makedirs(pub)
    with open(os.path.join(pub, "SKILL.md"), "w") as f:
        f.write("# deploy\n")
    home = os.path.join(open_dir, "home")
    os.makedirs(home)
    os.chown(home, 65534, 65534)
    priv = os.path.join(home, "skills")
    # The agent makes a skill in the category hearth merged (Hermes's
    # skill_manage does this): a real directory it owns, not public's.
    mk = (f"while [ ! -L {priv}/devops/deploy ]; do sleep 0.02; done; "
          f"mkdir {priv}/devops/mine && echo '# mine' > {priv}/devops/mine/SKILL.md && echo made")
    hearth.start(hearth.config(
        services=[KEEP, {"name": "agent", "user": "nobody", "after": ["skills"],
                         "restart": "never", "argv": ["sh", "-c", mk]}],
        skills={"public": os.path.join(open_dir, "pub"), "private": priv}))
    lines = lambda: [l["line"] for l in hearth.rpc("logs.read", {"name": "agent"})["lines"]]
    hearth.wait_for(lambda: "made" in lines(), what="a skill made by the agent in a category")
    for p in ("devops", "devops/.hearth-category", "devops/deploy", "devops/mine"):
        assert os.lstat(os.path.join(priv, p)).st_uid == 65534, p
    hearth.rpc("skills.fork", {"name": "devops/deploy"})
    assert os.lstat(os.path.join(priv, "devops", "deploy", "SKILL.md")).st_uid == 65534
    ping_fast(hearth)


def test_category_swapped_for_a_link_to_a_root_dir(hearth, tmp_path):
    pub = _skills(tmp_path, ("devops/deploy", "devops/backup"))
    rootdir = tmp_path / "root-owned"
    rootdir.mkdir()
    os.chmod(rootdir, 0o700)
    priv = tmp_path / "priv"
    priv.mkdir()
    hearth.start(hearth.config(services=[KEEP],
                               skills={"public": str(pub), "private": str(priv)}))
    hearth.wait_for(lambda: os.path.islink(priv / "devops" / "deploy"), what="overlay")
    # The agent moves the category away and links a root directory in its
    # place; a new public skill in that category then arrives.
    os.rename(priv / "devops", priv / "devops.old")
    os.symlink(rootdir, priv / "devops")
    (pub / "devops" / "new").mkdir()
    (pub / "devops" / "new" / "SKILL.md").write_text("# new\n")
    c = Client(hearth.sock, timeout=5)
    r = c.call("skills.sync")["result"]
    e = c.call("skills.fork", {"name": "devops/deploy"})["error"]
    sl = c.call("skills.list")["result"]
    c.close()
    assert r["errors"] == 0 and r["shadowed"] == 1
    assert "a symbolic link" in e["message"] and f"{priv}/devops" in e["message"]
    assert os.listdir(rootdir) == []
    assert {"name": "devops", "private": "shadowed"} in sl["categories"]
    ping_fast(hearth)


def test_private_dir_swapped_during_a_fork(hearth, tmp_path):
    pub = _skills(tmp_path)
    big = pub / "alpha" / "data"
    big.mkdir()
    for i in range(20000):
        (big / f"f{i}").write_bytes(b"x")
    rootdir = tmp_path / "root-owned"
    rootdir.mkdir()
    os.chmod(rootdir, 0o700)
    priv = tmp_path / "priv"
    priv.mkdir()
    hearth.start(hearth.config(services=[KEEP],
                               skills={"public": str(pub), "private": str(priv)}))
    hearth.wait_for(lambda: os.path.islink(priv / "alpha"), what="overlay")
    c = Client(hearth.sock, timeout=120)
    c.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"skills.fork","params":{"name":"alpha"}}\n')
    hearth.wait_for(lambda: os.path.lexists(priv / ".hearth-fork.tmp"), what="copy under way")
    # The agent renames its skills directory and puts a link to a root
    # directory in its place while the copy runs.
    os.rename(priv, tmp_path / "priv.old")
    os.symlink(rootdir, priv)
    ping_fast(hearth)
    r = c.read_reply()
    c.close()
    assert r.get("result") == {"name": "alpha", "forked": True}, r
    # The copy landed in the directory hearth opened, not through the link.
    assert os.listdir(rootdir) == []
    assert (tmp_path / "priv.old" / "alpha" / "SKILL.md").read_text() == "# alpha\n"
    ping_fast(hearth)


def test_directory_mount_target_swapped_for_a_link(hearth, tmp_path):
    src = tmp_path / "share"
    src.mkdir()
    (src / "from-host").write_text("x\n")
    outside = tmp_path / "etc-like"
    outside.mkdir()
    g = tmp_path / "guest"
    g.mkdir()
    os.symlink(outside, g / "work")
    hearth.start(hearth.config(services=[KEEP], mounts=[
        {"source": str(src), "target": str(g / "work"), "type": "bind", "required": False}]))
    m = hearth.wait_for(lambda: (lambda l: l[0] if l and l[0].get("error") else None)(
        hearth.rpc("mounts.list")["mounts"]), what="mount error")
    ping_fast(hearth)
    assert m["error"] == f"unable to create {g / 'work'}: a symbolic link is in the way (not followed)"
    assert os.listdir(outside) == []


# ---- the overlay walk runs in a child --------------------------------------

def _plant_tree(priv, dirs, per_dir):
    """The agent's own categories (no SKILL.md: entered by the walk), each
    holding per_dir files: dirs * per_dir entries for every walk to read."""
    for d in range(dirs):
        p = priv / f"mine{d:03d}"
        p.mkdir()
        for i in range(per_dir):
            (p / f"f{i}").touch()


def _walkers(h):
    """hearth's children that are hearth itself (forked, not exec'd): the
    walk, or a skills.fork copy."""
    with open(f"/proc/{h.pid}/task/{h.pid}/children") as f:
        kids = [int(p) for p in f.read().split()]
    out = []
    for k in kids:
        try:
            with open(f"/proc/{k}/comm") as f:
                if f.read().strip() == "hearth":
                    out.append(k)
        except OSError:
            pass
    return out


def _stopped_sync(h, c):
    """Sends skills.sync on c and stops the walk it starts (SIGSTOP): a
    walk that makes no progress, as on a hung share. Returns its pid, or
    None when the walk ended before it could be caught (the reply read)."""
    c.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"skills.sync"}\n')
    c.sock.setblocking(False)
    try:
        while True:
            for pid in _walkers(h):
                os.kill(pid, signal.SIGSTOP)
                return pid
            try:
                chunk = c.sock.recv(65536)
            except BlockingIOError:
                time.sleep(0.0005)
                continue
            c.buf += chunk
            if b"\n" in c.buf:
                c.read_reply()
                return None
    finally:
        c.sock.setblocking(True)
        c.sock.settimeout(30)


def _wait_stopped(pid):
    for _ in range(2000):
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "T":
                return
        time.sleep(0.001)
    raise AssertionError(f"walk {pid} not stopped")


def _catch_walk(h, tries=8):
    """A client whose skills.sync waits on a stopped walk, and that walk."""
    for _ in range(tries):
        c = Client(h.sock, timeout=30)
        pid = _stopped_sync(h, c)
        if pid:
            _wait_stopped(pid)  # stopped for sure before going on
            return c, pid
        c.close()
    pytest.fail("every walk ended before it could be stopped")


def ping_alive(h):
    """PID 1 answers (the bound is only against a hang)."""
    c = Client(h.sock, timeout=5)
    try:
        assert c.result("ping") is not None
    finally:
        c.close()


def _sockets_held(pid):
    held = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            held.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass
    return [t for t in held if t.startswith("socket:")]


def _catch_settled_walk(h, tries=8):
    """A stopped walk past its start-up: caught perhaps right after the
    fork, it runs again until it holds no socket (its start-up closes
    what it inherited), for at most 50 ms, and is stopped again. A walk
    of the tree can end within that on a fast, cached disk: its reply is
    read and another is caught (counted by the caller through `runs`)."""
    for _ in range(tries):
        a, pid = _catch_walk(h)
        try:
            os.kill(pid, signal.SIGCONT)
            deadline = time.monotonic() + 0.05
            while _sockets_held(pid) and time.monotonic() < deadline:
                time.sleep(0.0005)
            os.kill(pid, signal.SIGSTOP)
            _wait_stopped(pid)
            return a, pid
        except (ProcessLookupError, FileNotFoundError):
            a.read_reply()
            a.close()
    pytest.fail("every walk ended before it could be stopped")


def test_huge_private_tree_walks_in_a_child_and_syncs_coalesce(hearth, tmp_path):
    pub = _skills(tmp_path, [f"s{i:02d}" for i in range(20)])
    priv = tmp_path / "priv"
    priv.mkdir()
    _plant_tree(priv, 40, 3000)  # 120,000 entries for every walk
    hearth.start(hearth.config(services=[KEEP],
                               skills={"public": str(pub), "private": str(priv)}))
    hearth.wait_for(lambda: hearth.rpc("status")["phases"]["skills"], timeout=60,
                    what="first overlay")
    runs = hearth.rpc("skills.sync")["runs"]
    a, pid = _catch_settled_walk(hearth)
    try:
        # The walk holds none of PID 1's sockets, epoll or signalfd (a
        # dropped client's close would otherwise wait for the walk): of
        # what it inherited it keeps its stdio, the result pipe, its own
        # eventfd (to ask the loop to read a full pipe) and the log; the
        # rest are the directories it has open.
        held = {}
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                held[int(fd)] = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                pass
        extra = {fd: t for fd, t in held.items() if fd > 2}
        assert not [t for t in extra.values() if t.startswith("socket:")], held
        assert [t for t in extra.values() if t.startswith("anon_inode:")] == \
            ["anon_inode:[eventfd]"], held
        assert len([t for t in extra.values() if t.startswith("pipe:")]) == 1, held
        # The loop answers while the walk is held, and only that one walk
        # runs whatever else is asked meanwhile.
        ping_alive(hearth)
        b, d, e = (Client(hearth.sock, timeout=60) for _ in range(3))
        b.send_raw(b'{"jsonrpc":"2.0","id":2,"method":"skills.sync"}\n')
        d.send_raw(b'{"jsonrpc":"2.0","id":3,"method":"skills.sync"}\n')
        e.send_raw(b'{"jsonrpc":"2.0","id":4,"method":"skills.list"}\n')
        (pub / "late").mkdir()
        (pub / "late" / "SKILL.md").write_text("# late\n")
        # Past inotify's 200 ms delay: that trigger is coalesced as well.
        time.sleep(0.5)
        ping_alive(hearth)
        assert _walkers(hearth) == [pid]
    finally:
        os.kill(pid, signal.SIGCONT)
    ra, rb, rd, re_ = a.read_reply(), b.read_reply(), d.read_reply(), e.read_reply()
    for c in (a, b, d, e):
        c.close()
    # The held run: the one skills.sync asked for, all of public linked.
    # It reads public after the agent's tree (the names of the agent's
    # skills come first), so it was held before or after reading "late".
    skipped = ra["result"]["runs"] - runs - 1  # walks that ended before one was caught
    assert ra["result"]["trigger"] == "sync" and ra["result"]["errors"] == 0, ra
    saw_late = ra["result"]["public"] == 21
    assert ra["result"]["public"] in (20, 21)
    assert ra["result"]["linked"] == ra["result"]["public"]
    # Both later requests were answered by one more run, which saw "late".
    assert rb["result"]["runs"] == rd["result"]["runs"] == runs + 2 + skipped, (ra, rb, rd)
    assert rb["result"]["public"] == 21 and rb["result"]["created"] == (0 if saw_late else 1)
    assert rb["result"]["linked"] == 21
    assert os.readlink(priv / "late") == f"{pub}/late"
    # The list, a dry run taking its turn right after the held run: "late"
    # is public, linked by then or pending.
    sl = re_["result"]
    assert len(sl["public"]) == 21, sl["last"]
    assert len(sl["linked"]) == (21 if saw_late else 20)
    assert sl["pending"] == (0 if saw_late else 1), sl["last"]
    # The agent's tree is walked whole, but holds files, not skills.
    assert sl["private"] == [] and sl["last"]["errors"] == 0
    assert sl["last"]["runs"] == ra["result"]["runs"]
    assert hearth.rpc("skills.sync")["runs"] == runs + 3 + skipped
    ping_alive(hearth)


def test_walk_past_its_deadline_is_killed_and_the_next_trigger_runs_again(hearth, tmp_path):
    pub = _skills(tmp_path, ("alpha", "beta"))
    priv = tmp_path / "priv"
    priv.mkdir()
    _plant_tree(priv, 20, 1000)
    hearth.start(hearth.config(services=[KEEP], skills={
        "public": str(pub), "private": str(priv), "timeout_ms": 2000}))
    hearth.wait_for(lambda: hearth.rpc("status")["phases"]["skills"], timeout=60,
                    what="first overlay")
    sub = Client(hearth.sock, timeout=30)
    sub.result("events.subscribe", {"since": 0})
    a, pid = _catch_walk(hearth)
    ping_alive(hearth)
    r = a.read_reply()
    a.close()
    # Killed at its deadline (SIGKILL ends a stopped process too).
    assert r["error"]["code"] == -32000, r
    assert "longer than 2000 ms (skills.timeout_ms)" in r["error"]["message"]
    hearth.wait_for(lambda: not os.path.exists(f"/proc/{pid}"), what="the walk reaped")
    while True:
        ev = sub.read_line()["params"]
        if ev["type"] == "skills.sync" and "error" in ev:
            break
    sub.close()
    assert "2000 ms" in ev["error"] and ev["trigger"] == "sync"
    ping_alive(hearth)
    # The next trigger walks again, to the end.
    (pub / "gamma").mkdir()
    (pub / "gamma" / "SKILL.md").write_text("# gamma\n")
    r = hearth.rpc("skills.sync")
    assert r["errors"] == 0 and "error" not in r and r["public"] == 3 and r["linked"] == 3
    assert os.readlink(priv / "gamma") == f"{pub}/gamma"


def test_a_walk_does_not_outlive_hearth(tmp_path):
    """A hearth that is not the init of its pid namespace (supervisor mode
    under a developer's shell) exits while a walk is held stopped, as on a
    hung share: the walk is killed with it, not left behind. (Under the
    other tests' fixture hearth is PID 1 of a namespace, whose exit takes
    every process in it along, so this one starts hearth bare.)"""
    pub = _skills(tmp_path, ("alpha",))
    priv = tmp_path / "priv"
    priv.mkdir()
    _plant_tree(priv, 20, 2000)
    sock = tmp_path / "ctl" / "ctl.sock"
    cfg = tmp_path / "h.json"
    cfg.write_text(json.dumps({"control": {"listen": [f"unix:{sock}"]},
                               "skills": {"public": str(pub), "private": str(priv)},
                               "services": [dict(KEEP, isolation=False)]}))
    proc = subprocess.Popen([HEARTH, "--mode", "supervisor", "--log", "warn", "-c", str(cfg)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pid = None
    try:
        bare = types.SimpleNamespace(pid=proc.pid, sock=str(sock))
        for _ in range(500):
            if sock.exists():
                break
            time.sleep(0.01)
        c = Client(str(sock), timeout=30)
        for _ in range(600):
            if c.result("status")["phases"]["skills"]:
                break
            time.sleep(0.1)
        c.close()
        a, pid = _catch_walk(bare)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        a.close()

        def state():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    return f.read().rsplit(")", 1)[1].split()[0]
            except FileNotFoundError:
                return None
        # Gone, or dead and waiting for its new parent to reap it.
        for _ in range(500):
            if state() in (None, "Z", "X"):
                break
            time.sleep(0.01)
        assert state() in (None, "Z", "X"), f"walk {pid} outlived hearth in state {state()}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
