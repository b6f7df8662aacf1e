"""Why trainer and sampler disagree (docs/MISMATCH.md): the capture's sampling settings, the expected
offset per token (hand-worked, and against vLLM 0.32's own top-k/top-p code), the explanation's
totals and outliers, the panel's HTML. The live captures are tests/test_mismatch_live.py."""
from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from requires import need
from viewer.config import REPO_ROOT
from viewer.rescore.values import RescoreResult, TurnDelta

SAMPLE = REPO_ROOT / "sample_data" / "qwen3-tiny"
PROBS = [0.5, 0.3, 0.15, 0.05]


def _torch():
    from viewer.rescore import torch_available

    if not torch_available():
        need("torch (requirements-rescore.txt)", "not installed")
    import torch

    return torch


@pytest.mark.parametrize("T, p, k, t_r, want", [
    (1.0, 0.7, 0, 1.0, math.log(0.8)),            # descending 0.5, 0.3 kept (mass before 0.15 is 0.8 ≥ 0.7)
    (1.0, 1.0, 1, 1.0, math.log(0.5)),            # top-1
    (1.0, 1.0, 3, 1.0, math.log(0.95)),           # top-3
    (1.0, 0.5, 2, 1.0, math.log(0.5)),            # top-2 renormalised (0.625, 0.375), then p 0.5 keeps the first
    (1.0, 1.0, 0, 1.0, 0.0),                      # neutral: nothing expected
    # temperature only: log p(x) − log p_T(x), p_T ∝ sqrt(p) at T = 2
    (2.0, 1.0, 0, 1.0, math.log(0.5) - math.log(math.sqrt(0.5) / sum(math.sqrt(q) for q in PROBS))),
])
def test_expected_offset_worked_by_hand(T, p, k, t_r, want):
    torch = _torch()
    from viewer.rescore.expected import chunk_expected

    logits = torch.tensor([[math.log(q) for q in PROBS]], dtype=torch.float32)
    tok = torch.tensor([0])
    lp_r = torch.log_softmax(logits / t_r, -1)[:, 0]
    assert chunk_expected(logits, tok, lp_r, [(T, p, k)], t_r) == [pytest.approx(want, abs=1e-6)]


_VLLM_ORACLE = r"""
import json, sys, torch
from vllm.v1.sample.ops.topk_topp_sampler import apply_top_k_top_p_pytorch
d = json.load(sys.stdin)
logits = torch.tensor(d["logits"], dtype=torch.float32)
out = []
for T, p, k in d["params"]:
    z = logits.clone() / T   # Sampler.apply_temperature
    n = z.shape[0]
    masked = apply_top_k_top_p_pytorch(z, torch.full((n,), k, dtype=torch.long) if k else None,
                                       torch.full((n,), p, dtype=torch.float32) if p < 1 else None, allow_cpu_sync=True)
    lp = masked.log_softmax(dim=-1, dtype=torch.float32)   # forward_cpu's processed_logprobs
    out.append(lp.gather(-1, torch.tensor(d["tok"])[:, None])[:, 0].tolist())
print(json.dumps(out))
"""


@pytest.mark.slow
def test_expected_offset_equals_vllm_processed_logprobs():
    """The sampler side from vLLM's own code (its top-k/top-p masking and processed log_softmax, run in
    .venv-vllm): trainer logprob − that = our expected offset, for random logits over 5,000 tokens."""
    torch = _torch()
    from viewer.rescore.expected import chunk_expected

    py = REPO_ROOT / ".venv-vllm" / "bin" / "python"
    if not py.exists():
        need("the capture environment (.venv-vllm)", f"{py} not found")
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(24, 5000, generator=g) * 3
    tok = torch.randint(0, 5000, (24,), generator=g)
    tok[:12] = logits[:12].argmax(-1)  # half the tokens surely inside every nucleus
    params = [(0.7, 0.9, 0), (1.0, 0.5, 0), (1.3, 1.0, 40), (0.8, 0.95, 200)]
    doc = {"logits": logits.tolist(), "tok": tok.tolist(), "params": params}
    r = subprocess.run([str(py), "-c", _VLLM_ORACLE], input=json.dumps(doc), capture_output=True, text=True,
                       timeout=600, env={"VLLM_TARGET_DEVICE": "cpu", "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr[-2000:]
    sampler = json.loads(r.stdout.strip().splitlines()[-1])
    lp_r = torch.log_softmax(logits, -1).gather(-1, tok[:, None])[:, 0]
    for (T, p, k), s in zip(params, sampler):
        ours = chunk_expected(logits, tok, lp_r, [(T, p, k)] * 24, 1.0)
        for i in range(24):
            if math.isfinite(s[i]):  # a token vLLM's nucleus drops has no sampler logprob to compare
                assert ours[i] == pytest.approx(float(lp_r[i]) - s[i], abs=2e-5), (T, p, k, i)
        assert sum(math.isfinite(x) for x in s) >= 12


def test_settings_from_summary_and_requests():
    from viewer.rescore.expected import NEUTRAL, settings_of
    from viewer.sources import load_source

    ro = load_source(SAMPLE)  # requests set no temperature / top_p / top_k
    per, desc, notes = settings_of(ro, {"sampling": {"logprobs_mode": "processed_logprobs",
                                                     "defaults": {"temperature": 0.6, "top_p": 0.95, "top_k": 20}}})
    assert {s.effective() for s in per.values()} == {(0.6, 0.95, 20)}
    assert desc["settings"] == [{"temperature": 0.6, "top_p": 0.95, "top_k": 20}]
    assert any("logit_bias" in n for n in notes)  # the scripted sample biases the tool-call tags
    per, desc, notes = settings_of(ro, {"server": {"logprobs_mode": "raw_logprobs"}})
    assert {s.effective() for s in per.values()} == {NEUTRAL} and desc["logprobs_mode"] == "raw_logprobs"
    per, _, notes = settings_of(ro, {})
    assert {s.effective() for s in per.values()} == {NEUTRAL} and "raw_logprobs assumed" in notes[0]
    t = ro.agent_turns[0]
    t.request = {**t.request, "temperature": 0.0, "top_p": 0.5}  # greedy: vLLM returns log_softmax(z)
    per, _, _ = settings_of(ro, {"sampling": {"logprobs_mode": "processed_logprobs", "defaults": {}}})
    assert per[t.index].effective() == NEUTRAL


def _result() -> RescoreResult:
    # Δ = trainer − sampler = [-0.2, -0.25, +0.1]; expected [-0.2, -0.2, 0.0] → residual [0, -0.05, +0.1]
    td = TurnDelta(turn=1, row=0, verdict="FIRST", output_index=[0, 1, 2], sampler=[-1.0, -2.0, -0.5],
                   trainer=[-1.2, -2.25, -0.4], positions=[10, 11, 12], ids=[5, 6, 7], expected=[-0.2, -0.2, 0.0])
    return RescoreResult("m", "cpu", "float32", 1.0, 0.2, {}, [td],
                         sampling={"logprobs_mode": "processed_logprobs",
                                   "settings": [{"temperature": 1.0, "top_p": 0.8, "top_k": 0}]})


def test_explain_totals_and_outliers_by_hand():
    from viewer.rescore.explain import explain

    ro = SimpleNamespace(turn=lambda i: SimpleNamespace(prompt_ids=[0] * 100))
    ex = explain(_result(), ro, top=2)
    t = ex["totals"]
    assert t["tokens"] == 3 and t["mean_delta"] == pytest.approx(-0.35 / 3, abs=1e-6)
    assert t["mean_expected"] == pytest.approx(-0.4 / 3, abs=1e-6)
    assert t["mean_abs_delta"] == pytest.approx(0.55 / 3, abs=1e-6)
    assert t["mean_abs_residual"] == pytest.approx(0.15 / 3, abs=1e-6)
    assert t["explained"] == pytest.approx(1 - 0.15 / 0.55, abs=1e-5)
    assert [(o["output_index"], o["tok"]) for o in ex["outliers"]] == [(2, 102), (1, 101)]
    assert [o["residual"] for o in ex["outliers"]] == [pytest.approx(0.1), pytest.approx(-0.05)]
    assert len(ex["tokens"]) == 3 and ex["sampling"]["logprobs_mode"] == "processed_logprobs"


def test_explain_html_links_outliers_and_escapes():
    from viewer.render import explain_html
    from viewer.rescore.explain import explain

    res = _result()
    res.sampling["logprobs_mode"] = "<img src=x onerror=alert(1)>"
    html = explain_html(explain(res, SimpleNamespace(turn=lambda i: SimpleNamespace(prompt_ids=[1, 2]))),
                        "source=sample%3Aqwen3-tiny")
    assert "<img" not in html and "&lt;img src=x" in html
    assert 'href="?source=sample%3Aqwen3-tiny&amp;turn=1&amp;tok=4&amp;mode=delta"' in html
    assert "explained by the settings" in html and "72.7%" in html
    assert "rescore first" in explain_html(None)


def test_capture_spec_sampling_fields_and_proxy_pinning(tmp_path: Path):
    from viewer.capture.fields import capture_spec
    from viewer.capture.proxy import ProxyConfig, enrich_request
    from viewer.capture.sampling import overrides, summary_record
    from viewer.config import Settings
    from viewer.visitor import VisitorError

    s = Settings()
    spec = capture_spec(s, out=str(tmp_path), public=True, temperature="0.7", top_p=0.9, top_k=20)
    assert (spec.temperature, spec.top_p, spec.top_k) == (0.7, 0.9, 20)
    assert capture_spec(s, out=str(tmp_path), public=True).temperature is None  # not pinned by default
    for field, bad in (("temperature", 0), ("top_p", 0), ("top_p", 1.5), ("top_k", -2), ("temperature", "hot")):
        with pytest.raises(VisitorError, match=field):
            capture_spec(s, out=str(tmp_path), public=True, **{field: bad})
    cfg = ProxyConfig(upstream="http://127.0.0.1:1", trace_path=tmp_path / "t.jsonl", sampling=overrides(spec))
    body = enrich_request({"model": "m", "messages": [], "temperature": 1.0}, cfg, "main")
    assert (body["temperature"], body["top_p"], body["top_k"]) == (0.7, 0.9, 20)  # the agent's value overridden
    spec.logprobs_mode = "processed_logprobs"
    ep = SimpleNamespace(info=lambda: {"backend": "endpoint"})  # an endpoint reports no mode of its own
    rec = summary_record(spec, ep)
    assert rec["logprobs_mode"] == "processed_logprobs" and rec["logprobs_mode_source"] == "declared in the capture spec"
    assert rec["pinned"] == ["temperature", "top_k", "top_p"] and rec["defaults"] is None


def test_token_view_payload_carries_expected_only_when_settings_expect_one():
    from viewer.render import turn_delta

    res = _result()
    d = turn_delta(res, 1, 5, 9)  # prompt of 5, output indices 0..2 at positions 5..7
    assert d["ex"] == [None] * 5 + [-0.2, -0.2, 0.0, None]
    assert d["dl"][5:8] == [pytest.approx(-0.2), pytest.approx(-0.25), pytest.approx(0.1)]
    res.turns[0].expected = [0.0, 0.0, 0.0]  # raw logprobs at the sampler's temperature: nothing expected
    assert "ex" not in turn_delta(res, 1, 5, 9)


def test_hf_jobs_spec_carries_pinned_sampling(tmp_path: Path):
    """An hf-jobs capture pins the same sampling: job_spec.json carries it and the job script's own
    capture_spec call reads it back."""
    from viewer.capture.fields import capture_spec
    from viewer.capture.hf_jobs import JOB_SPEC, job_files
    from viewer.config import Settings

    s = Settings()
    spec = capture_spec(s, out=str(tmp_path / "o"), public=False, backend="hf-jobs", results_repo="me/caps",
                        temperature=0.8, top_p=0.9, top_k=40, logprobs_mode="processed_logprobs")
    job_files(spec, tmp_path, "run")
    doc = json.loads((tmp_path / JOB_SPEC).read_text())
    again = capture_spec(s, out=str(tmp_path / "o2"), public=False, **doc["capture"])
    assert (again.temperature, again.top_p, again.top_k, again.logprobs_mode) == (0.8, 0.9, 40, "processed_logprobs")


@pytest.mark.parametrize("scale", [0.05, 3.0])  # flat (the full sort) and peaked (decided in the top 1,024)
def test_kept_mass_against_a_float64_nucleus(scale):
    torch = _torch()
    from viewer.rescore.expected import chunk_expected

    g = torch.Generator().manual_seed(2)
    logits = torch.randn(8, 5000, generator=g) * scale
    tok = logits.argmax(-1)
    lp_r = torch.log_softmax(logits, -1).gather(-1, tok[:, None])[:, 0]
    for p, k in ((0.9, 0), (0.6, 0), (1.0, 50), (0.9, 300)):
        ours = chunk_expected(logits, tok, lp_r, [(1.0, p, k)] * 8, 1.0)
        for row, got in zip(logits.double(), ours):
            desc = torch.sort(row, descending=True).values
            if k:
                desc = desc[:k]
            probs = torch.softmax(desc, 0)  # the top-k renormalised distribution
            kept = (torch.cumsum(probs, 0) - probs) < p
            kept[0] = True
            want = float(torch.logsumexp(desc[kept], 0) - torch.logsumexp(row, 0))
            assert got == pytest.approx(want, abs=2e-5), (scale, p, k)
