"""The token view's payload (viewer/render/payload.py, format in docs/ARCHITECTURE.md): written out
by hand it is what the encoder makes; encoded then decoded it gives back the columns it was made from
(bundled samples and hostile values); read back, its compact columns are the JSON main built from 24
keyword arguments, byte for byte; the decoder refuses what does not add up (the browser's reader
refuses the same: tests/test_token_payload_browser.py); the kind codes are the JS's."""
from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path

import pytest
from tv_payload import broken_variants, expand, hostile_views
from viewer import render
from viewer.config import Settings
from viewer.render.escape import safe_json
from viewer.render.payload import Kind, decode_payload, token_payload
from viewer.rollout import TopLogprob, Turn
from viewer.tokens import TurnTokens

REPO = Path(__file__).resolve().parent.parent
JS = REPO / "viewer" / "ui" / "assets" / "token_view.js"
CSS = REPO / "viewer" / "ui" / "assets" / "app.css"


def test_a_hand_made_turn_gives_the_payload_written_out_here():
    turn = Turn(index=3, call=4, trained=True, prompt_ids=[5, 6], prompt_source="engine", output_ids=[7, 8, 9],
                output_source="engine", logprobs=[-0.5, -1.234567, None], mask=[1, 0, 1],
                top_logprobs=[[TopLogprob(7, "c", -0.5), TopLogprob(42, None, -2.0)], [], []])
    tt = TurnTokens([5, 6, 7, 8, 9], ["<a>", "b", "c", "d", "\n"], [True, False, False, False, True], 2, True,
                    out_of_vocab=[3], alt_texts={42: "z"})
    view = render.ViewOptions(low=-2.5, context_tail=1, page_tokens=10, focus=(2, 4), mode="logprob", note="n",
                              link="source=x&turn=3")
    # worked by hand: prompt = context (0); output mask 1, 0, 1 = trained (1), no gradient (2), trained;
    # logprobs rounded to 4 places, null on the prompt and where none was recorded; empty top-k
    # lists left out; a page is at least 1000 tokens; "<" escaped so no tag can start
    # main's payload (v1), per-position lists:
    main = (r'{"v":1,"turn":3,"trained":true,"kind":"agent","role":"main","prompt_len":2,'
            r'"prompt_source":"engine","output_source":"engine","exact":true,"ids":[5,6,7,8,9],'
            r'"t":["\u003ca>","b","c","d","\n"],"sp":[0,4],"k":[0,0,1,2,1],"lp":[null,null,-0.5,-1.2346,null],'
            r'"top":{"2":[[7,-0.5],[42,-2.0]]},"alt":{"42":"z"},"oov":[3],"low":-2.5,"tail":1,"page":1000,'
            r'"focus":[2,4],"mode":"logprob","modes":["mask","logprob"],"note":"n","link":"source=x&turn=3"}')
    # compact (v3), worked by hand from it: the ids and the texts' lengths as number columns (each
    # number under 32 is one character: A=0, B=1, ..., F=5); the texts as one string; kinds as runs
    # (two 0s, one 1, one 2, one 1); the logprobs as the one run of values, from position 2
    want = (r'{"v":3,"turn":3,"trained":true,"kind":"agent","role":"main","prompt_len":2,'
            r'"prompt_source":"engine","output_source":"engine","exact":true,"ids":"FGHIJ",'
            r'"tx":"\u003ca>bcd\n","tl":"DBBBB","sp":[0,4],"kr":[0,2,1,1,2,1,1,1],"lr":[[2,[-0.5,-1.2346]]],'
            r'"top":{"2":[[7,-0.5],[42,-2.0]]},"alt":{"42":"z"},"oov":[3],"low":-2.5,"tail":1,"page":1000,'
            r'"focus":[2,4],"mode":"logprob","modes":["mask","logprob"],"note":"n","link":"source=x&turn=3"}')
    assert render.token_view_payload(turn, tt, view) == want
    assert safe_json({**expand(want), "v": 1}) == main
    # the same through token_payload's value object, as a caller without a Turn builds it
    tv = render.TokenView(
        render.Tokens([5, 6, 7, 8, 9], ["<a>", "b", "c", "d", "\n"], [0, 0, 1, 2, 1], special=tt.special, oov=[3]),
        render.TurnInfo(3, 2, prompt_source="engine", output_source="engine"),
        render.Logprobs([None, None, -0.5, -1.234567, None], top={"2": [[7, -0.5], [42, -2.0]]}, alt={42: "z"}),
        view)
    assert render.token_payload(tv) == want


def _sample_payloads():
    """The cases of tests/data/token_payloads_main.json, rendered through the value objects (the
    fixture was rendered on main with the keyword-argument calls, before they were removed)."""
    from viewer.drift import turn_report
    from viewer.rescore.values import RescoreResult, TurnDelta
    from viewer.sources import load_source
    from viewer.tokenizer import token_table, tokenizer_for
    from viewer.views import turn_view

    s = Settings()
    for name in ("qwen3-tiny", "smollm2"):
        r = load_source(REPO / "sample_data" / name, s)
        choice = tokenizer_for(r, s)
        table = token_table(choice.tokenizer, choice.name)
        for t in r.turns:
            tv = turn_view(r, t.index, choice.tokenizer, table)
            n = len(tv.tokens.ids)
            td = TurnDelta(turn=t.index, row=0, verdict="FIRST", context="changed", context_at=2,
                           output_index=[0, 1], sampler=[-1.0, -2.0], trainer=[-1.5, -2.25])
            res = RescoreResult("tiny-qwen3", "cpu", "float32", 1.0, 0.2, {"mode": "trl-contract"}, [td], seconds=1.0)
            variants = {
                "plain": (render.ViewOptions.from_settings(s), None),
                "view": (render.ViewOptions(low=-3.0, context_tail=7, page_tokens=1234, focus=(3, 5), mode="logprob",
                                            note=tv.note, link=f"source=sample%3A{name}&turn={t.index}"), None),
                "delta": (render.ViewOptions(low=s.low_logprob, context_tail=s.context_tail, mode="delta"),
                          render.turn_delta(res, t.index, tv.tokens.prompt_len, n)),
            }
            for v, (view, delta) in variants.items():
                yield f"{name}/turn{t.index}/{v}", render.token_view_payload(tv.turn, tv.tokens, view, delta)
            try:
                rep = turn_report(r, t.index, choice.tokenizer, tokenizer_name=choice.name)
            except KeyError:
                continue
            for k, (label, row) in enumerate(render.trainer_rows(rep.trainer.rows)):
                for tab in ("table", "none"):
                    yield f"{name}/turn{t.index}/row{k}/{tab}", render.row_view_payload(
                        row, table if tab == "table" else None, turn=t.index, label=label,
                        view=render.ViewOptions.from_settings(s))


def _as_main(payload: str) -> str:
    """The compact payload read back into main's per-position lists, as main serialised it."""
    return safe_json({**expand(payload), "v": 1})


def test_bundled_samples_payloads_read_back_byte_identical_to_mains():
    want = json.loads((REPO / "tests" / "data" / "token_payloads_main.json").read_text())["cases"]
    got, sizes = {}, []
    for case, p in _sample_payloads():
        m = _as_main(p)
        got[case] = {"sha256": hashlib.sha256(m.encode()).hexdigest(), "len": len(m)}
        sizes.append((len(p), len(m)))
    assert len(want) > 40 and any("/row" in c for c in want) and any(c.endswith("/delta") for c in want)
    assert got == want
    # and it is smaller: every case, and by a third over all of them (a turn's prompt: 0s and nulls)
    assert all(a < b for a, b in sizes) and sum(a for a, _ in sizes) < 0.67 * sum(b for _, b in sizes)


def test_texts_are_cut_at_utf16_lengths_and_runs_cover_every_position():
    # astral characters (2 UTF-16 units in the browser, 1 in Python), an empty text, a lone prompt,
    # logprob runs broken by a missing value and a NaN
    texts = ["😀", "", "a😀b", "é", "\n", "x"]
    turn = Turn(index=0, call=1, trained=True, prompt_ids=[1], output_ids=[2, 3, 4, 5, 6],
                logprobs=[-0.25, None, -1.0, float("nan"), -2.0], mask=[1, 1, 0, 0, 1])
    tt = TurnTokens([1, 2, 3, 4, 5, 6], texts, [False] * 6, 1, True)
    p = render.token_view_payload(turn, tt, render.ViewOptions())
    d = json.loads(p)
    assert d["tx"] == "😀a😀bé\nx" and d["tl"] == "CAEBBB"  # lengths 2, 0, 4, 1, 1, 1
    assert d["kr"] == [0, 1, 1, 2, 2, 2, 1, 1] and d["lr"] == [[1, [-0.25]], [3, [-1.0]], [5, [-2.0]]]
    e = expand(p)
    assert e["t"] == texts and e["k"] == [0, 1, 1, 2, 2, 1] and e["lp"] == [None, -0.25, None, -1.0, None, -2.0]


def test_number_columns_worked_by_hand():
    # base64url digits A-Z a-z 0-9 - _ (values 0-63); a number's 5-bit groups lowest first, 32 added
    # to every group but its last: 31 = "f"; 32 = 0 (+32: "g") then 1 ("B"); 151644 = 28 + 2·32 +
    # 20·32² + 4·32³ = "8", "i", "0" (60, 34, 52), then "E"; 999999 = 31 + 17·32 + 16·32² + 30·32³
    turn = Turn(index=0, call=1, trained=True, prompt_ids=[0, 31], output_ids=[32, 151644, 999999],
                logprobs=[-1.0, -1.0, -1.0], mask=[1, 1, 1])
    tt = TurnTokens([0, 31, 32, 151644, 999999], ["a"] * 5, [False] * 5, 2, True)
    d = json.loads(render.token_view_payload(turn, tt, render.ViewOptions()))
    assert d["ids"] == "Afg" + "B" + "8i0E" + "_xwe"
    assert expand(d)["ids"] == [0, 31, 32, 151644, 999999]
    # 2**53 - 1, the largest number a browser reads exactly: ten groups of 31 ("_" = 63), then 7
    edge = TurnTokens([2**53 - 1], ["a"], [False], 0, True)
    d = json.loads(render.token_view_payload(Turn(index=0, call=1, output_ids=[2**53 - 1]), edge))
    assert d["ids"] == "_" * 10 + "H" and expand(d)["ids"] == [2**53 - 1]
    # an id outside 0..2**53-1 (a broken file) goes out as the list it is
    for ids in ([5, -1], [5, 2**53]):
        bad = TurnTokens(ids, ["a", "b"], [False, False], 1, True)
        d = json.loads(render.token_view_payload(Turn(index=0, call=1, prompt_ids=ids[:1], output_ids=ids[1:]), bad,
                                                 render.ViewOptions()))
        assert d["ids"] == ids and expand(d)["ids"] == ids


def _sample_views():
    """Every turn of both bundled samples as the token view's values: real ids, texts, logprobs."""
    from viewer.sources import load_source
    from viewer.tokenizer import token_table, tokenizer_for
    from viewer.views import turn_view

    s = Settings()
    for name in ("qwen3-tiny", "smollm2"):
        r = load_source(REPO / "sample_data" / name, s)
        choice = tokenizer_for(r, s)
        table = token_table(choice.tokenizer, choice.name)
        for t in r.turns:
            v = turn_view(r, t.index, choice.tokenizer, table)
            tt, p = v.tokens, v.tokens.prompt_len
            kinds = [0] * p + [1 if m else 2 for m in (list(v.turn.loss_mask) + [0] * len(tt.ids))[:len(tt.ids) - p]]
            yield f"{name}/turn{t.index}", render.TokenView(
                render.Tokens(tt.ids, tt.texts, kinds, special=tt.special, oov=tt.out_of_vocab),
                render.TurnInfo(t.index, p), render.Logprobs([None] * p + list(v.turn.logprobs)))


def test_encoded_then_decoded_gives_back_the_columns():
    views = {**dict(_sample_views()), **hostile_views(browser_safe=False)}
    assert len(views) > 12 and sum(len(v.tokens.ids) for v in views.values()) > 10000
    for name, tv in views.items():
        n = len(tv.tokens.ids)
        lps = (list(tv.logprobs.values) + [None] * n)[:n]
        want = {"ids": list(tv.tokens.ids), "t": list(tv.tokens.texts), "k": list(tv.tokens.kinds),
                # the payload's logprobs: 4 decimals, null where none is or it is not finite
                "lp": [None if v is None or not math.isfinite(v) else round(v, 4) for v in lps],
                "turn": tv.turn.index, "prompt_len": tv.turn.prompt_len,
                "sp": [i for i, s in enumerate(tv.tokens.special or []) if s], "oov": list(tv.tokens.oov)}
        got = decode_payload(token_payload(tv))
        assert {k: got[k] for k in want} == want, name
    assert "huge ids" in views and decode_payload(token_payload(views["huge ids"]))["ids"][:2] == [2**53, 10**30]


def test_a_payload_that_does_not_add_up_is_refused_with_a_message():
    good = token_payload(hostile_views()["texts"])
    assert decode_payload(good)["t"][0] == "😀"
    for name, bad in broken_variants(good).items():
        with pytest.raises(ValueError) as e:
            decode_payload(bad if isinstance(bad, str) else json.dumps(bad))
        assert str(e.value), name
    # and the encoder refuses columns that do not line up rather than write such a payload
    with pytest.raises(ValueError, match="2 ids, 1 texts, 2 kinds"):
        token_payload(render.TokenView(render.Tokens([1, 2], ["a"], [0, 1])))


def _js_kinds() -> dict[str, int]:
    m = re.search(r"const KIND = Object\.freeze\(\{([^}]*)\}\);", JS.read_text())
    assert m, "token_view.js has no KIND block"
    return {k: int(v) for k, v in re.findall(r"([A-Z_]+)\s*:\s*(\d+)", m.group(1))}


def test_the_js_kind_codes_are_pythons():
    assert _js_kinds() == {k.name: k.value for k in Kind} == {"CONTEXT": 0, "TRAINED": 1, "UNTRAINED": 2}


def test_the_js_compares_kinds_by_name_and_the_css_styles_every_kind():
    js = JS.read_text()
    # a kind compared with a bare number would silently disagree if a code changed
    assert re.findall(r"(?:\bk|D\.k\[\w+\])\s*[!=]==?\s*\d", js) == []
    assert re.findall(r"'tk k\d'", js) == []
    css = CSS.read_text()
    assert all(f".tk.k{k.value}" in css and f".run.k{k.value}" in css for k in Kind)
