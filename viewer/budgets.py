"""Budgets: how much work, memory and disk one thing a visitor brings may cost the server.

One concept for every reader, renderer and scan (docs/SECURITY.md, "Resources"): a
:class:`Budget` has a name, a unit, a default for a local app and a (smaller) default for a
public one, and a setting (``VIEWER_BUDGET_<NAME>``) that overrides both. Code asks
:func:`limits` once for the values in force and calls :meth:`Limits.check` where it counts;
going over raises :class:`BudgetExceeded`, whose message names the budget, what went over,
and how a local user raises it. Pure Python: no gradio, no I/O.

Why two defaults: a local user's honest 690 MB trace must open, while on a public Space one
visitor's file must not starve the others (issue 26). A setting of 0 means "the mode's default".
"""
from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["Budget", "BUDGETS", "BudgetExceeded", "Limits", "limits", "env_name"]


@dataclass(frozen=True)
class Budget:
    name: str
    unit: str
    local: float   # default on a local (non-public) app
    public: float  # default in public mode
    help: str


MB = "MB"
# Each budget once; docs/SETTINGS.md's budgets table and docs/SECURITY.md list these (tests check it).
BUDGETS: tuple[Budget, ...] = (
    Budget("decompressed_mb", MB, 4096, 512,
           "Bytes one open may decompress (zip entries, gzip, parquet row groups), in MB."),
    Budget("records", "records", 5_000_000, 50_000,
           "Records (model calls, turns, steps) one rollout may hold."),
    Budget("turns", "turns", 100_000, 2_000, "Turns one rollout may hold."),
    Budget("turn_tokens", "tokens", 5_000_000, 500_000, "Tokens one turn may hold."),
    Budget("tokenize_mb", MB, 256, 4, "Text one re-render may hand the tokenizer (a rendered prompt), in MB."),
    Budget("response_mb", MB, 1024, 32, "Bytes one answer to the browser may carry, in MB."),
    Budget("template_s", "s", 60, 5, "Seconds one chat-template render may take."),
    Budget("template_mb", MB, 4096, 256, "Memory one chat-template render may grow the process by, in MB."),
    Budget("nesting", "levels", 1000, 100,
           "Nesting depth of YAML values a reader accepts (JSON stops at the parser's own depth, 1000)."),
    Budget("hub_mb", MB, 100_000, 512, "Bytes read from the Hub for one source, in MB."),
    Budget("upload_files", "files", 10_000, 64, "Files in one upload (a multi-file upload or a zip's entries)."),
    Budget("rows_scanned", "rows", 10_000_000, 100_000, "Rows one sort, filter or scan may read."),
    Budget("disk_mb", MB, 100_000, 2048, "Disk the server keeps for uploads and downloads of all visitors, in MB."),
    Budget("disk_client_mb", MB, 0, 512,
           "Disk held by one client (an address) in uploads and downloads, Gradio's upload route included, "
           "in MB (0 = no share: disk_mb only)."),
    Budget("disk_ttl_s", "s", 0, 3600,
           "Seconds an upload or download is kept after it was last used (0 = until the app stops)."),
    Budget("captures_per_account", "captures", 0, 1,
           "Captures one account may have running or queued (0 = no limit beyond one per visitor)."),
    Budget("session_notes_mb", MB, 0, 4,
           "Notes one visitor session keeps in server memory (rollouts whose notes are not a file), in MB "
           "(0 = no limit)."),
    Budget("session_notes_rollouts", "rollouts", 0, 32,
           "Rollouts one visitor session keeps notes on in server memory (0 = no limit)."),
    Budget("session_events", "events", 0, 2,
           "Heavy events (opens, uploads, tokenizer changes, comparisons, Certify) one visitor session, and one "
           "signed-in account, may have running at once; past it: busy, try again (0 = no limit)."),
    Budget("queue_size", "events", 0, 64,
           "Events that may wait in the app's queue; past it a new one is refused as busy (0 = no limit)."),
    Budget("certify_s", "s", 0, 10,
           "Seconds of chat-template renders one Certify may take, in its own render worker (0 = no limit "
           "beyond template_s per render)."),
)
_BY_NAME = {b.name: b for b in BUDGETS}


def env_name(name: str) -> str:
    return f"VIEWER_BUDGET_{name.upper()}"


class BudgetExceeded(ValueError):
    """Work stopped because a budget was reached; the message is for the user."""

    def __init__(self, name: str, limit: float, seen: float | None, what: str, public: bool):
        b = _BY_NAME[name]
        amount = f"{_fmt(seen)} {b.unit}, over" if seen is not None else "over"
        how = ("this public app keeps each visitor within it" if public else
               f"raise it with {env_name(name)}=N")
        super().__init__(f"{what}: {amount} the {_fmt(limit)} {b.unit} budget for {b.help[0].lower()}"
                         f"{b.help[1:].rstrip('.')} ({how})")
        self.name, self.limit, self.seen, self.what = name, limit, seen, what


def _fmt(x: float | None) -> str:
    if x is None:
        return "?"
    return f"{x:,.0f}" if float(x).is_integer() or abs(x) >= 100 else f"{x:,.2f}"


@dataclass(frozen=True)
class Limits:
    """The budgets in force (one value per :data:`BUDGETS` name; 0 = no limit)."""

    values: tuple[tuple[str, float], ...]
    public: bool = False

    def __getattr__(self, name: str) -> float:
        for k, v in self.values:
            if k == name:
                return v
        raise AttributeError(name)

    def bytes(self, name: str) -> int:
        """A ``*_mb`` budget in bytes (0 = no limit)."""
        return int(getattr(self, name) * 1024 * 1024)

    def check(self, name: str, seen: float, what: str) -> None:
        """Raise :class:`BudgetExceeded` when ``seen`` is over budget ``name`` (in its unit)."""
        limit = getattr(self, name)
        if limit and seen > limit:
            raise BudgetExceeded(name, limit, seen, what, self.public)

    def check_bytes(self, name: str, seen_bytes: int, what: str) -> None:
        limit = self.bytes(name)
        if limit and seen_bytes > limit:
            raise BudgetExceeded(name, getattr(self, name), seen_bytes / 1048576, what, self.public)


def limits(public: bool, environ: dict[str, str] | None = None) -> Limits:
    """The budgets in force: each ``VIEWER_BUDGET_<NAME>`` when set (and not 0), else the mode's
    default. Whether the app is public is the settings' answer (``Settings.limits()`` passes
    ``Settings.public_mode()``; budgets never read ``VIEWER_PUBLIC`` themselves)."""
    env = os.environ if environ is None else environ
    vals = []
    for b in BUDGETS:
        raw = (env.get(env_name(b.name)) or "").strip()
        try:
            v = float(raw) if raw else 0.0
        except ValueError:
            raise ValueError(f"{env_name(b.name)}={raw!r}: not a number") from None
        vals.append((b.name, v if v > 0 else (b.public if public else b.local)))
    return Limits(tuple(vals), bool(public))
