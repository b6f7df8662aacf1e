"""Command line: ``python -m viewer SUBCOMMAND`` (also installed as ``rollout-inspector``).

One module per subcommand (:mod:`.summary`, :mod:`.drift`, :mod:`.compare`, :mod:`.capture`,
:mod:`.rescore`, :mod:`.lint`, :mod:`.export`, :mod:`.view`: serves the app), each with an ``add_parser``;
:mod:`.common` holds what they share: the exit codes and the one error → exit-code mapping, ``--json``,
``--help`` text from the settings' docs. docs/CLI.md documents the commands, the codes and every ``--json``
schema. Front ends only: the library and the UI never import this package (tests/test_layering.py); ``app.py``,
the Space's entry, launches through :func:`.view.serve`.
"""
from __future__ import annotations

import argparse
import os

from viewer.config import Settings

from . import capture, certify, compare, drift, export, lint, rescore, search, summary, view
from .common import run

__all__ = ["main", "main_entry", "build_parser", "SUBCOMMANDS"]

# The viewer needs tokenizers only; transformers' "PyTorch was not found" advice is noise on
# every CLI call (set before anything imports transformers).
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

SUBCOMMANDS = (summary, drift, compare, capture, rescore, certify, lint, export, view, search)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m viewer",
                                     description="Rollout Inspector: inspect agent RL rollouts token by token. "
                                                 "Exit codes: docs/CLI.md.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module in SUBCOMMANDS:
        module.add_parser(sub)
    parser.subcommands = sub.choices  # name -> its parser (main reports a stray option with that one's usage)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)  # argparse exits 2 (common.BAD_INPUT) on usage errors
    if extra:  # as parse_args would, but from the subcommand's parser: argparse leaves an unknown option to the
        # top-level one when the subcommand has no required argument (`view`), whose usage names no option
        parser.subcommands[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
    return run(args.func, args, Settings.from_env())


def main_entry() -> None:
    """The ``rollout-inspector`` console script (same subcommands as ``python -m viewer``)."""
    import sys

    sys.exit(main())
