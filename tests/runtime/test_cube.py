"""docs/platforms.md's CubeSandbox recipe, run under podman with runc in
CubeSandbox's shape: the shipped OCI image with its shipped config, and
only what the recipe tells an operator to set (a service of the
operator's own, here a probe that is a default service: root, contained; public skills of its
own as a read-only host-mount). The commands are the recipe's "The same
shape under podman", with a free port for 49983 and forty short-lived
processes first in the platform's namespace.

- The platform: a container whose PID 1 is a shell that only sleeps and
  reaps, standing in for Cube's guest agent (its Kata-agent fork, the
  VM's init), on podman's bridge with 49983 published on the host's
  loopback, as Cube's host reaches a sandbox's envd from outside.
- hearth: the image's entrypoint in a container that joins the
  platform's pid and network namespaces (`--pid container:X --network
  container:X --cgroupns host`, Cube's container has no cgroup
  namespace), with a mount namespace of its own and a `/.container_rw`
  as Cube's containers have; hearth is not PID 1.
- The home and the workspace are not there when hearth starts (as in a
  template being made and probed): hearth waits, the agent is not
  started, nothing is seeded into the image's own home, and envd answers
  `GET /health` through the published port meanwhile (the template's
  probe). Then they are bound in from inside the container's mount
  namespace, `/.container_rw/hostdir-N` onto each `mountPath` (the
  public skills, read-only, the workspace, the home), as Cube's agent
  does after a restore: the identity is renewed (cause
  `platform_mounts`) before the agent's first start, the home is seeded,
  the skills linked, the agent runs as hermes with a key of its own in
  the home's `.env` (0600, uid 10000).
- The agent and the probe service cannot reach envd at 127.0.0.1:49983
  nor at the sandbox's own address, and the probe cannot see or kill
  hearth; E2B's SDK from the
  host, as it behaves against Cube (envd 0.2.0, the user `user`), runs
  `id -un` (hermes) and writes and reads a file in the home.
- The platform's `kill -9` of hearth leaves none of its processes (the
  services, a service's child, an exec session, envd's role process).

Run once with podman's default capabilities (services contained in user
namespaces of their own: `userns`) and once with CAP_SYS_ADMIN (`full`).

On this host the platform's own processes cannot reach envd either: the
containers here have no cgroup2 mount (a hybrid cgroup host), so hearth
has no services cgroup to match, and `egress.deny_local_ports` falls
back to closing the port to every process of the network namespace but
hearth's own probes (docs/security.md, "Local ports", step 3), the
platform's shell included. The test asserts what status says and what
holds: refused from the platform's container while
`local_ports.services_only` is false (open when it is true, on a host
with cgroup2), and reached from outside the namespace through the
published port in both cases.

Not run here: Cube's own guest agent and its snapshot restore (a
container shares the host's clock, and a test never steps it), so the
restore's clock-step detection is run in tests/vm/test_identity_vm.py;
here the restore is known by the platform mounts arriving after start.
Under podman the runtime's cleanup of a dead container's cgroup ends its
processes too; that they die with hearth by themselves is
tests/integration/test_entrypoint.py's."""
import json
import os
import random
import subprocess

import pytest

from conftest import BASE, Container, podman, wait_until
from test_envd import SHIPPED, agent_connects, drive, free_port, health

# The operator's own service: a default one (root, contained). It waits
# for what the agent waits for and for the web UI (an open port to
# compare with), then looks for hearth (its pid, given in the workspace,
# and every /proc entry's name), kills hearth's pid, its own pid 1 and
# every process it may signal, connects to envd at the loopback and the
# sandbox's own address and to the web UI, says what it got on stdout,
# and stays with a child.
PROBE = (
    "hp=$(cat /workspace/.hearth-pid); "
    "cat /proc/$hp/cmdline >/dev/null 2>&1 && echo probe-result seen=yes || "
    "echo probe-result seen=no; "
    "cat /proc/[0-9]*/comm 2>/dev/null | grep -qx hearth && echo probe-result named=yes || "
    "echo probe-result named=no; "
    "kill -9 $hp 2>/dev/null; echo probe-result kill=$?; "
    "kill -9 1 -1 2>/dev/null; "
    "echo probe-result uid=$(id -u); "
    "a=$(ip -4 -o addr show eth0 | awk '{print $4}' | cut -d/ -f1); "
    "for t in 127.0.0.1:49983 $a:49983 127.0.0.1:9000; do "
    "  r=$(printf 'GET /health HTTP/1.0\\r\\n\\r\\n' | timeout 5 nc ${t%:*} ${t#*:} 2>&1 | head -n 1); "
    "  echo \"probe-result $t $r\"; "
    "done; echo probe-result done; "
    "sleep 86401.MARK & exec sleep 86400.MARK")


def _health_from(container, addr):
    """GET /health from inside a container of the namespace: the first
    line of the answer, or nc's complaint."""
    r = podman("exec", container, "sh", "-c",
               f"printf 'GET /health HTTP/1.0\\r\\n\\r\\n' | timeout 5 nc {addr} 49983 2>&1 "
               "| head -n 1", check=False)
    return r.stdout.strip()


def _ps(container):
    """(pid, stat, args) of every process in the shared pid namespace but
    the ps itself."""
    out = podman("exec", container, "ps", "-o", "pid,stat,args").stdout.splitlines()[1:]
    rows = [l.split(None, 2) for l in out if l.strip()]
    return [(int(r[0]), r[1], r[2] if len(r) > 2 else "") for r in rows
            if not (len(r) > 2 and r[2].startswith("ps -o"))]


def _nsenter(pid, *cmd, pidns=False):
    """cmd in hearth's container's mount namespace (its root: the image's
    busybox), the way Cube's agent enters it; with pidns, in its pid
    namespace too, for a command that reads /proc/self (the container's
    /proc is its pid namespace's)."""
    r = subprocess.run(["nsenter", "-t", str(pid), "-m", *(["-p"] if pidns else []), *cmd],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, f"{cmd}: {r.stdout}{r.stderr}"


def _events(hearth):
    """Every event in hearth's ring, oldest first (hearthctl events
    --since 0, followed for two seconds)."""
    r = podman("exec", hearth, "timeout", "2", "hearthctl", "--json", "events", "--since", "0",
               check=False)
    out = []
    for line in r.stdout.splitlines():
        try:
            msg = json.loads(line)
        except ValueError:
            continue  # the subscription's reply, several lines
        if msg.get("method") == "event":
            out.append(msg["params"])
    return out


@pytest.mark.parametrize("caps", [[], ["SYS_ADMIN"]], ids=["default-caps", "cap-sys-admin"])
def test_cube_recipe_in_cubes_shape(image, tmp_path, caps):
    mark = str(random.randrange(10**8, 10**9))
    plat, hearth = "hearth-cubeplat-" + mark, "hearth-cube-" + mark
    port = free_port()
    share = tmp_path / "container_rw"
    home, ws, pub = share / "hostdir-0", share / "hostdir-1", share / "hostdir-2"
    home.mkdir(parents=True)
    ws.mkdir()
    # The operator's public skills, for the read-only host-mount at
    # /opt/hermes-common-skills (over the image's sample, "hello").
    (pub / "greet").mkdir(parents=True)
    (pub / "greet" / "SKILL.md").write_text("---\nname: greet\ndescription: says hello\n---\n")
    try:
        # The platform: PID 1 a shell that sleeps and reaps (wait reaps
        # any child, the orphans it adopts included); forty processes
        # first, so hearth's pid is none a probe could hit by chance in a
        # pid namespace of its own.
        podman("run", "-d", "--name", plat, "--network", "bridge",
               "-p", f"127.0.0.1:{port}:49983", *BASE, "--entrypoint", "sh", image, "-c",
               "i=0; while [ $i -lt 40 ]; do sleep 0 & i=$((i+1)); done; wait; "
               "while :; do sleep 86399 & wait; done")
        gateway = podman("inspect", plat, "--format", "{{.NetworkSettings.Gateway}}").stdout.strip()
        address = podman("inspect", plat, "--format",
                         "{{.NetworkSettings.IPAddress}}").stdout.strip()
        assert gateway and address, (gateway, address)
        platform_pids = {p for p, _, _ in _ps(plat)}

        # The shipped config, with what the recipe has the operator set: a
        # service of the operator's own. The platform's address (podman's
        # gateway, private) is not in allowOut: its connections are
        # answered all the same (egress's replies rule).
        cfg = json.load(open(SHIPPED))
        assert not any(a.startswith(gateway + "/") for a in cfg["egress"]["allowOut"])
        cfg["services"].append({"name": "probe", "argv": ["sh", "-c", PROBE.replace("MARK", mark)],
                                "after": ["mounts", "egress", "web-ui"]})
        cfgfile = tmp_path / "hearth.json"
        cfgfile.write_text(json.dumps(cfg))
        podman("run", "-d", "--name", hearth, "--pid", f"container:{plat}",
               "--network", f"container:{plat}", "--cgroupns", "host", *BASE,
               "--cap-add", "NET_ADMIN", *[a for c in caps for a in ("--cap-add", c)],
               "-v", f"{share}:/.container_rw", "-v", f"{cfgfile}:/etc/hearth/hearth.json:ro",
               image)

        c = Container(hearth)
        ctl = c.ctl

        def svc(st, name):
            return next(s for s in st["services"] if s["name"] == name)

        # Started without the home and the workspace: waiting for them.
        st = wait_until(lambda: (lambda s: s if s["mounts"]["waiting"] == 2 and
                                 s["envd"]["state"] == "running" else None)(ctl("status")), 30,
                        "hearth waiting for the platform's mounts, envd up")
        assert st["mode"] == "container" and st["pid"] > 40, st
        assert podman("exec", plat, "cat", "/proc/1/comm").stdout.strip() == "sh"
        assert podman("exec", plat, "cat", f"/proc/{st['pid']}/comm").stdout.strip() == "hearth"
        assert st["mounts"]["waiting_for"] == ["/root/.hermes", "/workspace"], st["mounts"]
        assert st["phases"]["mounts"] is False and st["phases"]["skills"] is False
        for name in ("hermes", "web-ui", "probe"):
            s = svc(st, name)
            assert s["state"] == "waiting" and not s["pid"], s
        assert svc(st, "hermes")["waiting_for"] == "mounts"
        out = podman("exec", hearth, "hearthctl", "status").stdout
        assert "mounts: waiting for the platform to mount /root/.hermes" in out, out
        assert "mounts: waiting for the platform to mount /workspace" in out, out
        boot_id = st["identity"]
        assert boot_id["cause"] == "boot" and boot_id["generation"] == 0, boot_id
        # The template's readiness probe, from outside, while it waits.
        wait_until(lambda: health(port), 30, "GET /health through the published port")
        # Nothing seeded or made in the image's own home.
        assert podman("exec", hearth, "ls", "-A", "/root/.hermes").stdout.strip() == ""

        # The platform binds them in, from inside the mount namespace.
        hpid = int(podman("inspect", hearth, "--format", "{{.State.Pid}}").stdout.strip())
        (ws / ".hearth-pid").write_text(str(st["pid"]))
        # In the host-mount metadata's order: the public skills
        # (readOnly), the workspace, the home.
        _nsenter(hpid, "mount", "--bind", "/.container_rw/hostdir-2", "/opt/hermes-common-skills")
        _nsenter(hpid, "mount", "-o", "remount,bind,ro", "/opt/hermes-common-skills", pidns=True)
        assert podman("exec", hearth, "touch", "/opt/hermes-common-skills/x",
                      check=False).returncode != 0
        _nsenter(hpid, "mount", "--bind", "/.container_rw/hostdir-1", "/workspace")
        _nsenter(hpid, "mount", "--bind", "/.container_rw/hostdir-0", "/root/.hermes")
        st = wait_until(lambda: (lambda s: s if svc(s, "probe")["state"] == "running" and
                                 svc(s, "hermes")["state"] == "running" else None)(ctl("status")),
                        90, "the agent, the web UI and the probe running")
        assert st["mounts"]["waiting_for"] == [] and st["phases"]["skills"] is True

        # A restored copy's identity, made anew before the agent's first start.
        ident = st["identity"]
        assert ident["cause"] == "platform_mounts" and ident["generation"] == 1, ident
        assert ident["instance_id"] != boot_id["instance_id"], ident
        assert ident["crng"]["action"] == ("reseeded" if caps else "mixed"), ident
        ev = _events(hearth)
        kinds = [(e.get("type"), e.get("service"), e.get("state"), e.get("cause")) for e in ev]
        assert kinds[0] == ("identity", None, None, "boot"), kinds
        renewed = [i for i, k in enumerate(kinds) if k[0] == "identity" and i > 0]
        assert [ev[i]["cause"] for i in renewed] == ["platform_mounts"], kinds
        started = kinds.index(("service.state", "hermes", "starting", None))
        appeared = [ev[i]["target"] for i, e in enumerate(ev) if e.get("type") == "mount.changed"
                    and e.get("change") == "appeared" and i < renewed[0]]
        # Renewed in the pass that saw the first of them arrive (the
        # workspace, bound first; on a loaded machine the home's bind may
        # land before hearth reads the table, and then one pass sees both),
        # and before the home is seeded and the agent starts.
        assert "/workspace" in appeared and set(appeared) <= {"/workspace", "/root/.hermes"}, kinds
        assert renewed[0] < started, kinds

        # Seeded, the skills linked, all the agent's.
        assert (home / "config.yaml").exists()
        linked = [n for n in os.listdir(home / "skills") if os.path.islink(home / "skills" / n)]
        assert linked == ["greet"], os.listdir(home / "skills")
        assert os.readlink(home / "skills" / "greet") == "/opt/hermes-common-skills/greet"
        assert (os.stat(home).st_uid, os.stat(ws).st_uid) == (10000, 10000)
        env = os.stat(home / ".env")
        assert (env.st_uid, env.st_mode & 0o777) == (10000, 0o600), env
        key = [l.split("=", 1)[1] for l in (home / ".env").read_text().splitlines()
               if l.startswith("API_SERVER_KEY=")]
        assert len(key) == 1 and len(key[0]) == 48, key
        agent = svc(st, "hermes")
        assert agent["containment"] == ("full" if caps else "userns"), agent
        assert podman("exec", hearth, "stat", "-c", "%u:%g",
                      f"/proc/{agent['pid']}").stdout.split() == ["10000:10000"]
        r = podman("exec", hearth, "sh", "-c",
                   "printf 'state\\nenv API_SERVER_KEY\\n' | timeout 10 nc 127.0.0.1 9119")
        state, agent_key = r.stdout.splitlines()[:2]
        assert json.loads(state)["uid"] == 10000 and agent_key == key[0], r.stdout

        # The agent cannot reach envd; the web UI's port, for comparison,
        # it can.
        assert agent_connects(c, ("127.0.0.1", 49983), (address, 49983), ("127.0.0.1", 9000)) == \
            ["refused", "refused", "ok"]
        # Nor can the operator's root service, which is blind to hearth
        # and unable to kill it.
        probe = svc(st, "probe")
        assert probe["containment"] == ("full" if caps else "userns"), probe

        def results():
            got = [l.split("probe-result ", 1)[1] for l in
                   podman("logs", hearth).stdout.splitlines() if "probe-result " in l]
            return got if "done" in got else None
        got = wait_until(results, 60, "the probe's report")
        assert got[:4] == ["seen=no", "named=no", "kill=1", "uid=0"], got
        assert got[4].startswith("127.0.0.1:49983 ") and "refused" in got[4], got
        assert got[5].startswith(f"{address}:49983 ") and "refused" in got[5], got
        assert got[6].startswith("127.0.0.1:9000 ") and "HTTP/1." in got[6], got
        st = ctl("status")
        assert podman("exec", plat, "cat", f"/proc/{st['pid']}/comm").stdout.strip() == "hearth"
        for name in ("hermes", "web-ui", "probe"):
            s = svc(st, name)
            assert s["state"] == "running" and s["restarts"] == 0, s

        # The platform's side of the port.
        lp = ctl("egress")["local_ports"]
        assert lp["applied"] is True and lp["deny"] == ["tcp:49983"], lp
        from_platform = [_health_from(plat, a) for a in ("127.0.0.1", address)]
        if lp["services_only"]:
            assert all(r.startswith("HTTP/1.1 204") for r in from_platform), from_platform
        else:
            # This host: no cgroup2 in the container, the port closed to
            # every process of the namespace but hearth's own probes.
            assert lp["services_only_error"].startswith("no services cgroup"), lp
            assert all("refused" in r for r in from_platform), from_platform
        assert health(port)

        # E2B's SDK from the host, as it talks to CubeSandbox.
        url = f"http://127.0.0.1:{port}"
        out = drive(url, "cube", version="0.2.0")
        assert out["whoami"] == "hermes\n", out
        assert out["write"] == {"name": "cube.txt", "type": "file",
                                "path": "/root/.hermes/cube.txt"}, out
        assert out["read"] == "in the home" and out["info"] == "hermes", out
        assert (home / "cube.txt").read_text() == "in the home"
        assert os.stat(home / "cube.txt").st_uid == 10000

        # The platform kills hearth: nothing of its own is left.
        podman("exec", "-d", hearth, "hearthctl", "exec", "--", "sleep", f"86402.{mark}")

        def hearths():
            return [(p, a) for p, s, a in _ps(plat) if p not in platform_pids and not
                    s.startswith("Z")]
        # (The session's client, podman exec's hearthctl, is not hearth's.)
        live = wait_until(lambda: (lambda h: h if sum(a.startswith("sleep 8640") and mark in a
                                                      for _, a in h) == 3 else None)(hearths()),
                          15, "the probe's two sleeps and the session's")
        names = " ".join(a for _, a in live)
        for what in ("hearth", "hearth-envd", "hermes gateway run", "hermes-web-ui"):
            assert what in names, live
        podman("exec", plat, "kill", "-9", str(st["pid"]))
        wait_until(lambda: hearths() == [], 10, "none of hearth's processes left")
        assert {p for p, _, _ in _ps(plat)} == platform_pids
        assert podman("inspect", plat, "--format", "{{.State.Running}}").stdout.strip() == "true"
    finally:
        podman("rm", "-f", "-t", "0", hearth, check=False)
        podman("rm", "-f", "-t", "0", plat, check=False)
