"""Row stitching (CLEAN / REALIGN / FORK) with matched, drift, lost gradient and provenance,
all expectations derived by hand from how each case is built (real Qwen3 tokenizer +
template). That the rows equal TRL's own is proven in test_trainer_oracle.py."""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _drift_cases import IM_END, SYSTEM, TOOLS, USER, clean_conversation, enc, noncanonical, turn  # noqa: E402

from viewer.drift.rows import TrainerTurn, stitch  # noqa: E402
from viewer.tokenizer import render_prompt_ids  # noqa: E402


def build_rows(turns, fork_threshold_tokens=1024):
    """Stitch test turns as TRL 1.16 does: an untrained turn's output carries a mask of zeros."""
    return stitch([TrainerTurn(t.index, t.prompt_ids, t.output_ids, [x if x is not None else 0.0 for x in t.logprobs]
                               or [0.0] * len(t.output_ids),
                               None if t.trained else [0] * len(t.output_ids)) for t in turns],
                  fork_threshold=fork_threshold_tokens, validate=True)


def test_clean_rows(qwen3):
    ts = clean_conversation(qwen3)
    rows = build_rows(ts)
    assert [v.verdict for v in rows.verdicts] == ["FIRST", "CLEAN", "CLEAN"]
    (row,) = rows.rows
    assert row.input_ids == ts[2].prompt_ids + ts[2].output_ids
    for a, v in zip(ts, rows.verdicts[1:]):
        assert v.matched == len(a.prompt_ids) + len(a.output_ids) and v.drift == 0
    assert rows.tokens_losing_gradient == 0
    assert sum(row.completion_mask) == sum(len(t.output_ids) for t in ts) == rows.kept_trained_tokens
    # masked positions are exactly the outputs, with their logprobs
    for s in row.spans:
        assert set(row.completion_mask[s.start:s.end]) == ({1} if s.part == "output" else {0})
    assert [(s.turn, s.part) for s in row.spans] == [(0, "prompt"), (0, "output"), (1, "prompt"),
                                                     (1, "output"), (2, "prompt"), (2, "output")]
    assert row.old_log_probs[row.spans[1].start] == -0.25
    json.dumps(rows.to_dict())


def _realign_case(qwen3):
    msgs = [SYSTEM, USER]
    p1 = render_prompt_ids(qwen3, msgs, tools=TOOLS)
    head = enc(qwen3, "The")
    o1 = head + noncanonical(qwen3, " function") + enc(qwen3, " works.") + [IM_END]
    p2 = render_prompt_ids(qwen3, msgs + [{"role": "assistant", "content": "The function works."},
                                          {"role": "user", "content": "ok"}], tools=TOOLS)
    o2 = enc(qwen3, "Fine.") + [IM_END]
    return turn(0, p1, o1), turn(1, p2, o2), len(head)


def test_realign_loses_gradient(qwen3):
    t1, t2, j = _realign_case(qwen3)
    rows = build_rows([t1, t2])
    v = rows.verdicts[1]
    # the non-canonical split sits at output position j: matched = |p1| + j, drift = |o1| - j
    assert v.verdict == "REALIGN" and v.matched == len(t1.prompt_ids) + j
    assert v.drift == len(t1.output_ids) - j
    assert v.tokens_losing_gradient == len(t1.output_ids) - j and v.lost_from_turn == 0
    assert rows.verdicts[0].own_tokens_lost == len(t1.output_ids) - j
    assert rows.verdicts[0].kept_trained == j
    (row,) = rows.rows
    assert row.input_ids == t2.prompt_ids + t2.output_ids
    assert sum(row.completion_mask) == j + len(t2.output_ids)
    assert rows.tokens_losing_gradient == len(t1.output_ids) - j


def test_realign_of_untrained_turn_loses_nothing(qwen3):
    t1, t2, j = _realign_case(qwen3)
    t1.trained = False
    rows = build_rows([t1, t2])
    assert rows.verdicts[1].verdict == "REALIGN" and rows.verdicts[1].tokens_losing_gradient == 0


def test_fork_on_history_rewrite(qwen3):
    t1 = clean_conversation(qwen3)[0]
    p2 = render_prompt_ids(qwen3, [SYSTEM, {"role": "user", "content": "Summary: listed files."}], tools=TOOLS)
    t2 = turn(1, p2, enc(qwen3, "Next.") + [IM_END])
    rows = build_rows([t1, t2])
    v = rows.verdicts[1]
    k = next(i for i, (a, b) in enumerate(zip(t1.prompt_ids, p2)) if a != b)
    assert v.verdict == "FORK" and v.matched == k and v.drift == len(t1.prompt_ids) + len(t1.output_ids) - k
    assert v.tokens_losing_gradient == 0 and len(rows.rows) == 2 and v.row == 1
    assert rows.rows[0].input_ids == t1.prompt_ids + t1.output_ids and rows.rows[1].input_ids == p2 + t2.output_ids
    # an untrained first row is dropped and its verdict points nowhere
    t1.trained = False
    rows = build_rows([t1, t2])
    assert len(rows.rows) == 1 and len(rows.dropped) == 1 and rows.verdicts[0].row is None
    assert rows.verdicts[1].row == 0


def test_fork_on_large_dropped_think_block(qwen3):
    """A dropped reasoning block of ≥ 1024 tokens forks; a short one realigns."""
    msgs = [USER]
    p1 = render_prompt_ids(qwen3, msgs)
    for words, expect in ((1100, "FORK"), (20, "REALIGN")):
        reasoning = " ".join(["alpha"] * words)
        content = f"<think>\n{reasoning}\n</think>\n\nHello!"
        o1 = enc(qwen3, content) + [IM_END]
        p2 = render_prompt_ids(qwen3, msgs + [{"role": "assistant", "content": content},
                                              {"role": "user", "content": "Go on."}])
        rows = build_rows([turn(0, p1, o1), turn(1, p2, enc(qwen3, "Ok.") + [IM_END])])
        v = rows.verdicts[1]
        # the template drops the think block: divergence at output start, drift = |o1|
        assert v.matched == len(p1) and v.drift == len(o1)
        assert (v.drift >= 1024) == (expect == "FORK") and v.verdict == expect
        lost = 0 if expect == "FORK" else len(o1)
        assert v.tokens_losing_gradient == lost
        assert len(rows.rows) == (2 if expect == "FORK" else 1)
        assert rows.rows[0].trained_tokens == (len(o1) if expect == "FORK" else len(enc(qwen3, "Ok.")) + 1)


def test_threshold_and_tally(qwen3):
    t1, t2, j = _realign_case(qwen3)
    rows = build_rows([t1, t2], fork_threshold_tokens=2)  # drift ≥ 2 now forks
    assert rows.verdicts[1].verdict == "FORK" and rows.tokens_losing_gradient == 0
    d = len(t1.output_ids) - j
    assert rows.tally.to_dict() == {"clean": 0, "realign": 0, "fork": 1, "transitions": 1, "drift_tokens": d,
                                    "drift_max": d}
    rows = build_rows([t1, t2])
    assert rows.tally.realign == 1 and rows.tally.fork == 0 and rows.forked_rows == 0


def test_per_token_mask_and_validation(qwen3):
    """A per-token output mask (TRL 1.16) trains only its 1s; bad lengths fail with TRL's message."""
    t1, t2, j = _realign_case(qwen3)
    m = [1, 0] * (len(t2.output_ids) // 2) + [1] * (len(t2.output_ids) % 2)
    rows = stitch([TrainerTurn(1, t2.prompt_ids, t2.output_ids, [-0.5] * len(t2.output_ids), m)], validate=True)
    (row,) = rows.rows
    assert row.completion_mask == [0] * len(t2.prompt_ids) + m and row.trained_tokens == sum(m)
    import pytest

    with pytest.raises(ValueError, match="loss mask must contain one entry per token"):
        stitch([TrainerTurn(1, t2.prompt_ids, t2.output_ids, [-0.5] * len(t2.output_ids), m[:-1])], validate=True)
    with pytest.raises(ValueError, match="logprobs must contain one entry per token"):
        stitch([TrainerTurn(1, t2.prompt_ids, t2.output_ids, [-0.5], None)], validate=True)
    # TRL 1.14 (no validation): an empty logprob list becomes zeros
    rows = stitch([TrainerTurn(1, t2.prompt_ids, t2.output_ids, [], None)])
    assert rows.rows[0].old_log_probs == [0.0] * (len(t2.prompt_ids) + len(t2.output_ids))
