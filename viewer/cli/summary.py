"""``python -m viewer summary SOURCE [--json]``: counts, model, tokenizer and problems of one rollout."""
from __future__ import annotations

import argparse
from typing import Any

from viewer.config import Settings
from viewer.rollout import Rollout
from viewer.layout import TRACE, TURNS

from .common import FINDINGS, OK, add_common, add_setting_option, print_json

__all__ = ["add_parser", "summary_of", "SUMMARY_KEYS"]

SUMMARY_KEYS = ("format", "model", "tokenizer", "turns", "trained_turns", "filtered_calls", "prompt_tokens",
                "output_tokens", "trained_tokens", "mean_logprob", "reward")


def summary_of(ro: Rollout, settings: Settings, override: str | None = None) -> dict[str, Any]:
    """The summary document: source, the keys in SUMMARY_KEYS, tokenizer_source and problems. The
    tokenizer is the one the app shows the rollout with (:func:`viewer.tokenizer.tokenizer_for`)."""
    from viewer.tokenizer import tokenizer_for

    choice = tokenizer_for(ro, settings, override, load=False)  # named, not used: no seconds-long load
    doc: dict[str, Any] = {"source": ro.source, "format": ro.format, "model": ro.model, "tokenizer": choice.name,
                           "tokenizer_source": choice.source}
    doc.update(ro.stats())
    doc["problems"] = [{"severity": p.severity, "file": p.file, "where": p.where, "message": p.message}
                       for p in ro.problems]
    return doc


def _fmt(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, float):
        return f"{v:.4f}"
    return str(v)


def _cmd_summary(args: argparse.Namespace, settings: Settings) -> int:
    from viewer.sources import load_source

    ro = load_source(args.source, settings, split=args.split, row=args.row, config=args.config, format=args.format)
    doc = summary_of(ro, settings, args.tokenizer)
    errors = [p for p in ro.problems if p.severity == "error"]
    code = FINDINGS if args.fail_on_findings and errors else OK
    if args.json:
        print_json(doc, indent=2)
        return code
    width = max(len(k) for k in SUMMARY_KEYS) + 1
    for k in SUMMARY_KEYS:
        print(f"{k + ':':<{width}} {_fmt(doc[k])}")
    if ro.problems:
        print(f"{'problems:':<{width}} {len(ro.problems)}")
        for p in ro.problems:
            print(f"  {p}")
    return code


def add_parser(sub: Any) -> None:
    s = sub.add_parser("summary", help="counts, model, tokenizer and problems for a capture folder or file")
    s.add_argument("source", metavar="SOURCE", help=f"capture folder, {TRACE}/{TURNS} file, a dataset file (parquet/JSONL/JSON) "
                                                    "or folder, or hf://datasets/OWNER/NAME[/path]")
    add_common(s, findings="the rollout has a problem of severity error")
    s.add_argument("--split", help="dataset split (default: train when the files name one)")
    s.add_argument("--config", help="dataset config (README configs, or a folder name)")
    s.add_argument("--row", type=int, help="row of a row dataset (default: the first listed row)")
    s.add_argument("--format", default=None, help="the reader, whatever the file's extension: capture, or a row format "
                                                  "of docs/FORMATS.md §7 (nemo-gym, atropos, inspect, swe-agent, ...)")
    add_setting_option(s, "--tokenizer", "tokenizer", metavar="T", default=None)
    s.set_defaults(func=_cmd_summary)
