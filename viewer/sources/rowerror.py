"""The row layer's one error: a row (or a file of rows) that could not be read, located for the user.

Its own module so the containers (:mod:`viewer.sources.rowdata`, :mod:`viewer.sources.evalzip`) and the
formats raise the same error without importing one another.
"""
from __future__ import annotations

__all__ = ["RowReadError"]


class RowReadError(Exception):
    """One row (or one file) could not be read; ``where`` names the row and field."""

    def __init__(self, where: str, message: str):
        super().__init__(f"{where}: {message}")
        self.where = where
        self.message = message
