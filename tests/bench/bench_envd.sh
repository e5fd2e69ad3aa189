#!/bin/sh
# The envd endpoint (docs/envd.md) driven by E2B's real SDK (build/node,
# scripts/deps.sh --test) beside hearth's own client doing the same job
# over the control socket:
#   - commands.run('true') (a Start stream of /bin/bash -l -c true, to its
#     end event) beside `hearthctl exec -- /bin/bash -l -c true`, the same
#     command (a hearthctl process per call, as a script runs it), and
#     beside `hearthctl exec -- true`; median of 50 after 5 warm-up calls
#     each. The SDK always wraps a command in a login bash, whose start
#     (reading the machine's /etc/profile) is most of its figure;
#   - a 64 MiB file written with files.write and read back with
#     files.read beside `hearthctl cp` in and out; each checked byte for
#     byte, median of 3.
# hearth runs as a supervisor in a network namespace of its own, with the
# endpoint on 127.0.0.1 there (nothing leaves the loopback); both sides
# run as root, their commands contained the same way (exec sessions).
set -eu
B="$BUILD"
SDK="$B/node/node_modules/e2b/dist/index.mjs"
if [ ! -f "$SDK" ] || ! command -v node >/dev/null; then
    printf 'envd_run_vs_hearthctl_exec\tcommands.run(true) round trip (ms)\tfailed: the e2b SDK or node is missing (scripts/deps.sh --test)\thearthctl exec\t-\n'
    exit 0
fi
tmp=$(mktemp -d /tmp/hearth-bench.XXXXXX)
cat > "$tmp/sdk.mjs" <<'JS'
// node sdk.mjs SDK URL FILE TARGET: one JSON line of timings.
const [sdk, url, file, target] = process.argv.slice(2)
const { Sandbox } = await import(sdk)
const fs = await import('node:fs')
const sbx = await Sandbox.create({ debug: true, sandboxUrl: url })
const median = (a) => a.slice().sort((x, y) => x - y)[Math.floor(a.length / 2)]
const run = []
for (let i = 0; i < 55; i++) {
  const t = performance.now()
  const r = await sbx.commands.run('true')
  if (r.exitCode !== 0) throw new Error(`true exited ${r.exitCode}`)
  if (i >= 5) run.push(performance.now() - t)
}
const data = fs.readFileSync(file)
const write = [], read = []
for (let i = 0; i < 3; i++) {
  let t = performance.now()
  await sbx.files.write(target, data.buffer.slice(data.byteOffset, data.byteOffset + data.length))
  write.push((performance.now() - t) / 1000)
  t = performance.now()
  const back = await sbx.files.read(target, { format: 'bytes' })
  read.push((performance.now() - t) / 1000)
  if (Buffer.compare(Buffer.from(back), data) !== 0) throw new Error('the file read back differs')
}
console.log(JSON.stringify({ run_ms: median(run), write_s: median(write), read_s: median(read) }))
JS
# A network namespace of its own: hearth's local-ports table (the
# default egress.deny_local_ports) goes there, not into the machine's.
unshare --net -- /bin/sh -c 'ip link set lo up && exec /usr/bin/python3 - "$@"' sh \
    "$B/hearth" "$B/hearthctl" "$SDK" "$tmp" <<'PY'
import json, os, random, shutil, socket, statistics, subprocess, sys, time
sys.path.insert(0, os.path.join(os.environ["ROOT"], "tests", "bench"))
from benchlib import row, stop, wait_path

hearth, ctl, sdk, tmp = sys.argv[1:5]
SIZE = 64 << 20
procs = []


def free_port():
    while True:
        p = random.randrange(20000, 60000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", p))
                return p
            except OSError:
                pass


def health(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"GET /health HTTP/1.1\r\nConnection: close\r\n\r\n")
            return s.recv(64).startswith(b"HTTP/1.1 204")
    except OSError:
        return False


def timed(args):
    t = time.monotonic()
    r = subprocess.run(args, capture_output=True)
    if r.returncode != 0:
        raise RuntimeError(" ".join(args[3:5]) + ": " + r.stderr.decode(errors="replace")[-200:])
    return time.monotonic() - t


port = free_port()
sock = os.path.join(tmp, "ctl.sock")
with open(os.path.join(tmp, "c.json"), "w") as f:
    json.dump({"control": {"listen": ["unix:" + sock]}, "services": [],
               "envd": {"listen": f"tcp:127.0.0.1:{port}"}}, f)
rows = [("envd_run_vs_hearthctl_exec",
         "commands.run('true') through E2B's SDK, median of 50 (ms)", "hearthctl exec bash -l"),
        ("envd_run_vs_hearthctl_exec",
         "commands.run('true') through E2B's SDK, median of 50 (ms)", "hearthctl exec true"),
        ("envd_write_64m_vs_hearthctl_cp",
         "64 MiB files.write through E2B's SDK, median of 3 (s)", "hearthctl cp in"),
        ("envd_read_64m_vs_hearthctl_cp",
         "64 MiB files.read through E2B's SDK, median of 3 (s)", "hearthctl cp out")]
try:
    procs.append(subprocess.Popen([hearth, "--mode", "supervisor", "-c",
                                   os.path.join(tmp, "c.json"), "--log", "warn"]))
    wait_path(sock)
    deadline = time.monotonic() + 10
    while not health(port) and time.monotonic() < deadline:
        time.sleep(0.05)
    src = os.path.join(tmp, "data.bin")
    with open(src, "wb") as f:
        f.write(os.urandom(SIZE))
    try:
        r = subprocess.run(["node", os.path.join(tmp, "sdk.mjs"), sdk, f"http://127.0.0.1:{port}", src,
                            os.path.join(tmp, "via-sdk.bin")],
                           capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise RuntimeError(r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "node failed")
        got = json.loads(r.stdout.strip().splitlines()[-1])
        hv = [f"{got['run_ms']:.2f}"] * 2 + [f"{got['write_s']:.2f}", f"{got['read_s']:.2f}"]
    except Exception as e:  # noqa: BLE001  (a failed row says why)
        hv = [f"failed: {str(e)[:120]}"] * 4
    base = [ctl, "--connect", "unix:" + sock]
    try:
        ex = []
        for cmd in (["/bin/bash", "-l", "-c", "true"], ["true"]):
            for _ in range(5):
                timed(base + ["exec", "--"] + cmd)
            ex.append(statistics.median(timed(base + ["exec", "--"] + cmd) for _ in range(50)) * 1000)
        dst, back = os.path.join(tmp, "via-cp.bin"), os.path.join(tmp, "back.bin")
        cin, cout = [], []
        for _ in range(3):
            cin.append(timed(base + ["cp", src, "sandbox:" + dst]))
            cout.append(timed(base + ["cp", "sandbox:" + dst, back]))
            if open(back, "rb").read() != open(src, "rb").read():
                raise RuntimeError("the file copied back differs")
        pv = [f"{ex[0]:.2f}", f"{ex[1]:.2f}", f"{statistics.median(cin):.2f}",
              f"{statistics.median(cout):.2f}"]
    except Exception as e:  # noqa: BLE001
        pv = [f"failed: {str(e)[:120]}"] * 4
    for (key, fig, peer), h, p in zip(rows, hv, pv):
        row(key, fig, h, peer, p)
finally:
    for p in procs:
        stop(p)
    shutil.rmtree(tmp, ignore_errors=True)
PY
