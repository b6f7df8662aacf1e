"""A dataset rescore kept beside the dataset's index, and the |Δ| / ratio figures the index takes from it.

A dataset rescore (:func:`viewer.rescore.dataset.rescore_dataset`: the app's *Rescore dataset*, or
``python -m viewer rescore SOURCE --out``) gives one row per trained token (docs/MISMATCH.md, "Per-token
parquet"). :func:`save` keeps that table where the source's index lives (:func:`beside` the index: beside a local
dataset, else in the user cache), replacing the last one whole; :func:`fill_index` is what the index build calls
(:mod:`viewer.search.index`): every indexed rollout the file names gets, per turn, the largest |sampler − trainer|
and the largest / smallest exp(trainer − sampler) with where each is among the turn's output tokens, and per
rollout the largest of them, so that ``delta>0.5`` and ``ratio>2`` find rescored rollouts. Figures are computed
from the file's raw ``delta`` column (trainer − sampler), so a ratio here is the raw one the ``ratio`` term means,
not TRL's clipped weight. :func:`rollout_figures` is the per-rollout summary the Datasets tab ranks by. No gradio.
"""
from __future__ import annotations

import json
import math
import os
import re
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from viewer.config import CACHE_DIR

from .columns import SEP

__all__ = ["REQUIRED", "META_KEY", "INDEX_DIR", "RescoreFileError", "beside", "save", "read", "saved_meta", "rollout_figures", "turn_figures",
           "fill_index", "rollout_key"]

REQUIRED = ("rollout", "turn", "row", "position", "id", "delta")  # the per-token columns the figures read
META_KEY = b"rollout_inspector.rescore"  # the parquet's key/value metadata: what was run, when
INDEX_DIR = ".rollout-inspector"  # as viewer.search.index names it (which imports this module)
RESCORED = "rescored"  # the folder beside the index (not inside it: a build deletes the parquet files it did not write)
_TURN_COLS = ("max_delta", "max_delta_at", "max_ratio", "max_ratio_at", "min_ratio", "min_ratio_at")


class RescoreFileError(ValueError):
    """A file that is not a dataset rescore's per-token table (the message names it and what it lacks)."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def beside(index_folder: str | Path) -> Path:
    """Where the rescore of the source whose index is ``index_folder`` (:func:`viewer.search.index.index_path`) is
    kept: ``<folder>/.rollout-inspector/rescored/rescore.parquet`` beside a local folder (a data file's:
    ``rescored/<file name>.parquet``), else the user cache under the index's digest: the same places, for the
    same reasons, as the index. Not inside the index folder: a build deletes the parquet files it did not write."""
    ip = Path(index_folder)
    if ip.name == "index" and ip.parent.name == INDEX_DIR:  # a local folder
        return ip.parent / RESCORED / "rescore.parquet"
    if ip.parent.name == "index" and ip.parent.parent.name == INDEX_DIR:  # a local data file
        return ip.parent.parent / RESCORED / f"{ip.name}.parquet"
    return CACHE_DIR / RESCORED / f"{ip.name}.parquet"


def save(path: str | Path, table: pa.Table, **meta: Any) -> Path:
    """Keep ``table`` (a dataset rescore's per-token table) at ``path`` (:func:`beside` the source's index), with
    ``meta`` (source, model, …) in the file; written to a temporary name and moved over the last one, so a reader
    sees one whole file or the other."""
    _check(table.schema.names, "the rescore table")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"saved": time.time(), "rollouts": len(set(table.column("rollout").to_pylist())),
           "tokens": table.num_rows, **meta}
    schema = table.schema.with_metadata({**(table.schema.metadata or {}), META_KEY: json.dumps(doc).encode()})
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    pq.write_table(table.replace_schema_metadata(schema.metadata), tmp, compression="zstd")
    os.replace(tmp, path)
    return path


def _check(names: list[str], what: str) -> None:
    missing = [c for c in REQUIRED if c not in names]
    if missing:
        raise RescoreFileError(f"{what}: not a dataset rescore's per-token table (no {', '.join(missing)} column)")


def read(path: str | Path) -> pa.Table:
    """The columns the figures need from a per-token parquet; :class:`RescoreFileError` (by name) when it is not one."""
    try:
        names = pq.read_schema(path).names
    except (OSError, pa.ArrowException) as e:
        raise RescoreFileError(f"{path}: not a readable parquet file ({e})") from None
    _check(names, str(path))
    return pq.read_table(path, columns=list(REQUIRED))


def saved_meta(path: str | Path) -> dict[str, Any] | None:
    """What :func:`save` recorded in the file (model, rollouts, when), or None."""
    try:
        raw = (pq.read_schema(path).metadata or {}).get(META_KEY)
        return json.loads(raw) if raw else None
    except (OSError, ValueError, pa.ArrowException):
        return None


def _ratio(d: float) -> float:
    return math.exp(max(min(d, 700.0), -700.0))


def rollout_figures(table: pa.Table, names: list[str] | None = None) -> dict[str, dict[str, Any]]:
    """Per rollout name (``names``, e.g. every rollout a run rescored, some with no trained token; else the table's,
    in its order): trained tokens with a Δ, mean and largest |Δ|, largest and smallest exp(Δ) (a ratio; None
    without a token). Rounded as a one-rollout rescore's totals are (6 places)."""
    t = table.select(["rollout", "delta"]).filter(pc.is_finite(table.column("delta")))
    t = t.append_column("absd", pc.abs(t.column("delta")))
    g = t.group_by("rollout", use_threads=False).aggregate([("absd", "mean"), ("absd", "max"), ("delta", "max"),
                                                           ("delta", "min"), ("delta", "count")])
    got = {r["rollout"]: r for r in g.to_pylist()}
    out: dict[str, dict[str, Any]] = {}
    for name in dict.fromkeys(names if names is not None else table.column("rollout").to_pylist()):
        r = got.get(name)
        out[name] = {"tokens": 0, "mean_abs_delta": None, "max_abs_delta": None, "max_ratio": None,
                     "min_ratio": None} if r is None else {
            "tokens": r["delta_count"], "mean_abs_delta": round(r["absd_mean"], 6),
            "max_abs_delta": round(r["absd_max"], 6), "max_ratio": round(_ratio(r["delta_max"]), 6),
            "min_ratio": round(_ratio(r["delta_min"]), 6)}
    return out


def rollout_key(source: str, row: int | None, label: str | None) -> tuple[str, str]:
    """What ties an indexed rollout to the rescore's ``rollout`` name (the rollout's ``source``): a capture by its
    path, a data file's row by its label (``<file> row N``, the index keeps the name's last part)."""
    if row is None:
        return ("path", source if source.startswith("hf://") else os.path.normpath(os.path.abspath(source)))
    return ("row", str(label))


def _name_key(name: str) -> tuple[str, str]:
    if re.search(r" row \d+$", name):
        return ("row", name.rstrip("/").rsplit("/", 1)[-1])
    return rollout_key(name, None, None)


def turn_figures(table: pa.Table) -> dict[tuple[str, str], dict[int, dict[str, Any]]]:
    """Per rollout (:func:`rollout_key`) and turn: the largest |Δ| and the largest / smallest ratio, each with the
    (row, position) of its token, and every rescored token's (row, position, id) to place them in the turn."""
    cols = {c: table.column(c).to_pylist() for c in REQUIRED}
    out: dict[tuple[str, str], dict[int, dict[str, Any]]] = {}
    keys: dict[str, tuple[str, str]] = {}
    for name, turn, row, pos, tid, d in zip(*(cols[c] for c in REQUIRED)):
        if d is None or not math.isfinite(d) or turn is None:
            continue
        key = keys.get(name) or keys.setdefault(name, _name_key(str(name)))
        f = out.setdefault(key, {}).get(turn)
        if f is None:
            f = out[key][turn] = {"abs": (abs(d), row, pos), "hi": (d, row, pos), "lo": (d, row, pos), "toks": {}}
        if abs(d) > f["abs"][0]:
            f["abs"] = (abs(d), row, pos)
        if d > f["hi"][0]:
            f["hi"] = (d, row, pos)
        if d < f["lo"][0]:
            f["lo"] = (d, row, pos)
        f["toks"].setdefault(row, []).append((pos, tid))
    return out


def _offsets(ids: list[str], toks: dict[int, list[tuple[int, int]]]) -> dict[int, int | None]:
    """Per trainer row: the row position of the turn's first output token, found where the rescored tokens' ids are
    the turn's output ids (a re-rendered row whose ids differ places nothing: None)."""
    out: dict[int, int | None] = {}
    for row, got in toks.items():
        p0, id0 = got[0]
        out[row] = next((p0 - k for k, x in enumerate(ids) if x == str(id0)
                         and all(0 <= p - (p0 - k) < len(ids) and ids[p - (p0 - k)] == str(i) for p, i in got)), None)
    return out


def _turn_values(f: dict[str, Any], ids_text: str | None) -> dict[str, Any]:
    ids = (ids_text or "").strip(SEP).split(SEP) if ids_text else []
    off = _offsets(ids, f["toks"])

    def at(row: int, pos: int) -> int | None:
        o = off.get(row)
        return None if o is None else pos - o

    return {"max_delta": f["abs"][0], "max_delta_at": at(*f["abs"][1:]), "max_ratio": _ratio(f["hi"][0]),
            "max_ratio_at": at(*f["hi"][1:]), "min_ratio": _ratio(f["lo"][0]), "min_ratio_at": at(*f["lo"][1:])}


def _fill_rows(row: dict[str, Any], turns: list[dict[str, Any]], figs: dict[int, dict[str, Any]]) -> None:
    for t in turns:
        f = figs.get(t["turn"])
        if f is not None:
            t.update(_turn_values(f, t.get("ids")))
    deltas = [t["max_delta"] for t in turns if t.get("max_delta") is not None]
    ratios = [t["max_ratio"] for t in turns if t.get("max_ratio") is not None]
    row["max_delta"] = max(deltas) if deltas else row.get("max_delta")
    row["max_ratio"] = max(ratios) if ratios else row.get("max_ratio")


def _fill_tables(ro: pa.Table, tu: pa.Table | None, figs: dict) -> tuple[pa.Table, pa.Table | None]:
    """The copied rows of an earlier build with the rescore's figures (only the rollouts it names change)."""
    keys = [rollout_key(s, r, lab) for s, r, lab in zip(ro.column("source").to_pylist(), ro.column("row").to_pylist(),
                                                         ro.column("label").to_pylist())]
    rids = ro.column("rid").to_pylist()
    hit = {rid: figs[k] for rid, k in zip(rids, keys) if k in figs}
    if not hit or tu is None:
        return ro, tu
    want = ["rid", "turn", "ids", *_TURN_COLS]
    sel = pc.is_in(tu.column("rid"), value_set=pa.array(list(hit), pa.int64()))
    idx = [i for i, v in enumerate(sel.to_pylist()) if v]
    part = tu.take(pa.array(idx, pa.int64())).select(want).to_pylist()
    by_rid: dict[int, list[dict[str, Any]]] = {}
    for t in part:
        by_rid.setdefault(t["rid"], []).append(t)
    rows = {rid: {"max_delta": None, "max_ratio": None} for rid in hit}
    for rid, ts in by_rid.items():
        _fill_rows(rows[rid], ts, hit[rid])
    tcols = {c: tu.column(c).to_pylist() for c in _TURN_COLS}
    for i, t in zip(idx, part):
        for c in _TURN_COLS:
            tcols[c][i] = t.get(c)
    for c in _TURN_COLS:
        tu = tu.set_column(tu.schema.get_field_index(c), tu.schema.field(c), pa.array(tcols[c], tu.schema.field(c).type))
    for c in ("max_delta", "max_ratio"):
        vals = ro.column(c).to_pylist()
        vals = [rows[rid][c] if rid in rows and rows[rid][c] is not None else v for rid, v in zip(rids, vals)]
        ro = ro.set_column(ro.schema.get_field_index(c), ro.schema.field(c), pa.array(vals, ro.schema.field(c).type))
    return ro, tu


def fill_index(index_folder: str | Path, new: list[tuple[dict[str, Any], list[dict[str, Any]]]],
               old_ro: pa.Table | None, old_tu: pa.Table | None,
               errors: list[dict[str, str]]) -> tuple[pa.Table | None, pa.Table | None]:
    """The index build's rows with the saved rescore of the source indexed at ``index_folder`` applied, when there is
    one (:func:`beside`): ``new`` (the rollouts
    just read: (its row, its turn rows), changed in place) and the rows copied from the last build
    (returned). A rescore file that cannot be read is named in ``errors`` and the index is built without it."""
    path = beside(index_folder)
    if not path.is_file():
        return old_ro, old_tu
    try:
        figs = turn_figures(read(path))
    except RescoreFileError as e:
        errors.append({"source": str(path), "error": e.message})
        return old_ro, old_tu
    for row, turns in new:
        got = figs.get(rollout_key(row["source"], row["row"], row["label"]))
        if got is not None:
            _fill_rows(row, turns, got)
    if old_ro is not None and old_ro.num_rows:
        old_ro, old_tu = _fill_tables(old_ro, old_tu, figs)
    return old_ro, old_tu

