"""Rollout / Turn provenance is typed: closed sets are checked when a value is made, and no
string-keyed ``.meta`` bag is left in the code (it held ~25 keys nobody could look up)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from viewer.origin import DerivedCheck, RenderDiff, RolloutOrigin, TurnOrigin

VIEWER = Path(__file__).resolve().parent.parent / "viewer"


@pytest.mark.parametrize("cls,kw,err,words", [
    (TurnOrigin, {"mask_source": "recrod"}, ValueError, ["TurnOrigin.mask_source", "'recrod'", "'record'", "'rule'"]),
    (TurnOrigin, {"kind_source": "trace"}, ValueError, ["TurnOrigin.kind_source", "'trace'", "'turns_file'"]),
    (TurnOrigin, {"logprobs_from": "top_logprobs"}, ValueError, ["TurnOrigin.logprobs_from", "'per_token_logps'"]),
    (TurnOrigin, {"matched_by": "call 3"}, ValueError, ["TurnOrigin.matched_by", "'output ids'", "'order'"]),
    (RolloutOrigin, {"token_view": "exactly"}, ValueError, ["RolloutOrigin.token_view", "'exact'", "'mixed'"]),
    (RenderDiff, {"part": "system", "position": 0}, ValueError, ["RenderDiff.part", "'prompt'", "'reply'"]),
    (TurnOrigin, {"mask_source": 1}, TypeError, ["TurnOrigin.mask_source", "1 is not one of"]),
    (TurnOrigin, {"record": True}, TypeError, ["TurnOrigin.record", "True is not an int or None"]),
    (TurnOrigin, {"record": "3"}, TypeError, ["TurnOrigin.record", "'3' is not an int"]),
    (TurnOrigin, {"model": 7}, TypeError, ["TurnOrigin.model", "7 is not a str or None"]),
    (TurnOrigin, {"derived": {"prompt_is_prefix": True}}, TypeError, ["TurnOrigin.derived", "DerivedCheck"]),
    (DerivedCheck, {"prompt_is_prefix": 1}, TypeError, ["DerivedCheck.prompt_is_prefix", "a bool"]),
    (RolloutOrigin, {"files": ["trace.json"]}, TypeError, ["RolloutOrigin.files", "a tuple of a str"]),
    (RolloutOrigin, {"alternatives": ("harbor", None)}, TypeError, ["RolloutOrigin.alternatives"]),
    (RolloutOrigin, {"batch_id": 2.0}, TypeError, ["RolloutOrigin.batch_id", "2.0 is not an int"]),
])
def test_a_wrong_value_is_refused_when_made_naming_the_field(cls, kw, err, words):
    with pytest.raises(err) as e:
        cls(**kw)
    assert all(w in str(e.value) for w in words), str(e.value)


def test_replace_validates_like_a_new_value_and_leaves_the_old_one():
    o = TurnOrigin(file="trace.json", record=2)
    with pytest.raises(ValueError, match="TurnOrigin.mask_source: 'yes'"):
        o.replace(mask_source="yes")
    o2 = o.replace(mask_source="rule")
    assert (o.mask_source, o2.mask_source, o2.file, o2.record) == (None, "rule", "trace.json", 2)
    with pytest.raises(AttributeError):
        o.mask_source = "rule"  # type: ignore[misc]


def test_every_closed_value_is_accepted():
    for v in ("record", "turns_file", "absent_from_turns_file", "rule", "derived"):
        assert TurnOrigin(mask_source=v).mask_source == v
    for v in ("exact", "derived", "mixed", "none"):
        assert RolloutOrigin(token_view=v).token_view == v
    d = DerivedCheck(True, None, False, RenderDiff("reply", 4, "<think>", "x"))
    assert TurnOrigin(derived=d).derived.later_render_differs_at.position == 4


def meta_bag_uses(source: str, name: str = "<src>") -> list[str]:
    """Places reading or writing a string-keyed ``meta`` dict: ``x.meta["k"]``, ``x.meta.get(...)``
    (or setdefault / update / pop), and ``meta=`` passed to a constructor or ``replace``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "meta"
                and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str)):
            out.append(f"{name}:{node.lineno}: .meta[{node.slice.value!r}]")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("get", "setdefault", "update", "pop")
              and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "meta"):
            out.append(f"{name}:{node.lineno}: .meta.{node.func.attr}(...)")
        elif isinstance(node, ast.Call) and any(k.arg == "meta" for k in node.keywords):
            out.append(f"{name}:{node.lineno}: meta=...")
    return out


def test_the_finder_sees_every_shape_of_a_meta_bag():
    src = ("t.meta['mask_source'] = 'rule'\nx = ro.meta.get('tokenizer')\nt.meta.update(a=1)\n"
           "a.meta.setdefault('derived', {})\nTurn(index=0, call=1, meta={})\nok = t.origin.mask_source\n")
    assert [u.split(": ", 1)[1] for u in meta_bag_uses(src)] == [
        ".meta['mask_source']", ".meta.get(...)", ".meta.update(...)", ".meta.setdefault(...)", "meta=..."]


def test_no_string_keyed_meta_is_left_in_the_code():
    files = sorted(VIEWER.rglob("*.py")) + [VIEWER.parent / "app.py"]
    found = [u for f in files for u in meta_bag_uses(f.read_text(), str(f.relative_to(VIEWER.parent)))]
    assert found == [], "provenance is typed (viewer/origin.py), not a dict:\n" + "\n".join(found)
