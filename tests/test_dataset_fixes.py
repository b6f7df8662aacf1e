"""Correction methods across a dataset (viewer/rescore/dataset_fixes.py, shown by viewer/ui/fixes_dataset.py):
the per-token parquet is written by the real CLI (``python -m viewer rescore FILE --model recorded --out``) from
prime-rl's own token exports; the expected counts come from verl's and prime-rl's code (tests/oracle/, run on
torch) over the raw lines' trained tokens, never from viewer.rescore.corrections. (TRL's four modes are checked
per token against TRL itself in tests/test_importance.py; here only verl and prime-rl.)"""
from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from requires import need
from viewer.config import REPO_ROOT
from viewer.rescore.corrections import DEFAULTS
from viewer.rescore.dataset_fixes import dataset_corrections
from viewer.ui.fixes_dataset import counts_html

EXPORTS = [REPO_ROOT / "tests" / "data" / "realworld" / "prime_rl" / d / "token_exports" / s / "rank_0.jsonl"
           for d, s in (("w559b447", "step_0"), ("wfa21395a", "step_3"))]


@pytest.fixture(scope="module")
def oracles():
    try:
        import torch
    except ImportError:
        need("torch", "the oracles run verl's and prime-rl's torch code", "requirements-rescore.txt installs it")
    from oracle import prime_rl_dppo, prime_rl_icepop, verl_rollout_corr
    return SimpleNamespace(torch=torch, verl=verl_rollout_corr, icepop=prime_rl_icepop, dppo=prime_rl_dppo)


@pytest.fixture(scope="module", params=EXPORTS, ids=lambda p: p.parts[-4])
def parquet(request, tmp_path_factory):
    out = tmp_path_factory.mktemp("fx") / "tokens.parquet"
    r = subprocess.run([sys.executable, "-m", "viewer", "rescore", str(request.param), "--model", "recorded", "--out",
                        str(out)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
                       env={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr[-2000:]
    return request.param, out


def _raw_rows(path):
    """Each line's trained tokens (loss mask 1; position 0 has nothing before it to be scored from)."""
    out = []
    for line in path.read_text().splitlines():
        d = json.loads(line)
        keep = [i for i, m in enumerate(d["loss_mask"]) if m and i > 0]
        out.append(([d["inference_logprobs"][i] for i in keep], [d["trainer_logprobs"][i] for i in keep]))
    return out


def _counts(hit_per_row: list[list[bool]]) -> tuple[int, int]:
    return sum(map(sum, hit_per_row)), sum(1 for r in hit_per_row if any(r))


@pytest.mark.parametrize("thr", [2.0, 1.0005])
@pytest.mark.parametrize("adv", [1.0, -1.0])
def test_counts_equal_verl_and_prime_rls_code(parquet, oracles, thr, adv):
    src, path = parquet
    torch = oracles.torch
    band = {"token_mask_low": 1 / thr, "token_mask_high": thr} if thr < 1.5 else {}
    doc = dataset_corrections(path, {"verl": {"is_level": "token", "is_threshold": thr}, "prime_rl_icepop": band,
                                     "prime_rl_dppo": {"dppo_mask_high": 0.05}}, advantage=adv)
    rows = _raw_rows(src)
    assert doc["sequences"] == len(rows) and doc["tokens"] == sum(len(s) for s, _ in rows)
    clipped, masked_ip, masked_dp = [], [], []
    for s_, t_ in rows:
        s, t = torch.tensor(s_, dtype=torch.float32), torch.tensor(t_, dtype=torch.float32)
        m = torch.ones(1, len(s_), dtype=torch.int64)
        raw, _ = oracles.verl.compute_rollout_correction_weights((t - s)[None], m, "token", 3.0e38)
        clipped.append((raw[0] > thr).tolist())
        cfg = SimpleNamespace(**{**DEFAULTS["prime_rl_icepop"], **band, "kl_tau": 0.0})
        _, out = oracles.icepop.compute_loss([t], [s], [torch.ones(len(s_))], [torch.ones(len(s_), dtype=torch.bool)],
                                             cfg, 1)
        masked_ip.append(out["is_masked"].bool().tolist())
        ex = oracles.dppo._compute_export_tensors(
            {"inference_logprobs": s[None], "loss_mask": m.bool(), "advantages": torch.full((1, len(s_)), adv)}, t[None],
            oracles.dppo.DefaultLossConfig(dppo_mask_low=0.2, dppo_mask_high=0.05))
        masked_dp.append(ex["is_masked"][0].tolist())
    got = doc["methods"]
    assert (got["verl"]["counts"]["tokens"]["clipped"], got["verl"]["counts"]["sequences"]["clipped"]) == _counts(clipped)
    ip = got["prime_rl_icepop"]["counts"]
    assert (ip["tokens"]["masked"], ip["sequences"]["masked"]) == _counts(masked_ip)
    dp = got["prime_rl_dppo"]["counts"]
    assert (dp["tokens"]["masked"], dp["sequences"]["masked"]) == _counts(masked_dp)
    # where verl clips and IcePop masks: their disagreement is every token that one of them hits
    dis = doc["disagree"]["verl|prime_rl_icepop"]["tokens"]
    assert dis == sum(a or b for ra, rb in zip(clipped, masked_ip) for a, b in zip(ra, rb))
    html = counts_html(str(path), adv, None, thr, None, None, None, None)
    assert f"{doc['tokens']:,} trained tokens" in html and 'data-pair="verl|prime_rl_icepop"' in html


def test_files_that_are_not_a_per_token_table_are_refused_by_name(tmp_path):
    pq.write_table(pa.table({"rollout": ["a"], "position": [1]}), tmp_path / "other.parquet")
    with pytest.raises(ValueError, match=r"other.parquet: not a per-token rescore table \(no column row, sampler, trainer\)"):
        dataset_corrections(tmp_path / "other.parquet")
    (tmp_path / "x.parquet").write_text("not parquet")
    assert "x.parquet: not a parquet file" in counts_html(str(tmp_path / "x.parquet"), 1.0)
    assert "Upload the per-token parquet" in counts_html(None, 1.0)
