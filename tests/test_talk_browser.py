"""Notes and decks in the app, in Debian chromium (docs/TALK.md): add / edit / delete a note from a token
selection, its marks in the token view, ``n`` / ``N`` in presenter mode, ``?note=K``, ``?deck=`` walking
→ and ← across two rollouts, hostile note and deck text executing nothing, a deck outside the data root
refused with a clear message.

Expected ids and positions come from the samples' own ``trace.json`` (the viewer numbers the records
0, 1, ... and a turn's token view is the record's prompt ids then its completion ids); notes files and
decks are written here by hand.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from test_hostile_browser import GUARD

pytestmark = pytest.mark.browser

SAMPLES = Path(__file__).resolve().parent.parent / "sample_data"
TV = "#token-view .ri-tv"
PAINTED = f"document.querySelector('{TV}')?.dataset.painted > 0"
HOSTILE = "<img src=x onerror=\"document.title='PWNED'\">${document.title='PWNED'}{{x}}"


def _trace(sample: str, n: int) -> dict:
    return json.loads((SAMPLES / sample / "trace.json").read_text())[n]


P1 = len(_trace("qwen3-tiny", 1)["prompt_token_ids"])  # 6,118: turn 1's first output token
P2 = len(_trace("qwen3-tiny", 2)["prompt_token_ids"])  # 6,236


def _capture(data_root: Path, name: str) -> Path:
    dest = data_root / name
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(SAMPLES / "qwen3-tiny", dest)
    return dest


def _guarded(page):
    seen = {"dialogs": [], "errors": []}
    page.on("dialog", lambda d: (seen["dialogs"].append(d.message), d.dismiss()))
    page.on("pageerror", lambda e: seen["errors"].append(str(e)))
    page.add_init_script(GUARD)
    return seen


def _nothing_ran(page, seen):
    assert page.evaluate("window.__riBad") == [] and seen["dialogs"] == []
    assert page.title() == "Rollout Inspector"


def _wait_sel(page, turn: int, sel: str):
    page.wait_for_function(f"(() => {{ const r = document.querySelector('{TV}');"
                           f" return r && r.dataset.turn === '{turn}' && r.dataset.selected === '{sel}'; }})()",
                           timeout=60000)


def _open_panel(page):
    page.locator("#talk-panel").get_by_text("Notes and deck").first.click()
    page.locator("#note-text textarea").wait_for(state="visible")


def test_add_edit_delete_a_note_with_marks_and_hostile_text(page, app_url, data_root):
    cap = _capture(data_root, "talk-notes")
    seen = _guarded(page)
    page.goto(f"{app_url}/?source=talk-notes&turn=1&tok={P1}-{P1 + 4}")
    _wait_sel(page, 1, f"{P1}-{P1 + 4}")
    _open_panel(page)
    page.locator("#note-text textarea").fill(HOSTILE)
    page.locator("#note-add").click()
    page.wait_for_function(f"document.querySelector('#notes-list')?.textContent.includes('turn 1 · tokens {P1}–{P1 + 4}')",
                           timeout=30000)
    assert page.locator("#note-sel textarea, #note-sel input").first.input_value() == f"1:{P1}-{P1 + 4}"
    # stored beside the capture, anchored on the sampled ids (`<tool_call>` spelled as five pieces)
    doc = json.loads((cap / "notes.json").read_text())
    assert [(n["id"], n["turn"], n["tok"], n["text"]) for n in doc["notes"]] == [("n1", 1, [P1, P1 + 4], HOSTILE)]
    assert doc["notes"][0]["anchor"] == _trace("qwen3-tiny", 1)["completion_token_ids"][:5] == [27, 983, 337, 13429, 29]
    # the text shows as text in the list; the range is marked in the token view (and says so on hover)
    assert HOSTILE in page.locator("#notes-list .ri-note-text").text_content()
    page.wait_for_function(f"document.querySelector('{TV}').dataset.notes === '5'")
    assert page.locator(f"{TV} .tk.nt").evaluate_all("ss => ss.map(s => s._i)") == list(range(P1, P1 + 5))
    page.locator(f"{TV} .tk.nt").first.hover()
    assert f"note: {HOSTILE}" in page.locator(f"{TV} .ri-tip").text_content()

    # edit: the picker holds the note; the new text replaces the old, in the list and the file
    page.locator("#note-text textarea").fill("pieces, not the special token")
    page.locator("#note-edit").click()
    page.wait_for_function("document.querySelector('#notes-list').textContent.includes('pieces, not the special token')",
                           timeout=30000)
    assert json.loads((cap / "notes.json").read_text())["notes"][0]["text"] == "pieces, not the special token"

    # delete: gone from the list, the marks and the file
    page.locator("#note-delete").click()
    page.wait_for_function("document.querySelector('#notes-list').textContent.includes('No notes')", timeout=30000)
    page.wait_for_function(f"document.querySelector('{TV}').dataset.notes === '0'")
    assert json.loads((cap / "notes.json").read_text())["notes"] == []
    _nothing_ran(page, seen)


def _hand_notes(cap: Path) -> None:
    """Three notes by hand: two whose anchors are the trace's ids, one whose anchor does not match."""
    t1, t2 = _trace("qwen3-tiny", 1)["completion_token_ids"], _trace("qwen3-tiny", 2)["completion_token_ids"]
    (cap / "notes.json").write_text(json.dumps({"version": 1, "source": cap.name, "notes": [
        {"id": "pieces", "turn": 1, "tok": [P1, P1 + 4], "text": HOSTILE, "anchor": t1[:5]},
        {"id": "bash", "turn": 2, "tok": [P2, P2 + 2], "text": "the bash call", "anchor": t2[:3]},
        {"id": "moved", "turn": 2, "tok": [P2 + 3, P2 + 4], "text": "written on other ids", "anchor": [1, 2]},
    ]}))


def test_note_link_opens_its_turn_and_range_and_a_changed_anchor_is_flagged(page, app_url, data_root):
    cap = _capture(data_root, "talk-link")
    _hand_notes(cap)
    page.goto(f"{app_url}/?source=talk-link&note=2")
    _wait_sel(page, 2, f"{P2}-{P2 + 2}")
    page.goto(f"{app_url}/?source=talk-link&note=pieces")
    _wait_sel(page, 1, f"{P1}-{P1 + 4}")
    _open_panel(page)
    flagged = page.locator("#notes-list .ri-note-flagged")
    flagged.wait_for()
    assert "moved" in flagged.text_content() and "changed since the note was written" in flagged.text_content()
    assert page.locator("#notes-list .ri-note").count() == 3  # flagged, not dropped


def test_presenter_n_and_N_step_through_notes_with_callouts(page, app_url, data_root):
    cap = _capture(data_root, "talk-present")
    _hand_notes(cap)
    seen = _guarded(page)
    page.goto(f"{app_url}/?source=talk-present&turn=0&present=1")
    page.wait_for_function(PAINTED, timeout=60000)
    page.wait_for_function("document.body.classList.contains('ri-present')")
    page.wait_for_function("document.querySelector('#talk .ri-callout')?.dataset.notes === '3'", timeout=60000)
    page.keyboard.press("n")
    _wait_sel(page, 1, f"{P1}-{P1 + 4}")
    callout = page.locator("#talk .ri-callout")
    page.wait_for_function("document.querySelector('#talk .ri-callout-note.on') !== null")
    assert callout.is_visible() and HOSTILE in callout.text_content()
    page.keyboard.press("n")
    _wait_sel(page, 2, f"{P2}-{P2 + 2}")
    page.wait_for_function("document.querySelector('#talk .ri-callout-note.on')?.textContent.includes('the bash call')")
    page.keyboard.press("N")
    _wait_sel(page, 1, f"{P1}-{P1 + 4}")
    # n n at once: the second press is not lost while the first is still pending (Gradio's default
    # trigger mode for a click dropped it: the callout said note 3, the tokens stayed on note 2)
    # each press numbered, so the server answers the newer of two whose requests arrive in the other order
    sent: list[str] = []
    page.on("request", lambda r: sent.append(r.post_data or "") if "queue/join" in r.url else None)
    page.keyboard.press("n")
    page.keyboard.press("n")
    _wait_sel(page, 2, f"{P2 + 3}-{P2 + 4}")
    page.wait_for_function("document.querySelector('#talk .ri-callout-note.on')?.textContent.includes('other ids')")
    pressed = sorted({(d["press"], d["note"]) for s in sent if '"press"' in s
                      for d in [json.loads(s)["event_data"]]})  # (each press reaches every carrier handler)
    assert [n for _, n in pressed[-2:]] == [1, 2], sent  # n n: notes 2 and 3, the later press numbered higher
    _nothing_ran(page, seen)


def _header(page, name: str):
    page.wait_for_function(f"document.querySelector('#rollout-header')?.textContent.includes('{name}')", timeout=60000)


def test_deck_link_presents_step_one_and_arrows_walk_two_rollouts(page, app_url, data_root):
    (data_root / "decks").mkdir(exist_ok=True)
    (data_root / "decks" / "talk.json").write_text(json.dumps({"version": 1, "title": "two rollouts", "steps": [
        {"source": "sample:smollm2", "turn": 2, "title": "clean", "note": "real weights"},
        {"source": "sample:qwen3-tiny", "turn": 1, "tok": [P1, P1 + 4], "title": "pieces"},
        {"source": "sample:qwen3-tiny", "view": "drift", "turn": 1, "title": "drift"},
    ]}))
    page.goto(f"{app_url}/?deck=decks/talk.json")
    page.wait_for_function("document.body.classList.contains('ri-present')", timeout=60000)
    page.wait_for_function("document.querySelector('#talk .ri-callout-step')?.textContent.startsWith('step 1 / 3')",
                           timeout=60000)
    _header(page, "smollm2")
    page.wait_for_function(f"document.querySelector('{TV}')?.dataset.turn === '2'", timeout=60000)
    n = len(_trace("smollm2", 2)["prompt_token_ids"]) + len(_trace("smollm2", 2)["completion_token_ids"])
    assert page.locator(TV).get_attribute("data-n") == str(n)
    assert "real weights" in page.locator("#talk .ri-callout-step").text_content()

    page.keyboard.press("ArrowRight")  # step 2: the other rollout, its range selected
    _wait_sel(page, 1, f"{P1}-{P1 + 4}")
    _header(page, "qwen3-tiny")
    page.wait_for_function("document.querySelector('#talk .ri-callout-step').textContent.startsWith('step 2 / 3')")
    page.keyboard.press("ArrowRight")  # step 3: the Drift tab's report of that turn
    page.wait_for_function("document.querySelector('#drift-view')?.textContent.includes('Turn 1 · call 2')", timeout=90000)
    page.wait_for_function("document.querySelector('#talk .ri-callout-step').textContent.startsWith('step 3 / 3')")
    page.keyboard.press("ArrowLeft")
    page.wait_for_function("document.querySelector('#talk .ri-callout-step').textContent.startsWith('step 2 / 3')",
                           timeout=60000)
    page.keyboard.press("ArrowLeft")
    _header(page, "smollm2")
    page.wait_for_function(f"document.querySelector('{TV}')?.dataset.turn === '2'", timeout=60000)


def test_the_bundled_deck_opens_on_its_first_step(page, app_url):
    page.goto(f"{app_url}/?deck=sample:deck.json")
    page.wait_for_function("document.querySelector('#talk .ri-callout-step')?.textContent.includes('A clean turn')",
                           timeout=60000)
    steps = json.loads((SAMPLES / "deck.json").read_text())["steps"]
    assert len(steps) == 5
    _header(page, "smollm2")


def test_hostile_deck_values_execute_nothing(page, app_url, data_root):
    (data_root / "decks").mkdir(exist_ok=True)
    (data_root / "decks" / "hostile.json").write_text(json.dumps({"version": 1, "title": HOSTILE, "steps": [
        {"source": "sample:qwen3-tiny", "turn": 1, "title": HOSTILE, "note": HOSTILE},
        {"source": HOSTILE, "turn": 1, "title": "a source that is no source"},
    ]}))
    seen = _guarded(page)
    page.goto(f"{app_url}/?deck=decks/hostile.json")
    page.wait_for_function("document.querySelector('#talk .ri-callout-step')?.textContent.startsWith('step 1 / 2')",
                           timeout=60000)
    assert HOSTILE in page.locator("#talk .ri-callout-step").text_content()
    page.keyboard.press("ArrowRight")
    page.wait_for_function("document.querySelector('#status')?.textContent.includes('no such file or folder')",
                           timeout=60000)  # the step's source is refused like a link's, shown as text
    _nothing_ran(page, seen)


@pytest.mark.parametrize("deck", ["../outside/deck.json", "/etc/passwd"])
def test_a_deck_outside_the_data_root_is_refused_clearly(page, app_url, data_root, deck):
    outside = data_root.parent / "outside"
    outside.mkdir(exist_ok=True)
    (outside / "deck.json").write_text(json.dumps({"version": 1, "steps": [{"source": "sample:smollm2"}]}))
    page.goto(f"{app_url}/?deck={deck}")
    page.wait_for_function("document.querySelector('#status')?.textContent.includes('Deck not opened')", timeout=60000)
    assert "outside the allowed data folder" in page.locator("#status").text_content()
    assert not page.evaluate("document.body.classList.contains('ri-present')")
