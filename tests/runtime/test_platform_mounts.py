"""The shipped config's platform mounts under podman with runc: the image
started with no home or workspace volume waits for them, and they are
bound into the running container's mount namespace from outside, as
CubeSandbox's agent does after a snapshot restore."""
import os
import subprocess
import sys
import time

from conftest import wait_until

# From the host's own mount namespace: a copy of the directory's mount
# (open_tree), then into the container's namespace (setns) and onto the
# target (move_mount). Linux 5.2+.
MOVE_IN = r'''
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
src, pid, target = sys.argv[1], int(sys.argv[2]), sys.argv[3]
fd = libc.syscall(428, -100, src.encode(), 1 | 0o2000000 | 0x8000)  # open_tree, CLONE|CLOEXEC|RECURSIVE
if fd < 0:
    sys.exit("open_tree: " + os.strerror(ctypes.get_errno()))
ns = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY)
if libc.setns(ns, 0x00020000) < 0:
    sys.exit("setns: " + os.strerror(ctypes.get_errno()))
if libc.syscall(429, fd, b"", -100, target.encode(), 4) < 0:  # move_mount, F_EMPTY_PATH
    sys.exit("move_mount: " + os.strerror(ctypes.get_errno()))
'''


def _status(c):
    return c.ctl("status")


def _svc(st, name):
    return next(s for s in st["services"] if s["name"] == name)


def _nsenter(pid, *cmd):
    """cmd in the container's mount namespace (its root, so the image's
    busybox), the way CubeSandbox's agent enters it."""
    r = subprocess.run(["nsenter", "-t", str(pid), "-m", *cmd], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, f"{cmd}: {r.stdout}{r.stderr}"


def test_home_and_workspace_bound_in_after_start(run, tmp_path):
    # A directory every container of the platform's has (CubeSandbox's
    # /.container_rw), holding the host directories to bind later.
    share = tmp_path / "share"
    home, ws = share / "hostdir-0", share / "hostdir-1"
    home.mkdir(parents=True)
    ws.mkdir()
    c = run(caps=["NET_ADMIN"], args=["-v", f"{share}:/.container_rw"])
    st = wait_until(lambda: (lambda s: s if s["mounts"]["waiting"] == 2 else None)(_status(c)), 30,
                    "waiting for the platform's mounts")
    assert st["mounts"]["waiting_for"] == ["/root/.hermes", "/workspace"]
    assert st["phases"]["mounts"] is False and st["phases"]["skills"] is False
    time.sleep(1)
    st = _status(c)
    for name in ("hermes", "web-ui"):
        s = _svc(st, name)
        assert s["state"] == "waiting" and not s["pid"], s
    assert _svc(st, "hermes")["waiting_for"] == "mounts"
    out = c.exec("hearthctl", "status").stdout
    assert "mounts: waiting for the platform to mount /root/.hermes" in out, out
    # Nothing seeded into the image's own home.
    assert c.exec("test", "-e", "/root/.hermes/config.yaml", check=False).returncode != 0

    pid = int(c.inspect("{{.State.Pid}}"))
    # The workspace as CubeSandbox binds it: from inside the namespace.
    _nsenter(pid, "mount", "--bind", "/.container_rw/hostdir-1", "/workspace")
    st = wait_until(lambda: (lambda s: s if s["mounts"]["waiting"] == 1 else None)(_status(c)), 15,
                    "the workspace seen")
    assert st["mounts"]["waiting_for"] == ["/root/.hermes"]
    assert _svc(st, "hermes")["state"] == "waiting"
    # The home from the host's own namespace.
    r = subprocess.run([sys.executable, "-c", MOVE_IN, str(home), str(pid), "/root/.hermes"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    wait_until(lambda: _svc(_status(c), "web-ui")["state"] == "running", 60,
               "hermes and web-ui running")
    st = _status(c)
    assert _svc(st, "hermes")["state"] == "running" and st["mounts"]["waiting_for"] == []
    assert st["phases"]["mounts"] is True and st["phases"]["skills"] is True
    # Seeded and the skills linked into the host's directory, the agent's.
    assert (home / "config.yaml").exists()
    assert os.readlink(home / "skills" / "hello") == "/opt/hermes-common-skills/hello"
    assert (os.stat(home).st_uid, os.stat(ws).st_uid) == (10000, 10000)
    assert (os.stat(home / "config.yaml").st_uid, os.stat(home / "logs" / "hermes.out").st_uid) == \
        (10000, 10000)
    ms = {m["target"]: m for m in c.ctl("mounts")["mounts"]}
    for t, d in (("/root/.hermes", "hostdir-0"), ("/workspace", "hostdir-1")):
        assert ms[t]["state"] == "mounted" and ms[t]["changes"] == 1, ms[t]
        assert ms[t]["last_change"] == "appeared" and ms[t]["mounted_from"].endswith(d), ms[t]

    # The platform takes the home away: the agent (the main service) is
    # stopped and waits; the container goes on.
    first = _svc(st, "hermes")["pid"]
    _nsenter(pid, "umount", "-l", "/root/.hermes")
    st = wait_until(lambda: (lambda s: s if _svc(s, "hermes")["state"] == "waiting" and
                             _svc(s, "web-ui")["state"] == "waiting" else None)(_status(c)), 30,
                    "hermes and web-ui stopped")
    assert st["mounts"]["waiting_for"] == ["/root/.hermes"] and _svc(st, "hermes")["restarts"] == 0
    assert c.inspect("{{.State.Running}}") == "true"
    # Back: running again.
    r = subprocess.run([sys.executable, "-c", MOVE_IN, str(home), str(pid), "/root/.hermes"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    st = wait_until(lambda: (lambda s: s if _svc(s, "hermes")["state"] == "running" else None)(
        _status(c)), 60, "hermes running again")
    assert _svc(st, "hermes")["pid"] != first
    m = {m["target"]: m for m in c.ctl("mounts")["mounts"]}["/root/.hermes"]
    assert m["changes"] == 3 and m["last_change"] == "appeared"
