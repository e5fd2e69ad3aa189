"""Boot, status, services, orphans and shutdown of the real binary as PID 1."""
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import HEARTH, HEARTHCTL, Client


def test_boot_status_reports_container_mode_and_services(hearth, tmp_path):
    marker = tmp_path / "started"
    hearth.start(hearth.config(
        services=[{"name": "app", "argv": ["sh", "-c", f"echo $GREETING > {marker}; exec sleep 1000"],
                   "env": {"GREETING": "hello"}}],
        hostname="sandbox-1"))
    st = hearth.rpc("status")
    assert st["mode"] == "container"
    assert st["pid"] == 1
    assert st["phase"] == "running"
    assert st["hostname"] == "sandbox-1"
    assert st["version"]
    svc = hearth.wait_for(lambda: [s for s in hearth.rpc("status")["services"]
                                   if s["state"] == "running"], what="app running")[0]
    assert svc["name"] == "app" and svc["pid"] > 1 and svc["main"] is True
    hearth.wait_for(lambda: marker.exists() and marker.read_text() == "hello\n", what="marker")


def test_version_lists_protocol_and_methods(hearth):
    hearth.start(hearth.config())
    v = hearth.rpc("version")
    assert v["protocol"] == 1
    assert "ping" in v["methods"] and "status" in v["methods"]


def test_crashing_service_is_restarted(hearth):
    hearth.start(hearth.config(services=[
        {"name": "crash", "argv": ["sh", "-c", "exit 3"], "backoff": {"initial_ms": 100}}]))
    s = hearth.wait_for(lambda: (lambda x: x if x["restarts"] >= 3 else None)(hearth.service("crash")),
                        what="3 restarts")
    assert s["last_exit"] == {"code": 3}


def test_restart_never_and_exec_failure_reported(hearth):
    hearth.start(hearth.config(services=[
        {"name": "keep", "argv": ["sleep", "1000"]},
        {"name": "missing", "argv": ["/nonexistent/program"], "restart": "never"}]))
    s = hearth.wait_for(lambda: (lambda x: x if x["state"] == "failed" else None)(hearth.service("missing")),
                        what="missing failed")
    assert "No such file" in s["error"]
    assert s["last_exit"] == {"code": 127}


def _zombies_under(pid):
    zombies = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] == "Z" and int(fields[1]) == pid:
            zombies.append(int(p))
    return zombies


def test_orphans_are_reaped(hearth):
    # Each subshell starts a sleep and exits at once: the sleeps are
    # re-parented to PID 1 (hearth) and must be reaped when they end.
    # In hearth's pid namespace (isolation off): a contained service's
    # orphans go to its own reaper (test_pidns.py).
    script = 'for i in 1 2 3 4 5 6 7 8; do (sleep 0.2 &) ; done; exec sleep 1000'
    hearth.start(hearth.config(services=[{"name": "spawner", "argv": ["sh", "-c", script],
                                          "isolation": False}]))
    hearth.wait_for(lambda: hearth.rpc("status")["orphans_reaped"] >= 8, what="8 orphans reaped")
    time.sleep(0.3)
    assert _zombies_under(hearth.pid) == []


def test_sigterm_stops_services_and_exits_with_main_status(hearth, tmp_path):
    flushed = tmp_path / "flushed"
    armed = tmp_path / "armed"
    main = ["sh", "-c", f'trap "echo bye > {flushed}; exit 7" TERM; : > {armed}; '
            'while :; do sleep 0.05; done']
    hearth.start(hearth.config(services=[
        {"name": "main", "argv": main, "main": True},
        {"name": "other", "argv": ["sleep", "1000"]}]))
    # Running is the exec; the trap is set a moment later (the file says so).
    hearth.wait_for(armed.exists, what="main's trap set")
    hearth.wait_for(lambda: hearth.service("other")["state"] == "running", what="other running")
    hearth.signal(signal.SIGTERM)
    assert hearth.wait_exit() == 7
    assert flushed.read_text() == "bye\n"
    log = hearth.log_text()
    # Reverse order: "other" (listed last) stops before "main".
    assert log.index("service other: running -> stopping") < log.index("service main: running -> stopping")


def test_stop_timeout_escalates_to_kill(hearth, tmp_path):
    armed = tmp_path / "armed"
    stubborn = ["sh", "-c", f'trap "" TERM; : > {armed}; while :; do sleep 0.05; done']
    hearth.start(hearth.config(services=[
        {"name": "stubborn", "argv": stubborn, "stop": {"timeout_ms": 300}}]))
    hearth.wait_for(armed.exists, what="the TERM trap set")
    t0 = time.monotonic()
    hearth.signal(signal.SIGTERM)
    status = hearth.wait_exit()
    assert status == 128 + signal.SIGKILL
    assert time.monotonic() - t0 < 10
    assert "killing" in hearth.log_text()


@pytest.mark.valgrind
def test_main_service_exit_ends_container(hearth):
    hearth.start(hearth.config(services=[
        {"name": "job", "argv": ["sh", "-c", "sleep 0.3; exit 5"], "restart": "never"}]), wait=False)
    assert hearth.wait_exit() == 5


@pytest.mark.valgrind
def test_system_shutdown_method(hearth):
    hearth.start(hearth.config(services=[{"name": "s", "argv": ["sleep", "1000"]}]))
    r = hearth.rpc("system.shutdown")
    assert r["shutting_down"] is True
    assert hearth.wait_exit() == 128 + signal.SIGTERM


@pytest.mark.valgrind
def test_events_stream_service_transitions(hearth):
    hearth.start(hearth.config(services=[
        {"name": "flap", "argv": ["sh", "-c", "sleep 0.2; exit 1"], "backoff": {"initial_ms": 100}}]))
    c = hearth.client()
    r = c.result("events.subscribe", {"since": 0})
    assert r["subscribed"] is True
    seen = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and len([e for e in seen if e.get("state") == "backoff"]) < 2:
        msg = c.read_line()
        assert msg["method"] == "event"
        seen.append(msg["params"])
    seqs = [e["seq"] for e in seen]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    types = {e["type"] for e in seen}
    assert "phase" in types and "service.state" in types
    backoffs = [e for e in seen if e.get("state") == "backoff"]
    assert len(backoffs) >= 2 and backoffs[0]["last_exit"] == {"code": 1}
    c.close()


@pytest.mark.valgrind
def test_config_get_redacts_secrets(hearth):
    hearth.start(hearth.config(services=[{
        "name": "agent", "argv": ["sleep", "1000"],
        "env": {"OPENAI_API_KEY": "sk-123", "GITHUB_TOKEN": "ghp", "db_password": "pw", "HOME": "/root"}}]))
    cfg = hearth.rpc("config.get")
    env = cfg["services"][0]["env"]
    assert env["OPENAI_API_KEY"] == "<redacted>"
    assert env["GITHUB_TOKEN"] == "<redacted>"
    assert env["db_password"] == "<redacted>"
    assert env["HOME"] == "/root"
    assert "sk-123" not in hearth.log_text()


def test_check_config(tmp_path):
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"services": [{"name": "a", "argv": ["true"]}]}))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"services": [{"name": "a", "argv": ["true"], "backoff": {"max_ms": "x"}}]}))
    r = subprocess.run([HEARTH, "--check-config", str(good)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([HEARTH, "--check-config", str(bad)], capture_output=True, text=True)
    assert r.returncode != 0
    assert "services[0].backoff.max_ms" in r.stderr


def test_command_line_forms(tmp_path):
    """Each option in its long, long-with-"=", short and attached forms;
    words that are not options passed over; an unknown option or a
    missing value refused with the usage, exit 2."""
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"services": [{"name": "a", "argv": ["true"]}]}))
    for argv in (["--check-config", str(good)], [f"--check-config={good}"],
                 ["quiet", "--check-config", str(good)]):
        r = subprocess.run([HEARTH, *argv], capture_output=True, text=True)
        assert r.returncode == 0 and r.stdout == f"{good}: ok (1 services)\n", (argv, r)
    for argv in (["--version"], ["-V"]):
        r = subprocess.run([HEARTH, *argv], capture_output=True, text=True)
        assert r.returncode == 0 and r.stdout.startswith("hearth "), (argv, r)
    for argv in (["--help"], ["-h"]):
        r = subprocess.run([HEARTH, *argv], capture_output=True, text=True)
        assert r.returncode == 0 and r.stdout.startswith("usage: hearth"), (argv, r)
    for argv in (["--mode", "moon"], ["-mmoon"], ["--mode=moon"], ["-m", "moon"]):
        r = subprocess.run([HEARTH, *argv], capture_output=True, text=True)
        assert r.returncode == 2 and "--mode: expected vm, container or supervisor" in r.stderr, (argv, r)
    for argv in (["--log", "loud"], ["-lloud"], ["--log=loud"]):
        r = subprocess.run([HEARTH, *argv], capture_output=True, text=True)
        assert r.returncode == 2 and "--log: expected error" in r.stderr, (argv, r)
    for argv in (["--bogus"], ["-x"], ["--config"], ["--version=1"], ["--conf", "x"]):
        r = subprocess.run([HEARTH, *argv], capture_output=True, text=True)
        assert r.returncode == 2, (argv, r)
        assert f"hearth: {argv[0]}: unknown option or missing value" in r.stderr, (argv, r)
        assert "usage: hearth" in r.stderr, (argv, r)
    # "--" ends the options: what follows is not read as one (a refused
    # config then ends the start, exit 1, not the unknown option's 2).
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"bogus": 1}))
    r = subprocess.run([HEARTH, "--mode", "supervisor", "-c", str(bad), "--", "--bogus"],
                       capture_output=True, text=True, timeout=20)
    assert r.returncode == 1 and "unknown option" not in r.stderr, r
    assert "bogus" in r.stderr, r


def test_bad_config_refused_before_the_loop(hearth, tmp_path):
    hearth.start({"control": {"listen": ["unix:" + hearth.sock]}, "bogus": 1}, wait=False)
    assert hearth.wait_exit() == 1
    assert "bogus" in hearth.log_text()


def test_binary_is_static():
    if os.environ.get("HEARTH_BIN"):
        pytest.skip("HEARTH_BIN names another build")
    out = subprocess.run(["file", HEARTH], capture_output=True, text=True).stdout
    assert "statically linked" in out
    # "not stripped" also contains "stripped": the verdict is its own field.
    assert ", stripped" in out and "not stripped" not in out, out


def test_hearthctl_status_and_errors(hearth):
    hearth.start(hearth.config(services=[{"name": "svc", "argv": ["sleep", "1000"]}]))
    spec = "unix:" + hearth.sock
    r = subprocess.run([HEARTHCTL, "--connect", spec, "status"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    row = [l for l in r.stdout.splitlines() if l.startswith("svc ")]
    assert len(row) == 1 and row[0].split()[1] in ("running", "starting"), r.stdout
    r = subprocess.run([HEARTHCTL, "--connect", spec, "--json", "status"], capture_output=True, text=True)
    assert json.loads(r.stdout)["mode"] == "container"
    r = subprocess.run([HEARTHCTL, "--connect", spec, "call", "no.such"], capture_output=True, text=True)
    assert r.returncode == 1 and "-32601" in r.stderr
    r = subprocess.run([HEARTHCTL, "--connect", "unix:/nonexistent/x.sock", "ping"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "/nonexistent/x.sock" in r.stderr
