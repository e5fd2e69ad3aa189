#!/bin/sh
# Runs every test layer and ends with one line: "N passed, N failed, N skipped".
# STRICT=1 (what CI runs) counts every skip as a failure as well: a layer
# or a test that cannot run is a gap, not a pass. The skips and their
# reasons are listed before the total either way.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
out="$ROOT/build/test"
mkdir -p "$out"
cd "$ROOT"

tp=0; tf=0; ts=0
add() { # "LAYER: N passed, N failed[, N skipped]"
    line=$1
    p=$(echo "$line" | sed -n 's/.* \([0-9]*\) passed.*/\1/p')
    f=$(echo "$line" | sed -n 's/.* \([0-9]*\) failed.*/\1/p')
    s=$(echo "$line" | sed -n 's/.* \([0-9]*\) skipped.*/\1/p')
    tp=$((tp + ${p:-0})); tf=$((tf + ${f:-0})); ts=$((ts + ${s:-0}))
}

echo "== unit (ASan + UBSan)"
"$ROOT/build/unit" > "$out/unit.log" 2>&1
urc=$?
grep -v '^ok ' "$out/unit.log"
ul=$(tail -n 1 "$out/unit.log")
case "$ul" in
    *passed*failed*) add "unit: $ul" ;;
    *) echo "unit: runner crashed (exit $urc)"; tf=$((tf + 1)) ;;
esac
[ $urc -ne 0 ] && [ "$(echo "$ul" | sed -n 's/.* \([0-9]*\) failed.*/\1/p')" = 0 ] && tf=$((tf + 1))

# static: the checks that read the code rather than run it (the layers of
# docs/architecture.md against every file's includes and calls). valgrind:
# the integration smoke subset with hearth under memcheck (skipped, and
# counted so, where valgrind is missing). runtime: the OCI image under
# podman (skipped, and counted so, where podman is missing).
for layer in static integration vm valgrind runtime; do
    echo "== $layer"
    tests/run-layer.sh "$layer" > "$out/$layer.summary" 2>&1
    cat "$out/$layer.summary" | grep -v '^\.*\s*\[' | tail -n 40
    add "$(tail -n 1 "$out/$layer.summary")"
done

# Every target replays its checked-in corpus and past crash inputs, then
# explores for a short time with a printed seed (FUZZ_SEED=N repeats it);
# skipped where clang's fuzzer runtime is missing. make fuzz runs longer.
# The whole summary is shown: a failure's indented lines carry the input's
# path, its base64 and the command that replays it.
echo "== fuzz (${FUZZ_SECONDS:=10} s per target)"
FUZZ_SECONDS=$FUZZ_SECONDS tests/fuzz/run.sh > "$out/fuzz.summary" 2>&1
grep -E '^fuzz|^    ' "$out/fuzz.summary"
fl=$(grep '^fuzz: ' "$out/fuzz.summary" | tail -n 1)
case "$fl" in
    *passed*) add "$fl" ;;
    *) echo "fuzz: runner gave no result"; tf=$((tf + 1)) ;;
esac

# Every skip with its reason: pytest's "SKIPPED [N] file:line: why" lines
# and the fuzz runner's "fuzz: skipped: why".
reasons=$(cat "$out"/static.summary "$out"/integration.summary "$out"/vm.summary "$out"/valgrind.summary \
              "$out"/runtime.summary "$out"/fuzz.summary 2>/dev/null |
          grep -E '^SKIPPED|^fuzz: skipped|layer skipped' | sort | uniq)
if [ "$ts" -gt 0 ]; then
    echo "skipped ($ts):"
    echo "$reasons" | sed 's/^/  /'
    if [ "${STRICT:-0}" = 1 ]; then
        echo "STRICT=1: each skip counts as a failure"
        tf=$((tf + ts))
    fi
fi
echo "$tp passed, $tf failed, $ts skipped"
[ "$tf" -eq 0 ]
