"""ready.attempts: a service whose starts never become ready ends in
`failed` after that many in a row, with the last start's reason (what the
probe reached and what answered, or how the program ended and the last
line it wrote); a ready start and a start asked for by the host count
again from zero."""
import time

from conftest import Client
from test_http_probe import netns  # noqa: F401 (a fixture: a namespace with loopback up)

KEEP = {"name": "keep", "argv": ["sleep", "1000"], "main": True}
PORT = 18643  # nothing listens on it in the test's namespace


def _runs(path):
    return len(path.read_text().splitlines()) if path.exists() else 0


def _in_state(hearth, name, state):
    return hearth.wait_for(lambda: (lambda s: s if s["state"] == state else None)(
        hearth.service(name)), timeout=20.0, what=f"{name} {state}")


def _state_events(c, name, until, timeout=10.0):
    """service.state events of name, up to the first in state until."""
    seen, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = c.read_line()
        if m.get("method") != "event" or m["params"]["type"] != "service.state":
            continue
        if m["params"]["service"] != name:
            continue
        seen.append(m["params"])
        if m["params"]["state"] == until:
            return seen
    raise AssertionError(f"no {until} event for {name}: {seen}")


def test_never_ready_http_fails_after_its_attempts(hearth, tmp_path, netns):  # noqa: F811
    runs = tmp_path / "runs"
    hearth.start(hearth.config(services=[KEEP, {
        "name": "gw", "argv": ["sh", "-c", f"echo x >> {runs}; exec sleep 1000"],
        "ready": {"http": f"127.0.0.1:{PORT}/health", "timeout_ms": 400, "attempts": 2},
        "backoff": {"initial_ms": 100}}]), netns=netns)
    c = Client(hearth.sock)
    c.result("events.subscribe", {"since": 0})
    s = _in_state(hearth, "gw", "failed")
    err = s["error"]
    assert err.startswith("gave up after 2 starts in a row that never became ready "
                          "(ready.attempts); the last: not ready after 400 ms: "
                          f"http 127.0.0.1:{PORT}/health: "), err
    assert "connection refused" in err.lower(), err
    assert s["failed_starts"] == 2 and s["restarts"] == 1 and s["pid"] == 0, s
    # Not ready in time: killed, not asked.
    assert s["last_exit"] == {"signal": "SIGKILL"}, s
    # The event says it too: how many starts failed, and the last reason.
    failed = _state_events(c, "gw", "failed")[-1]
    assert failed["failed_starts"] == 2 and failed["error"] == err, failed
    c.close()
    # A 100 ms backoff would have started it again many times by now.
    time.sleep(1.0)
    s = hearth.service("gw")
    assert s["state"] == "failed" and _runs(runs) == 2, s
    assert "gave up after 2 starts" in hearth.log_text()


# What argparse does with a flag it does not know: usage and the error on
# stderr, exit 2, within a second of the start. A control character in
# the line and a blank line after it.
USAGE = ('echo x >> {runs}; '
         'echo "usage: hermes gateway run [-h]" >&2; '
         'printf "hermes: error: unrecognized arguments: --external-supervisor \\033[31m\\n" >&2; '
         'echo >&2; exit 2')


def test_exit_before_ready_names_the_last_line_then_start_counts_again(hearth, tmp_path):
    runs = tmp_path / "runs"
    hearth.start(hearth.config(services=[KEEP, {
        "name": "gw", "argv": ["sh", "-c", USAGE.format(runs=runs)],
        "ready": {"tcp": "127.0.0.1:1", "attempts": 3},
        "backoff": {"initial_ms": 50, "max_ms": 200}}]))
    s = _in_state(hearth, "gw", "failed")
    last = ("exited with code 2 before ready: hermes: error: unrecognized arguments: "
            "--external-supervisor \\x1b[31m")
    assert s["error"] == ("gave up after 3 starts in a row that never became ready "
                          "(ready.attempts); the last: " + last), s
    assert "\x1b" not in s["error"]
    assert s["failed_starts"] == 3 and s["restarts"] == 2 and s["last_exit"] == {"code": 2}, s
    time.sleep(0.6)
    assert hearth.service("gw")["state"] == "failed" and _runs(runs) == 3

    # Started by hand, it gets its three attempts again (counted from 0,
    # it would fail after one).
    hearth.rpc("services.start", {"name": "gw"})
    s = _in_state(hearth, "gw", "failed")
    assert _runs(runs) == 6 and s["failed_starts"] == 3, (s, _runs(runs))


# Starts 1, 2, 4, 5 end before ready; 3 becomes ready, then exits while
# running; 6 becomes ready and stays. With three attempts the count must
# have started again at the ready start 3, or start 4 would fail it.
RESETS = ('rm -f {flag}; echo x >> {runs}; n=$(wc -l < {runs}); '
          'case $n in 3) touch {flag}; sleep 1.5; rm -f {flag}; exit 1;; '
          '6) touch {flag}; exec sleep 1000;; *) exit 1;; esac')


def test_a_ready_start_resets_the_count(hearth, tmp_path):
    runs, flag = tmp_path / "runs", tmp_path / "flag"
    hearth.start(hearth.config(services=[KEEP, {
        "name": "gw", "argv": ["sh", "-c", RESETS.format(runs=runs, flag=flag)],
        "ready": {"file": str(flag), "attempts": 3},
        "backoff": {"initial_ms": 50, "max_ms": 200}}]))
    c = Client(hearth.sock, timeout=20.0)
    c.result("events.subscribe", {"since": 0})
    hearth.wait_for(lambda: _runs(runs) == 6 and hearth.service("gw")["state"] == "running",
                    timeout=20.0, what="the sixth start ready")
    s = hearth.service("gw")
    assert "failed_starts" not in s and "error" not in s, s
    seen = []
    while len([e for e in seen if e["state"] == "running"]) < 2:
        seen += _state_events(c, "gw", "running", timeout=20.0)
    c.close()
    counts = [e.get("failed_starts") for e in seen if e["state"] == "backoff"]
    # Two before the first ready start, none for its exit while running,
    # and two again from 1 after it.
    assert counts == [1, 2, None, 1, 2], seen
    assert not [e for e in seen if e["state"] == "failed"]


def test_a_long_last_line_is_cut_and_a_secret_in_it_redacted(hearth, tmp_path):
    # A line from the service is bounded in the error (and says it was
    # cut), and goes through the same redaction as its output.
    long_line = "x" * 500
    hearth.start(hearth.config(services=[KEEP, {
        "name": "long", "argv": ["sh", "-c", f"echo {long_line}; exit 3"],
        "ready": {"tcp": "127.0.0.1:1", "attempts": 1}}, {
        "name": "leak", "argv": ["sh", "-c", "echo fetch https://bob:hunter2@example.com/x >&2; exit 4"],
        "ready": {"tcp": "127.0.0.1:1", "attempts": 1}}]))
    s = _in_state(hearth, "long", "failed")
    assert s["error"] == ("gave up after 1 start in a row that never became ready "
                          "(ready.attempts); the last: exited with code 3 before ready: "
                          + "x" * 156 + "..."), s
    s = _in_state(hearth, "leak", "failed")
    assert s["error"].startswith("gave up after 1 start in a row") and "code 4 before ready: fetch" \
        in s["error"] and "hunter2" not in s["error"], s
