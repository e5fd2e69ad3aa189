"""The layers of docs/architecture.md hold in the code: every module is
in the table; no `#include` of a module's header and no call runs from a
lower layer to a higher one; no files call each other in a circle (but
the known ones of layers.py, each with its reason); hearthctl takes from
hearth only init/lib/ and agent/proto/. What must run upward is a
callback handed down (see the page), which needs neither.

Calls come from the release objects' symbols (layers.py); the fixture
builds what is missing or stale (make objects). The last tests inject an
upward call and a circle and see the check fail."""
import os
import re
import shutil
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import layers as L  # noqa: E402


@pytest.fixture(scope="module")
def objects():
    r = subprocess.run(["make", "-s", "-C", L.ROOT, "objects"], capture_output=True, text=True)
    assert r.returncode == 0, f"make objects failed:\n{r.stdout}{r.stderr}"


@pytest.fixture(scope="module")
def guest_table(objects):
    return L.source_symbols(L.guest_sources((".c",)))


def test_every_module_has_a_layer():
    layer = L.layers()
    assert len(layer) > 60, "the layer table of docs/architecture.md was not found"
    mods = {L.module_of(p) for p in L.guest_sources()}
    assert mods - set(layer) == set(), "modules missing from the layer table"
    assert set(layer) - mods == set(), "modules in the layer table that do not exist"


def test_every_source_folder_has_a_readme():
    dirs = {os.path.dirname(p) for p in L.guest_sources() + L.host_sources()}
    missing = sorted(d for d in dirs if not os.path.exists(os.path.join(L.ROOT, d, "README.md")))
    assert missing == [], "folders without a README.md (what it owns, what it may call)"


def test_no_include_runs_upward():
    layer = L.layers()
    headers = {os.path.basename(p): L.module_of(p) for p in L.guest_sources((".h",))}
    up = []
    for path in L.guest_sources():
        me = L.module_of(path)
        for inc in L.includes(path):
            dep = headers.get(inc)
            if dep and layer[dep] > layer[me]:
                up.append(f"{path} (layer {layer[me]}) includes {inc} (layer {layer[dep]})")
    assert up == [], "\n".join(up)


def test_hearthctl_includes_only_its_own_the_leaf_helpers_and_the_protocol():
    own = {os.path.basename(p) for p in L.host_sources((".h",))}
    where = {os.path.basename(p): p for p in L.guest_sources((".h",))}
    bad = [f"{path} includes {inc} ({where[inc]})"
           for path in L.host_sources() for inc in L.includes(path)
           if inc not in own and inc in where and not where[inc].startswith(L.HOST_MAY_LINK)]
    assert bad == [], "\n".join(bad)


def test_no_call_runs_upward(guest_table):
    bad = L.check_calls(L.calls(guest_table), L.layers())
    assert bad == [], "\n".join(bad)


def test_no_files_call_each_other_in_a_circle(guest_table):
    bad = L.check_circles(L.calls(guest_table))
    assert bad == [], "\n".join(bad)


def test_hearthctl_links_only_the_leaf_helpers_and_the_protocol(objects):
    edges = L.host_edges()
    # It does link some: an empty table would pass for the wrong reason.
    assert any(b.startswith("init/lib/") for _, b in edges)
    assert L.check_host(edges) == []
    assert L.check_circles(edges) == []


def test_every_known_circle_says_why():
    for files, why in L.KNOWN_CIRCLES.items():
        assert len(files) > 1 and list(files) == sorted(files) and len(why) > 40, files


# ---- the check fails when it should -------------------------------------

def _with(table, src, undefined):
    t = dict(table)
    d, u = t[src]
    t[src] = (d, u | set(undefined))
    return t


def test_an_injected_upward_call_fails_the_check(guest_table):
    # utf8 (layer 1) made to call the supervisor's start (layer 5).
    table = _with(guest_table, "init/lib/utf8.c", {"service_start_all"})
    bad = L.check_calls(L.calls(table), L.layers())
    assert bad == ["init/lib/utf8.c (layer 1) calls service_start_all of "
                   "init/supervisor/service.c (layer 5)"], bad


def test_an_upward_call_compiled_into_an_object_fails_the_check(guest_table, tmp_path):
    # A real object whose one function calls up, read with the same nm as
    # the build's objects, taken for part of a layer-1 file.
    cc = shutil.which("gcc") or shutil.which("cc")
    src = tmp_path / "probe.c"
    src.write_text("void sandbox_thaw_for_shutdown(void);\n"
                   "int jsonget_probe(void) { sandbox_thaw_for_shutdown(); return 0; }\n")
    obj = str(tmp_path / "probe.o")
    subprocess.run([cc, "-c", "-o", obj, str(src)], check=True)
    defined, undefined = L.symbols([obj])[obj]
    assert "jsonget_probe" in defined and undefined == {"sandbox_thaw_for_shutdown"}
    table = _with(guest_table, "init/lib/jsonget.c", undefined)
    bad = L.check_calls(L.calls(table), L.layers())
    assert len(bad) == 1 and re.match(
        r"init/lib/jsonget\.c \(layer 1\) calls sandbox_thaw_for_shutdown of "
        r"init/sandbox/sandbox\.c \(layer 6\)$", bad[0]), bad


def test_an_injected_circle_fails_the_check(guest_table):
    # bytebuf and utf8 (both layer 1, no call upward) calling each other.
    table = _with(_with(guest_table, "init/lib/bytebuf.c", {"utf8_invalid_at"}),
                  "init/lib/utf8.c", {"bytebuf_grown_cap"})
    edges = L.calls(table)
    assert L.check_calls(edges, L.layers()) == []
    assert L.check_circles(edges) == [
        "a circle of files calling each other: init/lib/bytebuf.c, init/lib/utf8.c"]


def test_a_known_circle_that_grows_fails_the_check(guest_table):
    # bytebuf and utf8 made to call each other and listed as known, then
    # termsafe joining them: utf8 calls it and it calls bytebuf.
    known = {**L.KNOWN_CIRCLES,
             ("init/lib/bytebuf.c", "init/lib/utf8.c"): "a circle made for the test"}
    table = _with(_with(guest_table, "init/lib/bytebuf.c", {"utf8_invalid_at"}),
                  "init/lib/utf8.c", {"bytebuf_grown_cap"})
    assert L.check_circles(L.calls(table), known) == []
    table = _with(_with(table, "init/lib/utf8.c", {"termsafe_step"}),
                  "init/lib/termsafe.c", {"bytebuf_grown_cap"})
    bad = L.check_circles(L.calls(table), known)
    assert any("init/lib/bytebuf.c, init/lib/termsafe.c, init/lib/utf8.c" in b for b in bad), bad
    assert any("known circle init/lib/bytebuf.c, init/lib/utf8.c is gone" in b for b in bad), bad


def test_hearthctl_taking_a_guest_module_fails_the_check(objects):
    host = L.host_sources((".c",))
    lib = [s for s in L.guest_sources((".c",)) if s != L.MAIN]
    table = _with(L.source_symbols(host + lib), "agent/hearthctl/main.c", {"log_msg"})
    edges = {k: v for k, v in L.calls(table, order=host).items() if k[0] in host}
    assert L.check_host(edges) == [
        "agent/hearthctl/main.c calls log_msg of init/core/log.c: hearthctl may link only "
        "init/lib/ and agent/proto/"]
