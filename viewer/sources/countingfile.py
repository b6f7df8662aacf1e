"""A read-only file wrapper that counts the bytes really read (what the row readers report).

Row datasets are read through fsspec file objects; wrapping each one in :class:`CountingFile`
lets :class:`viewer.sources.rowdata.RowDataset` say how many bytes opening a row cost (the
UI and ``bench/bench_rows.py`` print it).
"""
from __future__ import annotations

import io
from typing import Callable

__all__ = ["CountingFile"]


class CountingFile(io.RawIOBase):
    """A read-only file wrapper counting the bytes actually read from the underlying file."""

    def __init__(self, f, counter: Callable[[int], None]):
        self._f = f
        self._count = counter

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        b = self._f.read(n)
        self._count(len(b))
        return b

    def readinto(self, buf) -> int:
        b = self._f.read(len(buf))
        buf[:len(b)] = b
        self._count(len(b))
        return len(b)

    def seek(self, pos: int, whence: int = 0) -> int:
        return self._f.seek(pos, whence)

    def tell(self) -> int:
        return self._f.tell()

    def close(self) -> None:
        try:
            self._f.close()
        finally:
            super().close()
