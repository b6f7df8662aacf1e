"""A search: the query compiled (:mod:`.syntax`), run over the index (:mod:`.engine`), hits ranked worst first
with a token snippet each, facets with counts over the matching rollouts, and a reward histogram."""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from viewer.config import Settings

from .columns import SEP
from .engine import Bounds, Engine, IndexChanged, bounds_for
from .index import IndexInfo, SearchError, build_index, load_index
from .syntax import Compiled, QueryError, Term, compile_query

__all__ = ["Hit", "Snippet", "SearchResult", "search", "facet_clause", "SNIPPET_TOKENS", "FACETS"]

SNIPPET_TOKENS = 8  # tokens either side of the hit
_TEXT_AROUND = 80
FACETS = ("model", "agent", "tool", "cause", "lint", "reward", "group", "step")
_REWARD_BINS = 5
_HIST_BINS = 10


@dataclass(frozen=True)
class Snippet:
    """A few output tokens around the hit (``start``: the first one's position in the turn's output; ``hit``:
    the matched positions [a, b)), or ``text`` around a text match."""

    ids: list[int] = field(default_factory=list)
    pieces: list[str] = field(default_factory=list)
    logprobs: list[float | None] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    start: int = 0
    hit: tuple[int, int] | None = None
    text: str | None = None


@dataclass(frozen=True)
class Hit:
    """One place a query matched: open it with ``source`` (+ ``row``) at ``turn``, token ``tok`` (the token
    view's position, over prompt + output, as a deep link's ``tok=``); ``pos``: the same token's place in the
    turn's output (the snippet's coordinates)."""

    source: str
    row: int | None
    turn: int | None
    pos: int | None
    tok: int | None
    label: str
    model: str | None
    agent: str | None
    task: str | None
    reward: float | None
    score: float | None
    why: str
    snippet: Snippet | None = None

    def link(self, settings: Settings | None = None) -> str:
        """The app's deep-link query string (``source=…&row=…&turn=…&tok=…``), as lint hits make them."""
        place = {k: v for k, v in (("row", self.row), ("turn", self.turn), ("tok", self.tok)) if v is not None}
        return urlencode({"source": self.source, **place})

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "link": self.link()}


@dataclass(frozen=True)
class SearchResult:
    query: str
    level: str
    hits: list[Hit]
    total: int
    rollouts: int
    facets: dict[str, list[tuple[str, int]]]
    reward_hist: list[tuple[float, float, int]]
    index: IndexInfo
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {"query": self.query, "level": self.level, "total": self.total, "rollouts": self.rollouts,
                "hits": [h.to_dict() for h in self.hits], "facets": {k: [list(x) for x in v] for k, v in self.facets.items()},
                "reward_hist": [list(x) for x in self.reward_hist], "index": self.index.to_dict(),
                "seconds": self.seconds}


def _num(v: float) -> str:
    return f"{v:.6g}"


def facet_clause(name: str, value: str) -> str:
    """The query text that narrows a search to one facet value (what a click on it appends)."""
    if name == "reward":
        if value == "none":
            return "NOT reward>=-1e308"
        lo, hi = value.split("..")
        return f"reward>={lo} reward<={hi}"
    if name == "step":
        return f"step={value}"
    quoted = '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return f"{name}:{quoted}"


def _from(level: str) -> str:
    return "rollouts r" if level == "rollout" else "turns t JOIN rollouts r USING (rid)"


def _facets(eng: Engine, c: Compiled) -> tuple[dict[str, list[tuple[str, int]]], list]:
    """Counts over the matching rollouts (table ``h``), per facet, most first; reward bins and the histogram
    over the index's whole reward range (stable while facets narrow the search)."""
    n = eng.bounds.facet_values
    out: dict[str, list[tuple[str, int]]] = {}
    eng.rows("CREATE TEMP TABLE m AS SELECT rid, model, agent, grp, step, tools, causes, lint, reward FROM rollouts "
             "WHERE rid IN (SELECT rid FROM h)", {})
    for name, expr in (("model", "model"), ("agent", "agent"), ("group", "grp"), ("step", "CAST(step AS VARCHAR)")):
        rows = eng.rows(f"SELECT {expr} AS v, count(*) AS n FROM m WHERE {expr} IS NOT NULL "
                        f"GROUP BY v ORDER BY n DESC, v LIMIT {n}", {})
        if rows:
            out[name] = [(str(v), int(k)) for v, k in rows]
    for name, col in (("tool", "tools"), ("cause", "causes"), ("lint", "lint")):
        rows = eng.rows(f"SELECT v, count(*) AS n FROM (SELECT rid, unnest({col}) AS v FROM m) "
                        f"GROUP BY v ORDER BY n DESC, v LIMIT {n}", {})
        out[name] = [(str(v), int(k)) for v, k in rows]
    lo, hi = eng.rows("SELECT min(reward), max(reward) FROM rollouts WHERE isfinite(reward)", {})[0]
    hist: list[tuple[float, float, int]] = []
    if lo is not None:
        width = (hi - lo) / _HIST_BINS if hi > lo else 1.0
        counts = dict(eng.rows(f"SELECT least(CAST(floor((reward - $lo) / $w) AS BIGINT), {_HIST_BINS - 1}) AS b, "
                               "count(*) FROM m WHERE isfinite(reward) GROUP BY b", {"lo": lo, "w": width}))
        hist = [(lo + i * width, lo + (i + 1) * width, int(counts.get(i, 0))) for i in range(_HIST_BINS if hi > lo else 1)]
        step = max(1, math.ceil(len(hist) / _REWARD_BINS))
        bins = [(hist[i][0], hist[min(i + step, len(hist)) - 1][1], sum(x[2] for x in hist[i:i + step]))
                for i in range(0, len(hist), step)]
        out["reward"] = [(f"{_num(a)}..{_num(b)}", k) for a, b, k in bins if k]
    none = eng.rows("SELECT count(*) FROM m WHERE reward IS NULL OR NOT isfinite(reward)", {})[0][0]
    if none:
        out.setdefault("reward", []).append(("none", int(none)))
    return out, hist


def _text_snippet(text: str, term: Term, matched: str | None) -> str | None:
    """The text around the match: a regex's match as DuckDB's RE2 found it (``matched``; Python's own engine
    backtracks, and a visitor's pattern must never run in it), a word's found case-insensitively."""
    if term.kind == "regex":
        k = text.find(matched) if matched else -1
        span = (k, k + len(matched)) if k >= 0 and matched else None
    else:
        k = text.lower().find(str(term.value).lower())
        span = (k, k + len(str(term.value))) if k >= 0 else None
    if span is None:
        return None
    a, b = max(0, span[0] - _TEXT_AROUND), min(len(text), span[1] + _TEXT_AROUND)
    return ("…" if a else "") + text[a:b] + ("…" if b < len(text) else "")


def _snippets(eng: Engine, rows: list[tuple], c: Compiled, seq: int) -> dict[tuple[int, int], Snippet]:
    """The snippet of each hit: its turn's heavy columns read for those turns alone."""
    keys = [(r[0], r[1]) for r in rows if r[1] is not None]
    if not keys:
        return {}
    regex = c.text is not None and c.text.kind == "regex"
    got = eng.rows(f"SELECT rid, turn, ids, pieces, lps, mask, text, {'regexp_extract(text, $re)' if regex else 'NULL'} "
                   "FROM turns WHERE (rid, turn) IN (SELECT unnest($r), unnest($t))",
                   {"r": [k[0] for k in keys], "t": [k[1] for k in keys], "re": c.text.value if regex else None})
    by = {(g[0], g[1]): g for g in got}
    out = {}
    for r in rows:
        g = by.get((r[0], r[1]))
        if g is None:
            continue
        tok = r[2]
        if tok is None:
            text = _text_snippet(g[6] or "", c.text, g[7]) if c.text is not None else None
            out[(r[0], r[1])] = Snippet(text=text)
            continue
        ids = g[2].split(SEP)[1:-1] if g[2] else []
        pieces = g[3].split(SEP)[1:-1] if g[3] else []
        a, b = max(0, tok - SNIPPET_TOKENS), min(len(ids), tok + seq + SNIPPET_TOKENS)
        lps = list(g[4] or [])
        out[(r[0], r[1])] = Snippet(ids=[int(x) for x in ids[a:b]], pieces=pieces[a:b],
                                    logprobs=[None if v is None or math.isnan(v) else float(v) for v in lps[a:b]],
                                    mask=[int(x) for x in (g[5] or "")[a:b]], start=a, hit=(tok, min(tok + seq, len(ids))))
    return out


def search(source: str | Path, query: str, settings: Settings | None = None, *, limit: int = 50,
           public: bool | None = None, build: bool = True, facets: bool = True,
           index_dir: Path | None = None, bounds: Bounds | None = None) -> SearchResult:
    """Run ``query`` (docs/SEARCH.md) over the index of ``source``: hits worst first (at most ``limit``),
    their total, facets and the reward histogram. Builds the index when there is none (``build``; else
    :class:`SearchError`). Public (None: ``settings.public_mode()``): the smaller bounds of
    :mod:`viewer.search.engine` (``bounds`` names others: a bench, a test). Raises :class:`QueryError` for a query
    that cannot run or runs past its bounds."""
    settings = settings or Settings.from_env()
    t0 = time.perf_counter()
    bounds = bounds or bounds_for(settings.public_mode() if public is None else public)
    if not isinstance(limit, int) or limit < 1:
        raise QueryError("the number of hits asked for must be a whole number of at least 1")
    if limit > bounds.max_hits:
        raise QueryError(f"at most {bounds.max_hits} hits a search (asked for {limit}): narrow the query")
    c = compile_query(query)
    seq = max((len(t.value) for t in _seq_terms(query)), default=1)
    for attempt in (1, 2):
        info = load_index(source, settings, index_dir)
        if info is None:
            if not build:
                raise SearchError(f"{source}: no search index yet (build it first)")
            info = build_index(source, settings, index_dir=index_dir)
        try:
            with Engine(info.files, bounds) as eng:
                return _run(eng, c, info, query, limit, seq, facets, t0)
        except IndexChanged:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def _run(eng: Engine, c: Compiled, info: IndexInfo, query: str, limit: int, seq: int, facets: bool,
         t0: float) -> SearchResult:
    turn, pos, n_prompt = ("NULL::BIGINT",) * 3 if c.level == "rollout" else ("t.turn", c.tok, "t.n_prompt")
    # every match, slim (ids and the rank), once: the hits, the counts and the facets all read it
    eng.rows(f"CREATE TEMP TABLE h AS SELECT r.rid AS rid, {turn} AS turn, {pos} AS pos, {n_prompt} AS n_prompt, "
             f"{c.rank[0]} AS rank, r.label AS label FROM {_from(c.level)} WHERE {c.where}", c.params)
    total, n_ro = eng.rows("SELECT count(*), count(DISTINCT rid) FROM h", {})[0]
    order = f"rank {'ASC' if c.rank[1] else 'DESC'} NULLS LAST, label, rid, turn"
    rows = eng.rows(f"SELECT h.rid, h.turn, h.pos, h.rank, r.source, r.row, r.label, r.model, r.agent, r.task, "
                    f"r.reward, h.n_prompt FROM (SELECT * FROM h ORDER BY {order} LIMIT {limit}) h "
                    f"JOIN rollouts r USING (rid) ORDER BY {order.replace('label', 'h.label')}", {})
    if c.level == "rollout":  # a rollout hit opens on its first agent turn
        first = dict(eng.rows("SELECT rid, min(turn) FROM turns WHERE rid IN (SELECT unnest($r)) GROUP BY rid",
                              {"r": [x[0] for x in rows]})) if rows else {}
        rows = [(x[0], first.get(x[0])) + tuple(x[2:]) for x in rows]
    snips = _snippets(eng, rows, c, seq) if c.level != "rollout" else {}
    fac, hist = _facets(eng, c) if facets else ({}, [])
    hits = [Hit(source=x[4], row=x[5], turn=x[1], pos=x[2], tok=None if x[2] is None else (x[11] or 0) + x[2],
                label=x[6], model=x[7], agent=x[8], task=x[9], reward=x[10], score=_score(x[3]), why=c.why,
                snippet=snips.get((x[0], x[1]))) for x in rows]
    return SearchResult(query=query, level=c.level, hits=hits, total=int(total), rollouts=int(n_ro), facets=fac,
                        reward_hist=hist, index=info, seconds=time.perf_counter() - t0)


def _score(v) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def _seq_terms(query: str) -> list[Term]:
    from .syntax import parse, terms

    return [t for t in terms(parse(query)) if t.kind in ("ids", "tokens") and t.op == ":"]
