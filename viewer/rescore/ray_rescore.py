"""A dataset rescore on Ray: ``python -m viewer rescore SOURCE --model M --engine ray``.

The drift scan's machinery (:mod:`viewer.drift.ray_engine`): the same blocks (one per capture folder,
one per parquet row group), the same embedded local Ray or cluster (``--ray-address`` /
``RAY_ADDRESS``), a pool of ``ray_workers`` actors. Each actor rescores its blocks with the local
engine's own function (:func:`viewer.rescore.dataset.rescore_rollouts`; its model stays loaded
between blocks, its torch thread count the driver's: a bf16 forward on CPU rounds differently with
another count) and returns the per-token rows as an Arrow table with one extra summary row. The
driver puts the blocks back in plan order, which is the order the local engine reads them in, so the
table (and the summary computed from it) equals the local run's. Progress per block; Cancel stops
between blocks and keeps the blocks that came back (``cancelled``).
"""
from __future__ import annotations

import json
import threading
from typing import Any, Callable

from viewer.config import Settings
from viewer.rescore.dataset import RescoreOptions

__all__ = ["rescore_with_ray", "rescore_block"]


def rescore_block(block: dict[str, Any], settings: Settings, opts: RescoreOptions) -> dict[str, Any]:
    """Rescore one block (a capture folder / file, or some rows of a data file) with the local engine."""
    from viewer.drift.corpus import ScanInputError, iter_rollouts
    from viewer.rescore.dataset import named_rollouts, rescore_rollouts

    errors: list[dict[str, str]] = []
    if block.get("rows") is None:
        try:
            rollouts: Any = iter_rollouts(block["spec"], settings)
        except ScanInputError as e:
            return _failed(block, e.message)
        read = rollouts
    else:
        from viewer.sources import SourceError, open_dataset

        ds = open_dataset(block["spec"], settings)
        rollouts = []
        for row in block["rows"]:
            try:
                rollouts.append(ds.rollout(row))
            except SourceError as e:
                errors.append({"source": f"{block['spec']} row {row}", "error": e.message})
        read = None
    res = rescore_rollouts(named_rollouts(rollouts), settings, opts)
    res["errors"] = errors + (list(read.errors) if read is not None else []) + res["errors"]
    return res


def _failed(block: dict[str, Any], why: str) -> dict[str, Any]:
    from viewer.rescore.dataset import empty_columns

    return {"columns": empty_columns(), "rollouts": [], "errors": [{"source": str(block["spec"]), "error": why}],
            "trainers": {}, "temperatures": {}, "tokenizers": {}, "cancelled": False}


class _Rescorer:
    """A Ray actor: rescores blocks; its model (and tokenizers) stay loaded between blocks."""

    def __init__(self, settings: dict[str, Any], opts: dict[str, Any]):
        self.settings, self.opts = Settings(**settings), RescoreOptions(**opts)

    def __call__(self, batch):
        import pyarrow as pa

        from viewer.rescore.dataset import token_schema

        out = []
        for item in batch.to_pylist():
            res = rescore_block(json.loads(item["block"]), self.settings, self.opts)
            toks = pa.table(res.pop("columns"), schema=token_schema())
            res["block"] = item["index"]
            # every row names its block: the driver puts blocks back in plan order, whatever order they came in
            toks = toks.append_column("_block", pa.array([item["index"]] * toks.num_rows, pa.int64()))
            summary = pa.table({f.name: pa.nulls(1, f.type) for f in toks.schema})
            out.append(toks.append_column("summary", pa.array([None] * toks.num_rows, pa.string())))
            out.append(summary.append_column("summary", pa.array([json.dumps(res)], pa.string())))
        return pa.concat_tables(out)


def rescore_with_ray(source: str, settings: Settings | None = None, opts: RescoreOptions | None = None, *,
                     address: str | None = None, limit: int | None = None,
                     progress: Callable[[int, int | None], None] | None = None,
                     cancel: threading.Event | None = None) -> dict[str, Any]:
    """:func:`viewer.rescore.dataset.rescore_dataset` on Ray: the same result (``table`` equal to the
    local run's), rollouts counted per block. Raises ScanInputError without Ray or when no rollout
    could be rescored."""
    from viewer.drift.corpus import ScanInputError
    from viewer.drift.ray_engine import init_ray, plan_blocks, require_ray
    from viewer.rescore.dataset import check_model, nothing_rescored, token_schema

    ray = require_ray()
    import pyarrow as pa
    import pyarrow.compute as pc

    settings = settings or Settings()
    if opts is None:
        raise ValueError("rescore_with_ray needs RescoreOptions (at least the model)")
    check_model(opts, settings)  # a model that cannot load fails here, before Ray starts
    if not opts.threads:  # the local engine's thread count: the same rounding, so the same table
        from dataclasses import replace

        from viewer.rescore.model import import_torch

        opts = replace(opts, threads=import_torch().get_num_threads())
    blocks = plan_blocks(source, settings, limit)
    total = sum(len(b["rows"]) if b["rows"] is not None else 1 for b in blocks)
    parts: dict[int, dict[str, Any]] = {}  # block index -> its summary row (the block is complete)
    toks: list[Any] = []
    cancelled = False
    started = init_ray(settings, address)
    try:
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False
        items = [{"block": json.dumps(b), "index": i} for i, b in enumerate(blocks)]
        workers = max(1, min(settings.ray_workers, len(blocks)))
        fields = {f: getattr(settings, f) for f in settings.__dataclass_fields__}
        done = 0
        if items:
            ds = ray.data.from_items(items, override_num_blocks=len(items))
            mapped = ds.map_batches(_Rescorer, fn_constructor_kwargs={"settings": fields, "opts": opts.to_dict()},
                                    batch_size=1, batch_format="pyarrow", concurrency=workers, num_cpus=1)
            for batch in mapped.iter_batches(batch_size=None, batch_format="pyarrow"):
                summ = batch.column("summary")
                is_tok = pc.is_null(summ)
                toks.append(batch.filter(is_tok).drop_columns(["summary"]))
                for s in batch.filter(pc.invert(is_tok)).column("summary").to_pylist():
                    part = json.loads(s)
                    parts[part["block"]] = part
                    done += len(part["rollouts"]) + len(part["errors"])
                if progress is not None:
                    progress(min(done, total), total)
                if cancel is not None and cancel.is_set():
                    cancelled = True
                    break
    finally:
        if started:
            ray.shutdown()
    order = sorted(parts)
    table = token_schema().empty_table()
    if toks:
        allt = pa.concat_tables(toks)
        allt = allt.filter(pc.is_in(allt["_block"], pa.array(order, pa.int64())))  # complete blocks only
        # sort_indices is stable: within a block, rows keep the order the actor wrote them in
        allt = allt.take(pc.sort_indices(allt, sort_keys=[("_block", "ascending")]))
        table = allt.drop_columns(["_block"]).cast(token_schema())
    out: dict[str, Any] = {"table": table, "rollouts": [], "errors": [], "trainers": {}, "temperatures": {},
                           "tokenizers": {}, "cancelled": cancelled or (cancel is not None and cancel.is_set()), "total": total}
    for i in order:
        part = parts[i]
        out["rollouts"] += part["rollouts"]
        out["errors"] += part["errors"]
        for k in ("trainers", "temperatures", "tokenizers"):
            for key, n in part[k].items():
                out[k][key] = out[k].get(key, 0) + n
    if not out["rollouts"] and not out["cancelled"]:
        raise ScanInputError(nothing_rescored(source, out["errors"]))
    return out
