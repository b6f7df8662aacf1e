"""The drift scan on Ray Data: ``python -m viewer drift SOURCE --engine ray [--ray-address ADDR]``.

The source is cut into blocks (one per capture folder; one per parquet row group of a data
file; a JSONL file or an ``hf://`` dataset is one block), each block is scanned by a pool
of Ray actors with the local engine (:func:`viewer.drift.corpus.scan_source`, tokenizers
loaded once per actor), and the per-turn rows come back to the driver as Arrow tables,
streamed into ``--out FILE.parquet`` (:mod:`viewer.drift.scanout`) as they arrive. Totals
are summed from per-block totals, so they equal the local engine's.

Ray is an optional extra (``requirements-scale.txt``, the ``scale`` extra). Without an
address (and no ``RAY_ADDRESS``) an embedded local Ray is started with
``Settings.ray_num_cpus`` CPUs and a small object store (``ray_object_store_mb``) and shut
down afterwards, its processes with it; with one, the scan joins that cluster and ships
the ``viewer`` package to its workers (their Python needs this project's requirements).
Progress is reported per block; cancelling stops between blocks.
"""
from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any, Callable

from viewer.config import Settings
from viewer.drift.results import ScanError, TokenizerUsed, no_readable_rollout

__all__ = ["scan_with_ray", "plan_blocks", "ray_available", "init_ray"]

_PKG = Path(__file__).resolve().parent.parent  # the viewer package, shipped to cluster workers


def require_ray():
    """Ray with Ray Data, imported; else :class:`ScanInputError` saying why (both Ray engines start here)."""
    from viewer.drift.corpus import ScanInputError

    why = ray_available()
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as e:
        why = why or f"the ray engine needs Ray Data (requirements-scale.txt): {e}"
    if why:
        raise ScanInputError(why)
    return ray


def ray_available() -> str | None:
    """None when Ray is installed, else why not. Looks without importing it (the app asks at start-up;
    importing Ray costs seconds and memory)."""
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        return "the ray engine needs Ray Data: pip install -r requirements-scale.txt (or the 'scale' extra)"
    return None


def plan_blocks(source: str | Path, settings: Settings, limit: int | None = None) -> list[dict[str, Any]]:
    """The blocks of SOURCE: ``{"spec"}`` (scan it whole) or ``{"spec", "rows"}`` (those rows of a
    parquet data file, one row group's worth)."""
    from viewer.drift.corpus import is_data_file, discover

    specs = discover(source, settings)
    if len(specs) == 1 and is_data_file(specs[0]) and specs[0].lower().endswith(".parquet"):
        return _parquet_blocks(specs[0], settings, limit)
    return [{"spec": s, "rows": None} for s in (specs[:limit] if limit else specs)]


def _parquet_blocks(spec: str, settings: Settings, limit: int | None) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    from viewer.sources import open_dataset

    src = open_dataset(spec, settings)
    if src.is_capture:
        return [{"spec": spec, "rows": None}]
    md = pq.ParquetFile(spec).metadata
    vis = src.visible_rows()
    rows = list(vis) if vis is not None else list(range(md.num_rows))
    if limit:
        rows = rows[:limit]
    blocks, start = [], 0
    for g in range(md.num_row_groups):
        stop = start + md.row_group(g).num_rows
        mine = [r for r in rows if start <= r < stop]
        if mine:
            blocks.append({"spec": spec, "rows": mine})
        start = stop
    return blocks


def scan_block(block: dict[str, Any], settings: Settings, kw: dict[str, Any]) -> dict[str, Any]:
    """Scan one block with the local engine; an unreadable block is an error, not a failure."""
    from viewer.drift.corpus import ScanInputError, scan_source

    errors: list[dict[str, str]] = []
    if block.get("rows") is None:
        src: Any = block["spec"]
    else:
        from viewer.sources import SourceError, open_dataset

        ds = open_dataset(block["spec"], settings)
        src = []
        for row in block["rows"]:
            try:
                src.append(ds.rollout(row))
            except SourceError as e:
                errors.append(ScanError(source=f"{block['spec']} row {row}", error=e.message))
    try:
        if isinstance(src, list) and not src:
            raise ScanInputError("no readable rollout")
        res = scan_source(src, settings, workers=1, **kw)  # the actors are the processes
    except ScanInputError as e:
        if not errors:
            errors.append(ScanError(source=str(block["spec"]), error=e.message))
        return {"turns": [], "totals": {"unreadable": len(errors)}, "trainer": None, "errors": errors,
                "tokenizers": []}
    res["errors"] = errors + res["errors"]
    res["totals"]["unreadable"] = len(res["errors"])
    return res


class _Scanner:
    """A Ray actor: scans blocks; its tokenizers stay loaded between blocks."""

    def __init__(self, settings: dict[str, Any], kw: dict[str, Any]):
        self.settings, self.kw = Settings(**settings), kw

    def __call__(self, batch):
        import pyarrow as pa

        from viewer.drift.scanout import turns_table

        out = []
        for item in batch.to_pylist():
            block = json.loads(item["block"])
            res = scan_block(block, self.settings, self.kw)
            turns = turns_table(res.pop("turns"))
            summary = pa.table({name: pa.nulls(1, turns.schema.field(name).type) for name in turns.schema.names})
            out.append(turns.append_column("summary", pa.array([None] * turns.num_rows, pa.string())))
            out.append(summary.append_column("summary", pa.array([json.dumps(res)], pa.string())))
        return pa.concat_tables(out)


def init_ray(settings: Settings, address: str | None) -> bool:
    """Connect to ``address`` / ``RAY_ADDRESS``, or start an embedded local Ray. True if we started
    (or connected) it here and must shut it down."""
    import logging

    import ray

    if ray.is_initialized():
        return False
    # Ray's own INFO lines (execution plans, progress-bar notes) would bury the scan's output
    os.environ.setdefault("RAY_BACKEND_LOG_LEVEL", "error")
    for name in ("ray", "ray.data"):
        logging.getLogger(name).setLevel(logging.ERROR)
    address = address or os.environ.get("RAY_ADDRESS") or None
    common = {"include_dashboard": False, "log_to_driver": False, "logging_level": "ERROR"}
    if address:
        ray.init(address=address, runtime_env={"py_modules": [str(_PKG)]}, **common)
    else:
        ray.init(num_cpus=settings.ray_num_cpus, object_store_memory=settings.ray_object_store_mb * 1024 * 1024,
                 **_local_start(), **common)
    return True


def _local_start() -> dict[str, Any]:
    """What an embedded Ray starts with, chosen for CPU (docs/SPEED.md, measured per scan):
    - the package reaches the workers by ``code_search_path`` (Ray puts it on their ``sys.path``), not
      by a ``runtime_env``: a job with a runtime_env starts every worker through the runtime-env agent
      (``setup_worker.py``) and cannot use a worker started before it;
    - no prestarted workers: Ray starts ``num_cpus`` idle workers for the first driver, and the scan's
      actors never use them (about 0.4-0.9 CPU s each, for nothing).
    Progress bars are the driver's (``DataContext.enable_progress_bars``), so no worker needs an env var."""
    from ray.job_config import JobConfig

    return {"job_config": JobConfig(code_search_path=[str(_PKG.parent)]),
            "_system_config": {"prestart_worker_first_driver": False, "enable_worker_prestart": False}}


def scan_with_ray(source: str | Path, settings: Settings | None = None, *, address: str | None = None,
                  out: str | Path | None = None, limit: int | None = None,
                  progress: Callable[[int, int | None], None] | None = None,
                  cancel: threading.Event | None = None, keep_turns: bool = True,
                  **kw: Any) -> dict[str, Any]:
    """Scan SOURCE on Ray; the result has the local engine's shape (``turns`` only when
    ``keep_turns``), plus ``engine`` and ``out``. ``kw``: tokenizer / trainer / train_turns /
    fork_threshold / plain, as :func:`viewer.drift.corpus.scan_source` takes them."""
    from viewer.drift.corpus import ScanInputError

    ray = require_ray()
    import pyarrow.compute as pc

    from viewer.drift.results import empty_totals, new_trainer_block
    from viewer.drift.costs import merge_gradient, new_gradient_block
    from viewer.drift.scan import merge_trainer
    from viewer.drift.scanout import ParquetSink, records_from_table
    from viewer.drift.corpus import merge_counts

    settings = settings or Settings()
    blocks = plan_blocks(source, settings, limit)
    total = sum(len(b["rows"]) if b["rows"] is not None else 1 for b in blocks)
    res: dict[str, Any] = {"turns": [], "totals": {}, "trainer": new_trainer_block(kw.get("fork_threshold")),
                           "gradient": new_gradient_block(), "errors": []}
    names: dict[str, str] = {}
    sink = ParquetSink(out)
    started = init_ray(settings, address)
    try:
        import ray.data

        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False  # progress goes to our callback, not to stderr bars
        items = [{"block": json.dumps(b)} for b in blocks]
        ds = ray.data.from_items(items, override_num_blocks=len(items)) if items else None
        workers = max(1, min(settings.ray_workers, len(blocks)))
        fields = {f: getattr(settings, f) for f in settings.__dataclass_fields__}
        done = 0
        if ds is not None:
            mapped = ds.map_batches(_Scanner, fn_constructor_kwargs={"settings": fields, "kw": kw}, batch_size=1,
                                    batch_format="pyarrow", concurrency=workers, num_cpus=1)
            for batch in mapped.iter_batches(batch_size=None, batch_format="pyarrow"):
                summ = batch.column("summary")
                is_turn = pc.is_null(summ)
                turns = batch.filter(is_turn).drop_columns(["summary"])
                sink.write(turns)
                if keep_turns:
                    res["turns"].extend(records_from_table(turns))
                for s in batch.filter(pc.invert(is_turn)).column("summary").to_pylist():
                    part = json.loads(s)
                    merge_counts(res["totals"], part["totals"])
                    if part["trainer"] is not None:
                        merge_trainer(res["trainer"], part["trainer"])
                    if part.get("gradient") is not None:
                        merge_gradient(res["gradient"], part["gradient"])
                    res["errors"].extend(part["errors"])
                    for t in part["tokenizers"]:
                        names.setdefault(t["name"], t["note"])
                    done += part["totals"].get("rollouts", 0) + part["totals"].get("unreadable", 0)
                if progress is not None:
                    progress(min(done, total), total)
                if cancel is not None and cancel.is_set():
                    res["totals"]["cancelled"] = True
                    break
    finally:
        sink.close()
        if started:
            ray.shutdown()
    t = res["totals"]
    if not t.get("rollouts") and not t.get("cancelled"):
        raise ScanInputError(no_readable_rollout(str(source), res["errors"]))
    for k, v in empty_totals().items():
        t.setdefault(k, v)
    used = list(names)
    res.update(source=str(source), engine="ray", out=str(out) if out else None,
               tokenizer=used[0] if len(used) == 1 else (" + ".join(used) if used else None),
               tokenizers=[TokenizerUsed(name=n, note=m) for n, m in names.items()])
    return res
