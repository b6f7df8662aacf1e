"""One definition of a trained token, read the same way by the token view, the plots, the summary
and the trainer rows (hand-worked expectations; the rule is Turn.loss_mask's docstring)."""
from __future__ import annotations


import pytest

from viewer import render
from viewer.drift import choose_spec, trainer_rows
from viewer.plots import turn_mask
from viewer.rollout import Rollout, Turn
from viewer.tokens import turn_tokens
from tv_payload import expand

# (mask recorded, trained flag, 3 output tokens) -> the per-token loss mask by hand
CASES = [
    ([], True, [1, 1, 1]),          # no mask: the flag decides (an empty mask is not "untrained")
    ([], False, [0, 0, 0]),
    ([0, 1, 0], True, [0, 1, 0]),   # a full-length mask wins, per token
    ([0, 1, 0], False, [0, 1, 0]),
    ([1], False, [0, 0, 0]),        # a mask of another length is not trusted: the flag decides
    ([1], True, [1, 1, 1]),
]


def _turn(mask, trained) -> Turn:
    return Turn(index=0, call=1, trained=trained, prompt_ids=[10, 11], prompt_source="engine",
                output_ids=[20, 21, 22], output_source="engine", logprobs=[-0.5, -1.0, -1.5], mask=list(mask))


@pytest.mark.parametrize("mask,trained,want", CASES)
def test_every_reader_of_the_mask_agrees(mask, trained, want):
    t = _turn(mask, trained)
    assert t.loss_mask == want and t.trained_tokens == sum(want)
    assert turn_mask(t) == want                                          # plots
    ro = Rollout(source="x", format="test", turns=[t])
    assert ro.stats()["trained_tokens"] == sum(want)                     # summary
    payload = expand(render.token_view_payload(t, turn_tokens(t, None),
                                                   render.ViewOptions(low=-2.5, context_tail=512)))
    assert payload["k"][2:] == [1 if m else 2 for m in want]             # token view: 1 trained, 2 not
    tr = trainer_rows(ro, choose_spec(ro, "trl-contract"), None)         # trainer rows (per-token mask)
    if any(want):
        assert tr.rows.rows[0].completion_mask == [0, 0] + want
    else:
        assert tr.rows.rows == [] and len(tr.rows.dropped) == 1         # no trained token: TRL drops the row
