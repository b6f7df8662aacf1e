"""The repo is a real package: `pip wheel .` declares the app's pinned dependencies and ships a
`rollout-inspector` console script with the same subcommands as `python -m viewer`."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # builds a wheel with pip (tens of seconds)

REPO = Path(__file__).resolve().parent.parent


def test_wheel_declares_dependencies_and_console_script_runs(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path / "dist"), str(REPO)], check=True, capture_output=True, cwd=tmp_path)
    (whl,) = (tmp_path / "dist").glob("rollout_inspector-*.whl")
    with zipfile.ZipFile(whl) as z:
        meta = z.read(next(n for n in z.namelist() if n.endswith("METADATA"))).decode()
        names = z.namelist()
    reqs = [ln.strip() for ln in (REPO / "requirements.txt").read_text().splitlines()
            if ln.strip() and not ln.startswith("#")]
    declared = {ln.split(":", 1)[1].strip().replace(" ", "") for ln in meta.splitlines() if ln.startswith("Requires-Dist:")}
    for r in reqs:  # the Space's pins, declared (pip normalises ">=a,<b" to "<b,>=a")
        name = r.split("=")[0].split(">")[0].split("<")[0]
        assert any(d.startswith(name) for d in declared), (r, declared)
    assert "viewer/capture/tasks/bundled.json" in names and "viewer/ui/assets/token_view.js" in names
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(whl)],
                   check=True, capture_output=True)
    env = {**os.environ, "PYTHONPATH": str(target), "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([str(target / "bin" / "rollout-inspector"), "summary", str(REPO / "sample_data" / "qwen3-tiny"),
                          "--json"], capture_output=True, text=True, env=env, cwd=tmp_path, check=True).stdout
    doc = json.loads(out)
    assert doc["format"] == "capture" and doc["turns"] == 3 and doc["model"] == "tiny-qwen3"
