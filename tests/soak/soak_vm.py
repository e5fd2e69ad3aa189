"""The soak's VM (tests/soak/soak.py --mode vm): the vmtest image of
tests/vm under QEMU, booted with the soak's copy of the shipped Hermes
config (tests/vm/hermes_config.py's QEMU machine sections, the periods
and log sizes of soak.soak_config) and the chatty service's program added
to the image. The home share is a tmpfs of soak.HOME_BYTES on the host, so
the guest's writes to it meet ENOSPC when it is filled.

A VM has one control channel, a virtio-serial stream: the pinger, the
workload and the event stream share it under a lock, every notification
met on it is checked for its seq, and the connection churn is sessions of
that stream ended and begun again (some with half a request left behind),
the event stream resumed with since after each."""
import json
import os
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "vm"))
import conftest as vmc  # noqa: E402  (tests/vm: the VM, its image)
import hermes_config  # noqa: E402
import soak  # noqa: E402

CHATTY_IN_IMAGE = "/usr/libexec/hearth-test/chatty"
# A serial session begun is far dearer than a unix connection (the guest
# learns of it through the port's open): one session per this many
# connections of the plan.
SESSIONS_PER = 50


class Proxy:
    """What the pinger calls: the shared channel's ping."""

    def __init__(self, host):
        self.host = host

    def result(self, method, params=None):
        return self.host.rpc(method, params)

    def close(self):
        pass


class VMHost:
    mode = "vm"
    start_timeout = 240.0

    def __init__(self, plan, work):
        self.plan = plan
        self.run = work
        self.lock = threading.RLock()
        self.events = None
        self.vm = None
        self.mounted = False
        self.session_errors = []

    def setup(self):
        vmc.build_image()
        dirs = {k: os.path.join(self.run, k) for k in ("state", "home", "workspace", "skills")}
        for d in dirs.values():
            os.makedirs(d)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={soak.HOME_BYTES},mode=0755",
                        "soak-home", dirs["home"]], check=True)
        self.mounted = True
        self.home = self.home_view = dirs["home"]
        self.skills_src = dirs["skills"]
        for i in range(20):
            soak.write_skill(self.skills_src, f"base-{i}")
        chatty = os.path.join(soak.BUILD, "soak", "chatty")
        with open(chatty, "rb") as f:
            prog = f.read()
        cfg = soak.soak_config(hermes_config.derive(), [CHATTY_IN_IMAGE, str(self.plan.rate)])
        self.cfg = cfg
        files = {CHATTY_IN_IMAGE: (prog, 0o755)}
        files.update(vmc.config_files({"soak": cfg}))
        args = ["--home", dirs["home"], "--workspace", dirs["workspace"],
                "--skills", dirs["skills"], "--config", "soak"]
        vm = vmc.VM(dirs["state"], args, vmc.free_port(), files)
        self.vm = vm
        vm.start(wait=False)
        self.connect()
        self.accel = "kvm" if "-accel kvm" in self.qemu_cmdline() else "tcg"

    def qemu_cmdline(self):
        try:
            with open(f"/proc/{self.vm.proc.pid}/cmdline", "rb") as f:
                return f.read().replace(b"\0", b" ").decode()
        except OSError:
            return ""

    def connect(self, timeout=vmc.BOOT_TIMEOUT * 2):
        """A session of the channel: pings until one is answered. A reply
        that is not a ping's result means the session began with what an
        earlier one left behind."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if self.vm.proc.poll() is not None:
                raise SystemExit(f"soak: qemu exited:\n{self.vm.console_text()}")
            try:
                c = vmc.Control(self.vm.ctl_path, 1.0)
            except OSError as e:
                last = e
                time.sleep(0.2)
                continue
            try:
                while time.monotonic() < deadline:
                    c.ls.send(b'{"jsonrpc":"2.0","id":0,"method":"ping"}\n')
                    try:
                        msg = json.loads(c.ls.line())
                    except socket.timeout:
                        continue
                    if msg.get("id") == 0 and "error" in msg:
                        self.session_errors.append(json.dumps(msg)[:300])
                        continue
                    if "result" in msg:
                        c.ls.sock.settimeout(60.0)
                        self.vm.ctl = c
                        return c
                    self.note(msg)
            except (OSError, EOFError, ValueError) as e:
                last = e
                c.close()
        raise SystemExit(f"soak: hearth did not answer ({last}):\n{self.vm.console_text()}")

    def note(self, msg):
        if msg.get("method") == "event" and self.events is not None:
            self.events.take(msg["params"])

    def drain(self):
        """The notifications the last call met, to the event checker."""
        evs, self.vm.ctl.events = self.vm.ctl.events, []
        if self.events is None:
            return
        for e in evs:
            if "seq" in e and "type" in e:
                self.events.take(e)

    def rpc(self, method, params=None, timeout=None):
        with self.lock:
            try:
                return self.vm.ctl.result(method, params)
            finally:
                self.drain()

    def follow_events(self, events):
        self.events = events
        self.rpc("events.subscribe", {"since": 0})

    def ping_client(self):
        return Proxy(self)

    def churn(self, total, duration):
        return SessionChurn(self, max(16, total // SESSIONS_PER) if total else 0, duration)

    def reconnect(self, kind):
        with self.lock:
            if kind == "midline":
                self.vm.ctl.ls.send(b'{"jsonrpc":"2.0","id":3,"method":"serv')
            self.vm.disconnect()
            self.connect()
            since = self.events.last if self.events.last is not None else 0
            self.rpc("events.subscribe", {"since": since})

    def crash_agent(self):
        """SIGKILL to the agent (the program in the service's namespace)."""
        s = self.service("hermes")
        if s["state"] != "running":
            return False
        self.rpc("services.signal", {"name": "hermes", "signal": "SIGKILL"})
        return True

    def service(self, name):
        for s in self.rpc("status")["services"]:
            if s["name"] == name:
                return s
        raise KeyError(name)

    def figures(self):
        st = self.rpc("status")
        me = self.rpc("metrics")["hearth"]
        out = {"rss_kib": st["rss_kib"], "fds": me.get("fds"), "mounts": me.get("mounts"),
               "children": me.get("children"), "cgroups": me.get("cgroups")}
        out.update(soak.log_sizes(os.path.join(self.home, "logs")))
        return out

    def rss_kib(self):
        return self.rpc("status")["rss_kib"]

    def wakeups(self):
        return self.rpc("status")["wakeups"]

    def log_text(self):
        """hearth's own log is the guest's kernel log (the console is
        quiet), which the host does not see: that check is supervisor
        mode's."""
        return ""

    def stop(self):
        if self.vm:
            self.vm.kill()
        if self.mounted:
            subprocess.run(["umount", "-l", self.home])


class SessionChurn(threading.Thread):
    """Sessions of the VM's one channel ended and begun at a steady rate:
    most in order, some with half a request written first."""

    def __init__(self, host, total, duration):
        super().__init__(daemon=True)
        self.host = host
        self.total = total
        self.rate = total / duration
        self.done = 0
        self.kinds = {}
        self.failures = []
        self.stop = False
        self.run_ev = threading.Event()
        self.run_ev.set()

    def release(self):
        """Nothing is kept open between sessions."""

    def run(self):
        t0 = time.monotonic()
        while not self.stop and self.done < self.total:
            self.run_ev.wait()
            due = (time.monotonic() - t0) * self.rate
            if self.done >= due:
                time.sleep(min(0.1, (self.done + 1 - due) / self.rate))
                continue
            kind = "midline" if self.done % 3 == 2 else "session"
            self.kinds[kind] = self.kinds.get(kind, 0) + 1
            try:
                self.host.reconnect(kind)
            except (OSError, EOFError, AssertionError, ValueError) as e:
                self.failures.append(f"{kind}: {e}")
            self.done += 1
