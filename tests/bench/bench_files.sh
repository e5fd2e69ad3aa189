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
import base64, os, shutil, statistics, sys, time
sys.path.insert(0, os.path.join(os.environ["ROOT"], "tests", "bench"))
from benchlib import Conn, row, start_hearth, start_qga, stop

hearth, tmp = sys.argv[1], sys.argv[2]
SIZE, CHUNK, ROUNDS = 64 << 20, 256 << 10, 3
path = os.path.join(tmp, "data.bin")
data = os.urandom(SIZE)
with open(path, "wb") as f:
    f.write(data)
procs = []


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
    hv = rate(read_hearth, Conn(start_hearth(hearth, tmp, procs), recv_bytes=1 << 20))
    qga = start_qga(tmp, procs)
    if not qga:
        pv = "failed: qemu-ga not installed"
    else:
        pv = rate(read_qga, Conn(qga, recv_bytes=1 << 20))
    row("file_read_vs_qemu_ga",
        "file read, 64 MiB in 256 KiB calls, same Python client (MiB/s; higher is better)",
        hv, "qemu-ga", pv)
finally:
    for p in procs:
        stop(p)
    shutil.rmtree(tmp, ignore_errors=True)
PY
