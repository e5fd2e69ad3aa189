"""The OCI image (make oci) under a real container runtime: podman with
runc. hearth is the image's entrypoint and runs in container mode."""
import json
import os
import random
import signal
import socket
import subprocess
import threading
import time

import pytest

from conftest import HEARTHCTL, VERSION, podman, wait_until

CONTROL = {"listen": ["unix:/run/hearth/control.sock"]}


def test_image_loads_with_entrypoint_and_labels(image):
    cfg = json.loads(podman("image", "inspect", image, "--format", "{{json .Config}}").stdout)
    # Forced: beside another init (a shared pid namespace) hearth is
    # not PID 1 and its parent may be that init, in sight.
    assert cfg["Entrypoint"] == ["/sbin/hearth", "--mode", "container"]
    labels = cfg["Labels"]
    assert labels["org.opencontainers.image.version"] == VERSION
    assert labels["org.opencontainers.image.title"] == "hearth-hermes"
    assert labels["org.opencontainers.image.source"]
    assert cfg.get("StopSignal") == "SIGTERM"


def _volumes(tmp_path):
    """The home and workspace the shipped config waits for (platform
    mounts): fresh host directories, root's, as -v volumes."""
    home, ws = tmp_path / "home", tmp_path / "workspace"
    home.mkdir()
    ws.mkdir()
    return ["-v", f"{home}:/root/.hermes", "-v", f"{ws}:/workspace"]


def test_hermes_config_runs_and_applies_egress_with_net_admin(run, tmp_path):
    # podman's default capabilities and NET_ADMIN: no CAP_SYS_ADMIN, so
    # the agent is contained inside a user namespace of its own.
    c = run(caps=["NET_ADMIN"], args=_volumes(tmp_path))
    wait_until(lambda: c.service("web-ui")["state"] == "running", 30, "web-ui running")
    st = c.ctl("status")
    assert st["mode"] == "container" and st["pid"] == 1
    assert c.service("hermes")["state"] == "running"
    assert c.service("hermes")["containment"] == "userns"
    # The home was seeded from the image's template, into the volume.
    assert c.exec("cat", "/root/.hermes/config.yaml").stdout.strip()
    assert (tmp_path / "home" / "config.yaml").exists()
    ms = {m["target"]: m for m in c.ctl("mounts")["mounts"]}
    for t in ("/root/.hermes", "/workspace"):
        assert ms[t]["type"] == "platform" and ms[t]["state"] == "mounted", ms[t]
        assert ms[t]["already"] is True and ms[t]["changes"] == 0
    # The agent is the image's hermes (uid 10000): its processes, the
    # volumes (given to it by the platform mounts' owner), what seeding
    # copied (seed[].user); /root lets it through but not list.
    for name in ("hermes", "web-ui"):
        pid = c.service(name)["pid"]
        assert c.exec("stat", "-c", "%u:%g", f"/proc/{pid}").stdout.split() == ["10000:10000"], name
    owners = c.exec("stat", "-c", "%u:%g", "/root/.hermes", "/workspace",
                    "/root/.hermes/config.yaml", "/root/.hermes/logs/hermes.out").stdout.split()
    assert owners == ["10000:10000"] * 4, owners
    assert c.exec("stat", "-c", "%a:%u", "/root").stdout.strip() == "711:0"
    eg = c.ctl("egress")
    assert eg["applied"] is True, eg
    assert eg["layers"]["inet"] is True
    assert eg["policy"]["allowOut"] == ["10.10.0.0/16"]
    # The ruleset is in the container's network namespace, and matches.
    chk = c.ctl("egress", "check")
    assert chk["applied"] is True and not chk.get("error"), chk


def test_without_net_admin_egress_fails_closed_and_says_why(run, tmp_path):
    c = run(args=_volumes(tmp_path))
    wait_until(lambda: "services after egress held" in c.logs(), 15, "the egress error")
    st = wait_until(lambda: (lambda s: s if s["phases"]["mounts"] and s["phases"]["skills"] else None)(
        c.ctl("status")), 15, "mounts and skills reached")
    assert st["phases"]["egress"] is False
    eg = c.ctl("egress")
    assert eg["applied"] is False
    assert "CAP_NET_ADMIN" in eg["error"] and "--cap-add NET_ADMIN" in eg["error"]
    assert "CAP_NET_ADMIN" in c.logs()
    # Everything else it waits for is there: only egress holds them.
    for name in ("hermes", "web-ui"):
        s = c.service(name)
        assert s["state"] == "waiting" and not s["pid"], s
    assert c.service("hermes")["waiting_for"] == "egress"
    assert "service hermes: waiting -> starting" not in c.logs()


# What the agent finds in its namespaces, into /workspace/report: its
# maps and user namespace, whether any process in its /proc is hearth,
# what /proc/1 is (hearth in the container's pid namespace), a kill -9 of
# 1 and of every process it may signal, a write to the root.
AGENT_PROBE = (
    "{ echo uid_map=$(cat /proc/self/uid_map); echo gid_map=$(cat /proc/self/gid_map); "
    "echo userns=$(readlink /proc/self/ns/user); "
    "cat /proc/[0-9]*/comm 2>/dev/null | grep -qx hearth && echo hearth_seen=yes || "
    "echo hearth_seen=no; "
    "echo comm1=$(cat /proc/1/comm 2>/dev/null); "
    "kill -9 1; kill -9 -1; "
    "touch /hearth-rt-probe 2>/dev/null && echo root=rw || echo root=ro; "
    "echo procsys=$(awk '$5 == \"/proc/sys\" {print substr($6, 1, 2)}' /proc/self/mountinfo "
    "| tail -n 1); "
    "echo done; } > /workspace/report.tmp 2>/dev/null; mv /workspace/report.tmp /workspace/report; "
    "exec sleep 1000")


def _report(c):
    wait_until(lambda: c.exec("test", "-s", "/workspace/report", check=False).returncode == 0,
               15, "the agent's report")
    out = c.exec("cat", "/workspace/report").stdout
    return dict(l.split("=", 1) for l in out.splitlines() if "=" in l)


def test_without_cap_sys_admin_the_agent_is_contained_in_a_user_namespace(run):
    """podman's defaults (no CAP_SYS_ADMIN, its seccomp profile, /proc
    masked): the contained agent runs, in a user namespace of its own
    mapped uid for uid, with the container's /proc (the kernel refuses a
    fresh one under the masks) in which hearth's entry is empty; it can
    neither read hearth there nor kill it, and its root is read-only.
    An exec session gets a user namespace of its own the same way."""
    c = run({"control": CONTROL, "services": [
        {"name": "agent", "writable": ["/workspace"], "argv": ["sh", "-c", AGENT_PROBE]}]})
    r = _report(c)
    assert " ".join(r["uid_map"].split()) == "0 0 4294967295", r
    assert " ".join(r["gid_map"].split()) == "0 0 4294967295", r
    hearth_userns = c.exec("readlink", "/proc/self/ns/user").stdout.strip()  # hearth's
    assert r["userns"].startswith("user:[") and r["userns"] != hearth_userns, r
    assert r["hearth_seen"] == "no" and r["comm1"] == "", r
    assert r["root"] == "ro" and r["procsys"] == "ro", r
    st = c.ctl("status")
    agent = [s for s in st["services"] if s["name"] == "agent"][0]
    assert st["pid"] == 1 and agent["state"] == "running", agent
    assert agent["containment"] == "userns", agent
    assert "keeps the container's /proc" in agent["containment_reason"], agent
    # hearth is still there, and so is the agent (its kill -1 reached only
    # its own namespace, whose init ignores it).
    assert c.exec("cat", "/proc/1/comm").stdout.strip() == "hearth"
    assert c.service("agent")["restarts"] == 0
    out = c.exec("hearthctl", "exec", "--", "sh", "-c",
                 "cat /proc/self/uid_map; readlink /proc/self/ns/user").stdout.split("\n")
    assert " ".join(out[0].split()) == "0 0 4294967295", out
    assert out[1] not in (hearth_userns, r["userns"]), out


def test_with_cap_sys_admin_containment_is_made_without_a_user_namespace(run):
    c = run({"control": CONTROL, "services": [
        {"name": "agent", "writable": ["/workspace"], "argv": ["sh", "-c", AGENT_PROBE]}]},
        caps=["SYS_ADMIN"])
    r = _report(c)
    hearth_userns = c.exec("readlink", "/proc/self/ns/user").stdout.strip()  # hearth's
    assert r["userns"] == hearth_userns, r
    # Its own /proc: 1 is its reaper there.
    assert r["hearth_seen"] == "no" and r["comm1"] == "hearth-reaper", r
    assert r["root"] == "ro", r
    agent = c.service("agent")
    assert agent["containment"] == "full" and "containment_reason" not in agent, agent


def test_with_proc_unmasked_the_agent_gets_a_proc_of_its_own(run):
    """The runtime told not to mask /proc (podman --security-opt
    unmask=/proc/*): without CAP_SYS_ADMIN the kernel then mounts the
    agent a fresh /proc in its user namespace, and hearth masks and
    makes read-only there what the runtime would have."""
    c = run({"control": CONTROL, "services": [
        {"name": "agent", "writable": ["/workspace"], "argv": ["sh", "-c", AGENT_PROBE]}]},
        args=["--security-opt", "unmask=/proc/*"])
    r = _report(c)
    assert r["comm1"] == "hearth-reaper" and r["hearth_seen"] == "no", r
    assert r["procsys"] == "ro" and r["root"] == "ro", r
    assert " ".join(r["uid_map"].split()) == "0 0 4294967295", r
    agent = c.service("agent")
    assert agent["containment"] == "userns" and "/proc" not in agent["containment_reason"], agent
    # The container's own /proc is unmasked: hearth's view, not the agent's.
    assert c.exec("awk", '$5 == "/proc/sys"', "/proc/self/mountinfo").stdout.strip() == ""


def _seccomp_without_userns(path):
    """podman's default profile, refusing what docker's refuses without
    CAP_SYS_ADMIN: clone and unshare with CLONE_NEWUSER (EPERM), clone3
    at all (ENOSYS: its flags are out of a filter's reach)."""
    default = "/usr/share/containers/seccomp.json"
    assert os.path.exists(default), f"{default} missing (containers-common, with podman)"
    prof = json.load(open(default))
    newuser = 0x10000000
    for rule in prof["syscalls"]:
        rule["names"] = [n for n in rule["names"] if n not in ("clone", "clone3", "unshare")]
    prof["syscalls"] = [r for r in prof["syscalls"] if r["names"]]
    for name in ("clone", "unshare"):
        prof["syscalls"].append({"names": [name], "action": "SCMP_ACT_ALLOW", "args": [
            {"index": 0, "value": newuser, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}]})
        prof["syscalls"].append({"names": [name], "action": "SCMP_ACT_ERRNO", "errnoRet": 1,
                                 "args": [{"index": 0, "value": newuser, "valueTwo": newuser,
                                           "op": "SCMP_CMP_MASKED_EQ"}]})
    prof["syscalls"].append({"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38})
    path.write_text(json.dumps(prof))
    return str(path)


def test_a_seccomp_profile_refusing_user_namespaces_starts_nothing_contained(run, tmp_path):
    """No CAP_SYS_ADMIN and a seccomp profile that refuses user
    namespaces: the contained service fails, status shows containment
    none with the reason naming the setting, an exec session is refused
    with it, and a service declared uncontained runs."""
    prof = _seccomp_without_userns(tmp_path / "seccomp.json")
    c = run({"control": CONTROL, "services": [
        {"name": "free", "isolation": False, "argv": ["sleep", "1000"]},
        {"name": "agent", "argv": ["sleep", "1000"]}]},
        args=["--security-opt", f"seccomp={prof}"])
    agent = wait_until(lambda: (lambda s: s if s["state"] == "failed" else None)(
        c.service("agent")), 15, "the agent failed")
    assert agent["containment"] == "none" and not agent["pid"], agent
    for text in (agent["containment_reason"], agent["error"]):
        assert "no CAP_SYS_ADMIN and no user namespace" in text, text
        assert "seccomp profile refuses CLONE_NEWUSER" in text, text
        assert "--cap-add SYS_ADMIN" in text, text
    assert "seccomp profile refuses CLONE_NEWUSER" in c.logs()
    free = c.service("free")
    assert free["state"] == "running" and free["containment"] == "none", free
    assert free["containment_reason"] == "isolation off"
    r = c.exec("hearthctl", "exec", "--", "true", check=False)
    assert r.returncode != 0 and "seccomp profile refuses CLONE_NEWUSER" in r.stderr, r.stderr


def test_service_output_reaches_podman_logs(run):
    c = run({"control": CONTROL, "services": [
        {"name": "talk", "argv": ["sh", "-c", "echo hello-out; echo hello-err >&2; exec sleep 1000"]}]})
    wait_until(lambda: "talk: hello-out" in c.logs() and "talk: hello-err" in c.logs(), 15,
               "both lines in podman logs")
    # The same lines are in hearth's own ring too.
    lines = [l["line"] for l in c.ctl("logs", "talk")["lines"]]
    assert "hello-out" in lines and "hello-err" in lines
    # Separated by stream: stdout lines on the container's stdout.
    r = podman("logs", c.cid)
    assert "talk: hello-out" in r.stdout and "talk: hello-err" in r.stderr


def test_orphans_are_reaped(run):
    # Each subshell exits at once, leaving its sleep to PID 1: hearth,
    # for a service in hearth's own pid namespace (a contained one's
    # orphans are its reaper's, tests/integration/test_pidns.py).
    c = run({"control": CONTROL, "services": [
        {"name": "spawner", "isolation": False,
         "argv": ["sh", "-c", "(sleep 0.3 &); (sleep 0.3 &); (sleep 0.3 &); exec sleep 1000"]}]})
    wait_until(lambda: c.ctl("status")["orphans_reaped"] >= 3, 15, "three orphans reaped")
    ps = c.exec("ps", "-o", "pid,stat,args").stdout
    assert not [l for l in ps.splitlines()[1:] if l.split()[1].startswith("Z")], ps


def test_podman_stop_is_orderly_with_the_main_status(run):
    c = run({"control": CONTROL, "services": [
        {"name": "main", "main": True,
         "argv": ["sh", "-c", "trap 'echo main-got-term; exit 7' TERM; echo up; "
                              "while :; do sleep 1 & wait $!; done"],
         "stop": {"signal": "SIGTERM", "timeout_ms": 5000}},
        {"name": "side", "argv": ["sleep", "1000"]}]})
    wait_until(lambda: "main: up" in c.logs(), 15, "main up")
    # 30 s before podman would send SIGKILL: an exit status of 7 (not 137)
    # shows hearth stopped everything and exited on its own.
    podman("stop", "-t", "30", c.cid, timeout=60)
    assert c.inspect("{{.State.ExitCode}}") == "7"
    logs = c.logs()
    assert "main: main-got-term" in logs
    assert "service side: stopping -> stopped" in logs
    assert "exiting with status 7" in logs


def test_killed_service_is_restarted(run):
    c = run({"control": CONTROL, "services": [
        {"name": "worker", "argv": ["sleep", "1000"], "restart": "always",
         "backoff": {"initial_ms": 100, "max_ms": 1000}}]})
    first = wait_until(lambda: (lambda s: s if s["state"] == "running" else None)(c.service("worker")),
                       15, "worker running")
    # From inside the container (its pid namespace)...
    c.exec("kill", "-9", str(first["pid"]))
    second = wait_until(lambda: (lambda s: s if s["state"] == "running" and s["restarts"] == 1
                                 else None)(c.service("worker")), 15, "first restart")
    assert second["pid"] != first["pid"]
    assert "SIGKILL" in c.logs()
    # ...and from the host, by the host's pid of the service.
    top = podman("top", c.cid, "pid", "hpid").stdout.splitlines()[1:]
    hpid = [l.split()[1] for l in top if l.split()[0] == str(second["pid"])]
    assert hpid, top
    os.kill(int(hpid[0]), signal.SIGKILL)
    third = wait_until(lambda: (lambda s: s if s["state"] == "running" and s["restarts"] == 2
                                else None)(c.service("worker")), 15, "second restart")
    assert third["pid"] not in (first["pid"], second["pid"])


def test_bad_config_exits_1_with_the_error_in_the_log(run):
    c = run({"services": [{"name": "x", "argv": ["true"], "restart": "sometimes"}]})
    r = podman("wait", c.cid, timeout=60)
    assert r.stdout.strip() == "1"
    assert "services[0].restart: expected one of always, on-failure, never" in c.logs()


def test_vsock_listener_binds_the_hosts_vsock_space(run):
    """AF_VSOCK is not namespaced: the port a container's hearth listens
    on is taken in the host's (here this machine's) vsock space, whatever
    the container's network namespace."""
    try:
        probe = socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)
    except OSError as e:
        pytest.skip(f"no AF_VSOCK on this machine: {e}")
    probe.close()
    port = random.randrange(40000, 60000)
    c = run({"control": {"listen": ["unix:/run/hearth/control.sock", f"vsock:{port}"]},
             "services": [{"name": "idle", "argv": ["sleep", "1000"]}]})
    wait_until(lambda: f"control listening on vsock:{port}" in c.logs(), 15, "the vsock listener")
    s = socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)
    try:
        with pytest.raises(OSError) as e:
            s.bind((socket.VMADDR_CID_ANY, port))
        assert e.value.errno == 98  # EADDRINUSE
    finally:
        s.close()
    podman("rm", "-f", "-t", "0", c.cid)
    s = socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                s.bind((socket.VMADDR_CID_ANY, port))
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
    finally:
        s.close()


class FakeHybridVsock:
    """The host side of Firecracker's and Cloud Hypervisor's hybrid vsock:
    a unix socket that takes "CONNECT PORT\\n", answers "OK HOSTPORT\\n"
    and then carries the stream to the guest's port. Here the "guest port"
    1025 is hearth's control socket, mounted out of the container."""

    def __init__(self, path, target, port=1025):
        self.path, self.target, self.port = path, target, port
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(path)
        self.srv.listen(4)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(c,), daemon=True).start()

    def _one(self, c):
        line = b""
        while not line.endswith(b"\n") and len(line) < 64:
            b = c.recv(1)
            if not b:
                c.close()
                return
            line += b
        if line != f"CONNECT {self.port}\n".encode():
            c.close()  # what the VMM does when nothing listens there
            return
        g = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        g.connect(self.target)
        c.sendall(b"OK 1073741824\n")

        def pump(a, b):
            try:
                while True:
                    d = a.recv(65536)
                    if not d:
                        break
                    b.sendall(d)
            except OSError:
                pass
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        threading.Thread(target=pump, args=(g, c), daemon=True).start()
        pump(c, g)

    def close(self):
        self.srv.close()


def test_hearthctl_hybrid_vsock_reaches_the_container(run, tmp_path):
    """hearthctl's hvsock: transport against the hybrid-vsock handshake,
    ending at the container's hearth through its mounted socket directory
    (a peer outside the container, as a host is)."""
    rundir = tmp_path / "run-hearth"
    rundir.mkdir()
    c = run({"control": CONTROL, "services": [{"name": "idle", "argv": ["sleep", "1000"]}]},
            args=["-v", f"{rundir}:/run/hearth"])
    sock = rundir / "control.sock"
    wait_until(lambda: sock.exists(), 15, "the control socket on the host")
    vmm = FakeHybridVsock(str(tmp_path / "vsock.sock"), str(sock))
    try:
        r = subprocess.run([HEARTHCTL, "--connect", f"hvsock:{tmp_path}/vsock.sock:1025", "--json",
                            "status"], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        st = json.loads(r.stdout)
        assert st["mode"] == "container" and st["hostname"] == c.cid[:12]
        # A port nothing listens on: the VMM hangs up, hearthctl says so.
        r = subprocess.run([HEARTHCTL, "--connect", f"hvsock:{tmp_path}/vsock.sock:1026", "ping"],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 2
        assert "closed during handshake" in r.stderr and "1026" in r.stderr
    finally:
        vmm.close()
