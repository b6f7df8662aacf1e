"""Importance-sampling correction: ours equals TRL 1.16's own code, on hand-made and on rescored rows.

The oracle (tests/oracle/trl_is_oracle.py) runs, in the isolated .venv-trl, the IS lines of
``GRPOTrainer._generate_and_score_completions`` cut verbatim from TRL 1.16's source, on float32
tensors, with its bounds set through a real ``GRPOConfig``. Tolerances (docs/MISMATCH.md): token
ratios within 1 float32 ulp of TRL's (exp), sequence ratios within a relative 1e-5 (summation order),
every clip / mask decision identical. Under CI a missing oracle fails (tests/requires.py).
"""
from __future__ import annotations

import json
import math
import subprocess

import numpy as np
import pytest

from requires import need
from viewer.config import REPO_ROOT
from viewer.rescore import importance as IS

ORACLE_ENV = REPO_ROOT / ".venv-trl"
TRL = ORACLE_ENV / "trl-1.16.0"
ORACLE = REPO_ROOT / "tests" / "oracle" / "trl_is_oracle.py"
NAN = math.nan
TOKEN_RTOL = 2.5e-7   # 1 ulp of float32 (2^-23 relative, at most twice that just above a power of two)
SEQ_RTOL = 1e-5
BOUNDS = ((None, 3.0), (0.5, 2.0), (1.0, 3.0), (0.9, None), (0.25, 4.0))


@pytest.fixture(scope="module")
def oracle_is(tmp_path_factory):
    """TRL's IS code in one .venv-trl process for the module (``--serve``: a request per line): each call
    of its own paid the torch + TRL import again (about 5 s of a 6 s call)."""
    py = ORACLE_ENV / "bin" / "python"
    if not py.exists() or not TRL.is_dir():
        need("the TRL oracle environment (scripts/setup_oracle.sh)", f"{py} or {TRL} not found")
    err = open(tmp_path_factory.mktemp("oracle") / "stderr.txt", "w+")
    proc = subprocess.Popen([str(py), str(ORACLE), "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=err, text=True,
                            env={"PYTHONPATH": str(TRL), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                                 "PATH": "/usr/bin:/bin"})

    def ask(cases: list[dict]) -> dict:
        proc.stdin.write(json.dumps({"cases": cases}) + "\n")
        proc.stdin.flush()
        line = proc.stdout.readline()  # the oracle ends (and this reads "") if it fails
        err.seek(0)
        assert line, f"the TRL oracle ended (exit {proc.poll()}): {err.read()[-3000:]}"
        doc = json.loads(line)
        assert doc["trl_version"] == "1.16.0"
        return doc

    yield ask
    proc.stdin.close()
    try:
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        err.close()


def _hand_rows() -> dict[str, list[tuple[list, list, list]]]:
    """Hand-made batches: NaN sampler / trainer values, all-masked rows, ratios past both bounds, an exact
    ratio of 1 (on a bound of 1.0), −inf logprobs, rows of different lengths, a long row (summation order)."""
    rng = np.random.default_rng(22)
    long_s = (rng.standard_normal(4000) * 0.02 - 0.5).astype(np.float32).tolist()
    long_t = (np.array(long_s) + rng.standard_normal(4000) * 0.003).astype(np.float32).tolist()
    return {
        "mixed": [([-1.0, NAN, -0.2, -0.3], [-0.1, -1.0, -2.5, -0.3], [1, 1, 1, 1]),
                  ([-0.5, -0.7], [-0.4, -0.2], [0, 1]),
                  ([NAN, NAN, NAN], [-1.0, -2.0, -3.0], [0, 0, 0])],
        "both-bounds": [([-3.0, -0.1, -1.0, -2.0], [-0.5, -2.9, -1.0, -2.01], [1, 1, 1, 1]),
                        ([-2.0, -0.05], [-0.1, -3.0], [1, 1]), ([-0.2], [-0.2], [1])],
        "all-masked": [([-1.0, -2.0], [-1.5, -0.5], [0, 0]), ([0.0], [0.0], [0])],
        "nan-trainer": [([-1.0, -0.3, -0.4], [NAN, -0.2, NAN], [1, 1, 1])],
        "neg-inf": [([-1.0, -float("inf"), -0.3], [-1.1, -0.5, -float("inf")], [1, 1, 1]), ([-1.0], [-1.05], [1])],
        "long": [(long_s, long_t, [1] * 4000), (long_s[:1500], long_t[:1500], [1, 0] * 750)],
    }


def _case(name: str, rows, mode: str, lo, hi) -> dict:
    return {"name": name, "mode": mode, "clip_min": lo, "clip_max": hi,
            "rows": [{"sampler": list(s), "trainer": list(t), "mask": list(m)} for s, t, m in rows]}


def _assert_same(ours: IS.IsResult, theirs: dict, rows, mode: str) -> None:
    seq = mode.startswith("sequence")
    for k, (got, want, (_, _, m)) in enumerate(zip(ours.ratio, theirs["ratio"], rows)):
        got = got[:1] if seq else got
        want = np.array(want, dtype=np.float64)
        got64 = np.asarray(got, dtype=np.float64)
        # the same decisions: zeroed where TRL zeroes, clipped to exactly the same bound
        assert ((got64 == 0) == (want == 0)).all(), (mode, k, got64, want)
        for b in (ours.clip_min, ours.clip_max):
            if b is not None:
                assert ((got64 == np.float32(b)) == (want == np.float32(b))).all(), (mode, k, b)
        np.testing.assert_allclose(got64, want, rtol=SEQ_RTOL if seq else TOKEN_RTOL, atol=0, err_msg=f"{mode} row {k}")
    for key in IS.METRICS:
        a, b = ours.metrics[key], theirs["metrics"][key]
        assert math.isnan(a) == math.isnan(b) and (math.isnan(a) or a == pytest.approx(b, rel=SEQ_RTOL, abs=0)), key


@pytest.mark.slow
def test_hand_made_rows_equal_trl_for_every_mode_and_bounds(oracle_is):
    cases, ours = [], {}
    for name, rows in _hand_rows().items():
        for mode in IS.MODES:
            for lo, hi in BOUNDS:
                key = f"{name}/{mode}/{lo}/{hi}"
                cases.append(_case(key, rows, mode, lo, hi))
                ours[key] = (IS.importance(rows, mode, lo, hi), rows, mode)
    doc = oracle_is(cases)
    assert "torch.nan_to_num(per_token_logps_diff, nan=0.0)" in doc["is_block"]  # TRL's own lines ran
    results = {r["name"]: r for r in doc["results"]}
    assert len(results) == len(cases) and not [r for r in results.values() if "error" in r]
    hit = {"zeroed": 0, "at_min": 0, "at_max": 0}
    for key, (mine, rows, mode) in ours.items():
        _assert_same(mine, results[key], rows, mode)
        flat = np.concatenate([np.asarray(r, dtype=np.float32) for r in results[key]["ratio"]])
        hit["zeroed"] += int((flat == 0).sum())
        hit["at_min"] += int(mine.clip_min is not None and (flat == np.float32(mine.clip_min)).any())
        hit["at_max"] += int(mine.clip_max is not None and (flat == np.float32(mine.clip_max)).any())
    assert all(hit.values()), hit  # the fixtures really reach both bounds and the mask


@pytest.mark.slow
def test_our_defaults_are_trls_grpo_config_defaults(oracle_is):
    from viewer.cli import build_parser

    doc = oracle_is([])
    d = doc["defaults"]
    assert (IS.DEFAULT_MODE, IS.DEFAULT_CLIP_MIN, IS.DEFAULT_CLIP_MAX) == (
        d["vllm_importance_sampling_mode"], d["vllm_importance_sampling_clip_min"],
        d["vllm_importance_sampling_clip_max"])
    args = build_parser().parse_args(["rescore", "x", "--model", "m"])
    assert (args.is_mode, args.is_min, args.is_max) == (d["vllm_importance_sampling_mode"],
                                                        d["vllm_importance_sampling_clip_min"],
                                                        d["vllm_importance_sampling_clip_max"])


def _rescored(sample: str, model: str, dtype: str):
    from test_rescore_cli import _need

    from viewer.rescore import rescore
    from viewer.sources import load_source

    _need(model)
    return rescore(load_source(str(REPO_ROOT / "sample_data" / sample)), model, dtype=dtype)


@pytest.mark.slow
@pytest.mark.parametrize("sample,model,dtype", [("qwen3-tiny", "tiny-qwen3", "float32"),
                                                ("smollm2", "smollm2", "auto")])
def test_bundled_samples_rescored_rows_equal_trl(oracle_is, sample, model, dtype):
    res = _rescored(sample, model, dtype)
    rows = IS.batch_from_rescore(res)
    assert rows and sum(sum(m) for _, _, m in rows) == res.totals()["tokens"]
    cases, ours = [], {}
    for mode in IS.MODES:
        # TRL's default bounds, and bounds just inside this rollout's own ratio range so both are hit
        d = [t - s for s_, t_, m_ in rows for s, t, m in zip(s_, t_, m_) if m]
        lo, hi = math.exp(np.quantile(d, 0.1)), math.exp(np.quantile(d, 0.9))
        for b in ((IS.DEFAULT_CLIP_MIN, IS.DEFAULT_CLIP_MAX), (lo, hi)):
            key = f"{mode}/{b}"
            cases.append(_case(key, rows, mode, *b))
            ours[key] = (IS.importance(rows, mode, *b), rows, mode)
    results = {r["name"]: r for r in oracle_is(cases)["results"]}
    for key, (mine, rows_, mode) in ours.items():
        _assert_same(mine, results[key], rows_, mode)


@pytest.mark.slow
def test_cli_json_carries_every_trained_token_and_trls_metrics(oracle_is, capsys):
    from test_rescore_cli import _need

    from viewer.cli import main

    _need("tiny-qwen3")
    src = REPO_ROOT / "sample_data" / "qwen3-tiny"
    assert main(["rescore", str(src), "--model", "tiny-qwen3", "--dtype", "float32", "--json",
                 "--is-mode", "token_mask", "--is-min", "0.999", "--is-max", "1.001"]) == 0
    doc = json.loads(capsys.readouterr().out)
    imp = doc["importance"]
    assert (imp["mode"], imp["clip_min"], imp["clip_max"]) == ("token_mask", 0.999, 1.001)
    toks = imp["tokens"]
    assert len(toks) == doc["totals"]["tokens"] and set(imp["metrics"]) == set(IS.METRICS)
    assert set(toks[0]) == {"row", "turn", "position", "id", "sampler", "trainer", "ratio"}
    # anyone can recompute: TRL's code on the JSON's own per-token values gives its ratios and metrics
    by_row: dict[int, list] = {}
    for t in toks:
        by_row.setdefault(t["row"], []).append(t)
    rows = [([t["sampler"] for t in v], [t["trainer"] for t in v], [1] * len(v)) for _, v in sorted(by_row.items())]
    theirs = oracle_is([_case("cli", rows, "token_mask", 0.999, 1.001)])["results"][0]
    want = [x for r in theirs["ratio"] for x in r]
    np.testing.assert_allclose([t["ratio"] for t in toks], want, rtol=TOKEN_RTOL, atol=0)
    assert [t["ratio"] == 0 for t in toks] == [x == 0 for x in want] and any(x == 0 for x in want) and not all(x == 0 for x in want)
    for k in IS.METRICS:
        assert imp["metrics"][k] == pytest.approx(theirs["metrics"][k], rel=SEQ_RTOL)
    # the ids are the sampled ids of the capture's own trace, at their row positions
    raw = json.loads((src / "turns.json").read_text())
    assert all(t["id"] in raw[t["turn"] - 1]["output_ids"] for t in toks)


def test_cli_rejects_bounds_trl_rejects(capsys):
    from viewer.cli import main

    src = str(REPO_ROOT / "sample_data" / "qwen3-tiny")
    from viewer.rescore import torch_available

    if not torch_available():  # without torch rescore exits 4 before looking at its options
        need("torch", "requirements-rescore.txt, installed by scripts/setup.sh")
    for argv, msg in ((["--is-min", "3", "--is-max", "2"], "must be less than clip max"),
                      (["--is-mode", "token_truncate", "--is-max", "none"], "needs at least one")):
        assert main(["rescore", src, "--model", "tiny-qwen3", *argv]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: --is-mode/--is-min/--is-max") and msg in err
    with pytest.raises(SystemExit) as e:
        main(["rescore", src, "--model", "tiny-qwen3", "--is-max", "nan"])
    assert e.value.code == 2 and "not a finite number" in capsys.readouterr().err


def test_kl_estimators_hand_worked():
    # one sequence, log r = ln 2 and log r = −ln 2 (trainer − sampler); a masked and a NaN token left out
    ln2 = math.log(2)
    rows = [([-1.0, -1.0, -5.0, NAN], [-1.0 + ln2, -1.0 - ln2, 0.0, -1.0], [1, 1, 0, 1])]
    k = IS.kl(rows)
    assert k["tokens"] == 2 and k["sequences"] == 1
    # k1 = −log r: −ln2 and +ln2 → mean 0; k2 = (log r)²/2 = ln2²/2 each; k3 = (r−1) − log r: (1 − ln2), (−½ + ln2)
    assert k["per_token"]["k1"] == pytest.approx(0, abs=1e-9)
    assert k["per_token"]["k2"] == pytest.approx(ln2 ** 2 / 2, abs=1e-9)
    assert k["per_token"]["k3"] == pytest.approx(((1 - ln2) + (-0.5 + ln2)) / 2, abs=1e-9)
    assert k["per_sequence"]["k3"] == pytest.approx(0.5, abs=1e-9)


def test_effect_table_hand_worked():
    # ratios exp(Δ): 4, 1, 0.25 over three trained tokens; bounds [0.5, 2]
    ln4 = math.log(4)
    rows = [([-2.0, -1.0, -1.0], [-2.0 + ln4, -1.0, -1.0 - ln4], [1, 1, 1])]
    e = IS.effect(rows, 0.5, 2.0)
    assert e["token_truncate"]["changed"] == 2 and e["token_truncate"]["zeroed"] == 0
    # applied 2, 1, 0.5 of raw 4, 1, 0.25: removed 1 − 3.5/5.25 = 1/3; ESS (3.5)²/5.25 / 3 = 7/9
    assert e["token_truncate"]["weight_removed"] == pytest.approx(1 / 3, abs=1e-6)
    assert e["token_truncate"]["ess_fraction"] == pytest.approx(7 / 9, abs=1e-6)
    assert e["token_mask"]["zeroed"] == 2 and e["token_mask"]["weight_removed"] == pytest.approx(1 - 1 / 5.25, abs=1e-6)
    assert e["token_mask"]["ess_fraction"] == pytest.approx(1 / 3, abs=1e-6)
    # the sequence ratio is 4 · 1 · ¼ = 1: inside the bounds, nothing changes
    assert e["sequence_mask"]["changed"] == 0 and e["sequence_truncate"]["ess_fraction"] == pytest.approx(1.0)
