"""Rollout and Turn: the pure data values every other module passes around.

A :class:`Rollout` is one agent episode as the trainer sees it: every model call the
recording proxy saw (agent turns *and* bookkeeping calls such as the title generator),
each as a :class:`Turn` holding the exact token ids, per-token logprobs and the loss
mask, plus the request/response text for reading. Readers in ``viewer.sources`` build
these values; analyses, renderers and the UI only read them. Nothing here does I/O.

Ids are the truth, text is derived: a Turn never stores re-tokenised ids under the
name of sampled ids. ``prompt_source`` / ``output_source`` say where ids came from.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

from viewer.origin import NO_ORIGIN, RolloutOrigin, TurnOrigin

__all__ = ["Problem", "TopLogprob", "Turn", "Rollout", "PromptSource", "OutputSource", "TurnKind", "TurnOrigin",
           "RolloutOrigin"]

TurnKind = Literal["agent", "bookkeeping"]
# engine: the inference server's own prompt_token_ids (exact).
# stored: ids read from a file (e.g. turns.json) whose producer may have re-tokenised.
# rerender: rendered locally through a chat template (a reconstruction; never exact).
# none: not available (no ids recorded and no tokenizer to render with).
PromptSource = Literal["engine", "stored", "rerender", "none"]
# engine: vLLM return_token_ids / completion_token_ids; token_id_strings: parsed from
# "token_id:N" logprob entries; stored: a turns file; derived: rendered locally from the
# reply's text through a chat template (text-only datasets; a reconstruction, never exact);
# none: text only.
OutputSource = Literal["engine", "token_id_strings", "stored", "derived", "none"]


@dataclass(frozen=True)
class Problem:
    """Something wrong with the input, located precisely (file, place) for the user."""

    file: str
    where: str
    message: str
    severity: Literal["error", "warning"] = "error"

    def __str__(self) -> str:
        loc = f"{self.file}: {self.where}" if self.where else self.file
        return f"{self.severity}: {loc}: {self.message}"


@dataclass(frozen=True)
class TopLogprob:
    """One alternative the sampler considered at a position (id may be unknown)."""

    id: int | None
    token: str | None
    logprob: float


@dataclass
class Turn:
    """One model call. ``mask`` is over the output tokens (1 = gets a gradient).

    ``prompt_mask`` is kept only when a source recorded a mask over prompt+output whose
    prompt part is not all zeros (unusual, worth showing). ``top_logprobs[i]`` lists the
    alternatives at output position i, sampled token first when vLLM put it there.
    ``output_bytes[i]`` are the bytes of the sampled token's text as the server reported
    them, so a rollout can be shown without a tokenizer.
    """

    index: int
    call: int
    kind: TurnKind = "agent"
    role: str = "main"  # main | title | compaction | summary | other
    trained: bool = False
    prompt_ids: list[int] = field(default_factory=list)
    prompt_source: PromptSource = "none"
    output_ids: list[int] = field(default_factory=list)
    output_source: OutputSource = "none"
    logprobs: list[float | None] = field(default_factory=list)
    top_logprobs: list[list[TopLogprob]] | None = None
    output_bytes: list[bytes | None] | None = None
    mask: list[int] = field(default_factory=list)
    prompt_mask: list[int] | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    response: dict[str, Any] = field(default_factory=dict)
    request: dict[str, Any] = field(default_factory=dict)
    finish_reason: str | None = None
    latency_s: float | None = None
    timestamp: float | None = None
    error: str | None = None
    origin: TurnOrigin = NO_ORIGIN  # frozen: one shared empty default is safe (where it came from, who set its mask)
    # The trainer's own logprob of each output token, where the file recorded it (a prime-rl token
    # export): the mismatch views show them without a model run (viewer.rescore.recorded).
    trainer_logprobs: list[float | None] | None = None

    @property
    def tool_names(self) -> list[str]:
        calls = self.response.get("tool_calls") or []
        return [str((c.get("function") or {}).get("name", "?")) for c in calls if isinstance(c, dict)]

    @property
    def loss_mask(self) -> list[int]:
        """The one definition of a trained token (token view, plots, summary and trainer rows).

        The recorded per-token ``mask`` when it covers every output token; otherwise (no
        mask, or one of another length) every token follows ``trained``. An empty mask
        therefore never means "all trained" on its own."""
        n = len(self.output_ids)
        if len(self.mask) == n:
            if getattr(self.mask, "typecode", None) == "b":  # packed: already 0/1 (viewer.packed.pack_mask)
                return self.mask.tolist()
            return [1 if m else 0 for m in self.mask]
        return [1 if self.trained else 0] * n

    @property
    def trained_tokens(self) -> int:
        return sum(self.loss_mask)

    @property
    def nbytes(self) -> int:
        """Approximate bytes this turn holds, cheaply: exact for packed columns (``nbytes``),
        a per-entry estimate for Python lists, and the text of messages / response / request."""
        return self.nbytes_once(None)

    def nbytes_once(self, seen: set[int] | None) -> int:
        """:attr:`nbytes`, counting a message or tools object already in ``seen`` as a pointer: the
        capture reader shares a conversation's repeated history between turns (SharedHistory)."""
        cols = (self.prompt_ids, self.output_ids, self.logprobs, self.top_logprobs, self.output_bytes,
                self.mask, self.prompt_mask, self.trainer_logprobs)
        own = 0 if self.origin is NO_ORIGIN else self.origin.nbytes  # the shared default costs a turn nothing
        return 600 + sum(_column_nbytes(c) for c in cols) + own + _json_nbytes(
            (self.messages, self.tools, self.response, self.request), 0, seen)

    def logprob_stats(self) -> tuple[float | None, float | None]:
        """Mean and min over output tokens that have a finite logprob."""
        vals = [v for v in self.logprobs if v is not None and math.isfinite(v)]
        if not vals:
            return None, None
        return sum(vals) / len(vals), min(vals)


@dataclass
class Rollout:
    """A whole episode: all calls, the task and its outcome, and what went wrong reading it.

    ``turns`` holds every call in call order, bookkeeping included (``kind``), so the
    UI can list filtered calls instead of silently dropping them.
    """

    source: str
    format: str
    turns: list[Turn] = field(default_factory=list)
    model: str | None = None
    task: dict[str, Any] | None = None
    instruction: str | None = None
    visible_tests: str | None = None
    held_out_tests: list[dict[str, Any]] | None = None
    summary: dict[str, Any] | None = None
    reward: float | None = None
    problems: list[Problem] = field(default_factory=list)
    origin: RolloutOrigin = RolloutOrigin()

    @property
    def agent_turns(self) -> list[Turn]:
        return [t for t in self.turns if t.kind == "agent"]

    @property
    def filtered_calls(self) -> list[Turn]:
        return [t for t in self.turns if t.kind != "agent"]

    def turn(self, index: int) -> Turn:
        for t in self.turns:
            if t.index == index:
                return t
        raise KeyError(index)

    @property
    def nbytes(self) -> int:
        """Approximate bytes this rollout holds (turns plus task, tests and summary): what a
        byte-bounded cache weighs it by. Linear in the turns' structure, not their tokens."""
        side = (self.task, self.instruction, self.visible_tests, self.held_out_tests, self.summary)
        seen: set[int] = set()  # history shared between turns is held once
        return (1000 + sum(t.nbytes_once(seen) for t in self.turns) + _json_nbytes(side, 0) + self.origin.nbytes
                + 200 * len(self.problems))

    def stats(self) -> dict[str, Any]:
        """The numbers ``python -m viewer summary`` prints (over agent turns)."""
        agent = self.agent_turns
        lps = [v for t in agent for v in t.logprobs if v is not None and math.isfinite(v)]
        return {
            "turns": len(agent),
            "trained_turns": sum(1 for t in agent if t.trained),
            "filtered_calls": len(self.filtered_calls),
            "prompt_tokens": sum(len(t.prompt_ids) for t in agent),
            "output_tokens": sum(len(t.output_ids) for t in agent),
            "trained_tokens": sum(t.trained_tokens for t in agent),
            "mean_logprob": (sum(lps) / len(lps)) if lps else None,
            "reward": self.reward,
        }


def _column_nbytes(col: Any) -> int:
    """A per-token column's bytes: its own ``nbytes`` when packed, else ~36 a boxed entry."""
    if col is None:
        return 0
    n = getattr(col, "nbytes", None)
    return n if isinstance(n, int) else 56 + 36 * len(col)


def _json_nbytes(v: Any, depth: int, seen: set[int] | None = None) -> int:
    """Rough size of JSON-like data (strings by length, containers by entry); shared
    strings are counted each time, which errs on the safe side for a cache. With ``seen``, a
    container already counted (the same object) costs a pointer."""
    if isinstance(v, str):
        return 49 + len(v)
    if isinstance(v, (dict, list)) and seen is not None:
        if id(v) in seen:
            return 8
        seen.add(id(v))
    if isinstance(v, dict):
        return 64 + 40 * len(v) + (sum(_json_nbytes(x, depth + 1, seen) for x in v.values()) if depth < 12 else 0)
    if isinstance(v, (list, tuple)):
        if v and isinstance(v[0], (int, float)) and not isinstance(v[0], bool):
            return 56 + 36 * len(v)
        return 56 + 8 * len(v) + (sum(_json_nbytes(x, depth + 1, seen) for x in v) if depth < 12 else 0)
    if isinstance(v, (bytes, bytearray)):
        return 33 + len(v)
    return 32
