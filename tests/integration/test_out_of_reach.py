"""The control plane and PID 1 out of a service's reach: the unix peer
check fails closed (a peer that exited before it could be identified is
refused), a peer that shares a service's namespace is refused even after
leaving the service's cgroup, a service's `kill -TERM 1` is ignored while
the host's still stops hearth, and hearth is not dumpable."""
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

import pytest

from conftest import cgroup2_mount


def cgroup_dir(pid):
    """The cgroup2 directory of pid, as this test sees it."""
    mnt = cgroup2_mount()
    if not mnt:
        pytest.skip("no cgroup2 on this host")
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            if line.startswith("0::") and line[3:].strip() != "/":
                return mnt + line[3:].strip()
    raise AssertionError(f"pid {pid} is in the root cgroup: start hearth with cgroup=True")


def set_frozen(path, on):
    with open(os.path.join(path, "cgroup.freeze"), "w") as f:
        f.write("1" if on else "0")
    want = "frozen 1" if on else "frozen 0"
    for _ in range(500):
        with open(os.path.join(path, "cgroup.events")) as f:
            if want in f.read():
                return
        time.sleep(0.01)
    raise AssertionError(f"{path} not {want}")


def test_peer_that_exited_before_it_was_identified_is_refused(hearth):
    """The reaped-peer race, made deterministic: hearth is frozen, a
    client inside its pid namespace (so its pid means something to
    hearth) connects, writes services.stop and exits, and is reaped;
    then hearth thaws and accepts the connection. Its /proc entries are
    gone: the check used to let such a peer through."""
    if not shutil.which("nsenter"):
        pytest.skip("nsenter (util-linux) is not installed")
    svc = {"name": "agent", "argv": ["sleep", "1000"]}
    hearth.start(hearth.config(services=[svc]), cgroup=True)
    hearth.wait_for(lambda: hearth.service("agent")["state"] == "running", what="agent running")
    cg = cgroup_dir(hearth.pid)
    script = (
        "import socket\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        f"s.connect({hearth.sock!r})\n"
        "s.sendall(b'{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"services.stop\","
        "\"params\":{\"name\":\"agent\"}}\\n')\n")
    set_frozen(cg, True)
    try:
        r = subprocess.run(["nsenter", "-t", str(hearth.pid), "-p", "--", sys.executable, "-c",
                            script], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
    finally:
        set_frozen(cg, False)
    hearth.wait_for(lambda: "refused control client" in hearth.log_text(), what="refusal")
    assert "unable to identify" in hearth.log_text()
    assert hearth.service("agent")["state"] == "running"
    # A root client of the host is still served.
    assert hearth.rpc("ping") == {}


def test_peer_in_a_service_mount_namespace_is_refused_outside_its_cgroup(hearth, tmp_path):
    """The agent moves itself out of its leaf into hearth's own cgroup
    (root can write cgroup.procs) and connects: the cgroup layer alone
    would let it through, its mount namespace (a service's, not
    hearth's) does not."""
    if not shutil.which("unshare"):
        pytest.skip("unshare is not installed")
    go, out = tmp_path / "go", tmp_path / "peer.txt"
    script = (
        "import os, socket, time\n"
        f"while not os.path.exists({str(go)!r}): time.sleep(0.02)\n"
        f"open(open({str(go)!r}).read().strip(), 'w').write(str(os.getpid()))\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        f"s.connect({hearth.sock!r})\n"
        "try:\n"
        "    s.sendall(b'{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\\n')\n"
        "except OSError:\n"
        "    pass\n"
        f"open({str(out)!r}, 'wb').write(s.recv(4096))\n"
        "time.sleep(1000)\n")
    # A service trusted with what the attack needs (the containment layers
    # would stop it earlier: they are tested in test_contain.py); this test
    # is about the peer check holding when they are not there.
    svc = {"name": "agent", "argv": ["unshare", "-m", sys.executable, "-c", script],
           "isolation": False, "seccomp": "off", "caps_keep": ["SYS_ADMIN", "DAC_OVERRIDE"]}
    hearth.start(hearth.config(services=[svc]), cgroup=True)
    procs = os.path.join(cgroup_dir(hearth.pid), "cgroup.procs")
    go.write_text(procs)
    hearth.wait_for(lambda: out.exists() and out.stat().st_size > 0, what="peer result")
    reply = json.loads(out.read_bytes().split(b"\n")[0])
    assert reply["error"]["message"] == "peer refused"
    assert "mount namespace of service agent" in hearth.log_text()
    assert hearth.rpc("ping") == {}


def test_kill_term_1_from_a_service_is_ignored_and_the_hosts_is_not(hearth, tmp_path):
    out = tmp_path / "sent"
    # A contained service's pid 1 is its own reaper (test_pidns.py): only
    # one in hearth's pid namespace (isolation off) reaches hearth, and is
    # what this layer is for.
    svc = {"name": "agent", "restart": "never", "isolation": False,
           "argv": ["/bin/sh", "-c", f"kill -TERM 1; kill -INT 1; kill -PWR 1; echo $? > {out}; "
                    "exec sleep 1000"]}
    hearth.start(hearth.config(services=[svc]))
    hearth.wait_for(lambda: out.exists() and out.read_text().strip() == "0", what="signals sent")
    hearth.wait_for(lambda: "SIGPWR from pid" in hearth.log_text(), what="SIGPWR logged")
    log = hearth.log_text()
    for name in ("SIGTERM", "SIGINT", "SIGPWR"):
        assert f"{name} from pid" in log and "runs inside a service cgroup" in log, log
    assert hearth.proc.poll() is None
    assert hearth.rpc("status")["phase"] == "running"
    c = hearth.client()
    c.result("events.subscribe", {"since": 0})
    seen = set()
    deadline = time.monotonic() + 5
    while len(seen) < 3 and time.monotonic() < deadline:
        msg = c.read_line()
        p = msg.get("params", {})
        if msg.get("method") == "event" and p.get("type") == "signal.ignored":
            seen.add(p["signal"])
    c.close()
    assert seen == {"SIGTERM", "SIGINT", "SIGPWR"}
    assert hearth.service("agent")["state"] == "running"
    # The host (outside the pid namespace: sender pid 0) still stops it.
    hearth.signal(signal.SIGTERM)
    assert hearth.wait_exit() is not None
    assert "shutdown" in hearth.log_text().lower()


def test_hearth_is_not_dumpable(hearth, tmp_path):
    """Run unprivileged (supervisor mode) so the proof is visible from
    outside: a non-dumpable process's /proc files belong to root, not to
    the process's own user."""
    if not shutil.which("setpriv"):
        pytest.skip("setpriv (util-linux) is not installed")
    os.chmod(hearth.sockdir, 0o777)
    os.chmod(tmp_path, 0o777)
    # Beside the socket: pytest's tmp_path sits below directories only
    # root may enter, so uid 65534 could not read a config there.
    cfg = pathlib.Path(hearth.sockdir) / "hearth.json"
    cfg.write_text(json.dumps(hearth.config()))
    os.chmod(cfg, 0o644)
    proc = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                             hearth_bin(), "-c", str(cfg), "--mode", "supervisor"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(500):
            if os.path.exists(hearth.sock):
                break
            time.sleep(0.01)
        # hearth itself is running (not setpriv, which makes itself
        # non-dumpable when it changes uid, before the exec).
        assert os.path.exists(hearth.sock), "hearth never opened its socket"
        assert os.path.realpath(f"/proc/{proc.pid}/exe") == os.path.realpath(hearth_bin())
        with open(f"/proc/{proc.pid}/status") as f:
            uid_line = [l for l in f if l.startswith("Uid:")][0]
        assert uid_line.split()[1] == "65534"
        assert os.stat(f"/proc/{proc.pid}/environ").st_uid == 0
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)


def hearth_bin():
    from conftest import HEARTH
    return HEARTH


def test_without_cgroup2_the_unix_listener_warns_that_only_uid_is_checked(hearth):
    mnt = cgroup2_mount()
    if not mnt:
        pytest.skip("no cgroup2 on this host")
    cfg = hearth.dir / "hearth.json"
    cfg.write_text(json.dumps(hearth.config()))
    hearth.log = open(hearth.log_path, "wb")
    # Every cgroup2 mount is taken away inside hearth's own mount namespace.
    script = ('for m in $(awk \'$3 == "cgroup2" {print $2}\' /proc/self/mounts); do '
              'umount -l "$m" || exit 1; done; exec "$1" -c "$2" --log debug')
    hearth.proc = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount", "--net", "--uts", "--ipc", "--mount-proc",
         "sh", "-c", script, "sh", hearth_bin(), str(cfg)],
        stdout=hearth.log, stderr=subprocess.STDOUT)
    hearth.wait_ready()
    log = hearth.log_text()
    assert log.count("no cgroup2: unix peers are checked by uid") == 1, log
    assert hearth.rpc("ping") == {}
