#!/bin/sh
# metrics round trip: one running service (its cgroup figures) and two
# tmpfs mounts, so every call forks the statvfs child and waits for it
# (the deferred reply); then the same hearth's ping for scale. hearth runs
# in a mount namespace of its own (unshare --mount) so its tmpfs mounts
# never touch the machine's.
set -eu
B="$BUILD"
tmp=$(mktemp -d /tmp/hearth-bench.XXXXXX)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM HUP PIPE

cat > "$tmp/c.json" <<JSON
{"control":{"listen":["unix:$tmp/ctl.sock"]},
 "mounts":[{"target":"$tmp/m1","type":"tmpfs","options":"size=4m"},
           {"target":"$tmp/m2","type":"tmpfs","options":"size=4m"}],
 "metrics":{"disk_check_ms":0},
 "services":[{"name":"agent","argv":["/bin/sleep","100000"]}]}
JSON
unshare --mount --propagation private "$B/hearth" --mode supervisor -c "$tmp/c.json" --log warn &
pid=$!
for _ in $(seq 100); do [ -S "$tmp/ctl.sock" ] && break; sleep 0.02; done
out=$(/usr/bin/python3 - "$tmp/ctl.sock" <<'PY'
import json, socket, statistics, sys, time
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
f = s.makefile("rb")
n = 0
def call(method):
    global n
    n += 1
    s.sendall((json.dumps({"jsonrpc": "2.0", "id": n, "method": method}) + "\n").encode())
    r = json.loads(f.readline())
    assert "result" in r, r
    return r["result"]
assert len([m for m in call("metrics")["mounts"] if "bytes_total" in m]) == 2
def lat(method, k):
    v = []
    for i in range(k):
        t = time.perf_counter_ns(); call(method); v.append(time.perf_counter_ns() - t)
    v = sorted(v[k // 10:])
    return statistics.median(v) / 1000, v[int(len(v) * 0.99)] / 1000
m50, m99 = lat("metrics", 500)
p50, _ = lat("ping", 2000)
print(f"{m50:.1f} {m99:.1f} {p50:.1f}")
PY
)
set -- $out
printf 'metrics_p50_us\tmetrics round trip p50 (us, 1 service, 2 mounts probed in a child)\t%s\t-\t-\n' "$1"
printf 'metrics_p99_us\tmetrics round trip p99 (us, 1 service, 2 mounts probed in a child)\t%s\t-\t-\n' "$2"
printf 'metrics_ping_p50_us\tping round trip p50 on the same hearth (us, Python client)\t%s\t-\t-\n' "$3"
