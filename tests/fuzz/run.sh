#!/bin/sh
# make fuzz: builds the libFuzzer targets in tests/fuzz (fuzz_<name>.c) and
# runs each for FUZZ_SECONDS (default 20) seconds.
#
# Why it is shaped this way:
#  - Everything it writes is under build/fuzz: binaries, a working copy of
#    each seed corpus (build/fuzz/corpus-work/<target>, which libFuzzer
#    grows; seeds are copied in again on every run), crash artifacts
#    (build/fuzz/artifacts/<target>-*) and logs. The source tree's corpora
#    stay exactly as committed.
#  - cJSON is compiled from source with the same sanitizers so crashes and
#    overreads inside the JSON parser are seen, not hidden in a prebuilt .a.
#  - A target is rebuilt only when one of its inputs (its sources, any
#    header, this script) is newer than its binary.
#  - Without libFuzzer (Debian's libclang-rt-14-dev, installed by
#    scripts/deps.sh) or the cJSON sources (scripts/deps.sh), every target
#    is skipped with a message and the script succeeds: fuzzing is an
#    extra layer, not a build requirement.
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
TARGETS=${FUZZ_TARGETS:-"rpc config cidr listen env base64 netlink safepath http notify files exec"}

case $FUZZ_SECONDS in
    ''|*[!0-9]*) echo "fuzz: FUZZ_SECONDS must be a whole number of seconds" >&2; exit 2 ;;
esac

# Hearth sources each target links (cJSON comes on top for all but cidr).
target_srcs() {
    case $1 in
        rpc)    echo "agent/rpc.c init/bytebuf.c init/utf8.c init/jsonout.c" ;;
        config) echo "init/config.c init/schema.c init/schema_rules.c init/schema_tables.c init/names.c init/jsonget.c init/netaddr.c init/sections.c init/svc_config.c init/checkspec.c init/cidr.c init/http.c init/log.c init/termsafe.c init/utf8.c init/redact.c init/timebase.c init/jsonout.c" ;;
        cidr)   echo "init/cidr.c" ;;
        base64) echo "init/base64.c" ;;
        netlink) echo "init/netlink.c" ;;
        safepath) echo "init/safepath.c" ;;
        listen) echo "init/config.c init/schema.c init/schema_rules.c init/schema_tables.c init/names.c init/jsonget.c init/netaddr.c init/sections.c init/svc_config.c init/checkspec.c init/cidr.c init/http.c init/log.c init/termsafe.c init/utf8.c init/redact.c init/timebase.c init/jsonout.c" ;;
        env)    echo "init/launch.c init/accounts.c init/pidreaper.c init/safepath.c init/contain.c init/nstemplate.c init/seccomp.c init/mountinfo.c init/config.c init/schema.c init/schema_rules.c init/schema_tables.c init/names.c init/jsonget.c init/netaddr.c init/sections.c init/svc_config.c init/checkspec.c init/cidr.c init/http.c init/log.c init/termsafe.c init/utf8.c init/redact.c init/timebase.c init/jsonout.c" ;;
        http)   echo "init/http.c" ;;
        notify) echo "init/notify.c init/kfile.c init/utf8.c init/timebase.c" ;;
        files)  echo "agent/m_files.c agent/m_files_write.c agent/params.c agent/rpc.c init/bytebuf.c init/jsonget.c init/safepath.c init/base64.c init/sha256.c init/utf8.c init/timebase.c init/jsonout.c" ;;
        exec)   echo "agent/m_exec.c agent/params.c agent/rpc.c init/bytebuf.c init/base64.c init/utf8.c init/config.c init/schema.c init/schema_rules.c init/schema_tables.c init/names.c init/jsonget.c init/netaddr.c init/sections.c init/svc_config.c init/checkspec.c init/cidr.c init/http.c init/log.c init/termsafe.c init/redact.c init/timebase.c init/jsonout.c" ;;
    esac
}
target_uses_cjson() { [ "$1" != cidr ] && [ "$1" != base64 ] && [ "$1" != netlink ] && [ "$1" != safepath ] && [ "$1" != http ] && [ "$1" != notify ]; }

skip_all() {
    echo "fuzz: skipped: $1"
    n=0
    for t in $TARGETS; do n=$((n + 1)); done
    echo "fuzz: 0 passed, 0 failed, $n skipped"
    exit 0
}

mkdir -p "$OUT/obj" "$OUT/logs" "$OUT/artifacts" "$OUT/corpus-work" || exit 2

# The fuzz layer's base flags (shared with the unit-test sanitizers), plus: no recovery
# from UBSan reports (a report must end the run so it is saved as an
# artifact), frame pointers for readable stacks.
FLAGS="-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
-fno-omit-frame-pointer -std=gnu11 -D_GNU_SOURCE \
$(cat scripts/libev-features)"

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

# Whether $1 is missing or older than any of the remaining files.
stale() {
    out=$1
    shift
    [ -e "$out" ] || return 0
    for f in "$@"; do
        [ "$f" -nt "$out" ] && return 0
    done
    return 1
}

# cJSON once, instrumented; warnings from code that is not ours are off.
CJSON_O=$OUT/obj/cJSON.o
if stale "$CJSON_O" "$CJSON/cJSON.c" "$CJSON/cJSON.h" "$SRC/run.sh"; then
    if ! $CLANG $FLAGS -w -I"$CJSON" -c -o "$CJSON_O" "$CJSON/cJSON.c" \
            >"$OUT/logs/build-cjson.log" 2>&1; then
        echo "fuzz: cJSON does not build with the fuzz flags (see $OUT/logs/build-cjson.log)"
        cjson_failed=1
    fi
fi

passed=0
failed=0
skipped=0

for t in $TARGETS; do
    bin=$OUT/fuzz_$t
    log=$OUT/logs/$t.log
    srcs=$(target_srcs "$t")
    extra=
    if target_uses_cjson "$t"; then
        extra=$CJSON_O
        if [ "${cjson_failed:-0}" = 1 ]; then
            echo "fuzz $t: BUILD FAILED (cJSON, see $OUT/logs/build-cjson.log)"
            failed=$((failed + 1))
            continue
        fi
    fi

    # shellcheck disable=SC2086
    if stale "$bin" "$SRC/fuzz_$t.c" "$SRC"/fuzz_*.h "$SRC/run.sh" $srcs $extra \
            init/*.h agent/*.h; then
        # shellcheck disable=SC2086
        if ! $CLANG $FLAGS -Wall -Wextra -Wno-unused-parameter \
                -DHEARTH_VERSION='"fuzz"' -Iinit -Iagent -I"$SRC" -isystem "$CJSON" \
                -o "$bin.tmp" "$SRC/fuzz_$t.c" $srcs $extra -lm \
                >"$OUT/logs/build-$t.log" 2>&1; then
            rm -f "$bin.tmp"
            echo "fuzz $t: BUILD FAILED (see $OUT/logs/build-$t.log)"
            failed=$((failed + 1))
            continue
        fi
        mv "$bin.tmp" "$bin"
    fi

    work=$OUT/corpus-work/$t
    mkdir -p "$work"
    if [ -d "$SRC/corpus/$t" ]; then
        cp -p "$SRC/corpus/$t"/* "$work"/ 2>/dev/null
    fi
    dict=
    [ -f "$SRC/$t.dict" ] && dict=-dict=$SRC/$t.dict

    # Artifacts present before this run, to name only the new one.
    before=$(ls "$OUT/artifacts" 2>/dev/null | grep "^$t-" | sort)

    # shellcheck disable=SC2086
    "$bin" -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="$OUT/artifacts/$t-" -print_final_stats=1 $dict \
        "$work" >"$log" 2>&1
    rc=$?

    runs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -n 1)
    if [ $rc -eq 0 ]; then
        echo "fuzz $t: ok (${runs:-?} runs)"
        passed=$((passed + 1))
    else
        after=$(ls "$OUT/artifacts" 2>/dev/null | grep "^$t-" | sort)
        new=$(printf '%s\n' "$after" | grep -vxF -e "$before" 2>/dev/null | head -n 1)
        [ -z "$before" ] && new=$(printf '%s\n' "$after" | head -n 1)
        if [ -n "$new" ]; then
            echo "fuzz $t: CRASH, artifact $OUT/artifacts/$new (exit $rc, log $log)"
        else
            echo "fuzz $t: CRASH (exit $rc, no artifact written; log $log)"
        fi
        # What broke: a harness invariant (with its detail line), else the
        # sanitizer's or libFuzzer's own first report line.
        if grep -aq 'invariant broken' "$log"; then
            grep -a -m 1 -A 1 'invariant broken' "$log" | cut -c 1-300 | cat -v | sed 's/^/    /'
        else
            grep -a -m 2 -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error|SUMMARY' \
                "$log" | cut -c 1-300 | cat -v | sed 's/^/    /'
        fi
        failed=$((failed + 1))
    fi
done

echo "fuzz: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
