"""A process space per service: each contained service (and each
exec.start session) runs in a pid namespace of its own, with a reaper as
its PID 1 and a /proc of that namespace. From a root service with the
default settings nothing of hearth, another service or a host session can
be seen, signalled, opened by pidfd or read through /proc; pidfd_getfd and
process_madvise are refused by the filter. hearth still sees the main
process's own end (an exit code, or the signal that killed it), its stop
reaches the program through the reaper, and what the program left behind
ends with its namespace."""
import json
import os
import time

import pytest
from pidns import pids_in_ns_of

PY = "/usr/bin/python3"
# The first service is the main one: its end would end hearth.
KEEP = {"name": "keep", "argv": ["sleep", "1000"]}

# What the probing service sees, written as JSON to argv[1] once argv[2]
# exists; argv[3] then holds hearth's pids of the other processes,
# comma-separated, argv[4] the secret a host session holds in its env.
PROBE = r'''
import ctypes, errno, json, os, sys, time
out, go = sys.argv[1], sys.argv[2]
while not os.path.exists(go):
    time.sleep(0.02)
others = [int(x) for x in open(sys.argv[3]).read().split(",")]
libc = ctypes.CDLL(None, use_errno=True)
def sc(*a):
    r = libc.syscall(*a)
    return "ok" if r >= 0 else errno.errorcode[ctypes.get_errno()]
R = {"self": os.getpid()}
R["proc"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
R["comm1"] = open("/proc/1/comm").read().strip()
R["kill"], R["proc_entry"], R["pidfd_open"] = {}, {}, {}
for p in others:
    try:
        os.kill(p, 0)
        R["kill"][p] = "ok"
    except OSError as e:
        R["kill"][p] = errno.errorcode[e.errno]
    R["proc_entry"][p] = os.path.exists(f"/proc/{p}")
    R["pidfd_open"][p] = sc(434, p, 0)
# Not the arguments the kernel would check: the filter answers first.
R["pidfd_getfd"] = sc(438, -1, 0, 0)
R["process_madvise"] = sc(440, -1, 0, 0, 0, 0)
secret = sys.argv[4].encode()
R["secret_seen"] = []
for p in os.listdir("/proc"):
    if p.isdigit():
        try:
            if secret in open(f"/proc/{p}/environ", "rb").read():
                R["secret_seen"].append(int(p))
        except OSError:
            pass
open(out + ".tmp", "w").write(json.dumps(R))
os.rename(out + ".tmp", out)
time.sleep(1000)
'''


def _running(h, name):
    return h.wait_for(lambda: (lambda s: s if s["state"] == "running" else None)(h.service(name)),
                      what=f"{name} running")


def _settled(h, name, states=("exited", "stopped", "failed")):
    return h.wait_for(lambda: (lambda s: s if s["state"] in states else None)(h.service(name)),
                      what=f"{name} ended")


def test_a_service_sees_only_its_own_processes(hearth, tmp_path):
    probe, out, go = tmp_path / "probe.py", tmp_path / "out.json", tmp_path / "go"
    probe.write_text(PROBE)
    secret = "hearth-session-secret-4711"
    args = tmp_path / "others"
    # The first start takes hearth's pid 2, a number the probe's own
    # namespace holds: the other service comes after it.
    hearth.start(hearth.config(services=[
        {"name": "first", "argv": ["sleep", "1000"]},
        {"name": "other", "after": ["first"], "argv": ["sleep", "1000"]},
        {"name": "probe", "after": ["other"],
         "argv": [PY, str(probe), str(out), str(go), str(args), secret]}]))
    other = _running(hearth, "other")["pid"]
    mine = _running(hearth, "probe")["pid"]
    c = hearth.client()
    sess = c.result("exec.start", {"argv": ["sleep", "1000"], "env": {"TOKEN": secret},
                                   "attach": False})
    # hearth's pids of another service and of a host session; hearth
    # itself is 1, which in the probe's namespace is its own reaper.
    targets = [p for p in (other, mine, sess["pid"]) if p > 2]
    assert other in targets and sess["pid"] in targets
    args.write_text(",".join(map(str, targets)))
    go.write_text("")
    hearth.wait_for(out.exists, timeout=20, what="probe results")
    r = json.loads(out.read_text())

    # Its /proc: its reaper (hearth's binary in that role) and itself.
    assert r["proc"] == [1, 2], r
    assert r["self"] == 2 and r["comm1"] == "hearth-reaper"
    # hearth's pids of hearth's own processes, the other service and the
    # host's session mean nothing here.
    for p in targets:
        assert r["kill"][str(p)] == "ESRCH", (p, r)
        assert r["proc_entry"][str(p)] is False, (p, r)
        assert r["pidfd_open"][str(p)] == "ESRCH", (p, r)
    assert r["pidfd_getfd"] == "EPERM" and r["process_madvise"] == "EPERM"
    assert r["secret_seen"] == []
    # The session and the other service have namespaces of their own too.
    host = {n: hearth.host_pid(p) for n, p in (("other", other), ("sess", sess["pid"]))}
    mine_ns = os.readlink(f"/proc/{hearth.host_pid(_running(hearth, 'probe')['pid'])}/ns/pid")
    for n, hp in host.items():
        assert os.readlink(f"/proc/{hp}/ns/pid") not in (mine_ns, os.readlink(
            f"/proc/{hearth.pid}/ns/pid")), n
    c.result("exec.signal", {"id": sess["id"], "signal": "SIGKILL"})


def test_the_main_process_end_is_what_hearth_reports(hearth, tmp_path):
    hearth.start(hearth.config(services=[
        KEEP,
        {"name": "killed", "restart": "never", "argv": ["sh", "-c", "kill -KILL $$"]},
        {"name": "code", "restart": "never", "argv": ["sh", "-c", "exit 7"]},
        {"name": "plain", "argv": ["sleep", "1000"]},
        {"name": "trap", "argv": ["sh", "-c", "trap 'exit 3' TERM; while :; do sleep 0.1; done"]},
        # Out of the reaper's process group: the stop is handed on.
        {"name": "leaver", "argv": [PY, "-c", "import os, signal, sys, time\n"
                                    "os.setsid()\n"
                                    "signal.signal(signal.SIGTERM, lambda *a: sys.exit(4))\n"
                                    "open(os.environ['MARK'], 'w').close()\n"
                                    "time.sleep(1000)"],
         "env": {"MARK": str(tmp_path / "leaver")}}]))
    assert _settled(hearth, "killed")["last_exit"] == {"signal": "SIGKILL"}
    assert _settled(hearth, "code")["last_exit"] == {"code": 7}
    for n in ("plain", "trap", "leaver"):
        _running(hearth, n)
    hearth.wait_for((tmp_path / "leaver").exists, what="leaver in its own session")
    t0 = time.monotonic()
    for n in ("plain", "trap", "leaver"):
        hearth.rpc("services.stop", {"name": n})
    # SIGTERM reached each program (no escalation to SIGKILL).
    assert _settled(hearth, "plain")["last_exit"] == {"signal": "SIGTERM"}
    assert _settled(hearth, "trap")["last_exit"] == {"code": 3}
    assert _settled(hearth, "leaver")["last_exit"] == {"code": 4}
    assert time.monotonic() - t0 < 5


def _marked(marker):
    found = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                if marker.encode() in open(f"/proc/{p}/cmdline", "rb").read():
                    found.append(int(p))
            except OSError:
                pass
    return found


def test_what_a_service_leaves_behind_ends_with_it(hearth, tmp_path):
    marker = f"pidns-daemon-{os.getpid()}-{time.monotonic_ns()}"
    # Without cgroups: the namespace alone ends the daemon (setsid and a
    # double fork take it out of the service's group and session).
    hearth.start(hearth.config(services=[
        KEEP,
        {"name": "forker", "restart": "never",
         "argv": ["sh", "-c", f"(setsid sh -c 'exec -a {marker} sleep 1000' &); sleep 0.3; "
                  "exit 0"]}]))
    assert _settled(hearth, "forker")["last_exit"] == {"code": 0}
    hearth.wait_for(lambda: not _marked(marker), what="the daemon gone with its namespace")


def test_exec_sessions_report_their_main_process(hearth):
    hearth.start(hearth.config(services=[]))
    c = hearth.client()
    for argv, want in ((["sh", "-c", "exit 5"], {"exit_code": 5}),
                       (["sh", "-c", "kill -TERM $$"], {"signal": 15, "signal_name": "SIGTERM"})):
        sid = c.result("exec.start", {"argv": argv, "attach": False})["id"]
        w = c.result("exec.wait", {"id": sid, "timeout_ms": 10000})
        assert w == {"id": sid, "exited": True, **want}, w


def test_a_services_orphans_are_its_reapers(hearth):
    script = 'for i in 1 2 3 4 5 6 7 8; do (sleep 0.2 &) ; done; exec sleep 1000'
    hearth.start(hearth.config(services=[{"name": "spawner", "argv": ["sh", "-c", script]}]))
    reaper = hearth.host_pid(_running(hearth, "spawner")["pid"])

    def settled():
        procs = list(pids_in_ns_of(reaper))
        states = []
        for p in procs:
            try:
                states.append(open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[0])
            except OSError:
                pass
        # The reaper and sleep 1000, none left a zombie.
        return len(procs) == 2 and "Z" not in states
    hearth.wait_for(settled, what="the orphans reaped in the service's namespace")
    assert hearth.rpc("status")["orphans_reaped"] == 0
