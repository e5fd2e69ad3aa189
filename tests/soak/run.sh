#!/bin/sh
# make soak: a month of one Hermes sandbox's life in under an hour
# (tests/soak/soak.py says what is done and how it is judged). First
# supervisor mode at SOAK_SCALE (default 1: the month, some 40 minutes),
# then a VM at SOAK_VM_SCALE (default 0.02: TCG is slow; 0 leaves the VM
# out). Both run at nice SOAK_NICE (default 10): the machine is shared.
#
#   SOAK_SCALE=0.01 SOAK_VM_SCALE=0.01 make soak    a look in two minutes
#
# Figures: build/soak/MODE/*.csv and summary.json, rows in build/bench.json.
# Exit status: the number of modes that failed (each failure named).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=$ROOT/build/soak
mkdir -p "$B"
# The stand-in agent (as rootfs/stage-hermes.sh builds it for the image)
# under both its names, and the chatty service.
musl-gcc -static -Os -s -std=gnu11 -Wall -Wextra -Werror -Wno-format-truncation \
    -o "$B/hermes" "$ROOT/rootfs/standin/hermes.c" || exit 1
ln -sf hermes "$B/hermes-web-ui"
musl-gcc -static -O2 -s -std=gnu11 -Wall -Wextra -Werror -o "$B/chatty" "$ROOT/tests/soak/chatty.c" ||
    exit 1
nice=${SOAK_NICE:-10}
failed=0
nice -n "$nice" /usr/bin/python3 "$ROOT/tests/soak/soak.py" --mode supervisor \
    --scale "${SOAK_SCALE:-1}" || failed=$((failed + 1))
vm_scale=${SOAK_VM_SCALE:-0.02}
if [ "$vm_scale" != 0 ]; then
    # A mount namespace of its own: the home's tmpfs the VM shares goes
    # with it, however the run ends.
    nice -n "$nice" unshare --mount --propagation private \
        /usr/bin/python3 "$ROOT/tests/soak/soak.py" --mode vm --scale "$vm_scale" ||
        failed=$((failed + 1))
fi
[ "$failed" = 0 ] && echo "soak: every figure flat in every mode" || echo "soak: $failed mode(s) failed"
exit $failed
