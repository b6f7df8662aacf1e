"""``python -m viewer drift SOURCE [--tokenizer T] [--json] [--limit N]``: drift over a dataset.

SOURCE is a capture folder, a trace / turns file, a folder holding capture folders (found
recursively), or ``hf://...`` once :mod:`viewer.sources` reads the Hub. Rollouts are read
one at a time and scanned in chunks (:func:`viewer.drift.scan`), so memory stays bounded
by the chunk, not the dataset. ``--json`` prints one document on stdout::

    {"source", "tokenizer", "turns": [{"rollout", "turn", "retokenize", "template", "prefix", "row", ...}],
     "totals": {"turns", "drifted_turns", "by_cause", "forked_rows", ...}, "errors": [...]}

otherwise a table (one line per turn) and the totals. Progress goes to stderr for scans
of more than one rollout. Exit codes: 0 ok, 1 nothing readable, 2 usage / not found.

The scan itself (:func:`discover`, :func:`iter_rollouts`, :func:`scan_source`) lives in
:mod:`viewer.drift.corpus`, re-exported here; :func:`scan_table` (rows for a table, shared with the app's scan panel) lives in
:mod:`viewer.drift.results`. Nothing here imports gradio.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from viewer.config import Settings
from viewer.drift.results import SCAN_COLUMNS, scan_table
from viewer.drift.corpus import ScanInputError, discover, iter_rollouts, scan_source

__all__ = ["add_parser", "discover", "iter_rollouts", "scan_source", "scan_table", "SCAN_COLUMNS",
           "ScanInputError"]

# --------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------

def _short(name: str, width: int = 36) -> str:
    return name if len(name) <= width else "…" + name[-(width - 1):]


def _print_table(res: dict[str, Any]) -> None:
    rows = scan_table(res)
    cols = ["rollout", "turn", "round trip", "rt cause", "re-render", "render cause", "prefix", "prefix cause",
            "re-rendered", "row", "losing gradient"]
    cells = [[_short(str(r[c])) if c == "rollout" else str(r[c]) for c in cols] for r in rows]
    widths = [max([len(c)] + [len(x[i]) for x in cells]) for i, c in enumerate(cols)]
    print("  ".join(c.ljust(w) for c, w in zip(cols, widths)))
    for x, r in zip(cells, rows):
        line = "  ".join(v.ljust(w) for v, w in zip(x, widths)).rstrip()
        print(line + (f"  [unchecked: {r['unchecked']}]" if r["unchecked"] else ""))
    t = res["totals"]
    causes = ", ".join(f"{c} {n}" for c, n in sorted(t["by_cause"].items(), key=lambda kv: -kv[1])) or "none"
    print()
    print(f"source:                 {res['source']}")
    print(f"tokenizer:              {res['tokenizer'] or 'none (round trip and re-render unchecked)'}")
    print(f"rollouts:               {t['rollouts']}" + (f" ({t['unreadable']} unreadable)" if t["unreadable"] else ""))
    print(f"turns checked:          {t['turns']} ({t['unchecked']} unchecked)")
    print(f"drifted turns:          {t['drifted_turns']}")
    print(f"  round trip / re-render / broken prefix: {t['retokenize_drifted']} / {t['template_drifted']} / "
          f"{t['prefix_broken']}")
    print(f"by cause:               {causes}")
    tr = res["trainer"]
    tl = tr["tally"]
    who = (f"{tr['mode']} (TRL {tr['trl_version']}" + (f", train turns: {tr['train_turns']}" if tr["mode"] == "trl-message"
                                                     else ", per-token loss masks" if tr["mode"] == "trl-contract" else "")
           + f", fork threshold {tr['fork_threshold']})") if tr["mode"] not in (None, "mixed") else \
        f"mixed: {tr['modes']}"
    print(f"trainer:                {who}" + (f" — {tr['chosen']}: {tr['reason']}" if tr.get("reason") else ""))
    print(f"trainer rows:           {t['rows']} ({t['forked_rows']} forks; tally: clean {tl['clean']}, realign "
          f"{tl['realign']}, fork {tl['fork']}, drift tokens {tl['drift_tokens']}, max {tl['drift_max']})")
    if tr["errors"]:
        errs = sorted({str((r.get("row") or {}).get("reason")) for r in res["turns"]
                       if (r.get("row") or {}).get("verdict") == "ERROR"})
        print(f"trainer could not run:  {tr['errors']} rollout(s): {'; '.join(errs)}")
    print(f"tokens losing gradient: {t['tokens_losing_gradient']}")
    for e in res["errors"]:
        print(f"unreadable: {e['source']}: {e['error']}")


def _cmd_drift(args: argparse.Namespace, settings: Settings) -> int:
    if args.limit is not None and args.limit < 1:
        print("error: --limit must be at least 1", file=sys.stderr)
        return 2
    tty_progress = not args.quiet

    def progress(done: int, total: int | None) -> None:
        if tty_progress and (total or 0) > 1:
            print(f"\rscanned {done}/{total if total is not None else '?'} rollouts", end="", file=sys.stderr,
                  flush=True)

    kw = {"tokenizer": args.tokenizer, "trainer": args.trainer, "train_turns": args.train_turns,
          "fork_threshold": args.fork_threshold}
    try:
        if args.engine == "ray":
            from viewer.drift.ray_engine import scan_with_ray

            res = scan_with_ray(args.source, settings, address=args.ray_address, out=args.out, limit=args.limit,
                                progress=progress, **kw)
        else:
            res = scan_source(args.source, settings, limit=args.limit, progress=progress, **kw)
            if args.out:
                from viewer.drift.scanout import ParquetSink, turns_table

                sink = ParquetSink(args.out)
                sink.write(turns_table(res["turns"]))
                sink.close()
    except ScanInputError as e:
        print(f"error: {e.message}", file=sys.stderr)
        return 2 if e.not_found else 1
    except Exception as e:  # noqa: BLE001  (one line on stderr, never a traceback)
        from viewer.sources import SourceError, SourceNotFound

        if isinstance(e, SourceError):
            print(f"error: {e.message}", file=sys.stderr)
            return 2 if isinstance(e, SourceNotFound) else 1
        print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    if tty_progress and res["totals"]["rollouts"] > 1:
        print(file=sys.stderr)
    if args.json:
        print(json.dumps(res, ensure_ascii=False))
    else:
        _print_table(res)
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser("drift", help="retokenisation drift per turn and in total (round trip, re-render, prefix, rows)",
                       description="Check every agent turn of SOURCE for retokenisation drift: output decode→encode "
                                   "round trip, prompt re-render through the chat template, turn-to-turn prefix, and "
                                   "the trainer's CLEAN/REALIGN/FORK rows.")
    p.add_argument("source", metavar="SOURCE",
                   help="capture folder, trace/turns file, folder of capture folders, or hf://datasets/OWNER/NAME")
    p.add_argument("--tokenizer", metavar="T", default=None,
                   help="tokenizer override: 'qwen3', a folder with tokenizer.json, or a cached Hub name")
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    p.add_argument("--limit", type=int, default=None, metavar="N", help="scan at most N rollouts (rows for hf://)")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.add_argument("--engine", choices=["local", "ray"], default="local",
                   help="local: this process; ray: a Ray Data pipeline (embedded local Ray, or the cluster at "
                        "--ray-address / RAY_ADDRESS; needs requirements-scale.txt)")
    p.add_argument("--ray-address", metavar="ADDR", default=None,
                   help="Ray cluster to run on (e.g. ray://head:10001 or auto); default RAY_ADDRESS, else embedded")
    p.add_argument("--out", metavar="FILE.parquet", default=None,
                   help="also write one row per turn to this parquet file (DuckDB / pandas can query it)")
    p.add_argument("--trainer", choices=["trl-message", "trl-contract"], default=None,
                   help="whose rows: trl-message (TRL 1.14: prompts re-rendered from messages) or trl-contract "
                        "(TRL >= 1.15: engine prompt ids, per-token masks). Default: what the source supports "
                        "(no engine prompt ids -> trl-message with --train-turns tool-calls)")
    p.add_argument("--train-turns", choices=["all", "tool-calls"], default=None,
                   help="trl-message's train_turn_fn: every agent turn, or only turns with a tool call (the "
                        "opencode example; the default)")
    p.add_argument("--fork-threshold", type=int, default=None, metavar="N",
                   help="TRL's fork_threshold_tokens (default: what the trainer runs with: 1024 for trl-message, "
                        "as in the opencode example; 0 for trl-contract, TRL 1.16's lossless_capture default)")
    p.set_defaults(func=_cmd_drift)
