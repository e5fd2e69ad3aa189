"""What the tests exercise, checked: every config key, method, event type
and kernel command-line key hearth has must be exercised by a test, or be
on the short EXCEPTIONS list below with the reason. docs/coverage.md is the
table this file writes; it must be up to date:

    /usr/bin/python3 tests/integration/test_coverage.py > docs/coverage.md

The items come from the sources, never from a list kept here: config keys
from the schema tables of init/config/schema_tables.c (which must agree with the
reference tables of docs/config.md), methods from the method table of
agent/methods/methods.c, event types from every events_emit() call in init/ and
agent/ (which must agree with the event table of docs/protocol.md), and
command-line keys from every cmdline_get() call in init/ (which must agree
with docs/config.md). The rule for "exercised" is in RULE below."""
import ast
import glob
import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

RULE = """\
A test is a `test_*` function in `tests/integration/test_*.py` or
`tests/vm/test_*.py`. What a test "names" is what its own body holds plus
what the module-level constants and helper functions it uses hold (two
levels deep). A test exercises:

- a **config key** when it names every part of the key's path as a key of
  a dict (or a keyword argument, as in `hearth.config(mounts=[...])`; the
  first positional argument of `hearth.config` is `services`), as the key
  of an item it assigns (`cfg["control"]["idle_evict_ms"] = 1500`), or as
  `"KEY":` inside a string of JSON text (the `host_mounts` string): a test
  exercises `services[].log.max_bytes` when `"services"`, `"log"` and
  `"max_bytes"` are all keys in the configs it builds;
- a **method** when the method's name is a string in it (`hearth.rpc("status")`);
- an **event type** when the type is a string in it (`e["type"] == "seed.done"`);
- a **kernel command-line key** when a string in it contains `KEY=`
  (`"hearth.mode=supervisor"`).

The rule is deliberately simple and checks names, not assertions: the
reviewer of a test still judges whether it asserts the outcome."""

# Items no test in tests/ can exercise yet, with the reason. Keep it short:
# each entry is a gap. An entry that a test exercises after all is an
# error, so the list cannot go stale.
EXCEPTIONS = {
}

SKIP_FILES = {"test_coverage.py"}


# ---- the items, from the sources ----

def _read(path):
    with open(os.path.join(ROOT, path)) as f:
        return f.read()


def _key_tables():
    src = _read("init/config/schema_tables.c")
    tables = {}
    for m in re.finditer(r"static const struct key (k_\w+)\[\] = \{(.*?)\{0\}\};", src, re.S):
        rows = []
        for chunk in re.split(r"\b(?:KEY|REQUIRED)\(", m.group(2))[1:]:
            name = re.match(r'\s*"([^"]+)"', chunk).group(1)
            nested = re.search(r"OBJECT\((k_\w+)", chunk)
            array = bool(nested) and chunk.find("ARRAY(") != -1 and \
                chunk.find("ARRAY(") < chunk.find("OBJECT(")
            rows.append((name, nested.group(1) if nested else None, array))
        tables[m.group(1)] = rows
    return tables


# A key whose value is a string holding JSON of its own schema: the
# table its entries are checked against (rule_host_mounts).
STRING_HELD = {"host_mounts": ("k_host_mount", True)}


def config_keys_from_source():
    tables = _key_tables()
    keys = set()

    def walk(table, prefix):
        for name, nested, array in tables[table]:
            path = prefix + name
            if prefix == "" and name in STRING_HELD:
                nested, array = STRING_HELD[name]
            if nested:
                walk(nested, path + ("[]." if array else "."))
            else:
                keys.add(path)
    walk("k_top", "")
    return keys


def config_keys_from_docs():
    """The rows of the reference tables of docs/config.md, with each
    section's prefix; rows that only introduce a group of keys (`ready`
    when `ready.tcp` follows) are dropped."""
    doc = _read("docs/config.md")
    doc = doc[doc.index("\n## Reference"):]
    arrays = {p.split("[]")[0] for p in config_keys_from_source() if "[]" in p}
    keys, prefix, section = set(), None, None
    for line in doc.split("\n"):
        if line.startswith("### "):
            section = line[4:].strip()
            prefix = None
            continue
        head = re.match(r"\|\s*(entry key|key)\s*\|", line)
        if head:
            if section == "Top level":
                prefix = ""
            elif section == "host_mounts and host_mounts_rule":
                prefix = "host_mounts[]." if head.group(1) == "entry key" else "host_mounts_rule."
            else:
                word = section.split()[0]
                prefix = word + ("[]." if word in arrays else ".")
            continue
        row = re.match(r"\|\s*`([^`]+)`\s*\|", line)
        if row and prefix is not None:
            keys.add(prefix + row.group(1))
        elif not line.startswith("|"):
            prefix = None
    return {k for k in keys
            if not any(o != k and (o.startswith(k + ".") or o.startswith(k + "[]")) for o in keys)}


def methods():
    src = _read("agent/methods/methods.c")
    table = src[src.index("static const struct method methods[]"):]
    return re.findall(r'\{"([a-z.]+)",\s*\w+\}', table[:table.index("};")])


def events_from_source():
    types = set()
    for path in glob.glob(os.path.join(ROOT, "init", "**", "*.c"), recursive=True) + \
            glob.glob(os.path.join(ROOT, "agent", "**", "*.c"), recursive=True):
        for arg in re.findall(r"\bevents_emit\(([^,]*),", open(path).read()):
            types.update(re.findall(r'"([a-z_.]+)"', arg))
    return types


def events_from_docs():
    doc = _read("docs/protocol.md")
    doc = doc[doc.index("| type | fields |"):]
    types = set()
    for line in doc.split("\n")[2:]:
        if not line.startswith("|"):
            break
        types.update(re.findall(r"`([a-z_.]+)`", line.split("|")[1]))
    return types


def cmdline_from_source():
    keys = set()
    for path in glob.glob(os.path.join(ROOT, "init", "**", "*.c"), recursive=True):
        keys.update(re.findall(r'\bcmdline_get\("(hearth\.[a-z_]+)"', open(path).read()))
    return keys


def cmdline_from_docs():
    doc = _read("docs/config.md")
    doc = doc[doc.index("## Kernel command line"):doc.index("## Rules and limits")]
    return set(re.findall(r"^\| `(hearth\.[a-z_]+)=", doc, re.M))


# ---- what each test names ----

class Names:
    def __init__(self):
        self.keys, self.strings = set(), set()

    def add(self, node):
        for n in ast.walk(node):
            if isinstance(n, ast.Dict):
                for k in n.keys:
                    if isinstance(k, ast.Constant) and isinstance(k.value, str):
                        self.keys.add(k.value)
            elif isinstance(n, ast.Call):
                for kw in n.keywords:
                    if kw.arg:
                        self.keys.add(kw.arg)
                f = n.func
                if isinstance(f, ast.Attribute) and f.attr == "config" and n.args:
                    self.keys.add("services")
            elif isinstance(n, ast.Constant) and isinstance(n.value, str):
                self.strings.add(n.value)
                self.keys.update(re.findall(r'"(\w+)"\s*:', n.value))
            if isinstance(n, (ast.Assign, ast.AugAssign)):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                for t in targets:
                    while isinstance(t, ast.Subscript):
                        if isinstance(t.slice, ast.Constant) and isinstance(t.slice.value, str):
                            self.keys.add(t.slice.value)
                        t = t.value


def collect_tests():
    """{"file.py::test": Names} for every test."""
    out = {}
    files = sorted(glob.glob(os.path.join(ROOT, "tests", "integration", "test_*.py")) +
                   glob.glob(os.path.join(ROOT, "tests", "vm", "test_*.py")))
    for path in files:
        if os.path.basename(path) in SKIP_FILES:
            continue
        tree = ast.parse(open(path).read(), path)
        top = {}
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                top[node.name] = node
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    if isinstance(t, ast.Name):
                        top[t.id] = node
        rel = os.path.relpath(path, os.path.join(ROOT, "tests"))
        for name, node in top.items():
            if not (name.startswith("test_") and isinstance(node, ast.FunctionDef)):
                continue
            names = Names()
            seen, frontier = {name}, [node]
            for _depth in range(3):
                nxt = []
                for f in frontier:
                    names.add(f)
                    for n in ast.walk(f):
                        if isinstance(n, ast.Name) and n.id in top and n.id not in seen:
                            seen.add(n.id)
                            nxt.append(top[n.id])
                frontier = nxt
            for f in frontier:
                names.add(f)
            out[f"{rel}::{name}"] = names
    return out


def _segments(path):
    return [s for s in re.split(r"\[\]\.|\.", path) if s]


def coverage():
    """[(kind, item, [tests])] for every item."""
    tests = collect_tests()
    rows = []
    for key in sorted(config_keys_from_source()):
        segs = _segments(key)
        rows.append(("config", key, [t for t, n in tests.items() if all(s in n.keys for s in segs)]))
    for m in methods():
        rows.append(("method", m, [t for t, n in tests.items() if m in n.strings]))
    for e in sorted(events_from_source()):
        rows.append(("event", e, [t for t, n in tests.items() if e in n.strings]))
    for k in sorted(cmdline_from_source()):
        rows.append(("cmdline", k, [t for t, n in tests.items()
                                    if any(k + "=" in s for s in n.strings)]))
    return rows


KINDS = [("config", "Config keys", "docs/config.md, init/config/schema_tables.c"),
         ("method", "Methods", "agent/methods/methods.c, docs/protocol.md"),
         ("event", "Event types", "events_emit() in init/ and agent/, docs/protocol.md"),
         ("cmdline", "Kernel command-line keys", "cmdline_get() in init/, docs/config.md")]
SHOWN = 3


def render(rows):
    out = ["# Test coverage", "",
           "Every config key, method, event type and kernel command-line key, with the",
           "tests that exercise it. Written by `tests/integration/test_coverage.py`",
           "(`/usr/bin/python3 tests/integration/test_coverage.py > docs/coverage.md`),",
           "which fails when this file is out of date, when a key, method, event or",
           "command-line key has no test and is not listed under",
           "[Not exercised](#not-exercised), or when the sources and the reference",
           "docs disagree on what exists.", "",
           "## The rule", "", RULE, ""]
    for kind, title, where in KINDS:
        mine = [r for r in rows if r[0] == kind]
        done = sum(1 for r in mine if r[2])
        out += [f"## {title}", "", f"{done} of {len(mine)} exercised (from {where}).", "",
                "| item | tests |", "|---|---|"]
        for _, item, tests in mine:
            if tests:
                shown = ", ".join(f"`{t}`" for t in tests[:SHOWN])
                more = f" and {len(tests) - SHOWN} more" if len(tests) > SHOWN else ""
                out.append(f"| `{item}` | {shown}{more} |")
            else:
                out.append(f"| `{item}` | **none**: see [Not exercised](#not-exercised) |")
        out.append("")
    out += ["## Not exercised", "",
            "Each is a gap, listed in `EXCEPTIONS` of `tests/integration/test_coverage.py`:", "",
            "| item | why |", "|---|---|"]
    for item, why in sorted(EXCEPTIONS.items()):
        out.append(f"| `{item}` | {why} |")
    return "\n".join(out) + "\n"


# ---- the checks ----

def test_config_keys_agree_between_source_and_docs():
    src, doc = config_keys_from_source(), config_keys_from_docs()
    assert len(src) > 80, "the schema tables of init/config/schema_tables.c were not found"
    assert src - doc == set(), "keys in init/config/schema_tables.c but not in docs/config.md"
    assert doc - src == set(), "keys in docs/config.md but not in init/config/schema_tables.c"


def test_event_types_agree_between_source_and_docs():
    src, doc = events_from_source(), events_from_docs()
    assert len(src) > 10
    assert src - doc == set(), "event types emitted but not in docs/protocol.md"
    assert doc - src == set(), "event types in docs/protocol.md that nothing emits"


def test_cmdline_keys_agree_between_source_and_docs():
    src, doc = cmdline_from_source(), cmdline_from_docs()
    assert len(src) >= 4
    assert src == doc


def test_everything_is_exercised():
    rows = coverage()
    items = {f"{kind}:{item}": tests for kind, item, tests in rows}
    missing = sorted(i for i, t in items.items() if not t and i not in EXCEPTIONS)
    assert not missing, ("no test exercises these (see the rule in docs/coverage.md); "
                         f"write one: {missing}")
    stale = sorted(i for i in EXCEPTIONS if i not in items or items[i])
    assert not stale, f"EXCEPTIONS lists items that are gone or now exercised: {stale}"


def test_the_table_is_current():
    want = render(coverage())
    have = open(os.path.join(ROOT, "docs", "coverage.md")).read()
    assert have == want, ("docs/coverage.md is out of date: /usr/bin/python3 "
                          "tests/integration/test_coverage.py > docs/coverage.md")


if __name__ == "__main__":
    sys.stdout.write(render(coverage()))
