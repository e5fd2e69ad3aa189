"""Fixtures that run the OCI image (make oci) under podman with runc, in a
private store under build/runtime/podman (--root, --runroot, --tmpdir), so
nothing here touches the machine's own containers or images.

The image is built afresh by rootfs/build-oci.sh into build/runtime/oci
and loaded once per session. Every container has no network (--network
none; a test that publishes a port asks for podman's bridge, published
on 127.0.0.1 only) and the rlimits these hosts allow, and otherwise podman's defaults:
its default capability set (no CAP_SYS_ADMIN: hearth contains each
service inside a user namespace of its own) and seccomp profile. A test
adds what it asks for: CAP_NET_ADMIN for egress, CAP_SYS_ADMIN to show
containment made without a user namespace, a seccomp profile that
refuses user namespaces."""
import json
import os
import shutil
import subprocess
import sys
import time
import uuid

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from deadline import register as register_deadline  # noqa: E402  (tests/lib)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
WORK = os.path.join(ROOT, "build", "runtime")
STORE = os.path.join(WORK, "podman")
VERSION = open(os.path.join(ROOT, "VERSION")).read().strip()
IMAGE = f"localhost/hearth-hermes:{VERSION}"
HEARTHCTL = os.path.join(ROOT, "build", "hearthctl")

PODMAN = ["podman", "--root", os.path.join(STORE, "root"),
          "--runroot", os.path.join(STORE, "run"),
          "--tmpdir", os.path.join(STORE, "tmp"),
          "--runtime", "runc",          # crun refuses hybrid cgroup hosts
          "--cgroup-manager", "cgroupfs",
          "--events-backend", "file"]


def pytest_configure(config):
    # Per test phase (tests/lib/deadline.py; HEARTH_TEST_TIMEOUT overrides):
    # the first test's setup builds and loads the image.
    register_deadline(config, 900)


# podman's default rlimits exceed what these hosts allow.
BASE = ["--ulimit", "nofile=20000:20000", "--ulimit", "nproc=4096:4096"]


def podman(*args, check=True, timeout=60):
    r = subprocess.run(PODMAN + list(args), capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}")
    return r


def wait_until(fn, timeout=15.0, what="condition"):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


class Container:
    def __init__(self, cid):
        self.cid = cid

    def ctl(self, *args):
        """hearthctl --json inside the container, over the unix socket."""
        r = podman("exec", self.cid, "hearthctl", "--json", *args)
        return json.loads(r.stdout)

    def exec(self, *args, check=True):
        return podman("exec", self.cid, *args, check=check)

    def logs(self):
        r = podman("logs", self.cid)
        return r.stdout + r.stderr

    def service(self, name):
        for s in self.ctl("status")["services"]:
            if s["name"] == name:
                return s
        raise AssertionError(f"no service {name}")

    def inspect(self, fmt):
        return podman("inspect", self.cid, "--format", fmt).stdout.strip()


@pytest.fixture(scope="session")
def image():
    missing = [t for t in ("podman", "runc", "umoci", "busybox") if not shutil.which(t)]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (scripts/deps.sh --test installs them)")
    if os.geteuid() != 0:
        pytest.skip("the runtime tests run podman as root")
    for b in ("hearth", "hearthctl"):
        if not os.access(os.path.join(ROOT, "build", b), os.X_OK):
            pytest.fail(f"build/{b} missing: run make")
    for d in ("root", "run", "tmp"):
        os.makedirs(os.path.join(STORE, d), exist_ok=True)
    out = os.path.join(WORK, "oci")
    r = subprocess.run([os.path.join(ROOT, "rootfs", "build-oci.sh"), "--out", out],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"build-oci.sh failed: {r.stdout}{r.stderr}"
    podman("rm", "-a", "-f", timeout=120)
    r = podman("load", "-i", os.path.join(out, "hearth-hermes.tar"), timeout=120)
    assert IMAGE in r.stdout, r.stdout
    yield IMAGE
    podman("rm", "-a", "-f", check=False, timeout=120)


@pytest.fixture
def run(image, tmp_path):
    """run(config=None, caps=(), args=(), network="none") starts a
    detached container of the image, with config (a dict) as
    /etc/hearth/hearth.json when given, and removes it after the test.
    network "bridge" is podman's default bridge, for a test that
    publishes a port on the host's loopback only (-p 127.0.0.1:...)."""
    started = []

    def start(config=None, caps=(), args=(), network="none"):
        name = "hearth-rt-" + uuid.uuid4().hex[:12]
        opts = list(BASE) + ["--network", network]
        for c in caps:
            opts += ["--cap-add", c]
        if config is not None:
            path = tmp_path / f"{name}.json"
            path.write_text(json.dumps(config))
            opts += ["-v", f"{path}:/etc/hearth/hearth.json:ro"]
        cid = podman("run", "-d", "--name", name, *opts, *args, image).stdout.strip()
        started.append(cid)
        return Container(cid)

    yield start
    for cid in started:
        podman("rm", "-f", "-t", "0", cid, check=False)
