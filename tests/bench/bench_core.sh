#!/bin/sh
# Size and idle memory of a hearth with no services (the control round
# trip is bench_ping.sh).
set -eu
B="$BUILD"
tmp=$(mktemp -d /tmp/hearth-bench.XXXXXX)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
# A signal (a closed pipe included) ends the script through the EXIT trap,
# so no server it started outlives it.
trap 'exit 1' INT TERM HUP PIPE

size=$(stat -c %s "$B/hearth")
cat > "$tmp/c.json" <<JSON
{"control":{"listen":["unix:$tmp/ctl.sock"]},"services":[]}
JSON
"$B/hearth" --mode supervisor -c "$tmp/c.json" --log warn &
pid=$!
for _ in $(seq 100); do [ -S "$tmp/ctl.sock" ] && break; sleep 0.02; done
rss=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)
printf 'binary_bytes\tbinary size, static stripped (KiB)\t%s\t-\t-\n' "$((size / 1024))"
printf 'rss_idle_kib\tRSS idle (KiB)\t%s\t-\t-\n' "$rss"
