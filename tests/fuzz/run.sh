#!/bin/sh
# make fuzz (and the fuzz layer of make test): builds the libFuzzer targets
# in tests/fuzz (fuzz_<name>.c) and, for each target:
#  1. replays, one by one and in a fixed order, every checked-in input:
#     the seed corpus tests/fuzz/corpus/<target>/ and every input that once
#     crashed it, tests/fuzz/crashes/<target>/. This part is the same on
#     every machine and every run: a past bug that comes back fails it.
#  2. explores for FUZZ_SECONDS (default 20; 0: not at all) seconds from
#     those inputs with libFuzzer's -seed=N. N is FUZZ_SEED when set, else
#     random; it is printed first. The same N, target and binary repeat the same sequence
#     of inputs (as far as the time allows).
# A failure in either part prints the input's path, its base64 and the
# command that replays it (docs/architecture.md, "Replaying a fuzz
# failure").
#
# Why it is shaped this way:
#  - Everything it writes is under build/fuzz: binaries, the working corpus
#    of each exploration (build/fuzz/corpus-work/<target>, made afresh
#    from the checked-in inputs on every run so a seed means the same run
#    on any machine; libFuzzer adds to it), crash artifacts
#    (build/fuzz/artifacts/<target>-seed<N>) and logs. The source tree's
#    corpora stay exactly as committed.
#  - The Makefile builds the targets (build/fuzz/fuzz_<name>): each links
#    its harness with hearth's library compiled for fuzzing
#    (build/obj/fuzz/libhearth.a), from which the linker takes what the
#    harness calls, so no target lists its sources. cJSON is compiled from
#    source with the same sanitizers so crashes and overreads inside the
#    JSON parser are seen, not hidden in a prebuilt .a. make recompiles
#    only what changed.
#  - Every tests/fuzz/fuzz_<name>.c is a target (FUZZ_TARGETS: a few).
#  - Without libFuzzer (Debian's libclang-rt-14-dev, installed by
#    scripts/deps.sh) or the cJSON sources (scripts/deps.sh), every target
#    is skipped with a message and the script succeeds: fuzzing is an
#    extra layer, not a build requirement.
#  - Every fuzzer process runs under timeout(1) (an input alone is cut at
#    10 s by libFuzzer's -timeout): a hang fails its target by name instead
#    of stopping the whole run.
#  - Summary line, last: "fuzz: N passed, N failed, N skipped". A target
#    that crashes, breaks an invariant, leaks, times out or fails to build
#    counts as failed, and the script then exits 1.
set -u

cd "$(dirname "$0")/../.." || exit 2

FUZZ_SECONDS=${FUZZ_SECONDS:-20}
CLANG=${CLANG:-clang}
OUT=build/fuzz
SRC=tests/fuzz
CJSON=build/deps/cjson-src
MAKE=${MAKE:-make}
TARGETS=${FUZZ_TARGETS:-$(for f in "$SRC"/fuzz_*.c; do f=${f##*/fuzz_}; printf '%s ' "${f%.c}"; done)}

case $FUZZ_SECONDS in
    ''|*[!0-9]*) echo "fuzz: FUZZ_SECONDS must be a whole number of seconds" >&2; exit 2 ;;
esac
# libFuzzer takes 0 as "pick one", so a seed is 1 to 2^31 - 1.
if [ -n "${FUZZ_SEED:-}" ]; then
    case $FUZZ_SEED in
        ''|*[!0-9]*|0) echo "fuzz: FUZZ_SEED must be a whole number from 1 to 2147483647" >&2; exit 2 ;;
    esac
    [ "${#FUZZ_SEED}" -le 10 ] && [ "$FUZZ_SEED" -le 2147483647 ] ||
        { echo "fuzz: FUZZ_SEED must be a whole number from 1 to 2147483647" >&2; exit 2; }
    SEED=$FUZZ_SEED
else
    SEED=$(( $(od -An -N4 -tu4 /dev/urandom | tr -d ' ') % 2147483647 + 1 ))
fi

skip_all() {
    echo "fuzz: skipped: $1"
    n=0
    for t in $TARGETS; do n=$((n + 1)); done
    echo "fuzz: 0 passed, 0 failed, $n skipped"
    exit 0
}

mkdir -p "$OUT/obj" "$OUT/logs" "$OUT/artifacts" "$OUT/corpus-work" || exit 2

# Whether clang links a libFuzzer target at all (the Makefile holds the
# targets' own flags).
FLAGS="-fsanitize=fuzzer,address,undefined"

if ! command -v "$CLANG" >/dev/null 2>&1; then
    skip_all "$CLANG not found (install clang-14)"
fi
probe_c=$OUT/obj/probe.c
printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
    'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }' \
    >"$probe_c"
if ! $CLANG $FLAGS -o "$OUT/obj/probe" "$probe_c" >"$OUT/logs/probe.log" 2>&1; then
    skip_all "'$CLANG -fsanitize=fuzzer' does not link (libFuzzer missing: install libclang-rt-14-dev, e.g. via scripts/deps.sh; see $OUT/logs/probe.log)"
fi
if [ ! -f "$CJSON/cJSON.c" ] || [ ! -f "$CJSON/cJSON.h" ]; then
    skip_all "$CJSON/cJSON.c missing (run scripts/deps.sh)"
fi

# hearth's library and cJSON, once for every target: when they do not
# build, no target does.
if ! $MAKE -s CLANG="$CLANG" build/obj/fuzz/libhearth.a build/obj/fuzz/libcjson.a \
        >"$OUT/logs/build-lib.log" 2>&1; then
    lib_failed=1
fi

passed=0
failed=0
skipped=0

# The input a failure happened on, for replay: its path, size, base64 and
# the command that runs it again. $1 the binary, $2 the input.
show_input() {
    size=$(wc -c <"$2" | tr -d ' ')
    echo "    input: $2 ($size bytes)"
    if [ "$size" -le 16384 ]; then
        echo "    base64: $(base64 -w 0 "$2")"
    else
        echo "    base64: not shown (over 16 KiB; the file is kept)"
    fi
    echo "    replay: $1 $2"
}

# What broke, from a log: a harness invariant (with its detail line), else
# the sanitizer's or libFuzzer's own first report lines.
show_cause() {
    if grep -aq 'invariant broken' "$1"; then
        grep -a -m 1 -A 1 'invariant broken' "$1" | cut -c 1-300 | cat -v | sed 's/^/    /'
    else
        grep -a -m 2 -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error|SUMMARY' \
            "$1" | cut -c 1-300 | cat -v | sed 's/^/    /'
    fi
}

# Why a fuzzer process failed, from its exit status.
exit_reason() {
    case $1 in
        124) echo "timed out after $2 s" ;;
        70) echo "an input ran over 10 s" ;;
        *) echo "exit $1" ;;
    esac
}

echo "fuzz: seed $SEED (FUZZ_SEED=$SEED repeats the exploration)"

for t in $TARGETS; do
    bin=$OUT/fuzz_$t
    log=$OUT/logs/$t.log
    rlog=$OUT/logs/$t.replay.log
    if [ ! -f "$SRC/fuzz_$t.c" ]; then
        echo "fuzz $t: no such target"
        failed=$((failed + 1))
        continue
    fi
    if [ "${lib_failed:-0}" = 1 ]; then
        echo "fuzz $t: BUILD FAILED (hearth's library or cJSON, see $OUT/logs/build-lib.log)"
        failed=$((failed + 1))
        continue
    fi
    if ! $MAKE -s CLANG="$CLANG" "$bin" >"$OUT/logs/build-$t.log" 2>&1; then
        echo "fuzz $t: BUILD FAILED (see $OUT/logs/build-$t.log)"
        failed=$((failed + 1))
        continue
    fi

    # 1. Every checked-in input, in name order, in one process; libFuzzer
    # prints "Running: <path>" before each, so a crash names its input.
    set --
    for f in "$SRC/corpus/$t"/* "$SRC/crashes/$t"/*; do
        [ -f "$f" ] && set -- "$@" "$f"
    done
    if [ $# -gt 0 ]; then
        timeout -k 10 600 "$bin" -timeout=10 -rss_limit_mb=2048 "$@" >"$rlog" 2>&1
        rc=$?
        if [ $rc -ne 0 ]; then
            bad=$(sed -n 's/^Running: //p' "$rlog" | tail -n 1)
            # Every input ran to its end: the failure came at exit (a
            # leak), so find the input it belongs to alone.
            if [ -z "$bad" ] || grep -aqF "Executed $bad in " "$rlog"; then
                bad=
                for f in "$@"; do
                    if ! timeout -k 10 120 "$bin" -timeout=10 -rss_limit_mb=2048 "$f" \
                            >"$rlog.one" 2>&1; then
                        bad=$f
                        mv "$rlog.one" "$rlog"
                        break
                    fi
                done
                rm -f "$rlog.one"
            fi
            echo "fuzz $t: FAILED replaying checked-in inputs ($(exit_reason $rc 600), log $rlog)"
            show_cause "$rlog"
            if [ -n "$bad" ]; then
                show_input "$bin" "$bad"
            fi
            failed=$((failed + 1))
            continue
        fi
    fi

    # 2. Exploration, from a fresh copy of the same inputs (none for
    # FUZZ_SECONDS=0: libFuzzer takes -max_total_time=0 as no limit).
    if [ "$FUZZ_SECONDS" -eq 0 ]; then
        echo "fuzz $t: ok ($# inputs replayed, no exploration)"
        passed=$((passed + 1))
        continue
    fi
    work=$OUT/corpus-work/$t
    rm -rf "$work"
    mkdir -p "$work"
    [ $# -gt 0 ] && cp -p "$@" "$work"/
    dict=
    [ -f "$SRC/$t.dict" ] && dict=-dict=$SRC/$t.dict
    artifact=$OUT/artifacts/$t-seed$SEED
    rm -f "$artifact"
    limit=$((FUZZ_SECONDS + 300))

    # shellcheck disable=SC2086
    timeout -k 10 "$limit" "$bin" -seed="$SEED" -max_total_time="$FUZZ_SECONDS" -timeout=10 \
        -rss_limit_mb=2048 -exact_artifact_path="$artifact" -print_final_stats=1 $dict \
        "$work" >"$log" 2>&1
    rc=$?

    runs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -n 1)
    if [ $rc -eq 0 ]; then
        echo "fuzz $t: ok ($# inputs replayed, ${runs:-?} runs exploring)"
        passed=$((passed + 1))
    else
        echo "fuzz $t: CRASH exploring with seed $SEED ($(exit_reason $rc "$limit"), log $log)"
        show_cause "$log"
        if [ -f "$artifact" ]; then
            show_input "$bin" "$artifact"
            echo "    keep it: cp $artifact $SRC/crashes/$t/<what-it-is> (replayed by every run)"
        else
            echo "    no input was written; FUZZ_SEED=$SEED FUZZ_TARGETS=$t repeats the run"
        fi
        failed=$((failed + 1))
    fi
done

echo "fuzz: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
