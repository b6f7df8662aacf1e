"""``python -m viewer certify TOKENIZER [--json] [--conversations FILE] [--trainer MODE]``: will this
tokenizer + chat template lose gradient in agent RL? (docs/DRIFT-DOCTOR.md)

TOKENIZER is ``qwen3`` (bundled), a local folder with ``tokenizer.json``, a capture folder (its own
``tokenizer/``), or a Hub name (from the local cache; downloaded only with ``--online``). Prints a
report card, one line per case, or with ``--json`` one document (schema: docs/CLI.md).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from viewer.config import Settings

from .common import BAD_INPUT, FINDINGS, OK, CliError, add_common

__all__ = ["add_parser", "load_for_certify"]


def load_for_certify(name: str, online: bool = False):
    """(tokenizer, the name it is reported under); CliError naming why it cannot be loaded."""
    from viewer.layout import TOKENIZER_DIR
    from viewer.tokenizer import resolve_tokenizer

    p = Path(name).expanduser()
    if p.is_dir() and (p / TOKENIZER_DIR / "tokenizer.json").is_file():
        choice = resolve_tokenizer(None, None, capture_dir=p, online=online, public=False)
    else:
        choice = resolve_tokenizer(None, name, online=online, public=False)
    if not choice.ok:
        raise CliError(f"cannot load tokenizer {name!r}: {choice.message}", BAD_INPUT)
    return choice.tokenizer, choice.name or name


def card_lines(doc: dict[str, Any], modes: list[str]) -> list[str]:
    """The report card: one line per case (status, cause, trained tokens losing gradient, forked rows)."""
    width = max([4] + [len(c["name"]) for c in doc["cases"]])
    head = f"{'case'.ljust(width)}  status  {'cause'.ljust(22)}  " + "  ".join(f"lost/forks {m}" for m in modes)
    out = [head]
    for c in doc["cases"]:
        cells = []
        for m in modes:
            tr = c["trainer"].get(m) or {}
            cells.append(f"{c['tokens_lost'].get(m, 0)}/{tr.get('forked_rows', 0)}".ljust(len(f"lost/forks {m}")))
        cause = c["cause"] or ("template error" if c["status"] == "error" else "-")
        out.append(f"{c['name'].ljust(width)}  {c['status'].ljust(6)}  {cause.ljust(22)}  " + "  ".join(cells))
    t = doc["totals"]
    out.append("")
    out.append(f"tokenizer: {doc['tokenizer']} (chat template sha256 {doc['chat_template_sha256']})")
    out.append(f"cases: {t['cases']}: {t['passed']} pass, {t['failed']} fail, {t['errors']} error; by cause: "
               + (", ".join(f"{k} {v}" for k, v in sorted(t["by_cause"].items())) or "none"))
    out.append("trained tokens losing gradient: " + ", ".join(f"{m} {t['tokens_lost'][m]}" for m in modes))
    for c in doc["cases"]:
        if c["status"] == "error":
            out.append(f"error in {c['name']}: {c['error']}")
        for n in c["notes"]:
            out.append(f"note ({c['name']}): {n}")
    return out


def _cmd_certify(args: argparse.Namespace, settings: Settings) -> int:
    from viewer.drift.certify import certify
    from viewer.drift.certify_cases import battery
    from viewer.drift.trainer import MODES

    if args.fork_threshold is not None and args.fork_threshold < 0:
        raise CliError("--fork-threshold must be ≥ 0", BAD_INPUT)
    known = [c.name for c in battery()]
    bad = [c for c in args.case or [] if c not in known]
    if bad:
        raise CliError(f"unknown case {bad[0]!r}: use one of {', '.join(known)}", BAD_INPUT)
    extra = []
    if args.conversations:
        from viewer.drift.certify_input import cases_from_source

        extra = cases_from_source(args.conversations, settings, limit=args.limit)
    tok, name = load_for_certify(args.tokenizer, online=args.online)
    try:
        doc = certify(tok, name=name, extra=extra, only=args.case or None, fork_threshold=args.fork_threshold)
    except ValueError as e:
        raise CliError(str(e), BAD_INPUT) from None
    modes = list(MODES) if args.trainer == "all" else [args.trainer]
    if args.json:
        from .common import print_json

        print_json(doc)
    else:
        print("\n".join(card_lines(doc, modes)))
    sys.stdout.flush()
    failed = doc["totals"]["failed"] + doc["totals"]["errors"]
    return FINDINGS if args.fail_on_findings and failed else OK


def add_parser(sub: Any) -> None:
    p = sub.add_parser("certify", help="will a tokenizer + chat template lose gradient in agent RL? (report card)",
                       description="Run a battery of agent-shaped conversations through TOKENIZER's chat template, "
                                   "simulating sampling turn by turn; check prefix stability and the decode/encode "
                                   "round trip; name each failure's cause and the trained tokens it costs under "
                                   "each trainer mode.")
    p.add_argument("tokenizer", metavar="TOKENIZER",
                   help="qwen3 (bundled), a tokenizer folder, a capture folder (its tokenizer/), or a Hub name "
                        "(local cache; --online to download)")
    add_common(p, findings="a case fails or its template cannot render it")
    p.add_argument("--conversations", metavar="FILE", default=None,
                   help="also certify the conversations in FILE (messages / Harbor dataset file, capture folder, "
                        "trace file)")
    p.add_argument("--limit", type=int, default=20, metavar="N", help="at most N conversations from FILE")
    p.add_argument("--case", action="append", metavar="NAME", help="run only this built-in case (repeatable)")
    p.add_argument("--trainer", choices=["all", "trl-message", "trl-contract"], default="all",
                   help="whose losses the card shows (the JSON has both)")
    p.add_argument("--fork-threshold", type=int, default=None, metavar="N",
                   help="TRL's fork_threshold_tokens for both trainers (default: 1024 for trl-message, 0 for "
                        "trl-contract)")
    p.add_argument("--online", action="store_true", help="allow downloading a Hub tokenizer")
    p.set_defaults(func=_cmd_certify)
