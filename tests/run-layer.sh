#!/bin/sh
# Runs one pytest layer (integration or vm) and prints its counts as
# "LAYER: N passed, N failed, N skipped" on the last line.
set -u
layer=$1
ROOT=$(cd "$(dirname "$0")/.." && pwd)
out="$ROOT/build/test"
mkdir -p "$out"
PY=/usr/bin/python3
if ! $PY -c 'import pytest' 2>/dev/null; then
    echo "$layer: python3-pytest is missing (scripts/deps.sh installs it)"
    echo "$layer: 0 passed, 1 failed, 0 skipped"
    exit 1
fi
if ! ls "$ROOT/tests/$layer"/test_*.py >/dev/null 2>&1; then
    echo "$layer: no tests in tests/$layer"
    echo "$layer: 0 passed, 0 failed, 0 skipped"
    exit 0
fi
cd "$ROOT"
$PY -m pytest -q -rs -p no:cacheprovider --junitxml="$out/$layer.xml" "tests/$layer" 2>&1 | tee "$out/$layer.log"
rc=$?
$PY - "$out/$layer.xml" "$layer" <<'PYEOF'
import sys, xml.etree.ElementTree as ET
try:
    root = ET.parse(sys.argv[1]).getroot()
except Exception as e:
    print(f"{sys.argv[2]}: no results ({e})")
    print(f"{sys.argv[2]}: 0 passed, 1 failed, 0 skipped")
    sys.exit(1)
suites = [root] if root.tag == "testsuite" else list(root)
t = sum(int(s.get("tests", 0)) for s in suites)
f = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
sk = sum(int(s.get("skipped", 0)) for s in suites)
print(f"{sys.argv[2]}: {t - f - sk} passed, {f} failed, {sk} skipped")
PYEOF
