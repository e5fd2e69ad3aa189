#!/bin/sh
# 10,000 allowOut CIDRs applied atomically: hearth's egress.set round trip
# (validate, one nf_tables batch, read-back) beside `nft -f` of the same
# ruleset, each in a network namespace of its own. Median of 7 runs.
set -eu
B="$BUILD"
tag=$$
tmp=$(mktemp -d /tmp/hearth-bench.XXXXXX)
pid=
cleanup() {
    # $pid is unshare, which ignores SIGTERM while it waits for its child:
    # hearth, PID 1 of the new pid namespace, is told directly.
    if [ -n "$pid" ]; then
        pkill -TERM -P "$pid" 2>/dev/null || :
        wait "$pid" 2>/dev/null || :
    fi
    ip netns del "egbh$tag" 2>/dev/null || true
    ip netns del "egbn$tag" 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT
# A signal (a closed pipe included) ends the script through the EXIT trap,
# so no server it started outlives it.
trap 'exit 1' INT TERM HUP PIPE
command -v nft >/dev/null || { echo "bench_egress: nft not installed" >&2; exit 1; }
ip netns add "egbh$tag"
ip netns add "egbn$tag"
# One veth pair in each namespace, as a guest has its NIC: hearth's batch
# then carries the netdev table too (the same sets and an egress-hook
# chain per interface), and so does the nft -f peer's (whose set lookups
# read the network header, as nft's syntax has it; the work is the same).
ip -n "egbh$tag" link add bh0 type veth peer name bh1
ip -n "egbn$tag" link add bn0 type veth peer name bn1
cat > "$tmp/c.json" <<JSON
{"control":{"listen":["unix:$tmp/ctl.sock"]},"services":[]}
JSON
ip netns exec "egbh$tag" unshare --pid --fork --mount --uts --ipc --mount-proc \
    "$B/hearth" -c "$tmp/c.json" --log warn &
pid=$!
for _ in $(seq 200); do [ -S "$tmp/ctl.sock" ] && break; sleep 0.02; done
/usr/bin/python3 - "$tmp" "egbn$tag" <<'PY'
import json, socket, statistics, subprocess, sys, time
tmp, nsn = sys.argv[1], sys.argv[2]
# 10,000 distinct public /24s (none overlap, so nothing merges).
cidrs = [f"{11 + (i >> 8) // 256}.{(i >> 8) % 256}.{i % 256}.0/24" for i in range(10000)]
s = socket.socket(socket.AF_UNIX); s.connect(tmp + "/ctl.sock"); f = s.makefile("rb")
def hearth(cidrs, i):
    req = {"jsonrpc": "2.0", "id": i, "method": "egress.set",
           "params": {"allowPublicTraffic": True, "allowOut": cidrs, "denyOut": []}}
    line = (json.dumps(req) + "\n").encode()
    t = time.perf_counter(); s.sendall(line); r = json.loads(f.readline())
    dt = time.perf_counter() - t
    assert "result" in r, r
    return dt
def elems(c): return ", ".join(c) if c else ""
private4 = ("0.0.0.0/8, 10.0.0.0/8, 100.64.0.0/10, 127.0.0.0/8, 169.254.0.0/16, "
            "172.16.0.0/12, 192.168.0.0/16, 198.18.0.0/15, 224.0.0.0/3")
sets = f"""
  set always4 {{ type ipv4_addr; flags interval; }}
  set always6 {{ type ipv6_addr; flags interval; }}
  set allow4 {{ type ipv4_addr; flags interval; elements = {{ {elems(cidrs)} }} }}
  set allow6 {{ type ipv6_addr; flags interval; }}
  set deny4 {{ type ipv4_addr; flags interval; elements = {{ {private4} }} }}
  set deny6 {{ type ipv6_addr; flags interval; elements = {{ fc00::/7, fe80::/10, ff00::/8 }} }}"""
base = "".join(f"""
  chain egress-{d} {{
    type filter hook egress device "{d}" priority 0; policy accept;
    jump allowlist
  }}""" for d in ("bn0", "bn1"))
netdev = f"""table netdev hearth
delete table netdev hearth
table netdev hearth {{{sets}
  chain allowlist {{
    @ll,96,16 0x8100 counter drop
    @ll,96,16 0x88a8 counter drop
    meta rtclassid >= 0 meta mark & 0x10000000 != 0 counter accept
    @ll,96,16 0x86dd @ll,160,8 0x3a @ll,432,8 133-137 counter accept
    ip daddr @always4 counter accept
    ip6 daddr @always6 counter accept
    ip daddr @allow4 counter accept
    ip6 daddr @allow6 counter accept
    ip daddr @deny4 counter drop
    ip6 daddr @deny6 counter drop
    counter accept
  }}{base}
}}
"""
rules = f"""table inet hearth
delete table inet hearth
table inet hearth {{{sets}
  chain inbound {{
    type filter hook prerouting priority 0; policy accept;
    meta mark set meta mark & 0xefffffff
    meta iiftype != loopback ct state new ct mark set ct mark | 0x10000000 counter
  }}
  chain output {{
    type filter hook output priority 0; policy accept;
    meta mark set meta mark & 0xefffffff
    oifname "lo" counter accept
    ct direction original ct state established,related counter accept
    ct direction reply ct state established,related ct mark & 0x10000000 != 0 meta mark set meta mark | 0x10000000 counter accept
    meta nfproto ipv6 meta l4proto ipv6-icmp icmpv6 type 133-137 counter accept
    ip daddr @always4 counter accept
    ip6 daddr @always6 counter accept
    ip daddr @allow4 counter accept
    ip6 daddr @allow6 counter accept
    ip daddr @deny4 meta l4proto tcp counter reject with tcp reset
    ip daddr @deny4 counter reject with icmpx admin-prohibited
    ip6 daddr @deny6 meta l4proto tcp counter reject with tcp reset
    ip6 daddr @deny6 counter reject with icmpx admin-prohibited
    counter accept
  }}
}}
""" + netdev
open(tmp + "/p.nft", "w").write(rules)
def nft():
    t = time.perf_counter()
    subprocess.run(["ip", "netns", "exec", nsn, "nft", "-f", tmp + "/p.nft"], check=True)
    return time.perf_counter() - t
# Alternate the two so neither gets a quieter machine.
hs, ns = [], []
for i in range(7):
    hs.append(hearth(cidrs if i % 2 == 0 else cidrs[::-1], i + 1)); ns.append(nft())
h, n = statistics.median(hs) * 1000, statistics.median(ns) * 1000
print(f"egress_10k_ms\t10,000 CIDRs applied atomically (ms, median)\t{h:.1f}\tnft -f\t{n:.1f}")
PY
