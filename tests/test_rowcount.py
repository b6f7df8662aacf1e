"""rowcount.one_conversation: whether an array is one conversation, from its first elements' keys alone, says what
jsonio.rows_of_json says of json's value of the array, or None (the caller then parses the elements)."""
from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from viewer.sources.jsonio import rows_of_json
from viewer.sources.rowcount import one_conversation

REAL = Path(__file__).parent / "data" / "realworld"
ARRAYS = sorted(p for p in REAL.rglob("*.json") if p.read_bytes().lstrip()[:1] == b"[")


def oracle(text: bytes) -> bool:
    """rows_of_json's verdict on json's value: the list made one row (a conversation)."""
    value = json.loads(text)
    one = rows_of_json(value)[:1]
    return bool(one) and isinstance(one[0], dict) and any(one[0].get(k) is value for k in ("messages", "history"))


def first_five(text: bytes) -> list[bytes]:
    return [bytes(x) for x in msgspec.json.decode(text, type=list[msgspec.Raw])[:5]]


def test_real_arrays_are_told_from_their_keys():
    assert len(ARRAYS) >= 4, ARRAYS  # OpenHands event lists, tau-bench results...
    told = {p.name: one_conversation(first_five(p.read_bytes())) for p in ARRAYS}
    assert told == {p.name: oracle(p.read_bytes()) for p in ARRAYS}
    assert True in told.values() and False in told.values()


EVENT = {"id": 3, "timestamp": "2025-01-27T22:45:13", "source": "agent", "message": "", "action": "edit",
         "args": {"content": "x" * 100}}


def _array(*events: dict) -> bytes:
    return json.dumps(list(events)).encode()


EDITS = {
    "events": _array(EVENT, EVENT),
    "id a bool (an int to isinstance)": _array({**EVENT, "id": True}),
    "id a float": _array({**EVENT, "id": 1.0}),
    "id negative": _array({**EVENT, "id": -7}),
    "id a string": _array({**EVENT, "id": "3"}),
    "no timestamp": _array({k: v for k, v in EVENT.items() if k != "timestamp"}),
    "another source": _array({**EVENT, "source": "system"}),
    "source null": _array({**EVENT, "source": None}),
    "an observation": _array({**{k: v for k, v in EVENT.items() if k != "action"}, "observation": "run"}),
    "neither action nor observation": _array({k: v for k, v in EVENT.items() if k != "action"}),
    "the fifth is not an event": _array(EVENT, EVENT, EVENT, EVENT, {**EVENT, "source": "bot"}),
    "the sixth is not an event": _array(EVENT, EVENT, EVENT, EVENT, EVENT, {"a": 1}),
    "chat messages": _array({"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}),
    "chat with conversations": _array({"role": "user", "content": "hi", "conversations": []}),
    "opencode messages": _array({"info": {}, "parts": []}),
    "rows": _array({"prompt": "a", "completion": "b"}, {"prompt": "c"}),
    "chat first, then rows": _array({"role": "user", "content": "hi"}, {"a": 1}),
}
RAW_EDITS = {  # spelled in ways json.dumps does not write
    "escaped source": b'[{"id": 1, "timestamp": "t", "source": "\\u0061gent", "action": "run"}]',
    "escaped key": b'[{"id": 1, "timestamp": "t", "\\u0073ource": "user", "observation": "run"}]',
    "a key twice, the last not a source": b'[{"id": 1, "timestamp": "t", "source": "user", "source": "x", "action": "a"}]',
    "a key twice, the last a source": b'[{"id": 1, "timestamp": "t", "source": "x", "source": "user", "action": "a"}]',
    "id twice": b'[{"id": "a", "id": 2, "timestamp": "t", "source": "user", "action": "a"}]',
    "source with spaces": b'[{"id": 1, "timestamp": "t", "source": " agent", "action": "run"}]',
    "id with exponent": b'[{"id": 1e2, "timestamp": "t", "source": "agent", "action": "run"}]',
    "white space around values": b'[ { "id" : 1 ,\n "timestamp" : "t" , "source" :\t"agent" , "action" : "run" \n} ]',
}


@pytest.mark.parametrize("name", [*EDITS, *RAW_EDITS])
def test_edits_are_told_as_rows_of_json_tells_them(name):
    text = EDITS.get(name) or RAW_EDITS[name]
    assert one_conversation(first_five(text)) == oracle(text)


@pytest.mark.parametrize("first", [
    [b"[1, 2]"],  # not an object: only parsing tells (rows_of_json's rule for lists in a list)
    [b'{"id": 1, "note": "caf\xe9"}'],  # invalid UTF-8 in a value the skip passes over
    [b'{"id": 1, "n": ' + b"9" * 5000 + b"}"],  # an integer json.loads refuses
    [b'{"id": 1, "n": NaN}'],  # what json.loads takes and msgspec does not
], ids=["a list", "bad utf-8", "long integer", "NaN"])
def test_what_the_skip_could_misjudge_is_left_to_the_parse(first):
    assert one_conversation(first) is None
