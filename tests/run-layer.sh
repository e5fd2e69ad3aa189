#!/bin/sh
# Runs one pytest layer (static, integration, vm, valgrind or runtime) and prints
# its counts as "LAYER: N passed, N failed, N skipped" on the last line.
# Arguments after the layer go to pytest (`tests/run-layer.sh vm -k files`).
#
# runtime: the OCI image (rootfs/build-oci.sh, built by its conftest) under
# podman and runc, in a private store under build/runtime.
#
# valgrind: the integration tests marked valgrind, with build/hearth-debug
# (glibc, -g) under memcheck; conftest fails a test whose run valgrind
# reported an error in. HEARTH_WRAP overrides the valgrind command.
set -u
layer=$1
shift
ROOT=$(cd "$(dirname "$0")/.." && pwd)
out="$ROOT/build/test"
mkdir -p "$out"
PY=/usr/bin/python3
dir=$layer
select=""
if [ "$layer" = valgrind ]; then
    if ! command -v valgrind >/dev/null 2>&1; then
        echo "valgrind: not installed (scripts/deps.sh installs it); layer skipped"
        echo "valgrind: 0 passed, 0 failed, 1 skipped"
        exit 0
    fi
    if ! make -s -C "$ROOT" build/hearth-debug build/hearthctl >"$out/valgrind.build.log" 2>&1; then
        cat "$out/valgrind.build.log"
        echo "valgrind: 0 passed, 1 failed, 0 skipped"
        exit 1
    fi
    dir=integration
    select="-m valgrind"
    export HEARTH_BIN="$ROOT/build/hearth-debug"
    # conftest adds a log file per process, the error exit status and
    # tests/valgrind.supp, and drops -q: it needs each run's ERROR SUMMARY.
    export HEARTH_WRAP="${HEARTH_WRAP:-valgrind --leak-check=full --errors-for-leak-kinds=definite --track-fds=no}"
fi
if ! $PY -c 'import pytest' 2>/dev/null; then
    echo "$layer: python3-pytest is missing (scripts/deps.sh installs it)"
    echo "$layer: 0 passed, 1 failed, 0 skipped"
    exit 1
fi
if ! ls "$ROOT/tests/$dir"/test_*.py >/dev/null 2>&1; then
    echo "$layer: no tests in tests/$dir"
    echo "$layer: 0 passed, 0 failed, 0 skipped"
    exit 0
fi
cd "$ROOT"
$PY -m pytest -q -rs -p no:cacheprovider --junitxml="$out/$layer.xml" $select "$@" "tests/$dir" 2>&1 | tee "$out/$layer.log"
rc=$?
$PY - "$out/$layer.xml" "$layer" <<'PYEOF'
import sys, xml.etree.ElementTree as ET
try:
    root = ET.parse(sys.argv[1]).getroot()
except Exception as e:
    print(f"{sys.argv[2]}: no results ({e})")
    print(f"{sys.argv[2]}: 0 passed, 1 failed, 0 skipped")
    sys.exit(1)
# Per test, not the suite totals: those count an error in a fixture's
# teardown (the valgrind verdict) as one more test, and pytest may write
# such a test as two testcase elements.
cases = {}
for case in root.iter("testcase"):
    key = (case.get("classname"), case.get("name"))
    cases.setdefault(key, set()).update(c.tag for c in case)
p = f = sk = 0
for kinds in cases.values():
    if kinds & {"failure", "error"}:
        f += 1
    elif "skipped" in kinds:
        sk += 1
    else:
        p += 1
print(f"{sys.argv[2]}: {p} passed, {f} failed, {sk} skipped")
PYEOF
