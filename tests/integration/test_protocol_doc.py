"""docs/protocol.md is checked against hearth itself: every example in
it parses, every request is a valid request for a method hearth has, the
`version` example lists exactly the method table, and the examples that
are safe to run get a reply of the same shape from a running hearth."""
import json
import os
import re

from conftest import ROOT

DOC = os.path.join(ROOT, "docs", "protocol.md")
METHODS_C = os.path.join(ROOT, "agent", "methods", "methods.c")

# Examples whose result deliberately shows only some members (the page
# says so next to each): for these the keys shown must exist, but hearth
# may return more. status and config.get depend on the config; the others
# are written as abridged in the text.
ABRIDGED = {"status", "config.get", "egress.check", "network.check"}

# Requests run against a live hearth: none changes the machine outside
# hearth's own namespaces (time.sync only reports: clock.set is false
# outside vm mode).
SAFE = {"ping", "version", "services.list", "services.stop", "logs.read",
        "events.subscribe", "mounts.list", "time.sync", "metrics"}


def method_table():
    src = open(METHODS_C).read()
    table = src[src.index("static const struct method methods[]"):]
    table = table[:table.index("};")]
    return re.findall(r'\{"([a-z.]+)",\s*\w+\}', table)


def code_blocks():
    """The page's fenced blocks as (heading, first line number, lines).
    A fence left open is an error: everything after it would be code."""
    blocks, heading, cur, start = [], None, None, 0
    for n, line in enumerate(open(DOC).read().split("\n"), 1):
        if line.startswith("```"):
            if cur is None:
                cur, start = [], n
            else:
                blocks.append((heading, start, cur))
                cur = None
            continue
        if cur is not None:
            assert not line.startswith("#"), \
                f"protocol.md:{n}: heading {line!r} inside the code block opened at line {start}"
            cur.append(line)
        elif line.startswith("### "):
            heading = line[4:].strip()
    assert cur is None, f"protocol.md: code block opened at line {start} is never closed"
    return blocks


def messages():
    """(heading, line, direction, text) for every → and ← line (with its
    continuation lines)."""
    out = []
    for heading, start, lines in code_blocks():
        cur = None
        for i, line in enumerate(lines):
            if line.startswith(("→ ", "← ")):
                cur = [heading, start + 1 + i, line[0], line[2:]]
                out.append(cur)
            elif cur is not None:
                cur[3] += "\n" + line
    return out


def examples():
    """Requests paired with the reply that follows them."""
    msgs, pairs = messages(), []
    for i, (heading, line, d, text) in enumerate(msgs):
        if d == "→":
            nxt = msgs[i + 1] if i + 1 < len(msgs) else None
            reply = json.loads(nxt[3]) if nxt and nxt[2] == "←" else None
            pairs.append((line, json.loads(text), reply))
    return pairs


def test_every_example_parses_and_requests_are_valid():
    table = set(method_table())
    msgs = messages()
    assert len(msgs) > 40, "the examples were not found"
    seen = set()
    for heading, line, d, text in msgs:
        try:
            msg = json.loads(text)
        except ValueError as e:
            raise AssertionError(f"protocol.md:{line}: example does not parse: {e}\n{text}")
        assert isinstance(msg, dict) and msg.get("jsonrpc") == "2.0", f"protocol.md:{line}"
        if d == "→":
            assert set(msg) <= {"jsonrpc", "id", "method", "params"}, f"protocol.md:{line}"
            assert isinstance(msg.get("id"), int), f"protocol.md:{line}: no usable id"
            assert msg["method"] in table, f"protocol.md:{line}: unknown method {msg['method']}"
            assert isinstance(msg.get("params", {}), dict), f"protocol.md:{line}"
            seen.add(msg["method"])
        elif "id" in msg:
            assert ("result" in msg) != ("error" in msg), f"protocol.md:{line}"
            if "error" in msg:
                assert set(msg["error"]) >= {"code", "message"}, f"protocol.md:{line}"
        else:
            assert msg.get("method") == "event", f"protocol.md:{line}"
    # Every method of the table has its example.
    assert seen == table, f"methods without an example: {sorted(table - seen)}"


def test_replies_answer_their_request():
    for line, req, reply in examples():
        assert reply is not None, f"protocol.md:{line}: request without its reply"
        assert reply.get("id") == req["id"], f"protocol.md:{line}: reply id differs"


def test_notification_examples_parse():
    """The event, log and dropped examples outside the method sections."""
    text = open(DOC).read()
    found = 0
    for heading, start, lines in code_blocks():
        body = "\n".join(lines)
        if body.lstrip().startswith("{"):
            msg = json.loads(body)
            assert msg["jsonrpc"] == "2.0" and "id" not in msg and msg["method"], body
            found += 1
    inline = re.findall(r'`(\{"jsonrpc":"2\.0","method":"log".*?\})`', text)
    for t in inline:
        assert json.loads(t)["params"]["stream"] == "stdout"
    assert found >= 2 and inline


def test_version_example_lists_the_method_table(hearth):
    hearth.start(hearth.config())
    real = hearth.rpc("version")
    doc = next(rep for _, req, rep in examples() if req["method"] == "version")["result"]
    assert real["methods"] == method_table()
    assert doc["methods"] == real["methods"]
    assert doc["features"] == real["features"]
    assert set(doc) == set(real)


def test_safe_examples_get_the_same_shape_from_hearth(hearth):
    # time.sync runs below: the clock is never stepped, whatever the default.
    hearth.start(hearth.config(services=[
        {"name": "hermes", "argv": ["/bin/sh", "-c", "echo up; exec sleep 1000"], "main": True}],
        clock={"set": False}))
    hearth.wait_for(lambda: hearth.service("hermes")["output_lines"] >= 1, what="output")
    c = hearth.client()
    ran = set()
    try:
        for line, req, doc in examples():
            if req["method"] not in SAFE:
                continue
            # Only the stop of a service that does not exist: the example's own.
            if req["method"] == "services.stop" and "error" not in doc:
                continue
            c.send_raw((json.dumps(req) + "\n").encode())
            real = c.read_reply()
            where = f"protocol.md:{line} ({req['method']})"
            assert real["id"] == req["id"], where
            if "error" in doc:
                assert "error" in real, f"{where}: {real}"
                assert real["error"]["code"] == doc["error"]["code"], f"{where}: {real}"
            else:
                assert "result" in real, f"{where}: {real}"
                shown, got = set(doc["result"]), set(real["result"])
                assert shown <= got, f"{where}: not in hearth's reply: {sorted(shown - got)}"
                if req["method"] not in ABRIDGED:
                    assert shown == got, f"{where}: the example lacks {sorted(got - shown)}"
            ran.add(req["method"])
    finally:
        c.close()
    assert ran == SAFE, f"not run: {sorted(SAFE - ran)}"
