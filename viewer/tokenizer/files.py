"""A tokenizer folder's files: which ones make it whole, where the Hub lookup may miss, and the
check of a capture's ``tokenizer/`` against the sha256s its ``summary.json`` recorded.

Read by the choice (:mod:`.choice`) and by the capture that ships the folder
(:mod:`viewer.capture.tokfiles`), so both copy, fetch and check the same files.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ..layout import SUMMARY, TOKENIZER_DIR

__all__ = ["TOKENIZER_FILES", "hub_lookup_errors", "sha256_file", "verify_capture_tokenizer",
           "MAX_TOKENIZER_FILES", "MAX_TOKENIZER_FILE_MB"]

# what makes a tokenizer + chat template whole (a capture ships the present ones: capture/tokfiles.py)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "chat_template.json",
                   "special_tokens_map.json", "vocab.json", "merges.txt", "added_tokens.json")


def hub_lookup_errors() -> tuple[type[Exception], ...]:
    """What a Hub lookup raises when a repo's files are not there for us: not cached, offline, gated or
    missing (OSError: huggingface_hub's HTTP and cache errors are OSErrors), not a repo id
    (ValueError), no such file (EntryNotFoundError). Anything else is a bug and is not caught."""
    from huggingface_hub.errors import EntryNotFoundError

    return (OSError, ValueError, EntryNotFoundError)


def sha256_file(p: Path) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


# What summary.json may name in tokenizer.files: plain file names (no folders, no "..", not
# absolute), at most this many, each file hashed only up to this size (a tokenizer.json is ~11 MB).
MAX_TOKENIZER_FILES = 32
MAX_TOKENIZER_FILE_MB = 64


def _plain_name(name: object) -> bool:
    return (isinstance(name, str) and 0 < len(name) <= 255 and name not in (".", "..")
            and not any(c in name for c in "/\\\x00") and not (len(name) > 1 and name[1] == ":"))


def verify_capture_tokenizer(capture_dir: Path) -> str | None:
    """Compare a capture's ``tokenizer/`` with the sha256s its ``summary.json`` recorded: None
    when they match (or nothing was recorded), else what differs.

    Only plain file names inside ``tokenizer/`` are looked at (a name like ``../../x`` or an
    absolute path would make this an oracle for files elsewhere on the server), no links,
    each at most MAX_TOKENIZER_FILE_MB."""
    try:
        rec = json.loads((Path(capture_dir) / SUMMARY).read_text()).get("tokenizer")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(rec, dict) or not isinstance(rec.get("files"), dict):
        return None
    bad = []
    folder = Path(capture_dir) / TOKENIZER_DIR
    items = list(rec["files"].items())
    if len(items) > MAX_TOKENIZER_FILES:
        bad.append(f"{len(items)} files listed, only the first {MAX_TOKENIZER_FILES} checked")
    for name, want in items[:MAX_TOKENIZER_FILES]:
        if not _plain_name(name):
            bad.append(f"{str(name)[:80]!r} is not a plain file name (not checked)")
            continue
        f = folder / name
        if f.is_symlink() or not f.is_file():
            bad.append(f"{name} missing")
        elif f.stat().st_size > MAX_TOKENIZER_FILE_MB * 1048576:
            bad.append(f"{name} over {MAX_TOKENIZER_FILE_MB} MB (not checked)")
        elif sha256_file(f) != want:
            bad.append(f"{name} changed")
    return ("the capture's tokenizer files differ from what it recorded when it was made: " + ", ".join(bad)
            if bad else None)
