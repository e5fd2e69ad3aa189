"""A service that crash-loops for a month: thousands of restarts of a
program that exits 1 at once (restart always, the smallest backoff the
config allows that still has a curve: 1 ms doubling to a 2 ms cap),
beside a second one on a visible curve (10 ms doubling to 80 ms). The
backoff holds (the delays follow the documented curve, the cap is reached
and kept, never reset: no run lasts reset_after_ms), hearth does not grow
(its resident memory, descriptors, children, cgroups and mounts at the
end are what they were after the first tenth), and the event stream a
subscriber follows throughout has no gap.

A contained start (clone3 into the leaf, a pid namespace with its reaper,
a copy of the mount-namespace template) makes 150 to 250 restarts a
second on a machine of 2 shared cores: 10,000 take 40 to 65 s, more on a
loaded machine. `make test` runs 2,000 (about 15 s); the 10,000 run is
marked soak (HEARTH_SOAK=1)."""
import os
import statistics
import threading
import time

import pytest

from conftest import Client

KEEP = {"name": "keep", "argv": ["sleep", "100000"], "main": True}
FAST = {"initial_ms": 1, "max_ms": 2, "reset_after_ms": 600_000}
CURVE = {"initial_ms": 10, "max_ms": 80, "reset_after_ms": 600_000}


def crasher(name, backoff):
    return {"name": name, "argv": ["/bin/false"], "restart": "always", "backoff": backoff}


class Follower(threading.Thread):
    """Reads every event from one subscription, as a host would."""

    def __init__(self, sock):
        super().__init__(daemon=True)
        self.c = Client(sock, timeout=60)
        self.c.result("events.subscribe", {"since": 0})
        self.events = []
        self.error = None
        self.stop = False

    def run(self):
        try:
            while not self.stop:
                msg = self.c.read_line()
                if msg.get("method") == "event":
                    self.events.append(msg["params"])
        except Exception as e:  # noqa: BLE001 (reported by the test)
            if not self.stop:
                self.error = e


def figures(h):
    """hearth's footprint, the smallest of a few looks: a restart in
    flight holds a pipe or a child for a moment."""
    looks = []
    for _ in range(15):
        with open(f"/proc/{h.pid}/status") as f:
            rss = int(next(l for l in f if l.startswith("VmRSS:")).split()[1])
        fds = len(os.listdir(f"/proc/{h.pid}/fd"))
        kids = len(open(f"/proc/{h.pid}/task/{h.pid}/children").read().split())
        with open(f"/proc/{h.pid}/mountinfo") as f:
            mounts = sum(1 for _ in f)
        tree = os.path.dirname(os.path.dirname(h.service("keep")["cgroup"]))
        cgroups = sum(len(d) for _, d, _ in os.walk(tree))
        looks.append((rss, fds, kids, mounts, cgroups))
        time.sleep(0.02)
    return {k: min(x[i] for x in looks) for i, k in
            enumerate(("rss_kib", "fds", "children", "mounts", "cgroups"))}


def delays(events, name):
    """(failure index, ms from entering backoff to the next start)."""
    out, since, k = [], None, 0
    for e in events:
        if e["type"] != "service.state" or e["service"] != name:
            continue
        if e["state"] == "backoff":
            since = e["mono_ms"]
        elif e["state"] == "starting" and since is not None:
            out.append((k, e["mono_ms"] - since))
            k += 1
            since = None
    return out


def curve(b, k):
    d = b["initial_ms"]
    for _ in range(k):
        if d >= b["max_ms"]:
            break
        d *= 2
    return min(d, b["max_ms"])


@pytest.mark.parametrize("restarts", [
    2_000, pytest.param(10_000, marks=pytest.mark.soak)])
def test_crash_loop(hearth, restarts):
    RESTARTS, WARM = restarts, restarts // 10
    hearth.start(hearth.config([KEEP, crasher("crash", FAST), crasher("curve", CURVE)]),
                 log="warn")
    f = Follower(hearth.sock)
    f.start()
    t0 = time.monotonic()
    hearth.wait_for(lambda: hearth.service("crash")["restarts"] >= WARM, timeout=60,
                    what=f"{WARM} restarts")
    warm = figures(hearth)
    t_warm = time.monotonic()
    status_seen = []
    while True:
        s = hearth.service("crash")
        if s["state"] == "backoff":
            status_seen.append(s["next_start_ms"])
        if s["restarts"] >= RESTARTS:
            break
        assert time.monotonic() - t0 < 250, f"only {s['restarts']} restarts"
        time.sleep(0.2)
    end = figures(hearth)
    elapsed = time.monotonic() - t0
    rate = (RESTARTS - WARM) / (time.monotonic() - t_warm)
    st = hearth.rpc("status")
    assert st["pid"] == 1 and hearth.rpc("ping") == {}
    # The follower has had every event up to now.
    last = st["event_seq"]
    deadline = time.monotonic() + 30
    while (not f.events or f.events[-1]["seq"] < last) and time.monotonic() < deadline:
        assert f.error is None, f.error
        time.sleep(0.05)
    f.stop = True
    f.c.close()
    print(f"{RESTARTS} restarts in {elapsed:.1f} s ({rate:.0f}/s after warm-up); "
          f"after {WARM}: {warm}; after {RESTARTS}: {end}; {len(f.events)} events")

    # No gap in the sequence: every event, in order, none twice.
    seqs = [e["seq"] for e in f.events]
    assert seqs[0] == 1 and seqs == list(range(1, len(seqs) + 1)), \
        [(a, b) for a, b in zip(seqs, seqs[1:]) if b != a + 1][:5]

    # No growth from 1,000 to 10,000 restarts. The resident set may move
    # by a few pages (the allocator's arenas); a leak of a few bytes per
    # restart would be 9,000 times that.
    # (Fewer is not a leak: on a loaded machine a descriptor of the
    # warm-up's, a client's or a job's, can still be open at that look.)
    assert end["fds"] <= warm["fds"], (warm, end)
    assert end["children"] == warm["children"] <= 3, (warm, end)
    assert end["mounts"] <= warm["mounts"] and end["cgroups"] == warm["cgroups"], (warm, end)
    assert end["rss_kib"] - warm["rss_kib"] <= 64, (warm, end)

    # Every restart counted and seen: a backoff per exit, a start per backoff.
    crash = [e for e in f.events if e["type"] == "service.state" and e["service"] == "crash"]
    backoffs = [e for e in crash if e["state"] == "backoff"]
    s = hearth.service("crash")
    assert len(backoffs) >= RESTARTS and backoffs[-1]["restarts"] == len(backoffs)
    assert all(e["last_exit"] == {"code": 1} and e["error"] == "exited with code 1"
               for e in backoffs[:50])
    assert s["restarts"] >= backoffs[-1]["restarts"]

    # The delays, read from the events' stamps (whole ms): a delay reads
    # short when hearth is preempted between arming the timer and sending
    # the backoff event, so a few (at most 1 %) may read below the curve;
    # the rest may not, and neither may the mean.
    def check(name, b, jitter):
        d = delays(f.events, name)
        low = [(k, ms) for k, ms in d if ms < curve(b, k) * (1 - jitter) - 1]
        assert len(low) <= len(d) // 100, low[:10]
        assert statistics.mean(ms for _, ms in d) >= \
            statistics.mean(curve(b, k) for k, _ in d) * (1 - jitter) - 1
        return d

    # The fast one: 1 ms, then the 2 ms cap, every time (below 10 ms there
    # is no jitter); never more than the cap, as status says too.
    d = check("crash", FAST, 0)
    assert len(d) >= RESTARTS - 1
    assert statistics.median(ms for _, ms in d) <= 10
    assert status_seen and max(status_seen) <= FAST["max_ms"], status_seen

    # The curve: 10, 20, 40, then 80 ms for good, each within +-10 %
    # jitter; the cap is kept (the median) and never reset.
    d = check("curve", CURVE, 0.1)
    assert len(d) > RESTARTS // 100, len(d)
    assert d[0][1] < d[2][1] < d[4][1] and d[1][1] < d[3][1], d[:6]
    capped = sorted(ms for k, ms in d if k >= 4)
    assert 72 - 1 <= statistics.median(capped) <= 88 + 10, capped
