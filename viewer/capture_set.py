"""A folder of capture folders as a dataset: one row per rollout, with its drift (issue 38, point 1). No gradio.

A night of captures is a folder of capture folders (each with its trace / turns file). Row readers
(:func:`viewer.sources.open_dataset`) see only the files in it and refuse it (the agent logs' fields name
no format); this module lists the captures :func:`viewer.drift.corpus.discover` finds below it, reads each
once through the drift scan (:func:`viewer.drift.corpus.scan_source`, the same checks as the Drift tab) and
keeps one row per rollout: agent, model, task, reward, turns, tokens, drifted turns and their causes, the
trained tokens losing their gradient under the trainer that ran, and the mean |Δ| once it is rescored.

:func:`per_rollout` folds any drift scan's per-turn records into per-rollout rows: the Drift tab's
per-rollout view uses it too.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from viewer.config import Settings
from viewer.layout import is_capture_dir
from viewer.rollout import Rollout

__all__ = ["CAPTURE_SET_COLUMNS", "ROLLUP_COLUMNS", "CAPTURE_SET_SORTS", "CaptureSet", "is_capture_set",
           "capture_set_page",
           "open_capture_set", "per_rollout", "rollup_rows", "trainer_hook", "trainer_name", "rollout_facts"]

# the Datasets tab's table for a folder of captures (``row`` first: a click opens that row)
# (the causes and the task last: their text is wide, and the figures a reader sorts by stay on screen)
CAPTURE_SET_COLUMNS = ["row", "rollout", "agent", "model", "reward", "turns", "tokens", "drifted turns",
                       "losing gradient", "trainer", "|Δ|", "max ratio", "causes", "task"]
# the Drift scan's per-rollout view (``rollout`` first: a click opens it, as in the per-turn view)
ROLLUP_COLUMNS = ["rollout", "trainer", "turns", "drifted turns", "causes", "forked rows", "losing gradient"]
CAPTURE_SET_SORTS = ("drifted turns", "losing gradient", "|Δ|", "max ratio", "tokens")


def is_capture_set(path: Path) -> bool:
    """A folder that is not a capture itself but holds capture folders (directly or deeper)."""
    p = Path(path)
    if not p.is_dir() or is_capture_dir(p):
        return False
    return any(is_capture_dir(c) for c in p.iterdir() if c.is_dir() and not c.name.startswith(".")) or any(
        is_capture_dir(g) for c in p.iterdir() if c.is_dir() and not c.name.startswith(".")
        for g in c.iterdir() if g.is_dir())


def trainer_name(spec: Any) -> str:
    """A trainer spec (:class:`viewer.drift.trainer.TrainerSpec`) as the tables name it."""
    return f"{spec.mode}/{spec.train_turns}" if spec is not None else ""


def rollout_facts(r: Rollout) -> dict[str, Any]:
    """What the table shows of a rollout itself (no drift): agent, model, task, reward, turns, tokens.
    ``tokens``: prompt + output ids over the agent turns (``Rollout.stats``, as ``summary`` counts them)."""
    s = r.stats()
    task = r.instruction or (r.task or {}).get("instruction") or (r.task or {}).get("task_id") or ""
    return {"agent": _agent(r), "model": r.model or "", "task": " ".join(str(task).split())[:120],
            "reward": r.reward, "turns": s["turns"], "tokens": s["prompt_tokens"] + s["output_tokens"]}


def _agent(r: Rollout) -> str:
    """The harness: what the row names, else the agent our capture ran (summary.json's ``versions``
    lists opencode's version; its ``agent`` entry is the run's status, not a name)."""
    if r.origin.agent:
        return str(r.origin.agent)
    summ = r.summary if isinstance(r.summary, dict) else {}
    if isinstance(summ.get("agent"), str):
        return summ["agent"]
    return "opencode" if "opencode" in (summ.get("versions") or {}) else ""


def per_rollout(result: dict[str, Any], trainers: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """One row per rollout of a drift scan's ``result`` (columns :data:`ROLLUP_COLUMNS`), in scan order.

    ``trainers``: rollout name → trainer that ran on it; without it (a Ray scan), the scan's trainer when
    one ran on every rollout, else "mixed". Causes are each check's named cause, counted over the turns."""
    block = result.get("trainer") or {}
    modes = block.get("modes") or {}
    whole = next(iter(modes)) if len(modes) == 1 else ("mixed" if modes else "")
    rows: dict[str, dict[str, Any]] = {}
    causes: dict[str, dict[str, int]] = {}
    for rec in result.get("turns", []):
        name = rec["rollout"]
        row = rows.get(name)
        if row is None:
            row = rows[name] = {"rollout": name, "trainer": (trainers or {}).get(name, whole), "turns": 0,
                                "drifted turns": 0, "causes": "", "forked rows": 0, "losing gradient": 0}
            causes[name] = {}
        row["turns"] += 1
        row["drifted turns"] += 1 if rec.get("drifted") else 0
        for sec in ("retokenize", "template", "prefix"):
            c = (rec.get(sec) or {}).get("cause")
            if c:
                causes[name][c] = causes[name].get(c, 0) + 1
        tr = rec.get("row") or {}
        row["forked rows"] += 1 if tr.get("verdict") == "FORK" else 0
        row["losing gradient"] += int(tr.get("tokens_losing_gradient") or 0)
    for name, row in rows.items():
        row["causes"] = ", ".join(f"{c} ×{n}" for c, n in sorted(causes[name].items(), key=lambda x: (-x[1], x[0])))
    return list(rows.values())


def rollup_rows(result: dict[str, Any], trainers: dict[str, str] | None = None, cause: str | None = None,
                drifted_only: bool = False) -> list[dict[str, Any]]:
    """:func:`per_rollout`'s rows, worst first (most tokens losing gradient, then most drifted turns), only
    rollouts where some turn names ``cause`` or (``drifted_only``) that drifted at all."""
    rows = per_rollout(result, trainers)
    if cause:
        named = {rec["rollout"] for rec in result.get("turns", []) if cause in
                 {(rec.get(s) or {}).get("cause") for s in ("retokenize", "template", "prefix")}}
        rows = [r for r in rows if r["rollout"] in named]
    if drifted_only:
        rows = [r for r in rows if r["drifted turns"]]
    return sorted(rows, key=lambda r: (-r["losing gradient"], -r["drifted turns"]))


def trainer_hook(trainers: dict[str, str]) -> Callable[[Rollout], None]:
    """An ``on_rollout`` hook for :func:`viewer.drift.corpus.scan_source`: the trainer each rollout gets when
    the scan names none (:func:`viewer.drift.trainer.choose_spec`, as the scan itself chooses)."""
    from viewer.drift.trainer import choose_spec

    def seen(r: Rollout) -> None:
        trainers[str(r.source)] = trainer_name(choose_spec(r))
    return seen


@dataclass
class CaptureSet:
    """An opened folder of captures: ``rows`` (columns :data:`CAPTURE_SET_COLUMNS`), one per readable
    rollout, ``folders[i]`` the capture folder of row ``i``; ``errors`` the captures that could not be read."""

    label: str
    settings: Settings
    folders: list[str]
    rows: list[dict[str, Any]]
    errors: list[dict[str, str]] = field(default_factory=list)
    tokenizer: str | None = None
    cancelled: bool = False
    deltas: dict[str, float] = field(default_factory=dict)  # folder -> mean |Δ| of its latest rescore
    keys: dict[str, str] = field(default_factory=dict)  # folder -> the app's store key, once opened from the table
    ratios: dict[str, float] = field(default_factory=dict)  # folder -> largest exp(Δ) of a dataset rescore

    def rollout(self, row: int) -> Rollout:
        """Row ``row``'s rollout, read again from its capture folder (SourceError when it cannot be)."""
        from viewer.sources import SourceNotFound, load_source

        if not 0 <= int(row) < len(self.folders):
            raise SourceNotFound(f"{self.label}: row {row} is past the end ({len(self.folders)} rollouts)")
        return load_source(self.folders[int(row)], self.settings)

    def table(self) -> list[dict[str, Any]]:
        """The rows with each one's latest |Δ| (rescores land after the folder was opened)."""
        return [dict(r, **{"|Δ|": self.deltas.get(self.folders[r["row"]], r["|Δ|"]),
                           "max ratio": self.ratios.get(self.folders[r["row"]], r.get("max ratio"))}) for r in self.rows]


def open_capture_set(path: Path, settings: Settings | None = None, *,
                     progress: Callable[[int, int | None], None] | None = None,
                     cancel: threading.Event | None = None, limit: int | None = None) -> CaptureSet:
    """Every capture below ``path`` read and drift-scanned once (raises ``ScanInputError`` when none can be)."""
    from viewer.drift.corpus import scan_source
    from viewer.rescore.recorded import has_recorded, recorded_result

    settings = settings or Settings()
    facts: dict[str, dict[str, Any]] = {}
    trainers: dict[str, str] = {}
    trainer_of = trainer_hook(trainers)

    def seen(r: Rollout) -> None:
        f = rollout_facts(r)
        # a file that recorded the trainer's logprobs (prime-rl) is rescored already: its |Δ| is known
        f["|Δ|"] = recorded_result(r, settings.rescore_flag_delta).totals()["mean_abs_delta"] \
            if has_recorded(r) else None
        facts[str(r.source)] = f
        trainer_of(r)

    res = scan_source(Path(path), settings, limit=limit, progress=progress, cancel=cancel, on_rollout=seen)
    drift = {r["rollout"]: r for r in per_rollout(res, trainers)}
    rows, folders = [], []
    for name, f in facts.items():
        d = drift.get(name, {})
        rows.append({"row": len(rows), "rollout": _short(name, path), **{k: f[k] for k in
                     ("agent", "model", "task", "reward", "turns", "tokens")},
                     "drifted turns": d.get("drifted turns", 0), "causes": d.get("causes", ""),
                     "losing gradient": d.get("losing gradient", 0), "trainer": trainers.get(name, ""),
                     "|Δ|": f["|Δ|"]})
        folders.append(name)
    return CaptureSet(str(path), settings, folders, rows, list(res.get("errors", [])), res.get("tokenizer"),
                      bool(res["totals"].get("cancelled")))


def _short(name: str, root: Path) -> str:
    """A capture folder named relative to the opened folder."""
    try:
        return Path(name).resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return name


def capture_set_page(cs: CaptureSet, page: int, page_size: int, *, sort: str = "row", descending: bool = False,
                     filters: Any = None) -> tuple[list[dict[str, Any]], int, int]:
    """(rows of page ``page`` (0-based), rows matching, pages) of ``cs``'s table, filtered with
    :class:`viewer.row_browser.Filters` and sorted by any column; rows without the sort's value last."""
    rows = [r for r in cs.table() if filters is None or filters.match(r)]
    if sort in CAPTURE_SET_COLUMNS and sort != "row":
        have = [r for r in rows if r.get(sort) not in (None, "")]
        have.sort(key=lambda r: r[sort] if isinstance(r[sort], (int, float)) else str(r[sort]).lower(),
                  reverse=descending)
        rows = have + [r for r in rows if r.get(sort) in (None, "")]
    elif descending:
        rows = rows[::-1]
    size = max(1, int(page_size))
    pages = max(1, (len(rows) + size - 1) // size)
    page = min(max(0, int(page)), pages - 1)
    return rows[page * size:(page + 1) * size], len(rows), pages
