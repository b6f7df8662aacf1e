"""``python -m viewer drift SOURCE [--tokenizer T] [--json] [--limit N]``: drift over a dataset.

SOURCE is a capture folder, a trace / turns file, a folder holding capture folders (found
recursively), a data file, or ``hf://...``. Rollouts are read one at a time and scanned in chunks
(:func:`viewer.drift.corpus.scan_source`), so memory stays bounded by the chunk, not the dataset.
``--json`` prints one document on stdout (schema: docs/CLI.md), otherwise a table (one line per
turn) and the totals. Progress goes to stderr for scans of more than one rollout.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any

from viewer.config import Settings
from viewer.drift.corpus import scan_source
from viewer.drift.costs import parse_thresholds
from viewer.drift.results import said, scan_table

from .common import BAD_INPUT, FINDINGS, OK, CliError, add_common, add_setting_option, print_json

__all__ = ["add_parser"]


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
    if t.get("stand_in_artefacts"):
        print(f"stand-in artefacts:     {t['stand_in_artefacts']} turn(s) whose only findings come from the stand-in "
              "tokenizer's template (the bundled Qwen3 for another model), not from the rollout; the trainer "
              "rows below re-render with that stand-in too")
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
    _print_gradient(res.get("gradient"))
    for e in res["errors"]:
        print(f"unreadable: {said(e)}")


def _print_gradient(g: dict[str, Any] | None) -> None:
    """The ``gradient`` block: tokens lost per cause and per turn, the what-ifs, the sweep."""
    if not g:
        return
    causes = ", ".join(f"{c} {n}" for c, n in sorted(g["by_cause"].items(), key=lambda kv: -kv[1])) or "none"
    print(f"gradient lost by cause: {causes}")
    for x in g["by_turn"]:
        print(f"  {_short(str(x['rollout']))} turn {x['turn']} (realigned at turn {x['at_turn']}): {x['tokens']} "
              f"{x['cause']}")
    if g["what_if"]:
        print("what-if (re-run of the trainer; tokens losing gradient, recovered, rows):")
    for w in g["what_if"]:
        line = (f"  {w['name']:<26} {w['tokens_losing_gradient']:>6} (was {w['baseline_tokens_losing_gradient']}), "
                f"recovered {w['recovered']}, rows {w['rows']} (was {w['baseline_rows']})"
                if w["measured_rollouts"] else f"  {w['name']:<26} not measured")
        if w["not_measured"]:
            line += (" on " if not w["measured_rollouts"] else "; not measured on ") + "; ".join(
                f"{n} rollout(s): {r}" for r, n in w["not_measured"].items())
        print(line)
    if g.get("sweep"):
        print("fork threshold sweep:   threshold  rows  forked rows  tokens losing gradient")
        for p in g["sweep"]:
            print(f"                        {str(p['fork_threshold']):>9}  {p['rows']:>4}  {p['forked_rows']:>11}  "
                  f"{p['tokens_losing_gradient']:>22}")


def _cmd_drift(args: argparse.Namespace, settings: Settings) -> int:
    if args.limit is not None and args.limit < 1:
        raise CliError("--limit must be at least 1", BAD_INPUT)
    tty_progress = not args.quiet

    def progress(done: int, total: int | None) -> None:
        if tty_progress and (total or 0) > 1:
            print(f"\rscanned {done}/{total if total is not None else '?'} rollouts", end="", file=sys.stderr,
                  flush=True)

    sweep = None
    if args.sweep_fork_threshold is not None:
        try:
            sweep = parse_thresholds(args.sweep_fork_threshold)
        except ValueError as e:
            raise CliError(str(e), BAD_INPUT) from None
    kw = {"tokenizer": args.tokenizer, "trainer": args.trainer, "train_turns": args.train_turns,
          "fork_threshold": args.fork_threshold, "sweep": sweep, "whatifs": not args.no_what_if}
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
    if tty_progress and res["totals"]["rollouts"] > 1:
        print(file=sys.stderr)
    if args.json:
        print_json(res)
    else:
        _print_table(res)
    return FINDINGS if args.fail_on_findings and res["totals"]["drifted_turns"] else OK


def add_parser(sub: Any) -> None:
    p = sub.add_parser("drift", help="retokenisation drift per turn and in total (round trip, re-render, prefix, rows)",
                       description="Check every agent turn of SOURCE for retokenisation drift: output decode→encode "
                                   "round trip, prompt re-render through the chat template, turn-to-turn prefix, and "
                                   "the trainer's CLEAN/REALIGN/FORK rows.")
    p.add_argument("source", metavar="SOURCE",
                   help="capture folder, trace/turns file, folder of capture folders, data file, folder of data "
                        "files (SWE-agent .traj, Inspect logs), or hf://datasets/OWNER/NAME")
    add_setting_option(p, "--tokenizer", "tokenizer", metavar="T", default=None)
    add_common(p, findings="a turn drifted")
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
    p.add_argument("--sweep-fork-threshold", metavar="LIST", default=None,
                   help="also re-run the trainer at each of these fork thresholds (e.g. 0,64,256,1024,inf) and "
                        "report rows, forked rows and tokens losing gradient per threshold (summed over rollouts)")
    p.add_argument("--no-what-if", action="store_true",
                   help="skip the what-ifs (the trainer re-run on modified inputs: engine prompt ids, contract "
                        "mode, template kwargs, special-token spelling...); they re-render prompts")
    p.set_defaults(func=_cmd_drift)
