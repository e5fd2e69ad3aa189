"""Service control, backoff and output capture."""
import os
import signal
import time

import pytest


def _svc(h, name):
    return h.service(name)


@pytest.mark.valgrind
def test_logs_read_and_follow(hearth):
    script = 'echo out-one; echo err-one >&2; i=0; while :; do i=$((i+1)); echo tick $i; sleep 0.1; done'
    hearth.start(hearth.config(services=[{"name": "talker", "argv": ["sh", "-c", script]}]))
    def enough():
        lines = hearth.rpc("logs.read", {"name": "talker", "lines": 50})["lines"]
        return lines if len(lines) >= 4 else None
    lines = hearth.wait_for(enough, what="output lines")
    texts = [(l["stream"], l["line"]) for l in lines]
    assert ("stdout", "out-one") in texts and ("stderr", "err-one") in texts
    assert all("t_ms" in l and "time_ms" in l for l in lines)
    assert len(hearth.rpc("logs.read", {"name": "talker", "lines": 2})["lines"]) == 2
    c = hearth.client()
    r = c.result("logs.read", {"name": "talker", "lines": 0, "follow": True})
    assert r["lines"] == []
    msg = c.read_line()
    assert msg["method"] == "log" and msg["params"]["name"] == "talker"
    assert msg["params"]["line"].startswith("tick")
    c.close()
    st = hearth.service("talker")
    assert st["output_lines"] >= 4 and st["last_output_ms"] < 5000


def test_logs_read_errors_name_the_field(hearth):
    hearth.start(hearth.config(services=[{"name": "a", "argv": ["sleep", "1000"]}]))
    c = hearth.client()
    assert c.call("logs.read", {"name": "nope"})["error"]["code"] == -32002
    e = c.call("logs.read", {"name": "a", "lines": "x"})["error"]
    assert e["code"] == -32602 and e["message"].startswith("lines:")
    e = c.call("logs.read", {"name": "a", "follow": 1})["error"]
    assert e["message"].startswith("follow:")
    e = c.call("services.stop", {})["error"]
    assert e["code"] == -32602 and e["message"].startswith("name:")
    c.close()


@pytest.mark.valgrind
def test_stop_start_restart_signal(hearth, tmp_path):
    hup = tmp_path / "hup"
    armed = tmp_path / "armed"
    script = f'trap "echo hup >> {hup}" HUP; : > {armed}; while :; do sleep 0.05; done'
    hearth.start(hearth.config(services=[{"name": "svc", "argv": ["sh", "-c", script]}]))
    hearth.wait_for(lambda: _svc(hearth, "svc")["state"] == "running", what="running")
    pid1 = _svc(hearth, "svc")["pid"]
    # Running is the exec; a HUP before the trap is set ends the shell.
    hearth.wait_for(armed.exists, what="the HUP trap set")
    r = hearth.rpc("services.signal", {"name": "svc", "signal": "SIGHUP"})
    assert r["signal"] == "SIGHUP"
    hearth.wait_for(lambda: hup.exists(), what="SIGHUP handled")
    hearth.rpc("services.stop", {"name": "svc"})
    hearth.wait_for(lambda: _svc(hearth, "svc")["state"] == "stopped", what="stopped")
    # Stopped on request: not restarted.
    time.sleep(0.8)
    assert _svc(hearth, "svc")["state"] == "stopped"
    c = hearth.client()
    e = c.call("services.signal", {"name": "svc", "signal": "SIGHUP"})["error"]
    assert e["code"] == -32003
    e = c.call("services.signal", {"name": "svc", "signal": "SIGBOGUS"})["error"]
    assert e["code"] == -32602
    c.close()
    hearth.rpc("services.start", {"name": "svc"})
    hearth.wait_for(lambda: _svc(hearth, "svc")["state"] == "running", what="running again")
    pid2 = _svc(hearth, "svc")["pid"]
    assert pid2 != pid1
    hearth.rpc("services.restart", {"name": "svc"})
    hearth.wait_for(lambda: (lambda s: s["state"] == "running" and s["pid"] not in (pid1, pid2))(_svc(hearth, "svc")),
                    what="restarted")


def test_backoff_grows(hearth):
    hearth.start(hearth.config(services=[{"name": "crash", "argv": ["sh", "-c", "exit 1"],
                                          "backoff": {"initial_ms": 100, "max_ms": 800}}]))
    c = hearth.client()
    c.result("events.subscribe", {"since": 0})
    times = []
    deadline = time.monotonic() + 15
    while len(times) < 5 and time.monotonic() < deadline:
        e = c.read_line()["params"]
        if e.get("type") == "service.state" and e.get("state") == "starting":
            times.append(e["mono_ms"])
    c.close()
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert len(gaps) == 4
    # ~100, 200, 400, 800 ms with +-10% jitter
    assert gaps[0] < gaps[2] and gaps[1] < gaps[3]
    assert 600 <= gaps[3] <= 1100, gaps


def test_output_flood_keeps_memory_bounded(hearth):
    flood = ["sh", "-c", "yes 'flood flood flood flood flood flood flood flood flood'"]
    hearth.start(hearth.config(services=[{"name": "flood", "argv": flood}]))
    hearth.wait_for(lambda: _svc(hearth, "flood")["output_lines"] > 200000, timeout=30, what="flood")
    def rss():
        with open(f"/proc/{hearth.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    first = rss()
    hearth.wait_for(lambda: _svc(hearth, "flood")["output_lines"] > 1000000, timeout=60, what="more flood")
    assert rss() < 8 * 1024, rss()  # KiB: ring is capped at 512 KiB of text
    assert rss() - first < 1024
    assert hearth.rpc("ping") == {}


@pytest.mark.valgrind
def test_dependency_order_and_reverse_stop(hearth, tmp_path):
    import signal as sg
    order = tmp_path / "order"
    # Each is ready once it has written its name: exec alone would let the
    # next one's shell race this one's echo.
    def svc(name, after):
        mark = tmp_path / f"{name}.up"
        return {"name": name, "after": after, "ready": {"file": str(mark)},
                "argv": ["sh", "-c", f"echo {name} >> {order}; touch {mark}; exec sleep 1000"]}
    # Listed before what they need: they must still start after it.
    hearth.start(hearth.config(services=[
        svc("web-ui", ["hermes", "egress"]),
        svc("hermes", ["setup"]),
        svc("setup", []),
        {"name": "needs-broken", "after": ["broken"], "argv": ["sleep", "1000"]},
        {"name": "broken", "argv": ["/nonexistent/agent"], "restart": "never"},
    ]))
    hearth.wait_for(lambda: order.exists() and len(order.read_text().split()) == 3, what="all started")
    assert order.read_text().split() == ["setup", "hermes", "web-ui"]
    hearth.wait_for(lambda: hearth.service("web-ui")["state"] == "running", what="web-ui ready")
    # What it needs never came up: it waits, and says for what.
    hearth.wait_for(lambda: hearth.service("broken")["state"] == "failed", what="broken failed")
    st = hearth.service("needs-broken")
    assert st["state"] == "waiting" and st["waiting_for"] == "broken" and st["pid"] == 0
    hearth.signal(sg.SIGTERM)
    hearth.wait_exit()
    log = hearth.log_text()
    assert log.index("service web-ui: running -> stopping") < log.index("service hermes: running -> stopping")
    assert log.index("service hermes: running -> stopping") < log.index("service setup: running -> stopping")


def test_readiness_gates_running_and_dependants(hearth, tmp_path):
    flag = tmp_path / "ready.flag"
    hearth.start(hearth.config(services=[
        {"name": "api", "argv": ["sh", "-c", f"sleep 0.6; touch {flag}; exec sleep 1000"],
         "ready": {"file": str(flag), "timeout_ms": 10000}},
        {"name": "ui", "after": ["api"], "argv": ["sleep", "1000"]},
    ]))
    assert hearth.service("api")["state"] == "starting"
    ui = hearth.service("ui")
    assert ui["state"] == "waiting" and ui["waiting_for"] == "api"
    hearth.wait_for(lambda: hearth.service("api")["state"] == "running", what="api ready")
    hearth.wait_for(lambda: hearth.service("ui")["state"] == "running", what="ui released")


def test_never_ready_is_killed_and_retried(hearth, tmp_path):
    hearth.start(hearth.config(services=[
        {"name": "keep", "argv": ["sleep", "1000"], "main": True},
        {"name": "stuck", "argv": ["sleep", "1000"],
         "ready": {"file": str(tmp_path / "never"), "timeout_ms": 400},
         "backoff": {"initial_ms": 100}}]))
    s = hearth.wait_for(lambda: (lambda x: x if x["restarts"] >= 1 else None)(hearth.service("stuck")),
                        what="restart after readiness timeout")
    assert "not ready after 400 ms" in s["error"]
    assert s["last_exit"] == {"signal": "SIGKILL"}
    # Retried, but not for ever: ready.attempts is 5 by default.
    s = hearth.wait_for(lambda: (lambda x: x if x["state"] == "failed" else None)(
        hearth.service("stuck")), timeout=20.0, what="failed after five starts")
    assert s["failed_starts"] == 5 and s["restarts"] == 4, s
    assert s["error"].startswith("gave up after 5 starts in a row that never became ready "
                                 "(ready.attempts); the last: not ready after 400 ms: "), s


@pytest.mark.valgrind
def test_ready_notify_fd(hearth, tmp_path):
    # The second half of the line waits for the test's go, so the look at
    # the half line cannot come too late on a slow machine.
    half, go = tmp_path / "half", tmp_path / "go"
    talk = (f"sleep 0.5; printf READY >&3; : > {half}; "
            f"while [ ! -e {go} ]; do sleep 0.05; done; printf '=1\\n' >&3; "
            # Writes after readiness neither block it nor kill it (SIGPIPE).
            "i=0; while [ $i -lt 3000 ]; do echo STATUS=busy >&3; i=$((i+1)); done; exec sleep 1000")
    hearth.start(hearth.config(services=[
        {"name": "api", "argv": ["sh", "-c", talk], "ready": {"notify_fd": 3, "timeout_ms": 10000}},
        {"name": "ui", "after": ["api"], "argv": ["sleep", "1000"]},
    ]))
    hearth.wait_for(half.exists, what="half a line written")
    time.sleep(0.3)
    # Half a line is not a ready line.
    assert hearth.service("api")["state"] == "starting"
    assert hearth.service("ui")["state"] == "waiting"
    go.write_text("")
    hearth.wait_for(lambda: hearth.service("api")["state"] == "running", what="api ready")
    hearth.wait_for(lambda: hearth.service("ui")["state"] == "running", what="ui released")
    time.sleep(0.5)
    s = hearth.service("api")
    assert s["state"] == "running" and s["restarts"] == 0


def test_ready_notify_fd_never_written(hearth):
    hearth.start(hearth.config(services=[
        # Restarted for as long as the test looks (ready.attempts 5 would
        # end it after about three seconds).
        {"name": "mute", "argv": ["sleep", "1000"],
         "ready": {"notify_fd": 7, "timeout_ms": 400, "attempts": 0},
         "backoff": {"initial_ms": 100}}]))
    s = hearth.wait_for(lambda: (lambda x: x if x["restarts"] >= 1 else None)(hearth.service("mute")),
                        what="restart after notify timeout")
    assert "not ready after 400 ms: no line on notify_fd 7" in s["error"]
    # The descriptor is really there in the child, and not close-on-exec.
    def fd7():
        try:
            pid = hearth.main_pid(hearth.service("mute")["pid"])
            link = os.readlink(f"/proc/{pid}/fd/7")
        except (OSError, AssertionError):
            return None  # between two runs
        # Before its exec a child may still hold another file at 7 (the
        # fork fallback opens cgroup.procs); only the exec'd service counts.
        return link if link.startswith("pipe:") else None
    assert hearth.wait_for(fd7, what="fd 7 in the child is the notify pipe")


def test_status_activity(hearth):
    hearth.start(hearth.config(services=[
        {"name": "busy", "argv": ["sh", "-c", "while :; do :; done"]},
        {"name": "idle", "argv": ["sleep", "1000"]}]))
    hearth.wait_for(lambda: hearth.service("busy").get("cpu_ms", 0) >= 100, what="busy cpu time")
    s = hearth.service("idle")
    assert s["state"] == "running" and s["uptime_ms"] >= 0
    if "cpu_ms" in s:
        assert s["cpu_ms"] < 100
    u1 = hearth.service("busy")["uptime_ms"]
    time.sleep(0.2)
    assert hearth.service("busy")["uptime_ms"] >= u1 + 150
    hearth.rpc("services.stop", {"name": "busy"})
    hearth.wait_for(lambda: hearth.service("busy")["state"] == "stopped", what="stopped")
    assert "uptime_ms" not in hearth.service("busy")
