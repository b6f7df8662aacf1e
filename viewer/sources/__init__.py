"""Source dispatch: a path, a data file or ``hf://datasets/...`` -> the reader for its format -> Rollout.

* capture folders and single trace / turns files -> :mod:`viewer.sources.capture`;
* row datasets (parquet / JSONL / JSON files, a local folder of them, or a Hub dataset)
  -> :class:`DatasetSource`: one rollout per row, the format detected from the fields
  (docs/FORMATS.md §7; :mod:`viewer.sources.formats`) or chosen explicitly;
* ``hf://`` capture-layout repos -> the capture files are fetched, then read as a folder.

Readers never raise on bad data; :class:`SourceError` means nothing could be read (the
message says why: unknown format with the fields found, a bad row with its number and
field, offline, gated, missing).
"""
from __future__ import annotations

import re

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from viewer.budgets import BudgetExceeded
from viewer.config import Settings
from viewer.rollout import Problem, Rollout
from viewer.layout import RECORD_NAMES

__all__ = ["SourceError", "SourceNotFound", "load_source", "open_dataset", "DatasetSource"]


def version_key(v: Any) -> tuple:
    """Order of a row's version (e.g. ``batch_id``): numbers and numeric strings by value,
    other strings naturally ("v10" after "v9"), missing ones first. (Before, every non-numeric
    version counted as 1.0, so the last such row won whatever its version.)"""
    if v is None or isinstance(v, bool):
        return (0,)
    if isinstance(v, (int, float)):
        return (1, float(v))
    text = str(v).strip()
    try:
        return (1, float(text))
    except ValueError:
        return (2, tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text)))


class SourceError(Exception):
    """The source as a whole could not be read; the message says why, for the user."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class SourceNotFound(SourceError):
    """The path does not exist (or names a scheme we do not read yet)."""


_CAPTURE_WRAPPERS = {"trace", "proxy_turns", "turns", "records", "entries"}
_CAPTURE_NAMES = frozenset(RECORD_NAMES)


def _capture_like(first: Any) -> bool:
    """A record of the capture reader's formats (proxy trace, turns.json, contract trace entries)."""
    if not isinstance(first, dict):
        return False
    from viewer.sources.capture import is_turns_record

    keys = set(first)
    # a wrapper key counts when it holds the records (a list): tau-bench results carry a ``records: {}``
    wraps = any(isinstance(first.get(k), list) for k in keys & _CAPTURE_WRAPPERS)
    if is_turns_record(first) or (wraps and not keys & {"conversations", "messages", "steps"}):
        return True
    if {"request", "response"} <= keys and isinstance(first.get("request"), dict):
        return bool(keys & {"completion_tokens", "completion_token_ids", "per_token_logps", "logprobs",
                            "prompt_token_ids", "loss_mask", "turn"})
    return False


def _dedupe_key(value: dict[str, Any], key: str, row: int) -> Any:
    """The row's dedupe key; a missing or unhashable one (a list or dict in an odd export) keys the row alone."""
    k = value.get(key)
    return k if isinstance(k, (str, int, float)) else f"#row{row}"


@dataclass
class DatasetSource:
    """An opened dataset: either a capture (``capture`` path) or rows (``dataset``) in one format."""

    label: str
    settings: Settings
    dataset: Any = None  # viewer.sources.rowdata.RowDataset
    capture: Path | None = None
    format: Any = None  # viewer.sources.formats.RowFormat
    alternatives: list[str] = field(default_factory=list)  # other formats the fields match
    note: str = ""
    columns: list[str] = field(default_factory=list)
    _versions: dict[str, Any] | None = None

    @property
    def is_capture(self) -> bool:
        return self.capture is not None

    def versions(self) -> dict[str, Any]:
        """Dedupe state for formats with a (key, version) pair: newest row per key, hidden rows."""
        if self._versions is None:
            key, ver = self.format.dedupe
            best: dict[Any, tuple[Any, int]] = {}
            every: dict[Any, list[tuple[Any, int]]] = {}
            order: list[Any] = []
            lim = self.settings.limits()
            for r, v in self.dataset.scan([key, ver]):
                if lim.rows_scanned and r >= lim.rows_scanned:
                    raise SourceError(str(BudgetExceeded("rows_scanned", lim.rows_scanned, r + 1,
                                                         f"{self.label}: the {key}/{ver} scan (newest row per key)",
                                                         lim.public)))
                if not isinstance(v, dict):
                    continue
                k = _dedupe_key(v, key, r)
                b = v.get(ver)
                bn = version_key(b)
                if k not in best:
                    order.append(k)
                every.setdefault(k, []).append((b, r))
                if k not in best or bn >= best[k][0]:
                    best[k] = (bn, r)
            visible = sorted(best[k][1] for k in order)
            self._versions = {"visible": visible, "best": best, "every": every,
                              "hidden": sum(len(x) for x in every.values()) - len(visible)}
        return self._versions

    def visible_rows(self) -> list[int] | None:
        """Row numbers to list (newest version per key), or None when every row is listed."""
        if self.format is None or self.format.dedupe is None:
            return None
        return self.versions()["visible"]

    def default_row(self) -> int:
        vis = self.visible_rows()
        return vis[0] if vis else 0

    def rollout(self, row: int | None = None, tokenizer_override: str | None = None) -> Rollout:
        """Read one row into a Rollout (derived or exact token view). Raises SourceError for a bad row."""
        from viewer.sources.derive import to_rollout
        from viewer.sources.formats import RowRef
        from viewer.sources.rowdata import RowReadError

        if self.is_capture:
            from viewer.sources.capture import CaptureUnreadable, read_capture

            try:
                ro = read_capture(self.capture, self.settings)
            except CaptureUnreadable as e:
                raise SourceError(str(e)) from None
            except BudgetExceeded as e:
                raise SourceError(f"{self.label}: {e}") from None
            ro.source = self.label
            return ro
        chosen = self.default_row() if row is None else int(row)
        try:
            value = self.dataset.read_row(chosen)
        except IndexError:
            n = self.dataset.known_rows()
            raise SourceNotFound(f"{self.label}: row {chosen} is past the end"
                                 + (f" ({n} rows)" if n is not None else "")) from None
        except (RowReadError, BudgetExceeded) as e:
            raise SourceError(f"{self.label}: {e}") from None
        except OSError as e:
            raise SourceError(f"{self.label}: cannot read row {chosen}: {e}") from None
        if isinstance(value, RowReadError):
            raise SourceError(f"{self.label}: {value}")
        ref = RowRef(self.label, chosen)
        try:
            conv = self.format.read(value, ref)
        except RowReadError as e:
            raise SourceError(f"{self.label}: {e.where}: {e.message}") from None
        except Exception as e:  # a reader bug on odd data: say where, keep the app alive
            raise SourceError(f"{self.label}: row {chosen}: {self.format.name} reader failed: "
                              f"{type(e).__name__}: {e}") from None
        override = tokenizer_override or self.settings.tokenizer or None
        try:
            ro = to_rollout(conv, source=f"{self.label} row {chosen}", fmt=self.format.name,
                            label=f"{self.label} row {chosen}", tokenizer_override=override,
                            limits=self.settings.limits())
        except BudgetExceeded as e:
            raise SourceError(f"{self.label}: row {chosen}: {e}") from None
        note = None
        if row is None and (self.dataset.known_rows() or 0) > 1:
            note = f"row {chosen} of a dataset of many rows (choose one with --row)"
        ro.origin = ro.origin.replace(dataset=self.label, row=chosen, alternatives=tuple(self.alternatives),
                                      row_note=note)
        if self.format.dedupe is not None:
            self._dedupe_note(ro, value, chosen)
        return ro

    def _dedupe_note(self, ro: Rollout, value: dict[str, Any], row: int) -> None:
        key, ver = self.format.dedupe
        state = self.versions()
        k = _dedupe_key(value, key, row)
        rows = state["every"].get(k, [])
        if len(rows) < 2:
            return
        newest = state["best"][k][1]
        batches = ", ".join(str(b) for b, _ in rows)
        if newest == row:
            msg = (f"{key} {k} appears in {len(rows)} rows ({ver} {batches}); showing the newest "
                   f"({ver} {value.get(ver)}, row {row})")
        else:
            msg = (f"{key} {k} has a newer version: row {newest}; this is row {row} ({ver} {value.get(ver)}; "
                   f"all: {batches})")
        ro.problems.insert(0, Problem(self.label, f"row {row}", msg, "warning"))


def _choose_format(label: str, columns: list[str], first: Any, fmt: str | None):
    from viewer.sources.registry import detect_formats, get_format, unknown_format_message

    cols = set(columns)
    if fmt and fmt != "auto":
        try:
            return get_format(fmt), []
        except KeyError as e:
            raise SourceError(str(e.args[0])) from None
    failed: list[str] = []
    found = detect_formats(cols, first if isinstance(first, dict) else None, failed)
    if not found:
        raise SourceError(unknown_format_message(label, cols, failed))
    return found[0], [f.name for f in found[1:]]


def _row_source(ds, label: str, settings: Settings, fmt: str | None, note: str) -> DatasetSource:
    from viewer.sources.rowdata import RowReadError

    try:
        columns = ds.columns()
        first = None
        if ds.files[0].kind != "parquet" or fmt in (None, "auto"):
            first = ds.read_rows([0])[0][1] if len(ds.files) and ds.count(ds.files[0]) else None
    except (RowReadError, BudgetExceeded) as e:
        raise SourceError(f"{label}: {e}") from None
    except OSError as e:
        raise SourceError(f"{label}: cannot read: {e}") from None
    if isinstance(first, RowReadError):
        first = None
    f, alts = _choose_format(label, columns, first, fmt)
    ds.decode = f.decode  # the format's typed decode of the rows read from now on (RowFormat.decode)
    if f.expand is not None:  # rows that hold several rollouts: the dataset's rows become the rollouts
        from viewer.sources.subrows import ExpandedRows

        ds = ExpandedRows(ds, f.expand, f.name, f.lines)
    return DatasetSource(label, settings, dataset=ds, format=f, alternatives=alts, note=note, columns=columns)


def open_dataset(spec: str | Path, settings: Settings | None = None, *, split: str | None = None,
                 config: str | None = None, format: str | None = None,
                 progress: Callable[[str], None] | None = None, hub_token: str | None = None) -> DatasetSource:
    """Open a source for row browsing: ``hf://...``, a data file, a folder of data files, or a capture.

    ``hub_token``: the visitor's own sign-in token for ``hf://`` reads (public mode: none means
    anonymous, never the app's ``HF_TOKEN``; see :func:`viewer.sources.hub.read_token`)."""
    from viewer.sources import hub
    from viewer.sources.rowdata import RowDataset, data_kind, local_dataset

    settings = settings or Settings()
    text = str(spec)
    kw = dict(max_file_mb=settings.max_file_mb, max_cell_mb=min(256, settings.max_file_mb), progress=progress,
              limits=settings.limits())
    if text.startswith("hf://"):
        try:
            hs = hub.parse_hf(text)
            fs = hub.hub_filesystem(hub_token, settings)
            if progress:
                progress(f"listing files of {hs}")
            files, is_file = hub.list_files(fs, hs)
            if format in (None, "auto", "capture") and not is_file and hub.is_capture_layout(files):
                local = hub.fetch_capture(fs, hs, files, progress, max_file_mb=settings.max_file_mb)
                return DatasetSource(text, settings, capture=local, note=f"capture files fetched into {local}")
            chosen, note = hub.select_data_files(files, split=split, config=config,
                                                 configs=None if is_file else hub.card_configs(fs, hs, settings.limits()))
            if not chosen:
                raise SourceError(f"{text}: no parquet, JSONL or JSON data files "
                                  f"(files: {', '.join(sorted(files)[:10]) or 'none'})")
            # a Hub JSONL file is scanned (line offsets, row counts) only within VIEWER_MAX_FILE_MB
            ds = RowDataset(fs, hub.data_files(hs, chosen, files, is_file), text, max_scan_mb=settings.max_file_mb,
                            **kw)
        except hub.HubNotFound as e:
            raise SourceNotFound(str(e) if str(e).startswith(text) else f"{text}: {e}") from None
        except hub.HubError as e:
            raise SourceError(str(e)) from None
        return _row_source(ds, text, settings, format, note)

    p = Path(text).expanduser()
    if not p.exists():
        raise SourceNotFound(f"{p}: no such file or folder")
    if p.is_dir():
        from viewer.sources.capture import find_capture_files

        cf = find_capture_files(p)
        if (cf.trace or cf.turns) and format in (None, "auto", "capture"):
            return DatasetSource(str(p), settings, capture=p)
        from viewer.sources.runfolder import files_of_one_format, folder_files

        base = str(p)
        found: dict[str, int | None] = dict.fromkeys(folder_files(p, settings))  # (sizes: of the files chosen, below)
        try:
            chosen, note = hub.select_data_files(found, split=split, config=config)
        except hub.HubNotFound as e:
            raise SourceNotFound(f"{p}: {e}") from None
        if not chosen:
            raise SourceError(f"{p}: no trace.json or turns.json in this folder, and no parquet/JSONL/JSON "
                              "data files")
        chosen, left = files_of_one_format(p, chosen, format, kw)
        if left:
            note = "; ".join(x for x in (note, f"left out {len(left)} file(s) that format does not read: "
                                              f"{', '.join(left[:5])}{' …' if len(left) > 5 else ''}") if x)
        lead = os.path.join(base, "")
        paths = [lead + c for c in chosen]  # (os.path.join: 1.5 us a file, three times over a folder)
        ds = local_dataset(paths, base, base, sizes={q: os.stat(q).st_size for q in paths}, **kw)
        return _row_source(ds, str(p), settings, format, note)
    kind = data_kind(p.name)
    if kind is None:
        if format in (None, "auto", "capture"):
            return DatasetSource(str(p), settings, capture=p)
        # --format NAME names the reader whatever the extension: the container is told by the bytes
        from viewer.sources.rowdata import sniff_kind

        kind = sniff_kind(p)
        if kind is None:
            raise SourceError(f"{p}: --format {format}: not a parquet, JSONL, JSON or zip file (by its first bytes)")
    if kind in ("json", "jsonl") and format in (None, "auto", "capture") and p.name in _CAPTURE_NAMES:
        return DatasetSource(str(p), settings, capture=p)  # a capture file by its name: never parsed as rows first
    ds = local_dataset([str(p)], str(p.parent), str(p), kinds={str(p): kind}, **kw)
    if kind not in ("parquet", "zip") and format in (None, "auto", "capture"):  # (a zip is never a capture file)
        from viewer.sources.rowdata import RowReadError

        try:
            first = ds.read_rows([0])[0][1] if ds.count(ds.files[0]) else None
        except (RowReadError, OSError):
            first = None  # let the capture reader report exactly where the file is broken
            return DatasetSource(str(p), settings, capture=p)
        if format == "capture" or first is None or isinstance(first, RowReadError) or _capture_like(first) \
                or p.name in _CAPTURE_NAMES:  # a broken first row: the capture reader says where
            return DatasetSource(str(p), settings, capture=p)
        # No catch-all: a row with a capture-ish key (``response``) that no format detects is refused by
        # name below, never handed to the capture reader, which read NeMo Gym rows as empty turns (issue 35).
    return _row_source(ds, str(p), settings, format, "")


def load_source(path: str | Path, settings: Settings | None = None, *, split: str | None = None,
                row: int | None = None, config: str | None = None, format: str | None = None) -> Rollout:
    """Read a capture folder, a trace/turns file, a row of a dataset file/folder, or an hf:// source.

    Raises SourceNotFound for a missing path / repo / row and SourceError when nothing is
    readable; everything else wrong with the data is in ``rollout.problems``.
    """
    settings = settings or Settings()
    text = str(path)
    if not text.startswith("hf://"):
        p = Path(path).expanduser()
        if p.is_file() and p.suffix.lower() == ".zip":
            raise SourceError(f"{p}: a zip archive; open it through the upload intake (viewer.sources.upload)")
    src = open_dataset(path, settings, split=split, config=config, format=format)
    if src.is_capture:
        if row not in (None, 0):
            raise SourceError(f"{text}: a capture is one rollout; --row does not apply")
        try:
            ro = src.rollout()
        except OSError as e:
            raise SourceError(f"{text}: {e.strerror or e}") from None
        if text.startswith("hf://"):
            ro.origin = ro.origin.replace(fetched_to=str(src.capture))
        return ro
    return src.rollout(row)
