"""Fixtures that run the shipped static build/hearth as PID 1 of fresh
namespaces (unshare --pid --fork --mount --net --uts --ipc --mount-proc)
and talk to it over its unix control socket.

Environment:
  HEARTH_BIN   the binary to run (default build/hearth)
  HEARTH_WRAP  a command prefix for it, e.g. "valgrind --leak-check=full";
               under valgrind each run gets its own log files and the
               fixture fails the test when valgrind reports an error
  HEARTH_SLOW  factor for startup and wait timeouts (default 1, or 8
               with HEARTH_WRAP)
  HEARTH_TEST_TIMEOUT  seconds a test's setup, body or teardown may take
               before it fails by name (default 300, or 900 with
               HEARTH_WRAP; tests/lib/deadline.py)
  HEARTH_SOAK  set (to anything but 0): the tests marked soak run too;
               otherwise they are deselected (not skipped: they are not
               part of `make test` at all)"""
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from deadline import register as register_deadline  # noqa: E402
import hearthrpc  # noqa: E402  (tests/lib, shared with tests/vm)
import pidns  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
HEARTH = os.environ.get("HEARTH_BIN") or os.path.join(ROOT, "build", "hearth")
WRAP = shlex.split(os.environ.get("HEARTH_WRAP", ""))
SLOW = float(os.environ.get("HEARTH_SLOW") or (8 if WRAP else 1))
VALGRIND = bool(WRAP) and os.path.basename(WRAP[0]) == "valgrind"
# Forced after the caller's options (valgrind takes the last of each), so
# the verdict can be read whatever HEARTH_WRAP says.
VG_ERROR_EXIT = 99
# The first line of a report of each kind memcheck counts as an error.
VG_ERROR_RE = re.compile(
    r"^==\d+== (Invalid (read|write|free)|Conditional jump|Use of uninitialised|"
    r"Syscall param|Mismatched free|Source and destination overlap|"
    r"Argument '.*' of function|.* are definitely lost)", re.M)
HEARTHCTL = os.path.join(ROOT, "build", "hearthctl")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "valgrind: fast smoke test, also run with hearth under valgrind (make valgrind)")
    config.addinivalue_line(
        "markers", "soak: a long run (minutes), only with HEARTH_SOAK=1, never in make test")
    # Per test phase (tests/lib/deadline.py); the slowest take ~10 s, under
    # valgrind too.
    register_deadline(config, 900 if WRAP else 300)


def pytest_collection_modifyitems(config, items):
    if os.environ.get("HEARTH_SOAK", "0") not in ("", "0"):
        return
    soak = [i for i in items if i.get_closest_marker("soak")]
    if soak:
        config.hook.pytest_deselected(items=soak)
        items[:] = [i for i in items if not i.get_closest_marker("soak")]


def _need_root():
    if os.geteuid() != 0:
        pytest.skip("namespace tests need root")
    if not shutil.which("unshare"):
        pytest.skip("unshare (util-linux) is not installed")


class Client(hearthrpc.RpcClient):
    """A line-oriented JSON-RPC client on one connection to hearth's unix
    socket (tests/lib/hearthrpc.py), its timeout scaled by HEARTH_SLOW."""

    def __init__(self, path, timeout=10.0):
        super().__init__(hearthrpc.LineSocket(socket.AF_UNIX, path, timeout * SLOW))


class Hearth:
    def __init__(self, tmp_path):
        self.dir = tmp_path
        # Unix socket paths are limited to 108 bytes: keep it short.
        self.sockdir = tempfile.mkdtemp(prefix="hearth-")
        self.sock = os.path.join(self.sockdir, "control.sock")
        self.proc = None
        self.log_path = tmp_path / "hearth.log"
        self.extra_args = []
        self.runs = 0
        self.vg_problems = []
        # The cgroup trees this instance's runs made (see note_cgroup_tree).
        self.cg_trees = set()

    def config(self, services=None, **extra):
        cfg = {"control": {"listen": ["unix:" + self.sock]}, "services": services or []}
        cfg.update(extra)
        return cfg

    def start(self, cfg, wait=True, args=(), netns=None, cgroup=False, log="debug",
              cmdline=None, binds=(), drop_caps=()):
        """netns: run in that `ip netns` (made by the test) instead of a
        fresh, empty network namespace. cgroup: start hearth in a cgroup2
        directory of its own (self.cgroup), which a test may freeze or
        write to; hearth itself stays in the cgroup it starts in. log: the
        --log level (None: no --log, the config decides). cmdline: the
        text hearth finds in /proc/cmdline (bound over it in hearth's own
        mount namespace). binds: (source, target) pairs bound over the
        targets in hearth's own mount namespace (a test's own
        /etc/passwd), the host's files untouched. drop_caps: capabilities
        ("sys_admin") taken out of hearth's bounding and inheritable sets
        by setpriv, which execs it (a container's default set)."""
        path = self.dir / "hearth.json"
        self.give_test_dir(cfg)
        path.write_text(json.dumps(cfg))
        if self.proc is not None:  # a second run in one test: judge the first
            self.check_valgrind()
            self.note_cgroup_tree()  # before the log file is started over
        self.runs += 1
        self.log = open(self.log_path, "wb")
        prefix = ["ip", "netns", "exec", netns] if netns else []
        net = [] if netns else ["--net"]
        inner = [*self.wrap(), HEARTH, "-c", str(path), *(["--log", log] if log else []), *args]
        if drop_caps:
            drop = ",".join("-" + c for c in drop_caps)
            inner = ["setpriv", "--bounding-set", drop, "--inh-caps", drop, "--", *inner]
        binds = [(str(a), str(b)) for a, b in binds]
        if cmdline is not None:
            cl = self.dir / "cmdline"
            cl.write_text(cmdline + "\n")
            binds.append((str(cl), "/proc/cmdline"))
        if binds:
            # sh execs hearth, which so stays pid 1 of the new namespace.
            script = ('while [ "$1" != -- ]; do mount --bind "$1" "$2" || exit 1; shift 2; done; '
                      'shift; exec "$@"')
            inner = ["sh", "-c", script, "sh", *[x for pair in binds for x in pair], "--", *inner]
        cmd = [*prefix, "unshare", "--pid", "--fork", "--mount", *net, "--uts", "--ipc",
               "--mount-proc", *inner]
        if cgroup:
            self.cgroup = make_test_cgroup()
            cmd = ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', self.cgroup, *cmd]
        vg = getattr(self, "vg_log", None) if VALGRIND else None
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT,
                                     pass_fds=(vg.fileno(),) if vg else ())
        if vg:
            vg.close()  # hearth holds it
        if wait:
            self.wait_ready()
        return self

    def give_test_dir(self, cfg):
        """A service's root is read-only and its /tmp its own. These tests
        run on the host's root, with their scripts and what services
        leave for them in directories below the host's /tmp: that /tmp is
        the one place a service writes here, like a home share in a
        sandbox. A test that says `writable` itself (test_rootfs.py, the
        attack in test_contain.py) is left as it is."""
        for svc in cfg.get("services") or []:
            if isinstance(svc, dict) and "writable" not in svc:
                svc["writable"] = ["/tmp"]

    def wrap(self):
        if not VALGRIND:
            return WRAP
        # Without -q the summary is written even when clean: the proof
        # check_valgrind looks for.
        opts = [o for o in WRAP if o not in ("-q", "--quiet")]
        # One log for hearth and every child it forks that does not exec
        # (probes, syncs, a service's steps before its exec), appended to
        # through one inherited descriptor: a file per pid (%p) does not
        # work once children live in pid namespaces of their own (each
        # is pid 1 or 2 there and would truncate hearth's file, or could
        # not create its own once it is not root).
        self.vg_log = open(self.vg_dir() / "vg.log", "ab")
        return [*opts, f"--log-fd={self.vg_log.fileno()}",
                f"--error-exitcode={VG_ERROR_EXIT}",
                "--suppressions=" + os.path.join(ROOT, "tests", "valgrind.supp")]

    def vg_dir(self):
        d = self.dir / f"valgrind.{self.runs}"
        d.mkdir(parents=True, exist_ok=True)
        return d

    def check_valgrind(self):
        """Records what valgrind said about the run that ended. Its exit
        status alone cannot tell: hearth's own status passes through, and
        when hearth is killed from outside, unshare (util-linux 2.38)
        exits 1 instead of re-raising the signal. So the log must hold the
        ERROR SUMMARY that valgrind writes only once the whole process has
        been judged, leaks included, and it must say 0 errors."""
        if not VALGRIND or self.proc is None:
            return
        rc = self.proc.poll()
        where = self.vg_dir()
        if rc is None:
            self.vg_problems.append(f"run {self.runs}: hearth still running; no valgrind verdict")
        elif rc == VG_ERROR_EXIT:
            self.vg_problems.append(f"run {self.runs}: valgrind exit status {rc} (errors)")
        # Forked children that never exec (health probes, syncs) write
        # to the same log; any error in any of them counts.
        log = where / "vg.log"
        text = log.read_text(errors="replace") if log.exists() else ""
        if VG_ERROR_RE.search(text) or re.search(r"ERROR SUMMARY: [1-9]", text):
            self.vg_problems.append(f"{log}:\n{text}")
        # hearth outlives every child it forks (it stops them before it
        # exits): the last summary is its own.
        summaries = re.findall(r"ERROR SUMMARY: \d+ errors", text)
        if not summaries or summaries[-1] != "ERROR SUMMARY: 0 errors":
            self.vg_problems.append(f"run {self.runs}: no clean ERROR SUMMARY in {log} "
                                    f"(status {rc}): valgrind did not see hearth exit")

    def wait_ready(self, timeout=10.0):
        deadline = time.monotonic() + timeout * SLOW
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError("hearth exited early:\n" + self.log_text())
            try:
                c = Client(self.sock, timeout=2)
                c.result("ping")
                c.close()
                return
            except (OSError, EOFError):
                time.sleep(0.02)
        raise AssertionError("hearth not ready:\n" + self.log_text())

    def log_text(self):
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def client(self, timeout=10.0):
        return Client(self.sock, timeout)

    def rpc(self, method, params=None):
        c = self.client()
        try:
            return c.result(method, params)
        finally:
            c.close()

    @property
    def pid(self):
        """hearth's pid as seen from the test (the child of unshare)."""
        with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") as f:
            kids = f.read().split()
        assert kids, "unshare has no child"
        return int(kids[0])

    def host_pid(self, ns_pid):
        """The test's view of a pid reported by hearth (its own namespace)."""
        p = pidns.host_pid(ns_pid, self.pid)
        if p is None:
            raise AssertionError(f"no process {ns_pid} in hearth's namespace")
        return p

    def main_pid(self, ns_pid):
        """The test's view of a service's main process: hearth reports
        the reaper of the service's own pid namespace, whose first child
        (pid 2 there) is the program; a service without a namespace of
        its own is its own main process."""
        p = self.host_pid(ns_pid)
        try:
            if open(f"/proc/{p}/comm").read().strip() != "hearth-reaper":
                return p
            kids = open(f"/proc/{p}/task/{p}/children").read().split()
        except OSError:
            raise AssertionError(f"process {ns_pid} is gone")
        if not kids:
            raise AssertionError(f"the reaper {ns_pid} has no main process")
        return int(kids[0])

    def signal(self, sig):
        os.kill(self.pid, sig)

    def wait_exit(self, timeout=20.0):
        return self.proc.wait(timeout=timeout * SLOW)

    def service(self, name):
        for s in self.rpc("services.list")["services"]:
            if s["name"] == name:
                return s
        raise KeyError(name)

    def wait_for(self, pred, timeout=10.0, what="condition"):
        deadline = time.monotonic() + timeout * SLOW
        last = None
        while time.monotonic() < deadline:
            last = pred()
            if last:
                return last
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}; log:\n" + self.log_text())

    def note_cgroup_tree(self):
        """Remembers where this run's hearth built its cgroup tree (its
        debug line "cgroup tree at PATH", or a service's leaf), so stop()
        can remove what a killed hearth, or a leaf still busy at its
        teardown, left behind. Only this instance's own trees: other
        hearths on the host (parallel runs) share the parent cgroup."""
        mnt = cgroup2_mount()
        if not mnt:
            return
        # Written at boot: the head of the log is enough (a flood test's
        # log may be large).
        try:
            with open(self.log_path, "rb") as f:
                head = f.read(256 << 10).decode(errors="replace")
        except OSError:
            head = ""
        found = re.findall(r"cgroup tree at (\S+)", head)
        # Below debug level the log does not say: ask while it still runs.
        if not found and self.proc is not None and self.proc.poll() is None:
            try:
                c = self.client(timeout=2)
                try:
                    found += [os.path.dirname(os.path.dirname(s["cgroup"]))
                              for s in c.result("services.list")["services"] if s.get("cgroup")]
                finally:
                    c.close()
            except (OSError, EOFError, AssertionError, ValueError):
                pass
        for path in found:
            if path.startswith(mnt + "/") and re.fullmatch(r"hearth\.[0-9a-f]{8}",
                                                         os.path.basename(path)):
                self.cg_trees.add(path)

    def stop(self):
        self.note_cgroup_tree()
        if self.proc and self.proc.poll() is None:
            try:
                self.signal(signal.SIGTERM)
                self.proc.wait(timeout=20 * SLOW)
            except Exception:
                # hearth itself first: killing only unshare would leave it,
                # PID 1 of its namespace, running on without a parent.
                try:
                    self.signal(signal.SIGKILL)
                except (OSError, AssertionError):
                    pass
                self.proc.kill()
                self.proc.wait()
        self.check_valgrind()
        if hasattr(self, "log"):
            self.log.close()
        shutil.rmtree(self.sockdir, ignore_errors=True)
        if getattr(self, "cgroup", None):
            remove_cgroup_tree(self.cgroup)
            self.cgroup = None
        # hearth removes its tree when it ends in order; not when killed,
        # nor a leaf whose last process is still exiting at that moment.
        if self.proc is None or self.proc.poll() is not None:
            for path in sorted(self.cg_trees):
                if os.path.isdir(path):
                    remove_cgroup_tree(path)
            self.cg_trees.clear()
        # Here rather than in the fixture, so a second Hearth a test makes
        # and stops itself is judged too.
        if self.vg_problems:
            problems, self.vg_problems = self.vg_problems, []
            pytest.fail("valgrind:\n" + "\n".join(problems), pytrace=False)


def cgroup2_mount():
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            sep = parts.index("-")
            if parts[sep + 1] == "cgroup2":
                return parts[4]
    return None


def make_test_cgroup():
    """A fresh cgroup2 directory below the test's own cgroup."""
    mnt = cgroup2_mount()
    assert mnt, "no cgroup2 mount on this host"
    with open("/proc/self/cgroup") as f:
        own = next(l[3:].strip() for l in f if l.startswith("0::"))
    path = tempfile.mkdtemp(prefix="hearth-test.", dir=mnt + own.rstrip("/"))
    return path


def remove_cgroup_tree(path):
    """Removes an emptied cgroup tree, deepest directories first."""
    for _ in range(100):
        for root, dirs, _files in os.walk(path, topdown=False):
            for d in dirs:
                try:
                    os.rmdir(os.path.join(root, d))
                except OSError:
                    pass
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.05)


@pytest.fixture
def hearth(tmp_path):
    _need_root()
    h = Hearth(tmp_path)
    yield h
    h.stop()
