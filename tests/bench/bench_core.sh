#!/bin/sh
# Size, idle memory and control round trip of a hearth with no services.
set -eu
B="$BUILD"
tmp=$(mktemp -d /tmp/hearth-bench.XXXXXX)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT

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
printf 'binary_bytes\tbinary size, static stripped (KiB)\t%s\t-\t-\n' "$((size / 1024))"
printf 'rss_idle_kib\tRSS idle (KiB)\t%s\t-\t-\n' "$rss"
printf 'ping_p50_us\tping round trip p50 (us, python client)\t%s\t-\t-\n' "${ping% *}"
printf 'ping_p99_us\tping round trip p99 (us, python client)\t%s\t-\t-\n' "${ping#* }"
