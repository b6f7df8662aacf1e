"""The IS view and the token view's IS marks, on a hand-built rescore (values worked by hand)."""
import math

from viewer.render import importance_html, turn_delta
from viewer.rescore.values import RescoreResult, TurnDelta

LN4 = math.log(4)


def _result(choice=None, rows=2):
    # row 0: turn 1, ratios 4, 1, 0.25 (sequence ratio 1); row 1: turn 2, ratio e^2 ≈ 7.39 (one token)
    t1 = TurnDelta(1, 0, "FIRST", "same", None, [0, 1, 2], [-2.0, -1.0, -1.0], [-2.0 + LN4, -1.0, -1.0 - LN4],
                   [10, 11, 12], [5, 6, 7])
    t2 = TurnDelta(2, 1, "FORK", "same", None, [0], [-3.0], [-1.0], [20], [9])
    return RescoreResult("m<x>", "cpu", "float32", 1.0, 0.2, {"mode": "trl-contract"}, [t1, t2], rows=rows,
                         is_choice=choice)


def test_effect_table_has_four_modes_and_trls_metric_names():
    html = importance_html(_result(), "token_truncate", 0.5, 2.0)
    for m in ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask"):
        assert f">{m}</th>" in html
    for name in ("sampling/sampling_logp_difference/mean", "sampling/importance_sampling_ratio/max"):
        assert name in html
    # token_truncate: 3 of 4 trained tokens clipped (4 → 2, 0.25 → 0.5, 7.39 → 2): 75.0 %
    assert "75.0%" in html and "3 clipped" in html
    assert "over 4 trained tokens in 2 sequences" in html


def test_invalid_bounds_are_a_message_not_a_table():
    html = importance_html(_result(), "token_truncate", None, None)
    assert "needs at least one" in html and "<table" not in html
    html = importance_html(_result(), "token_mask", 3.0, 2.0)
    assert "must be less than" in html


def test_turn_delta_marks_clipped_and_zeroed_tokens():
    d = turn_delta(_result(("token_mask", 0.5, 2.0)), 1, 100, 103)
    assert d["is"]["m"] == [None] * 100 + ["z", None, "z"]
    assert d["is"]["r"][100:] == [0.0, 1.0, 0.0] and d["is"]["seq"] is None
    d = turn_delta(_result(("token_truncate", 0.5, 2.0)), 1, 0, 3)
    assert d["is"]["m"] == ["c", None, "c"] and d["is"]["r"] == [2.0, 1.0, 0.5]
    # sequence_mask: row 0's sequence ratio is 4·1·¼ = 1, kept; row 1's e² > 2, the whole row zeroed
    assert turn_delta(_result(("sequence_mask", None, 2.0)), 1, 0, 3)["is"]["m"] == [None] * 3
    d2 = turn_delta(_result(("sequence_mask", None, 2.0)), 2, 0, 1)
    assert d2["is"]["m"] == ["z"] and d2["is"]["seq"] == ("zeroed", 0.0)
    assert "is" not in turn_delta(_result(None), 1, 0, 3)


def test_hostile_model_name_is_escaped():
    from viewer.render import rescore_summary_html

    assert "m<x>" not in rescore_summary_html(_result())
