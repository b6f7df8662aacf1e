"""Per-turn drift scan results as an Arrow table / parquet file that DuckDB or pandas can query.

One row per agent turn, the nested record of :func:`viewer.drift.scan` flattened to
``section.key`` columns (``retokenize.equal``, ``template.cause``, ``prefix.status``,
``row.verdict``, ...) under one fixed schema, so files written by different engines or
workers concatenate. :func:`records_from_table` turns rows back into the scan's records.

    duckdb -c "select \\"retokenize.cause\\", count(*) from 'scan.parquet' group by 1"
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from viewer.drift.results import SECTIONS, optional_keys, turn_columns

__all__ = ["TURN_FIELDS", "turn_schema", "turns_table", "records_from_table", "ParquetSink"]

# (column, arrow type name); nested sections flattened as "section.key": from the result's
# definition (viewer/drift/results.py: TurnRecord), so a new key is a new column by itself
TURN_FIELDS: list[tuple[str, str]] = turn_columns()
_SECTIONS = SECTIONS
_OPTIONAL = optional_keys()  # absent, not None, when unset (NotRequired in the definition)


def turn_schema():
    import pyarrow as pa

    return pa.schema([(name, getattr(pa, typ)()) for name, typ in TURN_FIELDS])


def _cell(v: Any, typ: str) -> Any:
    if v is None:
        return None
    if typ == "int64":
        return int(v) if isinstance(v, (int, float)) else None
    if typ == "bool_":
        return bool(v)
    return v if isinstance(v, str) else str(v)


def turns_table(records: Iterable[dict[str, Any]]):
    """The scan's per-turn records as one Arrow table (schema :func:`turn_schema`)."""
    import pyarrow as pa

    cols: dict[str, list[Any]] = {name: [] for name, _ in TURN_FIELDS}
    for rec in records:
        for name, typ in TURN_FIELDS:
            sec, _, key = name.partition(".")
            v = (rec.get(sec) or {}).get(key) if key else rec.get(sec)
            cols[name].append(_cell(v, typ))
    return pa.table(cols, schema=turn_schema())


def records_from_table(table) -> list[dict[str, Any]]:
    """Rows back as the scan's nested records (absent values as None)."""
    out = []
    for row in table.to_pylist():
        rec: dict[str, Any] = {s: {} for s in _SECTIONS}
        for name, v in row.items():
            sec, _, key = name.partition(".")
            if v is None and (key or sec) in _OPTIONAL:
                continue
            if key:
                rec[sec][key] = v
            else:
                rec[sec] = v
        if not any(v is not None for v in rec["row"].values()):
            rec.pop("row")
        out.append(rec)
    return out


class ParquetSink:
    """Appends per-turn tables to one parquet file (a row group per write); a no-op without a path."""

    def __init__(self, path: str | Path | None):
        self.path = Path(path) if path else None
        self._w = None
        self.rows = 0

    def write(self, table) -> None:
        if self.path is None or table.num_rows == 0 and self._w is not None:
            return
        if self._w is None:
            import pyarrow.parquet as pq

            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._w = pq.ParquetWriter(str(self.path), turn_schema())
        self._w.write_table(table)
        self.rows += table.num_rows

    def close(self) -> None:
        if self._w is not None:
            self._w.close()
            self._w = None
        elif self.path is not None:  # nothing scanned: still leave a valid, empty file
            self.write(turns_table([]))
            self.close()
