"""OpenEnv capture-contract rows (docs/FORMATS.md §2.6): one agent call per row, engine ids.

``{request:{messages, tools}, response:{choices:[{message, finish_reason}]},
prompt_token_ids, completion_token_ids, per_token_logps, loss_mask (over prompt +
completion), metadata:{node_id, model, ...}}``. A JSON/JSONL trace of such entries is
read as a whole rollout by the capture reader; in a row dataset (parquet) each row is
opened on its own, through the same record parser as the capture reader.
"""
from __future__ import annotations

from typing import Any

from viewer.rollout import Problem
from viewer.sources.derive import Conversation
from viewer.sources.formats import RowFormat, RowRef, as_json

__all__ = ["FORMAT", "read_row", "summarize"]


def detect(cols: set[str], first: dict[str, Any] | None) -> bool:
    return ({"prompt_token_ids", "completion_token_ids"} <= cols and bool({"loss_mask", "per_token_logps"} & cols)
            and "conversations" not in cols)


def read_row(row: dict[str, Any], ref: RowRef) -> Conversation:
    from viewer.sources.proxyrecord import Ctx, turn_from_record  # the capture reader's record parser
    from viewer.sources.jsonio import RecordFile

    rec = dict(row)
    for k in ("request", "response", "metadata"):
        if k in rec:
            rec[k] = as_json(rec[k], ref, f".{k}")
    rf = RecordFile(ref.label, records=[rec], container="jsonl")
    rf._lines = []
    ctx = Ctx()
    t = turn_from_record(rec, 0, rf, ctx)
    problems = [Problem(p.file, p.where.replace("record 0", ref.where(), 1), p.message, p.severity)
                for p in ctx.problems]
    if t is None:
        raise ref.error("", "not a capture-contract record")
    t.kind, t.role, t.index = "agent", "main", 0
    if not t.origin.mask_source:
        t.mask, t.trained = [1] * len(t.output_ids), bool(t.output_ids)
        t.origin = t.origin.replace(mask_source="derived")
    meta = rec.get("metadata") if isinstance(rec.get("metadata"), dict) else {}
    return Conversation(messages=t.messages, tools=t.tools, model=t.origin.model, exact_turns=[t],
                        problems=problems, task={k: meta[k] for k in ("node_id", "index", "harness_session_id")
                                                 if k in meta} or None)


def summarize(row: dict[str, Any]) -> dict[str, Any]:
    meta = row.get("metadata") if isinstance(row.get("metadata"), dict) else {}
    p, c = row.get("prompt_token_ids"), row.get("completion_token_ids")
    length = (len(p) if isinstance(p, list) else 0) + (len(c) if isinstance(c, list) else 0)
    return {"agent": None, "model": meta.get("model"), "task": meta.get("harness_session_id") or meta.get("node_id"),
            "reward": None, "result": None, "turns": 1, "length": length or None}


FORMAT = RowFormat("openenv-contract", "OpenEnv capture-contract rows (engine ids)", detect, read_row, summarize,
                   fields=("prompt_token_ids", "completion_token_ids", "loss_mask", "per_token_logps"))
