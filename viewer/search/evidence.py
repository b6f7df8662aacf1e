"""Token evidence for agents: stateless functions, JSON in and out, that a script, a Gradio API endpoint or an
MCP tool can call (docs/API.md#token-evidence): search a dataset, a rollout's summary, a turn's tokens for a
range, its drift, its lint hits. Each opens what it names, answers, and keeps nothing. In public mode a source
goes through the visitor's one check (:func:`viewer.visitor.source`: a bundled sample, a path inside the data
root, or ``hf://``) and the search's public bounds; a token range is at most :data:`MAX_TOKENS` long.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from viewer.config import SAMPLE_DIR, Settings
from viewer.rollout import Rollout

from .columns import token_pieces
from .index import SearchError
from .syntax import QueryError

__all__ = ["MAX_TOKENS", "open_rollout", "search_dataset", "rollout_summary", "turn_tokens", "rollout_drift",
           "rollout_lint"]

MAX_TOKENS = 2000  # tokens one turn_tokens call returns


def _spec(source: str, settings: Settings) -> str:
    """The path or spec to read: checked as a visitor's source in public mode, as given otherwise."""
    text = str(source)
    if text.startswith("sample:"):
        name = text.split(":", 1)[1]
        if not name or "/" in name or not (SAMPLE_DIR / name).is_dir():
            raise SearchError(f"no bundled sample named {name!r}")
        return str(SAMPLE_DIR / name)
    if settings.public_mode():
        from viewer.visitor import source as checked

        try:
            src = checked(text, settings, None)
        except ValueError as e:
            raise SearchError(str(e)) from None
        return src.text if src.kind == "hub" else str(src.path)
    return text


def open_rollout(source: str, row: int | None = None, settings: Settings | None = None) -> Rollout:
    """The rollout ``source`` (+ ``row`` of a dataset) names; :class:`SearchError` when it cannot be read."""
    from viewer.sources import SourceError, load_source, open_dataset

    settings = settings or Settings.from_env()
    spec = _spec(source, settings)
    try:
        if row is None:
            return load_source(spec, settings)
        ds = open_dataset(spec, settings)
        return ds.rollout() if ds.is_capture else ds.rollout(int(row))
    except SourceError as e:
        raise SearchError(e.message) from None


def search_dataset(source: str, query: str, limit: int = 20, settings: Settings | None = None) -> dict[str, Any]:
    """``query`` (docs/SEARCH.md) over the dataset ``source``: ``SearchResult.to_dict()`` (CLI.md's ``search
    --json``). The index is built first when there is none. In public mode no server path is given: hits name
    their source as the visitor types it (relative to the data root), the index only its counts."""
    from .hits import search

    settings = settings or Settings.from_env()
    doc = search(_spec(source, settings), query, settings, limit=limit).to_dict()
    if settings.public_mode():  # the server's layout is not a visitor's business (viewer/sources/shown.py)
        from urllib.parse import urlencode

        from viewer.sources.shown import shown_path

        ix = doc["index"]
        doc["index"] = {k: ix[k] for k in ("rollouts", "turns", "rebuilt", "reused", "seconds", "cancelled")}
        doc["index"]["errors"] = len(ix["errors"])
        for h in doc["hits"]:
            h["source"] = shown_path(h["source"], settings)
            place = {k: h[k] for k in ("row", "turn", "tok") if h[k] is not None}
            h["link"] = urlencode({"source": h["source"], **place})
    return doc


def _turn(ro: Rollout, turn: int):
    try:
        return ro.turn(int(turn))
    except (KeyError, ValueError, TypeError):
        raise QueryError(f"no turn {turn!r} in this rollout (turns: {[t.index for t in ro.turns]})") from None


def rollout_summary(source: str, row: int | None = None, settings: Settings | None = None) -> dict[str, Any]:
    """What a rollout is: format, model, reward, ``Rollout.stats()`` and one line a call (index, kind, tools,
    finish reason, prompt / output / trained tokens, mean and lowest logprob)."""
    ro = open_rollout(source, row, settings)
    turns = []
    for t in ro.turns:
        mean, low = t.logprob_stats()
        turns.append({"turn": t.index, "kind": t.kind, "role": t.role, "tools": t.tool_names, "finish": t.finish_reason,
                      "prompt_tokens": len(t.prompt_ids), "output_tokens": len(t.output_ids),
                      "trained_tokens": t.trained_tokens, "mean_logprob": mean, "min_logprob": low})
    return {"source": str(source), "row": row, "format": ro.format, "model": ro.model, "reward": ro.reward,
            "stats": ro.stats(), "turns": turns, "problems": [str(p) for p in ro.problems[:50]]}


def turn_tokens(source: str, turn: int, start: int = 0, end: int | None = None, row: int | None = None,
                settings: Settings | None = None) -> dict[str, Any]:
    """Output tokens [start, end) of ``turn``: ids, texts (the bytes the server reported, else the tokenizer's),
    logprobs, loss mask; ``tok`` is the token view's position of ``start`` (prompt + output, a deep link's)."""
    settings = settings or Settings.from_env()
    ro = open_rollout(source, row, settings)
    t = _turn(ro, turn)
    n = len(t.output_ids)
    end = n if end is None else int(end)
    start = int(start)
    if not 0 <= start <= end <= n:
        raise QueryError(f"token range [{start}, {end}) is outside turn {t.index}'s {n} output tokens")
    if end - start > MAX_TOKENS:
        raise QueryError(f"at most {MAX_TOKENS} tokens a call (asked for {end - start})")
    table = None
    if t.output_bytes is None:
        from viewer.tokenizer import token_table, tokenizer_for

        tok = tokenizer_for(ro, settings).tokenizer
        table = token_table(tok) if tok is not None else None
    texts = token_pieces(t, table)
    lps = list(t.logprobs) + [None] * max(0, n - len(t.logprobs))
    return {"source": str(source), "row": row, "turn": t.index, "start": start, "end": end, "output_tokens": n,
            "tok": len(t.prompt_ids) + start, "ids": [int(x) for x in t.output_ids[start:end]],
            "texts": texts[start:end], "logprobs": [None if v is None or v != v else float(v) for v in lps[start:end]],
            "mask": t.loss_mask[start:end]}


def rollout_drift(source: str, row: int | None = None, settings: Settings | None = None) -> dict[str, Any]:
    """The drift scan of one rollout (each agent turn's three checks and trainer row; totals), as
    ``python -m viewer drift --json`` gives it."""
    from viewer.drift.corpus import ScanInputError, scan_source

    settings = settings or Settings.from_env()
    ro = open_rollout(source, row, settings)
    try:
        res = scan_source(ro, settings, workers=1)
    except ScanInputError as e:
        raise SearchError(e.message) from None
    return {"source": str(source), "row": row, "turns": res["turns"], "totals": res["totals"],
            "trainer": res["trainer"], "tokenizer": res["tokenizer"]}


def rollout_lint(source: str, row: int | None = None, settings: Settings | None = None) -> dict[str, Any]:
    """The lint hits of one rollout (docs/LINT.md), each with its rule, level, turn, tokens and app link."""
    from viewer.lint.run import lint_rollout

    settings = settings or Settings.from_env()
    ro = open_rollout(source, row, settings)
    link_to = str(source) if Path(str(source)).exists() or str(source).startswith(("hf://", "sample:")) else ""
    hits = [h.to_dict(link_to) for h in lint_rollout(ro, settings)]
    return {"source": str(source), "row": row, "hits": hits, "rules": sorted({h["rule"] for h in hits})}
