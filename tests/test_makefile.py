"""Every Makefile target resolves: each script or file its recipe names exists (``make bench`` once
called a scripts/bench.sh that did not exist), and ``make -n`` accepts each target."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
MAKEFILE = (REPO / "Makefile").read_text()


def _targets() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    current = None
    for line in MAKEFILE.splitlines():
        m = re.match(r"^([A-Za-z][\w-]*):", line)
        if m:
            current = m.group(1)
            out[current] = []
        elif line.startswith("\t") and current:
            out[current].append(line.strip())
    return out


TARGETS = _targets()


def test_phony_lists_every_target():
    phony = set(re.search(r"^\.PHONY:(.*)$", MAKEFILE, re.M).group(1).split())
    assert phony == set(TARGETS), "every target is .PHONY (none builds a file of its name)"


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_every_file_a_recipe_names_exists(target):
    for cmd in TARGETS[target]:
        for word in cmd.split():
            if re.match(r"^(scripts|bench|tests|viewer)/[\w./-]+$", word) or word == "app.py":
                assert (REPO / word).exists(), f"make {target}: {word} does not exist"


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_make_dry_run_accepts_target(target):
    if shutil.which("make") is None:
        pytest.fail("make is not installed")
    r = subprocess.run(["make", "-n", target], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
