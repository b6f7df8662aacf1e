"""Notes and decks through the running app (real HTTP on loopback, gradio_client; docs/TALK.md):
where notes are kept (beside a local capture, or only in the session: uploads, samples, public mode),
the round trip add → reload → download → upload with anchors intact, the ``?note=`` / ``?deck=``
values checked in viewer/visitor.py, and the public-mode attack: notes never reach the server's disk.

Anchors are checked against the sample's own ``trace.json``; every notes file is read with ``json``.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from viewer.config import SAMPLE_DIR, Settings
from viewer.visitor import VisitorError, deck_file, deep_link

TRACE = json.loads((SAMPLE_DIR / "qwen3-tiny" / "trace.json").read_text())
P1 = len(TRACE[1]["prompt_token_ids"])
PIECES = TRACE[1]["completion_token_ids"][:5]  # `<tool_call>` spelled as five plain pieces


def _files(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def apps(tmp_path_factory):
    """Two real apps on loopback, launched as app.py does: a local one and a public one, each with a
    copy of the qwen3-tiny capture inside its data root."""
    from conftest import free_port
    from viewer.ui import create_app, launch_kwargs

    out = {}
    for name, public in (("local", False), ("public", True)):
        root = tmp_path_factory.mktemp(f"talk-{name}")
        shutil.copytree(SAMPLE_DIR / "qwen3-tiny", root / "cap")
        settings = Settings(public=public, data_root=str(root), capture_out_root=str(tmp_path_factory.mktemp("caps")))
        demo = create_app(settings)
        _, url, _ = demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=free_port(), quiet=True,
                                **launch_kwargs(settings))
        out[name] = (demo, url, root)
    yield out
    for demo, _, _ in out.values():
        demo.close()


def _client(url: str):
    from gradio_client import Client

    # httpx's default 5 s ran out fetching the app's config at load 18 (a busy machine is no failure)
    return Client(url, verbose=False, httpx_kwargs={"timeout": 60})


def test_local_capture_notes_round_trip_add_reload_download_upload(apps, tmp_path):
    from gradio_client import handle_file

    _demo, url, root = apps["local"]
    c = _client(url)
    c.predict("cap", "", api_name="/open_path")
    said = c.predict(f"1:{P1}-{P1 + 4}", "tool call as pieces", api_name="/add_note")[-1]
    assert "saved to notes.json beside the capture" in said
    on_disk = json.loads((root / "cap" / "notes.json").read_text())
    assert [(n["turn"], n["tok"], n["anchor"], n["text"]) for n in on_disk["notes"]] == \
        [(1, [P1, P1 + 4], PIECES, "tool call as pieces")]
    assert on_disk["source"] == "cap"

    # reload: a new session finds the note beside the capture and downloads it unchanged
    c2 = _client(url)
    c2.predict("cap", "", api_name="/open_path")
    got = json.loads(Path(c2.predict(api_name="/download_notes")).read_text())
    assert got["notes"] == on_disk["notes"]

    # import into a rollout kept only in the session (an upload of the same capture): anchors intact, no flag
    c3 = _client(url)
    c3.predict([handle_file(str(root / "cap" / "trace.json"))], "", api_name="/open_upload")
    back = tmp_path / "notes.json"
    back.write_text(json.dumps(got))
    listing, _pick, _payload, said = c3.predict(handle_file(str(back)), api_name="/upload_notes")
    assert "1 note imported" in said and "kept in this browser session" in said
    assert "tool call as pieces" in listing and "⚠" not in listing
    again = json.loads(Path(c3.predict(api_name="/download_notes")).read_text())
    assert [(n["turn"], n["tok"], n["anchor"]) for n in again["notes"]] == [(1, [P1, P1 + 4], PIECES)]


def test_a_note_on_a_changed_file_is_flagged_not_dropped(apps):
    _demo, url, root = apps["local"]
    cap = root / "cap-changed"
    shutil.copytree(SAMPLE_DIR / "qwen3-tiny", cap)
    (cap / "notes.json").write_text(json.dumps({"version": 1, "notes": [
        {"id": "a", "turn": 1, "tok": [P1, P1 + 4], "text": "kept", "anchor": PIECES},
        {"id": "b", "turn": 1, "tok": [P1, P1 + 4], "text": "other ids", "anchor": [1, 2, 3, 4, 5]},
        {"id": "c", "turn": 1, "tok": [10**8, 10**8 + 1], "text": "past the end", "anchor": [1]},
        {"id": "d", "turn": 99, "tok": [0, 0], "text": "no such turn"}]}))
    c = _client(url)
    c.predict("cap-changed", "", api_name="/open_path")
    listing = c.predict("a", "still kept", api_name="/edit_note")[0]  # any change re-lists the notes
    for flag in ("changed since the note was written", "past the turn", "turn 99 is not in this rollout"):
        assert flag in listing
    assert listing.count("class='ri-note") >= 4 and listing.count("ri-note-flagged") == 3
    assert [n["id"] for n in json.loads((cap / "notes.json").read_text())["notes"]] == ["a", "b", "c", "d"]


def test_public_mode_never_writes_notes_to_the_servers_folders(apps, tmp_path):
    """Attack: a visitor of a public app adds, edits, imports and deletes notes on a capture that sits
    in the data root. Nothing under the data root (or the captures folder) may be created or changed."""
    from gradio_client import handle_file

    _demo, url, root = apps["public"]
    before = _files(root)
    c = _client(url)
    c.predict("cap", "", api_name="/open_path")
    said = c.predict(f"1:{P1}-{P1 + 4}", "a visitor's note", api_name="/add_note")[-1]
    c.predict("n1", "edited", api_name="/edit_note")
    f = tmp_path / "notes.json"
    f.write_text(json.dumps({"version": 1, "notes": [{"id": "x", "turn": 1, "tok": [0, 1], "text": "imported"}]}))
    c.predict(handle_file(str(f)), api_name="/upload_notes")
    got = json.loads(Path(c.predict(api_name="/download_notes")).read_text())
    assert [n["text"] for n in got["notes"]] == ["imported"]  # the session holds them
    assert _files(root) == before, "a public app wrote into its data root"
    assert "kept in this browser session" in said
    # and another visitor of the same capture sees none of them
    other = _client(url)
    other.predict("cap", "", api_name="/open_path")
    assert json.loads(Path(other.predict(api_name="/download_notes")).read_text())["notes"] == []


def test_deep_link_note_and_deck_values_are_checked():
    assert deep_link({"note": "3"}).note == "3" and deep_link({"note": "n-1_a"}).note == "n-1_a"
    bad = deep_link({"note": "<img src=x>", "source": "sample:qwen3-tiny"})
    assert bad.note == "" and "note=" in bad.notice and "not a note number or id" in bad.notice
    assert deep_link({"deck": "decks/talk.json"}).deck == "decks/talk.json"
    assert deep_link({"deck": "x" * 5000}).deck == ""


def test_deck_file_stays_inside_the_data_root(tmp_path):
    root = tmp_path / "root"
    (root / "decks").mkdir(parents=True)
    (root / "decks" / "talk.json").write_text("{}")
    (root / "decks" / "notes.txt").write_text("{}")
    (tmp_path / "outside.json").write_text("{}")
    s = Settings(data_root=str(root))
    assert deck_file("decks/talk.json", s) == (root / "decks" / "talk.json").resolve()
    assert deck_file("sample:deck.json", s) == SAMPLE_DIR / "deck.json"
    for text, why in (("../outside.json", "outside the allowed data folder"),
                      (str(tmp_path / "outside.json"), "outside the allowed data folder"),
                      ("decks/notes.txt", "not a .json file"), ("decks", "not a .json file"),
                      ("decks/none.json", "no such file"), ("sample:../../etc/passwd", "no such file"), ("", "name a deck")):
        with pytest.raises(VisitorError, match=why):
            deck_file(text, s)


def test_the_bundled_deck_tells_the_story_in_five_steps():
    from viewer.talk import deck

    d = deck.parse((SAMPLE_DIR / "deck.json").read_bytes())
    assert [(s.source, s.view, s.turn) for s in d.steps] == [
        ("sample:smollm2", "tokens", 1), ("sample:qwen3-tiny", "tokens", 1), ("sample:qwen3-tiny", "drift", 1),
        ("sample:qwen3-tiny", "drift", 1), ("sample:qwen3-tiny", "compare", None)]
    # step 2's range is the five pieces the model sampled for `<tool_call>` (the sample's trace)
    a, b = d.steps[1].tok
    assert (a, b) == (P1, P1 + 4) and PIECES == [27, 983, 337, 13429, 29]
    assert d.steps[4].compare == "sample:smollm2"


def test_add_this_view_to_the_deck_builds_a_deck_json(apps):
    _demo, url, _root = apps["local"]
    c = _client(url)
    c.predict("qwen3-tiny", "", api_name="/open_sample")  # opens on turn 1, the first trained turn
    first, said = c.predict(f"1:{P1}-{P1 + 4}", "logprob", api_name="/deck_add_view")
    assert "Step 1 added" in said
    path, said = c.predict("", "no-such-mode", api_name="/deck_add_view")
    doc = json.loads(Path(path).read_text())
    assert doc["version"] == 1 and [(s["source"], s.get("turn"), s.get("tok"), s["mode"]) for s in doc["steps"]] == [
        ("sample:qwen3-tiny", 1, [P1, P1 + 4], "logprob"), ("sample:qwen3-tiny", 1, None, "mask")]


def test_the_deck_kept_in_the_browser_is_checked_like_a_deck_json():
    """What the visitor's localStorage hands back (issue 41: the deck in progress kept across reloads) may
    have been changed by the page or the visitor: it is read as a deck.json or refused, never trusted."""
    from viewer.talk.common import MAX_TALK_BYTES, TalkError
    from viewer.ui.talk_handlers import TalkHandlers

    doc = {"version": 1, "title": "My talk", "steps": [{"source": "sample:qwen3-tiny", "turn": 0},
                                                       {"source": "sample:smollm2", "turn": 2, "tok": [3, 5]}]}
    text = TalkHandlers.kept_text({"deck": json.dumps(doc)})
    assert [(s["source"], s.get("turn"), s.get("tok")) for s in json.loads(text)["steps"]] == \
        [("sample:qwen3-tiny", 0, None), ("sample:smollm2", 2, [3, 5])]
    for none in (None, {}, {"deck": ""}, "a string", ["a", "list"]):
        assert TalkHandlers.kept_text(none) == ""
    for bad, says in (({"deck": 5}, "expected a deck.json text"), ({"deck": "{not json"}, "the deck kept"),
                      ({"deck": json.dumps({"version": 1, "steps": []})}, "non-empty list"),
                      ({"deck": json.dumps({"version": 1, "steps": [{"source": "x"}]}) + " " * MAX_TALK_BYTES},
                       "byte limit")):
        with pytest.raises(TalkError, match=says):
            TalkHandlers.kept_text(bad)


def test_the_panel_names_the_deck_in_progress_and_escapes_its_sources():
    from viewer.ui.talk_handlers import LISTED, TalkHandlers

    html, label = TalkHandlers.deck_html("")
    assert "No deck in progress" in html and label == "Notes and deck"
    hostile = "<img src=x onerror=alert(1)>"
    steps = [{"source": hostile, "turn": k} for k in range(LISTED + 3)]
    html, label = TalkHandlers.deck_html(json.dumps({"version": 1, "steps": steps}))
    assert label == f"Notes and deck · deck: {LISTED + 3} steps" and f"Deck in progress: {LISTED + 3} steps" in html
    assert "<img" not in html and f"{LISTED}. &lt;img" in html and "… and 3 more" in html


def test_an_unreadable_kept_deck_is_said_on_load_and_a_new_deck_is_kept_as_empty():
    from viewer.ui.talk_handlers import TalkHandlers

    h = TalkHandlers(Settings(), None, None)
    built, line, label, file = h.restore_deck({"deck": "{not json"})
    assert built == "" and "cannot be read" in line and "starts a new one" in line
    assert h.resume_deck("", {"deck": "{not json"}) == ""  # the next step starts a new deck over it
    assert h.resume_deck("kept in the session", {"deck": "{not json"}) == "kept in the session"
    built, kept, line, _label, file, said = h.new_deck()
    # an object, never "" or None: Gradio writes no empty value to localStorage and the old deck came back
    assert built == "" and kept == {"deck": ""} and file is None and "No deck in progress" in line
