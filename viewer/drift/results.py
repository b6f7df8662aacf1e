"""The shape of a drift scan's result, typed at the seam where it leaves the analysis: the one owner
of its keys.

Scan results stay JSON-shaped (``python -m viewer drift --json`` prints them as they are,
the scan table and plots read them), so they are ``TypedDict``s rather than classes: a type
checker and a reader see every key here, in one place, instead of in docstrings. The dicts are
built from these definitions (the per-turn sections by calling them, the totals, the trainer
block and the parquet columns of :mod:`viewer.drift.scanout` from their fields), so both
engines (local and Ray) write exactly these keys (tests/test_drift.py checks them).
``NotRequired`` marks a key that is absent, not None, when it does not apply.
"""
# no ``from __future__ import annotations`` here: NotRequired must be seen when the classes are
# made (its optional keys decide which parquet cells come back as absent keys)
from dataclasses import fields
from typing import Any, Literal, NotRequired, TypedDict, get_args, get_origin, get_type_hints, is_typeddict

from viewer.drift.rows import Tally

__all__ = ["RetokenizeResult", "TemplateResult", "PrefixResult", "RowResult", "TurnRecord", "TrainerTally",
           "TrainerBlock", "ScanTotals", "SweepPoint", "LostAt", "WhatIf", "GradientBlock", "ScanResult", "ScanError", "TokenizerUsed", "CHECKS", "SECTIONS",
           "empty_totals", "new_trainer_block", "turn_columns", "optional_keys", "SCAN_COLUMNS", "scan_table"]

# the three checks every turn gets (viewer.drift.checks), in the order totals count them
CHECKS = ("retokenize", "template", "prefix")


class RetokenizeResult(TypedDict):
    """Output round trip: ``encode(decode(ids)) == ids``?"""
    equal: bool | None  # None: could not run (``unchecked`` says why)
    first_mismatch: int | None
    changed_spans: int
    cause: str | None
    unchecked: NotRequired[str]


class TemplateResult(TypedDict):
    """The prompt re-rendered through the chat template (vLLM-style; plain TRL-style beside it)."""
    equal: bool | None
    first_mismatch: int | None
    cause: str | None
    plain_equal: NotRequired[bool | None]
    plain_cause: NotRequired[str | None]
    plain_error: NotRequired[str]
    unchecked: NotRequired[str]
    artefact: NotRequired[str]  # the cause comes from a stand-in tokenizer's template, not the rollout


class PrefixResult(TypedDict):
    """Does this turn's prompt extend the previous turn's prompt + output?"""
    status: str  # clean | broken | first (first agent turn: nothing to extend)
    cause: str | None
    tokens_rerendered: int
    divergence: int | None
    in_output: bool
    unchecked: NotRequired[str]
    artefact: NotRequired[str]  # the cause comes from a stand-in tokenizer's template, not the rollout


class RowResult(TypedDict):
    """The turn under the trainer's stitching (viewer.drift.rows)."""
    verdict: Literal["CLEAN", "REALIGN", "FORK", "NOT_IN_CHAIN", "ERROR"]
    matched: NotRequired[int]  # the four counts: a turn in the chain
    drift: NotRequired[int]
    tokens_losing_gradient: NotRequired[int]
    kept_trained: NotRequired[int]
    lost_cause: NotRequired[str]  # the cause of the divergence this turn's REALIGN cut at (viewer.drift.costs)
    reason: NotRequired[str]  # NOT_IN_CHAIN / ERROR


class TurnRecord(TypedDict):
    """One agent turn of the scan (the parquet columns follow this order)."""
    rollout: str
    turn: int
    call: int
    tokenizer: str | None  # added by viewer.drift.corpus.scan_source
    drifted: bool  # decided once in the scan; the table and UI read it
    unchecked: NotRequired[str]
    retokenize: RetokenizeResult
    template: TemplateResult
    prefix: PrefixResult
    row: NotRequired[RowResult]


# TRL's tally: the keys are those of viewer.drift.rows.Tally (one owner: the dataclass that counts)
TrainerTally = TypedDict("TrainerTally", {f.name: int for f in fields(Tally)})


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


class ScanTotals(TypedDict):
    turns: int
    drifted_turns: int
    by_cause: dict[str, int]
    forked_rows: int
    unchecked: int
    unchecked_by_check: dict[str, int]  # per check of CHECKS
    tokens_losing_gradient: int
    rows: int
    rollouts: int
    retokenize_drifted: int
    template_drifted: int
    prefix_broken: int
    cancelled: bool
    unreadable: int
    stand_in_artefacts: int  # turns whose only findings come from a stand-in tokenizer's template


class ScanError(TypedDict):
    source: str
    error: str


def said(e: ScanError, under: str | None = None) -> str:
    """An unreadable source's line: its source and error, the source said once (a reader's message often begins
    with it), and not at all where it is ``under``, the scan's own label (a folder printed three times)."""
    source, error = e["source"], e["error"]
    for lead in (source, source.rpartition(" row ")[0]):  # (a dataset row's source is "SPEC row N")
        if lead and error.startswith(lead + ": "):
            error = error[len(lead) + 2:]
            break
    return error if source == under else f"{source}: {error}"


def no_readable_rollout(label: str, errors: list) -> str:
    """The message of a scan that read nothing, with why (its first three unreadable sources)."""
    why = "; ".join(said(e, label) for e in errors[:3])
    return f"{label}: no readable rollout" + (f": {why}" if len(errors) == 1 and errors[0]["source"] == label
                                              else f" ({why})" if why else "")


class SweepPoint(TypedDict):
    """The trainer re-run at one fork threshold (viewer.drift.costs.sweep), summed over rollouts."""
    fork_threshold: int | str  # "inf": no drift forks by its size
    rows: int
    forked_rows: int
    tokens_losing_gradient: int
    trained_tokens: int
    kept_trained_tokens: int


class LostAt(TypedDict):
    """Trained tokens of ``turn``'s output that ``at_turn``'s REALIGN overwrote, and why."""
    rollout: str
    turn: int | None
    at_turn: int
    tokens: int
    cause: str  # a CAUSES name, or "unclassified" (no tokenizer)
    al_class: str | None
    matched: int
    drift: int
    evidence: str


class WhatIf(TypedDict):
    """One measured what-if (viewer.drift.whatif), summed over the rollouts where it could run."""
    name: str
    what: str
    measured_rollouts: int
    not_measured: dict[str, int]  # reason → rollouts
    baseline_tokens_losing_gradient: int
    tokens_losing_gradient: int
    recovered: int
    rows: int
    baseline_rows: int


class GradientBlock(TypedDict):
    """What each cause costs in gradient (viewer.drift.costs); ``by_cause`` sums to the total."""
    tokens_losing_gradient: int
    by_cause: dict[str, int]
    by_turn: list[LostAt]
    what_if: list[WhatIf]
    sweep: list[SweepPoint] | None


class TokenizerUsed(TypedDict):
    name: str | None
    note: str


class ScanResult(TypedDict):
    turns: list[TurnRecord]
    totals: ScanTotals
    trainer: TrainerBlock
    gradient: GradientBlock
    # added by viewer.drift.corpus.scan_source
    source: NotRequired[str]
    tokenizer: NotRequired[str | None]
    tokenizers: NotRequired[list[TokenizerUsed]]
    errors: NotRequired[list[ScanError]]
    tokenizer_note: NotRequired[str]
    # added by the Ray engine (viewer.drift.ray_engine)
    engine: NotRequired[str]
    out: NotRequired[str | None]


SECTIONS = tuple(k for k, t in get_type_hints(TurnRecord).items() if is_typeddict(t))


def empty_totals() -> ScanTotals:
    """Every total at zero, from :class:`ScanTotals`'s fields (each engine starts or completes with this)."""
    out: dict[str, Any] = {}
    for k, t in get_type_hints(ScanTotals).items():
        if k == "unchecked_by_check":
            out[k] = {c: 0 for c in CHECKS}
        else:
            out[k] = {} if get_origin(t) is dict else t()
    return out  # type: ignore[return-value]


def new_trainer_block(fork_threshold: int | None = None) -> TrainerBlock:
    """An empty ``trainer`` block: nothing ran yet (see ``viewer.drift.scan.merge_trainer``)."""
    block: dict[str, Any] = {k: None for k in TrainerBlock.__annotations__}
    block.update(fork_threshold=fork_threshold, modes={}, errors=0, tally={k: 0 for k in TrainerTally.__annotations__})
    return block  # type: ignore[return-value]


_ARROW = {bool: "bool_", int: "int64", str: "string"}


def _arrow_type(t: Any) -> str:
    args = [a for a in get_args(t) if a is not type(None)]
    if get_origin(t) is Literal:
        return "string"
    if args and get_origin(t) is not Literal:  # X | None
        return _arrow_type(args[0])
    return _ARROW[t]


def turn_columns() -> list[tuple[str, str]]:
    """(column, arrow type name) of a turn record flattened, sections as ``section.key``, in
    :class:`TurnRecord`'s order: the parquet schema of :mod:`viewer.drift.scanout`."""
    cols = []
    for k, t in get_type_hints(TurnRecord).items():
        if is_typeddict(t):
            cols += [(f"{k}.{kk}", _arrow_type(tt)) for kk, tt in get_type_hints(t).items()]
        else:
            cols.append((k, _arrow_type(t)))
    return cols


def optional_keys() -> set[str]:
    """Keys absent (not None) when they do not apply, in a turn record or any of its sections."""
    hints = get_type_hints(TurnRecord)
    return set().union(TurnRecord.__optional_keys__ - set(SECTIONS),
                       *(hints[s].__optional_keys__ for s in SECTIONS))


SCAN_COLUMNS = ["rollout", "turn", "drifted", "round trip", "rt cause", "spans", "re-render", "render cause",
                "prefix", "prefix cause", "re-rendered", "row", "losing gradient", "unchecked"]


def _yn(v: bool | None) -> str:
    return "—" if v is None else ("equal" if v else "DIFF")


def _cause_label(check: dict[str, Any]) -> str:
    cause = check.get("cause") or ""
    return f"{cause} ({check['artefact']})" if cause and check.get("artefact") else cause


def scan_table(result: ScanResult, cause: str | None = None, drifted_only: bool = False) -> list[dict[str, Any]]:
    """One plain dict per turn (columns :data:`SCAN_COLUMNS`), optionally only turns where
    some check names ``cause``, or only drifted turns. Used by the CLI table and the UI."""
    out = []
    for rec in result.get("turns", []):
        rt, tp, px = rec["retokenize"], rec["template"], rec["prefix"]
        causes = {c for c in (rt.get("cause"), tp.get("cause"), px.get("cause")) if c}
        tp_cause, px_cause = (_cause_label(x) for x in (tp, px))
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
            "render cause": tp_cause, "prefix": px.get("status", ""),
            "prefix cause": px_cause, "re-rendered": px.get("tokens_rerendered", 0),
            "row": row.get("verdict", ""), "losing gradient": row.get("tokens_losing_gradient", 0),
            "unchecked": rec.get("unchecked", ""),
        })
    return out
