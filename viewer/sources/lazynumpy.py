"""numpy for the fast readers, imported on first use, not when the sources package is.

Every format module is imported with the sources package (the registry), so a module-level ``import
numpy`` cost every open of a capture, which uses no numpy, ≈ 12 MB of RSS and 0.07 s (bench_load's
36 MB trace: peak 36 -> 49 MB, CPU 0.23 -> 0.31 s). ``np`` here stands in for the module: its first
attribute read imports numpy and copies the module's names onto it, so later reads are plain attribute
lookups, as fast as the module's own.
"""
from __future__ import annotations

from typing import Any

__all__ = ["np"]


class _Numpy:
    def __getattr__(self, name: str) -> Any:  # called only while a name is not yet copied here
        import numpy

        self.__dict__.update(vars(numpy))
        return getattr(numpy, name)


np: Any = _Numpy()
