#!/bin/sh
# The skills overlay with 10,000 public skills: the first (cold) reconcile
# and a no-op one, as hearth times them (skills.list / skills.sync
# duration_us), beside a shell loop doing the same with ln -s. Twice: flat
# (skills/<skill>/SKILL.md) and in 100 categories of 100 skills
# (skills/<category>/<skill>/SKILL.md, Hermes's own layout).
#
# Two no-op figures: right after the cold run, whose links changed the
# private tree less than 2 s before (MARK_RACY_NS: every directory is read
# and every entry judged again), and once both trees are 2 s old, as the
# poll finds them (the last whole run's reads are replayed by their stats:
# init/skills/skills_check.c).
set -eu
B="$BUILD"
N=${SKILLS_BENCH_N:-10000}
# On tmpfs by default: the figure is hearth's cost, not this disk's
# journal (SKILLS_BENCH_DIR=/tmp measures the disk too).
dir=${SKILLS_BENCH_DIR:-/dev/shm}
[ -d "$dir" ] && [ -w "$dir" ] || dir=/tmp
tmp=$(mktemp -d "$dir/hearth-bench-skills.XXXXXX")
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
# A signal (a closed pipe included) ends the script through the EXIT trap,
# so no server it started outlives it.
trap 'exit 1' INT TERM HUP PIPE

# run LAYOUT: one hearth over a fresh tree, then the shell peer. LAYOUT
# is flat or categories.
run() {
    layout=$1
    rm -rf "$tmp/public" "$tmp/private" "$tmp/shell" "$tmp/ctl.sock"
    mkdir -p "$tmp/public" "$tmp/private" "$tmp/shell"
    if [ "$layout" = flat ]; then
        (cd "$tmp/public" && seq -f "skill-%05g" 1 "$N" | xargs mkdir &&
            seq -f "skill-%05g/SKILL.md" 1 "$N" | xargs touch)
    else
        C=100
        per=$((N / C))
        # Names unique across categories: Hermes resolves a skill by its
        # name, so a name in two categories is a clash (one linked).
        (cd "$tmp/public" && seq -f "cat-%03g" 1 "$C" | xargs mkdir &&
            for i in $(seq 1 "$C"); do
                c=$(printf "cat-%03d" "$i"); lo=$(( (i - 1) * per + 1 )); hi=$(( i * per ))
                (cd "$c" && seq -f "skill-%05g" "$lo" "$hi" | xargs mkdir &&
                    seq -f "skill-%05g/SKILL.md" "$lo" "$hi" | xargs touch)
            done)
    fi

    # A share's skills are older than hearth's reads of them: a marker
    # changed in the last 2 s is read on every run (MARK_RACY_NS in
    # init/skills/skills_priv.h), and the no-op figure is the steady one.
    sleep 2

    cat > "$tmp/c.json" <<JSON
{"control":{"listen":["unix:$tmp/ctl.sock"]},"services":[],
 "skills":{"public":"$tmp/public","private":"$tmp/private","ignore":["._*",".DS_Store"]}}
JSON
    "$B/hearth" --mode supervisor -c "$tmp/c.json" --log warn &
    pid=$!
    for _ in $(seq 200); do [ -S "$tmp/ctl.sock" ] && break; sleep 0.02; done
    us=$(/usr/bin/python3 - "$tmp/ctl.sock" <<'PY'
import json, socket, sys, time
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); f = s.makefile("rb")
def call(m, i):
    s.sendall(json.dumps({"jsonrpc": "2.0", "id": i, "method": m}).encode() + b"\n")
    return json.loads(f.readline())["result"]
cold = call("skills.list", 1)["last"]
read = [call("skills.sync", i)["duration_us"] for i in range(2, 7)]
time.sleep(2.1)
runs = [call("skills.sync", i) for i in range(7, 17)]
noop = [r["duration_us"] for r in runs]
# The first reads and records what it read; the rest are answered by
# their stats (read_dirs false), unless something changed meanwhile.
if sum(r.get("read_dirs") is False for r in runs) < len(runs) // 2:
    print("bench_skills: most no-op syncs read the trees", file=sys.stderr)
print(cold["duration_us"], sorted(noop)[len(noop) // 2], cold["created"],
      sorted(read)[len(read) // 2])
PY
)
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null || true
    pid=
    set -- $us
    [ "$3" -eq "$N" ] || { echo "bench_skills: hearth linked $3 of $N ($layout)" >&2; exit 1; }

    # The peer: what operators script by hand (for categories, a real
    # directory per category and a link per skill).
    if [ "$layout" = flat ]; then
        link_all() {
            for d in "$tmp/public"/*; do
                n=${d##*/}
                [ -e "$tmp/shell/$n" ] || [ -L "$tmp/shell/$n" ] || ln -s "$d" "$tmp/shell/$n"
            done
        }
    else
        link_all() {
            for d in "$tmp/public"/*/*; do
                n=${d#"$tmp/public/"}
                [ -d "$tmp/shell/${n%/*}" ] || mkdir "$tmp/shell/${n%/*}"
                [ -e "$tmp/shell/$n" ] || [ -L "$tmp/shell/$n" ] || ln -s "$d" "$tmp/shell/$n"
            done
        }
    fi
    t=$(date +%s%N); link_all; sh_cold=$(ms "$t")
    t=$(date +%s%N); link_all; sh_noop=$(ms "$t")

    fs=$(stat -f -c %T "$tmp")
    if [ "$layout" = flat ]; then
        sfx= what="$N public skills"
    else
        sfx=_cat what="$N public skills in $C categories"
    fi
    printf 'skills%s_cold_ms\t%s on %s, cold reconcile (ms)\t%s\tshell ln -s loop\t%s\n' \
        "$sfx" "$what" "$fs" "$(awk "BEGIN {printf \"%.1f\", $1 / 1000}")" "$sh_cold"
    printf 'skills%s_noop_ms\t%s on %s, no-op reconcile (ms)\t%s\tshell ln -s loop\t%s\n' \
        "$sfx" "$what" "$fs" "$(awk "BEGIN {printf \"%.1f\", $2 / 1000}")" "$sh_noop"
    printf 'skills%s_noop_read_ms\t%s on %s, no-op reconcile, private changed < 2 s ago (ms)\t%s\tshell ln -s loop\t%s\n' \
        "$sfx" "$what" "$fs" "$(awk "BEGIN {printf \"%.1f\", $4 / 1000}")" "$sh_noop"
}
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }

run flat
run categories
