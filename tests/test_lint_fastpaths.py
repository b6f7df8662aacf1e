"""Lint's fast paths find what the plain paths find (the search index lints every rollout it builds from).

* The raw-record rules decode a trace lean (only the keys they read, typed): a small array whose records all fit
  in one call, else record by record, falling back to the generic decode for a record of another shape. Each
  way, every hit is where the raw JSON says.
* The vocabulary size (RI012) is shared between capture folders whose own ``tokenizer/`` holds the same files
  byte for byte, and only between those: expected sizes come from the ``tokenizers`` package reading the files.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from viewer.config import SAMPLE_DIR, Settings
from viewer.lint import VocabCache, lint_source
from viewer.sources import load_source

SMOL = SAMPLE_DIR / "smollm2"


@pytest.mark.parametrize("odd", [False, True], ids=["one-call", "lean-and-generic"])
def test_lean_and_generic_records_hit_alike(tmp_path, odd):
    """smollm2 sample, turns 2 and 3: the logprob entries from position 3 on moved one place later. ``odd``: in
    turn 3 entry 1 is also replaced by null, a shape the lean types refuse (the trace is then read record by
    record, that record decoded generically)."""
    cap = tmp_path / "cap"
    shutil.copytree(SMOL, cap)
    (cap / "turns.json").unlink(missing_ok=True)
    recs = json.loads((cap / "trace.json").read_text())
    want = {}
    for t in (2, 3):
        ents, ids = recs[t]["logprobs"], recs[t]["completion_token_ids"]
        assert isinstance(ents, list)
        ents = ents[:3] + [dict(ents[2])] + ents[3:len(ids) - 1]
        if t == 3 and odd:
            ents[1] = None
        recs[t]["logprobs"] = ents
        p = len(recs[t]["prompt_token_ids"])
        want[t] = [p + j for j, e in enumerate(ents) if e is not None and e["token"] != f"token_id:{ids[j]}"]
    (cap / "trace.json").write_text(json.dumps(recs))
    hits = [h for h in lint_source(cap, Settings(), select=("RI017",))["hits"] if "tokens name other ids" in h["message"]]
    assert want[2] and want[3]
    assert {h["turn"]: h["tokens"] for h in hits} == want


def _vocab(folder: Path) -> int:
    return Tokenizer.from_file(str(folder / "tokenizer" / "tokenizer.json")).get_vocab_size(with_added_tokens=True)


def test_vocabulary_shared_only_between_identical_tokenizer_folders(tmp_path):
    """Three copies of the smollm2 capture (its own tokenizer/); the third's tokenizer.json gains one added token."""
    folders = []
    for name in ("a", "b", "c"):
        shutil.copytree(SMOL, tmp_path / name)
        folders.append(tmp_path / name)
    tj = json.loads((folders[2] / "tokenizer" / "tokenizer.json").read_text())
    tj["added_tokens"].append({"id": _vocab(folders[2]), "content": "<extra_token>", "single_word": False,
                               "lstrip": False, "rstrip": False, "normalized": False, "special": True})
    (folders[2] / "tokenizer" / "tokenizer.json").write_text(json.dumps(tj))
    cache = VocabCache(Settings())
    got = [cache(load_source(str(f), Settings()), f) for f in folders]
    assert got == [_vocab(f) for f in folders] and got[2] == got[0] + 1
