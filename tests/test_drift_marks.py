"""viewer/drift/marks.py: drifted positions of a turn, on hand-built turns with the real Qwen3 tokenizer."""
from __future__ import annotations

from viewer.drift import turn_report
from viewer.drift.marks import drift_marks
from viewer.rollout import Rollout, Turn


def test_round_trip_spans_and_the_prefix_break_land_on_the_turns_own_positions(qwen3):
    letters = [qwen3.convert_tokens_to_ids(c) for c in "hello"]  # "hello" spelled letter by letter
    assert qwen3("hello", add_special_tokens=False)["input_ids"] != letters  # it re-encodes as fewer ids
    word = qwen3(" world", add_special_tokens=False)["input_ids"]
    first = Turn(index=0, call=1, prompt_ids=[151644, 872, 198], prompt_source="engine",
                 output_ids=word, output_source="engine", trained=True)
    # the next prompt holds turn 0's prompt, then something else where its output was: breaks at 3
    second = Turn(index=1, call=2, prompt_ids=[151644, 872, 198, 151657, 198], prompt_source="engine",
                  output_ids=word + letters, output_source="engine", trained=True)
    ro = Rollout(source="hand", format="test", turns=[first, second])
    assert drift_marks(turn_report(ro, 0, qwen3)) == []
    marks = drift_marks(turn_report(ro, 1, qwen3))
    p = len(second.prompt_ids)
    got = [(m.start, m.end, m.check) for m in marks]
    assert got == [(3, 4, "prefix"), (p + len(word), p + len(word) + len(letters), "roundtrip")]
    assert all(m.cause for m in marks)
