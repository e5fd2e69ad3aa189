"""Config keys, events and command-line keys each proved by what hearth
does with them: the boot events of mounts, seeding and phases, the
wait_for_init timeout event, service options (cwd, group, stop.signal,
success_exit_codes, log.ring_lines, ready/health over a unix socket,
no_new_privs, ready.tcp), hearth's own log.level, clock.step_threshold_ms as
time.sync reports it, an interface's required, hearth.mode from the kernel
command line, system.shutdown with reboot outside a VM, and what
sandbox.init applies (hostname, host_mounts) and refuses (env limits)."""
import os
import tempfile
import time

import pytest


def svc(name, script, **kw):
    return {"name": name, "argv": ["/bin/sh", "-c", script], **kw}


def replay(h, *want, until=None, timeout=10.0):
    """Every event so far (replayed with since 0) until one of each type
    in `want` has arrived and until(events) holds; returns them all."""
    c = h.client()
    try:
        c.result("events.subscribe", {"since": 0})
        got, deadline = [], time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = c.read_line()
            if msg.get("method") == "event":
                got.append(msg["params"])
                if set(want) <= {e["type"] for e in got} and (until is None or until(got)):
                    return got
        raise AssertionError(f"not all of {want} in {got}")
    finally:
        c.close()


def out_lines(h, name):
    return [l["line"] for l in h.rpc("logs.read", {"name": name, "lines": 1000})["lines"]]


def test_mount_seed_and_phase_events(hearth, tmp_path):
    tpl = tmp_path / "template"
    tpl.mkdir()
    (tpl / "config.yaml").write_text("x: 1\n")
    home = tmp_path / "home"
    hearth.start(hearth.config(
        services=[svc("keep", f"cat {home}/config.yaml; exec sleep 1000", after=["mounts"])],
        mounts=[{"source": "none", "target": str(home), "type": "tmpfs"}],
        seed=[{"target": str(home), "from": str(tpl)},
              {"target": str(tmp_path / "other"), "from": str(tmp_path / "no-such-template")}]))
    evs = replay(hearth, "mounts.done", "seed.done", "seed.failed",
                 until=lambda got: any(e["type"] == "phase.reached" and e["phase"] == "mounts"
                                       for e in got))
    done = [e for e in evs if e["type"] == "mounts.done"]
    assert done and done[0]["mounted"] == 1 and done[0]["failed_required"] == 0, done
    reached = {e["phase"]: e["reached"] for e in evs if e["type"] == "phase.reached"}
    assert reached.get("mounts") is True, evs
    seeded = [e for e in evs if e["type"] == "seed.done"]
    assert seeded and seeded[0]["target"] == str(home) and seeded[0]["result"] == "seeded", evs
    # The copy is in the tmpfs, which only hearth's namespace sees.
    assert hearth.wait_for(lambda: out_lines(hearth, "keep"), what="keep's output") == ["x: 1"]
    failed = [e for e in evs if e["type"] == "seed.failed"][0]
    assert failed["result"] == "failed" and failed["from"] == str(tmp_path / "no-such-template")
    assert failed["error"], failed
    # The event carries the mount's order: mounts.done before the seeding.
    assert evs.index(done[0]) < evs.index(seeded[0])


def test_a_required_mount_that_fails_holds_the_mounts_phase(hearth, tmp_path):
    hearth.start(hearth.config(
        services=[svc("held", "exec sleep 1000", after=["mounts"])],
        mounts=[{"source": str(tmp_path / "missing"), "target": str(tmp_path / "t"),
                 "type": "bind", "timeout_ms": 100}]))
    evs = replay(hearth, "mounts.done")
    done = [e for e in evs if e["type"] == "mounts.done"][0]
    assert done["mounted"] == 0 and done["failed_required"] == 1, done
    time.sleep(0.2)
    assert hearth.rpc("status")["phases"]["mounts"] is False
    assert hearth.service("held")["state"] == "waiting"


def test_init_timeout_event(hearth):
    hearth.start(hearth.config([svc("gated", "exec sleep 1000", after=["init"])],
                               wait_for_init={"enabled": True, "timeout_ms": 200}))
    evs = replay(hearth, "sandbox.init_timeout")
    ev = [e for e in evs if e["type"] == "sandbox.init_timeout"][0]
    assert "200 ms" in ev["error"], ev
    hearth.wait_for(lambda: hearth.service("gated")["state"] == "running", what="gate opened")


def test_cwd_group_and_no_new_privs(hearth, tmp_path):
    # A directory user 65534 may enter (tmp_path's parents are private).
    wd = tempfile.mkdtemp(prefix="hearth-cwd-")
    os.chmod(wd, 0o755)
    hearth.start(hearth.config([
        svc("who", 'echo "cwd=$(pwd)"; echo "gid=$(id -g)"; '
            'grep NoNewPrivs /proc/self/status; exec sleep 1000',
            cwd=str(wd), user="65534", group="12345", no_new_privs=True, seccomp="off"),
        svc("free", "grep NoNewPrivs /proc/self/status; exec sleep 1000",
            no_new_privs=False, seccomp="off"),
    ]))
    lines = hearth.wait_for(lambda: len(out_lines(hearth, "who")) >= 3 and out_lines(hearth, "who"),
                            what="who's output")
    assert f"cwd={wd}" in lines and "gid=12345" in lines, lines
    assert any(l.split() == ["NoNewPrivs:", "1"] for l in lines), lines
    free = hearth.wait_for(lambda: out_lines(hearth, "free"), what="free's output")
    assert free[0].split() == ["NoNewPrivs:", "0"], free
    hearth.stop()
    os.rmdir(wd)


def test_stop_signal_is_what_a_stop_sends(hearth):
    hearth.start(hearth.config([
        svc("usr1", 'trap "echo got-usr1; exit 7" USR1; echo up; while :; do sleep 0.05; done',
            stop={"signal": "SIGUSR1", "timeout_ms": 5000}, restart="never")]))
    hearth.wait_for(lambda: "up" in out_lines(hearth, "usr1"), what="trap set")
    hearth.rpc("services.stop", {"name": "usr1"})
    s = hearth.wait_for(lambda: (lambda s: s if s["state"] == "stopped" else None)(
        hearth.service("usr1")), what="stopped")
    assert "got-usr1" in out_lines(hearth, "usr1")
    assert s["last_exit"] == {"code": 7}, s


def test_success_exit_codes_decide_on_failure_restarts(hearth):
    hearth.start(hearth.config([
        svc("keep", "exec sleep 1000"),
        svc("ok3", "sleep 0.1; exit 3", restart="on-failure", success_exit_codes=[0, 3],
            backoff={"initial_ms": 50, "max_ms": 50}),
        svc("bad3", "sleep 0.1; exit 3", restart="on-failure", success_exit_codes=[0],
            backoff={"initial_ms": 50, "max_ms": 50}),
    ]))
    hearth.wait_for(lambda: hearth.service("bad3")["restarts"] >= 2, what="bad3 restarted")
    ok = hearth.service("ok3")
    assert ok["restarts"] == 0 and ok["state"] == "exited" and ok["last_exit"] == {"code": 3}, ok


def test_ring_lines_bounds_what_logs_read_keeps(hearth):
    hearth.start(hearth.config([
        svc("many", "for i in 1 2 3 4 5 6 7 8 9 10; do echo line-$i; done; exec sleep 1000",
            log={"ring_lines": 3})]))
    hearth.wait_for(lambda: hearth.service("many")["output_lines"] >= 10, what="output")
    assert out_lines(hearth, "many") == ["line-8", "line-9", "line-10"]


def test_ready_and_health_over_a_unix_socket(hearth, tmp_path):
    # hearth's own control socket is a unix socket that accepts.
    hearth.start(hearth.config([
        svc("up", "exec sleep 1000", ready={"unix": hearth.sock, "timeout_ms": 5000},
            health={"unix": hearth.sock, "interval_ms": 100, "timeout_ms": 1000}),
        svc("down", "exec sleep 1000",
            health={"unix": str(tmp_path / "no.sock"), "interval_ms": 100, "timeout_ms": 1000,
                    "failures": 100}),
        svc("never", "exec sleep 1000",
            ready={"unix": str(tmp_path / "no.sock"), "timeout_ms": 400}, restart="never"),
    ]))
    hearth.wait_for(lambda: hearth.service("up").get("health", {}).get("status") == "healthy",
                    what="up healthy")
    assert hearth.service("up")["state"] == "running"
    down = hearth.wait_for(
        lambda: (lambda s: s if s["health"]["status"] == "failing" else None)(
            hearth.service("down")), what="down failing")
    assert str(tmp_path / "no.sock") in down["health"]["last_failure"], down
    never = hearth.wait_for(
        lambda: (lambda s: s if s["state"] not in ("starting", "running") else None)(
            hearth.service("never")), what="never given up")
    assert never["state"] != "running" and "ready" in never.get("error", ""), never


def test_log_level_from_the_config(hearth):
    hearth.start(hearth.config([svc("a", "exec sleep 1000")], log={"level": "warn"}), log=None)
    hearth.wait_for(lambda: hearth.service("a")["state"] == "running", what="running")
    text = hearth.log_text()
    assert " info: " not in text and " debug: " not in text, text
    hearth.stop()

    from conftest import Hearth
    h2 = Hearth(hearth.dir / "b")
    (hearth.dir / "b").mkdir()
    try:
        h2.start(h2.config([svc("a", "exec sleep 1000")], log={"level": "info"}), log=None)
        h2.wait_for(lambda: " info: " in h2.log_text(), what="info lines")
        assert " debug: " not in h2.log_text()
    finally:
        h2.stop()


def test_step_threshold_is_what_time_sync_compares_with(hearth):
    # clock.set false: hearth only reports, the machine's clock is not touched.
    hearth.start(hearth.config(clock={"set": False, "step_threshold_ms": 5000}))
    now = time.time()
    near = hearth.rpc("time.sync", {"sec": int(now) + 2, "nsec": 0})
    assert near["action"] == "in_sync" and near["threshold_ms"] == 5000, near
    far = hearth.rpc("time.sync", {"sec": int(now) + 60, "nsec": 0})
    assert far["action"] == "not_allowed" and far["allowed"] is False, far
    assert 55000 < far["offset_ms"] < 65000, far
    st = hearth.rpc("status")["sandbox"]["clock"]
    assert st["set"] is False and st["step_threshold_ms"] == 5000, st


def test_hearth_mode_from_the_kernel_command_line(hearth):
    hearth.start(hearth.config([svc("a", "exec sleep 1000")]),
                 cmdline="quiet hearth.mode=supervisor")
    assert hearth.rpc("status")["mode"] == "supervisor"
    hearth.stop()

    from conftest import Hearth
    h2 = Hearth(hearth.dir / "b")
    (hearth.dir / "b").mkdir()
    try:
        h2.start(h2.config(), cmdline="quiet hearth.mode=bogus")
        assert h2.rpc("status")["mode"] == "container"
    finally:
        h2.stop()


def test_ready_tcp_waits_for_the_listener(hearth):
    # A fresh network namespace has loopback down: the service brings it
    # up (with the one capability that needs), then listens a while later.
    listen = ("import socket, time; time.sleep(0.5); s = socket.socket(); "
              "s.bind(('127.0.0.1', 7719)); s.listen(); print('listening', flush=True); "
              "time.sleep(1000)")
    hearth.start(hearth.config([
        svc("srv", f'ip link set lo up && exec python3 -c "{listen}"',
            caps_keep=["NET_ADMIN"], ready={"tcp": "127.0.0.1:7719", "timeout_ms": 10000}),
        svc("after-srv", "echo started; exec sleep 1000", after=["srv"]),
    ]))
    assert hearth.service("srv")["state"] == "starting"
    hearth.wait_for(lambda: hearth.service("srv")["state"] == "running", what="srv ready")
    # Printed just after listen(): the probe may connect before the line is out.
    hearth.wait_for(lambda: "listening" in out_lines(hearth, "srv"), what="srv's line")
    hearth.wait_for(lambda: hearth.service("after-srv")["state"] == "running",
                    what="after-srv released")


@pytest.mark.parametrize("required", [False, True])
def test_interface_required_decides_the_network_phase(hearth, tmp_path, required):
    hearth.start(hearth.config(
        [svc("net", "exec sleep 1000", after=["network"])],
        network={"interfaces": [{"name": "absent0", "required": required, "timeout_ms": 200}],
                 "resolv_conf": str(tmp_path / "resolv.conf")}))
    hearth.wait_for(lambda: hearth.rpc("network.get")["interfaces"][0]["state"] == "failed",
                    what="interface given up")
    if required:
        time.sleep(0.2)
        assert hearth.rpc("status")["phases"]["network"] is False
        assert hearth.service("net")["state"] == "waiting"
    else:
        hearth.wait_for(lambda: hearth.service("net")["state"] == "running", what="net started")
        assert hearth.rpc("status")["phases"]["network"] is True


def test_shutdown_with_reboot_outside_a_vm_exits_with_the_main_status(hearth):
    hearth.start(hearth.config([
        svc("main", 'trap "echo bye; exit 5" TERM; echo up; while :; do sleep 0.05; done',
            main=True)]))
    hearth.wait_for(lambda: "up" in out_lines(hearth, "main"), what="trap set")
    c, sub = hearth.client(), hearth.client()
    assert c.call("system.shutdown", {"action": "halt"})["error"]["code"] == -32602
    sub.result("events.subscribe", {})
    r = c.result("system.shutdown", {"action": "reboot"})
    assert r == {"shutting_down": True, "action": "exit"}
    ev = None
    while ev is None:
        msg = sub.read_line()
        if msg.get("method") == "event" and msg["params"]["type"] == "shutdown":
            ev = msg["params"]
    assert ev["action"] == "exit" and "system.shutdown" in ev["reason"], ev
    # The main service got its stop signal (its trap exits 5) and hearth
    # exits with that status instead of rebooting anything.
    assert hearth.wait_exit() == 5
    c.close()
    sub.close()


def test_sandbox_init_applies_hostname_and_host_mounts(hearth, tmp_path):
    hearth.start(hearth.config(
        [svc("named", "echo host=$(cat /proc/sys/kernel/hostname); exec sleep 1000",
             after=["init"])],
        wait_for_init={"enabled": True},
        host_mounts_rule={"mode": "subpath", "tag": "shared", "host_root": "/data/shared"}))
    assert hearth.rpc("mounts.list")["mounts"] == []
    hm = '[{"hostPath":"/data/shared/homes/h1","mountPath":"%s"}]' % (tmp_path / "g" / "home")
    r = hearth.rpc("sandbox.init", {"hostname": "sbx-7", "host_mounts": hm})
    assert r["hostname"] == "set" and r["host_mounts"] == "applied" and r["ok"] is True, r
    assert hearth.wait_for(lambda: out_lines(hearth, "named"), what="output") == ["host=sbx-7"]
    assert hearth.rpc("status")["hostname"] == "sbx-7"
    ms = hearth.rpc("mounts.list")["mounts"]
    assert [(m["source"], m["target"], m["from"]) for m in ms] == [
        ("shared", "/run/hearth/shares/shared", "host_mounts_rule"),
        ("/run/hearth/shares/shared/homes/h1", str(tmp_path / "g" / "home"), "host_mounts")], ms


def test_sandbox_init_env_limits(hearth):
    hearth.start(hearth.config([svc("gated", "exec sleep 1000", after=["init"])],
                               wait_for_init={"enabled": True}))
    c = hearth.client()
    too_many = {f"V{i}": "x" for i in range(257)}
    e = c.call("sandbox.init", {"env": too_many})["error"]
    assert e["code"] == -32602 and "env" in e["message"], e
    e = c.call("sandbox.init", {"env": {"BIG": "x" * 32769}})["error"]
    assert e["code"] == -32602 and "BIG" in e["message"], e
    total = {f"V{i}": "x" * 32768 for i in range(9)}   # 288 KiB in all
    e = c.call("sandbox.init", {"env": total})["error"]
    assert e["code"] == -32602 and "env" in e["message"], e
    # Nothing was applied, and the limits themselves are allowed.
    assert hearth.service("gated")["state"] == "waiting"
    ok = {f"V{i}": "x" * 800 for i in range(256)}
    ok["BIG"] = "y" * 32768
    del ok["V0"]
    r = c.result("sandbox.init", {"env": ok})
    assert len(r["env"]) == 256 and r["ok"] is True
    c.close()
    hearth.wait_for(lambda: hearth.service("gated")["state"] == "running", what="released")
