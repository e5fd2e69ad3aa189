"""The sandbox's identity (status.identity, the "identity" event, the
resume step of that name) and the clock-step watcher in container mode,
against the shipped build/hearth as PID 1 of fresh namespaces.

The machine's clock is never set here: realtime is not namespaced (a time
namespace offsets only the monotonic and boot clocks, and only before its
first process), so the watcher's reaction to a real step is tested in a
VM (tests/vm/test_identity_vm.py); here it is seen running in a mode where
hearth may not set the clock."""
import re
import time

import pytest

HEX32 = re.compile(r"^[0-9a-f]{32}$")
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def svc(name, script, **kw):
    d = {"name": name, "argv": ["/bin/sh", "-c", script]}
    d.update(kw)
    return d


def read_events(c, want, timeout=5.0):
    """Event params read on subscribed client c until want(list) is true."""
    got = []
    deadline = time.monotonic() + timeout
    c.sock.settimeout(timeout)
    while not want(got):
        assert time.monotonic() < deadline, f"events so far: {got}"
        m = c.read_line()
        if m.get("method") == "event":
            got.append(m["params"])
    return got


@pytest.mark.valgrind
def test_identity_made_at_boot_and_again_by_a_host_resume(hearth, tmp_path):
    news = tmp_path / "news" / "resume"
    hearth.start(hearth.config([svc("a", "exec sleep 1000")], resume_file=str(news)))
    st = hearth.rpc("status")
    ident = st["identity"]
    assert HEX32.match(ident["instance_id"]), ident
    assert ident["generation"] == 0 and ident["cause"] == "boot", ident
    assert RFC3339.match(ident["refreshed_at"]), ident
    # A boot's generator is its own: nothing to refresh yet.
    assert ident["crng"] == {"action": "none"}, ident
    assert "clocks_only" not in ident
    # The boot identity is in the event ring for a host that subscribes late.
    ev = hearth.client()
    ev.result("events.subscribe", {"since": 0})
    boot = [e for e in read_events(ev, lambda g: any(e["type"] == "identity" for e in g))
            if e["type"] == "identity"]
    assert boot[0]["instance_id"] == ident["instance_id"] and boot[0]["generation"] == 0

    r = hearth.rpc("sandbox.resume", {})
    names = [s["name"] for s in r["steps"]]
    assert names[:4] == ["time", "entropy", "identity", "mounts"], names
    row = r["steps"][2]
    # Root with every capability in the host's user namespace: the
    # kernel's generator takes the bytes and reseeds.
    assert row["result"] == "ok", row
    assert HEX32.match(row["instance_id"]) and row["instance_id"] != ident["instance_id"], row
    assert row["generation"] == 1 and row["crng"] == {"action": "reseeded"}, row
    assert "CRNG reseeded" in row["detail"] and row["instance_id"] in row["detail"], row
    # The resume news carries the same generation.
    assert r["resume_file"]["generation"] == 1, r["resume_file"]

    after = hearth.rpc("status")["identity"]
    assert after["instance_id"] == row["instance_id"] and after["generation"] == 1, after
    assert after["cause"] == "host" and after["crng"]["action"] == "reseeded", after
    got = read_events(ev, lambda g: any(e["type"] == "identity" for e in g))
    e = next(e for e in got if e["type"] == "identity")
    assert e["instance_id"] == row["instance_id"] and e["generation"] == 1, e
    assert e["cause"] == "host" and e["crng"]["action"] == "reseeded", e
    # The resume event follows the identity event it caused.
    got += read_events(ev, lambda g: any(x["type"] == "resume" for x in got + g))
    types = [x["type"] for x in got]
    assert types.index("identity") < types.index("resume"), types

    # Each resume draws again: no id comes back.
    ids = {ident["instance_id"], row["instance_id"]}
    for gen in (2, 3):
        r = hearth.rpc("sandbox.resume", {})
        row = next(s for s in r["steps"] if s["name"] == "identity")
        assert row["generation"] == gen and row["instance_id"] not in ids, (row, ids)
        ids.add(row["instance_id"])
    assert hearth.rpc("status")["identity"]["generation"] == 3
    ev.close()


def test_clock_step_watcher_runs_where_hearth_may_not_set_the_clock(hearth):
    # Container mode: clock.set defaults to false, and the watcher runs all
    # the same (a restore under another init is told by nothing else).
    hearth.start(hearth.config())
    st = hearth.rpc("status")
    assert st["mode"] == "container"
    clock = st["sandbox"]["clock"]
    assert clock["set"] is False and clock["detect_step_ms"] == 1000, clock
    assert "clock_step" in st["sandbox"]["detectors"], st["sandbox"]
    # The hardware-clock comparison stays where hearth owns the clock.
    assert "hw_clock" not in st["sandbox"]["detectors"]
    hearth.stop()

    hearth.start(hearth.config(clock={"detect_step_ms": 0}))
    st = hearth.rpc("status")
    assert st["sandbox"]["clock"]["detect_step_ms"] == 0
    assert "clock_step" not in st["sandbox"]["detectors"], st["sandbox"]
