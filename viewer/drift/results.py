"""The shape of a drift scan's result, typed at the seam where it leaves the analysis.

Scan results stay JSON-shaped (``python -m viewer drift --json`` prints them as they are,
the scan table and plots read them), so they are ``TypedDict``s rather than classes: a type
checker and a reader see every key here, in one place, instead of in docstrings.
"""
from __future__ import annotations

from typing import Any, Literal, TypedDict

__all__ = ["RetokenizeResult", "TemplateResult", "PrefixResult", "RowResult", "TurnRecord", "TrainerTally",
           "TrainerBlock", "ScanTotals", "ScanResult", "ScanError", "TokenizerUsed", "SCAN_COLUMNS", "scan_table"]


class RetokenizeResult(TypedDict, total=False):
    """Output round trip: ``encode(decode(ids)) == ids``?"""
    equal: bool | None  # None: could not run (``unchecked`` says why)
    first_mismatch: int | None
    changed_spans: int
    cause: str | None
    unchecked: str


class TemplateResult(TypedDict, total=False):
    """The prompt re-rendered through the chat template (vLLM-style; plain TRL-style beside it)."""
    equal: bool | None
    first_mismatch: int | None
    cause: str | None
    plain_equal: bool | None
    plain_cause: str | None
    plain_error: str
    unchecked: str


class PrefixResult(TypedDict, total=False):
    """Does this turn's prompt extend the previous turn's prompt + output?"""
    status: str  # clean | broken | first (first agent turn: nothing to extend)
    cause: str | None
    tokens_rerendered: int
    divergence: int | None
    in_output: bool
    unchecked: str


class RowResult(TypedDict, total=False):
    """The turn under the trainer's stitching (viewer.drift.rows)."""
    verdict: Literal["CLEAN", "REALIGN", "FORK", "NOT_IN_CHAIN", "ERROR"]
    matched: int
    drift: int
    tokens_losing_gradient: int
    kept_trained: int
    reason: str  # NOT_IN_CHAIN / ERROR


class TurnRecord(TypedDict, total=False):
    rollout: str
    turn: int
    call: int
    retokenize: RetokenizeResult
    template: TemplateResult
    prefix: PrefixResult
    row: RowResult
    drifted: bool  # decided once in the scan; the table and UI read it
    unchecked: str
    tokenizer: str | None


class TrainerTally(TypedDict):
    clean: int
    realign: int
    fork: int
    transitions: int
    drift_tokens: int
    drift_max: int


class TrainerBlock(TypedDict):
    """Which trainer semantics ran (viewer.drift.trainer), and TRL's tally summed over rollouts."""
    mode: str | None  # trl-message | trl-contract | mixed
    train_turns: str | None
    trl_version: str | None
    fork_threshold: int | None
    chosen: str | None
    reason: str | None
    modes: dict[str, int]
    errors: int
    tally: TrainerTally


class ScanTotals(TypedDict, total=False):
    turns: int
    drifted_turns: int
    by_cause: dict[str, int]
    forked_rows: int
    unchecked: int
    unchecked_by_check: dict[str, int]
    tokens_losing_gradient: int
    rows: int
    rollouts: int
    retokenize_drifted: int
    template_drifted: int
    prefix_broken: int
    cancelled: bool
    unreadable: int


class ScanError(TypedDict):
    source: str
    error: str


class TokenizerUsed(TypedDict):
    name: str | None
    note: str


class ScanResult(TypedDict, total=False):
    turns: list[TurnRecord]
    totals: ScanTotals
    trainer: TrainerBlock
    # added by viewer.drift.corpus.scan_source
    source: str
    tokenizer: str | None
    tokenizers: list[TokenizerUsed]
    errors: list[ScanError]
    tokenizer_note: str


SCAN_COLUMNS = ["rollout", "turn", "drifted", "round trip", "rt cause", "spans", "re-render", "render cause",
                "prefix", "prefix cause", "re-rendered", "row", "losing gradient", "unchecked"]


def _yn(v: bool | None) -> str:
    return "—" if v is None else ("equal" if v else "DIFF")


def scan_table(result: ScanResult, cause: str | None = None, drifted_only: bool = False) -> list[dict[str, Any]]:
    """One plain dict per turn (columns :data:`SCAN_COLUMNS`), optionally only turns where
    some check names ``cause``, or only drifted turns. Used by the CLI table and the UI."""
    out = []
    for rec in result.get("turns", []):
        rt, tp, px = rec["retokenize"], rec["template"], rec["prefix"]
        causes = {c for c in (rt.get("cause"), tp.get("cause"), px.get("cause")) if c}
        drifted = bool(rec.get("drifted"))  # decided once, by the scan
        if cause and cause not in causes:
            continue
        if drifted_only and not drifted:
            continue
        row = rec.get("row") or {}
        out.append({
            "rollout": rec["rollout"], "turn": rec["turn"], "drifted": "yes" if drifted else "no",
            "round trip": _yn(rt.get("equal")), "rt cause": rt.get("cause") or "",
            "spans": rt.get("changed_spans", 0), "re-render": _yn(tp.get("equal")),
            "render cause": tp.get("cause") or "", "prefix": px.get("status", ""),
            "prefix cause": px.get("cause") or "", "re-rendered": px.get("tokens_rerendered", 0),
            "row": row.get("verdict", ""), "losing gradient": row.get("tokens_losing_gradient", 0),
            "unchecked": rec.get("unchecked", ""),
        })
    return out
