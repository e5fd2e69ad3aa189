"""What hearth sets in the kernel before any service starts: the config's
`sysctl` keys and hearth's own oom_score_adj. These runs are container
mode (PID 1 of fresh namespaces with /proc mounted), where hearth does not
own the kernel and writes no baseline; /proc/sys outside the network
namespace is the host's, so only sysctls of the run's own network
namespace are written here. The vm-mode baseline and the kernel's helpers
are tests/vm/test_hostile_agent.py."""
import json
import subprocess

from conftest import HEARTH

PORT_START = "/proc/sys/net/ipv4/ip_unprivileged_port_start"
CAP_SYS_RESOURCE = 24


def _has_cap(n):
    with open("/proc/self/status") as f:
        eff = [line.split()[1] for line in f if line.startswith("CapEff:")][0]
    return bool(int(eff, 16) >> n & 1)


def _read(path):
    with open(path) as f:
        return f.read().strip()


def _lines(h, name, n):
    return h.wait_for(lambda: (lambda ls: ls if len(ls) >= n else None)(
        [x["line"] for x in h.rpc("logs.read", {"name": name})["lines"]]), what=f"{name} output")


def test_sysctl_keys_written_in_the_namespace_and_shown(hearth):
    host_before = _read(PORT_START)
    hearth.start(hearth.config(services=[{
        "name": "probe", "argv": ["sh", "-c", f"cat {PORT_START} /proc/sys/net/ipv4/ping_group_range;"
                                              " exec sleep 1000"]}],
        sysctl={"net.ipv4.ip_unprivileged_port_start": "500",
                "net.ipv4.ping_group_range": "0\t0",
                "net.ipv4.ip_local_port_range": None,
                "net.ipv4.hearth_no_such_knob": "1",
                "net.ipv4.tcp_syn_retries": "many"}))
    st = hearth.rpc("status")["sysctl"]
    assert st["baseline"] is False and "not hearth's" in st["reason"], st
    rows = {e["name"]: e for e in st["entries"]}
    assert list(rows) == ["net.ipv4.ip_unprivileged_port_start", "net.ipv4.ping_group_range",
                          "net.ipv4.ip_local_port_range", "net.ipv4.hearth_no_such_knob",
                          "net.ipv4.tcp_syn_retries"]
    assert rows["net.ipv4.ip_unprivileged_port_start"] == {
        "name": "net.ipv4.ip_unprivileged_port_start", "wanted": "500", "value": "500",
        "state": "applied", "from": "config"}
    # Read back with its blanks as one space.
    assert rows["net.ipv4.ping_group_range"]["value"] == "0 0"
    assert rows["net.ipv4.ping_group_range"]["state"] == "applied"
    # null: the kernel's value is read and left.
    kept = rows["net.ipv4.ip_local_port_range"]
    assert kept["state"] == "kept" and "wanted" not in kept and len(kept["value"].split()) == 2
    # Absent from this kernel: skipped, no error.
    absent = rows["net.ipv4.hearth_no_such_knob"]
    assert absent["state"] == "absent" and "error" not in absent and "value" not in absent
    # Refused by the kernel: failed, with the reason and the value it kept.
    bad = rows["net.ipv4.tcp_syn_retries"]
    assert bad["state"] == "failed", bad
    assert bad["error"] == 'unable to write "many": Invalid argument', bad
    assert bad["value"].isdigit()
    assert "sysctl net.ipv4.tcp_syn_retries: unable to write" in hearth.log_text()
    # What the service sees in the namespace; the host's own is untouched.
    assert _lines(hearth, "probe", 2)[:2] == ["500", "0\t0"]
    assert _read(PORT_START) == host_before


def test_container_mode_sets_no_baseline(hearth):
    core = _read("/proc/sys/kernel/core_pattern")
    hearth.start(hearth.config())
    st = hearth.rpc("status")["sysctl"]
    assert st == {"baseline": False, "reason": "the kernel is not hearth's in this mode",
                  "entries": []}
    assert "no baseline set" in hearth.log_text()
    assert _read("/proc/sys/kernel/core_pattern") == core


def test_bad_sysctl_names_and_values_refused_with_their_path(tmp_path):
    cases = [
        ({"kernel..modprobe": "x"}, 'sysctl: bad sysctl name "kernel..modprobe"'),
        ({"../../etc/passwd": "x"}, 'sysctl: bad sysctl name "../../etc/passwd"'),
        ({"kernel/modprobe": "x"}, 'sysctl: bad sysctl name "kernel/modprobe"'),
        ({"kernel.core_pattern": "core\n|/tmp/x"},
         "sysctl.kernel.core_pattern: must not contain a newline"),
        ({"kernel.sysrq": False}, "sysctl.kernel.sysrq: expected a string, an integer or null"),
        ({"kernel.core_pattern": "x" * 256}, "sysctl.kernel.core_pattern: longer than 255 bytes"),
    ]
    cfg = tmp_path / "bad.json"
    for sysctl, msg in cases:
        cfg.write_text(json.dumps({"sysctl": sysctl}))
        r = subprocess.run([HEARTH, "--check-config", str(cfg)], capture_output=True, text=True)
        assert r.returncode == 1 and msg in r.stderr, (sysctl, r.stderr)


def test_hearth_keeps_oom_minus_1000_and_services_get_0(hearth, tmp_path):
    """A child inherits its parent's oom_score_adj, and hearth keeps -1000
    for itself: a service without a setting is put back to the kernel's
    default, 0, and cannot lower itself to -1000 again (it has no
    CAP_SYS_RESOURCE, and the floor it inherited was raised with it). A
    readiness probe, which hearth runs itself, is back at 0 too."""
    probe = tmp_path / "probe.oom"
    script = ("cat /proc/self/oom_score_adj; "
              "if (echo -1000 > /proc/self/oom_score_adj) 2>/dev/null; then echo lowered; else echo refused; fi; "
              "exec sleep 1000")
    hearth.start(hearth.config(services=[
        {"name": "agent", "argv": ["sh", "-c", script]},
        {"name": "ready", "argv": ["sleep", "1000"],
         "ready": {"exec": ["sh", "-c", f"cat /proc/self/oom_score_adj > {probe}"]}},
        {"name": "set", "argv": ["sleep", "1000"], "oom_score_adj": 300}]))
    if _has_cap(CAP_SYS_RESOURCE):
        assert _read(f"/proc/{hearth.pid}/oom_score_adj") == "-1000"
        assert hearth.rpc("status")["oom_score_adj"] == -1000
    else:
        # Where even the test's root lacks CAP_SYS_RESOURCE, hearth cannot
        # lower its own value; it says so once and runs on (the guest
        # kernel's check is tests/vm/test_hostile_agent.py).
        assert hearth.rpc("status")["oom_score_adj"] == 0
        assert hearth.log_text().count("unable to set hearth's oom_score_adj to -1000") == 1
    assert _lines(hearth, "agent", 2)[:2] == ["0", "refused"]
    agent = hearth.host_pid(hearth.service("agent")["pid"])
    assert _read(f"/proc/{agent}/oom_score_adj") == "0"
    hearth.wait_for(lambda: hearth.service("ready")["state"] == "running", what="ready running")
    assert probe.read_text().strip() == "0"
    s = hearth.host_pid(hearth.wait_for(lambda: hearth.service("set")["pid"], what="set pid"))
    assert _read(f"/proc/{s}/oom_score_adj") == "300"
