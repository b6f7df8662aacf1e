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


def test_first_divergence_matches_the_raw_id_lists(qwen3, tmp_path):
    """qwen3-tiny against a capture of another task made with the real Qwen3 tokenizer (the same
    vocabulary: ids are compared, exactly as before text alignment existed)."""
    b = write_capture(tmp_path / "other", "Write solution.py that prints the sum of two integers.",
                      "I will write the program now.")
    tok_b = qwen3
    res = _compare(SAMPLES / "qwen3-tiny", b, qwen3, tok_b)
    assert res.alignment == "ids" and all(p.alignment == "ids" and p.text is None for p in res.pairs)
    assert not any("different tokenizers" in n for n in res.notes)
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


# --- across tokenizers: aligned by text -------------------------------------------------------
# Expected values come from the plain strings (os.path.commonprefix on their UTF-8 bytes) and from
# each tokenizer's own offsets (``return_offsets_mapping``) or decode, never from viewer.text_align.


@pytest.fixture(scope="module")
def smollm2():
    from viewer.tokenizer import load_local

    return load_local(str(SAMPLES / "smollm2" / "tokenizer"))


def _encode(tok, text: str):
    enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
    return list(enc["input_ids"]), list(enc["offset_mapping"])


def _token_at_byte(tok, prompt: str, output: str, byte: int) -> int:
    """The position (over prompt + output ids) of the token whose characters hold UTF-8 byte
    ``byte`` of ``prompt + output``, by the tokenizer's own character offsets."""
    text = prompt + output
    char = next(c for c in range(len(text)) if len(text[: c + 1].encode("utf-8")) > byte)
    base, part, ids_before = (0, prompt, 0) if char < len(prompt) else (len(prompt), output, len(_encode(tok, prompt)[0]))
    _, offsets = _encode(tok, part)
    return ids_before + next(i for i, (s, e) in enumerate(offsets) if s <= char - base < e)


def _handmade(tok, prompt: str, output: str, source: str):
    from viewer.rollout import Rollout, Turn

    turn = Turn(index=0, call=0, prompt_ids=_encode(tok, prompt)[0], prompt_source="engine",
                output_ids=_encode(tok, output)[0])
    return Rollout(source=source, format="hand", turns=[turn])


PROMPT = "Résumé of the naïve café — 東京: list the files, then "


@pytest.mark.parametrize("out_a,out_b", [
    ("print the total of both columns.", "print the sum of both columns."),  # diverges in the output
    ("print it.", "print it. Then stop."),  # A's text is a prefix of B's: A has no token there
])
def test_different_tokenizers_are_aligned_by_text(qwen3, smollm2, out_a, out_b):
    a, b = _handmade(qwen3, PROMPT, out_a, "A"), _handmade(smollm2, PROMPT, out_b, "B")
    bytes_a, bytes_b = (PROMPT + out_a).encode("utf-8"), (PROMPT + out_b).encode("utf-8")
    k = len(__import__("os").path.commonprefix([bytes_a, bytes_b]))
    assert k > len(PROMPT.encode("utf-8")) > len(PROMPT)  # non-ASCII before the divergence: bytes ≠ chars
    res = compare(a, b, tok_a=qwen3, tok_b=smollm2, table_a=token_table(qwen3), table_b=token_table(smollm2))
    (pair,) = res.pairs
    ids_a = list(a.turns[0].prompt_ids) + list(a.turns[0].output_ids)
    ids_b = list(b.turns[0].prompt_ids) + list(b.turns[0].output_ids)
    pa = _token_at_byte(qwen3, PROMPT, out_a, k) if k < len(bytes_a) else len(ids_a)
    pb = _token_at_byte(smollm2, PROMPT, out_b, k) if k < len(bytes_b) else len(ids_b)
    d = pair.first_divergence
    assert pair.common_prefix == d.position == pa  # A's token at the first differing byte, not 0
    assert res.alignment == pair.alignment == "text" and not res.identical
    al = pair.text
    assert al.common_bytes == al.divergence_byte == k
    assert (al.a_bytes, al.b_bytes) == (len(bytes_a), len(bytes_b))
    assert (al.a_position, al.b_position) == (pa, pb)
    assert d.part == "output"
    assert d.a_id == (ids_a[pa] if pa < len(ids_a) else None) and d.b_id == (ids_b[pb] if pb < len(ids_b) else None)
    if d.a_id is not None:
        assert d.a_text == qwen3.decode([d.a_id])
    assert d.b_text == smollm2.decode([d.b_id])
    # the tokens before the divergence spell exactly bytes that lie inside the common text
    assert len(qwen3.decode(ids_a[:pa]).encode("utf-8")) <= k and len(smollm2.decode(ids_b[:pb]).encode("utf-8")) <= k
    # both runs show the diverging token (or end there) with their neighbours, in order
    assert [t.position for t in al.b_run] == list(range(max(0, pb - 3), min(len(ids_b), pb + 4)))
    assert [t.id for t in al.a_run] == ids_a[max(0, pa - 3): pa + 4]
    doc = pair.to_dict()
    assert doc["alignment"] == "text" and doc["text"]["divergence_byte"] == k
    assert doc["text"]["b_token"]["position"] == pb


def sample_text_divergence(tok_a, tok_b, rec_a: dict, rec_b: dict) -> tuple[int, int, int] | None:
    """(first differing byte, A's token there, B's token there) of two trace.json records, from
    each tokenizer's own decode (the first token whose prefix decodes past that byte); None when equal."""
    def text(tok, ids):
        return tok.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False).encode("utf-8")

    ids_a, ids_b = (r["prompt_token_ids"] + r["completion_token_ids"] for r in (rec_a, rec_b))
    ta, tb = text(tok_a, ids_a), text(tok_b, ids_b)
    if ta == tb:
        return None
    k = len(__import__("os").path.commonprefix([ta, tb]))

    def at(tok, ids):
        lo, hi = 0, len(ids)  # smallest i with len(text(ids[:i + 1])) > k
        while lo < hi:
            mid = (lo + hi) // 2
            if len(text(tok, ids[:mid + 1])) > k:
                hi = mid
            else:
                lo = mid + 1
        return lo

    return k, at(tok_a, ids_a), at(tok_b, ids_b)


def test_the_two_samples_diverge_where_their_texts_do(qwen3, smollm2):
    """qwen3-tiny vs smollm2 (same task, another model and vocabulary): no longer "diverges at 0"
    everywhere, but at the first byte where the two records' decoded texts differ."""
    res = _compare(SAMPLES / "qwen3-tiny", SAMPLES / "smollm2", qwen3, smollm2)
    recs_a, recs_b = (json.loads((SAMPLES / s / "trace.json").read_text()) for s in ("qwen3-tiny", "smollm2"))
    assert len(res.pairs) == len(recs_a) == len(recs_b)
    for pair, ra, rb in zip(res.pairs, recs_a, recs_b):
        ids_a, ids_b = (r["prompt_token_ids"] + r["completion_token_ids"] for r in (ra, rb))
        ta = qwen3.decode(ids_a, skip_special_tokens=False, clean_up_tokenization_spaces=False).encode("utf-8")
        tb = smollm2.decode(ids_b, skip_special_tokens=False, clean_up_tokenization_spaces=False).encode("utf-8")
        k = len(__import__("os").path.commonprefix([ta, tb]))
        if ta == tb:  # the same text, tokenized two ways: no divergence
            assert pair.first_divergence is None
            assert pair.text.common_bytes == k
            continue
        d = pair.first_divergence
        assert d.position > 0
        assert pair.text.divergence_byte == pair.text.common_bytes == k > 0
        # the diverging token on each side is the first whose prefix decodes past byte k
        for ids, tok, pos, tid in ((ids_a, qwen3, pair.text.a_position, d.a_id),
                                   (ids_b, smollm2, pair.text.b_position, d.b_id)):
            assert len(tok.decode(ids[:pos], skip_special_tokens=False).encode("utf-8")) <= k
            assert len(tok.decode(ids[:pos + 1], skip_special_tokens=False).encode("utf-8")) > k
            assert tid == ids[pos]
        assert sample_text_divergence(qwen3, smollm2, ra, rb) == (k, pair.text.a_position, pair.text.b_position)
    assert res.alignment == "text" and any("aligned by text" in n for n in res.notes)


def test_the_same_vocabulary_under_another_name_compares_ids(qwen3, tmp_path):
    """A capture's own copy of the Qwen3 tokenizer (another name, identical vocabulary) is the
    same tokenizer: ids are compared, with the same result as one tokenizer on both sides."""
    from viewer.tokenizer import load_local, qwen3_dir

    copy = tmp_path / "my-qwen3"
    shutil.copytree(qwen3_dir(), copy)
    other = load_local(str(copy))
    assert other.name_or_path != qwen3.name_or_path and other is not qwen3
    b = write_capture(tmp_path / "other", "Write solution.py that prints the sum of two integers.",
                      "I will write the program now.")
    ra, rb = load_source(SAMPLES / "qwen3-tiny"), load_source(b)
    same = compare(ra, rb, tok_a=qwen3, tok_b=qwen3, table_a=token_table(qwen3), table_b=token_table(qwen3))
    res = compare(ra, rb, tok_a=qwen3, tok_b=other, table_a=token_table(qwen3), table_b=token_table(other))
    assert res.notes == same.notes and not any("different tokenizers" in n for n in res.notes)
    assert [p.to_dict() for p in res.pairs] == [p.to_dict() for p in same.pairs]
    assert res.alignment == "ids"
    assert all(p.to_dict()["alignment"] == "ids" and p.to_dict()["text"] is None for p in res.pairs)
