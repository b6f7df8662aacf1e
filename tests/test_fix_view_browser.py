"""The token view's correction modes in chromium (viewer/ui/assets/fix_view.js): the browser's own float32
recomputation of every method gives the server's verdicts; moving a method's slider recolours the painted
tokens to what that method's own code says at the new threshold (verl's and prime-rl's code, tests/oracle/,
run here on torch), the counts line follows, and hovering a token names every method's verdict.

The view runs as the app runs it (token_payload.js, then fix_view.js and token_view.js as one js_on_load
body) on a bare page; the turn is 10,000 trained tokens of one trainer row with ratios spread past every
method's bounds (hand-made values: a rescore result built from them, no model).
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from requires import need
from viewer import render
from viewer.render.export import _asset, _host
from viewer.render.fixes import VIEW_PARAMS
from viewer.render.shell import token_view_template
from viewer.rescore.values import RescoreResult, TurnDelta

pytestmark = pytest.mark.browser

N, PROMPT = 10_000, 20


def rows(n: int = N, seed: int = 40) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    s = -rng.uniform(0.0, 3.0, n).astype(np.float32)
    t = np.minimum(s + rng.normal(0.0, 0.8, n), 0.0).astype(np.float32)
    return s, t


def payload(s: np.ndarray, t: np.ndarray, prompt: int = PROMPT) -> str:
    """The token view's payload of one turn whose outputs are the row's trained tokens, with a rescore."""
    n = len(s)
    td = TurnDelta(0, 0, "FIRST", output_index=list(range(n)), sampler=s.tolist(), trainer=t.tolist(),
                   positions=[prompt + k for k in range(n)], ids=list(range(n)))
    res = RescoreResult("hand-made", "cpu", "float32", 1.0, 0.5, {"mode": "test"}, [td], rows=1)
    total = prompt + n
    toks = render.Tokens(list(range(total)), [f"w{i % 97} " if i % 13 else "x\n" for i in range(total)],
                         [0] * prompt + [1] * n)
    lps = render.Logprobs([None] * prompt + s.tolist())
    return render.token_payload(render.TokenView(toks, render.TurnInfo(0, prompt), lps,
                                                 delta=render.turn_delta(res, 0, prompt, total)))


@pytest.fixture(scope="module")
def torch():
    try:
        import torch
    except ImportError:
        need("torch", "the oracles run verl's and prime-rl's torch code", "requirements-rescore.txt installs it")
    return torch


@pytest.fixture
def view(page):
    css = _asset("app.css")
    page.set_content(f"<style>{css}</style><div id='token-view'>{token_view_template()}</div>")
    page.add_script_tag(content=_asset("token_payload.js")
                        + _host("riTokenView", _asset("fix_view.js") + _asset("token_view.js")))
    return page


def show(page, p: str) -> None:
    page.evaluate("p => riTokenView(document.getElementById('token-view'), () => {}, {value: p}, {}, null, () => {})", p)
    page.wait_for_function("document.querySelector('#token-view .ri-tv').dataset.painted > 0")


def painted(page) -> dict[int, str]:
    """Each painted token's state class (x0 / x1 / x2 / xd / xs), by view position."""
    got = page.evaluate("""() => [...document.querySelectorAll('#token-view .ri-tv-body .tk')]
      .map(s => [s._i, (s.className.match(/\\bx[012ds]\\b/) || [''])[0]])""")
    return {i: c for i, c in got}


def slide(page, method: str, param: str, value: float) -> None:
    page.evaluate("""([m, k, v]) => {
      const inp = document.querySelector(`#token-view .ri-fx-knobs[data-method="${m}"] input[data-param="${k}"]`);
      inp.value = String(v); inp.dispatchEvent(new Event('input'));
    }""", [method, param, value])


def test_the_browser_computes_the_servers_verdicts(view):
    s, t = rows()
    p = payload(s, t)
    show(view, p)
    server = render.decode_payload(p)["delta"]["fix"]["st"]
    mine = view.evaluate("""() => { const fx = document.querySelector('#token-view .ri-tv')._fx;
      return Object.fromEntries(Object.entries(fx.mine).map(([m, st]) => [m, Array.from(st)])); }""")
    for m, st in server.items():
        want = [-1 if c == "." else int(c) for c in st]
        assert mine[m] == want, m
        # (TRL's and verl's defaults are sequence-level: one verdict for the row, its Σ in numpy's summation order)
        assert len(set(want[PROMPT:])) >= 2 or m in ("trl", "verl"), (m, "the token tests keep some and hit others")


def test_a_slider_recolours_to_what_the_methods_own_code_says(view, torch):
    from oracle import prime_rl_dppo, prime_rl_icepop, verl_rollout_corr

    s, t = rows()
    show(view, payload(s, t))
    ts, tt = torch.tensor(s), torch.tensor(t)
    m = torch.ones(1, N, dtype=torch.int64)

    def verl(thr):  # verl: a token's IS weight truncated at thr (token level) → clipped
        raw, _ = verl_rollout_corr.compute_rollout_correction_weights((tt - ts)[None], m, "token", 3.0e38)
        return ["x1" if x else "x0" for x in (raw[0] > thr).tolist()]

    def icepop(high):
        cfg = SimpleNamespace(**{**VIEW_PARAMS["icepop"], "token_mask_high": high, "kl_tau": 0.0})
        _, out = prime_rl_icepop.compute_loss([tt], [ts], [torch.ones(N)], [torch.ones(N, dtype=torch.bool)], cfg, 1)
        return ["x2" if x else "x0" for x in out["is_masked"].bool().tolist()]

    def dppo(high):
        out = prime_rl_dppo._compute_export_tensors(
            {"inference_logprobs": ts[None], "loss_mask": m.bool(), "advantages": torch.ones(1, N)}, tt[None],
            prime_rl_dppo.DefaultLossConfig(dppo_mask_low=0.2, dppo_mask_high=high))
        return ["x2" if x else "x0" for x in out["is_masked"][0].tolist()]

    for method, param, values, oracle, setup in (
            ("verl", "is_threshold", (2.0, 1.2, 5.0), verl, ("is_level", "token")),
            ("icepop", "token_mask_high", (1.5, 3.0), icepop, None),
            ("dppo", "dppo_mask_high", (0.05, 0.5), dppo, None)):
        view.click(f"#token-view .ri-modes button[data-mode={method}]")
        if setup:
            view.select_option(f"#token-view .ri-fx-knobs select[data-param={setup[0]}]", setup[1])
        before = painted(view)
        for v in values:
            slide(view, method, param, v)
            want = oracle(v)
            got = painted(view)
            out = {i: c for i, c in got.items() if i >= PROMPT}
            assert len(out) > 200, "the view painted too few output tokens to check"
            assert all(c == want[i - PROMPT] for i, c in out.items()), (method, v)
            counts = view.inner_text("#token-view .ri-fx-counts")
            n_hit = sum(c != "x0" for c in want)
            assert f"{N - n_hit:,} kept" in counts, (counts, n_hit)
        assert got != before, (method, "the slider changed no colour")


def test_disagree_marks_tokens_two_methods_treat_differently_and_hover_names_each_verdict(view):
    s, t = rows(400)
    p = payload(s, t)
    show(view, p)
    st = render.decode_payload(p)["delta"]["fix"]["st"]
    view.click("#token-view .ri-modes button[data-mode=disagree]")  # TRL against IcePop first
    got = painted(view)
    diff = [i for i in range(PROMPT, PROMPT + 400) if st["trl"][i] != st["icepop"][i]]
    assert diff and all(got[i] == ("xd" if i in diff else "xs") for i in got if i >= PROMPT)
    view.select_option("#token-view select.ri-fx-pick[data-side=b]", "verl")
    got = painted(view)
    assert all(got[i] == ("xd" if st["trl"][i] != st["verl"][i] else "xs") for i in got if i >= PROMPT)
    i = diff[0]
    view.hover(f"#token-view .ri-tv-body .tk >> nth={i}")
    tip = view.inner_text("#token-view .ri-tip")
    names = {"0": "KEPT", "1": "CLIPPED", "2": "MASKED"}
    for m in ("trl", "verl", "icepop", "dppo"):
        assert f"{m}: {names[st[m][i]]}" in tip, (m, tip)


def test_the_app_shows_prime_rls_own_dppo_masks_and_a_slider_moves_them(page, app_url, data_root):
    """End to end: a prime-rl token export (trainer logprobs recorded by prime-rl, no model) opened in the app;
    the dppo mode masks exactly the token prime-rl's writer marked ``is_masked`` (line 0, advantage > 0), and
    raising DPPO's high bound past any probability change unmasks it."""
    import json
    import shutil

    from viewer.config import REPO_ROOT

    src = REPO_ROOT / "tests/data/realworld/prime_rl/w559b447/token_exports/step_0/rank_0.jsonl"
    folder = data_root / "fx-prime" / "token_exports" / "step_0"
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(src, folder / "rank_0.jsonl")
    raw = json.loads(src.read_text().splitlines()[0])
    assert raw["advantages"][raw["loss_mask"].index(True)] > 0
    hit = [i for i, v in enumerate(raw["is_masked"]) if v]
    assert len(hit) == 1
    page.goto(f"{app_url}/?source=fx-prime/token_exports/step_0/rank_0.jsonl&row=0&turn=0")
    page.wait_for_function("document.querySelector('#token-view .ri-tv')?.dataset.painted > 0", timeout=60000)
    page.wait_for_function("document.querySelector('#token-view button[data-mode=dppo]') !== null", timeout=30000)
    page.click("#token-view .ri-modes button[data-mode=dppo]")
    got = painted(page)
    masked = sorted(i for i, c in got.items() if c == "x2")
    assert masked == hit, (masked, hit)
    assert sum(c == "x0" for c in got.values()) > 20
    page.evaluate("""() => {
      const inp = document.querySelector('#token-view .ri-fx-knobs[data-method="dppo"] input[data-param="dppo_mask_high"]');
      inp.value = '1'; inp.dispatchEvent(new Event('input'));
    }""")
    after = painted(page)
    assert after[hit[0]] == "x0" and "0 masked" in page.inner_text("#token-view .ri-fx-counts")
    # the next turn keeps the mode and the threshold the user set (its verdicts recomputed in the browser)
    page.click("#next-turn")
    page.wait_for_function("document.querySelector('#token-view .ri-tv')?.dataset.turn === '1'", timeout=30000)
    knob = '#token-view .ri-fx-knobs[data-method="dppo"] input[data-param="dppo_mask_high"]'
    assert page.locator(knob).input_value() == "1"
    assert page.locator("#token-view .ri-modes button.on").inner_text() == "dppo"
    assert "0 masked" in page.inner_text("#token-view .ri-fx-counts")


RS_CASES = [("token_k1", 1.5), ("token_k1", 1.1), ("token_k2", 0.05), ("token_k3", 0.2), ("seq_sum_k1", 9.0),
            ("seq_sum_k2", 9.0), ("seq_sum_k3", 9.0), ("seq_mean_k1", 1.01), ("seq_mean_k1", 2.0), ("seq_mean_k2", 0.5), ("seq_mean_k3", 0.5),
            ("seq_max_k2", 9.0), ("seq_max_k3", 9.0)]


def test_verls_rejection_options_follow_verls_own_mask(view, torch):
    """Every rollout_rs option of verl (token_k1 = MIS, seq_mean_k1 = the geometric ratio) chosen in the view and
    its threshold slid: the masked tokens are those verl's compute_rollout_rejection_mask rejects (a k1 threshold
    x as verl reads a lone number: the band [1/x, x])."""
    from oracle import verl_rollout_corr

    rows_n = N
    s, t = rows(rows_n, seed=7)
    show(view, payload(s, t))
    view.click("#token-view .ri-modes button[data-mode=verl]")
    view.select_option("#token-view .ri-fx-knobs select[data-param=is_level]", "none")
    lr = (torch.tensor(t) - torch.tensor(s))[None]
    m = torch.ones(1, rows_n, dtype=torch.int64)
    seen = {}
    for opt, x in RS_CASES:
        view.select_option("#token-view .ri-fx-knobs select[data-param=rs]", opt)
        slide(view, "verl", "rs_threshold", x)
        keep, _ = verl_rollout_corr.compute_rollout_rejection_mask(lr, m, opt, x)
        want = ["x0" if k else "x2" for k in keep[0].bool().tolist()]
        got = {i: c for i, c in painted(view).items() if i >= PROMPT}
        assert len(got) >= min(rows_n, 200) and all(c == want[i - PROMPT] for i, c in got.items()), (opt, x)
        seen[(opt, x)] = frozenset(want)
    # the cases decide both ways: each token option splits the row; sequence options keep some rows, mask others
    assert all(v == {"x0", "x2"} for (o, _), v in seen.items() if o.startswith("token"))
    assert {v for (o, _), v in seen.items() if o.startswith("seq")} == {frozenset({"x0"}), frozenset({"x2"})}
