#!/usr/bin/env python3
"""make soak: a month of one Hermes sandbox's life, compressed.

One hearth runs the shipped Hermes config (rootfs/hermes/hearth.json, the
stand-in agent in Hermes's place) while this script puts a month's worth
of what happens to a resident sandbox through it:

  720 freeze/resume cycles, the time handed to sandbox.resume stepped
      forward half an hour (a day every 48th cycle: some 29 days in all)
      and once six hours backward; each resume restarts the agent
      gracefully (the shipped on_resume, SIGUSR1)
  43,200 health checks and skills polls (the config's 60 s periods
      shortened to 50 ms: a month of them in 36 minutes)
  100 agent crashes (SIGKILL to the agent) and 100 graceful restarts
      (services.restart with SIGUSR1)
  1,000,000 log lines through rotation (a chatty service beside the agent)
  100,000 control connections: most ask and read, some never read (a
      follower of the chatty service's log, a client pipelining status
      calls), some drop the connection mid-line or before a word
  public skills added and removed, one each per cycle
  the home's disk (a tmpfs of 24 MiB) filled to ENOSPC and freed again

Each count is scaled by --scale (SOAK_SCALE; 1 = the month). The run's
length follows from the checks: 43,200 x scale periods of 50 ms, i.e. 36
minutes at scale 1; the rest of the workload is spread evenly over it.

Two ways to run it (--mode):
  supervisor  build/hearth --mode supervisor as PID 1 of fresh pid, mount,
              network, uts and ipc namespaces (as tests/integration runs
              it), the shipped config's paths moved below a scratch
              directory. The clock is never set: clock.set is false
              outside a VM, and hearth reports the step it would make.
  vm          the vmtest image (tests/vm) under QEMU with the shipped
              config's machine sections made QEMU's (tests/vm/
              hermes_config.py); the guest's clock is stepped. The only
              control channel is one virtio-serial stream, so the
              connection churn there is sessions begun and ended.

Recorded before the workload, every --sample-pct percent of it (but no
more often than every 10 s) and after it: hearth's RSS, open descriptors,
cgroups under its tree, the mounts it made, wake-ups a second over two
quiet seconds (the pinger and the churn held, the chatty service stopped:
what is left is its timers, i.e. the health checks, the skills poll and
the disk check), its child processes, the services' log files, and ping
latency (p50, p99) between samples. Events are followed throughout on one
subscription (resumed with `since` when the connection drops) and every
seq checked.

The verdict (FLAT and verdict() below): every figure flat after warm-up,
no event lost, a freeze and a resume event for each call, every resume
report ok, a disk.low event for each fill, the logs within their rotation
bounds, no control connection refused. Each figure goes to
build/soak/MODE/FIGURE.csv, the summary to build/soak/MODE/summary.json
(beside hearth's log, or the VM's console) and rows into build/bench.json
(merged with what is there). Exit status
1 names each figure that failed."""
import argparse
import errno
import faulthandler
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.join(ROOT, "build")
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
import hearthrpc  # noqa: E402
import pidns  # noqa: E402

SHIPPED = os.path.join(ROOT, "rootfs", "hermes", "hearth.json")

# The month at scale 1.
MONTH = {"cycles": 720, "checks": 43200, "crashes": 100, "graceful": 100,
         "lines": 1_000_000, "connections": 100_000}
# The soak copy's skills.poll_ms: the run lasts 43,200 x scale of them.
# The health checks come twice as often (25 divides 50: they share the
# timer grid's wake-ups), since the agent is down for about a third of
# the run (each resume restarts it, and the crashes and restarts), and a
# check is made only while it runs.
PERIOD_MS = 50
HEALTH_MS = 25
# Seconds a sample holds the workload (settling, then the quiet seconds).
QUIET_S = 2.5
HOME_BYTES = 24 << 20   # the home's tmpfs
# Log rotation in the soak's copy: small enough that every scale rotates
# the chatty log many times. The bound judged is (keep + 1) x max_bytes
# plus one line.
LOGS = {"hermes": (65536, 3), "web-ui": (16384, 2), "chatty": (262144, 2)}


# ---------------------------------------------------------------- the plan

class Plan:
    def __init__(self, scale, sample_pct):
        self.scale = scale
        n = {k: v * scale for k, v in MONTH.items()}
        # At least two of each disruptive kind per quarter of the run, so
        # that the second and the last quarter both see them.
        self.cycles = max(8, round(n["cycles"]))
        self.crashes = max(4, round(n["crashes"]))
        self.graceful = max(4, round(n["graceful"]))
        self.fills = max(4, round(16 * scale))
        self.lines = round(n["lines"])
        self.connections = max(100, round(n["connections"]))
        self.checks = round(n["checks"])
        self.duration = self.checks * PERIOD_MS / 1000.0
        # Every sample_pct of the cycles, but no more often than every
        # 10 s: a sample holds the workload for its quiet seconds.
        every_s = max(10.0, self.duration * sample_pct / 100.0)
        samples = max(8, min(round(100 / sample_pct), round(self.duration / every_s)))
        self.sample_every = max(1, round(self.cycles / samples))
        # The chatty service is stopped for each sample's quiet seconds:
        # its rate makes up for them (at most doubled at small scales).
        quiet = self.cycles // self.sample_every * QUIET_S
        self.rate = max(1, round(self.lines / max(self.duration / 2, self.duration - quiet)))

    def at(self, count, step):
        """How many of count fall due by the end of step (0-based),
        spread evenly, the first one in the first step."""
        return (count * (step + 1) + self.cycles - 1) // self.cycles

    def describe(self):
        return (f"scale {self.scale:g}: {self.cycles} freeze/resume cycles, ~{self.checks} health "
                f"checks and skills polls ({HEALTH_MS} and {PERIOD_MS} ms over {self.duration:.0f} s), "
                f"{self.crashes} crashes, {self.graceful} graceful restarts, "
                f"~{self.lines} log lines ({self.rate}/s), {self.connections} control "
                f"connections, {self.cycles} public skills added and removed, "
                f"{self.fills} disk fills")


def clock_step_s(cycle, cycles):
    """How far the time handed to resume moves at this cycle: half an hour,
    a day every 48th, six hours back once in the middle."""
    if cycle == cycles // 2:
        return -6 * 3600
    if cycle % 48 == 47:
        return 24 * 3600
    return 1800


# ------------------------------------------------------------- the config

def soak_config(cfg, chatty_argv):
    """The soak's copy of a Hermes config: periods shortened, logs rotated
    small, the chatty service added, backoff compressed like the rest of
    the month (a crash every twenty seconds would otherwise keep the agent
    in its 30 s backoff for good). Everything else as shipped."""
    cfg = json.loads(json.dumps(cfg))
    cfg["skills"]["poll_ms"] = PERIOD_MS
    cfg["metrics"] = {"disk_check_ms": 500}
    by = {s["name"]: s for s in cfg["services"]}
    h = by["hermes"]
    h["health"]["interval_ms"] = HEALTH_MS
    h["backoff"] = {"initial_ms": 100, "max_ms": 2000, "reset_after_ms": 1000}
    for name, (size, keep) in LOGS.items():
        if name in by:
            by[name]["log"]["max_bytes"] = size
            by[name]["log"]["keep"] = keep
    logs = os.path.dirname(h["log"]["file"])
    cfg["services"].append({
        "name": "chatty", "argv": chatty_argv, "after": ["hermes"], "restart": "always",
        "log": {"file": os.path.join(logs, "chatty.out"), "max_bytes": LOGS["chatty"][0],
                "keep": LOGS["chatty"][1]}})
    return cfg


def supervisor_config(run, soak_bin, rate):
    """The shipped config for a hearth in fresh namespaces on this host:
    its paths below run, its machine sections (modules, network, the
    virtio-fs shares) replaced by what stands for them here (a tmpfs
    home, bind mounts of a workspace and of the public skills), the image's
    hermes user by nobody (this host has no hermes)."""
    with open(SHIPPED) as f:
        cfg = json.load(f)
    home, ws, skills = (os.path.join(run, d) for d in ("home", "workspace", "skills"))
    tpl = os.path.join(run, "home-template")

    def moved(text):
        return (text.replace("/root/.hermes", home).replace("/workspace", ws)
                .replace("/opt/hermes-common-skills", skills))

    cfg = json.loads(moved(json.dumps(cfg)))
    cfg["control"] = {"listen": ["unix:" + os.path.join(run, "ctl", "control.sock")]}
    for k in ("modules", "network"):
        cfg.pop(k, None)
    cfg["host_mounts_rule"] = {"owner": "nobody"}
    cfg["mounts"] = [
        {"source": "tmpfs", "target": home, "type": "tmpfs", "owner": "nobody",
         "options": f"size={HOME_BYTES},mode=0700"},
        {"source": os.path.join(run, "workspace-src"), "target": ws, "type": "bind",
         "owner": "nobody"},
        {"source": os.path.join(run, "skills-src"), "target": skills, "type": "bind",
         "read_only": True}]
    cfg["seed"][0]["from"] = tpl
    cfg["seed"][0]["user"] = "nobody"
    cfg["resume_file"] = os.path.join(run, "news", "resume")
    for s in cfg["services"]:
        s["user"] = "nobody"
        s["argv"][0] = os.path.join(soak_bin, s["argv"][0])
    return soak_config(cfg, [os.path.join(soak_bin, "chatty"), str(rate)])


def home_template(dst):
    """The image's home template (rootfs/stage-hermes.sh)."""
    shutil.copytree(os.path.join(ROOT, "rootfs", "hermes", "home"), dst)
    for d in ("memories", "skills", "sessions", "logs", "home", "cron", "hooks"):
        os.makedirs(os.path.join(dst, d), exist_ok=True)


# ------------------------------------------------------------ measurement

def percentile(xs, p):
    if not xs:
        return None
    xs = sorted(xs)
    k = min(len(xs) - 1, max(0, int(round(p / 100.0 * (len(xs) - 1)))))
    return xs[k]


class Pinger(threading.Thread):
    """Pings on a connection of its own every 20 ms; latencies kept per
    sample window. Paused for the quiet seconds."""

    def __init__(self, connect):
        super().__init__(daemon=True)
        self.connect = connect
        self.lat = []
        self.lock = threading.Lock()
        self.run_ev = threading.Event()
        self.run_ev.set()
        self.stop = False
        self.errors = 0

    def take(self):
        with self.lock:
            out, self.lat = self.lat, []
        return out

    def run(self):
        c = None
        while not self.stop:
            self.run_ev.wait()
            try:
                if c is None:
                    c = self.connect()
                t = time.perf_counter()
                c.result("ping")
                dt = (time.perf_counter() - t) * 1000.0
                with self.lock:
                    self.lat.append(dt)
            except (OSError, EOFError, AssertionError, ValueError):
                self.errors += 1
                if c:
                    c.close()
                c = None
            time.sleep(0.02)
        if c:
            c.close()


class Events(threading.Thread):
    """One subscription for the whole run: every seq must follow the one
    before. A dropped connection is resumed with since; what hearth no
    longer keeps then shows as a gap."""

    def __init__(self, connect):
        super().__init__(daemon=True)
        self.connect = connect
        self.last = None
        self.count = 0
        self.gaps = []
        self.types = {}
        self.reconnects = 0
        self.dropped = 0
        self.stop = False
        self.lock = threading.Lock()
        self.kept = []  # the events the checks look at
        self.ready = threading.Event()

    def of(self, *types):
        with self.lock:
            return [e for e in self.kept if e["type"] in types]

    def run(self):
        while not self.stop:
            try:
                c = self.connect()
                c.ls.sock.settimeout(1.0)
                params = {"since": self.last} if self.last is not None else {"since": 0}
                c.result("events.subscribe", params)
                self.ready.set()
                while not self.stop:
                    try:
                        msg = c.read_line()
                    except socket.timeout:
                        continue
                    if msg.get("method") == "dropped":
                        self.dropped += 1
                        continue
                    if msg.get("method") != "event":
                        continue
                    self.take(msg["params"])
                c.close()
            except (OSError, EOFError, AssertionError, ValueError):
                if self.stop:
                    break
                self.reconnects += 1
                time.sleep(0.1)

    def take(self, e):
        seq = e["seq"]
        with self.lock:
            if self.last is not None and seq != self.last + 1:
                if seq <= self.last:
                    return  # a replay overlap: seen already
                self.gaps.append((self.last, seq))
            self.last = seq
            self.count += 1
            self.types[e["type"]] = self.types.get(e["type"], 0) + 1
            if e["type"] in ("freeze", "resume", "disk.low", "disk.ok", "service.state",
                             "skills.sync", "service.health"):
                self.kept.append(e)


# --------------------------------------------------------------- the hosts

class SupervisorHost:
    """hearth as PID 1 of fresh namespaces (tests/integration/conftest.py)."""
    mode = "supervisor"

    def __init__(self, plan, work):
        self.plan = plan
        self.run = work
        self.sock = os.path.join(work, "ctl", "control.sock")
        self.proc = None
        self.hpid = None
        self.cg_tree = None
        self.inherited = None

    def setup(self):
        soak_bin = os.path.join(BUILD, "soak")
        for d in ("ctl", "home", "workspace", "skills", "workspace-src", "skills-src", "news"):
            os.makedirs(os.path.join(self.run, d), exist_ok=True)
        home_template(os.path.join(self.run, "home-template"))
        os.chmod(self.run, 0o755)
        for i in range(20):
            write_skill(os.path.join(self.run, "skills-src"), f"base-{i}")
        for prog in ("hermes", "hermes-web-ui", "chatty"):
            if not os.path.exists(os.path.join(soak_bin, prog)):
                raise SystemExit(f"soak: {soak_bin}/{prog} is missing: run make soak "
                                 "(tests/soak/run.sh builds it)")
        cfg = supervisor_config(self.run, soak_bin, self.plan.rate)
        self.cfg = cfg
        self.home = os.path.join(self.run, "home")
        self.skills_src = os.path.join(self.run, "skills-src")
        path = os.path.join(self.run, "hearth.json")
        with open(path, "w") as f:
            json.dump(cfg, f, indent=1)
        self.log = open(os.path.join(self.run, "hearth.log"), "wb")
        # A fresh network namespace has its loopback down; the agent's
        # API server, probed by hearth, listens there. sh execs hearth,
        # which so stays PID 1 of the namespace.
        cmd = ["unshare", "--pid", "--fork", "--mount", "--net", "--uts", "--ipc", "--mount-proc",
               "sh", "-c", 'ip link set lo up && exec "$0" "$@"',
               os.path.join(BUILD, "hearth"), "--mode", "supervisor", "-c", path, "--log", "info"]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        deadline = time.monotonic() + 30
        while True:
            if self.proc.poll() is not None:
                raise SystemExit("soak: hearth exited at start:\n" + self.log_tail())
            try:
                c = self.client(2)
                c.result("ping")
                c.close()
                break
            except (OSError, EOFError):
                if time.monotonic() > deadline:
                    raise SystemExit("soak: hearth did not answer:\n" + self.log_tail())
                time.sleep(0.05)
        with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") as f:
            self.hpid = int(f.read().split()[0])
        # Where hearth's own mount namespace shows the home (a tmpfs only
        # hearth and its services see).
        self.home_view = f"/proc/{self.hpid}/root{self.home}"

    start_timeout = 60.0

    def follow_events(self, events):
        events.start()
        events.ready.wait(20)

    def ping_client(self):
        return self.client(10)

    def churn(self, total, duration):
        return Churn(self, total, duration)

    def log_tail(self):
        return self.log_text()[-4000:]

    def log_text(self):
        try:
            with open(os.path.join(self.run, "hearth.log"), "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def client(self, timeout=10.0):
        return hearthrpc.unix_client(self.sock, timeout)

    def rpc(self, method, params=None, timeout=30.0):
        c = self.client(timeout)
        try:
            return c.result(method, params)
        finally:
            c.close()

    def crash_agent(self):
        """SIGKILL to the agent itself (the program, not its namespace's
        reaper): the crash an OOM kill or a segfault makes."""
        s = self.service("hermes")
        if s["state"] != "running" or not s["pid"]:
            return False
        p = pidns.host_pid(s["pid"], self.hpid)
        if p is None:
            return False
        try:
            if open(f"/proc/{p}/comm").read().strip() == "hearth-reaper":
                kids = open(f"/proc/{p}/task/{p}/children").read().split()
                if not kids:
                    return False
                p = int(kids[0])
            os.kill(p, signal.SIGKILL)
        except OSError:
            return False
        return True

    def service(self, name):
        for s in self.rpc("services.list")["services"]:
            if s["name"] == name:
                return s
        raise KeyError(name)

    def figures(self):
        p = self.hpid
        out = {}
        with open(f"/proc/{p}/status") as f:
            st = {l.split(":")[0]: l.split(":", 1)[1].strip() for l in f}
        out["rss_kib"] = int(st["VmRSS"].split()[0])
        # Memory musl's allocator gave back with MADV_FREE: still counted
        # in RSS until the kernel needs it.
        try:
            with open(f"/proc/{p}/smaps_rollup") as f:
                out["lazyfree_kib"] = next(int(l.split()[1]) for l in f
                                           if l.startswith("LazyFree:"))
        except (OSError, StopIteration):
            pass
        out["fds"] = len(os.listdir(f"/proc/{p}/fd"))
        out["mounts"] = self.own_mounts()
        out["children"] = len(descendants(p))
        out["cgroups"] = self.cgroups()
        out.update(log_sizes(os.path.join(self.home_view, "logs")))
        return out

    def own_mounts(self):
        """The mounts of hearth's namespace that are its own: those below
        the scratch directory (the config's) and any that appeared after
        the first look. The copies of the host's mounts it inherited are
        left out: on a shared machine the host's come and go (a container
        started or stopped elsewhere), and the copies with them."""
        with open(f"/proc/{self.hpid}/mountinfo") as f:
            rows = [(l.split()[0], l.split()[4]) for l in f]
        mine = lambda mp: mp == self.run or mp.startswith(self.run + "/")
        if self.inherited is None:
            self.inherited = {mid for mid, mp in rows if not mine(mp)}
        return sum(1 for mid, mp in rows if mine(mp) or mid not in self.inherited)

    def cgroups(self):
        if self.cg_tree is None:
            for s in self.rpc("services.list")["services"]:
                if s.get("cgroup"):
                    self.cg_tree = os.path.dirname(os.path.dirname(s["cgroup"]))
                    break
        if not self.cg_tree:
            return None
        return sum(len(d) for _, d, _ in os.walk(self.cg_tree)) + 1

    def rss_kib(self):
        with open(f"/proc/{self.hpid}/status") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))

    def wakeups(self):
        with open(f"/proc/{self.hpid}/status") as f:
            for l in f:
                if l.startswith("voluntary_ctxt_switches:"):
                    return int(l.split()[1])

    def stop(self):
        if self.proc and self.proc.poll() is None:
            # hearth itself (unshare's child) when it is known: killing
            # only unshare would leave it running without a parent.
            try:
                os.kill(self.hpid or self.proc.pid, signal.SIGTERM)
                self.proc.wait(60)
            except (OSError, subprocess.TimeoutExpired):
                try:
                    os.kill(self.hpid or self.proc.pid, signal.SIGKILL)
                except OSError:
                    pass
                self.proc.kill()
                self.proc.wait()
        if self.cg_tree and os.path.isdir(self.cg_tree):
            for root, dirs, _ in os.walk(self.cg_tree, topdown=False):
                for d in dirs:
                    try:
                        os.rmdir(os.path.join(root, d))
                    except OSError:
                        pass
            try:
                os.rmdir(self.cg_tree)
            except OSError:
                pass
        if getattr(self, "log", None):
            self.log.close()


def descendants(pid):
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{t}/children") as f:
                    kids = [int(x) for x in f.read().split()]
                out += kids
                todo += kids
        except OSError:
            pass
    return out


def log_sizes(logdir):
    """Bytes in each service's log files (the live one and its rotated
    copies), keyed log_NAME."""
    out = {f"log_{n}": 0 for n in LOGS}
    try:
        names = os.listdir(logdir)
    except OSError:
        return out
    for n in names:
        base = n.split(".out")[0]
        if base in LOGS and n.startswith(base + ".out"):
            try:
                out[f"log_{base}"] += os.stat(os.path.join(logdir, n)).st_size
            except OSError:
                pass
    return out


def write_skill(root, name):
    d = os.path.join(root, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "SKILL.md"), "w") as f:
        f.write(f"---\nname: {name}\ndescription: soak skill {name}\n---\n")


# -------------------------------------------------------- connection churn

STATUS = b'{"jsonrpc":"2.0","id":1,"method":"status"}\n'


class Churn(threading.Thread):
    """Control connections at a steady rate, of every kind a month of host
    tools brings. At most a few non-readers are open at a time, far below
    the 128 clients hearth serves, so the pinger and the subscriber are
    never refused for them."""
    HOLD_S = 3.0        # how long a non-reader is kept open
    MAX_HELD = 6

    def __init__(self, host, total, duration):
        super().__init__(daemon=True)
        self.host = host
        self.total = total
        self.rate = total / duration
        self.done = 0
        self.kinds = {}
        self.failures = []
        self.held = []
        self.lock = threading.Lock()
        self.stop = False
        self.run_ev = threading.Event()
        self.run_ev.set()

    def run(self):
        # On the wall clock: what a quiet second held back follows it.
        t0 = time.monotonic()
        while not self.stop and self.done < self.total:
            self.run_ev.wait()
            due = (time.monotonic() - t0) * self.rate
            if self.done >= due:
                time.sleep(min(0.05, (self.done + 1 - due) / self.rate))
                continue
            self.one(self.done)
            self.done += 1
            self.reap()
        while self.held:
            self.reap(force=True)

    def reap(self, force=False):
        now = time.monotonic()
        keep = []
        with self.lock:
            for t, s in self.held:
                if force or now - t > self.HOLD_S:
                    s.close()
                else:
                    keep.append((t, s))
            self.held = keep

    def release(self):
        """Closes the connections kept open (from the sampling thread)."""
        self.reap(force=True)

    def sock(self):
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(10)
        s.connect(self.host.sock)
        return s

    def one(self, i):
        k = i % 20
        kind = ("ping" if k < 12 else "status" if k < 14 else "midline" if k < 16 else
                "silent" if k == 16 else "reset" if k == 17 else
                "follower" if k == 18 else "pipeline")
        if kind in ("follower", "pipeline") and len(self.held) >= self.MAX_HELD:
            kind = "ping"
        self.kinds[kind] = self.kinds.get(kind, 0) + 1
        try:
            s = self.sock()
        except OSError as e:
            self.failures.append(f"connect: {e}")
            return
        try:
            if kind == "ping":
                s.sendall(b'{"jsonrpc":"2.0","id":7,"method":"ping"}\n')
                r = read_line(s)
                if b'"result"' not in r:
                    self.failures.append(f"ping: {r[:200]!r}")
                s.close()
            elif kind == "status":
                s.sendall(STATUS)
                r = read_line(s)
                if b'"result"' not in r:
                    self.failures.append(f"status: {r[:200]!r}")
                s.close()
            elif kind == "midline":
                # Half a request, then gone.
                s.sendall(b'{"jsonrpc":"2.0","id":3,"method":"serv')
                s.close()
            elif kind == "silent":
                s.close()
            elif kind == "reset":
                # Half a request and a reset instead of an orderly close.
                s.sendall(b'{"jsonrpc":"2.0","id":4,"method":"sta')
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                s.close()
            elif kind == "follower":
                # Follows the chatty log and never reads.
                s.sendall(b'{"jsonrpc":"2.0","id":5,"method":"logs.read","params":'
                          b'{"name":"chatty","lines":1000,"follow":true}}\n')
                with self.lock:
                    self.held.append((time.monotonic(), s))
            else:
                # 300 status calls at once, never read: more than hearth
                # queues before it stops reading this client.
                s.sendall(STATUS * 300)
                with self.lock:
                    self.held.append((time.monotonic(), s))
        except OSError as e:
            self.failures.append(f"{kind}: {e}")
            s.close()


def read_line(s):
    buf = b""
    while not buf.endswith(b"\n"):
        d = s.recv(65536)
        if not d:
            break
        buf += d
    return buf


# ---------------------------------------------------------------- the run

class Soak:
    def __init__(self, host, plan, out):
        self.host = host
        self.plan = plan
        self.out = out
        self.samples = []
        self.problems = []
        self.offset_s = 0.0
        self.counts = {"freezes": 0, "resumes": 0, "crashes": 0, "graceful": 0,
                       "fills": 0, "enospc": 0, "skills_added": 0, "skills_removed": 0,
                       "resume_not_ok": 0, "freeze_failed": 0}
        self.health_checks = 0
        self.last_checks = 0
        self.own_log = ""
        self.live_skills = []

    # -- sampling
    def sample(self, progress, label, seconds=2.0):
        """One row of figures. RSS first as the workload left it (what the
        clients that never read have queued counts), then everything in a
        quiet moment: the pinger and the churn held, the connections it
        keeps open closed, the chatty service stopped (SIGSTOP; in a VM
        each line it writes to the log on the 9p home is a wait of
        hearth's). The wake-ups a second over the quiet seconds are what
        hearth's timers cost: the health checks, the skills poll, the
        disk check."""
        f = {"rss_busy_kib": self.host.rss_kib()}
        # Not while the agent starts (its readiness probe is a timer too).
        self.wait_agent()
        self.pinger.run_ev.clear()
        self.churn.run_ev.clear()
        self.churn.release()
        self.host.rpc("services.signal", {"name": "chatty", "signal": "SIGSTOP"})
        try:
            time.sleep(QUIET_S - seconds)
            f.update(self.host.figures())
            a = self.host.wakeups()
            time.sleep(seconds)
            b = self.host.wakeups()
        finally:
            self.host.rpc("services.signal", {"name": "chatty", "signal": "SIGCONT"})
            self.pinger.run_ev.set()
            self.churn.run_ev.set()
        f["wakeups_per_s"] = round((b - a) / seconds, 1)
        lat = self.pinger.take()
        f["ping_p50_ms"] = round(percentile(lat, 50), 3) if lat else None
        f["ping_p99_ms"] = round(percentile(lat, 99), 3) if lat else None
        st = self.host.rpc("status")
        f["clients"] = st.get("clients")
        f["event_seq"] = st.get("event_seq")
        self.note_checks(st)
        f["progress"] = progress
        f["elapsed_s"] = round(time.monotonic() - self.t0, 1)
        f["label"] = label
        self.samples.append(f)
        print(f"soak: {label:>6} {progress:5.1f}%  rss {f['rss_kib']} KiB (busy "
              f"{f['rss_busy_kib']})  fds {f['fds']}  cgroups {f['cgroups']}  mounts "
              f"{f['mounts']}  children {f['children']}  wake-ups {f['wakeups_per_s']}/s  "
              f"ping p50/p99 {f['ping_p50_ms']}/{f['ping_p99_ms']} ms  events "
              f"{self.events.count}", flush=True)

    def note_checks(self, st):
        """Health checks made: status counts them since the agent last
        became running, so a drop means a restart in between."""
        for s in st["services"]:
            if s["name"] == "hermes":
                n = (s.get("health") or {}).get("checks", 0)
                if n < self.last_checks:
                    self.health_checks += self.last_checks
                self.last_checks = n

    # -- workload
    def wait_agent(self, timeout=20.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            st = self.host.rpc("status")
            self.note_checks(st)
            s = next(s for s in st["services"] if s["name"] == "hermes")
            if s["state"] == "running":
                return True
            time.sleep(0.05)
        self.problems.append(f"agent not running {timeout:.0f} s after a restart")
        return False

    def checkpoint(self):
        """The health checks made so far, read before anything restarts
        the agent (its count starts again then)."""
        self.note_checks(self.host.rpc("status"))

    def cycle(self, i):
        self.checkpoint()
        r = self.host.rpc("sandbox.freeze", {"timeout_ms": 5000})
        self.counts["freezes"] += 1
        if not r.get("frozen"):
            self.counts["freeze_failed"] += 1
        time.sleep(0.02)
        self.offset_s += clock_step_s(i, self.plan.cycles)
        t = time.time() + self.offset_s
        params = {"time": {"sec": int(t), "nsec": int((t % 1) * 1e9)}}
        if self.host.mode == "vm":
            params["entropy"] = "c29hay1lbnRyb3B5LQ=="
        r = self.host.rpc("sandbox.resume", params)
        self.counts["resumes"] += 1
        if not r.get("ok"):
            self.counts["resume_not_ok"] += 1
            if self.counts["resume_not_ok"] <= 3:
                self.problems.append(f"resume {i} not ok: {json.dumps(r)[:600]}")
        self.check_clock(i, r)
        self.wait_agent()

    def check_clock(self, i, r):
        step = next((s for s in r.get("steps", []) if s["name"] == "time"), None)
        clock = (step or {}).get("clock") or {}
        if self.host.mode == "supervisor":
            # hearth reports the step it would make, never makes it.
            want = self.offset_s * 1000
            if clock.get("action") != "not_allowed" or \
                    abs(clock.get("offset_ms", 0) - want) > 2000:
                self.problems.append(f"resume {i}: time step {clock} (wanted not_allowed, "
                                     f"offset {want:.0f} ms)")
        elif clock.get("action") not in ("stepped", "in_sync"):
            self.problems.append(f"resume {i}: time step {clock}")

    def skills(self, i):
        name = f"soak-{i}"
        write_skill(self.host.skills_src, name)
        self.live_skills.append(name)
        self.counts["skills_added"] += 1
        if len(self.live_skills) > 3:
            old = self.live_skills.pop(0)
            shutil.rmtree(os.path.join(self.host.skills_src, old), ignore_errors=True)
            self.counts["skills_removed"] += 1

    def fill_disk(self):
        """Fills the home to ENOSPC, holds it there a second, frees it,
        and checks that the logs are written again."""
        path = os.path.join(self.host.home_view, "soak-fill")
        self.counts["fills"] += 1
        chunk = b"\0" * (1 << 20)
        full = False
        with open(path, "wb") as f:
            try:
                for _ in range(4 * HOME_BYTES >> 20):
                    f.write(chunk)
                    f.flush()
                while True:
                    f.write(b"\0" * 4096)
                    f.flush()
            except OSError as e:
                full = e.errno == errno.ENOSPC
            try:
                f.close()
            except OSError:
                pass
        if full:
            self.counts["enospc"] += 1
        else:
            self.problems.append("the home's disk did not fill")
        time.sleep(1.0)
        os.unlink(path)
        logs = os.path.join(self.host.home_view, "logs")
        before = log_sizes(logs)["log_chatty"]
        deadline = time.monotonic() + 10
        while log_sizes(logs)["log_chatty"] == before:
            if time.monotonic() > deadline:
                self.problems.append("the chatty log was not written again after the disk "
                                     "was freed")
                break
            time.sleep(0.1)

    def run(self):
        p = self.plan
        h = self.host
        self.t0 = time.monotonic()
        self.events = Events(lambda: h.client(10))
        h.follow_events(self.events)
        self.pinger = Pinger(h.ping_client)
        self.pinger.start()
        self.churn = h.churn(0, 1)  # idle until the workload starts
        self.wait_agent(h.start_timeout)
        time.sleep(2)
        self.sample(0.0, "before")
        self.churn = h.churn(p.connections, p.duration)
        self.churn.start()
        step_s = p.duration / p.cycles
        start = time.monotonic()
        for i in range(p.cycles):
            due_end = start + (i + 1) * step_s
            self.cycle(i)
            self.skills(i)
            for _ in range(p.at(p.crashes, i) - self.counts["crashes"]):
                self.checkpoint()
                if h.crash_agent():
                    self.counts["crashes"] += 1
                self.wait_agent()
            for _ in range(p.at(p.graceful, i) - self.counts["graceful"]):
                self.checkpoint()
                h.rpc("services.restart", {"name": "hermes", "signal": "SIGUSR1"})
                self.counts["graceful"] += 1
                self.wait_agent()
            if p.at(p.fills, i) > self.counts["fills"]:
                self.fill_disk()
            if (i + 1) % p.sample_every == 0 and i + 1 < p.cycles:
                self.sample(100.0 * (i + 1) / p.cycles, "during")
            left = due_end - time.monotonic()
            if left > 0:
                time.sleep(left)
        # The churn keeps its rate; what the quiet seconds held back is
        # made up now.
        self.churn.join(max(30.0, p.duration * 0.5))
        self.churn.stop = True
        self.churn.join(10)
        self.wait_agent()
        time.sleep(3)
        self.sample(100.0, "after")
        self.finish()

    def finish(self):
        h = self.host
        st = h.rpc("status")
        self.note_checks(st)
        self.health_checks += self.last_checks
        self.status_end = st
        chatty = next(s for s in st["services"] if s["name"] == "chatty")
        self.lines = chatty.get("output_lines", 0)
        self.skills_runs = (st.get("skills") or {}).get("runs")
        self.pinger.stop = True
        time.sleep(0.5)  # the last events
        self.events.stop = True
        if self.events.is_alive():
            self.events.join(5)
        self.pinger.join(5)


# ----------------------------------------------------------------- verdict

# The figures judged flat, each with its tolerance: the last quarter's
# largest sample may exceed the second quarter's largest by at most
# abs + rel x that value. The first quarter is warm-up (caches, the
# allocator's arenas, the first rotation); "after" counts in the last.
# The quiet figures (see Soak.sample) leave little to chance: the
# descriptors are the resting set, RSS what hearth keeps when nothing is
# under way. Under the workload RSS is mostly what the clients that never
# read have queued at that moment, hence its wider margin. cgroups and
# children may catch a leaf or a probe's child mid-way. The quiet
# wake-ups vary by a quarter from sample to sample. Latency is judged
# loosely at p99, on a machine other jobs share: a p50 that grows is
# what a slower hearth would show.
FLAT = {
    "rss_kib": (128, 0.05, "hearth's resident memory, quiet, KiB"),
    "rss_busy_kib": (512, 0.1, "hearth's resident memory under the workload, KiB"),
    "fds": (1, 0.0, "hearth's open descriptors, quiet"),
    "cgroups": (1, 0.0, "cgroups under hearth's tree"),
    "mounts": (0, 0.0, "mounts hearth made in its namespace"),
    "children": (2, 0.0, "hearth's descendant processes"),
    "wakeups_per_s": (5, 0.25, "wake-ups a second, quiet (timers)"),
    "ping_p50_ms": (0.5, 0.5, "ping p50, ms"),
    "ping_p99_ms": (20, 3.0, "ping p99, ms"),
}
# Recorded beside the judged ones, not judged.
RECORDED = {"lazyfree_kib": "of that RSS, freed lazily (MADV_FREE), KiB"}
LOG_FIGS = {f"log_{n}": f"{n} log files, bytes (bound {(k + 1) * b} + a line)"
            for n, (b, k) in LOGS.items()}


def quarter(s):
    pr = s["progress"]
    if s["label"] == "before":
        return 0
    return 1 if pr <= 25 else 2 if pr <= 50 else 3 if pr <= 75 else 4


def verdict(soak):
    rows, bad = [], []
    S = soak.samples
    for fig, (ab, rel, what) in FLAT.items():
        vals = [s[fig] for s in S if s.get(fig) is not None]
        if not vals:
            rows.append((fig, what, None, None, None, None, "not measured"))
            bad.append(f"{fig}: not measured")
            continue
        q2 = [s[fig] for s in S if quarter(s) == 2 and s.get(fig) is not None]
        q4 = [s[fig] for s in S if quarter(s) == 4 and s.get(fig) is not None]
        m2, m4 = (max(q2) if q2 else None), (max(q4) if q4 else None)
        ok = m2 is not None and m4 is not None and m4 <= m2 + ab + rel * m2
        start = S[0].get(fig)
        end = S[-1].get(fig)
        rows.append((fig, what, start, end, m2, m4, "flat" if ok else "GROWS"))
        if not ok:
            bad.append(f"{fig} ({what}): last quarter's max {m4} > second quarter's max {m2} "
                       f"+ {ab} + {rel:g}x")
    for fig, what in RECORDED.items():
        vals = [s[fig] for s in S if s.get(fig) is not None]
        if vals:
            q2 = [s[fig] for s in S if quarter(s) == 2 and s.get(fig) is not None]
            q4 = [s[fig] for s in S if quarter(s) == 4 and s.get(fig) is not None]
            rows.append((fig, what, S[0].get(fig), S[-1].get(fig), max(q2, default=None),
                         max(q4, default=None), "recorded"))
    for fig, what in LOG_FIGS.items():
        name = fig[4:]
        size, keep = LOGS[name]
        bound = (keep + 1) * size + 4096
        vals = [s[fig] for s in S]
        ok = max(vals) <= bound
        rows.append((fig, what, S[0][fig], S[-1][fig], max(vals), bound,
                     "bounded" if ok else "OVER"))
        if not ok:
            bad.append(f"{fig}: {max(vals)} bytes > bound {bound}")
    ev = soak.events
    if ev.gaps:
        bad.append(f"events lost: {len(ev.gaps)} gaps in seq, first after {ev.gaps[0][0]}")
    for kind, key in (("freeze", "freezes"), ("resume", "resumes")):
        n = sum(1 for e in ev.of(kind) if e.get("cause", "host") == "host")
        if n != soak.counts[key]:
            bad.append(f"events: {n} {kind} events for {soak.counts[key]} calls")
    if soak.counts["resume_not_ok"]:
        bad.append(f"{soak.counts['resume_not_ok']} resume reports not ok")
    if soak.counts["freeze_failed"]:
        bad.append(f"{soak.counts['freeze_failed']} freezes failed")
    if soak.counts["enospc"] != soak.counts["fills"]:
        bad.append("the home's disk did not fill every time")
    lows = len(ev.of("disk.low"))
    if lows < soak.counts["enospc"]:
        bad.append(f"{lows} disk.low events for {soak.counts['enospc']} fills")
    churn = soak.churn
    if churn.failures:
        bad.append(f"{len(churn.failures)} control connections failed, first: "
                   f"{churn.failures[0]}")
    for e in getattr(soak.host, "session_errors", [])[:3]:
        bad.append(f"a session of the channel began with an error: {e}")
    # A full disk is one warning per log file and spell in hearth's own
    # log, not one per line its service wrote meanwhile.
    spam = soak.own_log.count("logring: unable to write")
    if spam > 3 * soak.counts["fills"]:
        bad.append(f"hearth's own log: {spam} 'unable to write' lines for "
                   f"{soak.counts['fills']} disk fills")
    if soak.pinger.errors:
        bad.append(f"{soak.pinger.errors} pings failed")
    bad += soak.problems
    return rows, bad


def report(soak, rows, bad, outdir):
    os.makedirs(outdir, exist_ok=True)
    p = soak.plan
    figs = list(FLAT) + list(RECORDED) + list(LOG_FIGS)
    for fig in figs + ["clients", "event_seq"]:
        with open(os.path.join(outdir, f"{fig}.csv"), "w") as f:
            f.write(f"progress_pct,elapsed_s,label,{fig}\n")
            for s in soak.samples:
                v = s.get(fig)
                f.write(f"{s['progress']:.1f},{s['elapsed_s']},{s['label']},"
                        f"{'' if v is None else v}\n")
    elapsed = time.monotonic() - soak.t0
    done = {
        "mode": soak.host.mode, "scale": p.scale, "elapsed_s": round(elapsed),
        "cycles": soak.counts["resumes"], "health_checks": soak.health_checks,
        "skills_runs": soak.skills_runs, "crashes": soak.counts["crashes"],
        "graceful_restarts": soak.counts["graceful"], "log_lines": soak.lines,
        ("sessions" if soak.host.mode == "vm" else "connections"): soak.churn.done,
        "connection_kinds": soak.churn.kinds,
        "skills_added": soak.counts["skills_added"],
        "skills_removed": soak.counts["skills_removed"],
        "disk_fills": soak.counts["fills"], "enospc": soak.counts["enospc"],
        "events": soak.events.count, "event_types": soak.events.types,
        "event_gaps": len(soak.events.gaps), "event_reconnects": soak.events.reconnects,
        "clock_offset_h": round(soak.offset_s / 3600, 1),
    }
    summary = {"done": done, "figures": [dict(zip(
        ("figure", "what", "start", "end", "q2_max", "q4_max_or_bound", "verdict"), r))
        for r in rows], "problems": bad}
    with open(os.path.join(outdir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print()
    print(f"soak ({soak.host.mode}, {p.describe()})")
    print("done: " + ", ".join(f"{k} {v}" for k, v in done.items()
                               if not isinstance(v, dict)))
    print(f"{'figure':<16} {'start':>10} {'end':>10} {'Q2 max':>10} {'Q4 max':>10}  verdict")
    for fig, what, start, end, m2, m4, v in rows:
        print(f"{fig:<16} {fmt(start):>10} {fmt(end):>10} {fmt(m2):>10} {fmt(m4):>10}  {v}")
    bench_rows(soak, rows, done)
    plot(soak, rows, os.path.join(outdir, "figures.svg"))
    return summary


def plot(soak, rows, path):
    """One SVG of small multiples, a panel per figure: its samples over the
    run, the warm-up shaded, and for a flat figure the line the last
    quarter must stay under (for a log, its rotation bound)."""
    W, H, PAD, COLS = 300, 110, 26, 2
    panels = [r for r in rows if r[6] != "not measured"]
    nrows = (len(panels) + COLS - 1) // COLS
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{COLS * W}" '
           f'height="{nrows * H + 24}" font-family="sans-serif" font-size="10">',
           f'<text x="6" y="15" font-size="12">soak, {soak.host.mode}, scale '
           f'{soak.plan.scale:g}: each figure over the run (x: % of the workload)</text>']
    for k, (fig, what, start, end, m2, m4, verdict_) in enumerate(panels):
        x0, y0 = (k % COLS) * W, 24 + (k // COLS) * H
        pts = [(s["progress"], s[fig]) for s in soak.samples if s.get(fig) is not None]
        if fig in FLAT:
            ab, rel, _ = FLAT[fig]
            limit = None if m2 is None else m2 + ab + rel * m2
        elif fig in RECORDED:
            limit = None
        else:
            limit = m4  # the rotation bound
        top = max([v for _, v in pts] + [limit or 0]) or 1
        pw, ph = W - 2 * PAD, H - 2 * PAD + 6

        def xy(pr, v):
            return x0 + PAD + pr / 100.0 * pw, y0 + PAD - 6 + ph - v / top * ph

        out.append(f'<rect x="{x0 + PAD}" y="{y0 + PAD - 6}" width="{pw * 0.25:.1f}" '
                   f'height="{ph}" fill="#eee"/>')
        out.append(f'<rect x="{x0 + PAD}" y="{y0 + PAD - 6}" width="{pw}" height="{ph}" '
                   f'fill="none" stroke="#999"/>')
        if limit is not None:
            _, ly = xy(0, limit)
            out.append(f'<line x1="{x0 + PAD}" x2="{x0 + PAD + pw}" y1="{ly:.1f}" y2="{ly:.1f}" '
                       f'stroke="#c33" stroke-dasharray="3,3"/>')
        line = " ".join(f"{a:.1f},{b:.1f}" for a, b in (xy(pr, v) for pr, v in pts))
        out.append(f'<polyline points="{line}" fill="none" stroke="#236" stroke-width="1.5"/>')
        out.append(f'<text x="{x0 + PAD}" y="{y0 + 13}">{fig}: {fmt(start)} \u2192 {fmt(end)} '
                   f'({verdict_})</text>')
        out.append(f'<text x="{x0 + 2}" y="{y0 + PAD}" fill="#666">{fmt(round(top, 3))}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def replot(outdir):
    """figures.svg again from a finished run's CSVs and summary.json."""
    import csv
    import types
    with open(os.path.join(outdir, "summary.json")) as f:
        summ = json.load(f)
    samples = {}
    for fig in list(FLAT) + list(RECORDED) + list(LOG_FIGS):
        with open(os.path.join(outdir, f"{fig}.csv")) as f:
            for r in csv.DictReader(f):
                sm = samples.setdefault((r["progress_pct"], r["elapsed_s"]), {
                    "progress": float(r["progress_pct"]), "label": r["label"]})
                sm[fig] = float(r[fig]) if r[fig] else None
    rows = [tuple(f[k] for k in ("figure", "what", "start", "end", "q2_max",
                                 "q4_max_or_bound", "verdict")) for f in summ["figures"]]
    run = types.SimpleNamespace(samples=list(samples.values()),
                                host=types.SimpleNamespace(mode=summ["done"]["mode"]),
                                plan=types.SimpleNamespace(scale=summ["done"]["scale"]))
    plot(run, rows, os.path.join(outdir, "figures.svg"))


def fmt(v):
    if v is None:
        return "-"
    return f"{v:g}" if isinstance(v, float) else str(v)


def bench_rows(soak, rows, done):
    """Rows for build/bench.json, in make bench's format, merged with the
    rows already there."""
    mode = soak.host.mode
    path = os.path.join(BUILD, "bench.json")
    try:
        with open(path) as f:
            out = json.load(f)
    except (OSError, ValueError):
        out = {}

    def row(key, fig, v):
        out[f"soak_{mode}_{key}"] = {"figure": fig, "hearth": fmt(v), "peer": None,
                                     "peer_value": None, "ratio": None}

    scale = f"soak, {mode}, scale {soak.plan.scale:g}"
    for fig, what, start, end, m2, m4, v in rows:
        row(f"{fig}_start", f"{what} at the start ({scale})", start)
        row(f"{fig}_end", f"{what} at the end ({scale}; {v})", end)
    row("event_gaps", f"events lost ({scale}, {done['events']} events)", done["event_gaps"])
    row("elapsed_s", f"seconds the run took ({scale})", done["elapsed_s"])
    with open(path, "w") as f:
        json.dump(out, f, indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", choices=("supervisor", "vm"), default="supervisor")
    ap.add_argument("--scale", type=float, default=float(os.environ.get("SOAK_SCALE") or 1))
    ap.add_argument("--sample-pct", type=float, default=2.0)
    ap.add_argument("--replot", action="store_true",
                    help="only draw build/soak/MODE/figures.svg again from the last run")
    args = ap.parse_args()
    if args.replot:
        replot(os.path.join(BUILD, "soak", args.mode))
        return 0
    # kill -USR1 shows where a run that seems stuck is.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    # A SIGTERM (timeout, a CI's cancel) ends the run through the finally
    # below, which stops hearth: it would otherwise outlive this script.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if os.geteuid() != 0:
        raise SystemExit("soak: needs root (namespaces, mounts, cgroups)")
    plan = Plan(args.scale, args.sample_pct)
    print(f"soak: {args.mode}, {plan.describe()}", flush=True)
    work = tempfile.mkdtemp(prefix="hearth-soak.", dir="/var/tmp")
    if args.mode == "supervisor":
        host = SupervisorHost(plan, work)
    else:
        import soak_vm
        host = soak_vm.VMHost(plan, work)
    outdir = os.path.join(BUILD, "soak", args.mode)
    os.makedirs(outdir, exist_ok=True)
    soak = Soak(host, plan, outdir)
    try:
        host.setup()
        soak.run()
    finally:
        host.stop()
        soak.own_log = host.log_text()
        # hearth's log (the VM's console) is kept; the scratch directory
        # goes, however the run ended.
        for log in ("hearth.log", os.path.join("state", "console.log")):
            if os.path.exists(os.path.join(work, log)):
                shutil.copy(os.path.join(work, log), os.path.join(outdir, os.path.basename(log)))
        shutil.rmtree(work, ignore_errors=True)
    rows, bad = verdict(soak)
    report(soak, rows, bad, outdir)
    if bad:
        for b in bad:
            print(f"soak: FAILED: {b}")
        return 1
    print(f"soak: {args.mode}: every figure flat, no event lost")
    return 0


if __name__ == "__main__":
    sys.exit(main())
