"""sandbox.init and its gate, freeze and resume, time.sync and entropy.add,
against the shipped build/hearth as PID 1 of fresh namespaces. The wall
clock is never set here: hearth runs in container mode, where clock.set
defaults to false and time only reports the offset."""
import base64
import json
import os
import shutil
import subprocess
import time

import pytest

from conftest import HEARTHCTL


def svc(name, script, **kw):
    d = {"name": name, "argv": ["/bin/sh", "-c", script]}
    d.update(kw)
    return d


def lines(h, name):
    return [l["line"] for l in h.rpc("logs.read", {"name": name, "lines": 1000})["lines"]]


def cgroup_events(h, name):
    path = h.service(name)["cgroup"]
    with open(os.path.join(path, "cgroup.events")) as f:
        return dict(l.split() for l in f if l.strip())


def ctl(h, *args, check=True):
    r = subprocess.run([HEARTHCTL, "--connect", "unix:" + h.sock, *args],
                       capture_output=True, text=True, timeout=30)
    if check:
        assert r.returncode == 0, r.stderr
    return r


@pytest.mark.valgrind
def test_init_gate_holds_then_env_reaches_the_service(hearth):
    hearth.start(hearth.config(
        [svc("gated", 'echo "FOO=$FOO TOKEN=$API_TOKEN len=${#API_TOKEN}"; exec sleep 1000',
             after=["init"]),
         svc("free", "exec sleep 1000")],
        wait_for_init={"enabled": True}))
    hearth.wait_for(lambda: hearth.service("free")["state"] == "running", what="free running")
    time.sleep(0.3)
    gated = hearth.service("gated")
    assert gated["state"] == "waiting" and gated["waiting_for"] == "init"
    st = hearth.rpc("status")
    assert st["phases"]["init"] is False and st["sandbox"]["init"]["waiting"] is True
    assert st["phase"] == "wait_init"

    r = hearth.rpc("sandbox.init", {"env": {"FOO": "bar", "API_TOKEN": "s3cr3t-value"}})
    assert sorted(r["env"]) == ["API_TOKEN", "FOO"] and r["ok"] is True
    hearth.wait_for(lambda: lines(hearth, "gated"), what="gated output")
    # The value reached the service (its length shows it) but, being a
    # sandbox.init value, never shows in its captured output.
    assert lines(hearth, "gated")[0] == "FOO=bar TOKEN=<redacted> len=12"
    st = hearth.rpc("status")
    assert st["phases"]["init"] is True and st["phase"] == "running"
    assert st["sandbox"]["init"]["env"] == {"FOO": "<redacted>", "API_TOKEN": "<redacted>"}
    assert "s3cr3t-value" not in json.dumps(hearth.rpc("config.get"))
    assert "s3cr3t-value" not in hearth.log_text()


@pytest.mark.valgrind
def test_init_bad_params_name_the_field_and_change_nothing(hearth):
    hearth.start(hearth.config([svc("gated", "exec sleep 1000", after=["init"])],
                               wait_for_init={"enabled": True}))
    c = hearth.client()
    for params, word in [({"env": {"1BAD": "x"}}, "env"),
                         ({"env": {"OK": 5}}, "env.OK"),
                         ({"hostname": "bad host"}, "hostname"),
                         ({"time": {"sec": 1, "nsec": 2000000000}}, "time.nsec"),
                         ({"entropy": "***"}, "entropy"),
                         ({"egress": {"allowOut": ["10.0.0.0/33"]}}, "egress.allowOut[0]"),
                         ({"bogus": 1}, "bogus")]:
        e = c.call("sandbox.init", params)["error"]
        assert e["code"] == -32602 and word in e["message"], (params, e)
    # A long non-ASCII name is echoed cut on a character boundary (a
    # reply that is not UTF-8 would not decode here at all).
    e = c.call("sandbox.init", {"env": {"a" + "\u00e9" * 40: "x"}})["error"]
    assert e["message"] == 'env: bad variable name "a' + "\u00e9" * 31 + '"', e
    c.close()
    st = hearth.rpc("status")
    assert st["phases"]["init"] is False and st["sandbox"]["init"]["env"] == {}
    assert hearth.service("gated")["state"] == "waiting"


def test_init_timeout_start_and_fail(hearth, tmp_path):
    hearth.start(hearth.config([svc("gated", "exec sleep 1000", after=["init"])],
                               wait_for_init={"enabled": True, "timeout_ms": 300}))
    hearth.wait_for(lambda: hearth.service("gated")["state"] == "running",
                    what="start after the init timeout")
    assert "no sandbox.init after 300 ms" in hearth.rpc("status")["sandbox"]["init"]["error"]
    hearth.stop()

    from conftest import Hearth
    h2 = Hearth(tmp_path / "b")
    (tmp_path / "b").mkdir()
    try:
        h2.start(h2.config([svc("gated", "exec sleep 1000", after=["init"])],
                           wait_for_init={"enabled": True, "timeout_ms": 200,
                                          "on_timeout": "fail"}))
        h2.wait_for(lambda: h2.rpc("status")["sandbox"]["init"].get("error"),
                    what="init timeout error")
        time.sleep(0.2)
        assert h2.service("gated")["state"] == "waiting"
        h2.rpc("sandbox.init", {})
        h2.wait_for(lambda: h2.service("gated")["state"] == "running",
                    what="released by a late sandbox.init")
    finally:
        h2.stop()


@pytest.mark.valgrind
def test_freeze_and_resume_run_on_resume_of_each_kind(hearth, tmp_path):
    hearth.start(hearth.config([
        svc("restarter", "echo start; exec sleep 1000", on_resume="restart"),
        svc("signalled", 'trap "echo got-usr1" USR1; echo up; while :; do sleep 0.05; done',
            on_resume="signal:SIGUSR1"),
        svc("plain", "exec sleep 1000", on_resume="none"),
    ]))
    for n in ("restarter", "signalled", "plain"):
        hearth.wait_for(lambda n=n: hearth.service(n)["state"] == "running", what=n)
    hearth.wait_for(lambda: lines(hearth, "signalled"), what="trap installed")
    before = {n: hearth.service(n)["pid"] for n in ("restarter", "signalled", "plain")}
    ev = hearth.client()
    ev.result("events.subscribe", {})

    r = hearth.rpc("sandbox.freeze", {"timeout_ms": 2000})
    assert r["frozen"] is True
    names = [s["name"] for s in r["steps"]]
    assert names == ["sync", "freeze", "suspend"]
    assert all(s["ms"] >= 0 for s in r["steps"]) and r["total_ms"] >= 0
    for n in before:
        assert cgroup_events(hearth, n)["frozen"] == "1", n
    st = hearth.rpc("status")
    assert st["frozen"] is True and st["sandbox"]["state"] == "frozen"
    # A frozen loop prints nothing: the count stays put.
    n_sig = len(lines(hearth, "signalled"))
    time.sleep(0.3)
    assert len(lines(hearth, "signalled")) == n_sig

    r = hearth.rpc("sandbox.resume", {})
    assert r["cause"] == "host" and r["state"] == "running"
    steps = {s["name"]: s for s in r["steps"]}
    assert list(steps) == ["time", "entropy", "identity", "mounts", "network", "egress", "skills",
                           "thaw", "on_resume", "health"]
    assert steps["thaw"]["result"] == "ok"
    assert steps["on_resume"]["services"] == {"restarter": "restart", "signalled": "SIGUSR1"}
    # No mounts, interfaces, policy or skills configured: those checks
    # run and find nothing wrong.
    for name in ("mounts", "network", "egress", "skills"):
        assert steps[name]["result"] != "failed", steps[name]
    assert all(isinstance(s["ms"], (int, float)) for s in steps.values())
    for n in before:
        assert cgroup_events(hearth, n)["frozen"] == "0", n
    hearth.wait_for(lambda: "got-usr1" in lines(hearth, "signalled"), what="USR1 handled")
    hearth.wait_for(lambda: hearth.service("restarter")["state"] == "running"
                    and hearth.service("restarter")["pid"] != before["restarter"],
                    what="restarter restarted")
    assert hearth.service("plain")["pid"] == before["plain"]
    assert hearth.service("signalled")["pid"] == before["signalled"]
    st = hearth.rpc("status")
    assert st["frozen"] is False and st["last_resume"]["cause"] == "host"

    types = []
    deadline = time.monotonic() + 5
    while "resume" not in types and time.monotonic() < deadline:
        m = ev.read_line()
        if m.get("method") == "event":
            types.append(m["params"]["type"])
    assert "freeze" in types and "resume" in types
    ev.close()


def test_freeze_twice_and_requests_pipelined_behind_a_freeze(hearth):
    hearth.start(hearth.config([svc("a", "exec sleep 1000")]))
    hearth.wait_for(lambda: hearth.service("a")["state"] == "running", what="a")
    c = hearth.client()
    # Two requests in one write: the ping's reply must follow the freeze's.
    c.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"sandbox.freeze","params":{}}\n'
               b'{"jsonrpc":"2.0","id":2,"method":"ping"}\n')
    assert c.read_reply()["id"] == 1
    assert c.read_reply()["id"] == 2
    r = c.result("sandbox.freeze", {})
    assert r["steps"][0]["detail"] == "already frozen"
    c.result("sandbox.resume", {})
    assert c.call("sandbox.freeze", {"timeout_ms": 1})["error"]["code"] == -32602
    c.close()


def _loop_ok():
    return all(shutil.which(t) for t in ("mkfs.ext4", "fsfreeze", "losetup")) and \
        os.path.exists("/dev/loop-control")


def test_freeze_with_a_stuck_sync_reports_instead_of_hanging(hearth, tmp_path):
    """A real stuck syncfs: an ext4 whose loop device's backing file lives
    on a second ext4 that is frozen, with dirty data waiting."""
    if not _loop_ok():
        pytest.skip("needs mkfs.ext4, fsfreeze and loop devices")
    outer, inner = tmp_path / "outer", tmp_path / "inner"
    outer.mkdir()
    inner.mkdir()
    mounted = []
    frozen = False
    try:
        subprocess.run(["truncate", "-s", "64M", str(tmp_path / "outer.img")], check=True)
        subprocess.run(["mkfs.ext4", "-q", str(tmp_path / "outer.img")], check=True)
        subprocess.run(["mount", "-o", "loop", str(tmp_path / "outer.img"), str(outer)],
                       check=True)
        mounted.append(outer)
        subprocess.run(["truncate", "-s", "16M", str(outer / "inner.img")], check=True)
        subprocess.run(["mkfs.ext4", "-q", str(outer / "inner.img")], check=True)
        subprocess.run(["mount", "-o", "loop", str(outer / "inner.img"), str(inner)], check=True)
        mounted.append(inner)
        hearth.start(hearth.config(
            [svc("a", "exec sleep 1000")],
            mounts=[{"type": "bind", "source": str(inner), "target": str(inner)}]))
        hearth.wait_for(lambda: hearth.service("a")["state"] == "running", what="a")
        with open(inner / "dirty", "wb") as f:
            f.write(os.urandom(1 << 20))
        subprocess.run(["fsfreeze", "-f", str(outer)], check=True)
        frozen = True
        # A client that asks for a freeze and leaves before the reply.
        gone = hearth.client()
        gone.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"sandbox.freeze",'
                      b'"params":{"timeout_ms":400}}\n')
        gone.close()
        hearth.wait_for(lambda: hearth.rpc("status")["frozen"], what="freeze without its client")
        hearth.rpc("sandbox.resume", {})
        t0 = time.monotonic()
        r = hearth.rpc("sandbox.freeze", {"timeout_ms": 1000})
        took = time.monotonic() - t0
        steps = {s["name"]: s for s in r["steps"]}
        assert steps["sync"]["result"] == "timeout", r
        assert steps["freeze"]["result"] == "ok" and r["frozen"] is True
        assert took < 5, took
        # The loop kept serving while the child was stuck.
        assert hearth.rpc("ping") == {}
        hearth.rpc("sandbox.resume", {})
    finally:
        if frozen:
            subprocess.run(["fsfreeze", "-u", str(outer)])
        for m in reversed(mounted):
            subprocess.run(["umount", "-l", str(m)])


def test_backoff_timer_neither_early_nor_twice_across_a_freeze(hearth):
    # Each start prints the kernel's monotonic uptime; restarts every 300 ms.
    hearth.start(hearth.config([svc(
        "flap", "cut -d' ' -f1 /proc/uptime; exit 1", restart="always",
        backoff={"initial_ms": 300, "max_ms": 300, "reset_after_ms": 100000})]))
    hearth.wait_for(lambda: len(lines(hearth, "flap")) >= 2, what="two starts")
    hearth.rpc("sandbox.freeze", {})
    time.sleep(1.0)
    hearth.rpc("sandbox.resume", {})
    hearth.wait_for(lambda: len(lines(hearth, "flap")) >= 6, what="more starts")
    hearth.rpc("services.stop", {"name": "flap"})
    starts = [float(x) for x in lines(hearth, "flap")]
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    # Never early (jitter is at most 10%), never two starts for one timer.
    assert min(gaps) >= 0.26, gaps
    # The frozen second held exactly one start back, not a burst. That gap
    # is at least 1.3 s (the delay plus the frozen second); an ordinary one
    # is 0.3 s plus a process start, which a loaded machine may stretch.
    assert sum(1 for g in gaps if g > 1.2) == 1, gaps
    assert hearth.service("flap")["restarts"] + 1 >= len(starts)


@pytest.mark.valgrind
def test_time_sync_and_entropy(hearth):
    hearth.start(hearth.config([]))
    c = hearth.client()
    now = time.time()
    r = c.result("time.sync", {"sec": int(now) + 3600, "nsec": 0})
    # Container mode: the offset is reported, the clock left alone.
    assert r["action"] == "not_allowed" and r["allowed"] is False
    assert abs(r["offset_ms"] - 3600000) < 5000
    assert abs(time.time() - now) < 60
    r = c.result("time.sync", {"sec": int(time.time()) , "nsec": 0})
    assert r["action"] in ("in_sync", "not_allowed")
    e = c.call("time.sync", {"nsec": 5})["error"]
    assert e["code"] == -32602 and "sec" in e["message"]

    r = c.result("entropy.add", {"data": base64.b64encode(os.urandom(32)).decode()})
    assert r == {"bytes": 32, "reseeded": True}
    for bad, why in [("@@@@", "invalid base64"), ("QUJD=", "padding"), ("", "empty"),
                     ("A" * 6000, "more than 4096")]:
        e = c.call("entropy.add", {"data": bad})["error"]
        assert e["code"] == -32602 and e["message"].startswith("data: ") and why in e["message"], \
            (bad, e)
    e = c.call("entropy.add", {})["error"]
    assert e["code"] == -32602 and "data" in e["message"]
    c.close()


def test_hearthctl_init_freeze_resume(hearth):
    hearth.start(hearth.config([svc("gated", 'echo "X=$X ${#X}"; exec sleep 1000', after=["init"])],
                               wait_for_init={"enabled": True}))
    r = ctl(hearth, "init", "--env", "X=from-ctl", "--time", "now",
            "--entropy-from", "/dev/urandom")
    assert "env: " in r.stdout and "X" in r.stdout
    r = ctl(hearth, "init", "--allow-out", "10.0.0.0/33", check=False)
    assert r.returncode != 0 and "10.0.0.0/33" in r.stderr
    ctl(hearth, "init", "--allow-out", "10.0.0.0/8")
    assert hearth.rpc("egress.get")["policy"]["allowOut"] == ["10.0.0.0/8"]
    hearth.wait_for(lambda: lines(hearth, "gated") == ["X=<redacted> 8"], what="env from init")
    r = ctl(hearth, "freeze", "--timeout-ms", "2000")
    assert "freeze" in r.stdout and "total" in r.stdout
    assert cgroup_events(hearth, "gated")["frozen"] == "1"
    assert "sandbox frozen" in ctl(hearth, "status").stdout
    r = ctl(hearth, "resume", "--time", "now", "--entropy-from", "/dev/urandom")
    assert "thaw" in r.stdout and "sandbox running" in r.stdout
    assert "entropy    ok" in r.stdout
    assert cgroup_events(hearth, "gated")["frozen"] == "0"
    assert "identity   ok" in r.stdout and "CRNG reseeded" in r.stdout
    out = ctl(hearth, "status").stdout
    assert "sandbox running" in out and "last resume: host" in out
    ident = hearth.rpc("status")["identity"]
    assert f"generation 1, instance {ident['instance_id']}" in out, out
    r = ctl(hearth, "resume", "--time", "yesterday", check=False)
    assert r.returncode != 0 and "bad time" in r.stderr


def test_hearthctl_names_an_option_given_without_its_value():
    # Refused before any connection: each option of init and resume says
    # it lacks its value, whichever of the options it is.
    for cmd, opt in [("init", "--env"), ("init", "--allow-out"), ("init", "--hostname"),
                     ("init", "--time"), ("init", "--entropy-from"), ("init", "--network"),
                     ("resume", "--time"), ("resume", "--entropy-from"), ("resume", "--network")]:
        r = subprocess.run([HEARTHCTL, "--connect", "unix:/nonexistent", cmd, opt],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 2 and f"{cmd}: {opt} needs a value" in r.stderr, (cmd, opt, r)
    r = subprocess.run([HEARTHCTL, "--connect", "unix:/nonexistent", "resume", "--bogus"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "unexpected argument '--bogus'" in r.stderr, r


def test_readiness_deadline_does_not_count_frozen_time(hearth, tmp_path):
    flag = tmp_path / "ready"
    hearth.start(hearth.config([svc("slow", "exec sleep 1000",
                                    ready={"file": str(flag), "timeout_ms": 1500})]))
    hearth.wait_for(lambda: hearth.service("slow")["pid"] > 0, what="slow started")
    pid = hearth.service("slow")["pid"]
    hearth.rpc("sandbox.freeze", {})
    time.sleep(2.0)  # longer than the whole readiness budget
    hearth.rpc("sandbox.resume", {})
    time.sleep(0.2)
    s = hearth.service("slow")
    assert s["state"] == "starting" and s["pid"] == pid and "error" not in s, s
    flag.write_text("")
    hearth.wait_for(lambda: hearth.service("slow")["state"] == "running", what="ready")
    assert hearth.service("slow")["restarts"] == 0


def test_shutdown_while_frozen_thaws_so_services_see_their_signal(hearth):
    # A handler has to run to exit 7: a frozen process cannot run it and
    # would be SIGKILLed at the stop timeout (137).
    hearth.start(hearth.config([svc("main", 'trap "exit 7" TERM; echo up; '
                                    'while :; do sleep 0.05; done', main=True,
                                    stop={"timeout_ms": 3000})]))
    hearth.wait_for(lambda: lines(hearth, "main") == ["up"], what="main")
    assert hearth.rpc("sandbox.freeze", {})["frozen"] is True
    hearth.signal(15)
    assert hearth.wait_exit() == 7, hearth.log_text()


SECRETS = ["hunter2pw", "plainvaluexyz", "fromfile-value-77", "sk-argv-secret-1", "urlpass-in-config"]


@pytest.mark.valgrind
def test_secret_values_never_show(hearth, tmp_path):
    """Values handed over by sandbox.init or read from env_files, and
    secrets in argv or URL userinfo, are kept out of config.get, status,
    services.list, events, captured output and hearth's own log."""
    envfile = tmp_path / "agent.env"
    envfile.write_text("FILE_SECRET=fromfile-value-77\nSHORT=1\n")
    script = ('echo "db=$DATABASE_URL foo=$FOO file=$FILE_SECRET short=$SHORT"; '
              'echo "url=postgres://u:$FOO@db/x"; '
              # A line over the 4 KiB limit, cut where the value stands.
              'printf "%4090s%s tail\\n" "" "$FILE_SECRET"; exec sleep 1000')
    hearth.start(hearth.config(
        [svc("agent", script, after=["init"], env_files=[str(envfile)],
             env={"CACHE_URL": "redis://cache:urlpass-in-config@cache:6379/0", "MODE": "plain"}),
         # The config happens to hold a value sandbox.init hands over: it is
         # hidden there too, and in the exec error hearth logs about it.
         {"name": "broken", "argv": ["/nonexistent/plainvaluexyz", "--api-key", "sk-argv-secret-1"],
          "after": ["init"], "restart": "never"}],
        wait_for_init={"enabled": True}))
    sub = hearth.client()
    sub.result("events.subscribe", {"since": 0})
    r = hearth.rpc("sandbox.init", {"env": {"DATABASE_URL": "postgres://u:hunter2pw@db/x",
                                            "FOO": "plainvaluexyz"}})
    assert sorted(r["env"]) == ["DATABASE_URL", "FOO"]
    out = hearth.wait_for(lambda: lines(hearth, "agent") if len(lines(hearth, "agent")) >= 4 else None,
                          what="agent output")
    assert out[:2] == ["db=<redacted> foo=<redacted> file=<redacted> short=1",
                       "url=postgres://u:<redacted>@db/x"]
    # The long line comes in two pieces, the value whole in the second
    # (the cut moved back by the longest registered value, less one byte).
    carry = len("postgres://u:hunter2pw@db/x") - 1
    assert out[2] == " " * (4096 - carry), len(out[2])
    assert out[3] == " " * (4090 - 4096 + carry) + "<redacted> tail", out[3]
    hearth.wait_for(lambda: hearth.service("broken")["state"] in ("failed", "stopped"),
                    what="broken given up")

    cfg = hearth.rpc("config.get")
    agent = cfg["services"][0]
    assert agent["env"]["CACHE_URL"] == "redis://cache:<redacted>@cache:6379/0"
    assert agent["env"]["MODE"] == "plain"
    assert cfg["services"][1]["argv"] == ["/nonexistent/<redacted>", "--api-key", "<redacted>"]
    st = hearth.rpc("status")
    assert st["sandbox"]["init"]["env"] == {"DATABASE_URL": "<redacted>", "FOO": "<redacted>"}
    shown = {
        "config.get": json.dumps(cfg),
        "status": json.dumps(st),
        "services.list": json.dumps(hearth.rpc("services.list")),
        "logs.read": json.dumps(hearth.rpc("logs.read", {"name": "agent", "lines": 100})),
    }
    events = []
    deadline = time.monotonic() + 2
    sub.sock.settimeout(0.3)
    while time.monotonic() < deadline:
        try:
            events.append(sub.read_line())
        except (OSError, EOFError):
            break
    sub.close()
    init_ev = [e["params"] for e in events if e.get("params", {}).get("type") == "sandbox.init"]
    assert init_ev and sorted(init_ev[0]["env"]) == ["DATABASE_URL", "FOO"], init_ev
    shown["events"] = json.dumps(events)
    shown["hearth log"] = hearth.log_text()
    assert "unable to exec /nonexistent/<redacted>" in shown["hearth log"]
    for where, text in shown.items():
        for secret in SECRETS:
            assert secret not in text, (where, secret)
