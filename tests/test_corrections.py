"""Corrections side by side: each method's per-token values equal its project's own code.

Oracles (tests/oracle/SOURCES.md): verl's ``compute_rollout_correction_weights`` / ``compute_rollout_rejection_mask``
and prime-rl's ``compute_loss`` (5f47740dd, IcePop-style masks) and ``_compute_export_tensors`` (DPPO masks), copied
verbatim and run here on float32 torch tensors, rows right-padded with mask 0 as the trainers batch them. TRL's
four modes are importance.py's own (tests/test_importance.py runs TRL's code on them). Tolerances as
docs/MISMATCH.md: token values within 1 float32 ulp (exp), sequence values within a relative 1e-5 (sum order);
the keep / clip / mask decisions are asserted identical (the fixtures hold no value that close to a bound).
The prime-rl token exports' own ``is_masked*`` columns, written by prime-rl's writer, are a second oracle.
"""
from __future__ import annotations

import json
import math
import re
from types import SimpleNamespace

import numpy as np
import pytest

from requires import need
from viewer.config import REPO_ROOT
from viewer.rescore import corrections as C
from viewer.rescore import importance as IS

NAN, INF = math.nan, math.inf
TOKEN_RTOL = 2.5e-7
SEQ_RTOL = 1e-5
EXPORTS = [REPO_ROOT / "tests" / "data" / "realworld" / "prime_rl" / d / "token_exports" / s / "rank_0.jsonl"
           for d, s in (("w559b447", "step_0"), ("wfa21395a", "step_3"))]


@pytest.fixture(scope="module")
def torch():
    try:
        import torch
    except ImportError:
        need("torch", "the oracles run verl's and prime-rl's torch code", "requirements-rescore.txt installs it")
    return torch


@pytest.fixture(scope="module")
def oracles(torch):
    from oracle import prime_rl_dppo, prime_rl_icepop, verl_rollout_corr
    return SimpleNamespace(verl=verl_rollout_corr, icepop=prime_rl_icepop, dppo=prime_rl_dppo)


def _hand_rows() -> dict[str, list[tuple]]:
    """(sampler, trainer, mask, advantages) batches: NaN and −inf logprobs, all-masked rows, ratios past both
    bounds of every method, zero / negative advantages, rows of different lengths, a 4000-token row."""
    rng = np.random.default_rng(40)
    ls = (rng.standard_normal(4000) * 0.02 - 0.5).astype(np.float32)
    lt = (ls + rng.standard_normal(4000) * 0.003).astype(np.float32)
    # probabilities that move by more than 0.2 either way (DPPO), ratios past 8 and under 1/8 (IcePop)
    big = ([-3.0, -0.1, -1.0, -2.0, -0.05, -4.0], [-0.5, -2.9, -1.0, -2.01, -2.5, -0.9], [1] * 6,
           [1.0, 1.0, -1.0, 0.0, -1.0, 0.5])
    return {
        "mixed": [([-1.0, NAN, -0.2, -0.3], [-0.1, -1.0, -2.5, -0.3], [1, 1, 1, 1], [0.5] * 4),
                  ([-0.5, -0.7, -3.0], [-0.4, -0.2, -1.0], [0, 1, 1], [-1.0] * 3),
                  ([NAN, NAN, NAN], [-1.0, -2.0, -3.0], [0, 0, 0], [0.0] * 3)],
        "both-bounds": [big, ([-2.0, -0.05], [-0.1, -3.0], [1, 1], [-0.3, -0.3]), ([-0.2], [-0.2], [1], [1.0])],
        "all-masked": [([-1.0, -2.0], [-1.5, -0.5], [0, 0], [1.0, 1.0]), ([0.0], [0.0], [0], [-1.0])],
        "nan-trainer": [([-1.0, -0.3, -0.4], [NAN, -0.2, NAN], [1, 1, 1], [1.0] * 3)],
        "neg-inf": [([-1.0, -INF, -0.3], [-1.1, -0.5, -INF], [1, 1, 1], [1.0, -1.0, 1.0]),
                    ([-1.0], [-1.05], [1], [2.0])],
        "long": [(ls.tolist(), lt.tolist(), [1] * 4000, [0.7] * 4000),
                 (ls[:1500].tolist(), lt[:1500].tolist(), [1, 0] * 750, [-0.7] * 1500),
                 ([-1.0] * 12, [-0.1] * 12, [1] * 12, [1.0] * 12)],  # Σ log r = 10.8: past prime-rl's cap of 10
    }


def _pad(torch, rows):
    """Right-padded float32 sampler, trainer, advantages (0 where a row has none) and an int mask."""
    rows = [r if len(r) == 4 else (*r, [0.0] * len(r[0])) for r in rows]
    n = max(len(r[0]) for r in rows)
    col = [[list(map(lambda v: NAN if v is None else float(v), r[i])) + [0.0] * (n - len(r[i])) for r in rows]
           for i in (0, 1, 3)]
    s, t, a = (torch.tensor(c, dtype=torch.float32) for c in col)
    m = torch.tensor([[int(bool(x)) for x in r[2]] + [0] * (n - len(r[2])) for r in rows])
    return s, t, m, a


def _same(ours: list[np.ndarray], theirs, rows, rtol: float) -> None:
    """Ours per row vs the oracle's padded tensor, on each row's own positions: NaN where it has NaN, else close."""
    for k, o in enumerate(ours):
        th = theirs[k, :len(o)].double().numpy()
        o = o.astype(np.float64)
        assert np.array_equal(np.isnan(o), np.isnan(th)), (k, o, th)
        ok = ~np.isnan(o)
        np.testing.assert_allclose(o[ok], th[ok], rtol=rtol, atol=0, err_msg=f"row {k}")


def _verl_is(torch, oracles, rows, level, thr):
    s, t, m, _ = _pad(torch, rows)
    w, _ = oracles.verl.compute_rollout_correction_weights(t - s, m, level, thr)
    raw, _ = oracles.verl.compute_rollout_correction_weights(t - s, m, level, 3.0e38)  # before truncation
    return w, raw > thr, m


@pytest.mark.parametrize("name", list(_hand_rows()))
@pytest.mark.parametrize("level,thr", [("token", 2.0), ("sequence", 2.0), ("token", 1.0), ("sequence", 0.5),
                                       ("token", 8.0)])
def test_verl_is_weights_equal_verls(torch, oracles, name, level, thr):
    rows = _hand_rows()[name]
    if name == "all-masked":  # verl refuses a batch with no trained token, so do we
        with pytest.raises(ValueError, match="at least one valid token") as theirs:
            _verl_is(torch, oracles, rows, level, thr)
        with pytest.raises(ValueError, match=re.escape(str(theirs.value))):
            C.correct(rows, "verl", is_level=level, is_threshold=thr)
        return
    w, clipped, m = _verl_is(torch, oracles, rows, level, thr)
    mine = C.correct(rows, "verl", is_level=level, is_threshold=thr)
    _same(mine.weight, w, rows, TOKEN_RTOL if level == "token" else SEQ_RTOL)
    for k, st in enumerate(mine.state):
        trained = m[k, :len(st)].bool().numpy()
        assert np.array_equal(st[trained] == C.CLIPPED, clipped[k, :len(st)].numpy()[trained]), (name, k)


RS_SPECS = [("token_k1", "0.5_2.0"), ("token_k1", "0.995_1.005"), ("token_k1", 2.0), ("token_k1", "0.8_1.5"),
            ("token_k2", 0.5), ("token_k3", "0.2"), ("seq_sum_k1", "0.5_3.0"), ("seq_sum_k2", 1.0), ("seq_sum_k3", 0.5),
            ("seq_mean_k1", "0.999_1.001"), ("seq_mean_k1", "0.7_1.3"), ("seq_mean_k2", 0.05),
            ("seq_mean_k3", 0.02), ("seq_max_k2", 1.0), ("seq_max_k3", 0.5), ("token_k1,seq_max_k3", "0.4_1.8,3.0"),
            ("token_k2,token_k2,seq_mean_k3", 0.3)]


@pytest.mark.parametrize("name", [n for n in _hand_rows() if n != "all-masked"])  # verl refuses it (above)
def test_verl_rejection_masks_equal_verls(torch, oracles, name):
    rows = _hand_rows()[name]
    s, t, m, _ = _pad(torch, rows)
    hits = 0
    for opt, thr in RS_SPECS:
        keep, _ = oracles.verl.compute_rollout_rejection_mask(t - s, m, opt, thr)
        mine = C.correct(rows, "verl", is_level=None, rs=opt, rs_threshold=thr)
        for k, st in enumerate(mine.state):
            trained = m[k, :len(st)].bool().numpy()
            assert np.array_equal(st[trained] != C.MASKED, keep[k, :len(st)].bool().numpy()[trained]), (opt, thr, k)
            hits += int((st == C.MASKED).sum())
        # both at once (verl's loss: IS weight × the rejection-modified response mask), what `weight` holds
        w, _ = oracles.verl.compute_rollout_correction_weights(t - s, m, "token", 2.0)
        both = C.correct(rows, "verl", is_level="token", is_threshold=2.0, rs=opt, rs_threshold=thr)
        _same([np.where(x >= C.KEPT, y, 0) for x, y in zip(both.state, both.weight)],
              torch.where(keep.bool(), w, 0), rows, TOKEN_RTOL)  # on trained tokens (keep is 0 elsewhere)
        assert all(np.all(y[x == C.MASKED] == 0) for x, y in zip(both.state, both.weight))
    assert hits  # the specs really reject tokens here


@pytest.mark.parametrize("opt,thr", [("token_k1", "0_2"), ("token_k2", "0.1_2"), ("seq_max_k1", 1.0),
                                     ("token_k1", "abc"), ("token_k1,token_k2", "1,2,3"), ("token_k3", -1.0),
                                     ("token_k1", None), ("token_k1", ""), (" , ", 1.0)])
def test_verl_rejects_the_thresholds_verl_rejects(torch, oracles, opt, thr):
    s, t, m, _ = _pad(torch, _hand_rows()["mixed"])
    with pytest.raises(ValueError) as theirs:
        oracles.verl.compute_rollout_rejection_mask(t - s, m, opt, thr)
    with pytest.raises(ValueError) as mine:
        C.correct(_hand_rows()["mixed"], "verl", is_level=None, rs=opt, rs_threshold=thr)
    assert str(mine.value) == str(theirs.value)


ICEPOP = [{}, {"token_mask_low": 0.5, "token_mask_high": 2.0}, dict(C.PRESETS["icepop"][1]),
          {"geo_mask_low": 0.9, "geo_mask_high": 1.1}, {"geo_mask_low": 0.5, "geo_mask_high": 3.0}, {"sequence_mask_low": 0.3, "sequence_mask_high": 3.0},
          {"token_mask_low": 0.99, "token_mask_high": 1.01, "ratio_type": "sequence", "sequence_clip_high": 1.5},
          {"ratio_type": "sequence", "sequence_clip_high": 1.5}, {"ratio_type": "sequence", "sequence_clip_high": 1e9}]


@pytest.mark.parametrize("name", list(_hand_rows()))
@pytest.mark.parametrize("params", ICEPOP, ids=range(len(ICEPOP)))
def test_prime_rl_icepop_masks_equal_prime_rls(torch, oracles, name, params):
    rows = _hand_rows()[name]
    p = {**C.DEFAULTS["prime_rl_icepop"], **params, "kl_tau": 0.0}
    tensors = [[torch.tensor([NAN if v is None else float(v) for v in r[i]], dtype=torch.float32) for r in rows]
               for i in (1, 0, 3)]
    mask = [torch.tensor([bool(x) for x in r[2]]) for r in rows]
    _, out = oracles.icepop.compute_loss(*tensors, mask, SimpleNamespace(**p), 1)
    mine = C.correct(rows, "prime_rl_icepop", **params)
    trained = np.concatenate(mine.mask)
    assert np.array_equal(np.concatenate(mine.state)[trained] == C.MASKED, out["is_masked"].bool().numpy())
    for flag in ("is_masked_low", "is_masked_high"):
        assert np.array_equal(np.concatenate(mine.flags[flag])[trained], out[flag].bool().numpy()), flag
    # the weights: with advantage 1 and kl_tau 0, d loss / d trainer_logprobs = −(ratio · keep), ratio the token's
    # or (ratio_type sequence) the clamped sequence ratio: prime-rl's own coefficient, read through autograd
    trainer = [x.clone().requires_grad_(True) for x in tensors[0]]
    loss, _ = oracles.icepop.compute_loss(trainer, tensors[1], [torch.ones_like(x) for x in tensors[2]], mask,
                                          SimpleNamespace(**p), 1)
    loss.backward()
    # (on kept tokens: autograd gives a masked token NaN · 0 where its coefficient is NaN; ours is 0 there)
    # ratio_type sequence also divides a row's loss by its trained-token count: multiplied back here
    kept = [(st == C.KEPT) | (st == C.CLIPPED) for st in mine.state]
    scale = [max(int(x.sum()), 1) if p["ratio_type"] == "sequence" else 1 for x in mask]
    _same([np.where(k, w, 0) for k, w in zip(kept, mine.weight)],
          torch.nn.utils.rnn.pad_sequence([torch.where(torch.tensor(k), -x.grad * n, 0)
                                           for k, x, n in zip(kept, trainer, scale)], batch_first=True),
          rows, TOKEN_RTOL if p["ratio_type"] == "token" else SEQ_RTOL)
    assert all((w[~k] == 0).all() for k, w in zip(kept, mine.weight) if p["ratio_type"] == "token")


@pytest.mark.parametrize("name", list(_hand_rows()))
@pytest.mark.parametrize("low,high", [(0.2, 0.2), (0.05, 0.5), (0.0, 0.0)])
def test_prime_rl_dppo_masks_equal_its_token_export(torch, oracles, name, low, high):
    rows = _hand_rows()[name]
    s, t, m, a = _pad(torch, rows)
    out = oracles.dppo._compute_export_tensors({"inference_logprobs": s, "loss_mask": m.bool(), "advantages": a}, t,
                                               oracles.dppo.DefaultLossConfig(dppo_mask_low=low, dppo_mask_high=high))
    mine = C.correct(rows, "prime_rl_dppo", dppo_mask_low=low, dppo_mask_high=high)
    _same(mine.ratio, out["importance_ratio"], rows, TOKEN_RTOL)
    for k, st in enumerate(mine.state):
        assert np.array_equal(st == C.MASKED, out["is_masked"][k, :len(st)].numpy()), k
        for flag in ("is_masked_high", "is_masked_low"):
            assert np.array_equal(mine.flags[flag][k], out[flag][k, :len(st)].numpy()), (flag, k)


def _export_rows(path) -> list[tuple[dict, tuple]]:
    out = []
    for line in path.read_text().splitlines():
        d = json.loads(line)
        out.append((d, (d["inference_logprobs"], d["trainer_logprobs"], d["loss_mask"], d["advantages"])))
    return out


@pytest.mark.parametrize("path", EXPORTS, ids=lambda p: p.parts[-4])
def test_prime_rl_exports_own_masks_and_ratios(path):
    """The export's is_masked* columns (prime-rl's own writer, DefaultLossConfig) are ours, no torch needed;
    a line written under IPOLossConfig has them null and is left out."""
    lines = _export_rows(path)
    checked = flagged = 0
    for d, row in lines:
        mine = C.correct([row], "prime_rl_dppo")
        ratio = np.array([NAN if v is None else v for v in d["importance_ratio"]], dtype=np.float64)
        m = np.array(d["loss_mask"], bool)
        ok = m & ~np.isnan(ratio)
        np.testing.assert_allclose(mine.ratio[0][ok], ratio[ok], rtol=TOKEN_RTOL, atol=0)
        if d["is_masked"][0] is None:
            continue
        assert (mine.state[0] == C.MASKED).tolist() == d["is_masked"]
        assert mine.flags["is_masked_high"][0].tolist() == d["is_masked_high"]
        assert mine.flags["is_masked_low"][0].tolist() == d["is_masked_low"]
        checked += 1
        flagged += sum(d["is_masked"])
    # both files hold a DefaultLossConfig line; the newer one has tokens masked both ways (SOURCES.md)
    assert checked and (flagged >= 2 or path.parts[-4] == "wfa21395a")


@pytest.mark.parametrize("path", EXPORTS, ids=lambda p: p.parts[-4])
def test_prime_rl_exports_through_verl_and_icepop(torch, oracles, path):
    rows = [r for _, r in _export_rows(path)]
    for level in ("token", "sequence"):
        w, clipped, m = _verl_is(torch, oracles, rows, level, 1.5)
        _same(C.correct(rows, "verl", is_level=level, is_threshold=1.5).weight, w, rows,
              TOKEN_RTOL if level == "token" else SEQ_RTOL)
    s, t, m, _ = _pad(torch, rows)
    for opt, thr in (("token_k1", "0.5_2.0"), ("seq_mean_k1", "0.9_1.1"), ("seq_max_k3", 0.5)):
        keep, _ = oracles.verl.compute_rollout_rejection_mask(t - s, m, opt, thr)
        mine = C.correct(rows, "verl", is_level=None, rs=opt, rs_threshold=thr)
        for k, st in enumerate(mine.state):
            trained = m[k, :len(st)].bool().numpy()
            assert np.array_equal(st[trained] != C.MASKED, keep[k, :len(st)].bool().numpy()[trained]), (opt, k)
    tensors = [[torch.tensor([NAN if v is None else v for v in r[i]], dtype=torch.float32) for r in rows]
               for i in (1, 0, 3)]
    _, out = oracles.icepop.compute_loss(*tensors, [torch.tensor(r[2], dtype=torch.bool) for r in rows],
                                         SimpleNamespace(**C.DEFAULTS["prime_rl_icepop"], kl_tau=0.0), 1)
    mine = C.correct(rows, "prime_rl_icepop")
    trained = np.concatenate(mine.mask)
    assert np.array_equal(np.concatenate(mine.state)[trained] == C.MASKED, out["is_masked"].bool().numpy())


def test_trl_is_importance_pys_own_result():
    rows = [r[:3] for r in _hand_rows()["both-bounds"]]
    for mode in IS.MODES:
        res = IS.importance(rows, mode, 0.5, 2.0)
        mine = C.correct(rows, "trl", mode=mode, clip_min=0.5, clip_max=2.0)
        hit = C.CLIPPED if mode.endswith("truncate") else C.MASKED
        for k in range(len(rows)):
            assert np.array_equal(mine.weight[k], res.ratio[k], equal_nan=True)
            assert np.array_equal(mine.state[k][res.mask[k]] == hit, res.changed(k)[res.mask[k]])


def test_counts_and_disagreement_hand_worked():
    """Ratios exp(t − s): row 0 = [e^2, e^-2, 1] trained, row 1 = [e^0.1] and an untrained token."""
    rows = [([-2.0, -1.0, -0.5], [0.0, -3.0, -0.5], [1, 1, 1]), ([-1.0, -1.0], [-0.9, 5.0], [1, 0])]
    tis = C.correct(rows, "tis")  # verl token IS, truncate at 2: e^2 clipped
    band = C.correct(rows, "icepop", token_mask_low=0.5, token_mask_high=2.0)  # e^2 and e^-2 masked
    assert C.counts(tis) == {"tokens": {"kept": 3, "clipped": 1, "masked": 0, "total": 4},
                             "sequences": {"kept": 1, "clipped": 1, "masked": 0, "total": 2}}
    assert C.counts(band) == {"tokens": {"kept": 2, "clipped": 0, "masked": 2, "total": 4},
                              "sequences": {"kept": 1, "clipped": 0, "masked": 1, "total": 2}}
    assert tis.weight[0].tolist() == [2.0, pytest.approx(math.exp(-2), rel=1e-7), 1.0]
    d = C.disagree(tis, band)
    assert d["tokens"] == 2 and d["sequences"] == 1 and d["pairs"] == {"clipped/masked": 1, "kept/masked": 1}
    assert d["per_token"][0].tolist() == [True, True, False] and d["per_token"][1].tolist() == [False, False]
    assert C.disagree(tis, tis)["tokens"] == 0
    with pytest.raises(ValueError, match="same rows"):
        C.disagree(tis, C.correct(rows[:1], "tis"))


def test_bad_input_is_refused_by_name():
    rows = [([-1.0], [-1.0], [1])]
    for method, params, msg in (("nope", {}, "unknown correction method"), ("verl", {"x": 1}, "no parameter x"),
                                ("verl", {"is_level": "geometric"}, "Invalid rollout_is"),
                                ("verl", {"is_threshold": 0}, "must be positive"),
                                ("prime_rl_icepop", {"token_mask_low": 9.0}, "must be less than"),
                                ("prime_rl_dppo", {}, "advantage's sign"), ("trl", {"mode": "x"}, "unknown")):
        with pytest.raises(ValueError, match=msg):
            C.correct(rows, method, **params)
    with pytest.raises(ValueError, match="differ in length"):
        C.correct([([-1.0], [-1.0, -2.0], [1])], "tis")
    assert C.correct(rows, "prime_rl_dppo", advantage=-1.0).state[0].tolist() == [C.KEPT]


def test_hand_rows_reach_every_bound():
    """The fixtures really clip and mask both ways in every method (else the comparisons above prove little)."""
    rows = _hand_rows()["both-bounds"]
    assert (np.concatenate(C.correct(rows, "tis").state) == C.CLIPPED).any()
    band = C.correct(rows, "icepop")
    dppo = C.correct(rows, "prime_rl_dppo")
    for c in (band, dppo):
        for flag in ("is_masked_low", "is_masked_high"):
            assert np.concatenate(c.flags[flag]).any(), (c.method, flag)
    geo = C.correct(rows, "geometric")
    assert C.counts(geo)["sequences"]["masked"] and C.counts(geo)["sequences"]["kept"]


@pytest.mark.slow
def test_bundled_sample_rescored_rows_equal_each_projects_code(torch, oracles):
    """qwen3-tiny rescored by tiny-qwen3 (float32): the rows the mismatch lab shows, through every oracle.
    Advantages: none in a rescore; prime-rl's DPPO masks are checked under either sign."""
    from test_importance import _rescored

    rows = IS.batch_from_rescore(_rescored("qwen3-tiny", "tiny-qwen3", "float32"))
    assert rows and sum(sum(m) for *_, m in rows)
    d = [t - s for s_, t_, m_ in rows for s, t, m in zip(s_, t_, m_) if m]
    lo, hi = math.exp(float(np.quantile(d, 0.1))), math.exp(float(np.quantile(d, 0.9)))  # bounds both hit
    for level in ("token", "sequence"):
        w, _, _ = _verl_is(torch, oracles, rows, level, hi)
        _same(C.correct(rows, "verl", is_level=level, is_threshold=hi).weight, w, rows,
              TOKEN_RTOL if level == "token" else SEQ_RTOL)
    s, t, m, _ = _pad(torch, rows)
    for opt, thr in (("token_k1", f"{lo}_{hi}"), ("seq_mean_k1", "0.99_1.01"), ("token_k3", 0.01)):
        keep, _ = oracles.verl.compute_rollout_rejection_mask(t - s, m, opt, thr)
        mine = C.correct(rows, "verl", is_level=None, rs=opt, rs_threshold=thr)
        for k, st in enumerate(mine.state):
            trained = m[k, :len(st)].bool().numpy()
            assert np.array_equal(st[trained] != C.MASKED, keep[k, :len(st)].bool().numpy()[trained]), (opt, k)
    for sign in (1.0, -1.0):
        adv = [(*r, [sign] * len(r[0])) for r in rows]
        s, t, m, a = _pad(torch, adv)
        out = oracles.dppo._compute_export_tensors({"inference_logprobs": s, "loss_mask": m.bool(), "advantages": a},
                                                   t, oracles.dppo.DefaultLossConfig(0.05, 0.05))
        mine = C.correct(adv, "prime_rl_dppo", dppo_mask_low=0.05, dppo_mask_high=0.05)
        for k, st in enumerate(mine.state):
            assert np.array_equal(st == C.MASKED, out["is_masked"][k, :len(st)].numpy()), (sign, k)
    tensors = [[torch.tensor(r[i], dtype=torch.float32) for r in rows] for i in (1, 0)]
    _, out = oracles.icepop.compute_loss(*tensors, [torch.zeros(len(r[0])) for r in rows],
                                         [torch.tensor(r[2], dtype=torch.bool) for r in rows],
                                         SimpleNamespace(**{**C.DEFAULTS["prime_rl_icepop"], "token_mask_low": lo,
                                                            "token_mask_high": hi}, kl_tau=0.0), 1)
    mine = C.correct(rows, "prime_rl_icepop", token_mask_low=lo, token_mask_high=hi)
    trained = np.concatenate(mine.mask)
    assert np.array_equal(np.concatenate(mine.state)[trained] == C.MASKED, out["is_masked"].bool().numpy())
    assert 0 < C.counts(mine)["tokens"]["masked"] < C.counts(mine)["tokens"]["total"]
