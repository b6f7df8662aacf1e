"""What a link's ``source=`` (+ ``row=``) names, opened into the store: one place for every screen.

``sample:NAME`` (a bundled sample), a path inside the data root, or row ``row`` of a dataset
(``hf://...`` or a data file inside the data root). Used by the deep links of the browse
screen and by the Compare tab for its second rollout. No gradio import: plain Python.
"""
from __future__ import annotations

from pathlib import Path
from urllib.parse import urlencode

from ..config import SAMPLE_DIR, Settings
from ..sources.layout import is_capture_dir
from ..sources.upload import resolve_user_path
from .store import Opened, RolloutStore

__all__ = ["list_samples", "open_spec"]


def list_samples(sample_dir: Path = SAMPLE_DIR) -> list[str]:
    if not sample_dir.is_dir():
        return []
    return sorted(p.name for p in sample_dir.iterdir() if is_capture_dir(p))


def open_spec(store: RolloutStore, settings: Settings, spec: str, row: int | None = None,
              override: str = "", hub_token: str | None = None) -> Opened:
    """The rollout ``spec`` (and ``row``) names. Raises SourceError (unreadable, missing) or
    ValueError (a path outside the data root, an unknown sample) with a message for the user.
    ``hub_token``: the visitor's sign-in token for ``hf://`` reads (none: anonymous in public mode)."""
    spec = (spec or "").strip()
    if not spec:
        raise ValueError("Name a rollout: sample:NAME, a path inside the data root, or hf://datasets/OWNER/NAME.")
    if spec.startswith("sample:"):
        name = spec.split(":", 1)[1]
        if name not in list_samples():
            raise ValueError(f"No bundled sample named {name!r}.")
        return store.open(SAMPLE_DIR / name, override)
    if row is not None or spec.startswith("hf://"):
        from ..sources import open_dataset

        target = spec if spec.startswith("hf://") else str(resolve_user_path(spec, settings))
        n = int(row or 0)

        def read():
            src = open_dataset(target, settings, hub_token=hub_token)
            ro = src.rollout(n) if not src.is_capture else src.rollout()
            return ro, (src.capture if src.capture is not None and src.capture.is_dir() else None)

        # Everyone on the same dataset link shares one parsed row (a local file named with its stamp).
        st = None if target.startswith("hf://") else Path(target).stat()
        # ... and a Hub row only with those who read it as the same reader (anonymous, or the same
        # visitor's token): a private dataset one visitor may read is never served to another.
        from ..sources.hub import read_token, reader_tag

        stamp = f"{st.st_mtime_ns}:{st.st_size}" if st else reader_tag(read_token(settings, hub_token))
        return store.open_shared(f"{target}|{n}|{stamp}", read, link=urlencode({"source": spec, "row": n}),
                                 tokenizer_override=override)
    return store.open(resolve_user_path(spec, settings), override)
