"""The one validation point for what a visitor types: capture fields and deep-link parameters.

The checks themselves live here (bounded text, choices, repo ids, numbers, URLs, sources, deep
links); :func:`viewer.capture.fields.capture_spec` applies them to a capture's fields, so this
module never imports ``viewer.capture`` (capture uses these checks: no package cycle).

Every entry point (the Capture tab, ``python -m viewer capture``, the page's ``?source=``
``?row=`` ``?turn=`` ``?tok=`` ``?mode=`` ``?compare=`` ``?job=`` ``?present=`` links) turns
its raw strings into typed values here, before anything acts on them. A bad value raises
:class:`VisitorError`, whose message names the field and what is wrong (shown to the user).

Why one place: a visitor's value is data. It is never a process argument, a server path
(outside the data root), a network address that was not checked, or a reason to use the
owner's credentials. Checking each field once, by what it *is* (a listed model name, a Hub
repo id, a bounded number, an http(s) URL), makes that true by construction instead of by
every caller remembering (docs/SECURITY.md, "Capture and visitor input").

Sources (local paths, ``hf://``) are checked by :func:`viewer.sources.upload.resolve_user_path`
and :func:`viewer.sources.hub.parse_hf`; :func:`source` only routes to them. No gradio here.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import urlsplit

from viewer.config import Settings

__all__ = ["start_source", "VisitorError", "REPO_ID", "SERVED_NAME", "FLAVOR", "bounded_text", "repo_id", "endpoint_url", "instruction",
           "bounded_int", "bounded_float", "choice", "DeepLink", "deep_link", "source", "job_id", "local_path",
           "deck_file", "NOTE_REF", "SAMPLE_DECK"]

# A Hub repo id as the Hub accepts it (OWNER/NAME, ASCII letters, digits, - _ .; no "--" or ".."),
# always with an owner: a bare word could be read as a relative file name by a tool downstream.
REPO_ID = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,94}[A-Za-z0-9])?/[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,94}[A-Za-z0-9])?")
# A model name an OpenAI endpoint serves (sent as JSON "model", never a path): a repo-id-like word.
SERVED_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/-]{0,199}")
FLAVOR = re.compile(r"[a-z0-9][a-z0-9-]{0,39}")
JOB_ID = re.compile(r"[0-9a-f]{32}")
MAX_INSTRUCTION = 20_000
MAX_URL = 2048
MAX_SOURCE = 4096
# ?note=K: the K-th note (1-based) or a note's id, as docs/TALK.md spells ids
NOTE_REF = re.compile(r"[A-Za-z0-9_-]{1,32}")
SAMPLE_DECK = "sample:deck.json"  # ?deck= for the bundled example deck, wherever the data root is


class VisitorError(ValueError):
    """A visitor's value was refused; ``str(e)`` is the message for the user, ``field`` names the input."""

    def __init__(self, field_name: str, message: str):
        super().__init__(f"{field_name}: {message}")
        self.field = field_name


def bounded_text(name: str, value: Any, max_len: int = 512) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise VisitorError(name, f"expected text, got {type(value).__name__}")
    v = value.strip()
    if len(v) > max_len:
        raise VisitorError(name, f"too long ({len(v):,} characters; at most {max_len:,})")
    if any(ord(c) < 32 and c not in "\n\t" for c in v):
        raise VisitorError(name, "contains control characters")
    return v


def choice(name: str, value: Any, options: tuple[str, ...]) -> str:
    v = bounded_text(name, value, 64)
    if v not in options:
        raise VisitorError(name, f"{v!r} is not one of {', '.join(repr(o) for o in options if o)}")
    return v


def repo_id(name: str, value: Any, required: bool = True) -> str:
    """OWNER/NAME as the Hub spells a repo id (no path, no URL)."""
    v = bounded_text(name, value, 200)
    if not v:
        if required:
            raise VisitorError(name, "required (a Hub repo id OWNER/NAME)")
        return ""
    if not REPO_ID.fullmatch(v) or "--" in v or ".." in v or v.endswith(".git"):
        raise VisitorError(name, f"{v!r} is not a Hub repo id (OWNER/NAME: letters, digits, - _ .)")
    return v


def endpoint_url(value: Any, required: bool = True) -> str:
    """An http(s) URL with a host (its address is checked by policy.pin_endpoint at connect time)."""
    v = bounded_text("endpoint", value, MAX_URL)
    if not v:
        if required:
            raise VisitorError("endpoint", "required with the endpoint backend (http://host:port)")
        return ""
    try:
        parts = urlsplit(v)
        parts.port  # noqa: B018 (raises on a bad port)
    except ValueError as e:
        raise VisitorError("endpoint", f"not a URL ({e})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise VisitorError("endpoint", "must be an http:// or https:// URL with a host")
    if parts.username or parts.password:
        raise VisitorError("endpoint", "credentials in the URL are refused (use the token field)")
    return v


def instruction(value: Any) -> str:
    """Free text for the agent: bounded, travels only as data (TASK.md, the job's spec file)."""
    v = bounded_text("instruction", value, MAX_INSTRUCTION)
    if "\x00" in v:
        raise VisitorError("instruction", "contains a NUL character")
    return v


def bounded_int(name: str, value: Any, lo: int, hi: int, default: int | None = None) -> int:
    if value is None or (isinstance(value, str) and not value.strip()):
        if default is None:
            raise VisitorError(name, "required")
        return default
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise VisitorError(name, f"{value!r} is not a number") from None
    if isinstance(value, bool) or f != f or not f.is_integer():
        raise VisitorError(name, f"{value!r} is not a whole number")
    if not lo <= f <= hi:
        raise VisitorError(name, f"{value!r} is out of range ({lo} to {hi})")
    return int(f)


def bounded_float(name: str, value: Any, lo: float, hi: float, default: float | None = None) -> float:
    if value is None or (isinstance(value, str) and not value.strip()):
        if default is None:
            raise VisitorError(name, "required")
        return float(default)
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise VisitorError(name, f"{value!r} is not a number") from None
    if isinstance(value, bool) or f != f or not lo <= f <= hi:
        raise VisitorError(name, f"{value!r} is out of range ({lo:g} to {hi:g})")
    return f


# ---------------------------------------------------------------------------- deep links
def job_id(value: Any) -> str | None:
    """A capture job id (32 hex, from the runner) or None."""
    v = (value or "").strip() if isinstance(value, str) else ""
    return v if JOB_ID.fullmatch(v) else None


def _range(text: str) -> tuple[int, int] | None:
    m = re.fullmatch(r"\s*(\d{1,9})\s*(?:-\s*(\d{1,9}))?\s*", text or "")
    if not m:
        return None
    a = int(m.group(1))
    b = int(m.group(2)) if m.group(2) else a
    return (min(a, b), max(a, b))


def _index(text: str | None) -> int | None:
    t = (text or "").strip()
    return int(t) if re.fullmatch(r"\d{1,9}", t) else None


@dataclass(frozen=True)
class DeepLink:
    """What a page link asks for, typed; ``ignored`` lists the parameters that were not valid
    (``"what\0why"`` each; :attr:`notice` says them to the user). Field names are the query's names."""

    source: str = ""
    row: int | None = None
    turn: int | None = None
    tok: tuple[int, int] | None = None
    mode: str = "mask"
    compare: str = ""
    compare_row: int | None = None
    job: str | None = None
    present: bool = False
    note: str = ""  # ?note=K: a note's 1-based place or its id (viewer/ui/talk_handlers.py opens it)
    deck: str = ""  # ?deck=PATH: checked by :func:`deck_file` when opened, like a source
    ignored: list[str] = field(default_factory=list)

    @property
    def notice(self) -> str:
        # one clause per parameter, each saying what it should have been
        return "; ".join(f"{'Ignored' if i == 0 else 'ignored'} {what} in the link: {why}"
                         for i, (what, why) in enumerate(w.split("\0") for w in self.ignored)) + "." \
            if self.ignored else ""


def deep_link(query: Mapping[str, Any]) -> DeepLink:
    """The page's query parameters, typed. Sources stay text here (checked by :func:`source` when opened)."""
    q = {str(k): ("" if v is None else str(v)) for k, v in dict(query or {}).items()}
    bad: list[str] = []

    def num(key: str) -> int | None:
        n = _index(q.get(key))
        if q.get(key) and n is None:
            bad.append(f"{key}={q[key][:40]!r}\0not a number")
        return n

    def src(key: str) -> str:
        v = q.get(key, "").strip()
        if len(v) > MAX_SOURCE or "\x00" in v:
            bad.append(f"{key}=({len(v):,} characters)\0too long or not text")
            return ""
        return v

    tok = _range(q.get("tok", ""))
    if q.get("tok") and tok is None:
        bad.append(f"tok={q['tok'][:40]!r}\0not N or N-M")
    mode = q.get("mode", "").strip() or "mask"
    if not re.fullmatch(r"[a-z_]{1,32}", mode):
        bad.append(f"mode={mode[:40]!r}\0not a colour mode name")
        mode = "mask"
    job = job_id(q.get("job"))
    if q.get("job") and job is None:
        bad.append(f"job={q['job'][:40]!r}\0not a job id")
    note = q.get("note", "").strip()
    if note and not NOTE_REF.fullmatch(note):
        bad.append(f"note={note[:40]!r}\0not a note number or id")
        note = ""
    return DeepLink(source=src("source"), row=num("row"), turn=num("turn"), tok=tok, mode=mode,
                    compare=src("compare"), compare_row=num("compare_row"), job=job,
                    present=q.get("present") == "1", note=note, deck=src("deck"), ignored=bad)


def start_source(sample: str) -> str:
    """What the page opens when its link names no source: ``Settings.sample`` as a bundled sample's name
    (``sample:NAME``) when it is one of the bundled samples, else as the path it is. Known by where it
    is, not by its folder's name: a user's own folder called ``sample_data`` is theirs."""
    from viewer.config import SAMPLE_DIR

    path = Path(sample)
    try:
        bundled = path.resolve().parent == SAMPLE_DIR.resolve()
    except (OSError, RuntimeError):
        bundled = False
    return "sample:" + path.name if bundled else sample


@dataclass(frozen=True)
class Source:
    """A source a visitor named: ``kind`` sample | hub | path; ``path`` set for a local one."""

    kind: str
    text: str
    path: Path | None = None


def source(text: Any, settings: Settings, samples: list[str] | None = None) -> Source:
    """Check a typed or linked source. ``sample:NAME`` must be listed; ``hf://`` goes to
    :func:`viewer.sources.hub.parse_hf`; anything else to
    :func:`viewer.sources.upload.resolve_user_path` (inside the data root). Raises ValueError
    (VisitorError or the delegate's error) with a message for the user."""
    v = bounded_text("source", text, MAX_SOURCE)
    if not v:
        raise VisitorError("source", "name a rollout: sample:NAME, a path inside the data root, or "
                                     "hf://datasets/OWNER/NAME")
    if v.startswith("sample:"):
        name = v.split(":", 1)[1]
        if samples is not None and name not in samples:
            raise VisitorError("source", f"no bundled sample named {name!r}")
        return Source("sample", v)
    if v.startswith("hf://"):
        from viewer.sources.hub import HubError, parse_hf

        try:
            parse_hf(v)
        except HubError as e:
            raise VisitorError("source", str(e)) from None
        return Source("hub", v)
    from viewer.sources.upload import resolve_user_path

    return Source("path", v, resolve_user_path(v, settings))


def local_path(text: Any, settings: Settings, name: str = "path"):
    """A typed local path (the Path box, a tokenizer folder, a scan folder, a dataset file):
    bounded text, then :func:`viewer.sources.upload.resolve_user_path` (inside the data root,
    never another visitor's upload). Raises ValueError with a message for the user."""
    from viewer.sources.upload import resolve_user_path

    return resolve_user_path(bounded_text(name, text, MAX_SOURCE), settings)


def deck_file(text: Any, settings: Settings) -> Path:
    """A deck a link or a visitor names: ``sample:deck.json`` (the bundled example) or a ``.json`` file
    inside the data root (:func:`viewer.sources.upload.resolve_user_path`: never outside it, never
    another visitor's upload). Raises VisitorError naming the deck and the reason."""
    v = bounded_text("deck", text, MAX_SOURCE)
    if not v:
        raise VisitorError("deck", "name a deck.json inside the data root")
    if v == SAMPLE_DECK:
        from viewer.config import SAMPLE_DIR
        from viewer.layout import DECK

        return SAMPLE_DIR / DECK
    from viewer.sources.upload import resolve_user_path

    try:
        p = resolve_user_path(v, settings)
    except ValueError as e:
        raise VisitorError("deck", str(e)) from None
    if not p.is_file() or p.suffix.lower() != ".json":
        raise VisitorError("deck", f"{v}: not a .json file")
    return p
