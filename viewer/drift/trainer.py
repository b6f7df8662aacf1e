"""Which trainer sees the rollout, and what it is fed: the two TRL semantics, named (docs/TRAINER.md).

* ``trl-message`` — TRL 1.14.x. The opencode example's agent turns (bookkeeping calls
  dropped), narrowed by ``train_turn_fn`` (``tool-calls`` = the example's
  ``has_tool_call``; ``all`` = none): the turns it drops are **not in the chain at all**.
  Prompt ids are re-rendered with ``apply_chat_template(request.messages,
  tools=request.tools, add_generation_prompt=True)``; old logprobs are the record's
  ``per_token_logps`` (absent → 0.0); every output token is trained.
* ``trl-contract`` — TRL ≥ 1.15 fed by OpenEnv's capture contract. Every agent turn, the
  engine's prompt ids, the per-token loss mask over the output (:attr:`Turn.loss_mask`),
  TRL 1.16's length checks, and its loop-owning default fork threshold of 0
  (``lossless_capture=True``).

:func:`choose_spec` picks what a source supports when the user does not say (no engine
prompt ids → message mode with ``tool-calls``, as the opencode example runs it) and
records why; :func:`trainer_rows` builds the rows with :func:`viewer.drift.rows.stitch`.
"""
from __future__ import annotations

import threading
import weakref
from array import array
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from viewer.drift.rows import FORK_THRESHOLD_TOKENS, Rows, Tally, TrainerTurn, stitch
from viewer.rollout import Rollout, Turn

__all__ = ["MESSAGE", "CONTRACT", "MODES", "TRAIN_TURNS", "TRL_VERSIONS", "TrainerSpec", "TrainerSpecError", "Excluded",
           "TrainerRows", "check_args", "choose_spec", "message_prompt_ids", "request_messages", "trainer_inputs",
           "trainer_rows"]

MESSAGE, CONTRACT = "trl-message", "trl-contract"
MODES = (MESSAGE, CONTRACT)
TRAIN_TURNS = ("all", "tool-calls")
PER_TOKEN_MASK = "per-token-mask"  # what selects trained tokens in contract mode
TRL_VERSIONS = {MESSAGE: "1.14.0", CONTRACT: "1.16.0"}  # the released versions the tests run as oracles
# fork_threshold_tokens each trainer really runs with: the opencode example passes 1024 to
# TRL 1.14; TRL ≥ 1.15's loop-owning harness defaults to lossless_capture=True, which sets it
# to 0 (every drift forks a new row, so no sampled token loses its gradient).
DEFAULT_FORK_THRESHOLD = {MESSAGE: FORK_THRESHOLD_TOKENS, CONTRACT: 0}


class TrainerSpecError(ValueError):
    """A trainer mode / train-turn rule that does not exist or does not apply."""


@dataclass(frozen=True)
class TrainerSpec:
    """A named trainer semantics. ``auto`` = picked from what the source holds (``reason`` says why)."""

    mode: str = MESSAGE
    train_turns: str = "tool-calls"
    fork_threshold: int = FORK_THRESHOLD_TOKENS  # see DEFAULT_FORK_THRESHOLD
    auto: bool = False
    reason: str = ""

    @property
    def trl_version(self) -> str:
        return TRL_VERSIONS[self.mode]

    @property
    def label(self) -> str:
        rule = f"train turns: {self.train_turns}" if self.mode == MESSAGE else "per-token loss masks"
        return f"{self.mode} (TRL {self.trl_version}, {rule}, fork threshold {self.fork_threshold})"

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "train_turns": self.train_turns, "trl_version": self.trl_version,
                "fork_threshold": self.fork_threshold, "chosen": "auto" if self.auto else "given",
                "reason": self.reason}


@dataclass(frozen=True)
class Excluded:
    """An agent turn the trainer leaves out of the chain, and why."""

    turn: int
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"turn": self.turn, "reason": self.reason}


@dataclass
class TrainerRows:
    """What the named trainer trains on for one rollout. ``error``: why it cannot (TRL would fail too)."""

    spec: TrainerSpec
    rows: Rows | None = None
    excluded: list[Excluded] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str | None = None
    inputs: list[TrainerTurn] = field(default_factory=list)  # what was stitched (re-run by viewer.drift.costs)

    @property
    def tally(self) -> Tally:
        return self.rows.tally if self.rows is not None else Tally()

    def verdict(self, turn: int):
        return self.rows.verdict(turn) if self.rows is not None else None

    def excluded_reason(self, turn: int) -> str | None:
        return next((e.reason for e in self.excluded if e.turn == turn), None)

    def totals(self) -> dict[str, int]:
        r = self.rows
        return {"rows": len(r.rows) if r else 0, "forked_rows": r.forked_rows if r else 0,
                "tokens_losing_gradient": r.tokens_losing_gradient if r else 0,
                "trained_tokens": r.trained_tokens if r else 0,
                "kept_trained_tokens": r.kept_trained_tokens if r else 0}

    def to_dict(self, *, rows: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {**self.spec.to_dict(), "tally": self.tally.to_dict(), **self.totals(),
                               "excluded": [e.to_dict() for e in self.excluded], "notes": list(self.notes),
                               "error": self.error}
        if self.rows is not None:
            d = self.rows.to_dict()
            out["verdicts"] = d["verdicts"]
            out["counts"] = d["counts"]
            if rows:
                out["rows"] = d["rows"]
        return out


def _has_engine_prompts(rollout: Rollout) -> bool:
    agent = rollout.agent_turns
    return bool(agent) and all(t.prompt_source == "engine" and t.prompt_ids for t in agent)


def check_args(mode: str | None = None, train_turns: str | None = None, fork_threshold: int | None = None) -> None:
    """TrainerSpecError when the named trainer, train-turn rule or threshold cannot be used
    (callers check before reading anything: a usage error, not a per-rollout one)."""
    if fork_threshold is not None and int(fork_threshold) < 0:
        raise TrainerSpecError(f"fork threshold must be ≥ 0, got {fork_threshold}")
    if mode is not None and mode not in MODES:
        raise TrainerSpecError(f"unknown trainer {mode!r}: use one of {', '.join(MODES)}")
    if train_turns is not None and train_turns not in TRAIN_TURNS:
        raise TrainerSpecError(f"unknown train-turn rule {train_turns!r}: use one of {', '.join(TRAIN_TURNS)}")
    if mode == CONTRACT and train_turns is not None:
        raise TrainerSpecError("--train-turns applies to trl-message only; trl-contract trains by per-token "
                               "loss masks")


def choose_spec(rollout: Rollout, mode: str | None = None, train_turns: str | None = None,
                fork_threshold: int | None = None) -> TrainerSpec:
    """The spec the user named, or what ``rollout`` supports (and the reason, for UI/CLI/JSON).

    ``fork_threshold`` None = the one the trainer really runs with (:data:`DEFAULT_FORK_THRESHOLD`)."""
    check_args(mode, train_turns, fork_threshold)

    def thr(m: str) -> int:
        return DEFAULT_FORK_THRESHOLD[m] if fork_threshold is None else int(fork_threshold)

    if mode is not None:
        return TrainerSpec(mode, PER_TOKEN_MASK if mode == CONTRACT else (train_turns or "tool-calls"), thr(mode),
                           auto=False, reason="named by the user")
    if train_turns is None and _has_engine_prompts(rollout):
        return TrainerSpec(CONTRACT, PER_TOKEN_MASK, thr(CONTRACT), auto=True,
                           reason="every agent turn has the engine's prompt ids: the capture contract (TRL ≥ 1.15)")
    why = ("no engine prompt ids" if not _has_engine_prompts(rollout) else "a train-turn rule was given")
    return TrainerSpec(MESSAGE, train_turns or "tool-calls", thr(MESSAGE), auto=True,
                       reason=f"{why}: message mode re-renders the prompts as TRL 1.14 does"
                              + ("; tool-call turns trained, as the opencode example runs it" if not train_turns
                                 else ""))


def _tool_calls(turn: Turn) -> bool:
    """TRL's ``has_tool_call`` on ``_entry_to_turn``: the response message has tool calls."""
    return bool(turn.response.get("tool_calls"))


def request_messages(turn: Turn) -> tuple[list[dict[str, Any]], Any]:
    """The request's messages and tools exactly as sent (TRL passes them through unchanged)."""
    req = turn.request if isinstance(turn.request, dict) else {}
    msgs = req.get("messages") if isinstance(req.get("messages"), list) else turn.messages
    tools = req.get("tools") if "tools" in req else (turn.tools or None)
    return list(msgs or []), tools


def _has_none(values: Sequence[Any]) -> bool:
    """``any(v is None for v in values)`` without a Python step per token: a packed float column
    cannot hold None, and for a list ``None in`` compares in C (logprobs are floats or None, none
    of which equals None but None itself)."""
    if isinstance(values, array):
        return False
    if type(values) in (list, tuple):
        return None in values
    return any(v is None for v in values)


def message_prompt_ids(tok, turn: Turn) -> list[int]:
    """The prompt ids ``trl-message`` trains on: the request's messages and tools through
    ``apply_chat_template(..., add_generation_prompt=True)``, exactly as TRL 1.14 renders them
    (also what ``compare`` uses for prompts recorded without engine ids)."""
    from viewer.tokenizer import render_prompt_ids

    msgs, tools = request_messages(turn)
    # the same text and ids as apply_chat_template(tokenize=True), rendered within the template budgets
    # (the template may be a capture's own; issue 26)
    ids = render_prompt_ids(tok, msgs, tools=tools, normalize_tool_arguments=False, add_generation_prompt=True)
    return [int(x) for x in ids]


def trainer_inputs(rollout: Rollout, spec: TrainerSpec, tok) -> tuple[list[TrainerTurn], list[Excluded], list[str]]:
    """TRL's ``TurnRecord`` list for ``rollout`` under ``spec``; raises ValueError when TRL could not run."""
    agent = rollout.agent_turns
    excluded: list[Excluded] = []
    notes: list[str] = []
    out: list[TrainerTurn] = []
    if spec.mode == CONTRACT:
        for t in agent:
            if t.prompt_source != "engine" or not t.prompt_ids:
                raise ValueError(f"turn {t.index}: no engine prompt ids ({t.prompt_source}); trl-contract needs "
                                 "them — use trl-message, which re-renders the prompt")
            if _has_none(t.logprobs):
                raise ValueError(f"turn {t.index}: a sampled logprob is missing; the capture contract needs one "
                                 "per output token")
            out.append(TrainerTurn(t.index, list(t.prompt_ids), list(t.output_ids), list(t.logprobs),
                                   t.loss_mask))
        return out, excluded, notes
    if tok is None or not getattr(tok, "chat_template", None):
        raise ValueError("trl-message re-renders every prompt through the chat template: "
                         + ("no tokenizer for this rollout" if tok is None else "the tokenizer has no chat template"))
    no_lps = []
    for t in agent:
        if spec.train_turns == "tool-calls" and not _tool_calls(t):
            excluded.append(Excluded(t.index, "no tool call: train_turn_fn=has_tool_call leaves it out of the "
                                              "chain (its text reaches later prompts only as context)"))
            continue
        try:
            prompt = message_prompt_ids(tok, t)
        except Exception as e:  # a template error is data: TRL would fail the rollout here
            raise ValueError(f"turn {t.index}: chat template failed to render: {e}") from e
        # TRL reads `per_token_logps` only; logprobs found elsewhere in the record never reach it.
        lps = list(t.logprobs) if t.origin.logprobs_from in (None, "per_token_logps") else []
        if not lps and t.output_ids:
            no_lps.append(t.index)
        out.append(TrainerTurn(t.index, prompt, list(t.output_ids), lps, None))
    if no_lps:
        notes.append(f"turn(s) {', '.join(map(str, no_lps))}: no per_token_logps in the record, so TRL 1.14 "
                     "trains them with old logprobs 0.0")
    return out, excluded, notes


_CACHE: OrderedDict[tuple, tuple[weakref.ref, TrainerRows]] = OrderedDict()
_CACHE_LOCK = threading.Lock()
_CACHE_SIZE = 16


def trainer_rows(rollout: Rollout, spec: TrainerSpec, tok) -> TrainerRows:
    """The rows ``spec``'s trainer builds from ``rollout`` (cached per rollout object, spec and tokenizer:
    message mode re-renders every prompt, and the Drift screen asks once per selected turn)."""
    key = (id(rollout), len(rollout.turns), spec, id(tok))
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
        if hit is not None and hit[0]() is rollout:
            _CACHE.move_to_end(key)
            return hit[1]
    res = TrainerRows(spec)
    try:
        turns, res.excluded, res.notes = trainer_inputs(rollout, spec, tok)
        res.inputs = turns
        res.rows = stitch(turns, fork_threshold=spec.fork_threshold, validate=spec.mode == CONTRACT)
    except ValueError as e:
        res.error = str(e)
    with _CACHE_LOCK:
        _CACHE[key] = (weakref.ref(rollout), res)
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return res
