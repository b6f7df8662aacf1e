"""Search a whole dataset down to the token (issue 38): an index built by the drift scan and stored as Parquet
(:mod:`.index`, :mod:`.columns`), a small query language compiled to parameterised SQL (:mod:`.syntax`), run by
DuckDB within bounds (:mod:`.engine`), hits ranked worst first with facets (:mod:`.hits`); stateless token
evidence for agents (:mod:`.evidence`). docs/SEARCH.md."""
from __future__ import annotations

from .engine import LOCAL, PUBLIC, Bounds
from .hits import FACETS, Hit, SearchResult, Snippet, facet_clause, search
from .index import IndexInfo, SearchError, build_index, index_path, load_index
from .syntax import QueryError, parse

__all__ = ["build_index", "index_path", "load_index", "IndexInfo", "SearchError", "search", "SearchResult", "Hit",
           "Snippet", "facet_clause", "FACETS", "QueryError", "parse", "Bounds", "LOCAL", "PUBLIC"]
