"""End-of-turn tokens are one list (viewer/tokenizer/specials.py), and both users of it see every family's."""
from __future__ import annotations

import re
from pathlib import Path

from viewer.drift.causes import _classify_text
from viewer.sources.derive import end_token_ids

REPO = Path(__file__).resolve().parent.parent


def test_no_other_module_lists_end_of_turn_tokens():
    # a second list once drifted from the first (derive lacked <|endoftext|>, drift lacked <end_of_turn>)
    offenders = []
    for p in (REPO / "viewer").rglob("*.py"):
        if p.name == "specials.py":
            continue
        text = p.read_text()
        if re.search(r"""["']<\|eot_id\|>["']|["']<end_of_turn>["']|["']<\|return\|>["']""", text):
            offenders.append(str(p.relative_to(REPO)))
    assert offenders == []


def test_gemma_end_of_turn_swap_is_an_eos_cause():
    # worked by hand: the texts agree up to the end token, then one says <end_of_turn>, the other <|im_end|>
    a = "answer<end_of_turn>\n<|im_start|>user\nnext question about the same file"
    b = "answer<|im_end|>\n<|im_start|>user\nnext question about the same file"
    cause, evidence = _classify_text(a, b, len("answer<"), ("sampled", "re-rendered"), p0=len("answer"))
    assert cause == "eos_newline", evidence


def test_qwen3_endoftext_ends_a_derived_reply(qwen3):
    ids = end_token_ids(qwen3)
    assert qwen3.convert_tokens_to_ids("<|im_end|>") in ids
    assert qwen3.convert_tokens_to_ids("<|endoftext|>") in ids  # 151643, Qwen3's end-of-text
