"""The agent's home full (ENOSPC) while hearth writes its own state there:
the resume file, a service's log file, a seed, a service's secrets file
and the skills links. Each is reported (an event naming the path and the
kernel's reason), leaves nothing half written (what was there before is
whole) and works again once there is room, without a restart of hearth.

The home is a small tmpfs hearth itself mounts in its own mount namespace
(a `mounts` entry with `size=`); the test fills and frees it from inside
that namespace (nsenter), as the agent would."""
import json
import os
import re
import subprocess
import time

KEEP = {"name": "keep", "argv": ["sleep", "1000"], "main": True}
ENOSPC = os.strerror(28)  # "No space left on device"
STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z"


def in_ns(h, script):
    """Runs script in hearth's mount namespace, where the home is."""
    r = subprocess.run(["nsenter", "-t", str(h.pid), "-m", "sh", "-c", script],
                       capture_output=True, text=True, timeout=30)
    return r.returncode, r.stdout + r.stderr


def fill(h, path):
    """Fills the filesystem of path with the file path, to the last block."""
    rc, out = in_ns(h, f"cat /dev/zero > {path}")
    assert rc != 0 and "No space left" in out, out
    rc, out = in_ns(h, f"df -k {os.path.dirname(path)} | tail -1")
    assert out.split()[3] == "0", out


def read(h, path):
    rc, out = in_ns(h, f"cat {path}")
    assert rc == 0, out
    return out


def listing(h, d):
    rc, out = in_ns(h, f"ls -A {d}")
    assert rc == 0, out
    return sorted(out.split())


def home_cfg(h, home, size="256k", **extra):
    return h.config(mounts=[{"target": home, "type": "tmpfs", "options": f"size={size},mode=0755"}],
                    **extra)


def subscribe(h):
    c = h.client(timeout=30)
    c.result("events.subscribe", {"since": 0})
    return c


def next_event(c, pred, timeout=20.0, what="event"):
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        msg = c.read_line()
        if msg.get("method") != "event":
            continue
        e = msg["params"]
        seen.append(e)
        if pred(e):
            return e
    raise AssertionError(f"no {what}; saw {[x['type'] for x in seen]}")


def test_resume_file_on_a_full_home_keeps_the_last_generation(hearth, tmp_path):
    home = str(tmp_path / "home")
    os.mkdir(home)
    news = f"{home}/news/resume"
    hearth.start(home_cfg(hearth, home, services=[KEEP], resume_file=news))
    first = json.loads(read(hearth, news))
    assert first["generation"] == 0
    fill(hearth, f"{home}/filler")
    c = subscribe(hearth)
    r = hearth.rpc("sandbox.resume", {})
    # Reported in the reply, the resume event and status, with the path.
    rf = r["resume_file"]
    assert rf["path"] == news and rf["generation"] == 1, rf
    assert rf["error"] == f"write: {ENOSPC}", rf
    ev = next_event(c, lambda e: e["type"] == "resume", what="resume event")
    assert ev["resume_file"]["error"] == rf["error"] and ev["resume_file"]["path"] == news
    assert hearth.rpc("status")["last_resume"]["resume_file"]["error"] == rf["error"]
    # The file is the last one written, whole; no temporary file is left.
    assert json.loads(read(hearth, news)) == first
    assert listing(hearth, f"{home}/news") == ["resume"]
    # A host's files.write there fails the same way, and changes nothing.
    e = hearth.client().call("files.write", {"path": news, "data": "AAAA"})["error"]
    assert news in e["message"] and ENOSPC in e["message"], e
    assert json.loads(read(hearth, news)) == first
    assert listing(hearth, f"{home}/news") == ["resume"]
    # Room again: the next resume writes its generation, without error.
    assert in_ns(hearth, f"rm {home}/filler")[0] == 0
    r = hearth.rpc("sandbox.resume", {})
    assert "error" not in r["resume_file"] and r["resume_file"]["generation"] == 2, r
    now = json.loads(read(hearth, news))
    assert now["generation"] == 2 and now["cause"] == "host"
    assert "error" not in hearth.rpc("status")["last_resume"]["resume_file"]
    c.close()


def test_log_file_on_a_full_home(hearth, tmp_path):
    home = str(tmp_path / "home")
    os.mkdir(home)
    log = f"{home}/logs/agent.log"
    talk = ('i=0; while :; do echo "line $i"; i=$((i+1)); '
            'case $i in *0) sleep 0.05;; esac; done')
    hearth.start(home_cfg(hearth, home, size="128k", services=[
        KEEP, {"name": "agent", "argv": ["sh", "-c", talk], "after": ["mounts"],
               "log": {"file": log, "max_bytes": 0}}]))
    c = subscribe(hearth)
    hearth.wait_for(lambda: hearth.service("agent")["output_lines"] > 100, what="output")
    lf = hearth.service("agent")["log_file"]
    assert lf == {"path": log, "lines_lost": 0}, lf
    fill(hearth, f"{home}/filler")
    ev = next_event(c, lambda e: e["type"] == "service.log_file", what="service.log_file")
    assert ev["service"] == "agent" and ev["path"] == log, ev
    assert ev["error"] == f"unable to write {log}: {ENOSPC}", ev
    st = hearth.service("agent")
    assert st["log_file"]["error"] == ev["error"] and st["state"] == "running"
    # Lines go on into the ring while none reaches the file; hearth says
    # so once, not once per line.
    n = st["output_lines"]
    hearth.wait_for(lambda: hearth.service("agent")["log_file"]["lines_lost"] > 500,
                    what="lines lost")
    assert hearth.service("agent")["output_lines"] > n
    assert hearth.log_text().count(f"logring: unable to write {log}") == 1
    assert hearth.rpc("ping") == {}
    # Room again: the next line goes in and the error is gone.
    assert in_ns(hearth, f"rm {home}/filler")[0] == 0
    ok = next_event(c, lambda e: e["type"] == "service.log_file", what="recovery")
    assert ok["service"] == "agent" and "error" not in ok and ok["lines_lost"] > 500, ok
    lost = ok["lines_lost"]
    lf = hearth.service("agent")["log_file"]
    assert "error" not in lf and lf["lines_lost"] == lost
    assert f"logring: {log} is written again" in hearth.log_text()
    hearth.wait_for(lambda: len(read(hearth, log).splitlines()) > lost // 10, what="more lines")
    # Nothing in the file was spoilt: every line is a whole one, or the one
    # the full disk cut short, ended before the next; the numbers rise,
    # with one gap, the lines lost.
    whole = re.compile(STAMP + r" line (\d+)")
    nums, cut = [], []
    for line in read(hearth, log).splitlines():
        m = whole.fullmatch(line)
        if m:
            nums.append(int(m.group(2)))
        else:
            cut.append(line)
            assert re.fullmatch(r"\d[\d:.TZ-]* ?(l(i(n(e( \d*)?)?)?)?)?", line), line
    assert len(cut) <= 1, cut
    assert nums == sorted(nums) and len(set(nums)) == len(nums)
    gaps = [(a, b) for a, b in zip(nums, nums[1:]) if b != a + 1]
    assert len(gaps) == 1, gaps
    assert gaps[0][1] - gaps[0][0] - 1 == lost, (gaps, lost)
    c.close()


def _template(tmp_path, big):
    t = tmp_path / "tmpl"
    (t / "memories").mkdir(parents=True)
    (t / "memories" / "MEMORY.md").write_text("# memory\n")
    (t / "blob").write_bytes(b"x" * big)
    (t / "config.yaml").write_text("model: default\n")
    return t


def test_seed_that_does_not_fit_is_completed_when_room_returns(hearth, tmp_path):
    home = str(tmp_path / "home")
    os.mkdir(home)
    tmpl = _template(tmp_path, 300 * 1024)
    hearth.start(home_cfg(hearth, home, size="256k", services=[KEEP],
                          seed=[{"target": home, "from": str(tmpl), "unless": "config.yaml"}]))
    c = subscribe(hearth)
    ev = next_event(c, lambda e: e["type"] == "seed.failed", what="seed.failed")
    assert ev["target"] == home and ev["result"] == "failed", ev
    assert ev["error"].startswith("unable to copy ") and ev["error"].endswith(ENOSPC), ev
    assert "blob" in ev["error"], ev
    assert hearth.rpc("mounts.list")["seed"][0]["result"] == "failed"
    # Nothing half made: the marker says the seed is unfinished, the flag
    # file copied last is absent, no temporary file is left, and what was
    # copied is whole.
    names = listing(hearth, home)
    assert ".hearth-seeding" in names and "config.yaml" not in names, names
    assert ".hearth-copy.tmp" not in names and "blob" not in names, names
    if "memories" in names:
        assert read(hearth, f"{home}/memories/MEMORY.md") == "# memory\n"
    # It is tried again on its own, failing while there is no room ...
    again = next_event(c, lambda e: e["type"] == "seed.failed", what="a retry")
    assert again["error"] == ev["error"]
    # ... and completed once there is.
    assert in_ns(hearth, f"mount -o remount,size=1m {home}")[0] == 0
    done = next_event(c, lambda e: e["type"] == "seed.done", timeout=30, what="seed.done")
    assert done["target"] == home and done["result"] == "seeded", done
    assert sorted(listing(hearth, home)) == ["blob", "config.yaml", "memories"]
    assert read(hearth, f"{home}/config.yaml") == "model: default\n"
    rc, out = in_ns(hearth, f"cmp {home}/blob {tmpl}/blob && echo same")
    assert out.strip() == "same", out
    assert hearth.rpc("mounts.list")["seed"][0]["result"] == "seeded"
    # Done: no more tries.
    tries = hearth.log_text().count("seed: trying the failed entries again")
    assert tries >= 2
    time.sleep(2.5)
    assert hearth.log_text().count("seed: trying the failed entries again") == tries
    c.close()


def test_secrets_file_on_a_full_home(hearth, tmp_path):
    home = str(tmp_path / "home")
    os.mkdir(home)
    env = f"{home}/.env"
    agent = {"name": "agent", "argv": ["sh", "-c", f'. {env}; echo "key=${{#API_KEY}} $KEEP"; '
                                       "exec sleep 1000"],
             "after": ["init"], "secrets": [{"env": "API_KEY", "file": env}],
             "backoff": {"initial_ms": 300, "max_ms": 300}}
    hearth.start(home_cfg(hearth, home, services=[KEEP, agent],
                          wait_for_init={"enabled": True}))
    assert in_ns(hearth, f"printf 'KEEP=kept\\n' > {env}")[0] == 0
    fill(hearth, f"{home}/filler")
    c = subscribe(hearth)
    hearth.rpc("sandbox.init", {})
    ev = next_event(c, lambda e: e["type"] == "service.state" and e["service"] == "agent"
                    and e["state"] == "backoff", what="the failed start")
    assert ev["error"].startswith(f"services[1].secrets[0] {env}: ") and ENOSPC in ev["error"], ev
    assert [x["state"] for x in hearth.service("agent")["secrets"]] == ["failed"]
    # The file is as it was; no temporary file is left.
    assert read(hearth, env) == "KEEP=kept\n"
    assert sorted(listing(hearth, home)) == [".env", "filler"]
    # Room again: the next start makes the key, keeping what was there.
    assert in_ns(hearth, f"rm {home}/filler")[0] == 0
    hearth.wait_for(lambda: hearth.service("agent")["state"] == "running", what="agent running")
    s = hearth.service("agent")
    assert s["secrets"][0]["state"] == "generated" and s["restarts"] >= 1
    text = read(hearth, env)
    assert re.fullmatch(r"KEEP=kept\nAPI_KEY=[A-Za-z0-9_-]+\n", text), text
    hearth.wait_for(lambda: [l["line"] for l in hearth.rpc("logs.read", {"name": "agent"})["lines"]]
                    == [f"key={len(text.splitlines()[1]) - 8} kept"], what="agent output")
    c.close()


def test_skills_links_on_a_home_out_of_inodes(hearth, tmp_path):
    home = str(tmp_path / "home")
    os.mkdir(home)
    pub = tmp_path / "pub"
    for n in ("alpha", "beta"):
        (pub / n).mkdir(parents=True)
        (pub / n / "SKILL.md").write_text(f"# {n}\n")
    priv = f"{home}/skills"
    hearth.start(hearth.config(
        mounts=[{"target": home, "type": "tmpfs", "options": "size=1m,nr_inodes=32,mode=0755"}],
        services=[KEEP], skills={"public": str(pub), "private": priv}))
    hearth.wait_for(lambda: hearth.rpc("status")["phases"]["skills"], what="first overlay")
    assert sorted(listing(hearth, priv)) == ["alpha", "beta"]
    # Every inode taken: a link is a new inode.
    in_ns(hearth, f"mkdir {home}/f; i=0; while touch {home}/f/$i 2>/dev/null; do i=$((i+1)); done")
    for n in ("gamma", "delta"):
        (pub / n).mkdir()
        (pub / n / "SKILL.md").write_text(f"# {n}\n")
    c = subscribe(hearth)
    r = hearth.rpc("skills.sync")
    assert r["errors"] >= 1 and r["public"] == 4, r
    assert r["error"].startswith(f"unable to link {priv}/") and r["error"].endswith(ENOSPC), r
    ev = next_event(c, lambda e: e["type"] == "skills.sync" and "error" in e, what="skills.sync")
    assert ev["error"] == r["error"]
    assert hearth.rpc("status")["skills"]["error"] == r["error"]
    # What was linked stays; nothing half made is left.
    names = listing(hearth, priv)
    assert {"alpha", "beta"} <= set(names) and not [n for n in names if n.startswith(".")], names
    assert os.readlink(f"/proc/{hearth.pid}/root{priv}/alpha") == f"{pub}/alpha"
    # Room again: the next run links the rest, and the error is gone.
    assert in_ns(hearth, f"rm -r {home}/f")[0] == 0
    r = hearth.rpc("skills.sync")
    assert r["errors"] == 0 and "error" not in r and r["linked"] == 4, r
    assert sorted(listing(hearth, priv)) == ["alpha", "beta", "delta", "gamma"]
    assert "error" not in hearth.rpc("status")["skills"]
    c.close()
