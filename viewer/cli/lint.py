"""``python -m viewer lint SOURCE [--json] [--select RULES] [--limit N]``: health checks on how a capture
or dataset was recorded (rules: docs/LINT.md).

Every rollout of SOURCE (a capture folder, a trace file, a folder of captures, a data file or
``hf://...``) is read one at a time and linted (:func:`viewer.lint.lint_source`); progress goes to
stderr when there is more than one. Exit 1 (FINDINGS) when a rule at level ``error`` fired, so a
training pipeline's CI can stop on it; warnings and infos alone exit 0.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any

from viewer.config import Settings
from viewer.drift.results import said
from viewer.lint import lint_source, select_rules

from .common import BAD_INPUT, FINDINGS, OK, CliError, add_common, print_json

__all__ = ["add_parser"]


def _print(res: dict[str, Any]) -> None:
    """The hits grouped by rule, each rule's why and fix said once above its hits (issue 41: a folder's lint
    repeated the same two lines for each of 80 hits), then the totals."""
    by_rule: dict[str, list[dict[str, Any]]] = {}
    for h in res["hits"]:
        by_rule.setdefault(h["rule"], []).append(h)
    for rid, hits in by_rule.items():
        r, first = res["rules"].get(rid, {}), hits[0]
        counted = f"{r['hits']} hit(s) in {r['rollouts']} rollout(s)" if r else f"{len(hits)} hit(s)"
        print(f"{rid} {first['level']} {r.get('name', '')}: {counted}")
        print(f"    why: {first['why']}")
        print(f"    fix: {first['fix']}")
        for h in hits:
            at = "" if h["turn"] is None else f" turn {h['turn']}" + ("" if h["tok"] is None else f" tok {h['tok']}")
            row = "" if h["row"] is None else f" row {h['row']}"
            print(f"  {h['rollout']}{row}{at}: {h['message']}")
        print()
    t = res["totals"]
    if t["hits"] > t["listed"]:
        print(f"... {t['hits'] - t['listed']} more hits not listed (counted below)")
        print()
    print(f"source:   {res['source']}")
    print(f"rollouts: {t['rollouts']}" + (f" ({t['unreadable']} unreadable)" if t["unreadable"] else ""))
    print(f"hits:     {t['hits']} (error {t['error']}, warning {t['warning']}, info {t['info']}); "
          f"rollouts with errors: {t['rollouts_with_errors']}")
    for rid, r in res["rules"].items():
        if r["hits"]:
            print(f"  {rid} {r['name']:<38} {r['level']:<7} {r['hits']} hit(s) in {r['rollouts']} rollout(s)")
    for e in res["errors"]:
        print(f"unreadable: {said(e)}")


def _cmd_lint(args: argparse.Namespace, settings: Settings) -> int:
    if args.limit is not None and args.limit < 1:
        raise CliError("--limit must be at least 1", BAD_INPUT)
    try:
        chosen = select_rules(args.select)
    except ValueError as e:
        raise CliError(str(e), BAD_INPUT) from None

    def progress(done: int, total: int | None) -> None:
        if not args.quiet and (total or 0) > 1:
            print(f"\rlinted {done}/{total if total is not None else '?'} rollouts", end="", file=sys.stderr,
                  flush=True)

    res = lint_source(args.source, settings, select=chosen, limit=args.limit, progress=progress)
    if not args.quiet and res["totals"]["rollouts"] > 1:
        print(file=sys.stderr)
    if not res["totals"]["rollouts"] and res["errors"]:
        e = res["errors"][0]
        raise CliError(said(e), BAD_INPUT)
    if args.json:
        print_json(res)
    else:
        _print(res)
    return FINDINGS if res["totals"]["error"] else OK


def add_parser(sub: Any) -> None:
    p = sub.add_parser("lint", help="health checks on how a capture or dataset was recorded (docs/LINT.md)",
                       description="Lint every rollout of SOURCE with the rules of docs/LINT.md (stable ids, a why "
                                   "and a fix each). Exit 1 when a rule at level error fires.")
    p.add_argument("source", metavar="SOURCE",
                   help="capture folder, trace/turns file, folder of capture folders, data file, folder of data files "
                        "(SWE-agent .traj, Inspect logs), or "
                        "hf://datasets/OWNER/NAME")
    add_common(p)
    p.add_argument("--select", metavar="RULES", default=None,
                   help="only these rules: comma-separated ids (RI001), names (no-engine-prompt-ids) or levels "
                        "(error); default all")
    p.add_argument("--limit", type=int, default=None, metavar="N", help="lint at most N rollouts (rows for hf://)")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=_cmd_lint)
