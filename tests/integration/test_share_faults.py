"""A host share that starts failing with EIO, or hangs, under the work
hearth does on its own: the skills poll walking a public share, the disk
check probing a mount, and giving a platform mount's root its owner. None
blocks PID 1 (ping is answered at once throughout), the error is
reported, and the host is told by an event when it starts and when it is
over. And the work under way on a share that stalls (a skills walk, a
seed copy) when the platform takes the home it writes to away. (files.* on such a share:
test_files_share.py.)

The share is a FUSE file system served by the test (tests/lib/fusefs.py),
mounted in hearth's mount namespace; fail() makes its server answer EIO,
pause() makes it stop reading requests, as a stalled virtio-fs daemon."""
import os
import subprocess
import time

import pytest

import fusefs
from conftest import HEARTHCTL

KEEP = {"name": "keep", "argv": ["sleep", "1000"], "main": True}
EIO_TEXT = ("I/O error", "Input/output error")  # musl's, glibc's


@pytest.fixture
def fuse_ok():
    if not os.path.exists("/dev/fuse"):
        pytest.skip("no /dev/fuse")


def subscribe(h):
    c = h.client(timeout=30)
    c.result("events.subscribe", {})
    return c


def next_event(c, pred, timeout=20.0, what="event"):
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        msg = c.read_line()
        if msg.get("method") != "event":
            continue
        e = msg["params"]
        seen.append(e)
        if pred(e):
            return e
    raise AssertionError(f"no {what}; saw {seen}")


def walkers(h):
    """hearth's children that are hearth itself, forked and not exec'd:
    a walk (the service's is the reaper, "hearth-reaper")."""
    out = []
    for k in open(f"/proc/{h.pid}/task/{h.pid}/children").read().split():
        try:
            if open(f"/proc/{k}/comm").read().strip() == "hearth":
                out.append(k)
        except OSError:
            pass
    return out


def pings_meanwhile(h, seconds):
    """Pings for that long; the slowest answer (s)."""
    c = h.client(timeout=5)
    worst, end = 0.0, time.monotonic() + seconds
    while time.monotonic() < end:
        t = time.monotonic()
        assert c.result("ping") == {}
        worst = max(worst, time.monotonic() - t)
        time.sleep(0.01)
    c.close()
    return worst


def _ns(h, *cmd):
    """Runs cmd in hearth's mount namespace, as a platform's agent does."""
    r = subprocess.run(["nsenter", "-t", str(h.pid), "-m", "-p", *cmd], capture_output=True,
                       text=True, timeout=10)
    assert r.returncode == 0, f"{cmd}: {r.stderr}"


def test_skills_poll_on_a_share_that_fails_then_hangs(hearth, tmp_path, fuse_ok):
    pub = tmp_path / "pub"
    pub.mkdir()
    priv = tmp_path / "priv"
    priv.mkdir()
    hearth.start(hearth.config(services=[KEEP], skills={
        "public": str(pub), "private": str(priv), "poll_ms": 200, "timeout_ms": 1000}))
    hearth.wait_for(lambda: hearth.rpc("status")["phases"]["skills"], what="first overlay")
    fs = fusefs.FuseServer({"README": b"not a skill\n"})
    fs.mount(hearth.pid, str(pub))
    try:
        c = subscribe(hearth)
        runs = hearth.rpc("status")["skills"]["runs"]
        hearth.wait_for(lambda: hearth.rpc("status")["skills"]["runs"] >= runs + 2,
                        what="polls over the share")
        assert fusefs.READDIR in set(fs.seen)
        # The share's server fails: each poll's walk reports EIO.
        fs.fail()
        # (A run the mount's own inotify event queued may fail first: the
        # poll's is the one asked for.)
        ev = next_event(c, lambda e: e["type"] == "skills.sync" and "error" in e
                        and e["trigger"] == "poll", what="EIO on a poll")
        assert ev["error"].endswith(EIO_TEXT), ev
        assert str(pub) in ev["error"], ev
        assert hearth.rpc("status")["skills"]["error"] == ev["error"]
        # It heals: the next good run says the error is over.
        fs.heal()
        ok = next_event(c, lambda e: e["type"] == "skills.sync", what="recovery")
        assert "error" not in ok and ok["errors"] == 0, ok
        assert "error" not in hearth.rpc("status")["skills"]
        # The server stops answering: the walk waits in the kernel, in its
        # child; the loop answers at once meanwhile, and the walk is killed
        # at skills.timeout_ms.
        fs.pause()
        t0 = time.monotonic()
        worst = pings_meanwhile(hearth, 1.5)
        assert worst < 0.5, worst
        ev = next_event(c, lambda e: e["type"] == "skills.sync" and "error" in e, what="timeout")
        assert ev["error"] == ("the walk took longer than 1000 ms (skills.timeout_ms); "
                               "stopped"), ev
        assert time.monotonic() - t0 >= 0.9
        # Polls go on after the kill (each walk again killed at its
        # deadline while the share hangs) ...
        runs = hearth.rpc("status")["skills"]["runs"]
        hearth.wait_for(lambda: hearth.rpc("status")["skills"]["runs"] > runs, timeout=10,
                        what="another poll")
        # ... and once the server answers again, so does the overlay.
        fs.resume()
        ok = next_event(c, lambda e: e["type"] == "skills.sync" and "error" not in e,
                        what="recovery after the hang")
        assert ok["errors"] == 0, ok
        assert hearth.rpc("ping") == {}
        c.close()
    finally:
        fs.close()
    # No walk is left behind.
    hearth.wait_for(lambda: not walkers(hearth), what="no walk left")


def test_disk_check_on_a_share_that_fails_then_hangs(hearth, tmp_path, fuse_ok):
    target = str(tmp_path / "share")
    other = str(tmp_path / "other")
    hearth.start(hearth.config(
        [KEEP], mounts=[{"target": target, "type": "tmpfs", "options": "size=1m"},
                        {"target": other, "type": "tmpfs", "options": "size=2m"}],
        metrics={"disk_check_ms": 300}))
    fs = fusefs.FuseServer({"README": b"x"})
    fs.mount(hearth.pid, target)
    try:
        c = subscribe(hearth)
        # The share's server fails: the periodic check says so once.
        fs.fail()
        ev = next_event(c, lambda e: e["type"] == "disk.error", what="disk.error")
        assert ev["target"] == target and ev["fstype"] == "tmpfs", ev
        assert ev["error"].startswith("unable to statvfs: ") and ev["error"].endswith(EIO_TEXT), ev
        m = hearth.rpc("metrics")
        row = [r for r in m["mounts"] if r["target"] == target][0]
        assert row["error"] == ev["error"], row
        assert [r for r in m["mounts"] if r["target"] == other][0]["bytes_total"] == 2 << 20
        time.sleep(1)  # more checks: no second disk.error while it stays failed
        fs.heal()
        ok = next_event(c, lambda e: e["type"].startswith("disk."), what="disk.recovered")
        assert ok["type"] == "disk.recovered" and ok["target"] == target, ok
        assert ok["bytes_avail"] == 512 * 4096 and ok["used_percent"] == 50, ok  # fusefs.py STATFS
        # The server stops answering: the probe's child waits in the kernel,
        # the loop answers at once, and the check reports the hang.
        fs.pause()
        worst = pings_meanwhile(hearth, 2.5)
        assert worst < 0.5, worst
        ev = next_event(c, lambda e: e["type"].startswith("disk."), what="disk.error (hang)")
        assert ev["type"] == "disk.error" and ev["target"] == target, ev
        assert ev["error"] == "statvfs did not return within 2000 ms", ev
        # The other mount is still measured.
        m = hearth.rpc("metrics")
        assert [r for r in m["mounts"] if r["target"] == other][0]["bytes_total"] == 2 << 20
        fs.resume()
        ok = next_event(c, lambda e: e["type"].startswith("disk."), what="recovery after the hang")
        assert ok["type"] == "disk.recovered" and ok["target"] == target, ok
        assert hearth.rpc("ping") == {}
        c.close()
    finally:
        fs.close()


def test_owner_step_on_a_platform_share_that_hangs(hearth, tmp_path, fuse_ok):
    """A platform mount with an owner whose share hangs from its first
    appearance (its server never answers): giving its root the owner waits
    in a child, so hearth answers meanwhile; the mount is "owning", not
    usable (what runs after mounts waits), and at the deadline (the
    mount's timeout_ms) it fails, naming it."""
    home = tmp_path / "home"
    home.mkdir()
    agent = {"name": "agent", "after": ["mounts"], "argv": ["sleep", "1000"]}
    hearth.start(hearth.config(
        [agent, KEEP], mounts=[{"type": "platform", "target": str(home),
                                "owner": "10005:10006", "timeout_ms": 3000}]))
    c = subscribe(hearth)
    fs = fusefs.FuseServer({"README": b"x"})
    fs.pause()  # not even INIT is answered: every request waits
    try:
        fs.mount(hearth.pid, str(home))
        t0 = time.monotonic()
        ev = next_event(c, lambda e: e["type"] == "mount.changed", what="mount.changed")
        assert ev["change"] == "appeared" and ev["target"] == str(home) and "error" not in ev, ev
        m = [m for m in hearth.rpc("mounts.list")["mounts"] if m["target"] == str(home)][0]
        assert m["state"] == "owning" and m["owner"] == "10005:10006", m
        # The loop answers at once while the step waits on the share.
        worst = pings_meanwhile(hearth, 0.8)
        assert worst < 0.5, worst
        st = hearth.rpc("status")
        assert st["phases"]["mounts"] is False, st["phases"]
        assert st["mounts"]["owning"] == [str(home)] and st["mounts"]["waiting_for"] == []
        out = subprocess.run([HEARTHCTL, "--connect", "unix:" + hearth.sock, "status"],
                             capture_output=True, text=True, timeout=10).stdout
        assert f"mounts: giving {home} its owner (the share has not answered yet)" in out, out
        a = hearth.service("agent")
        assert a["state"] == "waiting" and a["waiting_for"] == "mounts", a
        # The deadline: failed, saying so.
        fail = next_event(c, lambda e: e["type"] == "mount.failed", what="mount.failed")
        assert time.monotonic() - t0 >= 2.9
        assert fail["target"] == str(home) and fail["required"] is True, fail
        assert fail["error"] == f"owner 10005:10006: {home} did not answer in 3000 ms", fail
        m = [m for m in hearth.rpc("mounts.list")["mounts"] if m["target"] == str(home)][0]
        assert m["state"] == "failed" and m["error"] == fail["error"], m
        st = hearth.rpc("status")
        assert st["phases"]["mounts"] is False and st["mounts"]["failed"] == 1, st["mounts"]
        assert "owning" not in st["mounts"]
        assert fail["error"] in st["mounts"]["error"]
        assert hearth.service("agent")["state"] == "waiting"
        assert hearth.rpc("ping") == {}
        assert f"platform mount {home}: {fail['error']}" in hearth.log_text()
        hearth.wait_for(lambda: not walkers(hearth), what="the step's child killed")
        # The platform takes it away; another that hangs comes, and goes
        # before it answers: that step is stopped, nothing fails, and the
        # mount is waited for again.
        _ns(hearth, "umount", "-l", str(home))
        next_event(c, lambda e: e["type"] == "mount.changed" and e["change"] == "gone",
                   what="gone")
        fs2 = fusefs.FuseServer({"README": b"x"})
        fs2.pause()
        try:
            fs2.mount(hearth.pid, str(home))
            hearth.wait_for(lambda: hearth.rpc("status")["mounts"].get("owning") == [str(home)],
                            what="owning again")
            assert walkers(hearth)
            _ns(hearth, "umount", "-l", str(home))
            next_event(c, lambda e: e["type"] == "mount.changed" and e["change"] == "gone",
                       what="gone again")
            hearth.wait_for(lambda: not walkers(hearth), what="the step stopped")
            m = [m for m in hearth.rpc("mounts.list")["mounts"] if m["target"] == str(home)][0]
            assert m["state"] == "waiting" and m["changes"] == 4, m
            st = hearth.rpc("status")
            assert st["mounts"]["waiting_for"] == [str(home)] and "owning" not in st["mounts"]
            time.sleep(3.2)  # past the step's deadline: no failure comes of it
            assert hearth.rpc("status")["mounts"]["failed"] == 0
            m = [m for m in hearth.rpc("mounts.list")["mounts"] if m["target"] == str(home)][0]
            assert m["state"] == "waiting" and "did not answer" not in m.get("error", ""), m
        finally:
            fs2.close()
        c.close()
    finally:
        fs.close()
    # No step's child is left behind.
    hearth.wait_for(lambda: not walkers(hearth), what="no owner step left")



def _home_config(tmp_path, tmpl, pub, services):
    g = tmp_path / "guest"
    home = g / "home"
    home.mkdir(parents=True)
    (home / "image-file").write_text("the image's\n")
    return home, dict(
        services=services,
        mounts=[{"type": "platform", "target": str(home)}],
        seed=[{"target": str(home), "from": str(tmpl), "unless": "config.yaml"}],
        skills={"public": str(pub), "private": str(home / "skills"), "poll_ms": 0,
                "timeout_ms": 60000})


def test_skills_walk_stops_when_the_home_goes_and_runs_again_when_back(hearth, tmp_path,
                                                                       fuse_ok):
    """The platform takes the home away while a skills walk waits on a
    public share that hangs: the walk is stopped (its skills.sync answers
    why), the phase "skills" is revoked (what runs after it only is
    stopped), and once a home is back the overlay runs again on it and
    the phase and its services come back."""
    tmpl = tmp_path / "tmpl"
    tmpl.mkdir()
    (tmpl / "config.yaml").write_text("model: default\n")
    pub = tmp_path / "public"
    pub.mkdir()
    host = tmp_path / "host-home"
    host.mkdir()
    ui = {"name": "ui", "after": ["skills"], "argv": ["sleep", "1000"]}
    home, cfg = _home_config(tmp_path, tmpl, pub, [ui, KEEP])
    hearth.start(hearth.config(**cfg))
    fs = fusefs.FuseServer({"README": b"not a skill\n"})
    fs.mount(hearth.pid, str(pub))
    try:
        _ns(hearth, "mount", "--bind", str(host), str(home))
        hearth.wait_for(lambda: hearth.service("ui")["state"] == "running", what="ui running")
        ui_pid = hearth.service("ui")["pid"]
        assert hearth.rpc("status")["phases"]["skills"] is True
        c = subscribe(hearth)
        # The public share stops answering; a sync's walk waits on it.
        fs.pause()
        s = hearth.client(timeout=30)
        s.send_raw(b'{"jsonrpc":"2.0","id":7,"method":"skills.sync"}\n')
        hearth.wait_for(lambda: walkers(hearth), what="a walk waiting on the share")
        # The platform takes the home away.
        _ns(hearth, "umount", "-l", str(home))
        reply = s.read_line()
        assert reply["id"] == 7 and "error" in reply, reply
        assert reply["error"]["message"] == f"the walk was stopped: platform mount {home} gone"
        s.close()
        ev = next_event(c, lambda e: e["type"] == "phase.reached" and e["phase"] == "skills",
                        what="skills revoked")
        assert ev["reached"] is False and ev["revoked"] is True, ev
        assert ev["reason"] == f"platform mount {home} gone", ev
        hearth.wait_for(lambda: hearth.service("ui")["state"] == "waiting", what="ui waiting")
        u = hearth.service("ui")
        assert u["waiting_for"] == "skills" and u["restarts"] == 0 and "error" not in u, u
        hearth.wait_for(lambda: not walkers(hearth), what="the walk gone")
        st = hearth.rpc("status")
        assert st["phases"]["skills"] is False and st["phases"]["mounts"] is False
        assert "stopped" in st["skills"]["error"], st["skills"]
        # Nothing is linked into the image's directory meanwhile.
        q = hearth.client()
        err = q.error("skills.sync")
        assert err["message"] == f"the platform mount at {home} is not there", err
        err = q.error("skills.fork", {"name": "alpha"})
        q.close()
        assert err["message"] == f"unable to fork alpha: the platform mount at {home} is not there"
        assert os.listdir(home) == ["image-file"]
        # The share answers again, and the home comes back: the overlay runs
        # on it, the phase and ui come back.
        fs.resume()
        _ns(hearth, "mount", "--bind", str(host), str(home))
        ev = next_event(c, lambda e: e["type"] == "phase.reached" and e["phase"] == "skills",
                        what="skills reached again")
        assert ev["reached"] is True and "revoked" not in ev, ev
        hearth.wait_for(lambda: (lambda u: u["state"] == "running" and u["pid"] != ui_pid)(
            hearth.service("ui")), what="ui running again")
        assert hearth.service("ui")["restarts"] == 0
        last = hearth.rpc("status")["skills"]
        assert last["trigger"] == "mounts" and "error" not in last, last
        assert (host / "skills").is_dir()
        assert os.listdir(home) == ["image-file"]
        c.close()
    finally:
        fs.close()
    hearth.wait_for(lambda: not walkers(hearth), what="no walk left")


def test_seed_copy_stops_when_the_home_goes_and_completes_when_back(hearth, tmp_path,
                                                                    fuse_ok):
    """The platform takes the home away while a seed copy is under way
    (its template on a share that stalls mid-file): the copy is killed, not
    left writing beneath, its entry skipped; services that run on the home
    (one that had failed too) wait; once the home is back the copy is
    completed there and they all start again."""
    tmpl = tmp_path / "tmpl"
    tmpl.mkdir()
    pub = tmp_path / "public"
    pub.mkdir()
    host = tmp_path / "host-home"
    host.mkdir()
    agent = {"name": "agent", "after": ["mounts", "skills"], "argv": ["sleep", "1000"]}
    # Fails at once and is not restarted: started again with the home.
    brittle = {"name": "brittle", "after": ["mounts"], "restart": "never",
               "argv": ["sh", "-c", "echo ran >> " + str(tmp_path / "brittle.runs") + "; exit 3"]}
    home, cfg = _home_config(tmp_path, tmpl, pub, [agent, brittle, KEEP])
    # A first home, seeded at once, so brittle has run and failed.
    first = tmp_path / "host-first"
    first.mkdir()
    (first / "config.yaml").write_text("model: first\n")
    hearth.start(hearth.config(**cfg), binds=[(first, home)])
    hearth.wait_for(lambda: hearth.service("brittle")["state"] == "failed", what="brittle failed")
    hearth.wait_for(lambda: hearth.service("agent")["state"] == "running", what="agent running")
    fs = fusefs.FuseServer({"config.yaml": b"model: default\n"})
    fs.mount(hearth.pid, str(tmpl))
    try:
        c = subscribe(hearth)
        # The first home goes: what runs on it waits for the next, the
        # failed one too.
        _ns(hearth, "umount", "-l", str(home))
        hearth.wait_for(lambda: hearth.service("agent")["state"] == "waiting", what="agent waits")
        b = hearth.service("brittle")
        assert b["state"] == "waiting" and b["waiting_for"] == "mounts", b
        # The template's server answers the open of its file, then stalls:
        # the next home's copy waits on the read, in its child.
        fs.pause_after(fusefs.OPEN)
        _ns(hearth, "mount", "--bind", str(host), str(home))
        hearth.wait_for(lambda: hearth.rpc("mounts.list")["seeding"] and walkers(hearth)
                        and (host / ".hearth-seeding").exists(), what="the copy under way")
        time.sleep(0.3)  # at the read of the file, which the share does not answer
        assert fs.seen[-1] == fusefs.OPEN and hearth.rpc("mounts.list")["seeding"]
        # The platform takes the home away.
        _ns(hearth, "umount", "-l", str(home))
        ev = next_event(c, lambda e: e["type"] == "seed.failed", what="the copy stopped")
        assert ev["target"] == str(home) and ev["result"] == "skipped", ev
        assert ev["error"] == (f"the copy was stopped: platform mount {home} gone "
                               "(redone when it is back)"), ev
        assert f"seed {home}: stopping the copy: platform mount {home} gone" in hearth.log_text()
        assert os.listdir(home) == ["image-file"]
        # Nothing ran meanwhile.
        assert hearth.service("agent")["state"] == "waiting"
        assert hearth.service("brittle")["state"] == "waiting"
        assert (tmp_path / "brittle.runs").read_text() == "ran\n"
        # The share answers again and the home is back: the copy is
        # completed there, then everything on it starts again.
        fs.resume()
        # (Killed, the copy was left waiting for the share to answer the
        # flush of its file: it is gone now.)
        hearth.wait_for(lambda: not walkers(hearth), what="the copy's process gone")
        _ns(hearth, "mount", "--bind", str(host), str(home))
        ev = next_event(c, lambda e: e["type"] in ("seed.done", "seed.failed"), what="seeded")
        assert ev["type"] == "seed.done" and ev["target"] == str(home), ev
        assert (host / "config.yaml").read_bytes() == b"model: default\n"
        assert not (host / ".hearth-seeding").exists()
        hearth.wait_for(lambda: hearth.service("agent")["state"] == "running",
                        what="agent running again")
        hearth.wait_for(lambda: (tmp_path / "brittle.runs").read_text() == "ran\nran\n",
                        what="brittle run again")
        hearth.wait_for(lambda: hearth.service("brittle")["state"] == "failed",
                        what="brittle failed again")
        assert hearth.rpc("mounts.list")["seed"][0]["result"] == "seeded"
        assert os.listdir(home) == ["image-file"]
        c.close()
    finally:
        fs.close()
