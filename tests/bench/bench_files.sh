#!/bin/sh
# File read throughput over the control channel: hearth's files.read beside
# qemu-ga's guest-file-open + guest-file-read, both read by the same Python
# client over a unix socket in chunks of 256 KiB (hearth's per-call limit;
# qemu-ga takes up to 48 MiB per call, so the chunk is the same for both),
# base64 decoded, the whole file compared at the end. Median of 3 rounds.
set -eu
B="$BUILD"
tmp=$(mktemp -d /tmp/hearth-bench.XXXXXX)
/usr/bin/python3 - "$B/hearth" "$tmp" <<'PY'
import base64, json, os, shutil, socket, statistics, subprocess, sys, time
sys.path.insert(0, os.path.join(os.environ["ROOT"], "tests", "bench"))
from benchlib import row, stop, wait_file, which

hearth, tmp = sys.argv[1], sys.argv[2]
SIZE, CHUNK, ROUNDS = 64 << 20, 256 << 10, 3
path = os.path.join(tmp, "data.bin")
data = os.urandom(SIZE)
with open(path, "wb") as f:
    f.write(data)
procs = []


class Conn:
    def __init__(self, sock_path):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.settimeout(30)
        self.s.connect(sock_path)
        self.buf = b""

    def call(self, obj):
        self.s.sendall((json.dumps(obj) + "\n").encode())
        while b"\n" not in self.buf:
            chunk = self.s.recv(1 << 20)
            if not chunk:
                raise EOFError
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)


def read_hearth(c):
    out, off, i = [], 0, 0
    while True:
        i += 1
        r = c.call({"jsonrpc": "2.0", "id": i, "method": "files.read",
                    "params": {"path": path, "offset": off, "length": CHUNK}})["result"]
        out.append(base64.b64decode(r["data"]))
        off += r["length"]
        if r["eof"]:
            return b"".join(out)


def read_qga(c):
    h = c.call({"execute": "guest-file-open", "arguments": {"path": path, "mode": "r"}})["return"]
    out = []
    while True:
        r = c.call({"execute": "guest-file-read", "arguments": {"handle": h, "count": CHUNK}})["return"]
        out.append(base64.b64decode(r["buf-b64"]))
        if r["eof"] or r["count"] == 0:
            break
    c.call({"execute": "guest-file-close", "arguments": {"handle": h}})
    return b"".join(out)


def rate(fn, c):
    got = []
    for _ in range(ROUNDS):
        t = time.monotonic()
        d = fn(c)
        dt = time.monotonic() - t
        if d != data:
            return "failed: the data read differs"
        got.append(SIZE / (1 << 20) / dt)
    return f"{statistics.median(got):.0f}"


try:
    with open(os.path.join(tmp, "c.json"), "w") as f:
        json.dump({"control": {"listen": ["unix:" + tmp + "/ctl.sock"]}, "services": []}, f)
    procs.append(subprocess.Popen([hearth, "--mode", "supervisor", "-c", tmp + "/c.json",
                                   "--log", "warn"]))
    for _ in range(250):
        if os.path.exists(tmp + "/ctl.sock"):
            break
        time.sleep(0.02)
    hv = rate(read_hearth, Conn(tmp + "/ctl.sock"))
    qga = which("qemu-ga")
    if not qga:
        pv = "failed: qemu-ga not installed"
    else:
        os.mkdir(tmp + "/qga-state")
        procs.append(subprocess.Popen([qga, "-m", "unix-listen", "-p", tmp + "/qga.sock", "-t",
                                       tmp + "/qga-state", "-f", tmp + "/qga.pid"],
                                      stderr=subprocess.DEVNULL))
        for _ in range(250):
            if os.path.exists(tmp + "/qga.sock"):
                break
            time.sleep(0.02)
        pv = rate(read_qga, Conn(tmp + "/qga.sock"))
    row("file_read_vs_qemu_ga",
        "file read, 64 MiB in 256 KiB calls, same Python client (MiB/s; higher is better)",
        hv, "qemu-ga", pv)
finally:
    for p in procs:
        stop(p)
    shutil.rmtree(tmp, ignore_errors=True)
PY
