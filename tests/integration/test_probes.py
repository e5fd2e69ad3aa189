"""Exec probes (ready.exec, health.exec) run where and as their service
runs: in its cgroup leaf, its mount and cgroup namespaces, with its
capabilities, seccomp filter, no_new_privs and user. A service that
replaces its own probe's program gets nothing it did not have: the next
check runs the replacement as contained as the service itself."""
import os
import time

import pytest

CGROUP2 = os.path.exists("/sys/fs/cgroup/unified/cgroup.procs") or \
    os.path.exists("/sys/fs/cgroup/cgroup.procs")
# CHOWN DAC_OVERRIDE FOWNER FSETID KILL SETGID SETUID SETPCAP NET_BIND_SERVICE
# SYS_CHROOT AUDIT_WRITE SETFCAP: a root service's default set.
DEFAULT_CAPS = sum(1 << c for c in (0, 1, 3, 4, 5, 6, 7, 8, 10, 18, 29, 31))

# What the replaced probe records, one fact a line.
RECORDER = """#!/bin/sh
{{
  echo "id $(id -u):$(id -g)"
  grep -E '^(CapEff|Seccomp|NoNewPrivs):' /proc/self/status
  echo "cgroup $(grep '^0::' /proc/self/cgroup)"
  echo "mnt $(readlink /proc/self/ns/mnt)"
  if test -e {sock}; then echo "sock seen"; else echo "sock hidden"; fi
  if (: > /proc/sys/kernel/domainname) 2>/dev/null; then echo "procsys writable"
  else echo "procsys read-only"; fi
}} > {d}/probe.out.tmp
mv {d}/probe.out.tmp {d}/probe.out
"""

# The service: notes its own namespace and cgroup, then swaps the probe's
# program (which lives where it can write) for the recorder.
SERVICE = """readlink /proc/self/ns/mnt > {d}/svc.mnt
grep '^0::' /proc/self/cgroup > {d}/svc.cgroup
cp {d}/recorder {d}/probe.new
chmod 755 {d}/probe.new
mv {d}/probe.new {d}/probe.sh
exec sleep 1000
"""


def _running(h, name):
    return h.wait_for(lambda: (lambda s: s if s["state"] == "running" else None)(h.service(name)),
                      what=f"{name} running")


def _in_service(h, name, path):
    """A file as the service's mount namespace shows it."""
    pid = h.host_pid(h.service(name)["pid"])
    return f"/proc/{pid}/root{path}"


@pytest.mark.valgrind
@pytest.mark.skipif(not CGROUP2, reason="needs cgroup2")
def test_replaced_health_probe_runs_as_contained_as_its_service(hearth, tmp_path):
    d = tmp_path
    (d / "probe.sh").write_text("#!/bin/sh\nexit 0\n")
    (d / "probe.sh").chmod(0o755)
    (d / "recorder").write_text(RECORDER.format(d=d, sock=hearth.sock))
    (d / "svc.sh").write_text(SERVICE.format(d=d))
    hearth.start(hearth.config(services=[
        {"name": "agent", "user": "root", "argv": ["sh", str(d / "svc.sh")],
         "health": {"exec": [str(d / "probe.sh")], "interval_ms": 100, "failures": 1000}},
        # Not root: its probe is not root either.
        {"name": "low", "user": "nobody", "argv": ["sleep", "1000"],
         "health": {"exec": ["sh", "-c", "test \"$(id -u)\" = 65534 && "
                             "grep -q '^CapEff:[[:space:]]*0*$' /proc/self/status"],
                    "interval_ms": 100, "failures": 1000}}]),
        cgroup=True)
    _running(hearth, "agent")
    out = hearth.wait_for(lambda: (lambda p: p if os.path.exists(p) else None)(
        _in_service(hearth, "agent", str(d / "probe.out"))), what="the replaced probe's record")
    lines = open(out).read().splitlines()
    facts = {}
    for line in lines:
        k, _, v = line.partition(":\t" if line.split()[0].endswith(":") else " ")
        facts[k] = v.strip()
    svc_mnt = open(_in_service(hearth, "agent", str(d / "svc.mnt"))).read().strip()
    svc_cgroup = open(_in_service(hearth, "agent", str(d / "svc.cgroup"))).read().strip()

    # The service's identity and capabilities, not hearth's full set.
    assert facts["id"] == "0:0", lines
    assert int(facts["CapEff"], 16) == DEFAULT_CAPS, lines
    assert facts["Seccomp"] == "2" and facts["NoNewPrivs"] == "1", lines
    # Its cgroup leaf (its cgroup namespace is rooted there) and its mount
    # namespace: the same inode as the service's own, not hearth's.
    assert facts["cgroup"] == svc_cgroup == "0::/", (lines, svc_cgroup)
    assert facts["mnt"] == svc_mnt, (lines, svc_mnt)
    assert svc_mnt != os.readlink(f"/proc/{hearth.pid}/ns/mnt")
    # What the service cannot reach, its probe cannot either.
    assert facts["sock"] == "hidden" and facts["procsys"] == "read-only", lines
    # And the recorder exits 0: the service is healthy by it.
    hearth.wait_for(lambda: hearth.service("agent")["health"]["status"] == "healthy",
                    what="agent healthy")
    # A `user: nobody` service's probe runs as nobody, with nothing kept.
    low = hearth.wait_for(lambda: (lambda s: s if s["health"]["status"] == "healthy" else None)(
        hearth.service("low")), what="low healthy")
    assert low["health"]["failures"] == 0


@pytest.mark.skipif(not CGROUP2, reason="needs cgroup2")
def test_ready_probe_sees_the_services_mount_namespace(hearth, tmp_path):
    """Ready only where the service's own namespace is seen: the same
    mount namespace inode as the service noted, and the control socket's
    directory masked as in the service's view."""
    ns = tmp_path / "svc.mnt"
    hearth.start(hearth.config(services=[
        {"name": "web", "argv": ["sh", "-c", f"readlink /proc/self/ns/mnt > {ns}; exec sleep 1000"],
         "ready": {"exec": ["sh", "-c", f"test -s {ns} && "
                            f"test \"$(readlink /proc/self/ns/mnt)\" = \"$(cat {ns})\" && "
                            f"! test -e {hearth.sock}"],
                   "timeout_ms": 10000}},
        # A failing probe still fails: starting until its deadline, then
        # stopped with the probe's own reason.
        {"name": "never", "restart": "never", "argv": ["sleep", "1000"],
         "ready": {"exec": ["sh", "-c", "exit 4"], "timeout_ms": 600}}]),
        cgroup=True)
    _running(hearth, "web")
    mnt = open(_in_service(hearth, "web", str(ns))).read().strip()
    assert mnt != os.readlink(f"/proc/{hearth.pid}/ns/mnt")
    never = hearth.wait_for(lambda: (lambda x: x if x["state"] == "failed" else None)(
        hearth.service("never")), what="never failed")
    assert "not ready after" in never["error"] and "exited with status 4" in never["error"]


def test_probe_of_a_service_without_isolation_keeps_its_limits(hearth, tmp_path):
    """isolation off: the probe shares hearth's mount namespace as its
    service does, and still has only the service's capabilities, filter
    and no_new_privs: never more than the service."""
    rec = tmp_path / "loose.out"
    hearth.start(hearth.config(services=[
        {"name": "loose", "isolation": False, "argv": ["sleep", "1000"],
         "health": {"exec": ["sh", "-c", "grep -E '^(CapEff|Seccomp|NoNewPrivs):' "
                             f"/proc/self/status > {rec}.tmp; "
                             f"readlink /proc/self/ns/mnt >> {rec}.tmp; mv {rec}.tmp {rec}"],
                    "interval_ms": 100, "failures": 1000}}]))
    _running(hearth, "loose")
    hearth.wait_for(lambda: rec.exists(), what="the probe's record")
    lines = rec.read_text().splitlines()
    st = dict(line.split(":\t", 1) for line in lines[:3])
    assert int(st["CapEff"], 16) == DEFAULT_CAPS and st["Seccomp"] == "2" and \
        st["NoNewPrivs"] == "1", lines
    assert lines[3] == os.readlink(f"/proc/{hearth.pid}/ns/mnt")
