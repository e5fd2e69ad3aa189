"""Health checks: periodic probes while running, restart per policy after
N consecutive failures, service.health events and the status fields."""
import os
import time

import pytest


def _events(client, want, timeout=15.0):
    """Reads notifications until want(params) has matched; returns all read."""
    seen = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg = client.read_line()
        if msg.get("method") != "event":
            continue
        p = msg["params"]
        seen.append(p)
        if want(p):
            return seen
    raise AssertionError(f"event not seen; got {seen}")


@pytest.mark.valgrind
def test_failing_health_restarts_and_recovers(hearth, tmp_path):
    flag = tmp_path / "healthy"
    flag.write_text("")
    hearth.start(hearth.config(services=[
        {"name": "api", "argv": ["sleep", "1000"],
         "health": {"exec": ["test", "-e", str(flag)], "interval_ms": 100, "failures": 3},
         "backoff": {"initial_ms": 100}}]))
    s = hearth.wait_for(lambda: (lambda x: x if x["health"]["status"] == "healthy" else None)(
        hearth.service("api")), what="healthy")
    assert s["health"]["failures"] == 0 and s["health"]["threshold"] == 3
    first_pid = s["pid"]

    c = hearth.client()
    c.result("events.subscribe", {"since": 0})
    flag.unlink()
    seen = _events(c, lambda p: p["type"] == "service.state" and p["state"] == "starting"
                   and p["from"] == "backoff")
    health = [p for p in seen if p["type"] == "service.health"]
    failing = [p for p in health if p["status"] == "failing"]
    assert [p["failures"] for p in failing][-2:] == [1, 2], health
    restart = [p for p in health if p.get("action") == "restart"]
    assert len(restart) == 1 and restart[0]["status"] == "unhealthy"
    assert restart[0]["failures"] == 3 and "exited with status 1" in restart[0]["detail"]
    # The stop went through stopping, then backoff like any failure.
    states = [(p["from"], p["state"]) for p in seen if p["type"] == "service.state"]
    assert ("running", "stopping") in states and ("stopping", "backoff") in states
    backoff = [p for p in seen if p["type"] == "service.state" and p["state"] == "backoff"][-1]
    assert backoff["restarts"] == 1
    assert "unhealthy: 3 health checks failed in a row" in backoff["error"]

    # Healthy again once the probe passes; the count starts over.
    flag.write_text("")
    s = hearth.wait_for(lambda: (lambda x: x if x["state"] == "running" and
                                 x["health"]["status"] == "healthy" else None)(hearth.service("api")),
                        what="healthy after restart")
    assert s["pid"] != first_pid and s["health"]["failures"] == 0
    c.close()


def test_unhealthy_with_restart_never_fails(hearth):
    hearth.start(hearth.config(services=[
        {"name": "keeper", "argv": ["sleep", "1000"], "main": True},
        {"name": "once", "argv": ["sleep", "1000"], "restart": "never",
         # Nothing listens there inside the test's fresh network namespace.
         "health": {"tcp": "127.0.0.1:9", "interval_ms": 100, "failures": 2}}]))
    s = hearth.wait_for(lambda: (lambda x: x if x["state"] == "failed" else None)(
        hearth.service("once")), what="failed after health")
    assert s["restarts"] == 0 and s["pid"] == 0
    assert "unhealthy: 2 health checks failed in a row" in s["error"]
    assert "127.0.0.1:9" in s["error"]
    assert s["health"]["status"] == "off"


@pytest.mark.valgrind
def test_health_waits_for_readiness_and_stops_with_the_service(hearth, tmp_path):
    ready = tmp_path / "ready"
    hearth.start(hearth.config(services=[
        {"name": "slow", "argv": ["sleep", "1000"],
         "ready": {"file": str(ready)},
         "health": {"exec": ["false"], "interval_ms": 50, "failures": 1000}}]))
    time.sleep(0.6)
    s = hearth.service("slow")
    # Still starting: not one probe has run.
    assert s["state"] == "starting" and s["health"]["checks"] == 0
    assert s["health"]["status"] == "off"
    ready.write_text("")
    hearth.wait_for(lambda: hearth.service("slow")["health"]["checks"] >= 3, what="probes once running")
    assert hearth.service("slow")["health"]["status"] == "failing"
    hearth.rpc("services.stop", {"name": "slow"})
    hearth.wait_for(lambda: hearth.service("slow")["state"] == "stopped", what="stopped")
    checks = hearth.service("slow")["health"]["checks"]
    time.sleep(0.4)
    # Counts are kept for status, but no probe runs on a stopped service.
    assert hearth.service("slow")["health"]["checks"] == checks


def test_unhealthy_stop_can_be_made_final(hearth, tmp_path):
    """services.stop while a health restart is under way keeps it down."""
    # The check fails once the TERM trap is set (the file says so): a stop
    # sent before would end the shell at once, with nothing to wait for.
    armed = tmp_path / "armed"
    hearth.start(hearth.config(services=[
        {"name": "stubborn",
         "argv": ["sh", "-c", f"trap '' TERM; : > {armed}; while :; do sleep 0.05; done"],
         "health": {"exec": ["sh", "-c", f"! test -e {armed}"], "interval_ms": 50,
                    "failures": 1},
         "stop": {"timeout_ms": 1500}, "backoff": {"initial_ms": 50}}]))
    hearth.wait_for(lambda: hearth.service("stubborn")["state"] == "stopping", what="health stop")
    assert hearth.service("stubborn")["health"]["status"] == "unhealthy"
    hearth.rpc("services.stop", {"name": "stubborn"})
    s = hearth.wait_for(lambda: (lambda x: x if x["state"] == "stopped" else None)(
        hearth.service("stubborn")), timeout=10, what="stopped for good")
    assert s["restarts"] == 0
    time.sleep(0.3)
    assert hearth.service("stubborn")["state"] == "stopped"


# The OOM report is proven in tests/vm (test_oom_in_the_agent_cgroup): the
# hosts these tests run on keep the memory controller on cgroup v1.
