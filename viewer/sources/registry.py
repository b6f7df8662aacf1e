"""The row formats, in detection order, and detection from fields (docs/FORMATS.md §7).

Detection looks at the column names and the first row; several formats may match (the
first one wins, the others are offered). A new format is one module that defines
``FORMAT = RowFormat(...)`` plus one line in :data:`BUILTIN` below; a format shipped by
another package registers under the ``rollout_inspector.formats`` entry-point group
(the entry point names a module or a ``RowFormat``), after the built-in ones.
"""
from __future__ import annotations

import functools
import logging
from importlib.metadata import entry_points
from typing import Any

from viewer.sources import (agentcap, atif, atropos, contract, harbor, inspect_log, messages,
                             mini_swe_agent, nemo_gym, opencode, openhands, prime_rl, swe_agent, tau_bench,
                             verifiers)
from viewer.sources.formats import RowFormat

__all__ = ["BUILTIN", "ENTRY_POINT_GROUP", "all_formats", "get_format", "detect_formats", "closest_format",
           "unknown_format_message"]

ENTRY_POINT_GROUP = "rollout_inspector.formats"
# Order matters: the first detected format wins (the stricter, more specific ones first).
BUILTIN: tuple[RowFormat, ...] = (atif.FORMAT, mini_swe_agent.FORMAT, swe_agent.FORMAT, openhands.FORMAT,
                                  opencode.FORMAT, agentcap.FORMAT, harbor.FORMAT, contract.FORMAT,
                                  prime_rl.FORMAT, nemo_gym.FORMAT, atropos.FORMAT, inspect_log.FORMAT, tau_bench.FORMAT, verifiers.FORMAT,
                                  messages.FORMAT)
log = logging.getLogger(__name__)


@functools.cache
def _plugins() -> tuple[RowFormat, ...]:
    out = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            obj = ep.load()
            fmt = getattr(obj, "FORMAT", obj)
            if not isinstance(fmt, RowFormat):
                raise TypeError(f"{ep.value} is not a RowFormat (nor a module defining FORMAT)")
            out.append(fmt)
        except Exception as e:  # a broken plug-in must not take the built-in formats down
            log.warning("row format plug-in %s not loaded: %s: %s", ep.name, type(e).__name__, e)
    return tuple(out)


def all_formats() -> list[RowFormat]:
    known = {f.name for f in BUILTIN}
    return [*BUILTIN, *(f for f in _plugins() if f.name not in known)]


def get_format(name: str) -> RowFormat:
    for f in all_formats():
        if f.name == name:
            return f
    raise KeyError(f"unknown format {name!r}; known: {', '.join(f.name for f in all_formats())}")


def detect_formats(columns: set[str], first: dict[str, Any] | None,
                   failed: list[str] | None = None) -> list[RowFormat]:
    """The formats whose detector accepts these fields, in order. A detector that raises (a plug-in's
    bug) is skipped, never taking the dispatcher down; it is logged and, with ``failed`` given,
    named there (``"NAME: Error: message"``) so "unknown format" can say why."""
    out = []
    for f in all_formats():
        try:
            if f.detect(columns, first):
                out.append(f)
        except Exception as e:  # anything a plug-in's code raises: reported, not swallowed
            why = f"{f.name}: {type(e).__name__}: {e}"[:300]
            log.warning("row format detector failed: %s", why)
            if failed is not None:
                failed.append(why)
    return out


def closest_format(columns: set[str] | list[str]) -> str | None:
    """The known format whose marking fields (``RowFormat.fields``) the refused row shares most, said
    with what ruled it out: the fields it lacks, or, where it has them all, that their values have
    another shape. None when no format shares a field."""
    cols = set(columns)
    best, score = None, 0.0
    for f in all_formats():
        if not f.fields:
            continue
        have = [x for x in f.fields if x in cols]
        s = len(have) / len(f.fields) + 0.01 * len(have)  # ties: the format with more fields in common
        if have and s > score:
            best, score = f, s
    if best is None:
        return None
    lacks = [x for x in best.fields if x not in cols]
    why = (f"it lacks {', '.join(repr(x) for x in lacks)}" if lacks
           else f"it has {', '.join(repr(x) for x in best.fields)}, but their values have another shape")
    return f"closest known format: {best.name} ({best.title}); {why}"


def unknown_format_message(label: str, columns: set[str] | list[str], failed: list[str] = ()) -> str:
    cols = sorted(columns)
    shown = ", ".join(cols[:30]) + (f", … ({len(cols)} in all)" if len(cols) > 30 else "")
    known = "; ".join(f"{f.name} ({f.title})" for f in all_formats())
    broken = f" Detectors that failed on these rows: {'; '.join(failed)}." if failed else ""
    near = closest_format(cols)
    return (f"{label}: unknown format; fields found: {shown or '(none)'}. {near + '. ' if near else ''}"
            f"Known row formats: {known}; plus capture folders / trace.json / turns.json.{broken}")
