"""Helpers shared by the Python parts of the bench scripts (imported with
tests/bench on sys.path)."""
import json
import os
import shutil
import signal
import socket
import statistics
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


def wait_path(path, tries=250, step=0.02):
    """Waits for path to exist (a socket, which has no size to wait for)."""
    for _ in range(tries):
        if os.path.exists(path):
            return True
        time.sleep(step)
    return False


class Conn:
    """A client of a JSON-lines protocol over a unix socket: hearth's
    control channel or qemu-ga's, one request at a time."""

    def __init__(self, sock_path, recv_bytes=1 << 16):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.settimeout(30)
        self.s.connect(sock_path)
        self.buf = b""
        self.recv_bytes = recv_bytes

    def send(self, obj):
        self.s.sendall((json.dumps(obj) + "\n").encode())

    def line(self):
        while b"\n" not in self.buf:
            chunk = self.s.recv(self.recv_bytes)
            if not chunk:
                raise EOFError
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def call(self, obj):
        self.send(obj)
        return self.line()


def start_hearth(hearth, tmp, procs):
    """hearth as a supervisor with no service and one unix listener; the
    process joins procs (for the caller's stop). Returns the socket's path."""
    sock = os.path.join(tmp, "ctl.sock")
    with open(os.path.join(tmp, "c.json"), "w") as f:
        json.dump({"control": {"listen": ["unix:" + sock]}, "services": []}, f)
    procs.append(subprocess.Popen([hearth, "--mode", "supervisor", "-c",
                                   os.path.join(tmp, "c.json"), "--log", "warn"]))
    wait_path(sock)
    return sock


def start_qga(tmp, procs):
    """qemu-ga listening on a unix socket; the process joins procs.
    Returns the socket's path, or None when qemu-ga is not installed."""
    qga = which("qemu-ga")
    if not qga:
        return None
    sock, state = os.path.join(tmp, "qga.sock"), os.path.join(tmp, "qga-state")
    os.mkdir(state)
    procs.append(subprocess.Popen([qga, "-m", "unix-listen", "-p", sock, "-t", state,
                                   "-f", os.path.join(tmp, "qga.pid")],
                                  stderr=subprocess.DEVNULL))
    wait_path(sock)
    return sock


def hearth_config(tmp, services, name):
    """A supervisor config of services, written to tmp/name; its path. The
    control socket sits in tmp/ctl, a directory of its own: a contained
    service's namespace hides that directory. Each service may write tmp
    (its `writable`): a contained service's root is read-only and its /tmp
    a private tmpfs, where the stamps it writes would never reach the
    bench (a service with isolation off ignores the key)."""
    os.makedirs(os.path.join(tmp, "ctl"), exist_ok=True)
    path = os.path.join(tmp, name)
    services = [dict({"writable": [tmp]}, **s) for s in services]
    with open(path, "w") as f:
        json.dump({"control": {"listen": ["unix:" + os.path.join(tmp, "ctl", "ctl.sock")]},
                   "services": services}, f)
    return path


_stamps = [0]


def exec_latency(tmp, cmd_for, runs=40):
    """start -> child exec: cmd_for(f) is a command (built before the clock
    starts) whose child is the stamp helper writing CLOCK_MONOTONIC at its
    exec to f. The median in ms of runs starts, as text, or "failed"."""
    lat = exec_latencies(tmp, cmd_for, runs)
    return f"{statistics.median(lat):.2f}" if lat else "failed"


def exec_latencies(tmp, cmd_for, runs, pass_fds=()):
    """exec_latency's runs, each start's latency in ms (a start whose stamp
    never came is left out); pass_fds are kept open in the command."""
    lat = []
    for _ in range(runs):
        _stamps[0] += 1
        f = os.path.join(tmp, f"x{_stamps[0]}")
        cmd = cmd_for(f)
        t0 = time.monotonic_ns()
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             pass_fds=pass_fds)
        if not wait_file(f):
            stop(p)
            continue
        with open(f) as fh:
            lat.append((int(fh.read().split()[0]) - t0) / 1e6)
        if p.poll() is None:
            p.wait(5)
        stop(p)
    return lat


def wait_stamps(path, n, timeout, step=0.01):
    """Waits until the stamp helper has written more than n stamps to path
    (one an exec of a restarted service)."""
    t = time.monotonic() + timeout
    while time.monotonic() < t:
        if os.path.exists(path):
            with open(path) as f:
                if len(f.read().split()) > n:
                    return
        time.sleep(step)


def stamp_gaps(path, n):
    """The gaps in ms between the first n + 1 stamps in path."""
    with open(path) as f:
        ts = [int(x) for x in f.read().split()][:n + 1]
    return [(b - a) / 1e6 for a, b in zip(ts, ts[1:])]
