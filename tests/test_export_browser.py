"""The offline export in real chromium, opened from ``file://`` with every network request blocked
(``page.route``) and a check that none was even attempted: a bundled sample, a deck, presenter keys
and notes, and the hostile corpus (nothing executes).

Expected token values come from the capture's own ``trace.json``, read here with ``json`` (not
through our reader): each output token's id, its bytes as text, and its logprob.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from captures import XSS, write_hostile_everywhere
from test_hostile_browser import GUARD
from viewer.cli import main
from viewer.config import SAMPLE_DIR

pytestmark = pytest.mark.browser

# The app's guard (tests/test_hostile_browser.py), with one change: the export carries its data in
# <script type="application/json"> tags, which never run (read with textContent); any other script
# element with a payload is still flagged, and the test counts the page's runnable scripts too.
_APP_CHECK = "if ((tag === 'script' || tag === 'iframe')"
assert _APP_CHECK in GUARD
EXPORT_GUARD = GUARD.replace(_APP_CHECK, "if (((tag === 'script' && el.type !== 'application/json') || tag === 'iframe')")

READY = "document.body.dataset.ready === '1'"
ROOT = "#token-view .ri-tv"


def _export(tmp: Path, *argv) -> Path:
    out = tmp / "out.html"
    assert main(["export", *map(str, argv), "-o", str(out)]) == 0
    return out


def _offline(page, html: Path) -> list[str]:
    """Open ``html`` with every request but the file itself refused; returns every URL asked for."""
    url = html.resolve().as_uri()
    asked: list[str] = []

    def route(r):
        asked.append(r.request.url)
        (r.continue_() if r.request.url == url else r.abort())

    page.route("**/*", route)
    page.goto(url)
    page.wait_for_function(READY, timeout=30000)
    return asked


def _visible(s: str) -> str:
    """What the tooltip shows for a token's text (spaces as ␣, newlines as ↵, tabs as →): written
    out here for the plain characters the checked tokens hold."""
    return s.replace(" ", "␣").replace("\n", "↵").replace("\t", "→")


def _hover_pos(page, pos: int) -> str:
    span = page.evaluate_handle(
        "(i) => { const s = [...document.querySelectorAll('#token-view .tk')].find(e => e._i === i);"
        " if (s) s.scrollIntoView({block: 'center'}); return s || null; }", pos).as_element()
    assert span is not None, f"no span for position {pos}"
    span.hover()
    page.wait_for_function(f"document.querySelector('{ROOT}').dataset.hover === '{pos}'")
    return page.locator("#token-view .ri-tip").text_content()


def _hover_matches_trace(page, rec: dict) -> int:
    """Hover output tokens of the turn shown; each tooltip's id, text and logprob are the trace record's."""
    p, checked = len(rec["prompt_token_ids"]), 0
    for j in (0, 1, 2, 5, 8, 13):
        entry = rec["logprobs"][j]
        try:
            text = bytes(entry["bytes"]).decode("utf-8")
        except UnicodeDecodeError:
            continue  # part of a character: its text is shown escaped, not compared here
        if not text.isprintable() and text.strip(" \n\t"):
            continue
        tip = _hover_pos(page, p + j)
        assert f"id {rec['completion_token_ids'][j]}" in tip.split("\n")[0]
        assert f'text "{_visible(text)}"' in tip
        assert f"logprob {entry['logprob']:.4f}" in tip
        checked += 1
    return checked


def test_exported_sample_opens_offline_and_hover_matches_trace(page, tmp_path):
    sample = SAMPLE_DIR / "qwen3-tiny"
    trace = json.loads((sample / "trace.json").read_text())
    html = _export(tmp_path, sample)
    asked = _offline(page, html)
    checked = 0
    for index in (1, 2):
        rec = trace[index]  # the trace's records in order: turn index k is record k
        page.locator(f".ri-x-turns tr[data-turn='{index}']").click()
        page.wait_for_function(f"document.querySelector('{ROOT}').dataset.turn === '{index}'")
        p = len(rec["prompt_token_ids"])
        assert page.locator(ROOT).get_attribute("data-prompt") == str(p)
        checked += _hover_matches_trace(page, rec)
    assert checked >= 6
    # the plot: one point per output token with a logprob; a click selects that token
    n_out = len(trace[2]["completion_token_ids"])
    assert page.locator("#ri-x-plot svg").get_attribute("data-points") == str(n_out)
    box = page.locator("#ri-x-plot svg").bounding_box()
    page.mouse.click(box["x"] + 40 / 1000 * box["width"] + 1, box["y"] + box["height"] / 2)  # the first point
    p2 = len(trace[2]["prompt_token_ids"])
    page.wait_for_function(f"document.querySelector('{ROOT}').dataset.selected === '{p2}-{p2}'")
    # conversation of the turn shown, and nothing but the file itself was asked for
    assert page.locator("#c-r0-2").is_visible() and not page.locator("#c-r0-1").is_visible()
    assert asked == [html.resolve().as_uri()]


def _notes_capture(tmp: Path) -> tuple[Path, list[dict]]:
    cap = tmp / "cap"
    shutil.copytree(SAMPLE_DIR / "qwen3-tiny", cap)
    trace = json.loads((cap / "trace.json").read_text())
    p1 = len(trace[1]["prompt_token_ids"])
    ids1 = trace[1]["prompt_token_ids"] + trace[1]["completion_token_ids"]
    notes = [{"id": "n1", "turn": 1, "tok": [p1, p1 + 2], "text": "the first output tokens",
              "anchor": ids1[p1:p1 + 3]},
             {"id": "n2", "turn": 2, "tok": [10, 12], "text": "a prompt range of turn 2", "anchor": []},
             {"id": "old", "turn": 9, "tok": [1, 2], "text": "a turn that is gone", "anchor": []}]
    (cap / "notes.json").write_text(json.dumps({"version": 1, "source": "", "notes": notes}))
    return cap, notes


def test_presenter_keys_move_turns_and_notes(page, tmp_path):
    cap, notes = _notes_capture(tmp_path)
    html = _export(tmp_path, cap, "--present")
    asked = _offline(page, html)
    page.wait_for_function("document.body.classList.contains('ri-present')")
    turn = lambda: page.locator(ROOT).get_attribute("data-turn")  # noqa: E731
    assert turn() == "1"  # opens on the first trained agent turn, as the app does
    page.keyboard.press("ArrowRight")
    page.wait_for_function(f"document.querySelector('{ROOT}').dataset.turn === '2'")
    assert "turn 2" in page.locator(".ri-pr-title").text_content()
    page.keyboard.press("ArrowLeft")
    page.wait_for_function(f"document.querySelector('{ROOT}').dataset.turn === '1'")
    # j moves the token cursor (the presenter's own key, in the app's presenter.js)
    page.keyboard.press("j")
    page.wait_for_function(f"document.querySelector('{ROOT}').dataset.selected !== undefined")
    # n / N walk the notes: the turn, the selected range and the callout follow; the flagged note is skipped
    for key, want in (("n", notes[0]), ("n", notes[1]), ("Shift+N", notes[0])):
        page.keyboard.press(key)
        a, b = want["tok"]
        page.wait_for_function(f"document.querySelector('{ROOT}').dataset.selected === '{a}-{b}'")
        assert turn() == str(want["turn"]) and page.evaluate("document.body.dataset.note") == want["id"]
        assert want["text"] in page.locator("#ri-x-callout").text_content()
        assert page.locator("#token-view .tk.ri-x-nm").count() == b - a + 1  # the note's tokens marked
    page.keyboard.press("Escape")
    page.wait_for_function("!document.body.classList.contains('ri-present')")
    assert "flagged: turn 9 is not in this rollout" in page.locator(".ri-x-notes").text_content()
    assert asked == [html.resolve().as_uri()]


def test_exported_deck_opens_offline_and_walks_its_steps(page, tmp_path):
    deck = {"version": 1, "title": "Retokenisation", "steps": [
        {"source": "sample:qwen3-tiny", "turn": 1, "title": "A clean turn"},
        {"source": "sample:qwen3-tiny", "turn": 2, "tok": [10, 12], "mode": "logprob", "note": "pieces"},
        {"source": "sample:qwen3-tiny", "view": "drift", "turn": 2},
        {"source": "sample:qwen3-tiny", "view": "compare", "compare": "sample:smollm2"},
        {"source": "sample:smollm2", "turn": 1, "mode": "drift", "title": "SmolLM2"}]}
    (tmp_path / "deck.json").write_text(json.dumps(deck))
    html = _export(tmp_path, "--deck", tmp_path / "deck.json", "--present")
    asked = _offline(page, html)
    page.wait_for_function("document.body.classList.contains('ri-present')")
    on_mode = "document.querySelector('#token-view .ri-modes button.on')?.dataset.mode"
    assert page.locator(ROOT).get_attribute("data-turn") == "1"
    assert "A clean turn" in page.locator("#ri-x-callout").text_content()
    trace = json.loads((SAMPLE_DIR / "qwen3-tiny" / "trace.json").read_text())
    assert _hover_matches_trace(page, trace[1]) >= 3
    page.keyboard.press("ArrowRight")  # step 2: turn 2, tokens 10-12 selected, logprob colours
    page.wait_for_function(f"document.querySelector('{ROOT}').dataset.selected === '10-12'")
    assert page.evaluate(on_mode) == "logprob" and "pieces" in page.locator("#ri-x-callout").text_content()
    page.keyboard.press("ArrowRight")  # step 3: the drift report, static
    page.wait_for_function("document.body.dataset.step === '2'")
    assert page.locator("#s-2 .ri-drift[data-turn='2']").is_visible() and not page.locator("#token-view").is_visible()
    page.keyboard.press("ArrowRight")  # step 4: the compare report
    page.wait_for_function("document.body.dataset.step === '3'")
    assert page.locator("#s-3 .ri-cmp").is_visible()
    page.keyboard.press("ArrowRight")  # step 5: another rollout, back in mask colours
    page.wait_for_function("document.body.dataset.step === '4'")
    page.wait_for_function(f"document.querySelector('{ROOT}').dataset.turn === '1'")
    assert page.evaluate(on_mode) == "mask" and "SmolLM2" in page.locator("#ri-x-callout").text_content()
    assert "show-drift" in page.locator(ROOT).get_attribute("class")  # drift mode: mask colours, marks on
    page.keyboard.press("ArrowLeft")  # back to the compare step, then step 2 again: marks off there
    page.keyboard.press("ArrowLeft")
    page.keyboard.press("ArrowLeft")
    page.wait_for_function("document.body.dataset.step === '1'")
    assert "show-drift" not in page.locator(ROOT).get_attribute("class")
    assert asked == [html.resolve().as_uri()]


def test_hostile_export_executes_nothing(page, tmp_path):
    seen = {"dialogs": [], "errors": []}
    page.on("dialog", lambda d: (seen["dialogs"].append(d.message), d.dismiss()))
    page.on("pageerror", lambda e: seen["errors"].append(str(e)))
    page.add_init_script(EXPORT_GUARD)
    cap = write_hostile_everywhere(tmp_path / "cap <img src=x onerror=alert('dir')>")
    n = len(json.loads((cap / "trace.json").read_text())[0]["completion_token_ids"])
    (cap / "notes.json").write_text(json.dumps({"version": 1, "notes": [
        {"id": "x1", "turn": 0, "tok": [1, 3], "text": " ".join(XSS)}]}))
    html = _export(tmp_path, cap)
    raw = html.read_text()
    for tag in ("<script>alert", "<img src=x", "<svg/onload", "<iframe", "<b onclick"):  # escaped in the file itself
        assert tag not in raw, tag
    asked = _offline(page, html)
    p = int(page.locator(ROOT).get_attribute("data-prompt"))
    for j in range(0, n, max(1, n // 25)):
        _hover_pos(page, p + j)
    page.locator("#token-view button[data-mode=logprob]").click()
    page.keyboard.press("n")
    assert XSS[2] in page.locator("#ri-x-callout").text_content()  # the note's text, as text
    assert XSS[0] in page.locator(".ri-x-head").text_content()  # the hostile model name, as text
    assert XSS[2] in page.locator("#c-r0-0").text_content()
    box = page.locator("#ri-x-plot svg").bounding_box()
    for fx in (0.1, 0.5, 0.9):
        page.mouse.move(box["x"] + box["width"] * fx, box["y"] + box["height"] / 2)
    page.locator("#token-view .ri-present-btn").click()
    page.keyboard.press("d")
    page.keyboard.press("j")
    bad = page.evaluate("window.__riBad")
    assert bad == [] and seen["dialogs"] == [] and seen["errors"] == [], (bad, seen)
    assert "PWNED" not in page.title() and asked == [html.resolve().as_uri()]
    runnable = page.evaluate("[...document.scripts].filter(s => s.type !== 'application/json').map(s => s.text.slice(0, 30))")
    assert runnable == ["function riTokenView(element, "]  # ours, the one the page's CSP names by hash


def test_download_as_html_exports_what_is_on_screen(page, app_url, tmp_path):
    page.goto(f"{app_url}/?source=sample:qwen3-tiny&turn=2")
    page.wait_for_function(f"document.querySelector('{ROOT}')?.dataset.turn === '2'", timeout=60000)
    p = int(page.locator(ROOT).get_attribute("data-prompt"))
    _hover_pos(page, p + 3)
    page.evaluate("(i) => [...document.querySelectorAll('#token-view .tk')].find(e => e._i === i).click()", p + 3)
    page.keyboard.down("Shift")
    page.evaluate("(i) => [...document.querySelectorAll('#token-view .tk')].find(e => e._i === i)"
                  ".dispatchEvent(new MouseEvent('click', {bubbles: true, shiftKey: true}))", p + 6)
    page.keyboard.up("Shift")
    page.wait_for_function(f"document.querySelector('{ROOT}').dataset.selected === '{p + 3}-{p + 6}'")
    page.locator("#token-view button[data-mode=logprob]").click()
    with page.expect_download(timeout=60000) as dl:  # the button itself downloads (issue 41)
        page.locator("#export-html-btn").click()
    html = tmp_path / "view.html"
    dl.value.save_as(html)
    page.unroute("**/*")
    asked = _offline(page, html)
    assert page.locator(ROOT).get_attribute("data-turn") == "2"
    assert page.locator(ROOT).get_attribute("data-selected") == f"{p + 3}-{p + 6}"
    assert page.evaluate("document.querySelector('#token-view .ri-modes button.on').dataset.mode") == "logprob"
    assert asked == [html.resolve().as_uri()]
