"""``python -m viewer rescore FOLDER_OR_DATASET --model M [--out FILE.parquet] [--engine ray]``.

The dataset side of the ``rescore`` subcommand (:mod:`.rescore` hands over when SOURCE is a folder
of captures, a data file or ``hf://``, or when ``--out`` / ``--engine ray`` is given): every rollout
rescored (:mod:`viewer.rescore.dataset`, or :mod:`viewer.rescore.ray_rescore`), the per-token table
written to ``--out``, the summary (:mod:`viewer.rescore.dsummary`) printed as text or ``--json``.
Progress is one stderr line per rollout (``--quiet``: none). Ctrl-C cancels: the rollouts finished
so far are kept, written and summarised, the summary says ``partial``, and the exit code is 1
(as a cancelled capture's); a second Ctrl-C stops at once.
"""
from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from typing import Any

from viewer.config import Settings

from .common import BAD_INPUT, FINDINGS, OK, CliError, print_json

__all__ = ["add_dataset_options", "wants_dataset", "run_dataset", "dataset_doc"]


def add_dataset_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("over a dataset (a folder of captures, a data file, hf://; docs/MISMATCH.md)")
    g.add_argument("--out", metavar="FILE.parquet", default=None,
                   help="write one row per trained token (ids, sampler, trainer, Δ, ratio and clipped/zeroed per "
                        "importance-sampling mode) to this parquet file; any SOURCE then runs as a dataset")
    g.add_argument("--engine", choices=["local", "ray"], default="local",
                   help="local: this process; ray: the drift scan's Ray Data pipeline (embedded local Ray, or the "
                        "cluster at --ray-address / RAY_ADDRESS; needs requirements-scale.txt)")
    g.add_argument("--ray-address", metavar="ADDR", default=None, help="Ray cluster to run on (default RAY_ADDRESS, "
                                                                       "else an embedded local Ray)")
    g.add_argument("--limit", type=int, default=None, metavar="N", help="rescore at most N rollouts")
    g.add_argument("--quiet", action="store_true", help="no progress lines on stderr")


def wants_dataset(args: argparse.Namespace) -> bool:
    from viewer.rescore.dataset import is_dataset_source

    return is_dataset_source(args.source) or bool(args.out) or args.engine == "ray"


def dataset_doc(res: dict[str, Any], settings: Settings, *, source: str, engine: str, model: str,
                out: str | None, seconds: float) -> dict[str, Any]:
    """The ``--json`` document of a dataset rescore (docs/CLI.md, docs/MISMATCH.md "Summary")."""
    from viewer.rescore.dsummary import summarize

    o = res["opts"]
    summ = summarize(res["table"], threshold=settings.rescore_flag_delta, clip_min=o.clip_min, clip_max=o.clip_max)
    notes = []
    if res["cancelled"]:
        notes.append(f"partial: cancelled after {len(res['rollouts'])} rescored rollout(s)"
                     + (f" of {res['total']}" if res["total"] is not None else ""))
    return {"source": source, "engine": engine, "model": model, "out": out,
            "rollouts": {"total": res["total"], "rescored": len(res["rollouts"]), "failed": len(res["errors"])},
            "threshold": settings.rescore_flag_delta, **summ,
            "trainers": dict(sorted(res["trainers"].items())), "temperatures": dict(sorted(res["temperatures"].items())),
            # as a one-rollout rescore names it (tokenizer_for); null when the rollouts used more than one
            "tokenizer": next(iter(res["tokenizers"])) if len(res["tokenizers"]) == 1 else None,
            "tokenizers": dict(sorted(res["tokenizers"].items())),
            "errors": sorted(res["errors"], key=lambda e: (e["source"], e["error"])),
            "cancelled": res["cancelled"], "partial": res["cancelled"], "seconds": round(seconds, 3), "notes": notes}


def _f(v: Any, nd: int = 4) -> str:
    return "-" if v is None else (f"{v:.{nd}f}" if isinstance(v, float) else str(v))


def _line(label: str, s: dict[str, Any]) -> str:
    q = s["ratio_quantiles"]
    return (f"  {label:<28} {s['tokens']:>8} tokens  mean |Δ| {_f(s['mean_abs_delta'])}  max |Δ| "
            f"{_f(s['max_abs_delta'])}  ratio p05–p95 {_f(q['p05'])}–{_f(q['p95'])}  flagged {s['flagged']}")


def _print_text(doc: dict[str, Any]) -> None:
    r, t = doc["rollouts"], doc["totals"]
    print(f"source:     {doc['source']} ({doc['engine']} engine, model {doc['model']})")
    print(f"rollouts:   {r['rescored']} rescored, {r['failed']} failed" + (" (partial: cancelled)" if doc["partial"]
                                                                           else ""))
    print(_line("all", t))
    for title, key in (("by model", "by_model"), ("by turn", "by_turn"), ("by context", "by_context"),
                       ("by verdict", "by_verdict"), ("drift", "drift")):
        print(f"{title}:")
        for k, s in doc[key].items():
            print(_line(str(k), s))
    b = doc["is"]
    print(f"IS bounds:  [{b['clip_min']}, {b['clip_max']}]; trained tokens clipped / zeroed:")
    for m, x in t["is"].items():
        print(f"  {m:<28} {x['changed']:>8}  ({_f(x['fraction'])})")
    w = doc["reward"]
    print(f"reward:     {w['rollouts']} rollouts; mean |Δ| vs reward: Pearson {_f(w['pearson_mean_abs_delta'])}, "
          f"Spearman {_f(w['spearman_mean_abs_delta'])}; mean Δ vs reward: Pearson {_f(w['pearson_mean_delta'])}")
    if doc["out"]:
        print(f"per-token:  {doc['out']}")
    for error, sources in _by_error(doc["errors"]):  # one line per cause (a model that will not load: once)
        said = sources[0] if len(sources) == 1 else f"{len(sources)} rollouts ({sources[0]}, …)"
        print(f"failed:     {said}: {error}")
    for n in doc["notes"]:
        print(f"note:       {n}")


def _by_error(errors: list[dict[str, str]]) -> list[tuple[str, list[str]]]:
    """The failed rollouts grouped by their error's first line, in the order first seen."""
    groups: dict[str, list[str]] = {}
    for e in errors:
        groups.setdefault(str(e["error"]).strip().splitlines()[0] if str(e["error"]).strip() else "",
                          []).append(e["source"])
    return list(groups.items())


class _CtrlC:
    """The first SIGINT sets ``cancel`` (the run stops and keeps what it finished); the second is Python's."""

    def __init__(self, cancel: threading.Event):
        self.cancel, self.prev = cancel, None

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self.prev = signal.signal(signal.SIGINT, self._on)
        return self

    def _on(self, signum, frame) -> None:
        if self.cancel.is_set():
            raise KeyboardInterrupt
        print("\ncancelling: finishing with the rollouts rescored so far (Ctrl-C again to stop now)",
              file=sys.stderr, flush=True)
        self.cancel.set()

    def __exit__(self, *exc) -> None:
        if self.prev is not None:
            signal.signal(signal.SIGINT, self.prev)


def run_dataset(args: argparse.Namespace, settings: Settings, cancel: threading.Event | None = None) -> int:
    from viewer.rescore.dataset import RescoreOptions, rescore_dataset

    if args.limit is not None and args.limit < 1:
        raise CliError("--limit must be at least 1", BAD_INPUT)
    opts = RescoreOptions(model=args.model, trainer=args.trainer, train_turns=args.train_turns,
                          fork_threshold=args.fork_threshold, tokenizer=args.tokenizer, device=args.device,
                          dtype=args.dtype, temperature=args.temperature, clip_min=args.is_min, clip_max=args.is_max)

    def progress(done: int, total: int | None) -> None:
        if not args.quiet:
            print(f"rescored {done}/{total if total is not None else '?'} rollouts", file=sys.stderr, flush=True)

    cancel = cancel or threading.Event()
    t0 = time.perf_counter()
    try:
        with _CtrlC(cancel):
            if args.engine == "ray":
                from viewer.rescore.ray_rescore import rescore_with_ray

                res = rescore_with_ray(args.source, settings, opts, address=args.ray_address, limit=args.limit,
                                       progress=progress, cancel=cancel)
            else:
                res = rescore_dataset(args.source, settings, opts, limit=args.limit, progress=progress, cancel=cancel)
    except ValueError as e:  # a model that cannot be loaded, a tokenizer override that does not load
        from viewer.budgets import BudgetExceeded

        if isinstance(e, BudgetExceeded):
            raise
        raise CliError(str(e), BAD_INPUT) from None
    res["opts"] = opts
    if args.out:
        import pyarrow.parquet as pq
        from pathlib import Path

        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(res["table"], args.out)
    doc = dataset_doc(res, settings, source=str(args.source), engine=args.engine, model=args.model, out=args.out,
                      seconds=time.perf_counter() - t0)
    if args.json:
        print_json(doc, indent=2)
    else:
        _print_text(doc)
    if doc["cancelled"]:
        return FINDINGS
    return FINDINGS if args.fail_on_findings and doc["totals"]["flagged"] else OK
