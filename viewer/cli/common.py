"""What every subcommand shares: the exit codes, the one error → exit-code mapping, ``--json`` output
and ``--help`` text taken from the settings' own docs (docs/CLI.md documents all three).

A subcommand returns :data:`OK` or :data:`FINDINGS` and raises on anything else; :func:`run` turns
the exception into one line on stderr (``error: ...``) and its exit code, never a traceback.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Callable

from viewer.config import Settings

__all__ = ["OK", "FINDINGS", "BAD_INPUT", "BUDGET", "MISSING", "INTERNAL", "EXIT_CODES", "CliError", "exit_code",
           "run", "print_json", "setting_help", "add_setting_option", "SETTING_OPTIONS", "add_common"]

OK = 0
FINDINGS = 1
BAD_INPUT = 2
BUDGET = 3
MISSING = 4
INTERNAL = 5
# code → meaning, as docs/CLI.md's table says (tests/test_cli_contract.py checks the table against this)
EXIT_CODES = {
    OK: "ok: the command ran (drift found, files differ: still 0 unless --fail-on-findings)",
    FINDINGS: "findings: the command ran and found what a pipeline should stop on (a capture that did not end "
              "ok, a dataset rescore cancelled with its partial results written; with --fail-on-findings: "
              "problems, drifted turns, a divergence, flagged tokens; lint: a rule at error level)",
    BAD_INPUT: "usage or bad input: an unknown option or bad value, a source that is missing or unreadable, a "
               "tokenizer or model that cannot be loaded",
    BUDGET: "a resource budget was exceeded (viewer/budgets.py; raise it with VIEWER_BUDGET_<NAME>)",
    MISSING: "a part this command needs is not installed (torch for rescore)",
    INTERNAL: "an unexpected error (a bug: please report it with the command line)",
}


class CliError(Exception):
    """A failure the user can act on: ``message`` names the file or option and the problem."""

    def __init__(self, message: str, code: int = BAD_INPUT):
        super().__init__(message)
        self.message, self.code = message, code


def _chain(e: BaseException):
    """``e`` and the exceptions it was raised from or while handling (readers re-raise a
    BudgetExceeded as a SourceError ``from None``, which keeps it as ``__context__``)."""
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        yield e
        e = e.__cause__ or e.__context__


def exit_code(e: BaseException) -> int:
    """The exit code of an exception a subcommand raised (the one mapping)."""
    from viewer.budgets import BudgetExceeded
    from viewer.drift import TrainerSpecError
    from viewer.drift.corpus import ScanInputError
    from viewer.rescore.model import TorchMissing
    from viewer.sources import SourceError
    from viewer.visitor import VisitorError

    if isinstance(e, CliError):
        return e.code
    if any(isinstance(x, BudgetExceeded) for x in _chain(e)):
        return BUDGET
    if isinstance(e, TorchMissing):
        return MISSING
    if isinstance(e, (SourceError, ScanInputError, TrainerSpecError, VisitorError, OSError)):
        return BAD_INPUT
    return INTERNAL


def _message(e: BaseException) -> str:
    text = getattr(e, "message", None) or str(e)
    if exit_code(e) == INTERNAL:
        text = f"unexpected {type(e).__name__}: {text}"
    return " ".join(str(text).split()) or type(e).__name__  # one line, whatever the message held


def run(func: Callable[[argparse.Namespace, Settings], int], args: argparse.Namespace, settings: Settings) -> int:
    """Run one subcommand; an exception becomes one ``error:`` line on stderr and its exit code."""
    try:
        return func(args, settings)
    except BrokenPipeError:
        # the reader went away (`... | head`): not an error of ours; stop writing, and keep Python's
        # exit-time flush from raising again (the recipe of the Python docs, "Note on SIGPIPE")
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return OK
    except Exception as e:  # noqa: BLE001  (every failure is one line and a documented code)
        print(f"error: {_message(e)}", file=sys.stderr)
        return exit_code(e)


def print_json(doc: Any, indent: int | None = None) -> None:
    """The ``--json`` output: exactly one JSON document on stdout."""
    print(json.dumps(doc, indent=indent, ensure_ascii=False))


# option → Settings field, for every subcommand (tests check that their --help is the setting's help)
SETTING_OPTIONS: dict[tuple[str, str], str] = {}


def setting_help(field: str, lead: str = "") -> str:
    """``--help`` text of an option that sets ``Settings.<field>``: the setting's own help
    (:meth:`Settings.docs`, the one copy of it), its environment variable and default."""
    doc = {name: (env, default, text) for name, env, default, text in Settings.docs()}
    env, default, text = doc[field]
    shown = "empty" if default == "" else default
    return (f"{lead}{text} (default: {env}, else {shown})").replace("%", "%%")


def add_setting_option(p: argparse.ArgumentParser, flag: str, field: str, lead: str = "", **kw: Any) -> None:
    """Add ``flag``, an option that sets ``Settings.<field>`` for this run, its help from the settings."""
    SETTING_OPTIONS[(p.prog.split()[-1], flag)] = field
    p.add_argument(flag, help=setting_help(field, lead), **kw)


def add_common(p: argparse.ArgumentParser, findings: str | None = None) -> None:
    """``--json`` on every subcommand; ``--fail-on-findings`` where the command has findings."""
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout (schema: docs/CLI.md)")
    if findings:
        p.add_argument("--fail-on-findings", action="store_true",
                       help=f"exit {FINDINGS} when {findings} (for pipelines; default exit {OK})")
