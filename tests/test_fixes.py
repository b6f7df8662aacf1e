"""The token view's correction modes (viewer/render/fixes.py): per view position, what each method does to a
trained token, checked against the producers' own values, never against viewer.rescore.corrections:

* prime-rl's token exports (tests/data/realworld/prime_rl, written by prime-rl's own writer) carry
  ``is_masked`` per token: the view's ``dppo`` mode, given the line's advantage, masks exactly those;
* verl's and prime-rl's code (tests/oracle/, copied verbatim, run on torch) on the same trainer row:
  the ``verl`` mode clips where verl's IS weight is truncated, the ``icepop`` mode masks where prime-rl's
  ``compute_loss`` says ``is_masked``.
And the payload: the modes appear only with a fix block, the block's values are the float32 values (strings
for NaN / ±inf), a refused parameter is named rather than raising.
"""
from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest

from requires import need
from viewer import render
from viewer.config import REPO_ROOT
from viewer.render.fixes import FIX_MODES, VIEW_PARAMS, turn_fixes
from viewer.rescore.recorded import recorded_result
from viewer.rescore.values import RescoreResult, TurnDelta
from viewer.sources import open_dataset

EXPORTS = [REPO_ROOT / "tests" / "data" / "realworld" / "prime_rl" / d / "token_exports" / s / "rank_0.jsonl"
           for d, s in (("w559b447", "step_0"), ("wfa21395a", "step_3"))]


@pytest.fixture(scope="module")
def oracles():
    try:
        import torch
    except ImportError:
        need("torch", "the oracles run verl's and prime-rl's torch code", "requirements-rescore.txt installs it")
    from oracle import prime_rl_icepop, verl_rollout_corr
    return SimpleNamespace(torch=torch, verl=verl_rollout_corr, icepop=prime_rl_icepop)


def _lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def _views(path):
    """(raw line, rollout turn, its fix block with the line's own advantage) for every agent turn."""
    ds = open_dataset(path)
    for row, raw in enumerate(_lines(path)):
        ro = ds.rollout(row)
        res = recorded_result(ro)
        adv = raw["advantages"][raw["loss_mask"].index(True)]
        for t in ro.agent_turns:
            n = len(t.prompt_ids) + len(t.output_ids)
            yield raw, t, turn_fixes(res, t.index, len(t.prompt_ids), n, {"dppo": {"advantage": adv}})


@pytest.mark.parametrize("path", EXPORTS, ids=lambda p: p.parts[-4])
def test_dppo_mode_masks_what_prime_rls_export_masks(path):
    checked = masked = 0
    for raw, t, fix in _views(path):
        assert fix is not None and not fix.get("err")
        st = fix["st"]["dppo"]
        if raw["is_masked"][0] is None:  # a line written under IPOLossConfig: no DPPO columns
            continue
        for i, c in enumerate(st):
            if c == ".":
                assert not (len(t.prompt_ids) <= i and raw["loss_mask"][i] and i > 0), (i, "a trained token left out")
                continue
            # a recorded row holds the whole sequence: view position i is the line's token i
            assert (c == "2") == raw["is_masked"][i], (i, c)
            checked += 1
            masked += c == "2"
    assert checked > 50 and (masked >= 1 or path.parts[-4] == "wfa21395a")


@pytest.mark.parametrize("path", EXPORTS, ids=lambda p: p.parts[-4])
@pytest.mark.parametrize("thr", [1.0005, 1.5])
def test_verl_and_icepop_modes_equal_their_code(oracles, path, thr):
    """The row's trained tokens through verl's compute_rollout_correction_weights (token level, ``thr``) and
    prime-rl's compute_loss (token band 1/thr..thr, no sequence masks)."""
    torch = oracles.torch
    ip = {"token_mask_low": 1 / thr, "token_mask_high": thr, "geo_mask_low": 0.0, "geo_mask_high": 1e30}
    seen = 0
    for raw, t, _ in _views(path):
        lines = _lines(path)
        res = recorded_result(open_dataset(path).rollout(lines.index(raw)))
        n = len(t.prompt_ids) + len(t.output_ids)
        fix = turn_fixes(res, t.index, len(t.prompt_ids), n, {"verl": {"is_level": "token", "is_threshold": thr},
                                                             "icepop": ip})
        pos = [i for i, c in enumerate(fix["st"]["verl"]) if c != "."]
        row = [i for i, m in enumerate(raw["loss_mask"]) if m and i > 0]  # the row's trained tokens
        s = torch.tensor([raw["inference_logprobs"][i] for i in row], dtype=torch.float32)
        tr = torch.tensor([raw["trainer_logprobs"][i] for i in row], dtype=torch.float32)
        m = torch.ones(1, len(row), dtype=torch.int64)
        raw_w, _ = oracles.verl.compute_rollout_correction_weights((tr - s)[None], m, "token", 3.0e38)
        clipped = (raw_w[0] > thr).tolist()
        cfg = SimpleNamespace(**{**VIEW_PARAMS["icepop"], **ip, "kl_tau": 0.0})
        _, out = oracles.icepop.compute_loss([tr], [s], [torch.ones(len(row))], [torch.ones(len(row), dtype=torch.bool)],
                                             cfg, 1)
        masked = out["is_masked"].bool().tolist()
        for i in pos:
            k = row.index(i)
            assert fix["st"]["verl"][i] == ("1" if clipped[k] else "0"), (i, thr)
            assert fix["st"]["icepop"][i] == ("2" if masked[k] else "0"), (i, thr)
            seen += 1
    assert seen > 50


def _result(s, t, prompt=3):
    td = TurnDelta(0, 0, "FIRST", output_index=list(range(len(s))), sampler=list(s), trainer=list(t),
                   positions=[prompt + k for k in range(len(s))], ids=list(range(len(s))))
    return RescoreResult("m", "cpu", "float32", 1.0, 0.5, {"mode": "test"}, [td], rows=1)


def test_payload_has_the_modes_only_with_a_fix_block_and_writes_non_finite_values_as_strings():
    s, t = [-1.0, math.nan, -0.5, -math.inf], [-0.5, -0.2, -0.5, -1.0]
    res = _result(s, t)
    n = 3 + len(s)
    delta = render.turn_delta(res, 0, 3, n)
    fix = delta["fix"]
    assert fix["s"] == [-1.0, "NaN", -0.5, "-Infinity"] and fix["at"] == [3, 4, 5, 6]
    assert all(len(v) == n and v[:3] == "..." for v in fix["st"].values())
    toks = render.Tokens(list(range(n)), [f"t{i}" for i in range(n)], [0, 0, 0, 1, 1, 1, 1])
    got = render.decode_payload(render.token_payload(render.TokenView(toks, render.TurnInfo(0, 3), delta=delta)))
    assert got["modes"] == ["mask", "logprob", "delta", *FIX_MODES] and got["delta"]["fix"]["st"] == fix["st"]
    plain = render.decode_payload(render.token_payload(render.TokenView(toks, render.TurnInfo(0, 3))))
    assert plain["modes"] == ["mask", "logprob"] and "delta" not in plain


def test_a_refused_parameter_is_named_and_the_other_methods_stay():
    fix = turn_fixes(_result([-1.0], [-0.9]), 0, 3, 4, {"icepop": {"token_mask_low": 9.0}})
    assert "icepop" not in fix["st"] and "must be less than" in fix["err"]["icepop"]
    assert fix["st"]["verl"] == "...0"
    assert turn_fixes(_result([-1.0], [-0.9]), 5, 3, 4) is None  # a turn the rescore did not score
