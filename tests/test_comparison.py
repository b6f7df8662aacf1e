"""viewer/comparison.py: turn pairing and first divergences, against ids read straight from the files.

Expected values never come from our readers or the comparison itself: the raw ``trace.json``
records give the id lists (a few lines of plain Python below), the real Qwen3 tokenizer gives
texts, and hand-edited captures put a difference at a known position.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from captures import TOOLS, write_capture

from viewer.comparison import compare, pair_turns
from viewer.sources import load_source
from viewer.tokenizer import token_table

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_data"


def raw_sequences(folder: Path) -> list[tuple[str, list[int], int]]:
    """(group rank, prompt+output ids, prompt length) per record of a capture's trace.json, ranked
    by our pairing rule: the k-th "main" call pairs with the k-th, other kinds by their own rank."""
    seen: dict[str, int] = {}
    out = []
    for rec in json.loads((folder / "trace.json").read_text()):
        group = "agent" if rec["kind"] == "main" else rec["kind"]
        seen[group] = seen.get(group, 0) + 1
        prompt = rec.get("prompt_token_ids") or []
        out.append((f"{group} {seen[group]}", prompt + rec["completion_token_ids"], len(prompt)))
    return out


def first_difference(a: list[int], b: list[int]) -> int | None:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def _compare(a: Path, b: Path, qwen3=None, tok_b=None):
    ra, rb = load_source(a), load_source(b)
    tb = tok_b if tok_b is not None else qwen3
    return compare(ra, rb, tok_a=qwen3, tok_b=tb, table_a=token_table(qwen3) if qwen3 else None,
                   table_b=token_table(tb) if tb else None)


def test_a_rollout_compared_with_itself_has_no_divergence(qwen3):
    res = _compare(SAMPLES / "qwen3-tiny", SAMPLES / "qwen3-tiny", qwen3)
    raw = raw_sequences(SAMPLES / "qwen3-tiny")
    assert res.identical and res.first_diverging is None
    assert [p.label for p in res.pairs] == [g for g, _, _ in raw]
    assert [p.common_prefix for p in res.pairs] == [len(ids) for _, ids, _ in raw]
    assert all(p.first_divergence is None for p in res.pairs)


@pytest.mark.parametrize("other", ["smollm2", "different-task"])
def test_first_divergence_matches_the_raw_id_lists(qwen3, tmp_path, other):
    """qwen3-tiny against the SmolLM2 sample (same task, another model and vocabulary) and against
    a capture of another task made with the real Qwen3 tokenizer."""
    if other == "smollm2":
        b = SAMPLES / "smollm2"
        from viewer.tokenizer import load_local

        tok_b = load_local(str(b / "tokenizer"))
    else:
        b = write_capture(tmp_path / "other", "Write solution.py that prints the sum of two integers.",
                          "I will write the program now.")
        tok_b = qwen3
    res = _compare(SAMPLES / "qwen3-tiny", b, qwen3, tok_b)
    ra, rb = raw_sequences(SAMPLES / "qwen3-tiny"), {g: (ids, p) for g, ids, p in raw_sequences(b)}
    assert not res.identical
    by_label = {p.label: p for p in res.pairs}
    assert set(by_label) == {g for g, _, _ in ra} | set(rb)
    for group, ids, plen in ra:
        pair = by_label[group]
        if group not in rb:
            assert pair.b is None and pair.first_divergence.position == 0 and pair.first_divergence.b_id is None
            continue
        ids_b, plen_b = rb[group]
        k = first_difference(ids, ids_b)
        d = pair.first_divergence
        assert pair.common_prefix == k and d.position == k
        assert (d.a_id, d.b_id) == (ids[k] if k < len(ids) else None, ids_b[k] if k < len(ids_b) else None)
        assert d.part == ("output" if k >= plen and k >= plen_b else "prompt")
        assert d.a_text == qwen3.decode([ids[k]])
        assert d.b_text == tok_b.decode([ids_b[k]])
    if other == "smollm2":
        assert any("different tokenizers" in n for n in res.notes)


def _edit_output(folder: Path, pos: int, new_id: int) -> int:
    """Replace sampled id ``pos`` of the first record (ids, token strings and logprob entry alike)."""
    path = folder / "trace.json"
    recs = json.loads(path.read_text())
    rec = recs[0]
    old = rec["completion_token_ids"][pos]
    rec["completion_token_ids"][pos] = new_id
    rec["completion_tokens"][pos] = f"token_id:{new_id}"
    rec["logprobs"][pos]["token"] = f"token_id:{new_id}"
    rec["logprobs"][pos]["top_logprobs"][0]["token"] = f"token_id:{new_id}"
    path.write_text(json.dumps(recs))
    return old


def test_a_handmade_pair_differs_at_the_known_output_position(qwen3, tmp_path):
    a = write_capture(tmp_path / "a", "List the files.", "I will list the files in this folder first.")
    b = tmp_path / "b"
    shutil.copytree(a, b)
    new = qwen3.convert_tokens_to_ids("Ġbanana")
    old = _edit_output(b, 5, new)
    assert old != new
    plen = len(json.loads((a / "trace.json").read_text())[0]["prompt_token_ids"])
    res = _compare(a, b, qwen3)
    (pair,) = res.pairs
    d = pair.first_divergence
    assert (pair.common_prefix, d.position, d.part) == (plen + 5, plen + 5, "output")
    assert (d.a_id, d.b_id) == (old, new)
    assert (d.a_text, d.b_text) == (qwen3.decode([old]), " banana")
    # and the reverse direction names the same place with the sides swapped
    back = _compare(b, a, qwen3).pairs[0].first_divergence
    assert (back.position, back.a_id, back.b_id) == (plen + 5, new, old)


def test_prompts_without_ids_are_rendered_as_the_trainer_renders_them(qwen3, tmp_path):
    """A trace without prompt_token_ids (the seed interception proxy's shape): the prompt is what
    ``apply_chat_template(messages, tools=..., add_generation_prompt=True)`` gives, per transformers."""
    a = write_capture(tmp_path / "a", "List the files.", "Listing them.")
    b = tmp_path / "b"
    shutil.copytree(a, b)
    recs = json.loads((b / "trace.json").read_text())
    del recs[0]["prompt_token_ids"]
    (b / "trace.json").write_text(json.dumps(recs))
    want = qwen3.apply_chat_template(recs[0]["request"]["messages"], tools=TOOLS, add_generation_prompt=True,
                                     tokenize=True, return_dict=False)
    res = _compare(a, b, qwen3)
    (pair,) = res.pairs
    assert pair.b.prompt_source == "rerender" and list(pair.b.prompt_ids) == list(want)
    engine = json.loads((a / "trace.json").read_text())[0]["prompt_token_ids"]
    k = first_difference(engine, list(want))
    assert pair.common_prefix == (len(engine) + len(recs[0]["completion_token_ids"]) if k is None else k)
    # without a tokenizer nothing can render it: said so, and only outputs are compared
    res = compare(load_source(a), load_source(b))
    assert any("no prompt ids" in n for n in res.notes)


def test_pairing_by_rank_keeps_unpaired_calls():
    from viewer.rollout import Rollout, Turn

    def ro(*kinds):
        turns = [Turn(index=i, call=i, kind="agent" if k == "main" else "bookkeeping", role=k,
                      prompt_ids=[1, 2], output_ids=[i]) for i, k in enumerate(kinds)]
        return Rollout(source="x", format="t", turns=turns)

    got = [(lbl, a.index if a else None, b.index if b else None)
           for lbl, a, b in pair_turns(ro("title", "main", "main", "compaction", "main"),
                                       ro("main", "title", "main"))]
    assert got == [("title 1", 0, 1), ("agent 1", 1, 0), ("agent 2", 2, 2), ("compaction 1", 3, None),
                   ("agent 3", 4, None)]
