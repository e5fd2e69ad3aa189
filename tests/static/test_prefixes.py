"""One prefix per module (docs/architecture.md, Conventions): no file
exports a symbol under another module's prefix. A file's prefix is its
name (`egress_` is init/net/egress.c's; PREFIX_OF names the few
exceptions); the files of a module split over
several share its private header and its prefix; SHORT declares the few
short forms. A symbol is judged by the longest prefix it starts with: it
fails when that prefix is another module's. hearthctl, a program of its
own, is judged among its own files.

Exports come from the release objects (layers.py), as the linker sees
them; the last test injects an export under another module's prefix and
sees the check fail."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import layers as L  # noqa: E402

# Short forms, each named in its module's header: prefix -> the module
# (a file, or a folder whose files share it).
SHORT = {
    "nl_": "init/net/netlink",
    "nr_": "init/net/netroute",
    "mono_": "init/lib/timebase",
    "wall_": "init/lib/timebase",
    "jget": "init/lib/jsonget",
    "svc_": "init/supervisor/",
    "service_": "init/supervisor/",
    "skills_": "init/skills/",
    "control_": "agent/control/",
    "m_": "agent/methods/",
}
# Files whose prefix is not their name: the envd role's, named for what
# they are inside the role (agent/envd/README.md).
PREFIX_OF = {f"agent/envd/envd_{n}.c": f"{n}_"
             for n in ("conn", "link", "entry", "watch", "ops", "api", "wire")}


def module(src):
    """A file's module: the private header it includes, else itself."""
    for inc in L.includes(src):
        if inc in L.PRIVATE:
            return L.PRIVATE[inc]
    return os.path.splitext(src)[0]


def owners(srcs, short):
    """{prefix: module or folder} for the files srcs and the short forms."""
    own = {PREFIX_OF.get(s, os.path.basename(os.path.splitext(s)[0]) + "_"): module(s)
           for s in srcs}
    own.update(short)
    return own


def strays(table, short):
    """Each export of table ({source: (defined, undefined)}) whose
    longest prefix is another module's, as a sentence."""
    own = owners(table, short)
    by_len = sorted(own, key=len, reverse=True)
    bad = []
    for src, (defined, _) in sorted(table.items()):
        me = module(src)
        for sym in sorted(defined):
            p = next((p for p in by_len if sym.startswith(p)), None)
            if p is None:
                continue
            o = own[p]
            mine = o == me or (o.endswith("/") and src.startswith(o))
            if not mine:
                bad.append(f"{src} exports {sym}, under {p} ({o}'s prefix)")
    return bad


@pytest.fixture(scope="module")
def guest_table():
    r = L.subprocess.run(["make", "-s", "-C", L.ROOT, "objects"], capture_output=True, text=True)
    assert r.returncode == 0, f"make objects failed:\n{r.stdout}{r.stderr}"
    return L.source_symbols(L.guest_sources((".c",)))


def test_no_file_exports_under_another_modules_prefix(guest_table):
    assert strays(guest_table, SHORT) == []


def test_no_hearthctl_file_exports_under_another_files_prefix(guest_table):
    host = L.source_symbols(L.host_sources((".c",)))
    assert strays(host, {}) == []


@pytest.mark.parametrize("src,sym", [
    ("init/config/sections.c", "egress_parse"),          # a file's name
    ("agent/envd/envd.c", "m_envd_init"),                # a short form
    ("init/sandbox/resume.c", "resumefile_path"),        # the longest prefix wins
    ("agent/envd/envd_ops.c", "conn_respond"),           # a PREFIX_OF one
])
def test_an_injected_export_under_another_prefix_fails_the_check(guest_table, src, sym):
    table = dict(guest_table)
    table[src] = (guest_table[src][0] | {sym}, guest_table[src][1])
    bad = strays(table, SHORT)
    assert len(bad) == 1 and bad[0].startswith(f"{src} exports {sym}, under "), bad
