"""The recording proxy's per-call records: written live as JSON lines, read back after.

Record (the format :mod:`viewer.sources.capture` reads)::

    {"turn": n, "kind": "main"|"title"|"compaction"|"other", "request": <body as forwarded>,
     "response": <chat.completion, re-assembled when streamed; big id/logprob arrays moved out>,
     "prompt_token_ids": [...], "completion_token_ids": [...], "completion_tokens": ["token_id:N", ...],
     "logprobs": [{"token", "logprob", "bytes", "top_logprobs"}], "per_token_logps": [...],
     "finish_reason", "latency_s", "timestamp", "upstream_status"?, "upstream_error"?, "error"?}
"""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from viewer.sources.openai_wire import ids_from_entries

__all__ = ["Recorder", "build_record", "slim_response", "read_records"]


class Recorder:
    """Appends one JSON line per call and flushes it; thread-safe; counts calls and tokens."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "a", encoding="utf-8")
        self._lock = threading.Lock()
        self.calls = 0
        self.tokens = 0
        self.errors = 0
        self._turn = 0
        self.write_error: str | None = None

    def next_turn(self) -> int:
        with self._lock:
            self._turn += 1
            return self._turn

    def append(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False) + "\n"
        with self._lock:
            try:
                self._fh.write(line)
                self._fh.flush()  # to the OS at once: a crash of this process loses at most the call in flight
            except OSError as e:  # a full disk: keep serving, remember why records are missing
                self.write_error = f"cannot write {self.path.name}: {e.strerror or e}"
            self.calls += 1
            self.tokens += len(record.get("completion_token_ids") or [])
            if record.get("upstream_status") or record.get("upstream_error") or record.get("error"):
                self.errors += 1

    def close(self) -> None:
        with self._lock:
            if not self._fh.closed:
                self._fh.close()


def build_record(turn: int, kind: str, request: dict[str, Any], response: dict[str, Any] | None,
                 prompt_ids: list[int] | None, token_ids: list[int] | None, entries: list[dict[str, Any]],
                 finish_reason: str | None, started: float, t0: float) -> dict[str, Any]:
    """One trace record (see the module docstring). ``token_ids`` are the engine's sampled ids."""
    strings = ids_from_entries(entries) if entries else None
    ids = list(token_ids or []) or list(strings or [])
    rec: dict[str, Any] = {
        "turn": turn, "kind": kind, "request": request, "response": response,
        "prompt_token_ids": prompt_ids or [],
        "completion_token_ids": ids,
        "completion_tokens": [e.get("token") for e in entries],
        "logprobs": entries,
        "per_token_logps": [e.get("logprob") for e in entries],
        "finish_reason": finish_reason,
        "latency_s": round(time.perf_counter() - t0, 6),
        "timestamp": started,
    }
    if token_ids and strings is not None and list(token_ids) != strings:
        rec["id_mismatch"] = f"token_ids ({len(token_ids)}) differ from token_id:N strings ({len(strings)})"
    return rec


def slim_response(resp: dict[str, Any]) -> dict[str, Any]:
    """The response without the arrays the record already holds at its top level."""
    out = {k: v for k, v in resp.items() if k not in ("prompt_token_ids", "prompt_logprobs")}
    chs = []
    for ch in resp.get("choices") or []:
        if isinstance(ch, dict):
            ch = {k: v for k, v in ch.items() if k not in ("logprobs", "token_ids")}
        chs.append(ch)
    out["choices"] = chs
    return out


def read_records(path: Path) -> list[dict[str, Any]]:
    """The records of a proxy JSONL file (a torn last line is skipped)."""
    out = []
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError:
        return out
    for line in text.splitlines():
        if line.strip():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out
