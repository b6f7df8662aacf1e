"""The Drift screen's handlers called directly (no browser, no server): viewer/ui/drift_handlers.py.

Inputs are made here: a one-call capture tokenised with the real Qwen3 tokenizer (its sizes
counted below from the same texts), and a scan result written out by hand."""
from __future__ import annotations

import gradio as gr
import pytest

from captures import TOOLS, write_capture
from viewer.config import Settings
from viewer.drift.results import SCAN_COLUMNS
from viewer.tokenizer import render_prompt_ids
from viewer.ui import drift_handlers as dh
from viewer.ui.store import RolloutStore
from tv_payload import expand

SKIP = gr.skip()


@pytest.fixture
def opened(tmp_path, qwen3):
    """(settings, store, key, prompt length, output length) of a one-call capture with a tool call."""
    write_capture(tmp_path / "cap", "Say hi", "Hi there", tool_command="ls")
    messages = [{"role": "system", "content": "You are opencode, an interactive CLI tool."},
                {"role": "user", "content": "Say hi"}]
    p = len(render_prompt_ids(qwen3, messages, tools=TOOLS))
    call = '\n<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>'
    o = len(qwen3.encode("Hi there" + call, add_special_tokens=False)) + 1  # + <|im_end|>
    settings = Settings(data_root=str(tmp_path))
    store = RolloutStore(settings)
    return settings, store, store.open(tmp_path / "cap").key, p, o


def test_turn_panel_show_gives_the_turns_report_and_its_trainer_row(opened):
    settings, store, key, p, o = opened
    tp = dh.TurnPanel(settings, store)
    turn, html, pick, payload = tp.show(key, 0)
    assert turn == 0
    assert 'data-turn="0" data-drifted="0"' in html and "round trip: identical" in html
    # one agent call that ends in a tool call: one trainer row, prompt + output, the output trained
    label = f"row 0 · turns 0 · {p + o} tokens · {o} trained"
    assert pick.value == label and [c[0] for c in pick.choices] == [label]
    d = expand(payload)
    assert d["prompt_len"] == p and len(d["ids"]) == p + o and d["k"] == [0] * p + [1] * o
    assert d["output_source"] == label and d["trained"] is True
    # a turn the rollout does not have, or nothing open: the empty view, the picker cleared
    for args in ((key, 7), (None, 0), (key, None), (key, "not a number")):
        turn, html, pick, empty = tp.show(*args)
        assert turn == SKIP and dh.EMPTY in html and pick.choices == [] and empty == ""
    # follow: only while the tab is on screen
    assert tp.follow(False, key, 0, dh.AUTO, "tool-calls") == [SKIP] * dh.VIEW_OUTPUTS
    assert tp.follow(True, key, 0, dh.AUTO, "tool-calls")[3] == payload


def test_turn_panel_row_picker_and_export_refusals(opened):
    settings, store, key, p, o = opened
    tp = dh.TurnPanel(settings, store)
    default = tp.show(key, 0)[3]
    assert tp.on_row(key, 0, f"row 0 · turns 0 · {p + o} tokens · {o} trained") == default
    assert tp.on_row(key, 0, "a label no row has") == default  # falls back to the turn's own row
    assert tp.on_row(None, 0, None) == "" and tp.on_row(key, None, None) == ""
    with pytest.raises(gr.Error, match="Open a rollout and pick a turn first"):
        tp.export(None, 0)
    with pytest.raises(gr.Error, match="Open a rollout and pick a turn first"):
        tp.export(key, 9)
    assert tp.export(key, 0) is None  # no drift in this turn: nothing to export


def _record(rollout, turn, *, rt=None, tp=None, px=None, drifted=False):
    return {"rollout": rollout, "turn": turn, "drifted": drifted,
            "retokenize": {"equal": rt is None, "cause": rt, "changed_spans": 1 if rt else 0},
            "template": {"equal": tp is None, "cause": tp}, "prefix": {"status": "broken" if px else "clean",
                                                                       "cause": px},
            "row": {"verdict": "CLEAN"}}


def test_scan_panel_results_filter_a_hand_made_scan():
    res = {"turns": [_record("a", 0), _record("a", 1, rt="special-token-merge", drifted=True),
                     _record("b", 0, px="think-stripped", drifted=True)],
           "totals": {"by_cause": {"special-token-merge": 1, "think-stripped": 1}}}
    settings = Settings()
    sp = dh.ScanPanel(settings, RolloutStore(settings))
    run = sp.new_scan()
    sp.keep(run, {"keys": {}, "kept": {}, "result": res})  # in the store's cache, within cache_mb
    assert sp.store.memo.bytes > 0
    df, _fig = sp.results(run, dh.ALL)
    assert list(df.columns) == SCAN_COLUMNS
    assert list(zip(df["rollout"], df["turn"], df["drifted"])) == [("a", 0, "no"), ("a", 1, "yes"), ("b", 0, "yes")]
    df, _ = sp.results(run, dh.DRIFTED)
    assert list(zip(df["rollout"], df["turn"])) == [("a", 1), ("b", 0)]
    df, _ = sp.results(run, "think-stripped")
    assert list(zip(df["rollout"], df["turn"], df["prefix cause"])) == [("b", 0, "think-stripped")]
    for other in ("no such scan", sp.new_scan(), None):  # a text is no scan; another run has no results
        df, _ = sp.results(other, dh.ALL)
        assert df.empty and list(df.columns) == SCAN_COLUMNS


def test_scan_panel_cancel_and_refusals(opened, tmp_path):
    settings, store, key, p, o = opened
    sp = dh.ScanPanel(settings, store)
    assert "No scan running." in sp.cancel_scan(None) and "No scan running." in sp.cancel_scan("nope")
    sid = sp.new_scan()
    assert "Cancelling" in sp.cancel_scan(sid) and sid.cancel.is_set()
    sid.finish()
    assert "No scan running." in sp.cancel_scan(sid)  # an ended run has nothing to cancel

    def summary(*args):
        out = sp.run_scan(*args)
        assert len(out) == 5 and out[0]
        return out[1]

    assert "Give a Hub dataset as hf://datasets/OWNER/NAME." in summary(None, "Hub dataset", "", "owner/x", 5, key,
                                                                        dh.ALL)
    assert "Open a rollout first" in summary(None, "open rollout", "", "", 5, None, dh.ALL)
    assert "ri-error" in summary(None, "folder of captures", "../..", "", 5, key, dh.ALL)  # outside the data root


def test_scan_panel_scans_the_open_rollout_and_caps_a_public_scan(opened, tmp_path):
    settings, store, key, p, o = opened
    sid, html, df, _c, _r = dh.ScanPanel(settings, store).run_scan(None, "open rollout", "", "", 5, key, dh.ALL)
    assert "tokenizer: qwen3" in html and "at most" not in html
    assert list(zip(df["turn"], df["drifted"], df["round trip"])) == [(0, "no", "equal")]
    # public: a blank limit means every row, which the rows_scanned budget caps
    public = Settings(data_root=str(tmp_path), public=True)
    cap = 100_000  # rows_scanned's public default (docs/SECURITY.md budgets table)
    _sid, html, df, _c, _r = dh.ScanPanel(public, RolloutStore(public)).run_scan(None, "folder of captures", ".", "",
                                                                                 None, None, dh.ALL)
    assert f"at most {cap:,} rows on this public app (budget rows_scanned)" in html
    assert list(df["turn"]) == [0]
