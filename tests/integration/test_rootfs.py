"""A service's root is read-only, its /tmp and /dev/shm are its own.

Each contained service sees the image read-only: it cannot replace a
program hearth or another service runs, nor leave anything in the image.
It writes only where the host said: the writable mounts hearth made
(`mounts`, `host_mounts`), its `writable` paths, and a private, capped
tmpfs on /tmp and on /dev/shm that no other service sees. All services
together live under one cgroup whose memory.max leaves a reserve to hearth
and the kernel (tests/vm/test_limits.py fills it on a real guest)."""
import json
import os
import shutil
import subprocess
import tempfile

import pytest

PY = "/usr/bin/python3"
MIB = 1 << 20

# Writes what the service sees as JSON to OUT (argv[1]).
REPORT = r'''
import errno, json, os, sys
out, me = sys.argv[1], sys.argv[2]
r = {}
def create(path):
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, me.encode())
        os.close(fd)
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]
r["tmp_create"] = create("/tmp/mine")
r["tmp_list"] = sorted(os.listdir("/tmp"))
r["shm_create"] = create("/dev/shm/mine")
r["shm_list"] = sorted(os.listdir("/dev/shm"))
v = os.statvfs("/tmp"); r["tmp_size"] = v.f_blocks * v.f_frsize
v = os.statvfs("/dev/shm"); r["shm_size"] = v.f_blocks * v.f_frsize
r["usr_create"] = create("/usr/hearth-rootfs-probe")
r["etc_write"] = create("/etc/hearth-rootfs-probe")
for k, p in json.loads(sys.argv[3]).items():
    r[k] = create(p)
if len(sys.argv) > 4:  # fill /tmp past its size
    try:
        with open("/tmp/big", "wb") as f:
            for _ in range(int(sys.argv[4])):
                f.write(b"x" * (1 << 20))
                f.flush()
        r["fill"] = "ok"
    except OSError as e:
        r["fill"] = errno.errorcode[e.errno]
    os.unlink("/tmp/big")
with open(out + ".tmp", "w") as f:
    json.dump(r, f)
os.rename(out + ".tmp", out)
os.execvp("sleep", ["sleep", "1000"])
'''


@pytest.fixture
def outside():
    """A directory on the host's root outside /tmp (so not below the
    private tmpfs), removed afterwards."""
    d = tempfile.mkdtemp(prefix="hearth-rootfs-", dir="/var/tmp")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _report(h, path):
    h.wait_for(lambda: path.exists(), what=str(path))
    return json.loads(path.read_text())


def test_read_only_root_private_tmp_and_writable_paths(hearth, tmp_path, outside):
    script = tmp_path / "report.py"
    script.write_text(REPORT)
    mnt, own, other = os.path.join(outside, "m"), os.path.join(outside, "own"), \
        os.path.join(outside, "other")
    for d in (mnt, own, other):
        os.mkdir(d)
    nested = os.path.join(own, "m")  # a writable mount inside a's writable directory
    os.mkdir(nested)
    tries = {"mount_create": mnt + "/f", "own_create": own + "/f", "other_create": other + "/f",
             "nested_create": nested + "/f"}
    svc = lambda name, extra: {  # noqa: E731
        "name": name, "restart": "never", "after": ["mounts"],
        "argv": [PY, str(script), str(tmp_path / f"{name}.json"), name, json.dumps(tries),
                 *extra], **({"limits": {"tmp_bytes": 8 * MIB, "shm_bytes": 4 * MIB}}
                             if name == "a" else {})}
    a, b = svc("a", ["9"]), svc("b", [])
    # a may write its own directory (and the test's); b only the test's.
    a["writable"], b["writable"] = [str(tmp_path), own], [str(tmp_path)]
    hearth.start(hearth.config(
        mounts=[{"source": "tmpfs", "target": mnt, "type": "tmpfs"},
                {"source": "tmpfs", "target": nested, "type": "tmpfs"}], services=[a, b]))
    ra, rb = _report(hearth, tmp_path / "a.json"), _report(hearth, tmp_path / "b.json")
    lim = hearth.rpc("status")["limits"]
    for r, name in ((ra, "a"), (rb, "b")):
        # The image is read-only; the mount hearth made writable is.
        assert r["usr_create"] == "EROFS" and r["etc_write"] == "EROFS", r
        # Also the one inside a's writable copy of its directory: made
        # writable after that copy, in it.
        assert r["mount_create"] == "ok" and r["nested_create"] == "ok", r
        # Its own /tmp and /dev/shm: what the other wrote is not there.
        assert r["tmp_create"] == "ok" and r["shm_create"] == "ok", r
        assert "mine" in r["shm_list"] and len(r["shm_list"]) == 1, r
        # Its /tmp holds what it wrote and the way to its writable test
        # directory (below /tmp), nothing of the host's or the other's.
        assert r["tmp_list"] == sorted(["mine", tmp_path.parts[2]]), r
    # a's own writable directory, b's the same path refused.
    assert ra["own_create"] == "ok" and rb["own_create"] == "EROFS", (ra, rb)
    assert ra["other_create"] == "EROFS" and rb["other_create"] == "EROFS", (ra, rb)
    # Sizes: a's own, b's the guest-wide default; a write past the size
    # fails with ENOSPC.
    assert ra["tmp_size"] == 8 * MIB and ra["shm_size"] == 4 * MIB, ra
    page = 4096
    assert rb["tmp_size"] == -(-lim["tmp_bytes"] // page) * page, (rb, lim)
    assert rb["shm_size"] == -(-lim["shm_bytes"] // page) * page, (rb, lim)
    assert ra["fill"] == "ENOSPC", ra
    # Nothing reached the host: the image and the other directory as they were.
    assert not os.path.exists("/usr/hearth-rootfs-probe")
    assert not os.path.exists("/etc/hearth-rootfs-probe")
    assert os.listdir(other) == [] and os.path.exists(own + "/f")
    # (nested is a tmpfs in hearth's namespace: the file is there, not here.)
    assert not os.path.exists(nested + "/f")
    # Nor the host's /tmp: "mine" was written in each service's own.
    assert not os.path.exists("/tmp/mine")
    for svc_name in ("a", "b"):
        s = hearth.service(svc_name)
        assert not s.get("privileged"), s


def test_private_tmp_hides_the_hosts(hearth, tmp_path):
    """Without `writable` below /tmp the service's /tmp is empty but for
    what it writes itself."""
    out = tmp_path / "seen"
    (tmp_path / "host-file").write_text("x")
    hearth.start(hearth.config(services=[{
        "name": "agent", "restart": "never", "writable": [],
        "argv": ["sh", "-c", f"ls -A /tmp > /dev/shm/l; touch /tmp/hearth-rootfs-x; ls -A /tmp >> /dev/shm/l; "
                             f"cat /dev/shm/l; exec sleep 1000"]}]))
    lines = hearth.wait_for(lambda: (lambda l: l if len(l) >= 1 else None)(
        [x["line"] for x in hearth.rpc("logs.read", {"name": "agent"})["lines"]]), what="listing")
    assert lines == ["hearth-rootfs-x"], lines
    assert not os.path.exists("/tmp/hearth-rootfs-x")


def test_read_only_root_off_is_flagged_privileged(hearth, tmp_path, outside):
    out = os.path.join(outside, "written")
    hearth.start(hearth.config(services=[{
        "name": "agent", "restart": "never", "read_only_root": False,
        "argv": ["sh", "-c", f"touch {out}; exec sleep 1000"]}]))
    hearth.wait_for(lambda: os.path.exists(out), what="a write outside every writable path")
    s = hearth.service("agent")
    assert s["privileged"] is True and "read_only_root off" in s["privileged_reasons"], s
    assert "read_only_root off" in hearth.log_text()


def test_host_exec_sessions_keep_the_guests_root_and_tmp(hearth, tmp_path, outside):
    """The host's exec sessions write where files.* writes: anywhere."""
    from conftest import HEARTHCTL
    hearth.start(hearth.config(services=[]))
    target = os.path.join(outside, "from-exec")
    r = subprocess.run([HEARTHCTL, "-c", "unix:" + hearth.sock, "exec", "--", "sh", "-c",
                        f"touch {target} && ls {tmp_path}"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    assert os.path.exists(target) and "hearth.json" in r.stdout.split()


def test_limits_in_status_and_config_errors(hearth, tmp_path):
    from conftest import HEARTH
    hearth.start(hearth.config(limits={"memory_reserve": 32 * MIB, "pids_max": 100,
                                       "tmp_bytes": 16 * MIB, "shm_bytes": 2 * MIB},
                               services=[]))
    lim = hearth.rpc("status")["limits"]
    assert lim["memory_total"] > 0 and lim["pids_max"] == 100, lim
    assert lim["tmp_bytes"] == 16 * MIB and lim["shm_bytes"] == 2 * MIB, lim
    # Applied where the services' cgroup has the memory controller, and
    # said so where it has not (this host's cgroup2 has none enabled).
    ctl = ""
    cg = hearth.rpc("status").get("cgroup") or ""
    if lim["services_memory_max"]:
        assert lim["memory_reserve"] == 32 * MIB
        assert lim["services_memory_max"] == lim["memory_total"] - 32 * MIB, lim
    else:
        assert lim["memory_reserve"] == 0 and "memory controller" in lim["error"], (lim, ctl, cg)
    bad = [
        ({"limits": {"memory_reserve": -1}}, "limits.memory_reserve"),
        ({"limits": {"tmp_bytes": 4096}}, "limits.tmp_bytes"),
        ({"limits": {"pids_max": "many"}}, "limits.pids_max"),
        ({"services": [{"name": "a", "argv": ["x"], "writable": ["rel/path"]}]},
         "services[0].writable[0]"),
        ({"services": [{"name": "a", "argv": ["x"], "read_only_root": "no"}]},
         "services[0].read_only_root"),
        ({"services": [{"name": "a", "argv": ["x"], "limits": {"shm_bytes": 10}}]},
         "services[0].limits.shm_bytes"),
        ({"services": [{"name": "a", "argv": ["x"], "writable": ["/a"] * 17}]},
         "services[0].writable"),
    ]
    for cfg, path in bad:
        f = tmp_path / "bad.json"
        f.write_text(json.dumps(cfg))
        r = subprocess.run([HEARTH, "--check-config", str(f)], capture_output=True, text=True)
        assert r.returncode != 0 and path in r.stderr, (cfg, r.stderr)
