"""Restart rules the service's exit code decides (restart_force_exit_codes,
restart_prevent_exit_codes) and the graceful restart by signal
(services.restart with "signal", on_resume "restart:SIGNAME")."""
import subprocess
import time

import pytest

from conftest import HEARTHCTL


def _stamps(path):
    """The monotonic-ish start times a service wrote, one per start, in s."""
    if not path.exists():
        return []
    return [int(x) / 1e9 for x in path.read_text().split()]


@pytest.mark.parametrize("restart", ["never", "on-failure"])
def test_force_exit_code_restarts_without_backoff_growth(hearth, tmp_path, restart):
    runs = tmp_path / "runs"
    hearth.start(hearth.config(services=[
        {"name": "keeper", "argv": ["sleep", "1000"], "main": True},
        {"name": "asks", "argv": ["sh", "-c", f'date +%s%N >> {runs}; exit 75'],
         "restart": restart, "restart_force_exit_codes": [75],
         "backoff": {"initial_ms": 200, "max_ms": 30000}}]))
    # Growing, the gaps between six starts would be 0.2, 0.4, 0.8, 1.6
    # and 3.2 s; at a fixed 200 ms each is 200 ms plus a process start.
    # The bound under 1.6 s leaves a loaded machine over a second for
    # that start and still fails the last gap of a growing delay.
    hearth.wait_for(lambda: len(_stamps(runs)) >= 6, timeout=20.0, what="six starts")
    t = _stamps(runs)
    gaps = [b - a for a, b in zip(t, t[1:])][:5]
    assert all(0.15 <= g < 1.6 for g in gaps), gaps
    # Looked at between two runs (during one, last_exit is the one before).
    s = hearth.wait_for(lambda: (lambda x: x if x["state"] == "backoff" else None)(
        hearth.service("asks")), what="backoff between two runs")
    assert s["restarts"] >= 5
    assert s["last_exit"] == {"code": 75}
    assert s["next_start_ms"] <= 200
    assert "restart_force_exit_codes" in s["error"]


def test_other_exit_codes_still_follow_restart(hearth, tmp_path):
    runs = tmp_path / "runs"
    hearth.start(hearth.config(services=[
        {"name": "keeper", "argv": ["sleep", "1000"], "main": True},
        {"name": "plain", "argv": ["sh", "-c", f'echo x >> {runs}; exit 3'],
         "restart": "never", "restart_force_exit_codes": [75],
         "restart_prevent_exit_codes": [78]}]))
    s = hearth.wait_for(lambda: (lambda x: x if x["state"] == "failed" else None)(
        hearth.service("plain")), what="failed")
    assert s["error"] == "exited with code 3" and s["restarts"] == 0
    time.sleep(0.5)
    assert runs.read_text() == "x\n"


def test_prevent_exit_code_stays_failed_until_started(hearth, tmp_path):
    runs = tmp_path / "runs"
    hearth.start(hearth.config(services=[
        {"name": "keeper", "argv": ["sleep", "1000"], "main": True},
        {"name": "bad", "argv": ["sh", "-c", f'echo x >> {runs}; exit 78'],
         "restart": "always", "restart_prevent_exit_codes": [78],
         "success_exit_codes": [0, 78], "backoff": {"initial_ms": 50}}]))
    s = hearth.wait_for(lambda: (lambda x: x if x["state"] == "failed" else None)(
        hearth.service("bad")), what="failed")
    assert "78" in s["error"] and "restart_prevent_exit_codes" in s["error"], s
    assert s["last_exit"] == {"code": 78} and s["restarts"] == 0
    # restart "always" with a 50 ms backoff would have run it many times.
    time.sleep(1.0)
    s = hearth.service("bad")
    assert s["state"] == "failed" and runs.read_text() == "x\n"
    assert "not restarted" in hearth.log_text()

    # Started by hand, it runs again (and, exiting 78 again, stays down).
    r = hearth.rpc("services.start", {"name": "bad"})
    assert r["name"] == "bad"
    hearth.wait_for(lambda: runs.read_text() == "x\nx\n", what="second run")
    s = hearth.wait_for(lambda: (lambda x: x if x["state"] == "failed" else None)(
        hearth.service("bad")), what="failed again")
    time.sleep(0.5)
    assert runs.read_text() == "x\nx\n"


# The pid is written once the trap is set: a test that waits for it knows
# the signal will be caught (before the trap, USR1 ends the shell).
GRACEFUL = ('trap \'echo drained >> {marker}; exit 75\' USR1; '
            'echo $$ >> {pids}; '
            'while :; do sleep 0.05; done')
DEAF = 'trap "" USR1; echo $$ >> {pids}; while :; do sleep 0.05; done'


def _running_pid(hearth, name, not_pid=None):
    def pred():
        s = hearth.service(name)
        return s if s["state"] == "running" and s["pid"] and s["pid"] != not_pid else None
    return hearth.wait_for(pred, what=f"{name} running")


def test_graceful_restart_by_signal(hearth, tmp_path):
    pids, marker = tmp_path / "pids", tmp_path / "marker"
    hearth.start(hearth.config(services=[
        {"name": "agent", "argv": ["sh", "-c", GRACEFUL.format(pids=pids, marker=marker)],
         "restart": "always", "restart_force_exit_codes": [75],
         "backoff": {"initial_ms": 3000, "max_ms": 30000},
         "stop": {"timeout_ms": 8000}}]))
    first = _running_pid(hearth, "agent")
    hearth.wait_for(lambda: pids.exists() and len(pids.read_text().split()) == 1, what="first run")
    c = hearth.client()
    c.result("events.subscribe", {"since": 0})
    t0 = time.monotonic()
    r = hearth.rpc("services.restart", {"name": "agent", "signal": "SIGUSR1"})
    assert r["state"] == "stopping"
    second = _running_pid(hearth, "agent", not_pid=first["pid"])
    took = time.monotonic() - t0
    # At once: neither the 8 s stop timeout nor the 3 s backoff was waited.
    assert took < 2.0, took
    assert marker.read_text() == "drained\n"
    # The new shell writes its pid a moment after exec made it running.
    hearth.wait_for(lambda: len(pids.read_text().split()) == 2, what="second start")
    # Not counted as a failure: no backoff, no restart counted.
    assert second["restarts"] == first["restarts"]
    # Its exit is recorded all the same: the drain's 75, in status while
    # the next run goes on and in the event of the step to starting.
    assert first["last_exit"] is None and second["last_exit"] == {"code": 75}, second
    states, again = [], None
    deadline = time.monotonic() + 5
    while ("stopping", "starting") not in states and time.monotonic() < deadline:
        m = c.read_line()
        if m.get("method") == "event" and m["params"]["type"] == "service.state":
            states.append((m["params"]["from"], m["params"]["state"]))
            if states[-1] == ("stopping", "starting"):
                again = m["params"]
    assert ("running", "stopping") in states and ("stopping", "starting") in states
    assert ("stopping", "backoff") not in states
    assert again["last_exit"] == {"code": 75}, again
    c.close()
    assert "graceful restart: SIGUSR1" in hearth.log_text()

    # A bad signal is refused by name.
    e = hearth.client().call("services.restart", {"name": "agent", "signal": "SIGNOPE"})
    assert e["error"]["code"] == -32602 and "signal" in e["error"]["message"]

    # The same from hearthctl: "services restart NAME SIGNAL".
    r = subprocess.run([HEARTHCTL, "--connect", "unix:" + hearth.sock, "services", "restart",
                        "agent", "usr1"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0, r.stderr
    _running_pid(hearth, "agent", not_pid=second["pid"])
    hearth.wait_for(lambda: marker.read_text() == "drained\ndrained\n", what="second drain")


def test_graceful_restart_ignored_is_killed_after_the_stop_timeout(hearth, tmp_path):
    pids = tmp_path / "pids"
    hearth.start(hearth.config(services=[
        {"name": "deaf", "argv": ["sh", "-c", DEAF.format(pids=pids)],
         "restart": "never", "stop": {"timeout_ms": 600}}]))
    first = _running_pid(hearth, "deaf")
    hearth.wait_for(lambda: pids.exists() and len(pids.read_text().split()) == 1, what="trap set")
    t0 = time.monotonic()
    hearth.rpc("services.restart", {"name": "deaf", "signal": "USR1"})
    time.sleep(0.3)
    pid = hearth.service("deaf")["pid"]
    # Still waiting for it, when the look came before the stop timeout (a
    # loaded machine may wake the test later than asked).
    if time.monotonic() - t0 < 0.5:
        assert pid == first["pid"]
    second = _running_pid(hearth, "deaf", not_pid=first["pid"])
    took = time.monotonic() - t0
    # Killed at its own 600 ms, not the 10 s default; the upper bound
    # leaves room for a slow process start.
    assert 0.55 <= took < 6.0, took
    assert "no exit 600 ms after it was asked to stop, killing" in hearth.log_text()
    # The new shell writes its pid a moment after exec made it running.
    hearth.wait_for(lambda: len(pids.read_text().split()) == 2, what="second start")


def test_on_resume_restart_with_signal(hearth, tmp_path):
    pids, marker = tmp_path / "pids", tmp_path / "marker"
    hearth.start(hearth.config(services=[
        {"name": "agent", "argv": ["sh", "-c", GRACEFUL.format(pids=pids, marker=marker)],
         "restart_force_exit_codes": [75], "on_resume": "restart:SIGUSR1",
         "stop": {"timeout_ms": 8000}}]))
    first = _running_pid(hearth, "agent")
    hearth.wait_for(lambda: pids.exists() and len(pids.read_text().split()) == 1, what="trap set")
    r = hearth.rpc("sandbox.resume", {})
    steps = {s["name"]: s for s in r["steps"]}
    assert steps["on_resume"]["services"] == {"agent": "restart:SIGUSR1"}
    second = _running_pid(hearth, "agent", not_pid=first["pid"])
    assert marker.read_text() == "drained\n"
    # The new shell writes its pid a moment after exec made it running.
    hearth.wait_for(lambda: len(pids.read_text().split()) == 2, what="second start")
