#!/bin/sh
# Control round trip: hearth's ping beside qemu-ga's guest-ping and beside
# the floor (tests/bench/floor_server.c, a blocking server that answers
# every line with a fixed line and parses nothing), all measured by the
# same C client (tests/bench/ping_client.c) on one connection: p50 and p99
# of one request at a time, then throughput with 32 requests in flight.
# Then RSS of hearth and of qemu-ga with 64 clients connected.
set -eu
# Every server and the client run on one CPU: a round trip across CPUs
# on a shared VM costs whatever the wake-up of the other vCPU costs at the
# moment (the floor measured 12-50 us unpinned), on one CPU it is the
# two processes' own work and the switches between them.
if [ -z "${BENCH_PING_CPU:-}" ] && command -v taskset > /dev/null 2>&1; then
    BENCH_PING_CPU=$(taskset -cp $$ | sed 's/.*: //; s/[-,].*//')
    export BENCH_PING_CPU
    exec taskset -c "$BENCH_PING_CPU" "$0" "$@"
fi
B="$BUILD"
mkdir -p "$B/bench"
for f in ping_client floor_server; do
    cc -O2 -std=gnu11 -Wall -Wextra -Werror -o "$B/bench/$f" "$ROOT/tests/bench/$f.c"
done
C="$B/bench/ping_client"
tmp=$(mktemp -d /tmp/hearth-bench.XXXXXX)
pids= holder=
cleanup() {
    for p in $holder $pids; do kill "$p" 2>/dev/null || :; done
    for p in $holder $pids; do wait "$p" 2>/dev/null || :; done
    rm -rf "$tmp"
}
trap cleanup EXIT
# A signal (a closed pipe included) ends the script through the EXIT trap,
# so no server it started outlives it.
trap 'exit 1' INT TERM HUP PIPE

HREQ='{"jsonrpc":"2.0","id":1,"method":"ping"}'
QREQ='{"execute":"guest-ping"}'
ROUNDS=5   # rounds interleave the servers; each figure is the median round
N=5000     # sequential requests per round, the first WARM of them dropped
WARM=500
WIN=32     # pipelined phase: requests in flight, and how many in all
M=50000

wait_sock() {
    for _ in $(seq 250); do [ -S "$1" ] && return 0; sleep 0.02; done
    echo "bench_ping: $1 never appeared" >&2
    return 1
}
rss() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
# column $2 of file $1, median over the rounds
med() { awk -v c="$2" '{print $c}' "$1" | sort -n | sed -n "$(((ROUNDS + 1) / 2))p"; }

cat > "$tmp/c.json" <<JSON
{"control":{"listen":["unix:$tmp/ctl.sock"]},"services":[]}
JSON
"$B/hearth" --mode supervisor -c "$tmp/c.json" --log warn &
hpid=$!
pids="$pids $hpid"
"$B/bench/floor_server" "$tmp/floor.sock" > /dev/null &
pids="$pids $!"

qga=$(command -v qemu-ga || { [ -x /usr/sbin/qemu-ga ] && echo /usr/sbin/qemu-ga; } || :)
qpid=
if [ -n "$qga" ]; then
    # Socket, state and pidfile all inside $tmp: nothing is left behind.
    mkdir "$tmp/qga-state"
    "$qga" -m unix-listen -p "$tmp/qga.sock" -t "$tmp/qga-state" -f "$tmp/qga.pid" \
        2> "$tmp/qga.log" &
    qpid=$!
    pids="$pids $qpid"
fi
wait_sock "$tmp/ctl.sock"
wait_sock "$tmp/floor.sock"
[ -z "$qpid" ] || wait_sock "$tmp/qga.sock"

: > "$tmp/hearth.lat"; : > "$tmp/floor.lat"; : > "$tmp/qga.lat"
for _ in $(seq "$ROUNDS"); do
    "$C" lat "$tmp/floor.sock" "$HREQ" $N $WARM $WIN $M >> "$tmp/floor.lat"
    "$C" lat "$tmp/ctl.sock" "$HREQ" $N $WARM $WIN $M >> "$tmp/hearth.lat"
    [ -z "$qpid" ] || "$C" lat "$tmp/qga.sock" "$QREQ" $N $WARM $WIN $M >> "$tmp/qga.lat"
done

one=${BENCH_PING_CPU:+, one CPU}
# One row per peer for column $1 of the rounds: key prefix $2, figure $3.
rows() {
    for p in floor:floor-server qga:qemu-ga; do
        f=${p%%:*} name=${p#*:}
        if [ "$f" = qga ] && [ -z "$qpid" ]; then v="failed: qemu-ga did not start"; else v=$(med "$tmp/$f.lat" "$1"); fi
        printf '%s_vs_%s\t%s\t%s\t%s\t%s\n' "$2" "$(echo "$name" | tr - _)" "$3" \
            "$(med "$tmp/hearth.lat" "$1")" "$name" "$v"
    done
}
rows 1 ping_p50 "ping round trip p50 (us, C client$one)"
rows 2 ping_p99 "ping round trip p99 (us, C client$one)"
rows 3 ping_rps "ping throughput, $WIN in flight (requests/s$one)"

# RSS of server $1 while `ping_client hold` keeps 64 connections to $2,
# having sent $3 once on each ("" sends nothing). Sets $res to
# "RSS connected answered".
hold() {
    : > "$tmp/hold.out"
    "$C" hold "$2" "$3" 64 > "$tmp/hold.out" &
    holder=$!
    for _ in $(seq 250); do [ -s "$tmp/hold.out" ] && break; sleep 0.02; done
    if [ ! -s "$tmp/hold.out" ]; then
        echo "bench_ping: the 64-client holder never got ready" >&2
        return 1
    fi
    sleep 0.2   # let the server finish whatever the last accept started
    r=$(rss "$1")
    kill "$holder"
    wait "$holder" || :
    holder=
    res="$r $(awk '{print $2, $4}' "$tmp/hold.out")"
    sleep 0.2   # the server drains the closed connections before the next hold
}
# hearth must take and answer all 64; anything less is a failed row.
check64() { [ "$2" = 64 ] && [ "$3" = "$4" ] && echo "$1" || echo failed; }

hold "$hpid" "$tmp/ctl.sock" ""
set -- $res
hq=$(check64 "$1" "$2" "$3" 0)
hold "$hpid" "$tmp/ctl.sock" "$HREQ"
set -- $res
hp=$(check64 "$1" "$2" "$3" 64)
if [ -n "$qpid" ]; then
    hold "$qpid" "$tmp/qga.sock" ""
    set -- $res
    qq=$1 qqc=$2
    hold "$qpid" "$tmp/qga.sock" "$QREQ"
    set -- $res
    qp=$1 qpc=$2 qpa=$3
    qnote="; qemu-ga serves one client at a time and took $qpc of the 64 connects, answered $qpa"
    qqnote="; qemu-ga took $qqc of the 64 connects"
else
    qq="failed: qemu-ga did not start" qp="failed: qemu-ga did not start" qnote= qqnote=
fi
printf 'rss_64_silent_vs_qemu_ga\tRSS, 64 clients connected, none has sent (KiB%s)\t%s\tqemu-ga\t%s\n' \
    "$qqnote" "$hq" "$qq"
printf 'rss_64_pinged_vs_qemu_ga\tRSS, 64 clients connected, each sent one ping, then idle (KiB%s)\t%s\tqemu-ga\t%s\n' \
    "$qnote" "$hp" "$qp"
