"""The lint rules: stable ids, a level, a one-line why and a fix each (docs/LINT.md is this table,
tests/test_lint.py keeps the two equal), and :class:`Hit`, one rule firing at one place.

An id never changes meaning once released: a retired rule keeps its number unused.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlencode

__all__ = ["Level", "LEVELS", "Rule", "RULES", "RULE_IDS", "Hit", "select_rules", "token_runs", "runs_text",
           "MAX_TOKENS_LISTED"]

Level = Literal["error", "warning", "info"]
LEVELS: tuple[str, ...] = ("error", "warning", "info")
MAX_TOKENS_LISTED = 1000  # a hit's ``tokens`` in --json (``tokens_total`` counts them all)


@dataclass(frozen=True)
class Rule:
    id: str
    name: str
    level: Level
    why: str
    fix: str


RULES: tuple[Rule, ...] = (
    Rule("RI001", "no-engine-prompt-ids", "warning",
         "agent turns have no engine prompt ids: the trainer falls back to prompts re-rendered from messages, "
         "which drift from what the model saw (re-render, tool-argument and special-token drift)",
         "record the engine's ids: send \"return_token_ids\": true in each request (vLLM >= 0.10.2; our "
         "recording proxy does, the OpenEnv interception proxy does not) and train in contract mode"),
    Rule("RI002", "processed-logprobs-truncated-sampler", "warning",
         "logprobs were recorded as processed_logprobs while top_p < 1 or top_k > 0: they include the "
         "nucleus / top-k renormalisation, so old-vs-sampling ratios are biased",
         "serve with --logprobs-mode raw_logprobs, or sample with top_p 1 and top_k -1"),
    Rule("RI003", "raw-logprobs-temperature", "warning",
         "logprobs were recorded as raw_logprobs (before temperature) while temperature != 1: they are not the "
         "sampling distribution's, so importance ratios are off",
         "serve with --logprobs-mode processed_logprobs, or sample at temperature 1"),
    Rule("RI004", "logprobs-mode-unknown", "info",
         "the capture does not say which logprobs mode the server used (raw or processed), so RI002 / RI003 "
         "cannot be checked",
         "record the server's --logprobs-mode in summary.json (server.logprobs_mode), as our capture does"),
    Rule("RI005", "missing-logprobs", "error",
         "trained output tokens have no per-token logprob: the trainer uses 0.0 there (probability 1), "
         "which skews the policy ratio",
         "request \"logprobs\": true on every call and keep per_token_logps / logprobs.content in each record"),
    Rule("RI006", "bookkeeping-not-recognised", "error",
         "a bookkeeping call (title generator, context summariser) is treated as an agent turn: its tokens "
         "would be trained as if the agent had written them",
         "label each call's kind at capture time (\"kind\": \"title\" / \"compaction\"), or filter calls by "
         "tools and the primary system prompt as the opencode example does"),
    Rule("RI007", "tokenizer-files-changed", "error",
         "the capture's tokenizer/ files are missing or differ from the sha256s its summary.json recorded: "
         "ids may be decoded and re-rendered with another tokenizer than the one that sampled them",
         "restore the files the capture shipped (or re-run the capture); never edit tokenizer/ in place"),
    Rule("RI008", "no-tokenizer-shipped", "info",
         "the capture ships no tokenizer/ folder: the viewer and the trainer must guess the tokenizer from the "
         "model name",
         "ship the sampling model's tokenizer files in tokenizer/ with their sha256s in summary.json"),
    Rule("RI009", "chat-template-differs", "warning",
         "the capture's chat template differs from the model's own (local folder or cached Hub files): prompts "
         "re-rendered with one will not match ids sampled with the other",
         "capture with the model's own template, or train with the capture's tokenizer/ files"),
    Rule("RI010", "trained-turn-truncated", "warning",
         "a trained turn stopped at the output limit (finish_reason length): an unfinished reply, often a "
         "broken tool call, gets a gradient",
         "raise max_tokens, or mask turns that ended with finish_reason length"),
    Rule("RI011", "non-finite-logprob", "error",
         "a recorded logprob is NaN or infinite: the loss and the ratio become NaN",
         "drop or re-sample the call; check the server (vLLM floors logprobs at -9999, so an infinity is "
         "not the engine's)"),
    Rule("RI012", "id-out-of-vocab", "error",
         "a token id is negative or not below the tokenizer's vocabulary size: the ids were not made by this "
         "tokenizer (or are corrupt) and an embedding lookup fails",
         "check the model / tokenizer pairing (ship tokenizer/), and the proxy's id parsing"),
    Rule("RI013", "length-mismatch", "error",
         "a call's recorded lengths disagree (output ids vs logprobs or mask, or the usage counts vs the ids): "
         "the reader has to cut them, so tokens and logprobs may be misaligned",
         "record ids, logprobs and masks from the same response; for streams, concatenate every chunk's "
         "token_ids and logprob entries"),
    Rule("RI014", "constant-logprobs", "error",
         "trained tokens' logprobs are exactly 0.0 or one repeated value (a run of >= 32 tokens, or >= 90% of a "
         "turn's, else of the rollout's, >= 32 trained tokens; a sure token rounds to 0.0, real replies hold "
         "runs of 8): a zero-filled logprob makes the ratio ~4.8e4 and nothing errors (NeMo-RL #4218)",
         "record the engine's own per-token logprobs (\"logprobs\": true) and fail on a missing one instead of "
         "filling it; a confident token rounds to 0.0 alone, never for a whole reply"),
    Rule("RI015", "block-mask-mismatch", "warning",
         "a reasoning (think) or tool-call (tool_call) block the model sampled is left as context in a reply "
         "the mask trains everywhere else (a mask built from the message's content, which the server's "
         "parsers stripped of reasoning and tool calls), or the mask cuts through the block (text spans "
         "re-found on a re-render, an off-by-one): the gradient skips or halves what the model wrote",
         "build the mask from the engine's ids per call (contract mode), not from the content text or re-found "
         "spans; train or mask a block whole, with its reply"),
    Rule("RI016", "masked-placeholder-logprobs", "warning",
         "positions the mask excludes carry placeholder logprobs (a value <= -1000 such as -9999, or one value "
         "on >= 90% of >= 8 masked tokens): a mismatch, KL or mean over them reads tens of nats that no model "
         "gave (Miles #2476)",
         "store no logprob (null) where none was computed, and compare logprobs only where the mask trains"),
    Rule("RI017", "ids-logprobs-out-of-step", "error",
         "a record's logprob entries name other tokens than its ids at the same positions (or its two copies "
         "of the logprobs disagree): after a retokenisation fallback ids and logprobs are out of step and each "
         "logprob scores another token (rLLM #816)",
         "keep the engine's ids and logprob entries from one response; never re-tokenise the text and pair it "
         "with the engine's logprobs"),
    Rule("RI018", "side-request-incomplete", "warning",
         "the capture is marked incomplete (summary.json: complete false, a status other than ok, or upstream "
         "errors counted) only because a side request failed (a title or summary call: an error, or cut at "
         "the output limit) while every agent turn finished: a pipeline that drops marked rollouts drops a "
         "usable episode",
         "count only agent calls' failures in the capture's status (label each call's kind), or filter "
         "rollouts on their agent turns, not the mark"),
)
RULE_IDS: tuple[str, ...] = tuple(r.id for r in RULES)
_BY_ID = {r.id: r for r in RULES}


def select_rules(spec: str | None) -> tuple[str, ...]:
    """Rule ids named by ``--select`` (comma-separated ids, names, or a level); all when empty.
    ValueError naming the unknown item."""
    if not spec or not spec.strip():
        return RULE_IDS
    by_name = {r.name: r.id for r in RULES}
    out: list[str] = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        if item.upper() in _BY_ID:
            out.append(item.upper())
        elif item in by_name:
            out.append(by_name[item])
        elif item.lower() in LEVELS:
            out.extend(r.id for r in RULES if r.level == item.lower())
        else:
            raise ValueError(f"--select: {item[:60]!r} is not a rule id, rule name or level "
                             f"(rules: {', '.join(RULE_IDS)}; levels: {', '.join(LEVELS)})")
    return tuple(dict.fromkeys(out))


@dataclass(frozen=True)
class Hit:
    """One rule firing: where (turn index, the part and position within it, ``tok`` over
    prompt + output as the token view and links count) and what exactly was seen."""

    rule: str
    message: str
    turn: int | None = None
    part: Literal["prompt", "output"] | None = None
    position: int | None = None
    tok: int | None = None
    row: int | None = None  # the dataset row, when linting a dataset
    # every offending token, counted as ``tok`` (prompt + output), ascending; () when the rule names none
    tokens: tuple[int, ...] = ()

    @property
    def spec(self) -> Rule:
        return _BY_ID[self.rule]

    @property
    def level(self) -> str:
        return self.spec.level

    def link(self, source: str) -> str:
        """The app's deep-link query string for this place (``?source=..&row=..&turn=..&tok=..``), "" without
        a source."""
        if not source:
            return ""
        return urlencode({"source": source, **self.place()})

    def place(self) -> dict[str, Any]:
        """The link's place: ``row``, ``turn`` and ``tok`` (``A-B``, the first run of offending tokens,
        where the hit names tokens; the token view selects that range)."""
        q: dict[str, Any] = {}
        for k, v in (("row", self.row), ("turn", self.turn), ("tok", self.tok)):
            if v is not None:
                q[k] = v
        if self.tokens:
            a, b = token_runs(self.tokens)[0]
            q["tok"] = str(a) if a == b else f"{a}-{b}"
        return q

    def to_dict(self, source: str = "") -> dict[str, Any]:
        r = self.spec
        return {"rule": r.id, "name": r.name, "level": r.level, "turn": self.turn, "part": self.part,
                "position": self.position, "tok": self.tok, "row": self.row, "message": self.message,
                "tokens": list(self.tokens[:MAX_TOKENS_LISTED]), "tokens_total": len(self.tokens),
                "why": r.why, "fix": r.fix, "link": self.link(source)}


def token_runs(toks: tuple[int, ...] | list[int]) -> list[tuple[int, int]]:
    """Ascending positions as inclusive ``(first, last)`` runs of consecutive positions."""
    runs: list[tuple[int, int]] = []
    for k in toks:
        if runs and k == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], k)
        else:
            runs.append((k, k))
    return runs


def runs_text(toks: tuple[int, ...] | list[int], most: int = 4) -> str:
    """``tok 12-40, 52, ...`` for a message: the first ``most`` runs, then how many more tokens."""
    runs = token_runs(toks)
    shown = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs[:most])
    rest = sum(b - a + 1 for a, b in runs[most:])
    return f"tok {shown}" + (f" and {rest} more" if rest else "")
