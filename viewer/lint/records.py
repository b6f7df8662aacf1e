"""The rules that need the capture folder itself: the raw trace records (the reader turns NaN into a
gap and cuts mismatched lengths, so RI011 / RI013 look at what was written), the shipped
``tokenizer/`` against its recorded sha256s, and its chat template against the model's own.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterator

from viewer.config import Settings
from viewer.layout import TOKENIZER_DIR
from viewer.rollout import Rollout
from viewer.sources.capture import find_capture_files
from viewer.sources.jsonstream import open_records
from viewer.sources.openai_wire import token_id
from viewer.tokenizer.files import verify_capture_tokenizer

from .rules import Hit, runs_text

__all__ = ["record_checks", "chat_template_of", "own_template_dir"]

_TEMPLATE_FILE = "chat_template.jinja"
_CONFIG_FILE = "tokenizer_config.json"


def _list(v: Any) -> list[Any] | None:
    return v if isinstance(v, list) and v else None


def _entries(rec: dict[str, Any]) -> list[Any] | None:
    e = rec.get("logprobs")
    if isinstance(e, dict):
        e = e.get("content")
    if e is None:
        ch = (rec.get("response") or {}).get("choices") if isinstance(rec.get("response"), dict) else None
        c0 = ch[0] if isinstance(ch, list) and ch and isinstance(ch[0], dict) else {}
        lp = c0.get("logprobs")
        e = lp.get("content") if isinstance(lp, dict) else None
    return _list(e)


def _usage(rec: dict[str, Any]) -> dict[str, Any]:
    resp = rec.get("response")
    u = resp.get("usage") if isinstance(resp, dict) else None
    return u if isinstance(u, dict) else {}


def _record_hits(rec: dict[str, Any], turn: int | None, n_prompt: int) -> Iterator[Hit]:
    where = f"turn {turn}" if turn is not None else "a record the reader skipped"
    entries = _entries(rec)
    lps = _list(rec.get("per_token_logps"))
    values = lps if lps is not None else [e.get("logprob") if isinstance(e, dict) else None for e in entries or []]
    bad = [j for j, v in enumerate(values) if type(v) is float and not math.isfinite(v)]
    if bad:
        toks = tuple(n_prompt + j for j in bad)
        yield Hit("RI011", f"{where}: {len(bad)} non-finite logprob(s) recorded, first {values[bad[0]]} at output "
                           f"position {bad[0]} ({runs_text(toks)})", turn=turn, part="output", position=bad[0],
                  tok=toks[0], tokens=toks)
    lengths = {name: len(v) for name, v in (("completion_token_ids", _list(rec.get("completion_token_ids"))),
                                            ("completion_tokens", _list(rec.get("completion_tokens"))),
                                            ("per_token_logps", lps), ("logprobs entries", entries)) if v}
    n_out = next(iter(lengths.values()), 0)
    msgs = []
    if len(set(lengths.values())) > 1:
        # the tokens past the shorter list: a logprob (or id) is missing there, or left over after the last id
        lo, hi = min(lengths.values()), max(lengths.values())
        js = range(lo, min(hi, n_out)) if lo < n_out else range(n_out - 1, n_out)
        toks = tuple(n_prompt + j for j in js)
        text = ", ".join(f"{n} {name}" for name, n in lengths.items())
        yield Hit("RI013", f"{where}: {text} ({runs_text(toks)})", turn=turn, part="output", position=js[0],
                  tok=toks[0], tokens=toks)
    usage = _usage(rec)
    pids = _list(rec.get("prompt_token_ids"))
    if type(usage.get("completion_tokens")) is int and n_out and usage["completion_tokens"] != n_out:
        msgs.append(f"usage.completion_tokens {usage['completion_tokens']} but {n_out} output tokens recorded")
    if type(usage.get("prompt_tokens")) is int and pids and usage["prompt_tokens"] != len(pids):
        msgs.append(f"usage.prompt_tokens {usage['prompt_tokens']} but {len(pids)} prompt_token_ids")
    mask = _list(rec.get("loss_mask", rec.get("mask")))
    if mask and n_out and len(mask) not in (n_out, len(pids or []) + n_out):
        msgs.append(f"a mask of {len(mask)} for {n_out} output tokens")
    for m in msgs:
        yield Hit("RI013", f"{where}: {m}", turn=turn, part="output", position=0, tok=n_prompt)
    yield from _out_of_step(rec, entries, lps, where, turn, n_prompt)


def _entry_id(e: Any) -> int | None:
    """The id a logprob entry names: ``"token_id:N"`` (vLLM's --return-tokens-as-token-ids), else an int
    ``token_id``; None for a text token (nothing to compare without a tokenizer)."""
    if not isinstance(e, dict):
        return None
    n = token_id(e.get("token"))
    return n if n is not None else e.get("token_id") if type(e.get("token_id")) is int else None


def _shift(ids: list[Any], named: list[Any], bad: list[int]) -> int | None:
    """The offset k with ``named[j] == ids[j + k]`` at every differing position, if one small k explains them."""
    for k in (1, -1, 2, -2):
        if all(0 <= j + k < len(ids) and named[j] == ids[j + k] for j in bad):
            return k
    return None


def _out_of_step(rec: dict[str, Any], entries: list[Any] | None, lps: list[Any] | None, where: str,
                 turn: int | None, n_prompt: int) -> Iterator[Hit]:
    """RI017: the record's ids against the ids its logprob entries (and ``completion_tokens``) name, and
    ``per_token_logps`` against the entries' own logprobs, position by position."""
    ids = _list(rec.get("completion_token_ids"))
    if ids is not None and not all(type(i) is int for i in ids):
        ids = None
    copies: list[tuple[str, list[Any]]] = []
    if entries:
        copies.append(("logprob entries' tokens", [_entry_id(e) for e in entries]))
    toks = _list(rec.get("completion_tokens"))
    if toks:
        copies.append(("completion_tokens", [token_id(x) for x in toks]))
    for name, named in copies if ids else ():
        bad = [j for j in range(min(len(ids), len(named))) if named[j] is not None and named[j] != ids[j]]
        if bad:
            k = _shift(ids, named, bad)
            how = f"; they match the ids shifted by {k:+d}" if k is not None else ""
            yield _step_hit(bad, turn, n_prompt, f"{where}: {len(bad)} of {len(ids)} {name} name other ids than "
                                                 f"completion_token_ids (first at output position {bad[0]}: "
                                                 f"{named[bad[0]]} vs {ids[bad[0]]}){how}")
    if entries and lps:
        ev = [e.get("logprob") if isinstance(e, dict) else None for e in entries]
        n = min(len(ev), len(lps))
        # equal lists (the usual case) have no position to name: one C comparison, not a check per position
        bad = [] if ev[:n] == lps[:n] else [
            j for j in range(n) if type(ev[j]) in (int, float) and type(lps[j]) in (int, float)
            and math.isfinite(ev[j]) and math.isfinite(lps[j]) and abs(ev[j] - lps[j]) > 1e-6]
        if bad:
            k = _shift(ev, lps, bad)
            how = f"; they match shifted by {k:+d}" if k is not None else ""
            yield _step_hit(bad, turn, n_prompt, f"{where}: {len(bad)} per_token_logps differ from the logprob "
                                                 f"entries' own (first at output position {bad[0]}: {lps[bad[0]]!r} "
                                                 f"vs {ev[bad[0]]!r}){how}")


def _step_hit(bad: list[int], turn: int | None, n_prompt: int, message: str) -> Hit:
    toks = tuple(n_prompt + j for j in bad)
    return Hit("RI017", f"{message} ({runs_text(toks)})", turn=turn, part="output", position=bad[0], tok=toks[0],
               tokens=toks)


def chat_template_of(folder: Path) -> str | None:
    """A tokenizer folder's chat template: ``chat_template.jinja``, else tokenizer_config.json's
    ``chat_template`` (the default one of a named list)."""
    f = Path(folder) / _TEMPLATE_FILE
    if f.is_file():
        return f.read_text(encoding="utf-8", errors="replace")
    try:
        ct = json.loads((Path(folder) / _CONFIG_FILE).read_text()).get("chat_template")
    except (OSError, ValueError, AttributeError):
        return None
    if isinstance(ct, list):
        ct = next((x.get("template") for x in ct if isinstance(x, dict) and x.get("name") == "default"), None)
    return ct if isinstance(ct, str) else None


def own_template_dir(model: str | None, local: bool = True) -> Path | None:
    """The folder with the model's own tokenizer files: a local model folder, or the Hub cache (offline).
    Never the bundled Qwen3 files: Qwen2.5 and Qwen3-*-2507 share its ids but not its template.
    ``local=False`` (a public app): a model name from a visitor's file never names a server folder."""
    if not model:
        return None
    from viewer.tokenizer import tokenizer_name_for

    name = tokenizer_name_for(model, local=local)
    if name and name != "qwen3" and Path(name).is_dir():
        return Path(name)
    if "/" not in model or model.startswith(("/", ".", "~")) or Path(model).exists():
        return None
    from huggingface_hub import try_to_load_from_cache

    for fname in (_TEMPLATE_FILE, _CONFIG_FILE):
        try:
            got = try_to_load_from_cache(model, fname)
        except ValueError:  # not a repo id
            return None
        if isinstance(got, str):
            return Path(got).parent
    return None


def _template_hit(ro: Rollout, folder: Path, local: bool) -> Iterator[Hit]:
    mine = chat_template_of(folder / TOKENIZER_DIR)
    own_dir = own_template_dir(ro.model, local)
    if mine is None or own_dir is None or own_dir.resolve() == (folder / TOKENIZER_DIR).resolve():
        return
    own = chat_template_of(own_dir)
    if own is not None and own != mine:
        j = next((k for k, (a, b) in enumerate(zip(mine, own)) if a != b), min(len(mine), len(own)))
        yield Hit("RI009", f"the capture's {TOKENIZER_DIR}/ chat template differs from {ro.model}'s own ({own_dir}) at character {j}")


def record_checks(ro: Rollout, folder: Path, settings: Settings) -> tuple[list[Hit], set[int]]:
    """Hits from the capture folder and the turn indexes whose raw record was checked."""
    hits: list[Hit] = []
    bad = verify_capture_tokenizer(folder)
    if bad:
        hits.append(Hit("RI007", bad))
    if not (folder / TOKENIZER_DIR).is_dir():
        hits.append(Hit("RI008", f"no {TOKENIZER_DIR}/ folder in {folder.name}"))
    else:
        hits.extend(_template_hit(ro, folder, local=not settings.public_mode()))
    trace = find_capture_files(folder).trace
    checked: set[int] = set()
    if trace is None:
        return hits, checked
    rs = open_records(trace, trace.name, settings.max_file_mb, settings.limits())  # streamed, as the reader does
    by_record = {t.origin.record: t for t in ro.turns if t.origin.file == rs.label and t.origin.record is not None}
    for i, rec in enumerate(rs):
        if not isinstance(rec, dict):
            continue
        t = by_record.get(i)
        if t is not None:
            checked.add(t.index)
        hits.extend(_record_hits(rec, t.index if t else None, len(t.prompt_ids) if t else 0))
    return hits, checked
