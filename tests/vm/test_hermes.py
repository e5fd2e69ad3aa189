"""The Hermes contract (docs/hermes.md) on a real kernel: the image booted
with the shipped Hermes config (rootfs/hermes/hearth.json, its machine
sections made QEMU's by hermes_config.py), the stand-in agent in Hermes's
place. Two boots: the first runs every check that needs a live sandbox,
the second is the rebuild on the same home."""
import os
import re
import stat
import time

import hermes_config

HERMES_UID = 10000


def owner(path):
    st = os.lstat(path)
    return (st.st_uid, st.st_gid)

def read(path):
    with open(path) as f:
        return f.read()


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def lines_with(path, word):
    return [l for l in read(path).splitlines() if f" {word} " in l]


def hermes_running(vm, other_than=None):
    s = vm.service("hermes")
    if s["state"] == "running" and s["pid"] != other_than:
        return s
    return None


def force_restart_gaps(vm, since_seq):
    """For each exit of hermes listed in restart_force_exit_codes after
    since_seq: the guest's monotonic time from the exit (state backoff) to
    the new start (state starting)."""
    evs = [e for e in vm.ctl.events
           if e.get("type") == "service.state" and e.get("service") == "hermes"
           and e["seq"] > since_seq]
    gaps = []
    for i, e in enumerate(evs):
        if e["state"] == "backoff" and "restart_force_exit_codes" in e.get("error", ""):
            assert e["last_exit"] == {"code": 75}, e
            nxt = [n for n in evs[i + 1:] if n["state"] == "starting"]
            assert nxt, evs
            gaps.append(nxt[0]["mono_ms"] - e["mono_ms"])
    return gaps


def test_hermes_contract(make_vm, hostdirs):
    home, skills = hostdirs["home"], hostdirs["skills"]
    # Public skills in both of Hermes's layouts, and a private category of
    # the same name holding a skill of its own.
    write(os.path.join(skills, "flat-skill", "SKILL.md"), "public flat\n")
    write(os.path.join(skills, "devops", "deploy", "SKILL.md"), "public deploy\n")
    write(os.path.join(skills, "devops", "monitor", "SKILL.md"), "public monitor\n")
    write(os.path.join(home, "skills", "devops", "runbook", "SKILL.md"), "private runbook\n")
    # Made here as root, the home's skills are the agent's, as an operator
    # chowns a home made by hand (docs/hermes.md): Hermes writes its bundled
    # skills into skills/ at every start.
    for d, _, files in os.walk(os.path.join(home, "skills")):
        for p in [d] + [os.path.join(d, f) for f in files]:
            os.chown(p, HERMES_UID, HERMES_UID)
    # The operator's .env, read by the agent and not by hearth: a line
    # hearth's env_files would refuse, and the root switch, which changes
    # nothing: the agent is not root.
    write(os.path.join(home, ".env"), "# operator secrets\nHERMES_STANDIN_MARK=from-dotenv\n"
          "HERMES_ALLOW_ROOT_GATEWAY=yes\nthis line is not an assignment\n")

    vm = make_vm(extra=["--config", "hermes"]).start()
    assert vm.result("config.get")["services"][0]["argv"] == ["hermes", "gateway", "run"]
    sub = vm.result("events.subscribe", {"since": 0})
    assert sub["subscribed"]

    # Ready means /health answered on the API server's port.
    h = vm.wait_for(lambda: hermes_running(vm), timeout=120, what="hermes ready")
    assert h["restarts"] == 0, h
    assert vm.agent_state()["api_port"] == 8642
    assert vm.agent("connect 127.0.0.1 8642").startswith("ok "), "the API server listens"
    # The shipped config probes once a minute (docs/hermes.md).
    health = vm.wait_for(lambda: (lambda hc: hc if hc["checks"] >= 1 else None)(
        vm.service("hermes")["health"]), timeout=100, what="a health check")
    assert health["failures"] == 0 and health["status"] == "healthy", health

    # The home was seeded around the operator's files; .env is the agent's.
    assert "provider: custom" in read(os.path.join(home, "config.yaml"))
    good_config = read(os.path.join(home, "config.yaml"))
    assert vm.agent("env HERMES_STANDIN_MARK") == "from-dotenv"
    assert vm.agent("env HERMES_ALLOW_ROOT_GATEWAY") == "yes", "Hermes loads .env itself"
    # The API server (hence /health) runs only with a key: hearth made one
    # for this sandbox, after the operator's lines, owned by hermes, 0600.
    assert vm.service("hermes")["secrets"] == [
        {"env": "API_SERVER_KEY", "file": "/root/.hermes/.env", "state": "generated"}]
    dotenv = read(os.path.join(home, ".env"))
    m = re.fullmatch(r"# operator secrets\nHERMES_STANDIN_MARK=from-dotenv\n"
                     r"HERMES_ALLOW_ROOT_GATEWAY=yes\nthis line is not an assignment\n"
                     r"API_SERVER_KEY=([A-Za-z0-9_-]{48})\n", dotenv)
    assert m, dotenv
    assert vm.agent("env API_SERVER_KEY") == m.group(1)
    assert owner(os.path.join(home, ".env")) == (HERMES_UID, HERMES_UID)
    assert stat.S_IMODE(os.stat(os.path.join(home, ".env")).st_mode) == 0o600
    # The agent is the image's hermes (uid 10000), owner of its home and
    # workspace (mounts[].owner), of what seeding copied (seed[].user) and
    # of its log files; Hermes keeps its home 0700 outside a container.
    st = vm.agent_state()
    assert (st["uid"], st["gid"]) == (HERMES_UID, HERMES_UID), st
    for p in (home, hostdirs["workspace"], os.path.join(home, "config.yaml"),
              os.path.join(home, "sessions"), os.path.join(home, "logs", "hermes.out"),
              os.path.join(hostdirs["workspace"], "history.log")):
        assert owner(p) == (HERMES_UID, HERMES_UID), p
    assert stat.S_IMODE(os.stat(home).st_mode) == 0o700
    assert vm.agent("env API_SERVER_PORT") == "8642"
    # What Hermes leaves in its home at start: its bundled skills with their
    # manifest, its pid and lock; no failed tirith download's marker
    # (TIRITH_ENABLED=false).
    assert st["version"] == "0.21.3" and st["supervised"] is True, st
    assert "gateway-status:" in read(os.path.join(home, "skills", ".bundled_manifest"))
    assert os.path.isfile(os.path.join(home, "skills", "hermes", "gateway-status", "SKILL.md"))
    assert '"pid": %d' % st["pid"] in read(os.path.join(home, "gateway.pid"))
    assert not os.path.exists(os.path.join(home, ".tirith-install-failed"))

    # Skills through categories: the private category keeps its own skill
    # and gets the public ones beside it.
    st = vm.wait_agent()
    assert {"flat-skill", "devops/deploy", "devops/monitor", "devops/runbook"} <= set(st["skills"]), st
    assert os.path.isdir(os.path.join(home, "skills", "devops"))
    assert not os.path.islink(os.path.join(home, "skills", "devops"))
    assert os.readlink(os.path.join(home, "skills", "devops", "deploy")) == \
        "/opt/hermes-common-skills/devops/deploy"
    # hearth's links in the private skills belong to the agent (the first
    # service after "skills"), so it can replace them with skills of its own.
    assert owner(os.path.join(home, "skills", "devops", "deploy")) == (HERMES_UID, HERMES_UID)
    assert owner(os.path.join(home, "skills", "flat-skill")) == (HERMES_UID, HERMES_UID)

    # hermes-web-ui in the foreground, its state on the persistent home.
    vm.wait_for(lambda: vm.service("web-ui")["state"] == "running", timeout=60, what="web-ui")
    webui_log = os.path.join(home, "home", ".hermes-web-ui", "server.log")
    assert read(webui_log).count("start pid=") == 1

    # An in-chat /restart: drain, exit 75, started again after the first
    # backoff delay, twice, without the delay growing.
    seq0 = max(e["seq"] for e in vm.ctl.events)
    for n in (1, 2):
        pid = vm.service("hermes")["pid"]
        assert vm.agent("chat /restart") == "ok restarting"
        s = vm.wait_for(lambda: hermes_running(vm, other_than=pid), timeout=60, what="restarted")
        assert s["restarts"] == n, s
    history = os.path.join(home, "sessions", "history.log")
    assert len([l for l in read(history).splitlines() if "restart reason=chat" in l]) == 2
    vm.result("status")  # collects the events that came meanwhile
    gaps = force_restart_gaps(vm, seq0)
    # backoff.initial_ms is 500; a growing backoff would make the second 1000.
    assert len(gaps) == 2 and all(480 <= g < 850 for g in gaps), gaps

    # Pause and resume: the resume action drains and restarts the gateway
    # through SIGUSR1 (restart:SIGUSR1), not as a failure.
    pid = vm.service("hermes")["pid"]
    restarts = vm.service("hermes")["restarts"]
    vm.qmp.cmd("stop")
    time.sleep(2)
    vm.qmp.cmd("cont")
    now = time.time()
    r = vm.result("sandbox.resume", {"time": {"sec": int(now), "nsec": int((now % 1) * 1e9)}})
    steps = {s["name"]: s for s in r["steps"]}
    assert steps["on_resume"]["result"] == "ok", r
    assert "SIGUSR1" in str(steps["on_resume"].get("services", {}).get("hermes")), r
    s = vm.wait_for(lambda: hermes_running(vm, other_than=pid), timeout=60, what="resumed restart")
    assert "draining reason=signal" in read(history) and "restart reason=signal" in read(history)
    assert s["restarts"] >= restarts

    # A config.yaml Hermes cannot use: exit 78, failed, not restarted.
    write(os.path.join(home, "config.yaml"), "model: [unclosed\n")
    pid = vm.service("hermes")["pid"]
    assert vm.agent("chat /restart") == "ok restarting"
    failed = vm.wait_for(lambda: (lambda x: x if x["state"] == "failed" else None)(
        vm.service("hermes")), timeout=60, what="hermes failed")
    assert failed["last_exit"] == {"code": 78}, failed
    assert "78" in failed["error"] and "restart_prevent_exit_codes" in failed["error"], failed
    time.sleep(3)  # six times backoff.initial_ms: a restart loop would show
    again = vm.service("hermes")
    assert (again["state"], again["restarts"]) == ("failed", failed["restarts"]), again
    # Fixed by hand, started by hand.
    write(os.path.join(home, "config.yaml"), good_config)
    vm.result("services.start", {"name": "hermes"})
    vm.wait_for(lambda: hermes_running(vm), timeout=60, what="hermes started by hand")
    starts_before = len(lines_with(history, "start"))

    # The user's own edits to the home.
    with open(os.path.join(home, "SOUL.md"), "a") as f:
        f.write("edited by the user\n")
    vm.result("system.shutdown", {})
    assert vm.wait_exit(120) == 0

    # Rebuild: a new VM on the same home keeps everything, seeds nothing.
    vm2 = make_vm(extra=["--config", "hermes"]).start()
    vm2.wait_for(lambda: hermes_running(vm2), timeout=120, what="hermes ready after the rebuild")
    assert read(os.path.join(home, "config.yaml")) == good_config
    assert read(os.path.join(home, "SOUL.md")).endswith("edited by the user\n")
    # The key made at the first boot is kept, byte for byte.
    assert read(os.path.join(home, ".env")) == dotenv
    assert vm2.service("hermes")["secrets"][0]["state"] == "present"
    assert len(lines_with(history, "start")) == starts_before + 1
    assert {"flat-skill", "devops/deploy", "devops/runbook"} <= set(vm2.wait_agent()["skills"])
    vm2.wait_for(lambda: vm2.service("web-ui")["state"] == "running", timeout=60, what="web-ui")
    assert read(webui_log).count("start pid=") == 2
    vm2.result("system.shutdown", {})
    assert vm2.wait_exit(120) == 0


def test_shipped_config_is_what_boots():
    """The booted config differs from the shipped one only in the machine's
    sections."""
    import json
    with open(hermes_config.SHIPPED) as f:
        shipped = json.load(f)
    booted = hermes_config.derive()
    for key in set(shipped) | set(booted):
        if key not in hermes_config.MACHINE:
            assert booted.get(key) == shipped.get(key), key
