"""Faults a month brings that need the guest's own kernel: the wall clock
stepped backward (by the host, and by someone in the guest) while timers
run, and the agent OOM-killed in its cgroup and restarted with the reason.

One boot (module fixture `faults`) runs FAULTS: a service probed by a
health check every 500 ms, one crash-looping on a 1 s backoff, the
skills overlay polled every 500 ms, a service that steps the clock back
an hour once told to, and a memory hog capped by memory_max that runs
once told to. The host's clock is never touched: only the guest's."""
import json
import os
import shutil
import tempfile
import time

import pytest

from conftest import VM, attack_results, config_files

ATTACK = "/usr/libexec/hearth-test/attack"
MIB = 1 << 20
HOUR_MS = 3600 * 1000
# In hearth's /run, which services see read-only: the host makes them.
CLOCK_GO = "/run/clock-go"
HOG_GO = "/run/hog-go"
PUB, PRIV = "/run/pub", "/run/priv"
FAULTS = {
    "log": {"level": "info"},
    "control": {"listen": ["serial:org.hearth.ctl"]},
    "modules": ["virtio_pci", "virtio_console"],
    # No hardware-clock check: the host's backward step would otherwise be
    # undone by it within a check (the guest's RTC keeps the host's time).
    "clock": {"check_ms": 0},
    "skills": {"public": PUB, "private": PRIV, "poll_ms": 500},
    "services": [
        {"name": "ticker", "argv": [ATTACK, "tick"], "env": {"ATTACK_NOW": "1"}, "user": "root",
         "main": True,
         "health": {"exec": ["/sbin/hearth", "--version"], "interval_ms": 500}},
        # No mode: the usage line and exit 2, at once, for ever.
        {"name": "crash", "argv": [ATTACK], "restart": "always",
         "backoff": {"initial_ms": 1000, "max_ms": 1000}},
        {"name": "stepper", "argv": [ATTACK, "clockback", "3600"], "env": {"ATTACK_GO": CLOCK_GO},
         "user": "root", "caps_keep": ["SYS_TIME"], "restart": "never"},
        # 96 MiB asked of a 32 MiB cgroup: the OOM killer ends each run.
        {"name": "hog", "argv": [ATTACK, "hog", "96"], "env": {"ATTACK_GO": HOG_GO},
         "user": "root", "restart": "always", "limits": {"memory_max": 32 * MIB},
         "backoff": {"initial_ms": 500, "max_ms": 500}},
    ],
}


@pytest.fixture(scope="module")
def faults(image):
    root = tempfile.mkdtemp(prefix="hearth-vm-faults-")
    vm = VM(os.path.join(root, "state"),
            ["--no-shares", "--append", "hearth.config=/etc/hearth/faults.json"],
            files=config_files({"faults": FAULTS}))
    vm.start()
    try:
        yield vm
    finally:
        vm.kill()
        shutil.rmtree(root, ignore_errors=True)


def figures(vm):
    st = vm.result("status")
    svc = {s["name"]: s for s in st["services"]}
    return {"uptime_ms": st["uptime_ms"], "checks": svc["ticker"]["health"]["checks"],
            "health": svc["ticker"]["health"]["status"],
            "ticker_uptime_ms": svc["ticker"].get("uptime_ms", 0),
            "restarts": svc["crash"]["restarts"], "crash": svc["crash"],
            "skills_runs": st["skills"]["runs"], "skills": st["skills"],
            "lines": svc["ticker"]["output_lines"]}


def goes_on(vm, before, seconds):
    """After `seconds` of the host's time, every timer has fired as
    before the step: health checks, the crash loop's backoff, the skills
    poll, the ticker; uptimes moved by about that much."""
    t0 = time.monotonic()
    time.sleep(seconds)
    now = figures(vm)
    took = (time.monotonic() - t0) * 1000
    assert took - 500 <= now["uptime_ms"] - before["uptime_ms"] <= took + 5000, (before, now)
    assert took - 1000 <= now["ticker_uptime_ms"] - before["ticker_uptime_ms"] <= took + 5000
    assert now["checks"] >= before["checks"] + 3 and now["health"] == "healthy", (before, now)
    assert now["restarts"] >= before["restarts"] + 2, (before, now)
    if now["crash"]["state"] == "backoff":
        assert 0 <= now["crash"]["next_start_ms"] <= 1100, now["crash"]
    assert now["skills_runs"] >= before["skills_runs"] + 3, (before, now)
    assert now["skills"]["trigger"] == "poll" and "error" not in now["skills"], now["skills"]
    assert now["lines"] >= before["lines"] + 10
    return now


def test_clock_stepped_backward(faults):
    vm = faults
    vm.result("files.mkdir", {"path": f"{PUB}/alpha", "parents": True})
    vm.result("files.write", {"path": f"{PUB}/alpha/SKILL.md", "data": "IyBhbHBoYQo="})
    vm.result("files.mkdir", {"path": PRIV, "parents": True})
    r = vm.result("skills.sync")
    assert r["linked"] == 1 and "error" not in r, r
    vm.wait_for(lambda: (lambda f: f["checks"] >= 2 and f["restarts"] >= 2)(figures(vm)),
                timeout=60, what="health checks and restarts under way")
    vm.result("events.subscribe", {})

    # The host steps the guest's clock back an hour (its own clock was
    # corrected, say): hearth steps it and says by how much.
    before = figures(vm)
    wall = time.time()
    target = wall - 3600
    r = vm.result("time.sync", {"sec": int(target), "nsec": int((target % 1) * 1e9)})
    assert r["action"] == "stepped", r
    assert -HOUR_MS - 5000 < r["offset_ms"] < -HOUR_MS + 5000, r
    # Nothing driven by a timer noticed.
    after = goes_on(vm, before, 5)
    # Event stamps: the wall time went back, the monotonic one on.
    evs = [e for e in vm.ctl.events if "mono_ms" in e]
    assert evs, "no events seen"
    assert all(abs(e["time_ms"] - (time.time() - 3600) * 1000) < 60000 for e in evs[-3:]), evs[-3:]
    monos = [e["mono_ms"] for e in evs]
    assert monos == sorted(monos)

    # A resume without a time leaves the clock as the host set it ...
    r = vm.result("sandbox.resume", {})
    t = {s["name"]: s for s in r["steps"]}["time"]
    assert t["result"] == "skipped" and t["detail"] == "no time given", t
    assert r["resume_file"]["clock_stepped"] is False and r["resume_file"]["paused_ms"] < 5000, r
    after = goes_on(vm, after, 4)
    # ... and one with the host's time puts it an hour forward again. A
    # clock found behind reads as time the guest did not run: the resume
    # file says an hour was missed.
    now = time.time()
    r = vm.result("sandbox.resume", {"time": {"sec": int(now), "nsec": int((now % 1) * 1e9)}})
    t = {s["name"]: s for s in r["steps"]}["time"]
    assert t["source"] == "host" and t["clock"]["action"] == "stepped", t
    assert HOUR_MS - 5000 < t["clock"]["offset_ms"] < HOUR_MS + 5000, t
    assert r["resume_file"]["clock_stepped"] is True, r["resume_file"]
    assert HOUR_MS - 5000 < r["resume_file"]["paused_ms"] < HOUR_MS + 5000, r["resume_file"]
    after = goes_on(vm, after, 4)

    # A resume whose host time is behind the guest's (the host's clock
    # went back): stepped back, and no negative pause.
    target = time.time() - 600
    r = vm.result("sandbox.resume", {"time": {"sec": int(target), "nsec": 0}})
    t = {s["name"]: s for s in r["steps"]}["time"]
    assert t["source"] == "host" and t["clock"]["action"] == "stepped", t
    assert t["clock"]["offset_ms"] < -590000, t
    assert r["resume_file"]["clock_stepped"] is True and r["resume_file"]["paused_ms"] == 0, r
    after = goes_on(vm, after, 4)
    vm.result("time.sync", {"sec": int(time.time()), "nsec": 0})

    # Someone in the guest steps the clock back an hour (date -s): hearth
    # notices the step itself (its timerfd is cancelled), runs the resume
    # steps with cause clock_step, and the hardware clock puts the time
    # right again.
    time.sleep(1.2)  # past the second after a resume in which detections only log
    last = vm.result("status")["last_resume"]
    vm.result("files.write", {"path": CLOCK_GO, "data": ""})
    vm.wait_for(lambda: "clockback" in attack_results(vm, "stepper"), what="the step")
    assert attack_results(vm, "stepper")["clockback"] == "ok"
    lr = vm.wait_for(lambda: (lambda x: x if x != last and x["cause"] == "clock_step" else None)(
        vm.result("status")["last_resume"]), timeout=20, what="resume with cause clock_step")
    t = {s["name"]: s for s in lr["steps"]}["time"]
    assert t["source"] == "rtc0" and t["clock"]["action"] == "stepped", lr
    assert HOUR_MS - 5000 < t["clock"]["offset_ms"] < HOUR_MS + 5000, t
    assert lr["resume_file"]["clock_stepped"] is True, lr
    ev = vm.wait_for(lambda: vm.result("ping") == {} and
                     [e for e in vm.ctl.events if e.get("type") == "resume" and
                      e.get("cause") == "clock_step"], what="resume event")[0]
    assert ev["resume_file"]["generation"] == lr["resume_file"]["generation"]
    goes_on(vm, figures(vm), 4)
    # The guest's clock is the host's again.
    assert abs(vm.result("metrics")["time_ms"] - time.time() * 1000) < 5000
    st = vm.result("status")
    assert st["pid"] == 1 and st["phase"] == "running"


def test_oom_killed_agent_is_restarted_with_the_reason(faults):
    vm = faults
    assert vm.service("hog")["state"] == "running" and vm.service("hog")["oom_kills"] == 0
    vm.result("events.subscribe", {})
    vm.result("files.write", {"path": HOG_GO, "data": ""})

    def exits():
        return [e for e in vm.ctl.events if e.get("type") == "service.state" and
                e.get("service") == "hog" and e.get("state") == "backoff"]
    vm.wait_for(lambda: vm.result("ping") == {} and len(exits()) >= 2, timeout=120,
                what="two OOM kills of hog")
    for e in exits()[:2]:
        assert e["last_exit"] == {"signal": "SIGKILL", "reason": "oom-killed"}, e
        assert e["error"] == "killed by SIGKILL (out of memory)", e
    ooms = [e for e in vm.ctl.events if e.get("type") == "service.oom"]
    assert ooms and ooms[0]["service"] == "hog" and ooms[0]["oom_kills"] >= 1, ooms
    # Restarted after each, and status says why the last run ended.
    s = vm.wait_for(lambda: (lambda x: x if x["restarts"] >= 2 else None)(vm.service("hog")),
                    what="hog restarted")
    assert s["last_exit"] == {"signal": "SIGKILL", "reason": "oom-killed"}, s
    assert s["oom_kills"] >= 2 and s["error"] == "killed by SIGKILL (out of memory)", s
    # Each run got as far as its limit allows, in its own cgroup.
    r = attack_results(vm, "hog")
    assert r["touched"] and max(r["touched"]) < 32 and "done" not in r, r
    # An exit that was no OOM kill says nothing of memory.
    crash = vm.service("crash")
    assert crash["last_exit"] == {"code": 2}, crash
    st = vm.result("status")
    assert st["pid"] == 1 and st["phase"] == "running"
    assert vm.service("ticker")["restarts"] == 0
