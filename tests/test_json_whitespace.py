"""JSON's whitespace is defined once (``viewer.sources.jsonio.WHITESPACE``), and it is the whitespace
Python's json accepts between tokens: no reader keeps its own copy of it."""
from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from viewer.sources.jsonio import WHITESPACE, WHITESPACE_BYTES

VIEWER = Path(__file__).resolve().parent.parent / "viewer"
HOME = VIEWER / "sources" / "jsonio.py"


def copies(code: str) -> list[int]:
    """The lines of ``code`` that spell JSON's whitespace as a literal (text or bytes, any order)."""
    wanted = {frozenset(WHITESPACE), frozenset(WHITESPACE_BYTES)}
    return [node.lineno for node in ast.walk(ast.parse(code))
            if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)) and len(node.value) == 4
            and frozenset(node.value) in wanted]


def test_whitespace_is_what_json_accepts_between_tokens():
    for c in WHITESPACE:
        assert json.loads(f"{c}[{c}1{c},{c}2{c}]{c}") == [1, 2]
    for c in "\v\f\x85\xa0\u2028":  # other whitespace Python knows: json refuses each
        with pytest.raises(json.JSONDecodeError):
            json.loads(f"[1,{c}2]")
    assert WHITESPACE_BYTES == WHITESPACE.encode()


def test_no_module_but_jsonio_spells_it_out():
    found = {str(p.relative_to(VIEWER)): lines for p in sorted(VIEWER.rglob("*.py"))
             if p != HOME and (lines := copies(p.read_text(encoding="utf-8")))}
    assert found == {}, f"JSON's whitespace spelt out again (import viewer.sources.jsonio.WHITESPACE): {found}"
    assert copies(HOME.read_text(encoding="utf-8"))  # (the scan sees the one definition)


@pytest.mark.parametrize("code", ['_WS = b" \\t\\r\\n"', 'x.strip(" \\n\\r\\t")', 'f(b"\\t \\n\\r")'])
def test_the_scan_finds_each_spelling(code):
    assert copies(code) == [1]
