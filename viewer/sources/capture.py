"""Capture folders (the seed dataset's layout) and single trace / turns files -> Rollout.

Reads: ``trace.json`` (JSON array or JSONL of proxy records: the OpenEnv interception
proxy's, our recording proxy's superset, newer TRL entries, the OpenEnv capture
contract), ``turns.json`` (per-turn ids + mask), ``task.json``, ``visible_tests.txt``,
``held_out_tests.json``, ``summary.json`` (docs/FORMATS.md §2). Any of them may be missing
except that the trace or the turns file must exist. An OpenEnv ``RolloutResult``
(``proxy_turns``) is read as a trace without request/response.

Boundaries: this module parses and validates; which calls are agent turns and how a
missing mask is derived lives in :mod:`viewer.turns`. It never re-tokenises (prompt ids
are left empty with ``prompt_source="none"`` when not recorded). Bad data never raises:
it becomes a located :class:`Problem`; only a source with nothing readable raises
:class:`~viewer.sources.SourceError` (via :func:`read_capture`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from viewer.config import Settings
from viewer.rollout import Problem, Rollout, Turn
from viewer.sources.columns import (BytesColumn, Checked, TopLogprobColumn, check_ids, check_logprobs,
                                    check_mask, ids_from_token_strings)
from viewer.sources.jsonio import RecordFile, read_document, read_records
from viewer.sources.layout import TRACE_NAMES, TURNS_NAMES
from viewer.turns import classify_calls, derive_training, kind_from_label

__all__ = ["TRACE_NAMES", "TURNS_NAMES", "CaptureFiles", "find_capture_files", "read_capture",
           "is_turns_record", "CaptureUnreadable"]

INSTRUCTION_KEYS = ("instruction", "prompt", "problem", "question", "task", "description")
REWARD_KEYS = ("reward", "verifier_fraction", "score", "pass_rate", "fraction_passed")
_TRACE_KEYS = ("request", "response", "completion_tokens", "completion_token_ids", "logprobs",
               "per_token_logps", "prompt_token_ids", "loss_mask")


class CaptureUnreadable(Exception):
    """Nothing in the source could be parsed (raised as SourceError by the dispatcher)."""


@dataclass
class CaptureFiles:
    """Which files of a capture exist (None = absent)."""

    root: Path
    trace: Path | None = None
    turns: Path | None = None
    task: Path | None = None
    visible_tests: Path | None = None
    held_out_tests: Path | None = None
    summary: Path | None = None


def find_capture_files(folder: Path) -> CaptureFiles:
    """Locate the capture files in ``folder`` (no parsing)."""
    def first(names: tuple[str, ...]) -> Path | None:
        for n in names:
            if (folder / n).is_file():
                return folder / n
        return None

    def one(name: str) -> Path | None:
        return folder / name if (folder / name).is_file() else None

    return CaptureFiles(folder, first(TRACE_NAMES), first(TURNS_NAMES), one("task.json"),
                        one("visible_tests.txt"), one("held_out_tests.json"), one("summary.json"))


def is_turns_record(rec: Any) -> bool:
    """A turns.json entry (``output_ids``) rather than a proxy trace record."""
    return isinstance(rec, dict) and "output_ids" in rec and not any(k in rec for k in ("request", "response"))


@dataclass
class _Ctx:
    """Reading state shared by the helpers: where problems go."""

    problems: list[Problem] = field(default_factory=list)

    def add(self, file: str, where: str, message: str, severity: str = "error") -> None:
        self.problems.append(Problem(file, where, message, severity))  # type: ignore[arg-type]


def read_capture(path: Path, settings: Settings | None = None) -> Rollout:
    """Read a capture folder, or a single trace / turns / RolloutResult file.

    Raises :class:`CaptureUnreadable` when neither a trace nor a turns file could be parsed.
    """
    settings = settings or Settings()
    path = Path(path)
    if path.is_dir():
        files = find_capture_files(path)
        if files.trace is None and files.turns is None:
            raise CaptureUnreadable(f"{path}: no trace.json or turns.json in this folder")
        fmt = "capture"
    else:
        files = CaptureFiles(path.parent, trace=path)
        fmt = "trace"
    ctx = _Ctx()
    max_mb = settings.max_file_mb
    ro = Rollout(source=str(path), format=fmt)

    trace_rf = read_records(files.trace, files.trace.name, max_mb) if files.trace else None
    turns_rf = read_records(files.turns, files.turns.name, max_mb) if files.turns else None
    # A single file holding turns entries is a turns file, not a trace.
    if fmt == "trace" and trace_rf is not None and trace_rf.records and is_turns_record(trace_rf.records[0]):
        turns_rf, trace_rf, fmt = trace_rf, None, "turns"
        ro.format = fmt
    for rf in (trace_rf, turns_rf):
        if rf is not None:
            ctx.problems.extend(rf.problems)
    if not any(rf is not None and rf.parsed for rf in (trace_rf, turns_rf)):
        raise CaptureUnreadable(_join(ctx.problems) or f"{path}: unreadable")

    for rf, keys, what in ((trace_rf, _TRACE_KEYS, "proxy trace records"),
                           (turns_rf, ("output_ids", "prompt_ids", "mask"), "turns entries")):
        if rf is not None and rf.parsed and rf.records and not _any_record_has(rf.records, keys):
            ctx.add(rf.label, "", f"not {what}: no record has any of {', '.join(keys)}; format not recognised")
            rf.parsed, rf.records = False, []
    if not any(rf is not None and rf.parsed for rf in (trace_rf, turns_rf)):
        raise CaptureUnreadable(_join(ctx.problems))

    turns: list[Turn] = []
    if trace_rf is not None and trace_rf.parsed:
        if trace_rf.wrapper and trace_rf.wrapper.get("_list_key") == "proxy_turns":
            ro.format = "openenv-rollout-result" if fmt == "trace" else fmt
            _read_rollout_result(trace_rf.wrapper, ro)
        if not trace_rf.records and not trace_rf.problems:
            ctx.add(trace_rf.label, "", "trace has no records", "warning")
        for i, rec in enumerate(trace_rf.records):
            t = _turn_from_record(rec, i, trace_rf, ctx)
            if t is not None:
                turns.append(t)
        classify_calls(turns)
    if turns_rf is not None and turns_rf.parsed:
        if not turns_rf.records and not turns_rf.problems:
            ctx.add(turns_rf.label, "", "turns file has no entries", "warning")
        turns = _merge_turns_file(turns, turns_rf, ctx, has_trace=trace_rf is not None and trace_rf.parsed)
    derive_training(turns)
    for i, t in enumerate(turns):
        t.index = i
    ro.turns = turns
    ro.model = _model_of(turns)

    if files.task:
        _read_task(files.task, ro, ctx, max_mb)
    if files.visible_tests:
        _read_visible_tests(files.visible_tests, ro, ctx, max_mb)
    if files.held_out_tests:
        _read_held_out(files.held_out_tests, ro, ctx, max_mb)
    if files.summary:
        _read_summary(files.summary, ro, ctx, max_mb)
    ro.problems = ctx.problems
    ro.meta["files"] = [p.name for p in (files.trace, files.turns, files.task, files.visible_tests,
                                         files.held_out_tests, files.summary) if p is not None]
    return ro


# --------------------------------------------------------------------------- trace records

def _join(problems: list[Problem]) -> str:
    return "; ".join(str(p).split(": ", 1)[1] for p in problems)


def _any_record_has(records: list[Any], keys: tuple[str, ...]) -> bool:
    """True if one of the first records (up to 50) is an object with one of ``keys``."""
    return any(isinstance(r, dict) and any(k in r for k in keys) for r in records[:50])


def _as_dict(x: Any) -> dict[str, Any]:
    return x if isinstance(x, dict) else {}


def _as_list(x: Any) -> list[Any]:
    return x if isinstance(x, list) else []


def _note(ctx: _Ctx, rf: RecordFile, i: int, path: str, chk: Checked, severity: str = "error") -> None:
    if chk.error:
        ctx.add(rf.label, rf.where(i, path), chk.error, severity)


def _turn_from_record(rec: Any, i: int, rf: RecordFile, ctx: _Ctx) -> Turn | None:
    """One proxy record -> Turn (ids, logprobs, text). Kind/mask may stay for the rule."""
    if not isinstance(rec, dict):
        ctx.add(rf.label, rf.where(i), f"expected a JSON object, got {type(rec).__name__}; record skipped")
        return None
    call = rec.get("turn") if type(rec.get("turn")) is int else rec.get("call")
    if type(call) is not int:
        call = i + 1
    request, response = rec.get("request"), rec.get("response")
    for name, val in (("request", request), ("response", response)):
        if val is not None and not isinstance(val, dict):
            ctx.add(rf.label, rf.where(i, f".{name}"), f"expected an object, got {type(val).__name__}; ignored")
    request, response = _as_dict(request), _as_dict(response)
    choices = response.get("choices")
    choice = _as_dict(choices[0]) if isinstance(choices, list) and choices else {}
    message = _as_dict(choice.get("message"))
    if "reasoning" not in message and isinstance(message.get("reasoning_content"), str):
        message = {**message, "reasoning": message["reasoning_content"]}  # older vLLM name
    meta = _as_dict(rec.get("metadata"))
    t = Turn(index=i, call=call, messages=_as_list(request.get("messages")), tools=_as_list(request.get("tools")),
             request=request, response=message)
    t.meta["record"] = i
    t.meta["file"] = rf.label
    t.meta["model"] = request.get("model") or response.get("model") or meta.get("model")
    if response:
        t.meta["response_info"] = {k: response[k] for k in ("id", "model", "usage", "created") if k in response}
    if meta:
        t.meta["metadata"] = meta
    fr = rec.get("finish_reason") or choice.get("finish_reason")
    t.finish_reason = fr if isinstance(fr, str) else None
    for k, attr in (("latency_s", "latency_s"), ("timestamp", "timestamp")):
        v = rec.get(k)
        if type(v) in (int, float):
            setattr(t, attr, float(v))
    _kind_from_record(rec, meta, t)
    _error_from_record(rec, response, choices, t)

    # Logprob entries: the record's copy, else the response's.
    entries = rec.get("logprobs")
    if isinstance(entries, dict):
        entries = entries.get("content")
    if entries is None:
        entries = _as_dict(choice.get("logprobs")).get("content")
    if entries is not None and not isinstance(entries, list):
        ctx.add(rf.label, rf.where(i, ".logprobs"), f"expected a list of logprob entries, got "
                                                    f"{type(entries).__name__}; ignored")
        entries = None

    # Output ids: engine ids first, "token_id:N" strings second; cross-check when both.
    engine: list[int] | None = None
    for path, val in ((".completion_token_ids", rec.get("completion_token_ids")),
                      (".response.choices[0].token_ids", choice.get("token_ids")),
                      (".token_ids", rec.get("token_ids"))):
        chk = check_ids(val)
        _note(ctx, rf, i, path, chk)
        if chk.value and not chk.error:
            engine = chk.value
            break
        if chk.value and engine is None:
            engine = chk.value  # a valid prefix; a later clean source may still replace it
    strings: list[int] | None = None
    str_path = ".completion_tokens"
    if rec.get("completion_tokens") is not None:
        chk = ids_from_token_strings(rec.get("completion_tokens"))
        _note(ctx, rf, i, str_path, chk)
        strings = chk.value
    if strings is None and entries:
        str_path = ".logprobs[].token"
        try:
            toks = [e["token"] for e in entries]
        except (KeyError, TypeError):
            toks = [e.get("token") if isinstance(e, dict) else None for e in entries]
        chk = ids_from_token_strings(toks)
        _note(ctx, rf, i, str_path, chk)
        strings = chk.value
    if engine and strings is not None and engine != strings:
        ctx.add(rf.label, rf.where(i), f"call {call}: output ids from token_ids ({len(engine)}) differ from "
                                       f"the 'token_id:N' strings in {str_path} ({len(strings)}) "
                                       f"{_first_diff(engine, strings)}; using token_ids")
    if engine:
        t.output_ids, t.output_source = engine, "engine"
    elif strings:
        t.output_ids, t.output_source = strings, "token_id_strings"

    # Logprobs: per_token_logps, else the entries' values.
    lps: list[float | None] | None = None
    if rec.get("per_token_logps") is not None:
        chk = check_logprobs(rec.get("per_token_logps"))
        _note(ctx, rf, i, ".per_token_logps", chk)
        lps = chk.value
        t.meta["logprobs_from"] = "per_token_logps"
    if not lps and entries:
        try:
            raw = [e["logprob"] for e in entries]
        except (KeyError, TypeError):
            raw = [e.get("logprob") if isinstance(e, dict) else None for e in entries]
        chk = check_logprobs(raw)
        _note(ctx, rf, i, ".logprobs[].logprob", chk)
        lps = chk.value
        t.meta["logprobs_from"] = "logprobs"
    t.logprobs = lps or []

    # Prompt ids: the engine's, when the record carries them.
    pval = rec.get("prompt_token_ids")
    ppath = ".prompt_token_ids"
    if pval is None and "prompt_token_ids" in response:
        pval, ppath = response.get("prompt_token_ids"), ".response.prompt_token_ids"
    chk = check_ids(pval)
    _note(ctx, rf, i, ppath, chk)
    if chk.value:
        t.prompt_ids, t.prompt_source = chk.value, "engine"

    n_out = len(t.output_ids)
    mval, mpath = (rec.get("loss_mask"), ".loss_mask") if "loss_mask" in rec else (rec.get("mask"), ".mask")
    if mval is not None:
        _set_mask(t, mval, rf, i, mpath, ctx)
        if type(rec.get("trained")) is bool and t.meta.get("mask_source"):
            t.trained = rec["trained"]
    _align(t, entries, f"call {call}", rf, i, ctx)
    if n_out and len(t.output_ids) < n_out and t.mask:
        t.mask = t.mask[:len(t.output_ids)]
    return t


def _kind_from_record(rec: dict[str, Any], meta: dict[str, Any], t: Turn) -> None:
    label = rec.get("kind")
    if not isinstance(label, str):
        role = meta.get("role") if isinstance(meta.get("role"), str) else None
        label = {"agent": "main", "auxiliary": "other"}.get(role or "", None)
    if isinstance(label, str) and label:
        t.kind, t.role = kind_from_label(label)  # type: ignore[assignment]
        t.meta["kind_source"] = "record"
        t.meta["kind_label"] = label


def _error_from_record(rec: dict[str, Any], response: dict[str, Any], choices: Any, t: Turn) -> None:
    status = rec.get("upstream_status", response.get("upstream_status"))
    err = rec.get("upstream_error", response.get("upstream_error"))
    if status is None and err is None:
        if isinstance(rec.get("error"), str) and rec["error"]:
            t.error = rec["error"]
        elif response and isinstance(choices, list) and not choices:
            t.error = "upstream response has no choices"
        return
    msg = err
    if isinstance(err, dict):
        inner = err.get("error", err)
        msg = inner.get("message", inner) if isinstance(inner, dict) else inner
    t.error = f"upstream HTTP {status}: {msg}" if status is not None else f"upstream error: {msg}"


def _first_diff(a: list[int], b: list[int]) -> str:
    for j, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"(first difference at position {j}: {x} vs {y})"
    return "(one is a prefix of the other)"


def _set_mask(t: Turn, value: Any, rf: RecordFile, i: int, path: str, ctx: _Ctx) -> None:
    """Accept a mask over the output, or over prompt+output; flag any other length."""
    file = rf.label
    chk = check_mask(value)
    if chk.error:
        ctx.add(file, rf.where(i, path), chk.error)
        return
    mask = chk.value or []
    n_out, n_prompt = len(t.output_ids), len(t.prompt_ids)
    if len(mask) == n_out:
        t.mask = mask
    elif n_prompt and len(mask) == n_prompt + n_out:
        t.mask = mask[n_prompt:]
        if any(mask[:n_prompt]):
            t.prompt_mask = mask[:n_prompt]
    else:
        want = f"{n_out} (output)" + (f" or {n_prompt + n_out} (prompt+output)" if n_prompt else "")
        ctx.add(file, rf.where(i, path), f"call {t.call}: mask has {len(mask)} entries, expected {want}; mask ignored")
        return
    t.trained = any(t.mask)
    t.meta["mask_source"] = "record"


def _align(t: Turn, entries: list[Any] | None, who: str, rf: RecordFile, i: int, ctx: _Ctx) -> None:
    """Make ids, logprobs (and the entry views) the same length: keep the shorter aligned."""
    file = rf.label
    n_ids, n_lp = len(t.output_ids), len(t.logprobs)
    if n_ids and n_lp and n_ids != n_lp:
        n = min(n_ids, n_lp)
        ctx.add(file, rf.where(i), f"{who}: {n_ids} output ids but {n_lp} logprobs; kept the first {n} aligned")
        t.output_ids, t.logprobs = t.output_ids[:n], t.logprobs[:n]
    n = n_ids and len(t.output_ids) or len(t.logprobs)
    if entries:
        if len(entries) < n:
            ctx.add(file, rf.where(i), f"{who}: {len(entries)} logprob entries for {n} output tokens; "
                                 "top-k/bytes missing past the end", "warning")
        t.top_logprobs = TopLogprobColumn(entries, n)  # type: ignore[assignment]
        t.output_bytes = BytesColumn(entries, n)  # type: ignore[assignment]


# --------------------------------------------------------------------------- turns.json

@dataclass
class _Entry:
    """One turns.json entry, validated."""

    index: int
    call: int | None
    key: str | None
    prompt_ids: list[int] | None
    prompt_source: str
    output_ids: list[int] | None
    logprobs: list[float | None] | None
    mask: Any
    trained: bool | None
    raw: dict[str, Any]


def _parse_entry(rec: Any, j: int, rf: RecordFile, ctx: _Ctx) -> _Entry | None:
    if not isinstance(rec, dict):
        ctx.add(rf.label, rf.where(j), f"expected a JSON object, got {type(rec).__name__}; entry skipped")
        return None
    call, key = None, None
    for k in ("call", "turn"):
        if type(rec.get(k)) is int:
            call, key = rec[k], k
            break
    pchk = check_ids(rec.get("prompt_ids"))
    _note(ctx, rf, j, ".prompt_ids", pchk)
    ochk = check_ids(rec.get("output_ids"))
    _note(ctx, rf, j, ".output_ids", ochk)
    lval, lpath = rec.get("per_token_logps"), ".per_token_logps"
    if lval is None and isinstance(rec.get("logprobs"), list):
        lval, lpath = rec.get("logprobs"), ".logprobs"
    lchk = check_logprobs(lval)
    _note(ctx, rf, j, lpath, lchk)
    src = rec.get("prompt_ids_source")
    psrc = src if src in ("engine", "rerender", "stored") else "stored"
    mask = rec.get("mask", rec.get("loss_mask"))
    trained = rec.get("trained") if type(rec.get("trained")) is bool else None
    return _Entry(j, call, key, pchk.value, psrc, ochk.value, lchk.value, mask, trained, rec)


def _merge_turns_file(turns: list[Turn], rf: RecordFile, ctx: _Ctx, has_trace: bool) -> list[Turn]:
    """Apply turns.json entries to the trace's turns (or build turns from them alone).

    Matching: an explicit ``call``/``turn`` field, else output-id equality, else order
    among agent calls. Unmatched entries become extra agent turns (nothing is dropped);
    agent calls the file does not list are untrained (the upstream filter dropped them).
    """
    by_call = {t.call: t for t in turns}
    agents = [t for t in turns if t.kind == "agent"]
    by_ids: dict[tuple[int, ...], Turn] | None = None
    used: set[int] = set()
    extra: list[Turn] = []
    for j, rec in enumerate(rf.records):
        e = _parse_entry(rec, j, rf, ctx)
        if e is None:
            continue
        target: Turn | None = None
        how = ""
        if has_trace:
            if e.call is not None:
                target, how = by_call.get(e.call), f"{e.key} {e.call}"
                if target is None:
                    ctx.add(rf.label, rf.where(j), f"{e.key} {e.call} has no trace record; kept as its own turn")
            else:
                if by_ids is None:
                    by_ids = {tuple(t.output_ids): t for t in reversed(turns) if t.output_ids}
                if e.output_ids:
                    target, how = by_ids.get(tuple(e.output_ids)), "output ids"
                if target is None and j < len(agents):
                    target, how = agents[j], "order"
        if target is not None and id(target) in used:
            ctx.add(rf.label, rf.where(j), f"matches trace call {target.call} ({how}) which an earlier entry "
                                           "already matched; kept as its own turn")
            target = None
        if target is None:
            call = e.call if e.call is not None else j + 1
            target = Turn(index=0, call=call)
            target.meta.update(kind_source="turns_file", file=rf.label)
            extra.append(target)
        else:
            used.add(id(target))
            target.meta["matched_by"] = how
        _apply_entry(target, e, rf, ctx, how)
    for t in turns:
        if id(t) not in used and t.kind == "agent" and not t.meta.get("mask_source"):
            t.trained, t.mask = False, [0] * len(t.output_ids)
            t.meta["mask_source"] = "absent_from_turns_file"
    return turns + extra


def _apply_entry(t: Turn, e: _Entry, rf: RecordFile, ctx: _Ctx, how: str) -> None:
    t.meta["turns_entry"] = e.index
    if e.output_ids is not None:
        if t.output_ids and e.output_ids != t.output_ids:
            ctx.add(rf.label, rf.where(e.index), f"output ids disagree with trace call {t.call} (matched by {how}): "
                                     f"{len(e.output_ids)} vs {len(t.output_ids)} ids "
                                     f"{_first_diff(e.output_ids, t.output_ids)}; using {rf.label}'s")
            t.top_logprobs = t.output_bytes = None  # they describe the trace's tokens
            t.logprobs = []
        if not t.output_ids or e.output_ids != t.output_ids:
            t.output_ids, t.output_source = e.output_ids, "stored"
    if e.prompt_ids is not None:
        t.prompt_ids, t.prompt_source = e.prompt_ids, e.prompt_source  # type: ignore[assignment]
    if e.logprobs is not None:
        t.logprobs = e.logprobs
    elif t.logprobs and len(t.logprobs) != len(t.output_ids):
        t.logprobs = []
    if e.mask is not None:
        _set_mask(t, e.mask, rf, e.index, ".mask", ctx)
        if t.meta.get("mask_source") == "record":
            t.meta["mask_source"] = "turns_file"
    if e.trained is not None:
        t.trained = e.trained
        if not t.meta.get("mask_source"):  # trained flag without a mask: mask follows it
            t.mask = [1 if e.trained else 0] * len(t.output_ids)
            t.meta["mask_source"] = "turns_file"
    _align(t, None, f"call {t.call}", rf, e.index, ctx)
    if len(t.mask) > len(t.output_ids):
        t.mask = t.mask[:len(t.output_ids)]
    if isinstance(t.top_logprobs, TopLogprobColumn) and len(t.top_logprobs) != len(t.output_ids):
        t.top_logprobs = t.output_bytes = None


# --------------------------------------------------------------------------- side files

def _model_of(turns: list[Turn]) -> str | None:
    for want_agent in (True, False):
        for t in turns:
            m = t.meta.get("model")
            if isinstance(m, str) and m and (t.kind == "agent") == want_agent:
                return m
    return None


def _read_rollout_result(wrapper: dict[str, Any], ro: Rollout) -> None:
    r = wrapper.get("reward")
    if type(r) in (int, float):
        ro.reward = float(r)
    ro.summary = {k: v for k, v in wrapper.items() if k not in ("files", "files_extra", "_list_key")}


def _read_task(path: Path, ro: Rollout, ctx: _Ctx, max_mb: float) -> None:
    doc = read_document(path, path.name, max_mb)
    ctx.problems.extend(doc.problems)
    if doc.value is None:
        return
    if isinstance(doc.value, str):
        ro.task, ro.instruction = {"instruction": doc.value}, doc.value
        return
    if not isinstance(doc.value, dict):
        ctx.add(path.name, "", f"expected an object, got {type(doc.value).__name__}")
        return
    ro.task = doc.value
    for k in INSTRUCTION_KEYS:
        v = doc.value.get(k)
        if isinstance(v, str) and v.strip():
            ro.instruction = v
            return
    ctx.add(path.name, "", f"no instruction found (looked for {', '.join(INSTRUCTION_KEYS)})", "warning")


def _read_visible_tests(path: Path, ro: Rollout, ctx: _Ctx, max_mb: float) -> None:
    from viewer.sources.jsonio import size_problem

    p = size_problem(path, path.name, max_mb)
    if p:
        ctx.problems.append(p)
        return
    try:
        ro.visible_tests = path.read_bytes().decode("utf-8", errors="replace")
    except OSError as e:
        ctx.add(path.name, "", f"cannot read file: {e.strerror or e}")


def _read_held_out(path: Path, ro: Rollout, ctx: _Ctx, max_mb: float) -> None:
    doc = read_document(path, path.name, max_mb)
    ctx.problems.extend(doc.problems)
    v = doc.value
    if v is None:
        return
    if isinstance(v, dict) and isinstance(v.get("inputs"), list) and isinstance(v.get("outputs"), list):
        v = [{"input": a, "output": b} for a, b in zip(v["inputs"], v["outputs"])]  # columnar variant
    elif isinstance(v, dict) and isinstance(v.get("tests"), list):
        v = v["tests"]
    if not isinstance(v, list):
        ctx.add(path.name, "", f"expected a list of {{input, output}}, got {type(v).__name__}")
        return
    tests = []
    for k, item in enumerate(v):
        if isinstance(item, dict) and "input" in item and "output" in item:
            tests.append(item)
        else:
            ctx.add(path.name, f"entry {k}", "expected an object with 'input' and 'output'; skipped")
    ro.held_out_tests = tests


def _read_summary(path: Path, ro: Rollout, ctx: _Ctx, max_mb: float) -> None:
    doc = read_document(path, path.name, max_mb)
    ctx.problems.extend(doc.problems)
    if doc.value is None:
        return
    if not isinstance(doc.value, dict):
        ctx.add(path.name, "", f"expected an object, got {type(doc.value).__name__}")
        return
    ro.summary = doc.value
    for k in REWARD_KEYS:
        v = doc.value.get(k)
        if type(v) in (int, float):
            ro.reward = float(v)
            break
    m = doc.value.get("model")
    if ro.model is None and isinstance(m, str) and m:
        ro.model = m
