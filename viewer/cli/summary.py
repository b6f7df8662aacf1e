"""Command line: ``python -m viewer SUBCOMMAND`` (also installed as ``rollout-inspector``).

``summary`` lives here; ``drift``, ``compare``, ``rescore`` and ``capture`` are registered from
their own modules, each with an ``add_parser``.

Exit codes: 0 ok, 1 the source is unreadable, 2 usage error or source not found.
Errors are one line on stderr; ``--json`` prints exactly one JSON document on stdout.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from viewer.config import Settings
from viewer.rollout import Rollout

__all__ = ["main", "build_parser", "summary_of", "tokenizer_name"]

# The viewer needs tokenizers only; transformers' "PyTorch was not found" advice is noise on
# every CLI call (set before anything imports transformers).
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

SUMMARY_KEYS = ("format", "model", "tokenizer", "turns", "trained_turns", "filtered_calls", "prompt_tokens",
                "output_tokens", "trained_tokens", "mean_logprob", "reward")


def tokenizer_name(model: str | None) -> str | None:
    """Name of the tokenizer we would use for ``model`` (one place to swap the policy)."""
    from viewer.tokenizer import tokenizer_name_for

    return tokenizer_name_for(model)


def summary_of(ro: Rollout) -> dict[str, Any]:
    """The summary document: the keys in SUMMARY_KEYS plus source and problems."""
    tok = ro.meta.get("tokenizer") or tokenizer_name(ro.model)
    src = Path(ro.source)
    folder = src if src.is_dir() else src.parent
    if not tok and (folder / "tokenizer" / "tokenizer.json").exists():
        tok = str(folder / "tokenizer")  # a capture that ships its own tokenizer (what the app would use)
    doc: dict[str, Any] = {"source": ro.source, "format": ro.format, "model": ro.model, "tokenizer": tok}
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
    from viewer.sources import SourceError, SourceNotFound, load_source

    try:
        ro = load_source(args.source, settings, split=getattr(args, "split", None), row=getattr(args, "row", None),
                         config=getattr(args, "config", None), format=getattr(args, "format", None))
    except SourceNotFound as e:
        print(f"error: {e.message}", file=sys.stderr)
        return 2
    except SourceError as e:
        print(f"error: {e.message}", file=sys.stderr)
        return 1
    doc = summary_of(ro)
    if args.json:
        print(json.dumps(doc, indent=2, ensure_ascii=False))
        return 0
    width = max(len(k) for k in SUMMARY_KEYS) + 1
    for k in SUMMARY_KEYS:
        print(f"{k + ':':<{width}} {_fmt(doc[k])}")
    if ro.problems:
        print(f"{'problems:':<{width}} {len(ro.problems)}")
        for p in ro.problems:
            print(f"  {p}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m viewer",
                                     description="Rollout Inspector: inspect agent RL rollouts token by token.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    s = sub.add_parser("summary", help="counts, model, tokenizer and problems for a capture folder or file")
    s.add_argument("source", metavar="SOURCE", help="capture folder, trace.json/turns.json file, a dataset file "
                                                    "(parquet/JSONL/JSON) or folder, or hf://datasets/OWNER/NAME[/path]")
    s.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    s.add_argument("--split", help="dataset split (default: train when the files name one)")
    s.add_argument("--config", help="dataset config (README configs, or a folder name)")
    s.add_argument("--row", type=int, help="row of a row dataset (default: the first listed row)")
    s.add_argument("--format", default=None, help="row format when detection is ambiguous: atif, opencode, agentcap, "
                                                  "harbor, openenv-contract, messages, capture")
    s.set_defaults(func=_cmd_summary)
    # Other commands live beside the code they drive; each module adds its own subparser.
    for module in ("viewer.drift_cli", "viewer.compare_cli", "viewer.capture.cli", "viewer.rescore.cli"):
        try:
            mod = __import__(module, fromlist=["add_parser"])
        except ModuleNotFoundError as e:
            if e.name != module:
                raise
            continue
        mod.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)  # exits 2 on usage errors
    return args.func(args, Settings.from_env())


def main_entry() -> None:
    """The ``rollout-inspector`` console script (same subcommands as ``python -m viewer``)."""
    import sys

    sys.exit(main())
