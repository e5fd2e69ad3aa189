"""The configurations docs/platforms.md gives are ones hearth accepts, and
the CubeSandbox recipe's is the image's own."""
import json
import os
import re
import subprocess

from conftest import ROOT

HEARTH = os.path.join(ROOT, "build", "hearth")


def test_platform_recipes_configs_pass_check_config(tmp_path):
    text = open(os.path.join(ROOT, "docs", "platforms.md")).read()
    blocks = [b for b in re.findall(r"```json\n(.*?)```", text, re.S) if '"services"' in b]
    assert blocks, "docs/platforms.md has no full config"
    for i, b in enumerate(blocks):
        f = tmp_path / f"platform-{i}.json"
        f.write_text(b)
        r = subprocess.run([HEARTH, "--check-config", str(f)], capture_output=True, text=True)
        assert r.returncode == 0, f"config {i} of docs/platforms.md: {r.stdout}{r.stderr}"


def test_the_cube_recipes_config_is_the_images():
    """The CubeSandbox recipe's config is the image's own, the one
    tests/runtime/test_cube.py runs: the two cannot drift apart."""
    text = open(os.path.join(ROOT, "docs", "platforms.md")).read()
    section = text[text.index("## CubeSandbox\n"):text.index("## Kata Containers\n")]
    blocks = re.findall(r"```json\n(.*?)```", section, re.S)
    assert len(blocks) == 1, "the CubeSandbox section has one config"
    shipped = json.load(open(os.path.join(ROOT, "rootfs", "oci", "hearth.json")))
    assert json.loads(blocks[0]) == shipped
