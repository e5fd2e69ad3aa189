#!/bin/sh
# make bench: hearth's figures beside a peer doing the same job. Each
# tests/bench/bench_* script measures one area and prints tab-separated rows
#   key <TAB> figure <TAB> hearth value <TAB> peer name <TAB> peer value
# (peer columns "-" when there is none); this script prints them as one
# table and writes build/bench.json. A script that fails is reported and
# the others still run. A row whose hearth or peer value is not a figure
# ("failed: not installed", "failed") is a failed row: it is listed with
# its reason at the end and make bench exits non-zero.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export ROOT BUILD="$ROOT/build"
rows=$(mktemp /tmp/hearth-bench-rows.XXXXXX)
trap 'rm -f "$rows"' EXIT
failed=0
for b in "$ROOT"/tests/bench/bench_*; do
    [ -x "$b" ] || continue
    if ! "$b" >> "$rows"; then
        echo "bench: $(basename "$b") failed" >&2
        failed=$((failed + 1))
    fi
done
/usr/bin/python3 - "$rows" "$BUILD/bench.json" <<'PY'
import json, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.count("\t") == 4]


def ratio(hv, pv):
    # hearth's figure over the peer's, so 0.5 means half the peer's time
    # or size; blank when either side is not a number.
    try:
        h, p = float(hv), float(pv)
    except ValueError:
        return None
    return round(h / p, 2) if p else None


w = max([len(r[1]) for r in rows] + [10])
print(f"{'figure':<{w}}  {'hearth':>14}  {'peer':<16} {'peer value':>14} {'hearth/peer':>11}")
out = {}
for key, fig, hv, peer, pv in rows:
    r = ratio(hv, pv)
    print(f"{fig:<{w}}  {hv:>14}  {peer:<16} {pv:>14} {'-' if r is None else r:>11}")
    entry = {"figure": fig, "hearth": hv, "peer": None if peer == "-" else peer,
             "peer_value": None if pv == "-" else pv, "ratio": r}
    # Several peers share a key; keep each under key/peer.
    out[key if key not in out else f"{key}/{peer}"] = entry
# make soak's rows (tests/soak) stay: they come from another run.
try:
    kept = {k: v for k, v in json.load(open(sys.argv[2])).items() if k.startswith("soak_")}
except (OSError, ValueError, AttributeError):
    kept = {}
json.dump(dict(out, **{k: v for k, v in kept.items() if k not in out}),
          open(sys.argv[2], "w"), indent=1)


def figure(v):
    try:
        float(v)
        return True
    except ValueError:
        return v == "-"


# The design targets (docs/performance.md), judged on this run: "hearth"
# compares hearth's own figure, "ratio" hearth's figure over the peer's.
TARGETS = [
    ("binary_bytes", "hearth", "<=", 256, "static, stripped <= 256 KiB"),
    ("rss_idle_kib", "hearth", "<=", 1024, "RSS idle <= 1 MiB"),
    ("rss_64_pinged_vs_qemu_ga", "hearth", "<=", 2048, "RSS with 64 clients <= 2 MiB"),
    ("ping_p50_vs_floor_server", "ratio", "<=", 1.25, "ping p50 <= 1.25x the floor server"),
    ("ping_p50_vs_qemu_ga", "ratio", "<=", 1 / 1.7, "ping p50 >= 1.7x faster than qemu-ga"),
    ("ping_rps_vs_floor_server", "ratio", ">=", 0.6, "ping throughput >= 0.6x the floor server"),
    ("exec_vs_dumb_init", "ratio", "<=", 1.0, "start -> exec at or below dumb-init"),
    ("exec_vs_dumb_init", "hearth", "<=", 5, "start -> exec <= 5 ms"),
    ("exec_contained_vs_bwrap", "ratio", "<=", 0.5, "contained start -> exec <= 0.5x bwrap"),
    ("exec_uncontained_vs_dumb_init", "ratio", "<=", 1.0,
     "isolation off start -> exec <= 1.0x dumb-init"),
    ("skills_cold_ms", "hearth", "<=", 100, "10,000 skills cold <= 100 ms"),
    ("skills_noop_ms", "hearth", "<=", 20, "10,000 skills no-op <= 20 ms"),
    ("egress_10k_ms", "hearth", "<=", 40, "10,000 CIDRs <= 40 ms"),
    ("egress_10k_ms", "ratio", "<", 1.0, "10,000 CIDRs below nft -f"),
    ("resume_p50_us", "hearth", "<=", 10000, "sandbox.resume <= 10 ms"),
    ("restart_extra_ms", "hearth", "<=", 2, "crash -> restart beyond the delay <= 2 ms"),
    ("restart_extra_ms", "ratio", "<", 1.0, "restart faster than s6-supervise"),
    ("idle_wakeups_tini", "hearth", "<=", 0, "idle wake-ups 0 with polling off"),
    ("idle_wakeups_activity", "hearth", "<=", 0, "idle wake-ups 0 with activity tracking on"),
    ("idle_wakeups_hermes", "hearth", "<=", 4, "idle wake-ups <= 4/min with the Hermes config"),
]
print()
met = 0
for key, what, op, limit, text in TARGETS:
    e = out.get(key)
    v = None
    if e:
        try:
            v = float(e["hearth"]) if what == "hearth" else e["ratio"]
        except (TypeError, ValueError):
            v = None
    if v is None:
        verdict = "not measured"
    else:
        ok = v <= limit if op == "<=" else v >= limit if op == ">=" else v < limit
        met += ok
        verdict = ("met" if ok else "MISSED") + f" ({'x' if what == 'ratio' else ''}{v:g})"
    print(f"target: {text:<48} {verdict}")
print(f"targets: {met} of {len(TARGETS)} met")

bad = [(fig, peer, hv if not figure(hv) else pv) for key, fig, hv, peer, pv in rows
       if not (figure(hv) and figure(pv))]
for fig, peer, why in bad:
    print(f"bench: FAILED row: {fig} ({'hearth' if peer == '-' else peer}): {why}")
print(f"bench: {len(rows)} rows, {len(rows) - len(bad)} measured, {len(bad)} failed")
sys.exit(1 if bad else 0)
PY
[ $? -ne 0 ] && failed=$((failed + 1))
exit $failed
