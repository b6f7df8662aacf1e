"""The HTML builder escapes everything; the token payload is inert JSON."""
import json
from html.parser import HTMLParser

from hostile import HOSTILE
from viewer import render
from viewer.rollout import Problem, Rollout, TopLogprob, Turn
from viewer.tokens import TurnTokens
from tv_payload import expand


def _turn(texts):
    n = len(texts)
    return Turn(index=1, call=2, trained=True, prompt_ids=[1, 2], output_ids=list(range(10, 10 + n)),
                logprobs=[-0.5] * n, mask=[1] * n,
                top_logprobs=[[TopLogprob(10 + i, "x", -0.5), TopLogprob(99, None, -1.0)] for i in range(n)],
                messages=[{"role": "system", "content": HOSTILE[0]},
                          {"role": "user", "content": "\n".join(HOSTILE)},
                          {"role": "assistant", "content": HOSTILE[2],
                           "tool_calls": [{"id": HOSTILE[1], "type": "function",
                                           "function": {"name": HOSTILE[10], "arguments": json.dumps({"x": HOSTILE[5]})}}]},
                          {"role": "tool", "tool_call_id": HOSTILE[3], "content": HOSTILE[4]}],
                tools=[{"type": "function", "function": {"name": HOSTILE[2], "description": HOSTILE[0],
                                                         "parameters": {"type": "object", "properties": {HOSTILE[5]: {}}}}}],
                response={"role": "assistant", "content": HOSTILE[5], "reasoning": HOSTILE[11]},
                finish_reason=HOSTILE[6])


class _Tags(HTMLParser):
    """Collects what a browser would build: tag names and attribute names."""

    def __init__(self, html):
        super().__init__()
        self.bad = []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "img", "svg", "iframe", "object", "embed"):
            self.bad.append(tag)
        self.bad += [f"{tag}[{k}]" for k, _ in attrs if k.startswith("on") or k in ("src", "srcdoc", "href")]


def live_markup(html):
    return _Tags(html).bad


def test_the_checker_itself_catches_unescaped_markup():
    assert live_markup(HOSTILE[2]) == ["img", "img[src]", "img[onerror]"]
    assert live_markup(f'<b title="{HOSTILE[1]}">') != []


def test_esc_escapes_quotes_and_tags():
    assert render.esc('<a href="x">\'') == "&lt;a href=&quot;x&quot;&gt;&#x27;"
    assert render.esc(None) == ""


def test_conversation_html_has_no_live_markup_from_data():
    html = render.conversation_html(_turn(HOSTILE))
    assert live_markup(html) == []
    # the data is there, visibly, in escaped form
    assert "&lt;script&gt;document.title=&#x27;PWNED&#x27;&lt;/script&gt;" in html
    assert "${Object.assign" in html  # harmless as text: not inside a template


def test_task_and_problems_html_escape():
    r = Rollout(source=HOSTILE[2], format="capture", instruction=HOSTILE[0], visible_tests=HOSTILE[10],
                held_out_tests=[{"input": HOSTILE[1], "output": HOSTILE[5]}], summary={"x": HOSTILE[11]},
                reward=0.5, problems=[Problem(HOSTILE[2], HOSTILE[1], HOSTILE[0])])
    for html in (render.task_html(r), render.problems_html(r.problems), render.rollout_header(r, HOSTILE[0])):
        assert live_markup(html) == []


def test_token_payload_is_inert_json_that_round_trips():
    turn = _turn(HOSTILE)
    tt = TurnTokens(ids=turn.prompt_ids + turn.output_ids, texts=["a", "b"] + HOSTILE,
                    special=[False] * (2 + len(HOSTILE)), prompt_len=2, exact_text=True, alt_texts={99: HOSTILE[0]})
    s = render.token_view_payload(turn, tt, render.ViewOptions(low=-2.5, context_tail=512))
    assert "<" not in s  # no tag can start anywhere in the payload
    d = expand(s)
    assert d["t"][2:] == HOSTILE  # exact text survives for textContent
    assert d["k"] == [0, 0] + [1] * len(HOSTILE)
    assert d["alt"]["99"] == HOSTILE[0]
    assert d["top"]["2"] == [[10, -0.5], [99, -1.0]]


def test_token_payload_kinds_follow_mask_and_untrained_turns():
    turn = Turn(index=0, call=1, trained=False, prompt_ids=[5], output_ids=[6, 7, 8],
                logprobs=[-0.1, None, float("nan")], mask=[1, 0, 1])
    tt = TurnTokens([5, 6, 7, 8], ["p", "a", "b", "c"], [True, False, False, False], 1, True)
    d = expand(render.token_view_payload(turn, tt, render.ViewOptions(low=-2.5, context_tail=0, focus=(2, 3),
                                                                      mode="logprob")))
    assert d["k"] == [0, 1, 2, 1]
    assert d["lp"] == [None, -0.1, None, None]  # NaN never reaches JSON (it would be invalid)
    assert d["sp"] == [0] and d["trained"] is False and d["focus"] == [2, 3] and d["mode"] == "logprob"


# --------------------------------------------------------------------------------------
# Drift section (issue 4): every check's HTML escapes hostile text; payloads stay inert
# --------------------------------------------------------------------------------------

def _hostile_drift_rollout(tok):
    """Two agent turns built from hostile text with the real Qwen3 tokenizer and template.

    Turn 0's output spells ``<tool_call>`` as pieces (round trip: special_token) around
    hostile text; turn 1's prompt re-renders turn 0 (prefix broken there). The second
    turn's stored prompt gets one hostile token appended so the re-render differs too.
    """
    from viewer.tokenizer import render_prompt_ids

    system = {"role": "system", "content": HOSTILE[0]}
    user = {"role": "user", "content": "\n".join(HOSTILE)}
    p0 = render_prompt_ids(tok, [system, user])
    pieces = [tok.convert_tokens_to_ids(x) for x in ("<", "tool", "_call", ">")]
    text = " ".join(HOSTILE)
    o0 = pieces + tok.encode(text, add_special_tokens=False) + [151645]
    answer = {"role": "assistant", "content": "<tool_call>" + text}
    p1 = render_prompt_ids(tok, [system, user, answer, {"role": "user", "content": HOSTILE[5]}])
    p1_stored = p1 + tok.encode(HOSTILE[2], add_special_tokens=False)
    t0 = Turn(index=0, call=0, trained=True, prompt_ids=p0, prompt_source="engine", output_ids=o0,
              output_source="engine", logprobs=[-0.5] * len(o0), mask=[1] * len(o0), messages=[system, user])
    t1 = Turn(index=1, call=1, trained=True, prompt_ids=p1_stored, prompt_source="engine",
              output_ids=tok.encode(HOSTILE[1], add_special_tokens=False) + [151645], output_source="engine",
              logprobs=[-0.5] * 20, mask=[1] * 20,
              messages=[system, user, answer, {"role": "user", "content": HOSTILE[5]}])
    t1.mask = [1] * len(t1.output_ids)
    return Rollout(source=HOSTILE[2], format="test", turns=[t0, t1])


def test_drift_turn_html_escapes_every_check(qwen3):
    from viewer.drift import turn_report
    from viewer.tokenizer import token_table

    ro = _hostile_drift_rollout(qwen3)
    table = token_table(qwen3)
    for index in (0, 1):
        rep = turn_report(ro, index, qwen3, tokenizer_name=HOSTILE[1])
        html = render.drift_turn_html(rep, table, tokenizer_note=HOSTILE[3])
        assert live_markup(html) == [], index
        assert "<script>document" not in html and "onerror=\"document" not in html
    rep0 = turn_report(ro, 0, qwen3)
    assert rep0.roundtrip.equal is False and rep0.roundtrip.cause == "special_token"
    html0 = render.drift_turn_html(rep0, table)
    assert 'data-check="roundtrip"' in html0 and "&lt;tool_call&gt;" in html0
    rep1 = turn_report(ro, 1, qwen3)
    assert rep1.prefix.status == "broken" and rep1.template.equal is False
    html1 = render.drift_turn_html(rep1, table)
    assert html1.count('class="ri-d-badge ri-d-bad">broken') == 1
    assert "first divergence at prompt token" in html1
    assert 'data-variant="vllm"' in html1 and 'data-variant="plain"' in html1
    cl = rep1.template.vllm.classification
    assert "<img" in cl.a_text and render.esc(cl.a_text) in html1  # the hostile text is shown, escaped


def test_drift_html_without_tokenizer_says_so(qwen3):
    from viewer.drift import turn_report

    rep = turn_report(_hostile_drift_rollout(qwen3), 1, None)
    html = render.drift_turn_html(rep, None)
    assert live_markup(html) == []
    assert 'data-no-tokenizer="1"' in html and "No tokenizer for this rollout" in html
    assert html.count("not checked") >= 2  # round trip and re-render
    assert 'data-check="prefix"' in html and "broken" in html  # ids alone still find the break


def test_drift_identical_turn_says_identical(qwen3):
    from viewer.drift import turn_report

    ids = qwen3.encode("All good here.", add_special_tokens=False) + [151645]
    t = Turn(index=0, call=0, trained=True, prompt_ids=[1, 2], prompt_source="engine", output_ids=ids,
             output_source="engine", logprobs=[-0.1] * len(ids), mask=[1] * len(ids))
    html = render.drift_roundtrip_html(turn_report(Rollout("x", "test", [t]), 0, qwen3).roundtrip)
    assert "identical" in html and "ri-d-ok" in html and "<table" not in html


def test_trainer_row_payload_is_inert_and_follows_mask(qwen3):
    from viewer.drift import choose_spec, trainer_rows
    from viewer.tokenizer import token_table

    ro = _hostile_drift_rollout(qwen3)
    tr = trainer_rows(ro, choose_spec(ro, "trl-message", "all"), qwen3)
    assert tr.error is None
    labelled = render.trainer_rows(tr.rows)
    assert labelled and all(isinstance(lab, str) for lab, _ in labelled)
    for label, row in labelled:
        payload = render.row_view_payload(row, token_table(qwen3), turn=1, label=HOSTILE[0])
        assert "<" not in payload
        d = expand(payload)
        assert len(d["ids"]) == len(d["t"]) == len(d["k"]) == len(d["lp"]) == len(row.input_ids)
        assert [k == 1 for k in d["k"]] == [bool(m) for m in row.completion_mask]
        assert d["output_source"] == HOSTILE[0]
        for i, k in enumerate(d["k"]):
            assert (d["lp"][i] is None) == (k != 1)


def test_drift_scan_html_escapes_names():
    res = {"turns": [], "totals": {"rollouts": 1, "turns": 2, "by_cause": {HOSTILE[0]: 1}}}
    html = render.drift_scan_html(res, note=HOSTILE[2])
    assert live_markup(html) == [] and "&lt;img" in html
