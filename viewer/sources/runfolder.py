"""Run folders: a producer's rollouts beside their side files (issue 35).

A folder a harness or an eval writes mixes the rows with files that are not rows: verifiers'
``results.jsonl`` beside ``metadata.json``, SWE-agent's ``*.traj`` and mini-swe-agent's ``*.traj.json`` (a
folder an instance) beside the run's ``preds.json``. Opening the folder as a dataset keeps the files one
format reads and names the ones left out.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterator

from viewer.budgets import BudgetExceeded

__all__ = ["files_of_one_format", "folder_files"]


def folder_files(root: Path, settings: Any = None) -> Iterator[str]:
    """Every file under the folder ``root`` that a dataset of it may hold, relative and ``/``-separated: hidden
    folders (the search index) skipped, and never another visitor's capture (:func:`viewer.sources.upload.visible_walk`).
    The one listing ``open_dataset`` and the scans' "is this a dataset?" share."""
    from viewer.sources.upload import visible_walk

    base = str(root)
    for top, dirs, names in visible_walk(base, settings):  # (a capture root in the data root)
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        rel = top[len(base):].lstrip(os.sep).replace(os.sep, "/")  # (os.walk joins each folder onto base)
        at = rel + "/" if rel else ""
        for n in names:  # (string paths: pathlib cost ~40 us a file over a folder of trajectories)
            yield at + n

_KIND_ORDER = {"parquet": 0, "jsonl": 1, "zip": 2, "json": 3}  # JSON last: run folders' metadata.json, preds.json


def files_of_one_format(root: Path, files: list[str], fmt: str | None, kw: dict) -> tuple[list[str], list[str]]:
    """The data files of a folder that hold the rows, and those left out. A run folder mixes rollouts with
    their side files (verifiers' ``results.jsonl`` + ``metadata.json``, SWE-agent's ``*.traj`` + ``preds.json``):
    the files are grouped by extension (a side file a format names, ``RowFormat.side_files``, by its name: it
    has the rows' extension), the biggest group (JSONL before JSON on a tie) picks the format by its first
    file, and each other group stays only when the same format reads its first file. One row read per
    group, never per file."""
    from viewer.sources.registry import all_formats, detect_formats, get_format
    from viewer.sources.rowdata import RowReadError, data_kind, local_dataset

    side = frozenset(n for f in all_formats() for n in f.side_files)
    group_of = {f: _group(f, side) for f in files}
    groups: dict[str, list[str]] = {}
    for f, g in group_of.items():
        groups.setdefault(g, []).append(f)
    if len(groups) < 2:
        return files, []
    order = sorted(groups, key=lambda e: (-len(groups[e]), _KIND_ORDER.get(data_kind(groups[e][0]) or "", 9), e))

    def formats_of(ext: str) -> list[str]:
        try:
            one = local_dataset([str(root / groups[ext][0])], str(root), str(root), **kw)
            first = one.read_rows([0])[0][1] if one.count(one.files[0]) else None
        except (RowReadError, BudgetExceeded, OSError, IndexError):
            return []
        if not isinstance(first, dict):
            return []
        if fmt in (None, "auto", "capture"):
            return [f.name for f in detect_formats(set(first), first)]
        try:
            named = get_format(fmt)
        except KeyError:  # an unknown name is reported when the dataset is opened
            return []
        return [fmt] if detect_formats(set(first), first) and named.detect(set(first), first) else []

    found = {e: formats_of(e) for e in order}
    lead = next((e for e in order if found[e]), None)
    if lead is None:
        return files, []  # nothing detected: "unknown format" names the fields of the first file
    name = found[lead][0]
    keep = {e for e in order if name in found[e]}
    return [f for f in files if group_of[f] in keep], [f for f in files if group_of[f] not in keep]


def _group(name: str, side: frozenset[str]) -> str:
    """The group of a folder's file: a side file a format names (``RowFormat.side_files``) by its name, any other
    file by its extension."""
    base = name.rpartition("/")[2].lower()
    return f"name:{base}" if base in side else _suffix(name)


# Suffixes of two parts that name a producer's rollout files beside side files of the last part alone:
# mini-swe-agent writes <instance>/<instance>.traj.json beside the run's preds.json (sorted first of all)
_TWO_PART = (".traj.json",)


def _suffix(name: str) -> str:
    """``Path(name).suffix.lower()`` without a Path a file (two each over a folder of 7,579 cost 30 ms), or one of
    :data:`_TWO_PART` that the name ends with."""
    last = name.rpartition("/")[2].lower()
    for two in _TWO_PART:  # (as pathlib's suffixes: a name that is only dots before it, ".traj.json", has ".json")
        if last.endswith(two) and last[:-len(two)].lstrip("."):
            return two
    i = last.rfind(".")
    return last[i:] if 0 < i < len(last) - 1 else ""
