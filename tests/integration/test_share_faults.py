"""A host share that starts failing with EIO, or hangs, under the work
hearth does on its own: the skills poll walking a public share, and the
disk check probing a mount. Neither blocks PID 1 (ping is answered at
once throughout), the error is reported, and the host is told by an
event when it starts and when it is over. (files.* on such a share:
test_files_share.py.)

The share is a FUSE file system served by the test (tests/lib/fusefs.py),
mounted in hearth's mount namespace; fail() makes its server answer EIO,
pause() makes it stop reading requests, as a stalled virtio-fs daemon."""
import os
import time

import pytest

import fusefs

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
        ev = next_event(c, lambda e: e["type"] == "skills.sync" and "error" in e, what="EIO")
        assert ev["trigger"] == "poll" and ev["error"].endswith(EIO_TEXT), ev
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
                                "owner": "10005:10006", "timeout_ms": 1500}]))
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
        a = hearth.service("agent")
        assert a["state"] == "waiting" and a["waiting_for"] == "mounts", a
        # The deadline: failed, saying so.
        fail = next_event(c, lambda e: e["type"] == "mount.failed", what="mount.failed")
        assert time.monotonic() - t0 >= 1.4
        assert fail["target"] == str(home) and fail["required"] is True, fail
        assert fail["error"] == f"owner 10005:10006: {home} did not answer in 1500 ms", fail
        m = [m for m in hearth.rpc("mounts.list")["mounts"] if m["target"] == str(home)][0]
        assert m["state"] == "failed" and m["error"] == fail["error"], m
        st = hearth.rpc("status")
        assert st["phases"]["mounts"] is False and st["mounts"]["failed"] == 1, st["mounts"]
        assert fail["error"] in st["mounts"]["error"]
        assert hearth.service("agent")["state"] == "waiting"
        assert hearth.rpc("ping") == {}
        assert f"platform mount {home}: {fail['error']}" in hearth.log_text()
        c.close()
    finally:
        fs.close()
    # The step's child was killed, not left behind.
    hearth.wait_for(lambda: not walkers(hearth), what="no owner step left")
