#!/bin/sh
# Size and idle memory of a hearth with no services, beside qemu-ga, the
# guest agent doing the control-channel half of hearth's job: its binary
# stripped as hearth's is, and its RSS idle on a unix socket with no client
# (the control round trip is bench_ping.sh).
set -eu
B="$BUILD"
tmp=$(mktemp -d /tmp/hearth-bench.XXXXXX)
pids=
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null || :; done
    for p in $pids; do wait "$p" 2>/dev/null || :; done
    rm -rf "$tmp"
}
trap cleanup EXIT
# A signal (a closed pipe included) ends the script through the EXIT trap,
# so no server it started outlives it.
trap 'exit 1' INT TERM HUP PIPE

rss() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
wait_sock() { for _ in $(seq 250); do [ -S "$1" ] && return 0; sleep 0.02; done; return 1; }

size=$(stat -c %s "$B/hearth")   # already stripped by the build
cat > "$tmp/c.json" <<JSON
{"control":{"listen":["unix:$tmp/ctl.sock"]},"services":[]}
JSON
"$B/hearth" --mode supervisor -c "$tmp/c.json" --log warn &
hpid=$!
pids="$pids $hpid"
wait_sock "$tmp/ctl.sock"
sleep 0.3   # as long as qemu-ga gets below: start-up's pages settled
hrss=$(rss "$hpid")

qga=$(command -v qemu-ga || { [ -x /usr/sbin/qemu-ga ] && echo /usr/sbin/qemu-ga; } || :)
if [ -n "$qga" ]; then
    cp "$qga" "$tmp/qemu-ga.stripped"
    strip "$tmp/qemu-ga.stripped" 2>/dev/null || :
    qsize=$(($(stat -c %s "$tmp/qemu-ga.stripped") / 1024))
    mkdir "$tmp/qga-state"
    "$qga" -m unix-listen -p "$tmp/qga.sock" -t "$tmp/qga-state" -f "$tmp/qga.pid" \
        2> /dev/null &
    qpid=$!
    pids="$pids $qpid"
    if wait_sock "$tmp/qga.sock"; then
        sleep 0.3
        qrss=$(rss "$qpid")
    else
        qrss="failed: qemu-ga did not start"
    fi
else
    qsize="failed: qemu-ga not installed" qrss=$qsize
fi
printf 'binary_bytes\tbinary size, static stripped (KiB; qemu-ga: its dynamic binary stripped, its shared libraries not counted)\t%s\tqemu-ga\t%s\n' \
    "$((size / 1024))" "$qsize"
printf 'rss_idle_kib\tRSS idle, no service, no client (KiB)\t%s\tqemu-ga\t%s\n' "$hrss" "$qrss"
