"""Fixtures that boot the sandbox image under QEMU with scripts/run-vm and
talk to hearth, the guest's PID 1, over the virtio-serial control channel
(a unix socket on the host), to QEMU over QMP, and to the stand-in agent
over a host-forwarded TCP port."""
import gzip
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import pytest

import hermes_config

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from deadline import register as register_deadline  # noqa: E402
from hearthrpc import LineSocket, RpcClient  # noqa: E402  (tests/lib, shared with tests/integration)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RUN_VM = os.path.join(ROOT, "scripts", "run-vm")
# The shipped image plus what the tests add: the hostile-agent program and
# its config (tests/vm/hostile.json, booted with --config hostile). The
# image's own configs and programs are those `make image` ships.
IMAGE = os.path.join(ROOT, "build", "image", "vmtest")
HERE = os.path.dirname(os.path.abspath(__file__))
ATTACK_SRC = os.path.join(HERE, "attack.c")
ATTACK = os.path.join(ROOT, "build", "vmtest", "attack")
ATTACK_IN_IMAGE = "/usr/libexec/hearth-test/attack"
# Kernel modules the image must carry for configs the tests hand a VM
# themselves (make_vm(configs=...)): those configs are not in the image, so
# build-image.sh would not know their modules.
MODULES = os.path.join(HERE, "modules.json")
HEARTH = os.path.join(ROOT, "build", "hearth")
HEARTHCTL = os.path.join(ROOT, "build", "hearthctl")
BOOT_TIMEOUT = float(os.environ.get("HEARTH_VM_BOOT_TIMEOUT", "90"))


def pytest_configure(config):
    # Per test phase (tests/lib/deadline.py; HEARTH_TEST_TIMEOUT overrides):
    # the slowest test, several boots under TCG, takes about a minute.
    register_deadline(config, 900)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Control(RpcClient):
    """JSON-RPC over the virtio-serial port. The guest side is one stream,
    so a VM has one of these at a time."""

    def __init__(self, path, timeout):
        super().__init__(LineSocket(socket.AF_UNIX, path, timeout), skip_stray=True)


class QMP:
    def __init__(self, path, timeout=30.0):
        self.ls = LineSocket(socket.AF_UNIX, path, timeout)
        json.loads(self.ls.line())  # greeting
        self.cmd("qmp_capabilities")

    def cmd(self, name, **args):
        req = {"execute": name}
        if args:
            req["arguments"] = args
        self.ls.send((json.dumps(req) + "\n").encode())
        while True:
            msg = json.loads(self.ls.line())
            if "return" in msg:
                return msg["return"]
            if "error" in msg:
                raise RuntimeError(f"qmp {name}: {msg['error']}")

    def close(self):
        self.ls.close()


def attack_results(vm, name):
    """The report of a service running tests/vm/attack.c: {attack: result};
    repeated keys keep the last value, and touched_mib keeps them all."""
    out, touched = {}, []
    for x in vm.result("logs.read", {"name": name, "lines": 1000})["lines"]:
        r = json.loads(x["line"])
        out[r["attack"]] = r["result"]
        if r["attack"] == "touched_mib":
            touched.append(int(r["result"]))
    out["touched"] = touched
    return out


def config_files(configs):
    """{NAME: config dict, or text} as files for VM(files=...): each
    /etc/hearth/NAME.json, booted with hearth.config= or --config NAME."""
    out = {}
    for name, cfg in configs.items():
        text = cfg if isinstance(cfg, str) else json.dumps(cfg, indent=1)
        out[f"/etc/hearth/{name}.json"] = (text.encode(), 0o644)
    return out


def cpio_newc(files):
    """A newc cpio archive of {path in the guest: (bytes, mode)}; the
    directories must exist in the image already."""
    out = bytearray()

    def entry(name, data, mode, ino):
        name = name.encode() + b"\0"
        fields = [ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name), 0]
        out.extend(b"070701" + b"".join(b"%08X" % f for f in fields) + name)
        out.extend(b"\0" * (-len(out) % 4))
        out.extend(data)
        out.extend(b"\0" * (-len(out) % 4))

    for i, (path, (data, mode)) in enumerate(sorted(files.items()), start=1):
        entry(path.lstrip("/"), data, 0o100000 | mode, 0x70000 + i)
    entry("TRAILER!!!", b"", 0, 0)
    return bytes(out)


def overlay_initrd(base, files, out):
    """The image's initramfs followed by a second archive holding files:
    the kernel unpacks both, in order, so the later copy of a path wins."""
    with open(base, "rb") as f:
        data = f.read()
    with open(out, "wb") as f:
        f.write(data)
        f.write(gzip.compress(cpio_newc(files), 1, mtime=0))
    return out


class VM:
    def __init__(self, state, args, hostfwd_port=None, files=None):
        self.state = state
        # {guest path: (bytes, mode)} added to the image for this VM.
        self.files = files or {}
        self.ctl_path = os.path.join(state, "ctl.sock")
        self.qmp_path = os.path.join(state, "qmp.sock")
        self.console = os.path.join(state, "console.log")
        self.agent_port = hostfwd_port
        self.args = args
        self.proc = None
        self.ctl = None
        self.qmp = None

    def start(self, wait=True, incoming=None):
        for p in (self.ctl_path, self.qmp_path):
            if os.path.exists(p):
                os.unlink(p)
        os.makedirs(self.state, exist_ok=True)
        cmd = [RUN_VM, "--image", IMAGE, "--state", self.state] + self.args
        if self.files:
            initrd = overlay_initrd(os.path.join(IMAGE, "initramfs.cpio.gz"), self.files,
                                    os.path.join(self.state, "initramfs.cpio.gz"))
            cmd += ["--initrd", initrd]
        if self.agent_port:
            cmd += ["--hostfwd", f"tcp:127.0.0.1:{self.agent_port}-:9119"]
        if incoming:
            cmd += ["--incoming", incoming]
        self.log = open(self.console, "wb")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        self._wait_path(self.qmp_path)
        self.qmp = QMP(self.qmp_path)
        if incoming:
            self._wait_incoming()
            self.qmp.cmd("cont")
        if wait:
            self.connect()
        return self

    def _wait_path(self, path):
        deadline = time.monotonic() + 30
        while not os.path.exists(path):
            if self.proc.poll() is not None:
                raise AssertionError(f"qemu exited {self.proc.returncode}:\n{self.console_text()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{path} did not appear")
            time.sleep(0.05)

    def _wait_incoming(self):
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            st = self.qmp.cmd("query-status")
            if st["status"] not in ("inmigrate", "restore-vm"):
                return
            mig = self.qmp.cmd("query-migrate")
            if mig.get("status") == "failed":
                raise AssertionError(f"incoming migration failed: {mig}")
            time.sleep(0.1)
        raise AssertionError("incoming migration did not finish")

    def connect(self, timeout=BOOT_TIMEOUT):
        """Connects to the control channel and waits for hearth to answer.

        One connection, kept: what the host writes before the guest opens
        its port waits in the chardev, so pings are repeated on it until
        one is answered (later answers to the extra pings are skipped by
        id)."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"qemu exited {self.proc.returncode}:\n{self.console_text()}")
            try:
                c = Control(self.ctl_path, 1.0)
            except OSError as e:
                last = e
                time.sleep(0.2)
                continue
            try:
                while time.monotonic() < deadline:
                    if self.proc.poll() is not None:
                        break
                    c.ls.send(b'{"jsonrpc":"2.0","id":0,"method":"ping"}\n')
                    try:
                        msg = json.loads(c.ls.line())
                    except socket.timeout:
                        continue
                    if "result" in msg:
                        c.ls.sock.settimeout(30.0)
                        self.ctl = c
                        return c
            except (OSError, EOFError, ValueError) as e:
                last = e
                c.close()
        raise AssertionError(f"hearth did not answer within {timeout}s ({last}):\n"
                             f"{self.console_text()}")

    def disconnect(self):
        if self.ctl:
            self.ctl.close()
            self.ctl = None

    def result(self, method, params=None):
        return self.ctl.result(method, params)

    def call(self, method, params=None):
        return self.ctl.call(method, params)

    def methods(self):
        return set(self.result("version").get("methods", []))

    def require(self, *methods):
        missing = [m for m in methods if m not in self.methods()]
        # A method missing from the table is a broken build, not a reason
        # to skip the test that needs it.
        assert not missing, f"this hearth's version lists no {', '.join(missing)}"

    def agent(self, command, timeout=15.0):
        """One command to the stand-in agent through the forwarded port."""
        s = LineSocket(socket.AF_INET, ("127.0.0.1", self.agent_port), timeout)
        try:
            s.send(command.encode() + b"\n")
            return s.line().decode()
        finally:
            s.close()

    def agent_state(self):
        return json.loads(self.agent("state"))

    def wait_agent(self, timeout=60.0):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                return self.agent_state()
            except (OSError, EOFError, ValueError) as e:
                last = e
                time.sleep(0.3)
        raise AssertionError(f"stand-in agent did not answer ({last}):\n{self.console_text()}")

    def service(self, name):
        for s in self.result("status")["services"]:
            if s["name"] == name:
                return s
        raise AssertionError(f"no service {name}")

    def wait_for(self, pred, timeout=30.0, what="condition"):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            v = pred()
            if v:
                return v
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what}")

    def wait_exit(self, timeout=60.0):
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"qemu still running after {timeout}s:\n{self.console_text()}")

    def console_text(self):
        try:
            with open(self.console, "rb") as f:
                return f.read().decode(errors="replace")[-6000:]
        except OSError:
            return ""

    def kill(self):
        self.disconnect()
        if self.qmp:
            self.qmp.close()
            self.qmp = None
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if getattr(self, "log", None):
            self.log.close()


@pytest.fixture(scope="session")
def image():
    if not shutil.which("qemu-system-x86_64"):
        pytest.skip("qemu-system-x86_64 is not installed (scripts/deps.sh installs it)")
    return build_image()


def build_image():
    """The vmtest image, rebuilt when one of its inputs is newer (also
    used by tests/soak)."""
    if not os.path.exists(ATTACK) or os.path.getmtime(ATTACK) < os.path.getmtime(ATTACK_SRC):
        os.makedirs(os.path.dirname(ATTACK), exist_ok=True)
        subprocess.run(["musl-gcc", "-static", "-Os", "-s", "-std=gnu11", "-Wall", "-Wextra",
                        "-Werror", "-Wno-format-truncation", "-D_GNU_SOURCE", "-isystem",
                        os.path.join(ROOT, "build", "deps", "kinclude"), "-o", ATTACK, ATTACK_SRC],
                       check=True)
    initrd = os.path.join(IMAGE, "initramfs.cpio.gz")
    configs = [os.path.join(ROOT, "rootfs", "qemu", "hearth.json"),
               os.path.join(ROOT, "rootfs", "qemu", "disk.json"), os.path.join(HERE, "hostile.json"),
               hermes_config.write(), MODULES]
    inputs = [HEARTH, ATTACK, os.path.join(ROOT, "rootfs", "build-image.sh")] + configs
    # The stand-in agent and the home template are baked in too.
    inputs += [os.path.join(ROOT, "rootfs", "standin", "hermes.c")]
    inputs += [os.path.join(d, f) for d, _, fs in os.walk(os.path.join(ROOT, "rootfs", "hermes"))
               for f in fs]
    stale = (not os.path.exists(initrd) or
             os.path.getmtime(initrd) < max(os.path.getmtime(p) for p in inputs))
    if stale:
        cmd = [os.path.join(ROOT, "rootfs", "build-image.sh"), "--no-ext4", "--out", IMAGE,
               "--file", ATTACK, ATTACK_IN_IMAGE]
        for c in configs[1:]:
            cmd += ["--extra", c]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return IMAGE


@pytest.fixture
def hostdirs():
    d = tempfile.mkdtemp(prefix="hearth-vm-")
    dirs = {k: os.path.join(d, k) for k in ("state", "home", "workspace", "skills")}
    for p in dirs.values():
        os.makedirs(p)
    dirs["root"] = d
    yield dirs
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def make_vm(image, hostdirs):
    vms = []

    def make(extra=None, state=None, shares=True, agent=True, configs=None, files=None):
        """configs: {NAME: config dict}, each installed as
        /etc/hearth/NAME.json (boot it with --config NAME); files: more
        {guest path: (bytes, mode)}."""
        added = dict(files or {})
        added.update(config_files(configs or {}))
        args = []
        if shares:
            args += ["--home", hostdirs["home"], "--workspace", hostdirs["workspace"],
                     "--skills", hostdirs["skills"]]
        else:
            args += ["--no-shares"]
        args += extra or []
        vm = VM(state or hostdirs["state"], args, free_port() if agent else None, added)
        vms.append(vm)
        return vm

    yield make
    for vm in vms:
        vm.kill()
