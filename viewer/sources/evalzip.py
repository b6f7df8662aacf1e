"""Inspect AI ``.eval`` logs: a zip whose members are gathered into the one row the ``inspect`` format reads.

The container only (what the row's fields mean is :mod:`viewer.sources.inspect_log`'s business): the
member layout of ``inspect_ai/log/_recorders/eval.py``, each member's declared size capped before it is
inflated, so a zip bomb is refused by name.
"""
from __future__ import annotations

import io
import json
import zlib
from typing import Any

from viewer.budgets import Limits
from viewer.sources.rowerror import RowReadError

__all__ = ["read_inspect_eval"]


# An Inspect AI ``.eval`` log is a zip (inspect_ai/log/_recorders/eval.py): ``header.json`` (the
# log less its samples: version, status, eval, plan, results, stats; written when the eval ends),
# or only ``_journal/start.json`` ({version, eval, plan}) while it runs or after a crash;
# ``samples/<id>_epoch_<n>.json`` (one EvalSample each); ``reductions.json``; ``summaries.json``
# and ``_journal/summaries/*.json`` (per-sample digests, not needed when the samples are here).
_EVAL_HEADER, _EVAL_START, _EVAL_REDUCTIONS = "header.json", "_journal/start.json", "reductions.json"
# Per-sample fields dropped after parsing: the event transcript is most of a log's bytes and no
# reader uses it (the messages hold the conversation).
_EVAL_DROPPED = ("events", "events_data", "timelines")


def read_inspect_eval(data: bytes, name: str, cap: int, limits: Limits) -> dict[str, Any]:
    """An Inspect ``.eval`` log as the one object its ``.json`` log would be: the header's fields
    plus ``samples`` (in Inspect's order: epoch, then id) and ``reductions``.

    A zip that is not an Inspect log, or whose members would decompress past ``cap`` bytes (the
    file limit) or the ``decompressed_mb`` budget, is refused before any member is inflated."""
    import zipfile

    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, ValueError) as e:
        raise RowReadError(name, f"not a readable zip archive ({e}); an Inspect AI .eval log is one") from None
    with zf:
        # a re-logged member repeats in the directory; the last one is current (as Inspect reads it)
        infos = {i.filename: i for i in zf.infolist()}
        head = _EVAL_HEADER if _EVAL_HEADER in infos else _EVAL_START if _EVAL_START in infos else None
        if head is None:
            shown = ", ".join(list(infos)[:5]) or "no members"
            raise RowReadError(name, f"a zip archive but not an Inspect AI log: it has neither {_EVAL_HEADER} nor "
                                     f"{_EVAL_START} (members: {shown})")
        samples = [n for n in infos if n.startswith("samples/") and n.endswith(".json")]
        wanted = [head, *([_EVAL_REDUCTIONS] if _EVAL_REDUCTIONS in infos else []), *samples]
        declared = sum(infos[n].file_size for n in wanted)
        if declared > cap:
            raise RowReadError(name, f"its members decompress to {declared / 1048576:.1f} MB, over the "
                                     f"{cap / 1048576:g} MB limit (VIEWER_MAX_FILE_MB); not read")
        limits.check_bytes("decompressed_mb", declared, f"{name}: the members of an Inspect AI .eval log")
        log = _eval_member(zf, infos[head], name)
        if not isinstance(log, dict):
            raise RowReadError(f"{name} {head}", f"expected a JSON object, got {type(log).__name__}")
        if head == _EVAL_START:  # no header yet: the log of a running (or crashed) eval
            log = {"version": log.get("version"), "status": "started", "eval": log.get("eval"),
                   "plan": log.get("plan")}
        if _EVAL_REDUCTIONS in infos:
            log["reductions"] = _eval_member(zf, infos[_EVAL_REDUCTIONS], name)
        rows = []
        for n in samples:
            sample = _eval_member(zf, infos[n], name)
            if isinstance(sample, dict):
                for k in _EVAL_DROPPED:
                    sample.pop(k, None)
            rows.append(sample)
    rows.sort(key=_eval_sample_order)
    log["samples"] = rows
    return log


def _eval_member(zf, info, name: str) -> Any:
    """One member's JSON; never more than its declared size is inflated (a lying zip is refused)."""
    import zipfile

    where = f"{name} {info.filename}"
    try:
        with zf.open(info) as fh:
            raw = fh.read(info.file_size + 1)
    except (zipfile.BadZipFile, OSError, EOFError, RuntimeError, NotImplementedError, zlib.error) as e:
        raise RowReadError(where, f"cannot inflate this zip member: {e}") from None
    if len(raw) > info.file_size:
        raise RowReadError(where, "decompresses past its declared size; not read")
    try:
        return json.loads(raw.decode("utf-8-sig"))
    except RecursionError:
        raise RowReadError(where, "invalid JSON: nested deeper than the parser accepts") from None
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError, a number of too many digits
        at = f" line {e.lineno}, column {e.colno}" if isinstance(e, json.JSONDecodeError) else ""
        raise RowReadError(where + at, f"invalid JSON: {e}") from None


def _eval_sample_order(sample: Any) -> tuple:
    """Inspect's own order (inspect_ai/log/_log.py ``sort_samples``): epoch, then id, numbers zero-filled."""
    if not isinstance(sample, dict):
        return (0, "")
    epoch, sid = sample.get("epoch"), sample.get("id")
    return (epoch if isinstance(epoch, int) else 0, sid if isinstance(sid, str) else str(sid).zfill(20))
