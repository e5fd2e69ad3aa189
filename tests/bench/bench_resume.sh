#!/bin/sh
# sandbox.resume round trip with one running service and a skills overlay
# of 100 public skills (target <= 10 ms), and a whole freeze + resume
# cycle. No mounts, interfaces or egress policy are configured (they would
# need a VM or a netns), so those steps find nothing to check; the figure
# covers time, entropy, the skills reconcile, thaw, on_resume, health and
# the reply. In supervisor mode the clock is never stepped.
set -eu
B="$BUILD"
tmp=$(mktemp -d /tmp/hearth-bench.XXXXXX)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
# A signal (a closed pipe included) ends the script through the EXIT trap,
# so no server it started outlives it.
trap 'exit 1' INT TERM HUP PIPE

mkdir -p "$tmp/public" "$tmp/private"
# Skills hold their marker; a bare directory would be a category.
for i in $(seq 100); do mkdir "$tmp/public/skill-$i" && : > "$tmp/public/skill-$i/SKILL.md"; done
cat > "$tmp/c.json" <<JSON
{"control":{"listen":["unix:$tmp/ctl.sock"]},
 "skills":{"public":"$tmp/public","private":"$tmp/private","poll_ms":0},
 "services":[{"name":"agent","argv":["/bin/sleep","100000"],"on_resume":"none"}]}
JSON
"$B/hearth" --mode supervisor -c "$tmp/c.json" --log warn &
pid=$!
for _ in $(seq 100); do [ -S "$tmp/ctl.sock" ] && break; sleep 0.02; done
out=$(/usr/bin/python3 - "$tmp/ctl.sock" <<'PY'
import base64, json, os, socket, statistics, sys, time
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
f = s.makefile("rb")
n = 0
def call(method, params):
    global n
    n += 1
    s.sendall((json.dumps({"jsonrpc": "2.0", "id": n, "method": method,
                           "params": params}) + "\n").encode())
    r = json.loads(f.readline())
    assert "result" in r, r
    return r["result"]
ent = base64.b64encode(os.urandom(32)).decode()
def resume():
    t = time.time()
    return call("sandbox.resume", {"time": {"sec": int(t), "nsec": int((t % 1) * 1e9)},
                                   "entropy": ent})
lat = []
for i in range(600):
    t = time.perf_counter_ns(); resume(); lat.append(time.perf_counter_ns() - t)
lat = sorted(lat[100:])
cyc = []
for i in range(200):
    t = time.perf_counter_ns(); call("sandbox.freeze", {}); resume()
    cyc.append(time.perf_counter_ns() - t)
cyc = sorted(cyc[20:])
print(f"{statistics.median(lat)/1000:.1f} {lat[int(len(lat)*0.99)]/1000:.1f} "
      f"{statistics.median(cyc)/1000:.1f}")
PY
)
set -- $out
printf 'resume_p50_us\tsandbox.resume round trip p50 (us, 1 service, 100 skills)\t%s\t-\t-\n' "$1"
printf 'resume_p99_us\tsandbox.resume round trip p99 (us, 1 service, 100 skills)\t%s\t-\t-\n' "$2"
printf 'freeze_resume_p50_us\tfreeze + resume cycle p50 (us, 1 service)\t%s\t-\t-\n' "$3"
