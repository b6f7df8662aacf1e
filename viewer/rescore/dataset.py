"""Rescore a whole dataset: every rollout of a folder of captures or a data file, one per-token table.

``python -m viewer rescore FOLDER_OR_DATASET`` (docs/MISMATCH.md, "Across a dataset"). Rollouts are
found and read one at a time as the drift scan reads them (:func:`viewer.drift.corpus.iter_rollouts`:
an unreadable one is listed in ``errors`` and the run goes on), each is rescored with
:func:`viewer.rescore.rescore` (the same rows, forward pass and Δ as one rollout), and every trained
token becomes one row of the table :data:`TOKEN_FIELDS` describes: its logprobs, Δ, and TRL 1.16's
importance ratio under each of the four modes with whether the bounds clip or zero it
(:mod:`viewer.rescore.importance`). :mod:`.dsummary` turns that table into the summary; the Ray
engine (:mod:`.ray_rescore`) runs this module's :func:`rescore_rollouts` per block and gives the same
table. Cancel is honoured between rollouts and inside one; a rollout cut short is left out whole, so
a cancelled run keeps exactly the rollouts it finished (``cancelled``: the result is partial).
"""
from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

from viewer.config import Settings
from viewer.rescore import importance as IS
from viewer.rollout import Rollout

__all__ = ["RescoreOptions", "TOKEN_FIELDS", "token_schema", "empty_columns", "rescore_rollouts", "rescore_dataset",
           "is_dataset_source", "AUTO_MODEL", "RECORDED", "named_rollouts", "recorded_rescore"]

AUTO_MODEL = "auto"  # --model auto: each rollout with the model it was sampled from (Rollout.model)
RECORDED = "recorded"  # --model recorded: the trainer logprobs the file holds (viewer.rescore.recorded), no model

# (column, arrow type): the per-token parquet schema, documented in docs/MISMATCH.md ("Per-token parquet")
TOKEN_FIELDS: list[tuple[str, str]] = [
    ("rollout", "string"), ("model", "string"), ("trainer_model", "string"), ("reward", "float64"),
    ("turn", "int64"), ("row", "int64"), ("position", "int64"), ("id", "int64"),
    ("verdict", "string"), ("context", "string"),
    ("sampler", "float64"), ("trainer", "float64"), ("delta", "float64"),
    *[(f"ratio.{m}", "float32") for m in IS.MODES],
    *[(f"{'clipped' if m.endswith('_truncate') else 'zeroed'}.{m}", "bool_") for m in IS.MODES],
]


def changed_column(mode: str) -> str:
    """The bool column saying the bounds changed a token's weight: clipped (truncate) or zeroed (mask)."""
    return f"{'clipped' if mode.endswith('_truncate') else 'zeroed'}.{mode}"


def token_schema():
    import pyarrow as pa

    return pa.schema([(name, getattr(pa, typ)()) for name, typ in TOKEN_FIELDS])


def empty_columns() -> dict[str, list[Any]]:
    return {name: [] for name, _ in TOKEN_FIELDS}


@dataclass(frozen=True)
class RescoreOptions:
    """What a dataset rescore runs with (plain values: they travel to Ray workers as a dict)."""

    model: str
    trainer: str | None = None
    train_turns: str | None = None
    fork_threshold: int | None = None
    tokenizer: str | None = None
    device: str | None = None
    dtype: str | None = None
    temperature: float | None = None
    clip_min: float | None = IS.DEFAULT_CLIP_MIN
    clip_max: float | None = IS.DEFAULT_CLIP_MAX
    # torch threads for the forward (None: leave torch's own). A bf16 forward on CPU rounds differently
    # with another thread count, so the Ray engine gives its actors the driver's count (ray_rescore.py)
    threads: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def is_dataset_source(source: str) -> bool:
    """A folder that holds capture folders (not one itself), a parquet / JSONL data file or ``hf://``:
    rescored as a dataset. A capture folder or a trace file is one rollout (the per-turn rescore)."""
    from pathlib import Path

    from viewer.drift.corpus import is_data_file
    from viewer.layout import is_capture_dir

    text = str(source)
    if text.startswith("hf://"):
        return True
    p = Path(text).expanduser()
    return (p.is_dir() and not is_capture_dir(p)) or is_data_file(str(p))


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v)


def _reward(r: Rollout) -> float | None:
    return float(r.reward) if _finite(r.reward) and not isinstance(r.reward, bool) else None


def add_tokens(cols: dict[str, list[Any]], name: str, rollout: Rollout, res: Any, trainer_model: str,
               clip_min: float | None, clip_max: float | None) -> int:
    """Append one rescored rollout's trained tokens to ``cols``; returns how many. Ratios per mode are
    TRL's on this rollout's rows (a token mode's ratio is the token's own; a sequence mode's, its row's)."""
    rows = IS.scored_rows(res)  # (row, [(position, turn, id, sampler, trainer)]) in TRL's batch order
    batch = IS.batch_from_rescore(res)
    per_mode: dict[str, Any] = {}
    for mode in IS.MODES:
        try:
            per_mode[mode] = IS.importance(batch, mode, clip_min, clip_max)
        except ValueError:  # e.g. a truncate mode without any bound: no ratio for that mode
            per_mode[mode] = None
    turn_info = {t.turn: (t.verdict, t.context) for t in res.turns}
    reward = _reward(rollout)
    n = 0
    for k, (row, toks) in enumerate(rows):
        changed = {m: (r.changed(k) if r is not None else None) for m, r in per_mode.items()}
        for i, (p, turn, tid, s, t) in enumerate(toks):
            verdict, context = turn_info.get(turn, (None, None))
            d = t - s if _finite(s) and _finite(t) else None
            vals = {"rollout": name, "model": rollout.model, "trainer_model": trainer_model, "reward": reward,
                    "turn": turn, "row": row, "position": p, "id": tid, "verdict": verdict, "context": context,
                    "sampler": float(s) if _finite(s) else None, "trainer": float(t) if _finite(t) else None,
                    "delta": d}
            for m, r in per_mode.items():
                vals[f"ratio.{m}"] = float(r.ratio[k][i]) if r is not None else None
                vals[changed_column(m)] = bool(changed[m][i]) if r is not None else None
            for c, v in vals.items():
                cols[c].append(v)
            n += 1
    return n


class _Tokenizers:
    """Tokenizers for trl-message's re-render, resolved once per (model, capture folder): the drift
    scan's cache, or the one ``--tokenizer`` override."""

    def __init__(self, settings: Settings, override: str | None):
        from viewer.drift.corpus import TokenizerCache

        self.fixed = None
        if override:
            from viewer.tokenizer import resolve_tokenizer

            self.fixed = resolve_tokenizer(None, override)
            if self.fixed.tokenizer is None:
                raise ValueError(f"tokenizer {override!r} could not be loaded: {self.fixed.message}")
        self.cache = TokenizerCache(settings)

    def __call__(self, r: Rollout):
        return (self.fixed or self.cache(r)).tokenizer

    def name(self, r: Rollout) -> str | None:
        """The name ``tokenizer_for`` gives this rollout: what a one-rollout ``rescore --json`` says."""
        return (self.fixed or self.cache(r)).name


def _model_for(r: Rollout, opts: RescoreOptions) -> str:
    if opts.model != AUTO_MODEL:
        return opts.model
    if not r.model:
        raise ValueError("no model recorded in this rollout: name one with --model")
    return str(r.model)


def rescore_rollouts(rollouts: Iterable[tuple[str, Rollout]], settings: Settings, opts: RescoreOptions, *,
                     progress: Callable[[int], None] | None = None,
                     cancel: threading.Event | None = None) -> dict[str, Any]:
    """Rescore named rollouts one after the other. Returns ``{"columns", "rollouts", "errors",
    "trainers", "temperatures", "tokenizers", "cancelled"}``: the token columns, the names rescored (in order), the
    rollouts that failed (``{"source", "error"}``; the run goes on), rollouts per trainer mode and per
    temperature. ``progress(done)`` after each rollout, failed ones included."""
    from viewer.budgets import BudgetExceeded
    from viewer.drift import choose_spec
    from viewer.rescore import rescore
    from viewer.rescore.model import ModelUnavailable
    from viewer.sources import SourceError

    cols = empty_columns()
    out: dict[str, Any] = {"columns": cols, "rollouts": [], "errors": [], "trainers": {}, "temperatures": {},
                           "tokenizers": {}, "cancelled": False}
    toks = _Tokenizers(settings, opts.tokenizer)
    if opts.threads and opts.model != RECORDED:
        from viewer.rescore.model import import_torch

        import_torch().set_num_threads(int(opts.threads))
    lim = settings.limits()
    done = 0
    unavailable: dict[str, str] = {}  # model -> why it did not load: tried once a run (issue 41: an offline
    for name, r in rollouts:          # --model auto spent 10 minutes retrying the Hub, once per rollout)
        if cancel is not None and cancel.is_set():
            out["cancelled"] = True
            break
        try:
            spec = choose_spec(r, opts.trainer, opts.train_turns, opts.fork_threshold)
            tok = toks(r) if spec.mode == "trl-message" else None
            model = _model_for(r, opts)
            if model in unavailable:
                raise ModelUnavailable(model, unavailable[model])
            res = recorded_rescore(r, settings) if model == RECORDED else rescore(
                r, model, settings, spec=spec, tok=tok, device=opts.device, dtype=opts.dtype,
                temperature=opts.temperature, cancel=cancel)
        except (ValueError, RuntimeError, OSError, SourceError, BudgetExceeded) as e:
            # one rollout the trainer cannot train on (or whose model will not load): said, then the next
            from viewer.rescore import TorchMissing

            if isinstance(e, TorchMissing):
                raise
            if isinstance(e, ModelUnavailable):
                unavailable.setdefault(e.model, str(e))
            out["errors"].append({"source": name, "error": getattr(e, "message", None) or str(e)})
            done += 1
            if progress is not None:
                progress(done)
            continue
        if res.cancelled:  # cut short inside: left out whole, so what is kept is complete
            out["cancelled"] = True
            break
        add_tokens(cols, name, r, res, model, opts.clip_min, opts.clip_max)
        # every token kept is held in memory until the summary: within the rows budget
        lim.check("rows_scanned", len(cols["rollout"]), "dataset rescore: trained tokens kept for the summary")
        key = f"{spec.mode}/{spec.train_turns}"
        out["trainers"][key] = out["trainers"].get(key, 0) + 1
        tk = repr(float(res.temperature))
        out["temperatures"][tk] = out["temperatures"].get(tk, 0) + 1
        tn = str(toks.name(r))  # the one tokenizer decision, as every other front end names it
        out["tokenizers"][tn] = out["tokenizers"].get(tn, 0) + 1
        out["rollouts"].append(name)
        done += 1
        if progress is not None:
            progress(done)
    return out


def named_rollouts(rollouts: Iterable[Rollout]) -> Iterable[tuple[str, Rollout]]:
    """(name, rollout): the rollout's source, made unique as the drift scan does (``#n``)."""
    seen: set[str] = set()
    for n, r in enumerate(rollouts):
        name = str(r.source) if r.source else f"rollout-{n}"
        if name in seen:
            name = f"{name}#{n}"
        seen.add(name)
        yield name, r


def recorded_rescore(r: Rollout, settings: Settings) -> Any:
    """``--model recorded``: the rollout's own trainer logprobs (a prime-rl token export), no model run."""
    from viewer.rescore.recorded import recorded_result

    res = recorded_result(r, settings.rescore_flag_delta)
    if res is None:
        raise ValueError("--model recorded: this rollout records no trainer logprobs (name a model)")
    return res


def check_model(opts: RescoreOptions, settings: Settings) -> None:
    """A named model must load before anything is read (exit 2 at once, not one error per rollout)."""
    if opts.model in (AUTO_MODEL, RECORDED):
        return
    from viewer.rescore import model as m

    if not m.torch_available():
        raise m.TorchMissing()
    m.load_model(m.resolve_model(opts.model, settings), opts.device or settings.rescore_device,
                 opts.dtype or settings.rescore_dtype)


def nothing_rescored(source: str, errors: list[dict[str, str]]) -> str:
    why = "; ".join(f"{e['source']}: {e['error']}" for e in errors[:3])
    return f"{source}: no rollout could be rescored" + (f" ({why})" if why else "")


def rescore_dataset(source: str, settings: Settings | None = None, opts: RescoreOptions | None = None, *,
                    limit: int | None = None, progress: Callable[[int, int | None], None] | None = None,
                    cancel: threading.Event | None = None) -> dict[str, Any]:
    """Rescore every rollout of SOURCE in this process. Returns ``{"table", "rollouts", "errors",
    "trainers", "temperatures", "tokenizers", "cancelled", "total"}`` (``table``: a pyarrow table, :func:`token_schema`).

    Raises :class:`viewer.drift.corpus.ScanInputError` when SOURCE is missing or no rollout of it
    could be rescored, ValueError for a model that cannot be loaded, TorchMissing without torch."""
    import pyarrow as pa

    from viewer.drift.corpus import ScanInputError, iter_rollouts

    settings = settings or Settings()
    if opts is None:
        raise ValueError("rescore_dataset needs RescoreOptions (at least the model)")
    check_model(opts, settings)
    rollouts = iter_rollouts(source, settings, limit)
    if rollouts.peek() is None:
        raise ScanInputError(nothing_rescored(source, rollouts.errors))
    total = rollouts.total()

    def prog(done: int) -> None:  # rollouts rescored or failed, plus those that could not be read
        if progress is not None:
            progress(done + len(rollouts.errors), total)

    res = rescore_rollouts(named_rollouts(rollouts), settings, opts, progress=prog, cancel=cancel)
    res["errors"] = list(rollouts.errors) + res["errors"]
    if not res["rollouts"] and not res["cancelled"]:
        raise ScanInputError(nothing_rescored(source, res["errors"]))
    res["table"] = pa.table(res.pop("columns"), schema=token_schema())
    # a data file read row by row has no count up front; a run that read it all knows it (as Ray's plan does)
    res["total"] = total if total is not None or res["cancelled"] else len(res["rollouts"]) + len(res["errors"])
    return res
