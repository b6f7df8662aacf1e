"""``python -m viewer export SOURCE -o rollout.html`` and ``export --deck deck.json -o talk.html``: a
rollout, or a whole talk, as one HTML file that opens offline (docs/TALK.md, "Export").

A bad ``--turns`` / ``--tok`` / ``--mode``, a turn the rollout lacks, an unreadable deck: one
``error:`` line, exit 2; a file over the ``response_mb`` budget: exit 3 (docs/CLI.md).
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from viewer.config import Settings

from .common import BAD_INPUT, OK, CliError, add_common, add_setting_option, print_json

__all__ = ["add_parser", "EXPORT_KEYS"]

EXPORT_KEYS = ("out", "bytes", "steps", "rollouts", "turns", "notes", "flagged_notes", "seconds")


def _write(out: Path, html: str) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".part")
    tmp.write_text(html, encoding="utf-8")
    os.replace(tmp, out)  # never a half-written file under the name asked for


def _cmd_export(args: argparse.Namespace, settings: Settings) -> int:
    from viewer.render.export import export_html
    from viewer.talk import export as ex

    t0 = time.perf_counter()
    if args.deck and args.source:
        raise CliError("give SOURCE or --deck DECK, not both")
    if not args.deck and not args.source:
        raise CliError("name a SOURCE (capture folder, file, sample:NAME) or --deck DECK")
    try:
        turns = ex.parse_turns(args.turns)
        tok = ex.parse_tok(args.tok)
    except ValueError as e:
        raise CliError(str(e)) from None
    if args.deck:
        if args.turns or args.tok or args.mode or args.rescore:
            raise CliError("--turns, --tok, --mode and --rescore apply to one rollout; a deck names them per step")
        from viewer.talk import deck as deck_mod
        from viewer.talk.common import TalkError

        try:
            deck = deck_mod.parse(Path(args.deck).read_bytes(), args.deck)
            doc = ex.deck_doc(deck, settings, tokenizer=args.tokenizer)
        except (TalkError, ValueError, KeyError) as e:
            raise CliError(str(e).strip("'\"")) from None
        doc.present = bool(args.present)
    else:
        try:
            ld = ex.load(args.source, settings, row=args.row, tokenizer=args.tokenizer)
        except ValueError as e:
            raise CliError(str(e)) from None
        if args.rescore:
            ld.rescore = _rescore(ld, args.rescore, settings)
        try:
            doc = ex.rollout_doc(ld, settings, turns=turns, tok=tok, mode=args.mode or "mask", present=args.present)
        except ValueError as e:
            raise CliError(str(e)) from None
    html = export_html(doc)
    data = html.encode("utf-8")
    settings.limits().check_bytes("response_mb", len(data), f"the exported file {args.out}")
    _write(Path(args.out), html)
    notes = [c for p in doc.rollouts for c in p.notes]
    summary: dict[str, Any] = {"out": str(args.out), "bytes": len(data), "steps": len(doc.steps),
                               "rollouts": len(doc.rollouts), "turns": sum(len(p.turns) for p in doc.rollouts),
                               "notes": len(notes), "flagged_notes": sum(1 for c in notes if c.problem),
                               "seconds": round(time.perf_counter() - t0, 3)}
    if args.json:
        print_json(summary, indent=2)
    else:
        print(f"wrote {args.out}: {len(data) / 1e6:.2f} MB, {summary['steps']} step(s), {summary['turns']} turn(s), "
              f"{summary['notes']} note(s) ({summary['flagged_notes']} flagged); opens offline from file://")
    return OK


def _rescore(ld: Any, model: str, settings: Settings) -> Any:
    """Run a rescore (as ``rescore SOURCE --model M``) so the file has the Δ colour mode."""
    from viewer.budgets import BudgetExceeded
    from viewer.drift import choose_spec
    from viewer.rescore import TorchMissing, rescore, torch_available

    if not torch_available():
        raise TorchMissing()
    spec = choose_spec(ld.rollout)
    try:
        return rescore(ld.rollout, model, settings, spec=spec,
                       tok=ld.choice.tokenizer if spec.mode == "trl-message" else None)
    except (TorchMissing, BudgetExceeded):
        raise
    except (ValueError, RuntimeError, OSError) as e:
        raise CliError(str(e), BAD_INPUT) from None


def add_parser(sub: Any) -> None:
    p = sub.add_parser("export", help="a rollout (or a deck of steps) as one self-contained HTML file that opens "
                                      "offline: token view, hover, plot, notes, presenter mode")
    p.add_argument("source", metavar="SOURCE", nargs="?", default=None,
                   help="capture folder, trace/turns file, dataset file, sample:NAME or hf://datasets/...")
    p.add_argument("-o", "--out", required=True, metavar="FILE.html", help="the file to write")
    p.add_argument("--deck", metavar="DECK.json", help="export every step of a deck (docs/TALK.md) instead of SOURCE")
    p.add_argument("--turns", metavar="SPEC", help="turns to include, e.g. 3,5-7 (default: every turn)")
    p.add_argument("--tok", metavar="A-B", help="tokens selected in the first turn, as a link's ?tok=")
    p.add_argument("--mode", choices=("mask", "logprob", "delta", "drift"), default=None,
                   help="colour mode it opens in (drift: mask colours with the drift marks on; delta needs --rescore)")
    p.add_argument("--present", action="store_true", help="open in presenter mode")
    p.add_argument("--rescore", metavar="MODEL", help="run a rescore first (needs torch) so the file has the Δ mode")
    p.add_argument("--row", type=int, help="row of a row dataset")
    add_setting_option(p, "--tokenizer", "tokenizer", metavar="T", default=None)
    add_common(p)
    p.set_defaults(func=_cmd_export)
