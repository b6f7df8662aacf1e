"""Where one turn drifted, as position ranges of its own token view (prompt + output).

The presenter's drift highlights (``d``) draw these. Each check of a
:class:`~viewer.drift.report.TurnReport` says where it broke in its own coordinates; this
module maps them onto the turn's positions and nothing else:

* round trip: every changed span of sampled ids, ``[prompt_len + start, prompt_len + end)``;
* prompt re-render: the first prompt token the vLLM-style re-render gets wrong;
* prefix audit: the first prompt token that does not extend the previous turn
  (the common prefix of held and next prompt is an index into this prompt).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = ["Mark", "drift_marks"]


@dataclass(frozen=True)
class Mark:
    start: int  # absolute position over prompt + output, inclusive
    end: int  # exclusive
    check: str  # roundtrip | template | prefix
    cause: str | None

    def to_dict(self) -> dict:
        return asdict(self)


def drift_marks(report) -> list[Mark]:
    """The drifted positions of ``report.turn`` (a :class:`TurnReport`), in position order."""
    turn = report.turn
    p = len(turn.prompt_ids)
    marks: list[Mark] = []
    rt = report.roundtrip
    if rt.equal is False:
        for s in rt.changed_spans:
            marks.append(Mark(p + s.start, p + max(s.end, s.start + 1), "roundtrip", s.cause))
    tc = report.template
    if tc.equal is False and tc.first_mismatch is not None and tc.first_mismatch < p:
        marks.append(Mark(tc.first_mismatch, tc.first_mismatch + 1, "template", tc.cause))
    pc = report.prefix
    if pc.status == "broken" and pc.divergence is not None and pc.divergence < p:
        marks.append(Mark(pc.divergence, pc.divergence + 1, "prefix", pc.cause))
    return sorted(marks, key=lambda m: (m.start, m.end, m.check))
