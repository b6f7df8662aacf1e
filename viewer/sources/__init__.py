"""Source dispatch: a path (folder or file) -> the reader for its format -> Rollout.

Only capture folders and single trace / turns files are read so far; other formats
(opencode exports, Harbor/ATIF, agentcap, hf://) plug in here by adding a detector.
Readers never raise on bad data; :class:`SourceError` means nothing could be read.
"""
from __future__ import annotations

from pathlib import Path

from viewer.config import Settings
from viewer.rollout import Rollout

__all__ = ["SourceError", "SourceNotFound", "load_source"]


class SourceError(Exception):
    """The source as a whole could not be read; the message says why, for the user."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class SourceNotFound(SourceError):
    """The path does not exist (or names a scheme we do not read yet)."""


def load_source(path: str | Path, settings: Settings | None = None) -> Rollout:
    """Read a capture folder or a trace/turns file into a Rollout.

    Raises SourceNotFound for a missing path and SourceError when nothing is readable;
    everything else wrong with the data is in ``rollout.problems``.
    """
    from viewer.sources.capture import CaptureUnreadable, read_capture

    settings = settings or Settings()
    text = str(path)
    if text.startswith("hf://"):
        raise SourceNotFound(f"{text}: hf:// sources are not supported yet")
    p = Path(path).expanduser()
    if not p.exists():
        raise SourceNotFound(f"{p}: no such file or folder")
    if p.is_file() and p.suffix.lower() == ".zip":
        raise SourceError(f"{p}: a zip archive; open it through the upload intake (viewer.sources.upload)")
    try:
        return read_capture(p, settings)
    except CaptureUnreadable as e:
        raise SourceError(str(e)) from None
    except OSError as e:
        raise SourceError(f"{p}: {e.strerror or e}") from None
