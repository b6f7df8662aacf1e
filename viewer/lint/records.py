"""The rules that need the capture folder itself: the raw trace records (the reader turns NaN into a
gap and cuts mismatched lengths, so RI011 / RI013 look at what was written), the shipped
``tokenizer/`` against its recorded sha256s, and its chat template against the model's own.

The trace is read again here (the search index lints every rollout it builds from), so its records
are decoded lean (:func:`_decode_lean`): only the keys these rules read, the logprob entries as
:class:`_Entry` structs, the request (the whole conversation) and the top-k alternatives skipped
unparsed; a small array of such records in one call (:func:`_records`). A record of another shape is
decoded generically, as before: the types choose the fast path, never what is read.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterable, Iterator

import msgspec
from msgspec import UNSET, UnsetType

from viewer.config import Settings
from viewer.layout import TOKENIZER_DIR
from viewer.rollout import Rollout
from viewer.sources.capture import trace_file
from viewer.sources.jsonio import WHITESPACE_BYTES, size_problem
from viewer.sources.jsonstream import open_records
from viewer.sources.openai_wire import TOKEN_ID_PREFIX, token_id
from viewer.sources.recordtypes import ValidationError, long_digit_run
from viewer.tokenizer.files import verify_capture_tokenizer

from .rules import Hit, runs_text

__all__ = ["record_checks", "chat_template_of", "own_template_dir"]

_TEMPLATE_FILE = "chat_template.jinja"
_CONFIG_FILE = "tokenizer_config.json"


class _Entry(msgspec.Struct, gc=False):
    """One logprob entry as these rules read it (``bytes`` and ``top_logprobs`` skipped unparsed). A token
    that is not a string or a logprob that is not a number (a bool, null) does not fit: generic then."""

    token: str
    logprob: int | float
    token_id: Any = UNSET


class _Content(msgspec.Struct, gc=False):
    content: list[_Entry] | None = None


class _Choice(msgspec.Struct, gc=False):
    logprobs: _Content | None = None


class _Response(msgspec.Struct):
    usage: Any = UNSET
    choices: list[_Choice] | None | UnsetType = UNSET


class _Record(msgspec.Struct):
    logprobs: list[_Entry] | _Content | None | UnsetType = UNSET
    response: _Response | None | UnsetType = UNSET
    completion_token_ids: Any = UNSET
    completion_tokens: Any = UNSET
    per_token_logps: Any = UNSET
    prompt_token_ids: msgspec.Raw | UnsetType = UNSET  # only counted here: see _counted
    loss_mask: Any = UNSET
    mask: Any = UNSET


_LEAN = msgspec.json.Decoder(_Record)
_LEAN_ARRAY = msgspec.json.Decoder(list[_Record])
_FIELDS = _Record.__struct_fields__
_ARRAY_MAX = 16 << 20  # a trace array up to this size may be decoded in one call (above: streamed, memory)


def _decode_lean(buf: Any) -> dict[str, Any]:
    """A trace record as a dict of the keys read here (each as the generic decode gives it, the logprob
    entries as :class:`_Entry`); raises ValidationError for any other shape (decoded generically then)."""
    if long_digit_run(buf):  # a skipped key may hold an int json.loads refuses: let the generic path decide
        raise ValidationError("an integer longer than Python's json accepts")
    return _as_dict(_LEAN.decode(buf))


_ID_TEXT = b"0123456789,- \t\r\n"  # what a flat JSON list of integers is written with, inside its brackets


def _counted(raw: msgspec.Raw) -> Any:
    """The prompt's ids as these rules read them: only how many there are (RI013). A flat list of integers
    (only digits, signs, commas, whitespace and its brackets: valid JSON, checked by the decode) is counted by
    its commas, as ``[None] * n``, instead of building thousands of ints (a third of this decode's time);
    anything else is decoded generically."""
    b = bytes(raw)
    inner = b[1:-1]
    if b[:1] == b"[" and b[-1:] == b"]" and not inner.translate(None, _ID_TEXT):
        return [None] * (inner.count(b",") + 1 if inner.strip() else 0)
    return msgspec.json.decode(b)


def _as_dict(rec: _Record) -> dict[str, Any]:
    out = {k: v for k in _FIELDS if (v := getattr(rec, k)) is not UNSET}
    if "prompt_token_ids" in out:
        out["prompt_token_ids"] = _counted(out["prompt_token_ids"])
    if type(rec.logprobs) is _Content:
        out["logprobs"] = {"content": rec.logprobs.content}
    r = rec.response
    if type(r) is _Response:
        out["response"] = resp = {} if r.usage is UNSET else {"usage": r.usage}
        if r.choices is not UNSET:
            resp["choices"] = r.choices if r.choices is None else [
                {"logprobs": None if c.logprobs is None else {"content": c.logprobs.content}} for c in r.choices]
    return out


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


def _columns(entries: list[Any] | None) -> tuple[list[Any], list[Any], list[Any]]:
    """Each entry's ``logprob``, ``token`` and ``token_id`` (None where missing, or the entry is no object)."""
    if not entries:
        return [], [], []
    if type(entries[0]) is _Entry:  # a lean record: every entry is one
        return [e.logprob for e in entries], [e.token for e in entries], [e.token_id for e in entries]
    ds = [e if isinstance(e, dict) else {} for e in entries]
    return [d.get("logprob") for d in ds], [d.get("token") for d in ds], [d.get("token_id") for d in ds]


def _may_name_ids(tokens: list[Any]) -> bool:
    """False when no token can be ``"token_id:N"`` (one C search over them all, not a match per token)."""
    try:
        return TOKEN_ID_PREFIX in "\n".join(tokens)
    except TypeError:  # a token that is not a string: look at each
        return True


def _named_ids(tokens: list[Any], tids: list[Any] | None) -> list[int | None] | None:
    """The id each entry names: ``"token_id:N"`` (vLLM's --return-tokens-as-token-ids), else an int
    ``token_id`` (``tids``; None: no such key); None for a text token (nothing to compare without a
    tokenizer). None when no entry names one."""
    by_text = _may_name_ids(tokens)
    if tids is None:
        return [token_id(x) for x in tokens] if by_text else None
    if not by_text and not any(type(t) is int for t in tids):
        return None
    out: list[int | None] = []
    for tok, tid in zip(tokens, tids):
        n = token_id(tok) if by_text else None
        out.append(n if n is not None else tid if type(tid) is int else None)
    return out


def _sum_finite(values: list[Any]) -> bool:
    """True when no value is a non-finite float: their sum is finite (a NaN or an infinity would make it
    NaN or infinite), in one C pass. False says only "look at each": a sum that overflowed, a value that is
    no number."""
    try:
        return math.isfinite(sum(values))
    except (TypeError, OverflowError):
        return False


def _usage(rec: dict[str, Any]) -> dict[str, Any]:
    resp = rec.get("response")
    u = resp.get("usage") if isinstance(resp, dict) else None
    return u if isinstance(u, dict) else {}


def _record_hits(rec: dict[str, Any], turn: int | None, n_prompt: int) -> Iterator[Hit]:
    where = f"turn {turn}" if turn is not None else "a record the reader skipped"
    entries = _entries(rec)
    ev, tokens, tids = _columns(entries)
    lps = _list(rec.get("per_token_logps"))
    values = lps if lps is not None else ev
    bad = [] if _sum_finite(values) else [j for j, v in enumerate(values) if type(v) is float and not math.isfinite(v)]
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
    yield from _out_of_step(rec, ev, tokens, tids, lps, where, turn, n_prompt)


def _shift(ids: list[Any], named: list[Any], bad: list[int]) -> int | None:
    """The offset k with ``named[j] == ids[j + k]`` at every differing position, if one small k explains them."""
    for k in (1, -1, 2, -2):
        if all(0 <= j + k < len(ids) and named[j] == ids[j + k] for j in bad):
            return k
    return None


def _out_of_step(rec: dict[str, Any], ev: list[Any], tokens: list[Any], tids: list[Any], lps: list[Any] | None,
                 where: str, turn: int | None, n_prompt: int) -> Iterator[Hit]:
    """RI017: the record's ids against the ids its logprob entries (their ``tokens`` and ``tids``) and
    ``completion_tokens`` name, and ``per_token_logps`` against the entries' own logprobs (``ev``),
    position by position."""
    ids = _list(rec.get("completion_token_ids"))
    if ids is not None and set(map(type, ids)) != {int}:  # (one C pass: a bool or float is no id)
        ids = None
    texts: list[str] | None = None
    for name, toks, ints in (("logprob entries' tokens", tokens, tids),
                             ("completion_tokens", _list(rec.get("completion_tokens")), None)) if ids else ():
        if not toks:
            continue
        n = min(len(ids), len(toks))
        if texts is None:  # vLLM's --return-tokens-as-token-ids spells each id: "token_id:N" for N >= 0
            texts = [TOKEN_ID_PREFIX + str(i) for i in ids] if min(ids) >= 0 else []
        if toks[:n] == texts[:n]:  # each token names the id beside it (one C comparison, no parse per token)
            continue
        named = _named_ids(toks, ints)
        if named is None:
            continue
        bad = [j for j in range(n) if named[j] is not None and named[j] != ids[j]]
        if bad:
            k = _shift(ids, named, bad)
            how = f"; they match the ids shifted by {k:+d}" if k is not None else ""
            yield _step_hit(bad, turn, n_prompt, f"{where}: {len(bad)} of {len(ids)} {name} name other ids than "
                                                 f"completion_token_ids (first at output position {bad[0]}: "
                                                 f"{named[bad[0]]} vs {ids[bad[0]]}){how}")
    if ev and lps:
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


def _records(trace: Path, settings: Settings) -> Iterable[Any]:
    """The trace's records as the reader's stream gives them (:func:`open_records`, each record decoded lean
    when it fits). A small JSON array whose every record fits the lean types is decoded in one call instead:
    the same values, without the stream's work per record and per chunk. Anything else (a record of
    another shape, NaN, broken or not UTF-8 JSON, a BOM, over the size or record budget) is streamed."""
    limits = settings.limits()
    try:
        small = trace.stat().st_size <= _ARRAY_MAX and size_problem(trace, trace.name, settings.max_file_mb) is None
        data = trace.read_bytes() if small else b""
    except OSError:
        data = b""
    if data.lstrip(WHITESPACE_BYTES)[:1] == b"[" and not long_digit_run(data):
        try:
            recs = _LEAN_ARRAY.decode(data)
        except (msgspec.DecodeError, RecursionError):  # (a ValidationError is a DecodeError)
            recs = None
        if recs is not None and not (limits.records and len(recs) > limits.records):
            return [_as_dict(r) for r in recs]
    del data
    rs = open_records(trace, trace.name, settings.max_file_mb, limits)  # streamed, as the reader does
    rs.typed = _decode_lean  # a streamed array's or JSONL file's records (a file read whole stays generic)
    return rs


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
    trace = trace_file(folder)
    checked: set[int] = set()
    if trace is None:
        return hits, checked
    by_record = {t.origin.record: t for t in ro.turns if t.origin.file == trace.name and t.origin.record is not None}
    for i, rec in enumerate(_records(trace, settings)):
        if not isinstance(rec, dict):
            continue
        t = by_record.get(i)
        if t is not None:
            checked.add(t.index)
        hits.extend(_record_hits(rec, t.index if t else None, len(t.prompt_ids) if t else 0))
    return hits, checked
