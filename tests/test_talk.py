"""The talk files (viewer/talk): notes.json and deck.json read, validated, written and checked
against a rollout. Expected values are the hand-written documents below."""
from __future__ import annotations

import json

import pytest

from viewer.talk import deck, notes
from viewer.talk.common import MAX_TALK_BYTES, TalkError

NOTES_DOC = {"version": 1, "source": "sample:qwen3-tiny", "row": None, "notes": [
    {"id": "n1", "turn": 2, "tok": [3, 5], "text": "<tool_call> as pieces", "anchor": [30, 40, 50],
     "created": "2026-12-01T22:00:00Z"},
    {"id": "n2", "turn": 0, "tok": [0, 0], "text": "the system prompt", "anchor": [7]},
]}


def test_notes_round_trip_keeps_every_field():
    n = notes.parse(json.dumps(NOTES_DOC))
    assert [x.id for x in n.notes] == ["n1", "n2"]
    assert n.notes[0].tok == (3, 5) and n.notes[0].anchor == (30, 40, 50) and n.notes[0].turn == 2
    again = json.loads(notes.dumps(n))
    assert again["notes"][0] == NOTES_DOC["notes"][0]
    assert again["notes"][1] == {**NOTES_DOC["notes"][1], "created": ""}
    assert again["source"] == "sample:qwen3-tiny"


def test_check_flags_changed_and_vanished_anchors_and_drops_none():
    n = notes.parse(json.dumps(NOTES_DOC))
    # turn 2 ids by hand: positions 3..5 hold 30, 40, 50 -> ok; turn 0 position 0 holds 7 -> ok
    same = notes.check(n, {0: [7, 8], 2: [0, 1, 2, 30, 40, 50, 60]})
    assert [c.ok for c in same] == [True, True]
    changed = notes.check(n, {0: [9], 2: [0, 1, 2, 30, 41, 50]})
    assert [c.note.id for c in changed] == ["n1", "n2"]
    assert "changed" in changed[0].problem and "changed" in changed[1].problem
    gone = notes.check(n, {0: [7], 2: [0, 1, 2, 30]})
    assert "past the turn's end" in gone[0].problem and gone[1].ok
    assert "not in this rollout" in notes.check(n, {2: [0, 1, 2, 30, 40, 50]})[1].problem


def test_add_edit_delete_and_anchor_of():
    n = notes.Notes(source="sample:x")
    ids = list(range(100, 300))
    a = notes.Note(id=n.next_id(), turn=1, tok=(10, 80), text="hi", anchor=notes.anchor_of(ids, (10, 80)))
    assert a.id == "n1" and a.anchor == tuple(range(110, 110 + notes.ANCHOR_IDS))
    n = n.add(a)
    with pytest.raises(TalkError, match="already used"):
        n.add(a)
    n = n.edit("n1", "changed text")
    assert n.notes[0].text == "changed text" and n.notes[0].tok == (10, 80)
    assert n.next_id() == "n2"
    assert n.delete("n1").notes == ()
    with pytest.raises(TalkError, match="no note"):
        n.delete("n9")


@pytest.mark.parametrize("doc, says", [
    ("{", "not JSON"),
    ('[1]', "expected an object"),
    ('{"notes": {}}', "notes: expected a list"),
    ('{"version": 2, "notes": []}', "version"),
    ('{"notes": [{"id": "n1", "turn": 1, "tok": [5, 3], "text": "x"}]}', "first ≤ last"),
    ('{"notes": [{"id": "n1", "turn": -1, "tok": [1, 3], "text": "x"}]}', "whole number"),
    ('{"notes": [{"id": "n1", "turn": true, "tok": [1, 3], "text": "x"}]}', "whole number"),
    ('{"notes": [{"id": "a b", "turn": 1, "tok": [1, 3], "text": "x"}]}', "letters, digits"),
    ('{"notes": [{"id": "n1", "turn": 1, "tok": [1, 3], "text": ""}]}', "text: required"),
    ('{"notes": [{"id": "n1", "turn": 1, "tok": [1, 3], "text": 5}]}', "expected text"),
    ('{"notes": [{"id": "n1", "turn": 1, "tok": [1, 3], "text": "x", "anchor": ["a"]}]}', "token ids"),
])
def test_bad_notes_files_say_where_and_what(doc, says):
    with pytest.raises(TalkError, match=says):
        notes.parse(doc)


def test_huge_file_is_refused_before_parsing():
    with pytest.raises(TalkError, match="limit"):
        notes.parse(b" " * (MAX_TALK_BYTES + 1))


DECK_DOC = {"version": 1, "title": "Retokenisation in five steps", "steps": [
    {"source": "sample:qwen3-tiny", "turn": 1, "title": "A clean turn"},
    {"source": "sample:qwen3-tiny", "turn": 2, "tok": [10, 12], "mode": "logprob", "note": "pieces"},
    {"source": "sample:qwen3-tiny", "view": "drift", "turn": 2},
    {"source": "sample:qwen3-tiny", "view": "compare", "compare": "sample:smollm2-free", "row": 0},
]}


def test_deck_round_trip_and_links():
    d = deck.parse(json.dumps(DECK_DOC))
    assert d.title == "Retokenisation in five steps" and len(d.steps) == 4
    assert d.steps[1].tok == (10, 12) and d.steps[1].mode == "logprob" and d.steps[1].note == "pieces"
    assert d.steps[0].view == "tokens" and d.steps[2].view == "drift"
    assert json.loads(deck.dumps(d))["steps"] == [
        {"view": "tokens", "mode": "mask", **DECK_DOC["steps"][0]},
        {"view": "tokens", **DECK_DOC["steps"][1]},
        {"mode": "mask", **DECK_DOC["steps"][2]},
        {"mode": "mask", **DECK_DOC["steps"][3]}]
    # the query strings, written by hand in the deep-link syntax of docs/USING.md
    assert d.steps[1].query() == "source=sample%3Aqwen3-tiny&turn=2&tok=10-12&mode=logprob"
    assert d.steps[3].query() == "source=sample%3Aqwen3-tiny&row=0&compare=sample%3Asmollm2-free"


@pytest.mark.parametrize("doc, says", [
    ('{"steps": []}', "non-empty list"),
    ('{"steps": [{"turn": 1}]}', "source: required"),
    ('{"steps": [{"source": "x", "view": "slides"}]}', "view: expected one of"),
    ('{"steps": [{"source": "x", "view": "compare"}]}', "names the second source"),
    ('{"steps": [{"source": "x", "mode": "rainbow"}]}', "mode: expected one of"),
    ('{"steps": [{"source": "a\\u0001b"}]}', "control characters"),
])
def test_bad_decks_say_where_and_what(doc, says):
    with pytest.raises(TalkError, match=says):
        deck.parse(doc)
