"""Everything the Drift screen shows for one selected turn."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from viewer.drift.checks import prefix_audit, roundtrip, template_check
from viewer.drift.repro import repro
from viewer.drift.rows import TurnVerdict
from viewer.drift.trainer import TrainerRows, TrainerSpec, choose_spec, trainer_rows
from viewer.drift.values import PrefixCheck, RoundTrip, TemplateCheck
from viewer.rollout import Rollout, Turn

__all__ = ["TurnReport", "turn_report"]


@dataclass
class TurnReport:
    """All drift checks for one turn of a rollout, plus the rollout's trainer rows.

    ``prev`` is the agent turn before it (None for the first, or a bookkeeping turn,
    which the prefix audit does not chain). ``trainer`` holds the rows the named trainer
    builds (:func:`viewer.drift.trainer.trainer_rows`); ``verdict`` this turn's entry (None
    when the trainer leaves the turn out: ``trainer.excluded_reason``).
    ``repros`` holds one :func:`repro` document per drifted check (needs a tokenizer).
    """

    rollout: str
    turn: Turn
    prev: Turn | None
    tokenizer: str | None
    roundtrip: RoundTrip
    template: TemplateCheck
    prefix: PrefixCheck
    trainer: TrainerRows
    verdict: TurnVerdict | None
    is_agent: bool = True

    @property
    def drifted(self) -> bool:
        return (self.roundtrip.equal is False or self.template.equal is False
                or self.prefix.status == "broken")

    def repros(self, tok) -> dict[str, dict[str, Any]]:
        """``{"roundtrip"|"template"|"prefix": repro document}`` for each check that drifted."""
        if tok is None:
            return {}
        out: dict[str, dict[str, Any]] = {}
        if self.roundtrip.equal is False:
            out["roundtrip"] = repro(self.roundtrip, tok, turn=self.turn, rollout=self.rollout)
        if self.template.equal is False:
            out["template"] = repro(self.template, tok, turn=self.turn, rollout=self.rollout)
        if self.prefix.status == "broken":
            out["prefix"] = repro(self.prefix, tok, turn=self.turn, prev=self.prev, rollout=self.rollout)
        return out


def turn_report(rollout: Rollout, index: int, tok, *, plain: bool = True, tokenizer_name: str | None = None,
                spec: TrainerSpec | None = None) -> TurnReport:
    """Run the three checks on turn ``index`` (KeyError if absent) and build the trainer's rows.

    ``spec`` names the trainer (default: what the rollout supports, :func:`choose_spec`);
    ``tokenizer_name`` labels the tokenizer (default: its ``name_or_path``)."""
    turn = rollout.turn(index)
    agent = rollout.agent_turns
    prev = None
    if turn.kind == "agent":
        pos = next(i for i, t in enumerate(agent) if t.index == turn.index)
        prev = agent[pos - 1] if pos > 0 else None
    tr = trainer_rows(rollout, spec or choose_spec(rollout), tok)
    name = None if tok is None else (tokenizer_name or getattr(tok, "name_or_path", None) or type(tok).__name__)
    return TurnReport(rollout=rollout.source, turn=turn, prev=prev, tokenizer=name,
                      roundtrip=roundtrip(turn, tok), template=template_check(turn, tok, plain=plain),
                      prefix=prefix_audit(prev, turn, tok) if turn.kind == "agent" else
                      PrefixCheck(status="first", next_len=len(turn.prompt_ids),
                                  unchecked="bookkeeping call: not part of the agent's conversation"),
                      trainer=tr, verdict=tr.verdict(turn.index), is_agent=turn.kind == "agent")
