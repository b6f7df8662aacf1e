"""What the browser kept of a session's notes is read like an uploaded notes.json (viewer/ui/notes_kept.py):
a bad entry is left out, the rest comes back; over the session budget nothing does."""
from __future__ import annotations

import json

from viewer.config import Settings
from viewer.ui.notes_kept import from_kept, to_kept


def _notes(text: str) -> str:
    return json.dumps({"version": 1, "source": "sample:qwen3-tiny", "notes": [
        {"id": "a", "turn": 1, "tok": [5, 6], "text": text, "anchor": [1, 2]}]})


def test_kept_notes_come_back_and_bad_ones_are_left_out():
    good = _notes("a note")
    got = from_kept({"notes": {"sample:qwen3-tiny|None": good, "x|1": "not json", "y|2": 7, 3: good}}, Settings())
    assert list(got) == ["sample:qwen3-tiny|None"] and json.loads(got["sample:qwen3-tiny|None"])["notes"][0]["text"] \
        == "a note"
    assert from_kept(None, Settings()) == {} and from_kept({"notes": "x"}, Settings()) == {}
    assert to_kept(None) == {"notes": {}} and to_kept(got) == {"notes": got}


def test_over_the_session_budget_nothing_comes_back(monkeypatch):
    many = {f"r{i}|None": _notes(f"n{i}") for i in range(3)}
    assert len(from_kept({"notes": many}, Settings())) == 3  # within the default budget: all of them
    monkeypatch.setenv("VIEWER_BUDGET_SESSION_NOTES_ROLLOUTS", "1")
    assert from_kept({"notes": many}, Settings()) == {}
