#!/bin/sh
# File throughput over the control channel, both ways, beside qemu-ga's
# guest-file-* doing the same job:
#   read:  hearth's files.read beside guest-file-open + guest-file-read;
#   write: hearth's files.write with append (as hearthctl cp sends the
#          chunks after the first) to a file removed before each round,
#          beside guest-file-open "w" + guest-file-write + guest-file-close;
# both driven by the same Python client over a unix socket in chunks of
# 256 KiB (hearth's per-call limit; qemu-ga takes up to 48 MiB per call,
# so the chunk is the same for both), base64 on the wire, the whole file
# compared at the end. Then the same 64 MiB through `hearthctl cp` into
# the sandbox and out of it, beside the same qemu-ga figures: cp does
# more (a temp name renamed over the target after an fsync, a SHA-256 of
# every 1 MiB range checked against files.hash), so those rows are what a
# user of the command gets. The files sit on tmpfs where there is one:
# the figures are the channel's cost, not this disk's. Median of 3 rounds.
set -eu
B="$BUILD"
dir=/dev/shm
[ -d "$dir" ] && [ -w "$dir" ] || dir=/tmp
tmp=$(mktemp -d "$dir/hearth-bench.XXXXXX")
/usr/bin/python3 - "$B/hearth" "$B/hearthctl" "$tmp" <<'PY'
import base64, os, shutil, statistics, subprocess, sys, time
sys.path.insert(0, os.path.join(os.environ["ROOT"], "tests", "bench"))
from benchlib import Conn, row, start_hearth, start_qga, stop

hearth, hearthctl, tmp = sys.argv[1], sys.argv[2], sys.argv[3]
SIZE, CHUNK, ROUNDS = 64 << 20, 256 << 10, 3
path = os.path.join(tmp, "data.bin")
out = os.path.join(tmp, "out.bin")
data = os.urandom(SIZE)
with open(path, "wb") as f:
    f.write(data)
procs = []
ids = [0]


def call(c, method, params):
    ids[0] += 1
    r = c.call({"jsonrpc": "2.0", "id": ids[0], "method": method, "params": params})
    if "error" in r:
        raise RuntimeError(f"{method}: {r['error']['message']}")
    return r["result"]


def read_hearth(c):
    got, off = [], 0
    while True:
        r = call(c, "files.read", {"path": path, "offset": off, "length": CHUNK})
        got.append(base64.b64decode(r["data"]))
        off += r["length"]
        if r["eof"]:
            return b"".join(got)


def read_qga(c):
    h = c.call({"execute": "guest-file-open", "arguments": {"path": path, "mode": "r"}})["return"]
    got = []
    while True:
        r = c.call({"execute": "guest-file-read", "arguments": {"handle": h, "count": CHUNK}})["return"]
        got.append(base64.b64decode(r["buf-b64"]))
        if r["eof"] or r["count"] == 0:
            break
    c.call({"execute": "guest-file-close", "arguments": {"handle": h}})
    return b"".join(got)


def chunks():
    # Encoded before the clock starts, the same for both sides.
    return [base64.b64encode(data[i:i + CHUNK]).decode() for i in range(0, SIZE, CHUNK)]


ENC = chunks()


def write_hearth(c):
    for d in ENC:
        call(c, "files.write", {"path": out, "data": d, "append": True})


def write_qga(c):
    h = c.call({"execute": "guest-file-open", "arguments": {"path": out, "mode": "w"}})["return"]
    for d in ENC:
        c.call({"execute": "guest-file-write", "arguments": {"handle": h, "buf-b64": d}})["return"]
    c.call({"execute": "guest-file-close", "arguments": {"handle": h}})


def rate(fn, c, write=False):
    got = []
    for _ in range(ROUNDS):
        if write and os.path.exists(out):
            os.unlink(out)
        t = time.monotonic()
        d = fn(c)
        dt = time.monotonic() - t
        if write:
            with open(out, "rb") as f:
                d = f.read()
        if d != data:
            return f"failed: the data {'written' if write else 'read'} differs"
        got.append(SIZE / (1 << 20) / dt)
    return f"{statistics.median(got):.1f}"


def measured(fn, conn, write=False):
    try:
        return rate(fn, conn, write)
    except (KeyError, RuntimeError, OSError, EOFError) as e:
        return f"failed: {e}"


def cp_rate(sock, into):
    """hearthctl cp of the 64 MiB file into the sandbox (to out) or out of
    it (path to a local copy); the median rate, or why it failed."""
    local = os.path.join(tmp, "local.bin")
    got = []
    for _ in range(ROUNDS):
        for p in (out, local):
            if os.path.exists(p):
                os.unlink(p)
        argv = [hearthctl, "--connect", "unix:" + sock, "cp",
                path if into else "sandbox:" + path, "sandbox:" + out if into else local]
        t = time.monotonic()
        r = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        dt = time.monotonic() - t
        if r.returncode:
            return f"failed: hearthctl cp exited {r.returncode}: {r.stderr.strip()[:120]}"
        with open(out if into else local, "rb") as f:
            if f.read() != data:
                return "failed: the copy differs"
        got.append(SIZE / (1 << 20) / dt)
    return f"{statistics.median(got):.1f}"


try:
    sock = start_hearth(hearth, tmp, procs)
    hc = Conn(sock, recv_bytes=1 << 20)
    hr = measured(read_hearth, hc)
    hw = measured(write_hearth, hc, write=True)
    cp_in = cp_rate(sock, True)
    cp_out = cp_rate(sock, False)
    qga = start_qga(tmp, procs)
    if not qga:
        qr = qw = "failed: qemu-ga not installed"
    else:
        qc = Conn(qga, recv_bytes=1 << 20)
        qr = measured(read_qga, qc)
        qw = measured(write_qga, qc, write=True)
    row("file_read_vs_qemu_ga",
        "file read, 64 MiB in 256 KiB calls, same Python client (MiB/s; higher is better)",
        hr, "qemu-ga", qr)
    row("file_write_vs_qemu_ga",
        "file write, 64 MiB in 256 KiB calls, same Python client (MiB/s; higher is better)",
        hw, "qemu-ga", qw)
    row("cp_in_vs_qemu_ga",
        "hearthctl cp into the sandbox, 64 MiB, checked (MiB/s; peer: guest-file-write as "
        "above; higher is better)", cp_in, "qemu-ga", qw)
    row("cp_out_vs_qemu_ga",
        "hearthctl cp out of the sandbox, 64 MiB, checked (MiB/s; peer: guest-file-read as "
        "above; higher is better)", cp_out, "qemu-ga", qr)
finally:
    for p in procs:
        stop(p)
    shutil.rmtree(tmp, ignore_errors=True)
PY
