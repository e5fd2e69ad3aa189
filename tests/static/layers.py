"""The layers of docs/architecture.md, read from the code: which module
each file belongs to, what each file includes, and what each file calls.

Calls are read from the objects the build leaves under build/obj/release/
(one per source): an object's undefined symbols, each resolved to the
object that defines it, are the calls and data references from that file
to another, exactly as the linker sees them. The host client's objects
are resolved as hearthctl is linked: its own first, then hearth's library.

test_layers.py holds the rules; `python3 tests/static/layers.py` prints
each file's calls to other files (`--file F` for one file)."""
import collections
import glob
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OBJ = os.path.join(ROOT, "build", "obj", "release")
HOST_DIR = "agent/hearthctl"
MAIN = "init/main.c"
# What hearthctl may take from hearth's library.
HOST_MAY_LINK = ("init/lib/", "agent/proto/")

# Headers shared by the files of one module (a module split over files).
PRIVATE = {
    "service_priv.h": "init/supervisor/service",
    "sandbox_priv.h": "init/sandbox/sandbox",
    "skills_priv.h": "init/skills/skills",
    "schema_priv.h": "init/config/schema",
    "control_priv.h": "agent/control/clients",
    "control.h": "agent/control/clients",
    "m_files_int.h": "agent/methods/m_files",
    "execproc_priv.h": "agent/exec/execproc",
    "nft_priv.h": "init/net/nft",
}


def rel(path):
    return os.path.relpath(path, ROOT)


def layers(text=None):
    """{module: layer} from the layer table of docs/architecture.md."""
    if text is None:
        text = open(os.path.join(ROOT, "docs", "architecture.md")).read()
    sec = text.split("## The house at a glance", 1)[1].split("\n## ", 1)[0]
    layer = {}
    for num, row in re.findall(r"^\| (\d+) [a-z]+ \|(.*)\|$", sec, re.M):
        for mod in re.findall(r"`((?:init|agent)/[a-z_0-9/]+)`", row):
            assert mod not in layer, f"{mod} is in two layers"
            layer[mod] = int(num)
    return layer


def _walk(top, exts):
    out = []
    for d, _, files in os.walk(os.path.join(ROOT, top)):
        out += [rel(os.path.join(d, f)) for f in files if f.endswith(exts)]
    return sorted(out)


def guest_sources(exts=(".c", ".h")):
    """Every guest source, in any folder of init/ and agent/."""
    return [p for p in _walk("init", exts) + _walk("agent", exts)
            if not p.startswith(HOST_DIR + "/")]


def host_sources(exts=(".c", ".h")):
    return _walk(HOST_DIR, exts)


def module_of(path):
    return PRIVATE.get(os.path.basename(path), os.path.splitext(path)[0])


def object_of(src, objdir=OBJ):
    return os.path.join(objdir, os.path.splitext(src)[0] + ".o")


def nm_tool():
    return os.environ.get("NM") or shutil.which("gcc-nm") or "nm"


def symbols(objects, nm=None):
    """{object path: (defined, undefined)} read with nm (gcc-nm reads the
    LTO objects of the release build)."""
    out = subprocess.run([nm or nm_tool(), "-A"] + list(objects), check=True,
                         capture_output=True, text=True).stdout
    table = {o: (set(), set()) for o in objects}
    for line in out.splitlines():
        # "path:[address] TYPE name" (a C name holds no colon).
        path, _, rest = line.rpartition(":")
        f = rest.split()
        if path not in table or not f:
            continue
        if len(f) == 2 and f[0] == "U":
            table[path][1].add(f[1])
        elif len(f) == 3 and f[1] in "TDBRCVWGS":
            table[path][0].add(f[2])
    return table


def source_symbols(srcs, objdir=OBJ):
    """{source: (defined, undefined)} for srcs, from their objects."""
    objs = [object_of(s, objdir) for s in srcs]
    missing = [o for o in objs if not os.path.exists(o)]
    assert not missing, f"objects not built (make objects): {missing[:5]}"
    by_obj = symbols(objs)
    return {s: by_obj[object_of(s, objdir)] for s in srcs}


def calls(table, order=None):
    """{(caller file, callee file): {symbols}}: each undefined symbol of a
    file resolved to the file that defines it. order: files whose
    definitions win (the objects a program links before a library)."""
    where = {}
    for f in list(table) if order is None else [f for f in table if f not in order]:
        for s in table[f][0]:
            where.setdefault(s, f)
    for f in order or ():
        for s in table[f][0]:
            where[s] = f
    edges = collections.defaultdict(set)
    for f, (_, und) in table.items():
        for s in und:
            g = where.get(s)
            if g and g != f:
                edges[(f, g)].add(s)
    return dict(edges)


def upward(edges, layer):
    """Each call from a file to a file of a higher layer, as a sentence."""
    bad = []
    for (a, b), syms in sorted(edges.items()):
        la, lb = layer.get(module_of(a)), layer.get(module_of(b))
        if la is not None and lb is not None and lb > la:
            bad.append(f"{a} (layer {la}) calls {', '.join(sorted(syms))} of {b} (layer {lb})")
    return bad


def circles(edges):
    """The circles of files calling each other: every strongly connected
    set of more than one file, each as a sorted tuple."""
    graph = collections.defaultdict(set)
    for a, b in edges:
        graph[a].add(b)
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        # Tarjan's algorithm, iterative: no recursion limit to meet.
        work = [(v, iter(sorted(graph[v])))]
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        group.append(w)
                        if w == node:
                            break
                    if len(group) > 1:
                        found.append(tuple(sorted(group)))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


# Circles of files that call each other, left as they are for now, each
# with why: the check fails on any other circle, on one of these growing a
# file, and on one of these that is gone (so the list stays true). None is
# left: inside a module too, what must run upward is a callback handed down.
KNOWN_CIRCLES = {}


def check_calls(edges, layer):
    """Problems: every call to a file of a higher layer."""
    return upward(edges, layer)


def check_circles(edges, known=None):
    """Problems: every circle not known as it is, and every known one gone."""
    known = KNOWN_CIRCLES if known is None else known
    found = circles(edges)
    bad = [f"a circle of files calling each other: {', '.join(c)}"
           for c in found if c not in known]
    domain = {f for e in edges for f in e}
    bad += [f"the known circle {', '.join(c)} is gone or changed: update KNOWN_CIRCLES"
            for c in known if set(c) <= domain and c not in found]
    return bad


def check_host(edges):
    """Problems: what hearthctl takes from hearth beyond init/lib/ and
    agent/proto/."""
    return [f"{a} calls {', '.join(sorted(syms))} of {b}: hearthctl may link only "
            f"{' and '.join(HOST_MAY_LINK)}"
            for (a, b), syms in sorted(edges.items())
            if not b.startswith(HOST_DIR + "/") and not b.startswith(HOST_MAY_LINK)]


def guest_edges(objdir=OBJ):
    return calls(source_symbols(guest_sources((".c",)), objdir))


def host_edges(objdir=OBJ):
    """hearthctl's calls: its own files first, then hearth's library (all
    of the guest but main.c), as the link resolves them."""
    host = host_sources((".c",))
    lib = [s for s in guest_sources((".c",)) if s != MAIN]
    table = source_symbols(host + lib, objdir)
    return {k: v for k, v in calls(table, order=host).items() if k[0] in host}


def includes(path):
    return re.findall(r'^#include "([^"]+)"', open(os.path.join(ROOT, path)).read(), re.M)


if __name__ == "__main__":
    only = sys.argv[sys.argv.index("--file") + 1] if "--file" in sys.argv else None
    for edges in (guest_edges(), host_edges()):
        for (a, b), syms in sorted(edges.items()):
            if only in (None, a, b):
                print(f"{a} -> {b}: {' '.join(sorted(syms))}")
