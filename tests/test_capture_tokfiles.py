"""A capture ships the tokenizer it was sampled with (viewer/capture/tokfiles.py), and the viewer
checks it against the sha256s the capture recorded. Expected hashes come from hashlib on the
source files; expected notes from the summary fields they describe."""
from __future__ import annotations

import hashlib
import json
import shutil

from viewer.capture.artefacts import outcome_notes
from viewer.capture.tokfiles import locate, verify, write
from viewer.config import SAMPLE_DIR
from viewer.tokenizer import resolve_tokenizer

SMOL_TOK = SAMPLE_DIR / "smollm2" / "tokenizer"


def test_write_copies_the_files_and_records_their_sha256(tmp_path):
    src, where = locate("", None, str(SMOL_TOK))
    assert src == SMOL_TOK.resolve() and where.startswith("model folder")
    rec = write(tmp_path, src, where)
    names = sorted(p.name for p in SMOL_TOK.iterdir())
    assert sorted(rec["files"]) == names and rec["source"] == where
    for n in names:
        assert rec["files"][n] == hashlib.sha256((SMOL_TOK / n).read_bytes()).hexdigest()
        assert (tmp_path / "tokenizer" / n).read_bytes() == (SMOL_TOK / n).read_bytes()


def test_qwen_named_models_ship_the_bundled_qwen3_files():
    from viewer.tokenizer import qwen3_dir

    src, where = locate("", None, "Qwen/Qwen3-4B-Instruct-2507")
    assert src == qwen3_dir() and "bundled Qwen3" in where
    src, where = locate("", None, "some-unknown-model")
    assert src is None and "some-unknown-model" in where


def test_viewer_checks_the_recorded_hashes(tmp_path):
    cap = tmp_path / "cap"
    shutil.copytree(SAMPLE_DIR / "smollm2", cap, ignore=shutil.ignore_patterns("tokenizer"))
    rec = write(cap, SMOL_TOK, "model folder (test)")
    summ = json.loads((cap / "summary.json").read_text())
    (cap / "summary.json").write_text(json.dumps({**summ, "tokenizer": rec}))
    assert verify(cap) is None
    choice = resolve_tokenizer("smollm2", capture_dir=cap)
    assert choice.source == "capture-folder" and "Warning" not in choice.message
    cfg = cap / "tokenizer" / "tokenizer_config.json"
    cfg.write_text(cfg.read_text().replace("}", ', "edited": true}', 1) if cfg.read_text().startswith("{") else "{}")
    msg = verify(cap)
    assert msg == ("the capture's tokenizer files differ from what it recorded when it was made: "
                   "tokenizer_config.json changed")
    assert "Warning: the capture's tokenizer files differ" in resolve_tokenizer("smollm2", capture_dir=cap).message


def test_outcome_notes_say_what_happened():
    s = {"length_stops": [2, 3], "agent_turns": 2, "tool_counts": {}, "reward_status": "no solution.py written",
         "derivation_problems": ["call 2: no engine prompt ids, and no tokenizer to render them (x)"],
         "tokenizer": {"source": None, "problem": "no tokenizer found for m"}}
    assert outcome_notes(s, 64) == [
        "call 2 stopped at the output limit (64 tokens) without calling a tool",
        "call 3 stopped at the output limit (64 tokens) without calling a tool",
        "the model never called a tool",
        "no solution.py was written, so no held-out test could pass",
        "turns.json: call 2: no engine prompt ids, and no tokenizer to render them (x)",
        "no tokenizer shipped: no tokenizer found for m",
    ]
    assert outcome_notes({"agent_turns": 3, "tool_counts": {"bash": 2}, "reward_status": "ok"}, 64) == []
