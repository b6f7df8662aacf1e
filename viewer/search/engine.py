"""The DuckDB connection a search runs on, and its bounds.

DuckDB (in-process, reads Parquet directly) runs only SQL written in :mod:`viewer.search.syntax`, with the
visitor's values bound as parameters. Each search opens its own connection: the two index files are the only
paths it may read (``allowed_paths``), then external access is switched off (no other file, no URL, no
``COPY``/``ATTACH``/extension) and the configuration locked, so no statement can turn it back on. Memory and
threads are bounded; a timer interrupts a search that runs past its time; hits are capped. A local app gets
larger bounds than a public one (``Settings.public_mode``), never none.
"""
from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any

from .syntax import QueryError

__all__ = ["Bounds", "LOCAL", "PUBLIC", "Engine", "bounds_for", "IndexChanged"]


class IndexChanged(QueryError):
    """A build replaced the index's files between naming and reading them (the search tries once more)."""

    def __init__(self):
        super().__init__("the index was rebuilt while this search read it: search again")


@dataclass(frozen=True)
class Bounds:
    """How far one search may go: seconds for each statement, hits returned, DuckDB's memory and threads."""

    seconds: float
    max_hits: int
    memory_mb: int
    threads: int
    facet_values: int = 50  # values listed per facet (counted in full)


LOCAL = Bounds(seconds=60.0, max_hits=10_000, memory_mb=1024, threads=4)
PUBLIC = Bounds(seconds=5.0, max_hits=500, memory_mb=192, threads=1)


_PARAM = re.compile(r"\$([A-Za-z_]\w*)")


def bounds_for(public: bool) -> Bounds:
    return PUBLIC if public else LOCAL


def _quote(path: str) -> str:
    return "'" + path.replace("'", "''") + "'"


class Engine:
    """One search's connection over an index's ``rollouts`` and ``turns`` files (views of those names)."""

    def __init__(self, files: dict[str, str], bounds: Bounds):
        import os

        import duckdb

        if not all(os.path.isfile(files[k]) for k in ("rollouts", "turns")):  # a build replaced them since
            raise IndexChanged()
        self.bounds = bounds
        self._db = duckdb
        self._timer: threading.Timer | None = None
        self._expired = threading.Event()
        self.con = duckdb.connect(config={"memory_limit": f"{bounds.memory_mb}MB", "threads": bounds.threads})
        paths = [files["rollouts"], files["turns"]]
        self.con.execute("SET allowed_paths = $p", {"p": paths})
        self.con.execute("SET enable_external_access = false")  # after this, only those two files
        self.con.execute("SET autoinstall_known_extensions = false")
        self.con.execute("SET autoload_known_extensions = false")
        try:
            for name, path in (("rollouts", files["rollouts"]), ("turns", files["turns"])):
                self.con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet({_quote(path)})")
        except (duckdb.IOException, duckdb.PermissionException):  # a build replaced the files just now
            self.con.close()
            raise IndexChanged() from None
        self.con.execute("SET lock_configuration = true")

    def rows(self, sql: str, params: dict[str, Any], cap: int | None = None) -> list[tuple]:
        """The rows of ``sql`` (at most ``cap``). The search's statements share one time bound, counted from
        the first: past it the one running is interrupted (:class:`QueryError`), as is one past the memory."""
        used = set(_PARAM.findall(sql))
        params = {k: v for k, v in params.items() if k in used}  # DuckDB refuses a parameter the SQL does not name
        if self._timer is None:  # one watchdog thread a search (starting one a statement cost 10 ms under load)
            self._timer = threading.Timer(self.bounds.seconds, self._expire)
            self._timer.daemon = True
            self._timer.start()
        if self._expired.is_set():
            raise self._late()
        try:
            cur = self.con.execute(sql, params)
            return cur.fetchmany(cap) if cap is not None else cur.fetchall()
        except self._db.InterruptException:
            raise self._late() from None
        except self._db.OutOfMemoryException:
            raise QueryError(f"the search needed more than {self.bounds.memory_mb} MB and was stopped: "
                             "narrow it and try again") from None
        except self._db.IOException:  # a build replaced the index's files between finding and reading them
            raise IndexChanged() from None
        except self._db.InvalidInputException as e:  # a regex RE2 refuses, mostly
            raise QueryError(f"the search could not run: {str(e).splitlines()[0]}") from None

    def _expire(self) -> None:
        self._expired.set()
        self.con.interrupt()

    def _late(self) -> QueryError:
        return QueryError(f"the search took longer than {self.bounds.seconds:g} s and was stopped: "
                          "narrow it (a field, a number) and try again")

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self.con.close()

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
