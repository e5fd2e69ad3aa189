"""The layers of docs/architecture.md hold in the code: every module is
in the table, and no `#include` of a module's header runs from a lower
layer to a higher one. What must run upward is a callback handed down
(see the page), which needs no include."""
import glob
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

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


def _layers():
    text = open(os.path.join(ROOT, "docs/architecture.md")).read()
    sec = text.split("## The house at a glance", 1)[1].split("\n## ", 1)[0]
    layer = {}
    for row in re.findall(r"^\| (\d+) [a-z]+ \|(.*)\|$", sec, re.M):
        for mod in re.findall(r"`((?:init|agent)/[a-z_0-9/]+)`", row[1]):
            assert mod not in layer, f"{mod} is in two layers"
            layer[mod] = int(row[0])
    return layer


def _sources():
    return sorted(p for p in glob.glob(os.path.join(ROOT, "init/**/*.[ch]"), recursive=True) +
                  glob.glob(os.path.join(ROOT, "agent/**/*.[ch]"), recursive=True)
                  if "/agent/hearthctl/" not in p)


def _module_of(path):
    rel = os.path.relpath(path, ROOT)
    return PRIVATE.get(os.path.basename(rel), os.path.splitext(rel)[0])


def test_every_module_has_a_layer():
    layer = _layers()
    assert len(layer) > 60, "the layer table of docs/architecture.md was not found"
    mods = {_module_of(p) for p in _sources()}
    assert mods - set(layer) == set(), "modules missing from the layer table"
    assert set(layer) - mods == set(), "modules in the layer table that do not exist"


def test_no_include_runs_upward():
    layer = _layers()
    headers = {os.path.basename(p): _module_of(p) for p in _sources() if p.endswith(".h")}
    up = []
    for path in _sources():
        me = _module_of(path)
        for inc in re.findall(r'^#include "([^"]+)"', open(path).read(), re.M):
            dep = headers.get(inc)
            if dep and layer[dep] > layer[me]:
                up.append(f"{os.path.relpath(path, ROOT)} (layer {layer[me]}) includes "
                          f"{inc} (layer {layer[dep]})")
    assert up == [], "\n".join(up)
