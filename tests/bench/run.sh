#!/bin/sh
# make bench: hearth's figures. Rows beside peers (qemu-ga, tini, s6,
# nft -f) are added as the measured features land; this prints what can be
# measured now and writes build/bench.json.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B="$ROOT/build"
tmp=$(mktemp -d /tmp/hearth-bench.XXXXXX)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$tmp"' EXIT

size=$(stat -c %s "$B/hearth")
cat > "$tmp/c.json" <<JSON
{"control":{"listen":["unix:$tmp/ctl.sock"]},"services":[]}
JSON
"$B/hearth" --mode supervisor -c "$tmp/c.json" --log warn &
pid=$!
for _ in $(seq 100); do [ -S "$tmp/ctl.sock" ] && break; sleep 0.02; done
rss=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)
ping=$(/usr/bin/python3 - "$tmp/ctl.sock" <<'PY'
import socket, sys, time, statistics
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
f = s.makefile("rb")
req = b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'
lat = []
for i in range(3000):
    t = time.perf_counter_ns(); s.sendall(req); f.readline(); lat.append(time.perf_counter_ns() - t)
lat = sorted(lat[500:])
print(f"{statistics.median(lat)/1000:.1f} {lat[int(len(lat)*0.99)]/1000:.1f}")
PY
)
p50=${ping% *}; p99=${ping#* }
printf '%-40s %12s\n' "figure" "hearth"
printf '%-40s %12s\n' "binary size, static stripped (KiB)" "$((size / 1024))"
printf '%-40s %12s\n' "RSS idle (KiB)" "$rss"
printf '%-40s %12s\n' "ping round trip p50 / p99 (us, python)" "$p50 / $p99"
echo "(peer rows: qemu-ga, tini, s6, nft -f — not measured yet)"
cat > "$B/bench.json" <<JSON
{"binary_bytes": $size, "rss_idle_kib": $rss, "ping_p50_us": $p50, "ping_p99_us": $p99}
JSON
