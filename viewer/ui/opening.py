"""What a link's ``source=`` (+ ``row=``) names, opened into the store: one place for every screen.

``sample:NAME`` (a bundled sample), a path inside the data root, or row ``row`` of a dataset
(``hf://...`` or a data file inside the data root). Used by the deep links of the browse
screen and by the Compare tab for its second rollout. No gradio import: plain Python.
"""
from __future__ import annotations

import functools
import json
from pathlib import Path
from urllib.parse import urlencode

from ..config import SAMPLE_DIR, Settings
from ..layout import is_capture_dir
from .store import Opened, RolloutStore

__all__ = ["list_samples", "sample_label", "sample_choices", "open_spec", "dataset_link", "link_spec"]


def list_samples(sample_dir: Path = SAMPLE_DIR) -> list[str]:
    if not sample_dir.is_dir():
        return []
    return sorted(p.name for p in sample_dir.iterdir() if is_capture_dir(p))


def sample_label(name: str, sample_dir: Path = SAMPLE_DIR) -> str:
    """What a bundled sample is, in a few words (``sample_data/labels.json``), or ""."""
    f = sample_dir / "labels.json"
    try:
        st = f.stat()
    except OSError:
        return ""
    labels = _labels(str(f), st.st_mtime_ns, st.st_size)
    label = labels.get(name) if isinstance(labels, dict) else None
    return label if isinstance(label, str) else ""


@functools.lru_cache(maxsize=8)
def _labels(path: str, mtime_ns: int, size: int):
    """The labels file read once per version of it (every open of a sample names it: two reads per
    visitor's open in a room before); its stamp is part of the key, so an edited file is read again."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def sample_choices(sample_dir: Path = SAMPLE_DIR) -> list[tuple[str, str]]:
    """The sample picker's (label, name) pairs: each sample named with what it is."""
    return [(f"{n} — {sample_label(n, sample_dir)}" if sample_label(n, sample_dir) else n, n)
            for n in list_samples(sample_dir)]


def open_spec(store: RolloutStore, settings: Settings, spec: str, row: int | None = None,
              override: str = "", hub_token: str | None = None) -> Opened:
    """The rollout ``spec`` (and ``row``) names. Raises SourceError (unreadable, missing) or
    ValueError (a path outside the data root, an unknown sample) with a message for the user.
    ``hub_token``: the visitor's sign-in token for ``hf://`` reads (none: anonymous in public mode)."""
    from ..visitor import source

    src = source(spec, settings, list_samples())  # the one check of a visitor's source (viewer/visitor.py)
    spec = src.text
    if src.kind == "sample":
        return store.open(SAMPLE_DIR / spec.split(":", 1)[1], override)
    if src.kind == "path" and is_capture_dir(src.path):  # one capture: a row number names nothing more (issue 36:
        return store.open(src.path, override)            # each ?row=N was a parse and a notes key of its own)
    if row is not None or src.kind == "hub":
        from ..sources import open_dataset

        target = spec if src.kind == "hub" else str(src.path)
        n = int(row or 0)

        def read():
            ds = open_dataset(target, settings, hub_token=hub_token)
            ro = ds.rollout(n) if not ds.is_capture else ds.rollout()
            return ro, (ds.capture if ds.capture is not None and ds.capture.is_dir() else None)

        # Everyone on the same dataset link shares one parsed row (a local file named with its stamp).
        st = None if src.kind == "hub" else Path(target).stat()
        # ... and a Hub row only with those who read it as the same reader (anonymous, or the same
        # visitor's token): a private dataset one visitor may read is never served to another.
        from ..sources.hub import read_token, reader_tag

        stamp = f"{st.st_mtime_ns}:{st.st_size}" if st else reader_tag(read_token(settings, hub_token))
        return store.open_shared(f"{target}|{n}|{stamp}", read, link=urlencode({"source": spec, "row": n}),
                                 tokenizer_override=override, path=None if st is None else Path(target))
    return store.open(src.path, override)


def dataset_link(label: str, row: int, settings: Settings) -> str:
    """Query string that reopens row ``row`` of a dataset (hf:// or a file in the data root), or ""."""
    if label.startswith("hf://"):
        return urlencode({"source": label, "row": row})
    spec = link_spec(Path(label), settings)
    return urlencode({"source": spec, "row": row}) if spec and not spec.startswith("sample:") else ""


def link_spec(path: Path, settings: Settings) -> str:
    """``sample:NAME`` or a data-root-relative path that ?source= accepts, or "" (not linkable)."""
    p = Path(path).resolve()
    if p.parent == SAMPLE_DIR.resolve():
        return f"sample:{p.name}"
    root = Path(settings.data_root).resolve()
    return str(p.relative_to(root)) if p.is_relative_to(root) else ""
