"""Helpers shared by the Python parts of the bench scripts (imported with
tests/bench on sys.path)."""
import os
import shutil
import signal
import subprocess
import time


def row(key, fig, hv, peer, pv):
    """One table row: key, figure, hearth's value, peer, peer's value."""
    print(f"{key}\t{fig}\t{hv}\t{peer}\t{pv}")


def which(name):
    return shutil.which(name) or (os.path.exists(f"/usr/sbin/{name}") and f"/usr/sbin/{name}") or None


def wait_file(path, timeout=5):
    """Waits for path to exist and hold something."""
    t = time.monotonic() + timeout
    while time.monotonic() < t:
        if os.path.exists(path) and os.path.getsize(path) > 0:
            return True
        time.sleep(0.002)
    return False


def stop(p):
    """SIGTERM, then SIGKILL after 5 s."""
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
