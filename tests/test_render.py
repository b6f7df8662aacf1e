"""The HTML builder escapes everything; the token payload is inert JSON."""
import json
from html.parser import HTMLParser

from hostile import HOSTILE
from viewer import render
from viewer.rollout import Problem, Rollout, TopLogprob, Turn
from viewer.tokens import TurnTokens


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
    s = render.token_view_payload(turn, tt, low=-2.5, context_tail=512)
    assert "<" not in s  # no tag can start anywhere in the payload
    d = json.loads(s)
    assert d["t"][2:] == HOSTILE  # exact text survives for textContent
    assert d["k"] == [0, 0] + [1] * len(HOSTILE)
    assert d["alt"]["99"] == HOSTILE[0]
    assert d["top"]["2"] == [[10, -0.5], [99, -1.0]]


def test_token_payload_kinds_follow_mask_and_untrained_turns():
    turn = Turn(index=0, call=1, trained=False, prompt_ids=[5], output_ids=[6, 7, 8],
                logprobs=[-0.1, None, float("nan")], mask=[1, 0, 1])
    tt = TurnTokens([5, 6, 7, 8], ["p", "a", "b", "c"], [True, False, False, False], 1, True)
    d = json.loads(render.token_view_payload(turn, tt, low=-2.5, context_tail=0, focus=(2, 3), mode="logprob"))
    assert d["k"] == [0, 1, 2, 1]
    assert d["lp"] == [None, -0.1, None, None]  # NaN never reaches JSON (it would be invalid)
    assert d["sp"] == [0] and d["trained"] is False and d["focus"] == [2, 3] and d["mode"] == "logprob"
