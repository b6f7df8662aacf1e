"""File kinds: which container a data file is (parquet, JSONL, JSON, a zip log), by its name or its bytes.

The row layer (:mod:`viewer.sources.rowdata`) reads each kind; nothing here knows about trace formats.
"""
from __future__ import annotations

import json

__all__ = ["DATA_EXTS", "data_kind", "sniff_kind"]

# ".traj": SWE-agent's trajectory files, one JSON object each
DATA_EXTS = {".parquet": "parquet", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".traj": "json",
             ".eval": "zip"}  # ".eval": an Inspect AI log, a zip read whole into one row (read_inspect_eval)


_BY_SUFFIX = {ext[1:]: kind for ext, kind in DATA_EXTS.items()}  # (every extension is one suffix: no dot inside)


def data_kind(path: str) -> str | None:
    """The kind of ``path`` by its extension (what ``path.lower().endswith(ext)`` says, in one lookup: twice a
    file over a folder of thousands)."""
    head, dot, ext = path.rpartition(".")
    return _BY_SUFFIX.get(ext.lower()) if dot else None


def sniff_kind(path) -> str | None:
    """The container of a file whose name does not tell (``--format`` on a ``.log`` or ``.out``), from its
    first bytes: parquet's and zip's magic numbers, else JSONL when the first line is a whole JSON value and
    more lines follow, else JSON when it opens like JSON. None: none of these."""
    with open(path, "rb") as fh:
        head = fh.read(1 << 16)
    if head[:4] == b"PAR1":
        return "parquet"
    if head[:4] == b"PK\x03\x04":
        return "zip"
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text[:1] not in (b"{", b"["):
        return None
    line, nl, rest = text.partition(b"\n")
    if nl and rest.strip():
        try:
            json.loads(line)
            return "jsonl"
        except ValueError:  # the first line is not a whole value: one JSON document over many lines
            pass
    return "json"
