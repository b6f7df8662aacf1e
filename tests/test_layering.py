"""Architecture rules that keep the core usable without a UI."""
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def core_modules():
    for p in sorted((REPO / "viewer").rglob("*.py")):
        rel = p.relative_to(REPO).with_suffix("")
        if "ui" in rel.parts or p.name == "__main__.py":
            continue
        yield ".".join(rel.parts).removesuffix(".__init__")


def test_core_never_imports_gradio():
    mods = list(core_modules())
    assert "viewer.rollout" in mods and "viewer.drift" in mods
    code = ("import importlib, sys\n"
            f"for m in {mods!r}: importlib.import_module(m)\n"
            "bad = sorted(k for k in sys.modules if k == 'gradio' or k.startswith('gradio.'))\n"
            "print('GRADIO' if bad else 'CLEAN')")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("CLEAN")


def test_html_is_built_only_in_render():
    """Markup strings live in the viewer/render/ package (and the UI's static templates), nowhere else in the core."""
    offenders = []
    for p in (REPO / "viewer").rglob("*.py"):
        parts = p.relative_to(REPO).parts
        if parts[:2] == ("viewer", "render") or "ui" in parts:
            continue
        text = p.read_text()
        for tag in ("<div", "<span", "<table", "<pre"):
            if tag in text:
                offenders.append(f"{p.relative_to(REPO)}: {tag}")
    assert offenders == []
