"""The shipped Hermes sandbox (rootfs/hermes/hearth.json) made bootable
under the test QEMU: only the machine's own sections (control channel,
kernel modules, network, mounts) are taken from rootfs/qemu/hearth.json,
since QEMU here has neither vhost-vsock nor virtio-fs. Seed, skills,
egress and the services are the shipped file's, untouched."""
import json
import os

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SHIPPED = os.path.join(ROOT, "rootfs", "hermes", "hearth.json")
QEMU = os.path.join(ROOT, "rootfs", "qemu", "hearth.json")
MACHINE = ("control", "modules", "network", "mounts")
# Booted with scripts/run-vm --config hermes.
PATH = os.path.join(ROOT, "build", "vmtest", "hermes.json")


def derive():
    with open(SHIPPED) as f:
        cfg = json.load(f)
    with open(QEMU) as f:
        qemu = json.load(f)
    for key in MACHINE:
        cfg[key] = qemu[key]
    return cfg


def write():
    """Writes PATH when its content changes (the image is rebuilt when a
    config is newer than it) and returns it."""
    text = json.dumps(derive(), indent=2) + "\n"
    try:
        with open(PATH) as f:
            if f.read() == text:
                return PATH
    except OSError:
        pass
    os.makedirs(os.path.dirname(PATH), exist_ok=True)
    with open(PATH + ".tmp", "w") as f:
        f.write(text)
    os.replace(PATH + ".tmp", PATH)
    return PATH
