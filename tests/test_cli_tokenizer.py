"""One tokenizer per source, whoever opens it: ``summary``, ``drift``, ``compare``, ``rescore`` (their
--json) and the app's loader (viewer/ui/store.py) all go through ``tokenizer_for``.

The expected answers are written by hand from the documented precedence (docs/CLI.md, "Which
tokenizer"): override > the tokenizer a derived token view was made with > VIEWER_TOKENIZER > the
capture folder's own tokenizer/ > the model's. Before, ``summary`` put the model's name before the
capture folder (so a Qwen3 capture that ships another tokenizer was reported as "qwen3" while the
app used the folder's), and the app and ``drift`` ignored the tokenizer a text-only row was
derived with.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from viewer.config import SAMPLE_DIR, Settings

DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> dict[str, tuple[Path, str]]:
    """name → (source, the tokenizer every front end must name for it), answers by hand."""
    root = tmp_path_factory.mktemp("tok")
    # (a) a Qwen3 capture (its summary and trace name Qwen/Qwen3-4B-Instruct-2507) that ships its own
    # tokenizer/ files (SmolLM2's, so the two answers cannot coincide): rule 4 (folder) before rule 5 (model)
    own = root / "own-tokenizer"
    shutil.copytree(DATA / "capture_ours", own)
    shutil.copytree(SAMPLE_DIR / "smollm2" / "tokenizer", own / "tokenizer")
    # (b) the same capture without tokenizer/: its model's, the bundled Qwen3 tokenizer (rule 5)
    named = root / "model-named"
    shutil.copytree(DATA / "capture_ours", named)
    # (c) a text-only trace (chat messages, no token ids) of a model we have no tokenizer for: its
    # token view is derived with the offline Qwen3 tokenizer (docs/FORMATS.md), so rule 2 says qwen3
    text = root / "text-only.jsonl"
    msgs = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Say hi."},
            {"role": "assistant", "content": "Hi."}, {"role": "user", "content": "Again."},
            {"role": "assistant", "content": "Hi again."}]
    text.write_text(json.dumps({"messages": msgs, "model": "gpt-4o-mini", "reward": 1.0}) + "\n")
    return {
        "own-tokenizer": (own, str(own / "tokenizer")),
        "model-named": (named, "qwen3"),
        "text-only": (text, "qwen3"),
        # (d) the bundled samples: SmolLM2 ships tokenizer/ (rule 4); qwen3-tiny does not, its model
        # tiny-qwen3 maps to the bundled Qwen3 tokenizer (rule 5)
        "sample-smollm2": (SAMPLE_DIR / "smollm2", str(SAMPLE_DIR / "smollm2" / "tokenizer")),
        "sample-qwen3-tiny": (SAMPLE_DIR / "qwen3-tiny", "qwen3"),
    }


NAMES = ["own-tokenizer", "model-named", "text-only", "sample-smollm2", "sample-qwen3-tiny"]


def _json(capsys, argv: list[str]) -> dict:
    from viewer.cli import main

    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


@pytest.fixture(autouse=True)
def _no_tokenizer_setting(monkeypatch):
    monkeypatch.delenv("VIEWER_TOKENIZER", raising=False)  # rule 3 off: the sources decide


@pytest.mark.parametrize("name", NAMES)
def test_summary_drift_compare_and_the_app_name_one_tokenizer(sources, capsys, name):
    from viewer.ui.store import RolloutStore

    src, want = sources[name]
    answers = {
        "summary": _json(capsys, ["summary", str(src), "--json"])["tokenizer"],
        "drift": _json(capsys, ["drift", str(src), "--json", "--quiet"])["tokenizer"],
        "compare": _json(capsys, ["compare", str(src), str(src), "--json"])["tokenizers"]["a"],
        "app": RolloutStore(Settings()).open(src, "").choice.name,
    }
    assert answers == dict.fromkeys(answers, want)


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_rescore_names_the_same_tokenizer(sources, capsys, name):
    from test_rescore_cli import _need

    _need("tiny-qwen3")
    src, want = sources[name]
    doc = _json(capsys, ["rescore", str(src), "--model", "tiny-qwen3", "--dtype", "float32", "--json"])
    assert doc["tokenizer"] == want


def test_an_override_wins_everywhere(sources, capsys):
    """Rule 1: ``--tokenizer`` beats the folder's own tokenizer for every front end."""
    from viewer.ui.store import RolloutStore

    src, _ = sources["own-tokenizer"]
    q = "qwen3"
    assert _json(capsys, ["summary", str(src), "--json", "--tokenizer", q])["tokenizer"] == q
    assert _json(capsys, ["drift", str(src), "--json", "--quiet", "--tokenizer", q])["tokenizer"] == q
    assert _json(capsys, ["compare", str(src), str(src), "--json", "--tokenizer", q])["tokenizers"] == {"a": q, "b": q}
    assert RolloutStore(Settings()).open(src, q).choice.name == q
