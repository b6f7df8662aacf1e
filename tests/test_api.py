"""The library's front door, ``viewer/__init__.py`` (issue 37), and its page, docs/API.md: every public
name resolves to its module's own object, importing ``viewer`` stays free, ``help(viewer)`` shows the
API, and the page's example runs on the bundled sample."""
import json
import os
import re
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
API_MD = REPO / "docs" / "API.md"
HEAVY = ("gradio", "transformers", "torch")


def _python(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def _loaded(prefix: str) -> str:
    return f"sorted(m for m in sys.modules if m == {prefix!r} or m.startswith({prefix + '.'!r}))"


def test_importing_viewer_loads_nothing_and_a_submodule_no_heavy_package():
    """``import viewer`` runs before every ``import viewer.x``: it must load no module of ours and none of
    gradio, transformers, torch (each costs seconds, and the core never imports gradio)."""
    doc = json.loads(_python(
        "import json, sys\nimport viewer\nalone = " + _loaded("viewer") + "\n"
        "import viewer.config\n"
        f"print(json.dumps({{'alone': alone, 'heavy': [m for m in {HEAVY!r} if m in sys.modules]}}))"))
    assert doc == {"alone": ["viewer"], "heavy": []}


def test_every_public_name_resolves_without_loading_gradio_transformers_or_torch():
    """Reading a name imports its module only: no gradio (the core), and no transformers or torch
    until a tokenizer is loaded or a model run."""
    doc = json.loads(_python(
        "import json, sys\nimport viewer\n"
        "missing = [n for n in viewer.__all__ if getattr(viewer, n, None) is None]\n"
        f"print(json.dumps({{'missing': missing, 'heavy': [m for m in {HEAVY!r} if m in sys.modules]}}))"))
    assert doc == {"missing": [], "heavy": []}


def test_public_names_are_their_modules_own_objects():
    import viewer
    import viewer.config
    import viewer.drift
    import viewer.render.payload
    import viewer.rescore
    import viewer.sources
    import viewer.talk.export

    assert viewer.load_source is viewer.sources.load_source
    assert viewer.Settings is viewer.config.Settings
    assert viewer.trainer_rows is viewer.drift.trainer_rows  # the drift one, not render's view of the rows
    assert viewer.rescore_rollout is viewer.rescore.rescore
    assert viewer.decode_payload is viewer.render.payload.decode_payload
    assert viewer.export_rollout is viewer.talk.export.export_rollout
    for name in viewer.__all__:  # every function and class is ours (a constant such as SAMPLE_DIR is a Path)
        value = getattr(viewer, name)
        if isinstance(value, (type, types.FunctionType)):
            assert value.__module__.startswith("viewer."), (name, value.__module__)
    assert set(viewer.__all__) <= set(dir(viewer))
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        viewer.nothing_here  # noqa: B018


def test_no_public_name_hides_a_submodule():
    """``import viewer.x as m`` reads the attribute ``x`` of ``viewer``: a public name spelled like a
    submodule would hand out the function instead (hence ``rescore_rollout``)."""
    import viewer

    subs = {p.stem for p in (REPO / "viewer").glob("*.py")} | {p.name for p in (REPO / "viewer").iterdir()
                                                                if (p / "__init__.py").is_file()}
    assert {"rescore", "drift", "config"} <= subs
    assert sorted(set(viewer.__all__) & subs) == []
    viewer.rescore_rollout  # noqa: B018
    import viewer.rescore as rescore_pkg

    assert rescore_pkg.__name__ == "viewer.rescore" and callable(rescore_pkg.rescore)


def test_help_shows_the_documented_api():
    text = _python("import viewer; help(viewer)")
    import viewer

    assert "Rollout Inspector as a library" in text and "viewer.load_source(viewer.SAMPLE_DIR" in text
    shown = set(re.findall(r"^    class (\w+)\(", text, re.M)) | set(re.findall(r"^    (\w+)\(", text, re.M))
    shown |= set(re.findall(r"^    (\w+) = ", text, re.M))
    assert sorted(set(viewer.__all__) - shown) == []
    description = text[text.index("DESCRIPTION"):text.index("PACKAGE CONTENTS")]
    assert sorted(n for n in viewer.__all__ if not re.search(rf"\b{n}\b", description)) == []


def test_api_md_names_every_public_name():
    import viewer

    spans = " ".join(re.findall(r"`([^`\n]+)`", API_MD.read_text()))  # inline code, where a name is written
    assert sorted(n for n in viewer.__all__ if not re.search(rf"\b{n}\b", spans)) == []


def _example() -> str:
    text = API_MD.read_text()
    section = text[text.index("## Example"):]
    section = section[:section.index("\n## ", 1)]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1
    return blocks[0]


def test_the_documented_example_runs_on_the_bundled_sample(tmp_path, monkeypatch, capsys):
    """docs/API.md's example, as written, offline; what it reads and counts held against the sample's own
    turns.json (plain json)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    ns: dict = {"__name__": "__main__"}
    exec(compile(_example(), str(API_MD), "exec"), ns)
    out = capsys.readouterr().out

    raw = json.loads((REPO / "sample_data" / "qwen3-tiny" / "turns.json").read_text())
    ro = ns["ro"]
    assert [list(t.output_ids) for t in ro.agent_turns] == [r["output_ids"] for r in raw]
    assert ns["rows"].totals()["trained_tokens"] == sum(sum(r["mask"]) for r in raw if r["trained"])
    assert [line.split(":")[0] for line in out.splitlines() if line.startswith("turn ")] == [
        f"turn {t.index}" for t in ro.agent_turns]
    html = (tmp_path / "qwen3-tiny.html").read_text(encoding="utf-8")
    assert html.lstrip().lower().startswith("<!doctype html>") and "Content-Security-Policy" in html


def test_the_docstring_example_runs(capsys):
    """The short example ``help(viewer)`` shows, as written there."""
    import viewer

    block = viewer.__doc__.split("::\n", 1)[1]
    code = textwrap.dedent(block[:block.index("\nOpen a source")])
    assert "viewer.load_source" in code
    exec(compile(code, "viewer/__init__.py", "exec"), {"__name__": "__main__"})
    out = capsys.readouterr().out.splitlines()
    ro = viewer.load_source(viewer.SAMPLE_DIR / "qwen3-tiny")
    assert [line.split()[0] for line in out[:len(ro.agent_turns)]] == [str(t.index) for t in ro.agent_turns]


def test_the_export_functions_give_what_the_command_writes(tmp_path, capsys):
    """``export_rollout`` / ``export_deck`` are ``export SOURCE`` / ``export --deck`` as functions: the same
    options give the same file, byte for byte."""
    import viewer
    from viewer.cli import main

    settings = viewer.Settings.from_env()  # what the command runs with
    sample, deck = viewer.SAMPLE_DIR / "qwen3-tiny", viewer.SAMPLE_DIR / "deck.json"
    assert main(["export", str(sample), "--turns", "2,3", "--tok", "3-5", "--mode", "logprob", "--present",
                 "-o", str(tmp_path / "rollout.html")]) == 0
    assert main(["export", "--deck", str(deck), "-o", str(tmp_path / "deck.html")]) == 0
    capsys.readouterr()
    assert viewer.export_rollout(sample, settings, turns=[2, 3], tok=(3, 5), mode="logprob", present=True) == (
        tmp_path / "rollout.html").read_text(encoding="utf-8")
    assert viewer.export_deck(deck, settings) == (tmp_path / "deck.html").read_text(encoding="utf-8")
    with pytest.raises(ValueError, match="no rescore"):
        viewer.export_rollout(sample, settings, mode="delta")
