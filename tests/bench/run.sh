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


# The design targets (docs/performance.md), judged on this run, each
# beside its peer: "hearth" compares hearth's own figure with the limit,
# "ratio" hearth's figure over the peer's (unrounded); a limit of None is
# a figure the design asks to see beside its peer with no target set.
TARGETS = [
    ("exec_true_uncontained_vs_qemu_ga", "ratio", "<=", 0.5,
     "exec round trip, isolation off <= 0.5x qemu-ga"),
    ("exec_true_vs_qemu_ga", "ratio", "<=", 1.0, "exec round trip, contained <= 1.0x qemu-ga"),
    ("file_read_vs_qemu_ga", "ratio", ">=", 2.0, "file read >= 2x qemu-ga"),
    ("file_write_vs_qemu_ga", "ratio", ">=", 2.0, "file write >= 2x qemu-ga"),
    ("cp_in_vs_qemu_ga", "ratio", ">=", 2.0, "hearthctl cp in >= 2x qemu-ga's write"),
    ("cp_out_vs_qemu_ga", "ratio", ">=", 2.0, "hearthctl cp out >= 2x qemu-ga's read"),
    ("exec_contained_vs_bwrap", "ratio", "<=", 0.5, "contained start -> exec <= 0.5x bwrap"),
    ("exec_uncontained_vs_dumb_init", "ratio", "<=", 1.0,
     "uncontained start -> exec <= 1.0x dumb-init"),
    ("ping_p50_vs_floor_server", "ratio", "<=", 1.10, "ping p50 <= 1.10x the floor server"),
    ("ping_p99_vs_floor_server", "ratio", "<=", 1.25, "ping p99 <= 1.25x the floor server"),
    ("ping_rps_vs_floor_server", "ratio", ">=", 0.8, "ping throughput >= 0.8x the floor server"),
    ("resume_health_hermes_ms", "ratio", None, None,
     "resume -> Hermes health, shipped config (no target)"),
    ("vm_boot_vs_kernel", "ratio", "<=", 0.10, "boot: hearth -> first exec <= 10% of the kernel's"),
    ("skills_cold_ms", "hearth", "<=", 100, "10,000 skills cold <= 100 ms"),
    ("skills_noop_ms", "hearth", "<=", 20, "10,000 skills no-op <= 20 ms"),
    ("restart_extra_ms", "hearth", "<=", 2, "crash -> restart beyond the delay <= 2 ms"),
    ("binary_bytes", "hearth", "<=", 512, "binary <= 512 KiB"),
    ("binary_bytes", "ratio", "<=", 0.5, "binary <= 0.5x qemu-ga's"),
    ("rss_idle_kib", "hearth", "<=", 512, "idle RSS <= 512 KiB"),
]
print()
met = judged = 0
for key, what, op, limit, text in TARGETS:
    e = out.get(key)
    v = None
    if e:
        try:
            h = float(e["hearth"])
            v = h if what == "hearth" else h / float(e["peer_value"])
        except (TypeError, ValueError, ZeroDivisionError):
            v = None
    if e is None:
        seen, verdict = "no such row", "not measured"
    else:
        seen = f"{e['hearth']} vs {e['peer'] or '-'} {e['peer_value'] or '-'}"
        if len(seen) > 60:
            seen = seen[:57] + "..."
        shown = f"{'x' if what == 'ratio' else ''}{v:.3g}" if v is not None else None
        if v is None:
            verdict = "not measured"
        elif limit is None:
            verdict = f"recorded ({shown})"
        else:
            ok = v <= limit if op == "<=" else v >= limit
            judged += 1
            met += ok
            verdict = ("met" if ok else "MISSED") + f" ({shown})"
    print(f"target: {text:<52} {seen:<60} {verdict}")
print(f"targets: {met} of {sum(1 for t in TARGETS if t[3] is not None)} met "
      f"({judged} measured)")

# Each failed row names the side that failed: hearth's, else the peer's.
bad = [(fig, "hearth" if not figure(hv) else peer, hv if not figure(hv) else pv)
       for key, fig, hv, peer, pv in rows if not (figure(hv) and figure(pv))]
for fig, side, why in bad:
    print(f"bench: FAILED row: {fig} ({side}): {why}")
print(f"bench: {len(rows)} rows, {len(rows) - len(bad)} measured, {len(bad)} failed")
sys.exit(1 if bad else 0)
PY
[ $? -ne 0 ] && failed=$((failed + 1))
exit $failed
