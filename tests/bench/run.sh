#!/bin/sh
# make bench: hearth's figures beside a peer doing the same job. Each
# tests/bench/bench_* script measures one area and prints tab-separated rows
#   key <TAB> figure <TAB> hearth value <TAB> peer name <TAB> peer value
# (peer columns "-" when there is none); this script prints them as one
# table and writes build/bench.json. A script that fails is reported and
# the others still run.
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
w = max([len(r[1]) for r in rows] + [10])
print(f"{'figure':<{w}}  {'hearth':>14}  {'peer':<14} {'peer value':>14}")
out = {}
for key, fig, hv, peer, pv in rows:
    print(f"{fig:<{w}}  {hv:>14}  {peer:<14} {pv:>14}")
    out[key] = {"figure": fig, "hearth": hv, "peer": None if peer == "-" else peer,
                "peer_value": None if pv == "-" else pv}
json.dump(out, open(sys.argv[2], "w"), indent=1)
PY
exit $failed
