"""A fresh sandbox from the shipped Hermes config (rootfs/hermes/hearth.json,
its machine sections made QEMU's) with each Hermes release an image may
carry: the stand-in told its version on the kernel command line
(hermes_standin.version=), an empty home, no operator action. It must reach
ready, make its own API key and keep it across a reboot, leave no tirith
litter, let a private skill win by name across categories, restart on an
in-chat /restart and after a kill -9; and the 0.19 flag on 0.18.2 must end
in `failed` with argparse's line, not in a loop."""
import json
import os
import re
import socket
import stat
import time

import pytest

import hermes_config
from hearthrpc import LineSocket

HERMES_UID = 10000
VERSIONS = ["0.18.2", "0.21.3"]


def read(path):
    with open(path) as f:
        return f.read()


def write(path, text, uid=None):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    if uid is not None:
        # What the agent writes is the agent's, its new directory too.
        os.chown(os.path.dirname(path), uid, uid)
        os.chown(path, uid, uid)


def agent_skills(vm):
    """The stand-in's own listing, Hermes's name resolution: {name: entry}."""
    s = LineSocket(socket.AF_INET, ("127.0.0.1", vm.agent_port), 15.0)
    try:
        s.send(b"skills\n")
        out = {}
        while True:
            line = s.line().decode()
            if line == "end":
                return out
            e = json.loads(line)
            out[e["name"]] = e
    finally:
        s.close()


def ready(vm, other_than=None):
    s = vm.service("hermes")
    if s["state"] == "running" and s["pid"] != other_than:
        return s
    return None


def boot(make_vm, version, config="hermes"):
    return make_vm(extra=["--config", config, "--append",
                          f"hermes_standin.version={version}"]).start()


@pytest.mark.parametrize("version", VERSIONS)
def test_fresh_sandbox_with_each_release(make_vm, hostdirs, version):
    home, skills = hostdirs["home"], hostdirs["skills"]
    assert os.listdir(home) == []
    # Public skills: one whose name the agent will take for its own in
    # another category, and two it never has.
    write(os.path.join(skills, "research", "lab-notebook", "SKILL.md"),
          "---\nname: lab-notebook\n---\npublic lab notebook\n")
    write(os.path.join(skills, "devops", "deploy", "SKILL.md"), "public deploy\n")
    write(os.path.join(skills, "flat-skill", "SKILL.md"), "public flat\n")

    vm = boot(make_vm, version)
    vm.wait_for(lambda: ready(vm), timeout=120, what=f"hermes {version} ready")
    h = vm.service("hermes")
    assert (h["restarts"], h.get("failed_starts", 0)) == (0, 0), h
    st = vm.wait_agent()
    # The release asked for, told it is supervised by the shipped env (for
    # 0.18.2 through INVOCATION_ID: it knows no other marker), not root.
    assert (st["version"], st["supervised"], st["uid"]) == (version, True, HERMES_UID), st
    assert vm.agent("env HERMES_GATEWAY_EXTERNAL_SUPERVISOR") == "1"
    assert vm.result("config.get")["services"][0]["argv"] == ["hermes", "gateway", "run"]

    # The key: none anywhere, so hearth made one for this sandbox, in the
    # home's .env, the agent's alone, and the API server runs with it.
    sec = vm.service("hermes")["secrets"]
    assert sec == [{"env": "API_SERVER_KEY", "file": "/root/.hermes/.env",
                    "state": "generated"}], sec
    dotenv = read(os.path.join(home, ".env"))
    m = re.fullmatch(r"API_SERVER_KEY=([A-Za-z0-9_-]{48})\n", dotenv)
    assert m, dotenv
    envst = os.stat(os.path.join(home, ".env"))
    assert (envst.st_uid, envst.st_gid, stat.S_IMODE(envst.st_mode)) == \
        (HERMES_UID, HERMES_UID, 0o600)
    assert vm.agent("env API_SERVER_KEY") == m.group(1)
    assert st["api"] is True and st["api_port"] == 8642, st
    # TIRITH_ENABLED=false: no download attempted, nothing left behind.
    assert vm.agent("env TIRITH_ENABLED") == "false"
    assert not os.path.exists(os.path.join(home, ".tirith-install-failed"))
    assert not os.path.exists(os.path.join(home, "bin"))

    # Bundled skills (copied into the home by the agent) and hearth's
    # public links, both found by the agent's own name resolution.
    sk = agent_skills(vm)
    assert sk["gateway-status"]["source"] == "builtin", sk
    assert sk["code-review"]["path"].endswith("skills/software-development/code-review"), sk
    assert sk["lab-notebook"]["path"].endswith("skills/research/lab-notebook"), sk
    assert sk["lab-notebook"]["source"] == "local", sk
    assert {"deploy", "flat-skill"} <= set(sk), sk
    assert f"this gateway is version {version}." in read(
        os.path.join(home, "skills", "hermes", "gateway-status", "SKILL.md"))

    # The agent writes a skill of the same name in another category, the
    # one its bundled code-review lives in: private wins by name. The
    # public one is unlinked and reported shadowed by the private path.
    write(os.path.join(home, "skills", "software-development", "lab-notebook", "SKILL.md"),
          "---\nname: lab-notebook\n---\nmy own lab notebook\n", uid=HERMES_UID)
    vm.result("skills.sync")
    lst = vm.result("skills.list")
    assert {"path": "research/lab-notebook", "name": "lab-notebook",
            "by": "software-development/lab-notebook"} in lst["shadowed"], lst
    assert not os.path.lexists(os.path.join(home, "skills", "research", "lab-notebook"))
    assert {"path": "devops/deploy", "name": "deploy"} in lst["linked"], lst
    sk = agent_skills(vm)
    assert sk["lab-notebook"]["path"].endswith("skills/software-development/lab-notebook"), sk
    assert "deploy" in sk and "gateway-status" in sk, sk

    # An in-chat /restart: with the shipped markers every release drains
    # and exits 75 for hearth to start it again (unsupervised, 0.18.2 would
    # detach a replacement and exit 0).
    pid = vm.service("hermes")["pid"]
    assert vm.agent("chat /restart") == "ok restarting"
    s = vm.wait_for(lambda: ready(vm, other_than=pid), timeout=60, what="restarted on 75")
    assert s["last_exit"] == {"code": 75} and s["restarts"] == 1, s
    history = read(os.path.join(home, "sessions", "history.log"))
    assert re.search(r"restart reason=chat \S+ detached=0\n\d+ pid=\d+ exit status=75\n",
                     history), history

    # kill -9: the stale pid and lock are the agent's business; it comes
    # back ready.
    pid = vm.service("hermes")["pid"]
    vm.result("services.signal", {"name": "hermes", "signal": "SIGKILL"})
    s = vm.wait_for(lambda: ready(vm, other_than=pid), timeout=60, what="back after kill -9")
    assert s["last_exit"] == {"signal": "SIGKILL"}, s
    assert vm.wait_agent()["version"] == version

    vm.result("system.shutdown", {})
    assert vm.wait_exit(120) == 0

    # A reboot on the same home: the same key, found, not made again.
    vm2 = boot(make_vm, version)
    vm2.wait_for(lambda: ready(vm2), timeout=120, what="hermes ready after the reboot")
    assert read(os.path.join(home, ".env")) == dotenv
    assert vm2.service("hermes")["secrets"][0]["state"] == "present"
    assert vm2.agent("env API_SERVER_KEY") == m.group(1)
    assert agent_skills(vm2)["lab-notebook"]["path"].endswith(
        "skills/software-development/lab-notebook")
    vm2.result("system.shutdown", {})
    assert vm2.wait_exit(120) == 0


def test_the_019_flag_on_0182_ends_failed_with_the_usage_line(make_vm, hostdirs):
    """What the shipped config did before: the flag 0.18.2 does not know.
    argparse exits 2 at every start; after ready.attempts (the default, 5)
    the service is failed with argparse's line, not restarted for ever."""
    cfg = hermes_config.derive()
    cfg["services"][0]["argv"] = ["hermes", "gateway", "run", "--external-supervisor"]
    vm = make_vm(configs={"flag": cfg},
                 extra=["--config", "flag", "--append", "hermes_standin.version=0.18.2"]).start()
    f = vm.wait_for(lambda: (lambda s: s if s["state"] == "failed" else None)(
        vm.service("hermes")), timeout=120, what="hermes failed")
    assert f["last_exit"] == {"code": 2}, f
    assert f["failed_starts"] == 5, f
    assert "ready.attempts" in f["error"] and "exited with code 2 before ready" in f["error"], f
    assert "unrecognized arguments: --external-supervisor" in f["error"], f
    restarts = f["restarts"]
    time.sleep(3)
    again = vm.service("hermes")
    assert (again["state"], again["restarts"]) == ("failed", restarts), again
