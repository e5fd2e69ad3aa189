"""hearthctl --help, the first thing a newcomer reads: every command's
synopsis and description printed whole (the command table in
agent/hearthctl/commands.c is the truth), wrapped within 79 columns,
every description starting in one column."""
import os
import re
import subprocess

from conftest import HEARTHCTL, ROOT

DESC_COL = 33


def help_text():
    r = subprocess.run([HEARTHCTL, "--help"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0, r.stderr
    return r.stdout


def command_table():
    """(synopsis, description) of every command the help lists, read from
    the source's table."""
    src = open(os.path.join(ROOT, "agent", "hearthctl", "commands.c")).read()
    rows = []
    for m in re.finditer(r'\{\.name = "([^"]+)",(.*?)\},\n', src, re.S):
        body = m.group(2)
        if ".hidden = true" in body:
            continue
        field = {k: "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', v))
                 for k, v in re.findall(r'\.(args|help) = ((?:"(?:[^"\\]|\\.)*"\s*)+)', body)}
        rows.append(((m.group(1) + " " + field.get("args", "")).strip(), field["help"]))
    assert len(rows) > 20, rows
    return rows


def commands_section(text):
    return text.split("commands:\n", 1)[1].split("\n\n", 1)[0]


def test_every_line_fits_79_columns():
    long = [line for line in help_text().splitlines() if len(line) > 79]
    assert not long, long


def test_every_command_is_printed_whole_with_its_description():
    flat = " ".join(commands_section(help_text()).split())
    for syn, desc in command_table():
        assert f"{syn} {desc}" in flat, (syn, desc)
    # the ones that used to be cut at a fixed column
    assert "init [--env K=V]... [--allow-out CIDR]... [--hostname H] [--time now|SEC] " \
           "[--entropy-from PATH] [--network FILE] send the per-sandbox" in flat
    assert "egress set [--allow-out CIDR...] [--deny-out CIDR...] [--public on|off] " \
           "replace the egress policy" in flat


def test_descriptions_continue_in_their_column():
    """A wrapped description goes on at the description column, a wrapped
    synopsis under its arguments, never at the left margin."""
    for line in commands_section(help_text()).splitlines():
        indent = len(line) - len(line.lstrip(" "))
        assert indent == 2 or 2 < indent < DESC_COL and line.lstrip().startswith("[") \
            or indent == DESC_COL, line
