"""Containment without CAP_SYS_ADMIN (a container under its runtime's
default capabilities): hearth, started by setpriv with sys_admin out of
its bounding and inheritable sets, clones each contained service and
exec session into a user namespace of its own, with its pid and mount
namespaces, mapped uid for uid and gid for gid to hearth's own; the
containment inside is the usual one. Where /proc is masked as runtimes
mask it, the kernel refuses a fresh /proc there: the service keeps
hearth's, with every process already running hidden. Where the kernel
refuses the user namespace itself, nothing contained starts, and status
says which setting to change."""
import json
import os
import subprocess
import time

from conftest import HEARTH, HEARTHCTL, Client, _need_root

PY = "/usr/bin/python3"
KEEP = {"name": "keep", "argv": ["sleep", "1000"]}
NOADMIN = ("sys_admin",)
IDENTITY = "0 0 4294967295"
# The container set without NET_RAW (test_contain.py).
DEFAULT_CAPS = sum(1 << c for c in (0, 1, 3, 4, 5, 6, 7, 8, 10, 18, 29, 31))

# What a root service with the default settings finds, written as JSON
# to argv[1] once argv[2] exists; argv[3] holds hearth's pids of other
# processes, comma-separated.
PROBE = r'''
import ctypes, errno, json, os, sys, time
out, go = sys.argv[1], sys.argv[2]
while not os.path.exists(go):
    time.sleep(0.02)
libc = ctypes.CDLL(None, use_errno=True)
def err(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]
def sc(*a):
    r = libc.syscall(*a)
    return "ok" if r >= 0 else errno.errorcode[ctypes.get_errno()]
def words(path):
    return " ".join(open(path).read().split())
R = {"uid_map": words("/proc/self/uid_map"), "gid_map": words("/proc/self/gid_map"),
     "userns": os.readlink("/proc/self/ns/user"), "self": os.getpid()}
R["proc"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
R["proc1"] = sorted(os.listdir("/proc/1"))
R["comm1"] = err(lambda: open("/proc/1/comm").read())
if R["comm1"] == "ok":
    R["comm1"] = open("/proc/1/comm").read().strip()
R["kill"] = {p: err(lambda: os.kill(int(p), 0)) for p in open(sys.argv[3]).read().split(",")}
R["root_write"] = err(lambda: open("/hearth-userns-probe", "w"))
R["oom"] = open("/proc/self/oom_score_adj").read().strip()
def lower():
    fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY)
    try:
        os.write(fd, b"-1000")
    finally:
        os.close(fd)
R["oom_lower"] = err(lower)
R["cap_eff"] = [l.split()[1] for l in open("/proc/self/status") if l.startswith("CapEff")][0]
R["mount"] = sc(165, b"none", b"/tmp", b"tmpfs", 0, 0)
R["unshare_user"] = sc(272, 0x10000000)
open(out + ".tmp", "w").write(json.dumps(R))
os.rename(out + ".tmp", out)
time.sleep(1000)
'''


def _running(h, name):
    return h.wait_for(lambda: (lambda s: s if s["state"] == "running" else None)(h.service(name)),
                      what=f"{name} running")


def _status_of(h, name):
    for s in h.rpc("status")["services"]:
        if s["name"] == name:
            return s
    raise KeyError(name)


def _probe(hearth, tmp_path, binds=()):
    """hearth without CAP_SYS_ADMIN running PROBE as a root service (with
    a ready probe that joins it), another service and a host session."""
    probe, out, go, args = (tmp_path / n for n in ("probe.py", "out.json", "go", "others"))
    probe.write_text(PROBE)
    # The ready probe runs in the service's namespaces (exec probes join
    # them, its user namespace first): it finds the service's own /tmp.
    hearth.start(hearth.config(services=[
        KEEP,
        {"name": "other", "after": ["keep"], "argv": ["sleep", "1000"]},
        {"name": "probe", "after": ["other"],
         "argv": ["sh", "-c", f"readlink /proc/self/ns/user > /tmp/userns; "
                              f"exec {PY} {probe} {out} {go} {args}"],
         "ready": {"exec": ["sh", "-c", 'test "$(cat /tmp/userns)" = '
                                        '"$(readlink /proc/self/ns/user)"'],
                   "timeout_ms": 10000}}]),
        drop_caps=NOADMIN, binds=binds)
    other = _running(hearth, "other")["pid"]
    mine = _running(hearth, "probe")["pid"]
    sess = hearth.client().result("exec.start", {"argv": ["sleep", "1000"], "attach": False})
    targets = [p for p in (other, mine, sess["pid"]) if p > 2]
    assert other in targets and sess["pid"] in targets
    args.write_text(",".join(map(str, targets)))
    go.write_text("")
    hearth.wait_for(out.exists, timeout=20, what="probe results")
    return json.loads(out.read_text()), targets


def test_without_cap_sys_admin_a_service_gets_a_user_namespace(hearth, tmp_path):
    r, targets = _probe(hearth, tmp_path)
    status = _status_of(hearth, "probe")
    assert status["containment"] == "userns", status
    assert "CAP_SYS_ADMIN" in status["containment_reason"]
    assert "/proc" not in status["containment_reason"]  # a fresh one was had
    assert "user namespace of its own" in hearth.log_text()
    # hearth itself holds no CAP_SYS_ADMIN (bit 21), as a container's
    # entrypoint under the runtime's defaults.
    st = open(f"/proc/{hearth.pid}/status").read()
    cap_eff = int([l.split()[1] for l in st.splitlines() if l.startswith("CapEff")][0], 16)
    assert not cap_eff & (1 << 21)

    # Its own user namespace, every id mapped to itself (hearth's map is
    # the whole range: it runs in the machine's user namespace).
    assert r["uid_map"] == IDENTITY and r["gid_map"] == IDENTITY, r
    hearth_userns = os.readlink(f"/proc/{hearth.pid}/ns/user")
    assert r["userns"] != hearth_userns
    # The exec probe found the service's own user namespace (and /tmp).
    assert _running(hearth, "probe")["state"] == "running"
    # A process space of its own, with a /proc of it: no hearth there,
    # and hearth's pids of other processes mean nothing.
    assert r["proc"] == [1, 2] and r["self"] == 2 and r["comm1"] == "hearth-reaper", r
    for p in targets:
        assert r["kill"][str(p)] == "ESRCH", (p, r)
    # The rest of its containment, as with CAP_SYS_ADMIN: a read-only
    # root, the default capabilities, the filter (no mounts, no user
    # namespace of its own); an oom_score_adj of 0 it cannot lower to
    # hearth's -1000.
    assert r["root_write"] == "EROFS", r
    assert int(r["cap_eff"], 16) == DEFAULT_CAPS, r
    assert r["mount"] == "EPERM" and r["unshare_user"] == "EPERM", r
    assert r["oom"] == "0" and r["oom_lower"] == "EACCES", r

    # An exec session goes the same way: a user namespace of its own,
    # mapped the same.
    out = subprocess.run([HEARTHCTL, "-c", "unix:" + hearth.sock, "exec", "--", "sh", "-c",
                          "cat /proc/self/uid_map; readlink /proc/self/ns/user"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split("\n")
    assert " ".join(lines[0].split()) == IDENTITY
    assert lines[1].startswith("user:[") and lines[1] not in (r["userns"], hearth_userns)


def test_a_non_root_service_keeps_its_ids_on_files(hearth, tmp_path):
    """uid 65534 in the service's user namespace is uid 65534 outside: what
    it writes to a writable directory belongs to it there."""
    d = tmp_path / "shared"
    d.mkdir()
    os.chmod(d, 0o1777)
    hearth.start(hearth.config(services=[
        KEEP, {"name": "nobody", "user": "nobody", "writable": [str(d)],
               "argv": ["sh", "-c", f"id -u > {d}/made.tmp && id -G >> {d}/made.tmp && "
                                    f"mv {d}/made.tmp {d}/made; exec sleep 1000"]}]),
        drop_caps=NOADMIN)
    hearth.wait_for(lambda: (d / "made").exists(), what="the file")
    st = os.stat(d / "made")
    assert (st.st_uid, st.st_gid) == (65534, 65534)
    uid, groups = (d / "made").read_text().split("\n")[:2]
    # Its groups are its own (hearth writes the gid map, setgroups stays
    # allowed), not hearth's.
    assert uid == "65534" and "0" not in groups.split(), groups
    assert _status_of(hearth, "nobody")["containment"] == "userns"


def test_a_masked_proc_is_kept_with_what_ran_hidden(hearth, tmp_path):
    """A runtime masks paths in /proc (a file bound over /proc/version
    here, as podman binds over /proc/kcore): the kernel then mounts no
    fresh /proc in a user namespace. The service keeps hearth's /proc,
    and hearth's entry there (and every other running process's) is an
    empty directory; its pid namespace is still its own."""
    fake = tmp_path / "version"
    fake.write_text("masked\n")
    r, targets = _probe(hearth, tmp_path, binds=[(fake, "/proc/version")])
    status = _status_of(hearth, "probe")
    assert status["containment"] == "userns"
    assert "keeps the container's /proc" in status["containment_reason"], status
    assert "paths in /proc are masked" in hearth.log_text()
    # hearth's /proc: hearth (1) and the others are listed, but empty.
    assert 1 in r["proc"] and r["proc1"] == [] and r["comm1"] == "ENOENT", r
    for p in targets:
        if p != r["self"]:
            assert r["kill"][str(p)] == "ESRCH", (p, r)
    assert r["uid_map"] == IDENTITY and r["root_write"] == "EROFS", r
    assert r["mount"] == "EPERM", r


def test_refused_user_namespaces_start_nothing_contained(tmp_path):
    """hearth as root of a user namespace whose user.max_user_namespaces
    is 0, without CAP_SYS_ADMIN: the contained service fails with what is
    missing and which setting to change, status shows containment none
    with that reason, an exec session is refused the same way, and the
    uncontained service runs."""
    _need_root()
    ctl = tmp_path / "ctl"
    ctl.mkdir()
    sock = ctl / "c.sock"
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"control": {"listen": [f"unix:{sock}"]}, "services": [
        {"name": "free", "isolation": False, "argv": ["sleep", "1000"]},
        {"name": "boxed", "argv": ["sleep", "1000"]}]}))
    log = open(tmp_path / "hearth.log", "wb")
    script = ('echo 0 > /proc/sys/user/max_user_namespaces && exec setpriv --bounding-set '
              '-sys_admin --inh-caps -sys_admin -- "$@"')
    p = subprocess.Popen(["unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount",
                          "--mount-proc", "sh", "-c", script, "sh", HEARTH, "-c", str(cfg),
                          "--log", "debug"], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 10
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sock.exists(), (tmp_path / "hearth.log").read_text()
        c = Client(str(sock))
        deadline = time.monotonic() + 10
        while True:
            svcs = {s["name"]: s for s in c.result("status")["services"]}
            if svcs["boxed"]["state"] == "failed" and svcs["free"]["state"] == "running":
                break
            assert time.monotonic() < deadline, svcs
            time.sleep(0.05)
        boxed, free = svcs["boxed"], svcs["free"]
        assert boxed["containment"] == "none", boxed
        for text in (boxed["containment_reason"], boxed["error"]):
            assert "no CAP_SYS_ADMIN and no user namespace" in text, text
            assert "user.max_user_namespaces is 0" in text, text
            assert "--cap-add SYS_ADMIN" in text and "raise user.max_user_namespaces" in text
        assert boxed["error"].startswith("containment: ")
        assert free["containment"] == "none" and free["containment_reason"] == "isolation off"
        e = c.call("exec.start", {"argv": ["true"]})
        assert "error" in e and "user.max_user_namespaces is 0" in e["error"]["message"], e
        c.close()
    finally:
        with open(f"/proc/{p.pid}/task/{p.pid}/children") as f:
            for kid in f.read().split():
                os.kill(int(kid), 15)
        p.wait(10)
        log.close()


def test_with_cap_sys_admin_containment_is_full(hearth):
    hearth.start(hearth.config(services=[
        KEEP, {"name": "open", "isolation": False, "argv": ["sleep", "1000"]}]))
    _running(hearth, "open")
    keep, free = _status_of(hearth, "keep"), _status_of(hearth, "open")
    assert keep["containment"] == "full" and "containment_reason" not in keep, keep
    assert free["containment"] == "none" and free["containment_reason"] == "isolation off"
