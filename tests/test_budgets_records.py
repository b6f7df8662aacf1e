"""Record floods, deep nesting, huge numbers and very long text stop at their budgets (issue 26 §4).

Each fixture is built here and opened as a visitor does: uploaded (the upload intake) and
opened through the store, in public mode. Every one must end in seconds with a message
naming the budget, and leave the process memory where it was.
"""
from __future__ import annotations

import json
import zipfile

import pytest

from budget_bombs import bounded, mem_margin_mb, message_of, public, rss_mb
from viewer.sources import SourceError
from viewer.sources.upload import intake_upload
from viewer.ui.opening import open_spec
from viewer.ui.store import RolloutStore

TINY = ('{"request":{"messages":[{"role":"user","content":"x"}]},'
        '"response":{"choices":[{"message":{"role":"assistant","content":"y"}}]}}')


def _upload(tmp_path, settings, name: str, text: str):
    """``text`` zipped as ``name``, put through the upload intake: the folder or file the app opens."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    z = tmp_path / "upload.zip"
    with zipfile.ZipFile(z, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(name, text)
    return intake_upload(z, tmp_path / "up", settings).root


def test_a_flood_of_tiny_records_stops_at_the_turns_budget(tmp_path, monkeypatch):
    """The issue's flood: a small zip holding a trace.json of 300,000 tiny records. Before: ~110 s of
    CPU and a 122 MB answer per open. Now parsing stops at the 2,000th turn."""
    settings = public(monkeypatch, tmp_path)
    text = "[" + ",".join([TINY] * 300_000) + "]"
    root = _upload(tmp_path, settings, "trace.json", text)
    del text
    assert (tmp_path / "upload.zip").stat().st_size < 1_000_000
    store = RolloutStore(settings)
    before = rss_mb()
    _, err, elapsed = bounded(lambda: store.open(root), 60)
    msg = message_of(err)
    assert isinstance(err, SourceError), err
    assert "record 2000" in msg and "over the 2,000 turns budget" in msg, msg
    assert elapsed < 10, f"{elapsed:.1f} s"
    assert rss_mb() - before < mem_margin_mb()


def test_records_that_make_no_turn_stop_at_the_records_budget(tmp_path, monkeypatch):
    """60,000 records of which none is a model call (each would be one located problem, all kept
    and sent): the stream stops at the 50,001st record."""
    settings = public(monkeypatch, tmp_path)
    root = _upload(tmp_path, settings, "trace.jsonl", TINY + "\n" + "0\n" * 60_000)
    _, err, elapsed = bounded(lambda: RolloutStore(settings).open(root), 60)
    msg = message_of(err)
    assert "over the 50,000 records budget" in msg and "line 50001" in msg, msg
    assert elapsed < 10


def test_a_local_app_raises_the_budget_by_its_setting(tmp_path, monkeypatch):
    """The same flood is within a local app's defaults once the setting says so; the message of a
    local app tells how to raise it."""
    settings = public(monkeypatch, tmp_path)
    monkeypatch.delenv("VIEWER_PUBLIC")
    monkeypatch.setenv("VIEWER_BUDGET_TURNS", "300")
    from viewer.config import Settings

    settings = Settings.from_env()
    root = _upload(tmp_path, settings, "trace.json", "[" + ",".join([TINY] * 400) + "]")
    with pytest.raises(SourceError, match=r"over the 300 turns budget .*raise it with VIEWER_BUDGET_TURNS=N"):
        RolloutStore(settings).open(root)
    monkeypatch.setenv("VIEWER_BUDGET_TURNS", "400")
    op = RolloutStore(Settings.from_env()).open(root)
    assert len(op.rollout.turns) == 400


@pytest.mark.parametrize("where", ["trace.json", "trace.jsonl", "turns.json"])
def test_json_nested_past_the_parser_is_the_nesting_budget(tmp_path, monkeypatch, where):
    """100,000 nested arrays in one record. Before: RecursionError out of the reader (no message)."""
    settings = public(monkeypatch, tmp_path)
    deep = TINY[:-1] + ',"x":' + "[" * 100_000 + "]" * 100_000 + "}"
    text = deep + "\n" + TINY + "\n" if where.endswith("l") else "[" + deep + "]"
    root = _upload(tmp_path, settings, where, text)
    _, err, elapsed = bounded(lambda: RolloutStore(settings).open(root), 30)
    msg = message_of(err)
    assert isinstance(err, SourceError), repr(err)
    assert "nested deeper than the parser accepts" in msg and "levels budget" in msg, msg
    assert elapsed < 10


def test_deep_but_parseable_json_opens_and_renders(tmp_path, monkeypatch):
    """900 levels (under the parser's limit): the rollout opens and its turn view is built."""
    from viewer.views import turn_view

    settings = public(monkeypatch, tmp_path)
    rec = TINY[:-1] + ',"x":' + "[" * 900 + "]" * 900 + "}"
    root = _upload(tmp_path, settings, "trace.json", "[" + rec + "]")
    op = RolloutStore(settings).open(root)
    assert len(op.rollout.turns) == 1
    turn_view(op.rollout, 0, op.choice.tokenizer, op.table)


def test_huge_numbers_are_located_problems(tmp_path, monkeypatch):
    """A 5,000-digit number (over Python's int limit: json raises a bare ValueError) and a
    4,000-digit token id. Before: ValueError / OverflowError out of the reader."""
    settings = public(monkeypatch, tmp_path)
    big = "1" + "0" * 4999
    trace = "[" + TINY + "," + TINY[:-1] + f',"usage":{{"n":{big}}}}}' + "]"
    root = _upload(tmp_path, settings, "trace.json", trace)
    op, err, _ = bounded(lambda: RolloutStore(settings).open(root), 30)
    assert err is None, repr(err)
    assert len(op.rollout.turns) == 1  # the record before the number
    assert any("a number with too many digits (value has 5000 digits)" in str(p) for p in op.rollout.problems)

    rec = {"request": {"messages": []}, "completion_token_ids": [5, 6], "logprobs": [1e999, -1.0]}
    text = json.dumps([rec]).replace("[5, 6]", "[5, 1" + "0" * 4000 + "]").replace("Infinity", "1e999999")
    root = _upload(tmp_path / "b", settings, "trace.json", text)
    op, err, _ = bounded(lambda: RolloutStore(settings).open(root), 30)
    assert err is None, repr(err)
    assert list(op.rollout.turns[0].output_ids) == [5]
    assert any("expected a non-negative int token id under 2**31; kept the 1 ids before it" in str(p)
               for p in op.rollout.problems)


def test_a_very_long_message_is_not_tokenized(tmp_path, monkeypatch):
    """One 12 MB line (a messages row): the rendered prompt is over the 4 MB ``tokenize_mb`` budget
    and is refused before the tokenizer starts (it costs ~2 s of CPU a million characters)."""
    settings = public(monkeypatch, tmp_path)
    row = {"messages": [{"role": "user", "content": "ab " * (4 << 20)}, {"role": "assistant", "content": "ok"}]}
    (tmp_path / "long.jsonl").write_text(json.dumps(row) + "\n")
    short = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}]}
    (tmp_path / "short.jsonl").write_text(json.dumps(short) + "\n")
    store = RolloutStore(settings)
    open_spec(store, settings, "short.jsonl", row=0)  # warm: the tokenizer and the render worker
    before = rss_mb()
    _, err, elapsed = bounded(lambda: open_spec(store, settings, "long.jsonl", row=0), 60)
    msg = message_of(err)
    assert "rendered prompt" in msg and "over the 4 MB budget" in msg, msg
    assert elapsed < 10, f"{elapsed:.1f} s"
    assert rss_mb() - before < mem_margin_mb()
