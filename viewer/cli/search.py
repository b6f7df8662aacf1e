"""``python -m viewer search SOURCE QUERY [--json] [--limit N] [--rebuild]``: find rollouts, turns and tokens.

SOURCE is what ``drift`` takes (a capture folder, a folder of capture folders, a data file, ``hf://...``).
Its search index is built on first use and brought up to date on each run (only rollouts whose files changed
are scanned again: :func:`viewer.search.build_index`); QUERY is the language of docs/SEARCH.md. Prints the
hits worst first, each with its app link, then the facets; ``--json`` prints one document (docs/CLI.md).
Exit 0 with hits or none; 2 for a query that cannot run or a missing source.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any

from viewer.config import Settings
from viewer.drift.results import said

from .common import BAD_INPUT, OK, CliError, add_common, print_json

__all__ = ["add_parser"]


def _snippet(h: dict[str, Any]) -> str:
    s = h.get("snippet") or {}
    if s.get("text"):
        return " ".join(s["text"].split())[:160]
    if not s.get("pieces"):
        return ""
    a, b = s["hit"] or (None, None)
    out = []
    for k, (piece, lp) in enumerate(zip(s["pieces"], s["logprobs"])):
        p = s["start"] + k
        text = piece.encode("unicode_escape").decode("ascii", "replace")
        shown = f"[{text}|{lp:.2f}]" if lp is not None and a is not None and a <= p < b else text
        out.append(shown)
    return "".join(out)[:200]


def _print(doc: dict[str, Any]) -> None:
    for h in doc["hits"]:
        score = "" if h["score"] is None else f" {h['why']} {h['score']:.4g}"
        at = "" if h["turn"] is None else f" turn {h['turn']}" + ("" if h["tok"] is None else f" tok {h['tok']}")
        reward = "" if h["reward"] is None else f" reward {h['reward']:.3g}"
        print(f"{h['label']}{at}{score}{reward}  ?{h['link']}")
        snip = _snippet(h)
        if snip:
            print(f"    {snip}")
    print()
    print(f"query:    {doc['query']!r} ({doc['level']} level)")
    print(f"hits:     {doc['total']} in {doc['rollouts']} rollout(s), {len(doc['hits'])} shown")
    for name, values in doc["facets"].items():
        if values:
            print(f"{name + ':':<9} " + ", ".join(f"{v} {n}" for v, n in values[:12]))
    ix = doc["index"]
    print(f"index:    {ix['path']} ({ix['rollouts']} rollouts, {ix['turns']} turns; this run scanned {ix['rebuilt']}, "
          f"kept {ix['reused']})")
    for e in ix["errors"]:
        print(f"unreadable: {said(e)}")


def _cmd_search(args: argparse.Namespace, settings: Settings) -> int:
    from viewer.search import QueryError, SearchError, build_index, parse, search

    if args.limit < 1:
        raise CliError("--limit must be at least 1", BAD_INPUT)
    try:
        parse(args.query)  # a query that cannot run is said before anything is scanned
    except QueryError as e:
        raise CliError(f"query: {e.message}" + ("" if e.at is None else f" (at character {e.at + 1})"), BAD_INPUT) \
            from None

    def progress(done: int, total: int | None) -> None:
        if not args.quiet and (total or 0) > 1:
            print(f"\rindexed {done}/{total if total is not None else '?'} rollouts", end="", file=sys.stderr,
                  flush=True)

    try:
        info = build_index(args.source, settings, progress=progress, rebuild=args.rebuild)
        if not args.quiet and info.rebuilt > 1:
            print(file=sys.stderr)
        res = search(args.source, args.query, settings, limit=args.limit, build=False)
    except (QueryError, SearchError) as e:
        raise CliError(f"{'query: ' if isinstance(e, QueryError) else ''}{e.message}", BAD_INPUT) from None
    doc = res.to_dict()
    if args.json:
        print_json(doc)
    else:
        _print(doc)
    return OK


def add_parser(sub: Any) -> None:
    p = sub.add_parser("search", help="find rollouts, turns and tokens across a dataset (docs/SEARCH.md)",
                       description="Search every rollout of SOURCE with the query language of docs/SEARCH.md: "
                                   "text, /regex/, tool:, cause:, lint:, model:, reward<0.5, logprob<-5, "
                                   "delta>0.5, ratio>2, ids:1,2, tokens:\"<tool_call>\", AND / OR / NOT. "
                                   "Builds or updates the dataset's index first.")
    p.add_argument("source", metavar="SOURCE",
                   help="capture folder, folder of capture folders, data file, folder of data files, or "
                        "hf://datasets/OWNER/NAME")
    p.add_argument("query", metavar="QUERY", help='the query, e.g. \'tool:bash logprob<-5\' ("" lists every rollout)')
    add_common(p)
    p.add_argument("--limit", type=int, default=20, metavar="N", help="show at most N hits (default 20)")
    p.add_argument("--rebuild", action="store_true", help="scan every rollout again, not only the changed ones")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=_cmd_search)
