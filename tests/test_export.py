"""The export file without a browser: the turn and range specs, the data it carries against the
capture's own trace.json (read here with json), notes flagged not dropped, no fetchable address, and a
Content-Security-Policy whose script hashes are those of the page's scripts (computed here)."""
from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil

import pytest

from viewer.cli import main
from viewer.config import SAMPLE_DIR
from viewer.talk.export import parse_tok, parse_turns
from tv_payload import expand

SAMPLE = SAMPLE_DIR / "qwen3-tiny"


@pytest.mark.parametrize("spec, want", [(None, None), ("", None), ("3", [3]), ("3,5-7", [3, 5, 6, 7]),
                                        (" 2 , 0-1 ", [2, 0, 1]), ("1,1-2", [1, 2])])
def test_turn_specs(spec, want):
    assert parse_turns(spec) == want


@pytest.mark.parametrize("spec", ["x", "1,", "-3", "5-2", "1.5", "1;2", "9" * 10])
def test_bad_turn_specs_say_what_is_wrong(spec):
    with pytest.raises(ValueError, match="--turns: "):
        parse_turns(spec)


@pytest.mark.parametrize("spec, want", [("10-12", (10, 12)), ("7", (7, 7)), (None, None)])
def test_tok_specs(spec, want):
    assert parse_tok(spec) == want


@pytest.mark.parametrize("spec", ["12-", "a-b", "5-2", "-1"])
def test_bad_tok_specs(spec):
    with pytest.raises(ValueError, match="--tok: "):
        parse_tok(spec)


def _export(tmp_path, *argv) -> str:
    out = tmp_path / "o.html"
    assert main(["export", *map(str, argv), "-o", str(out)]) == 0
    return out.read_text()


def _json_tag(html: str, elem_id: str):
    m = re.search(rf'<script type="application/json" id="{re.escape(elem_id)}">(.*?)</script>', html, re.S)
    assert m, elem_id
    return json.loads(m.group(1))


def test_file_carries_the_trace_values_and_fetches_nothing(tmp_path):
    html = _export(tmp_path, SAMPLE, "--turns", "1-2", "--mode", "logprob")
    trace = json.loads((SAMPLE / "trace.json").read_text())
    for k in (1, 2):
        d = expand(_json_tag(html, f"p-r0-{k}"))
        rec = trace[k]
        assert d["ids"] == rec["prompt_token_ids"] + rec["completion_token_ids"]
        p = len(rec["prompt_token_ids"])
        assert d["prompt_len"] == p and d["mode"] == "logprob"
        assert d["lp"][p:] == [round(v, 4) for v in rec["per_token_logps"]]
    doc = _json_tag(html, "ri-x-doc")
    assert [s["turn"] for s in doc["steps"]] == [1, 2] and "p-r0-0" not in html
    # nothing a browser would fetch: no src/href/url() addresses, no <link>
    assert not re.search(r"""\s(?i:src|href)\s*=|<(?i:link)\b|\burl\(|@import""", html)
    # the CSP: no fetch at all, and the only scripts allowed are the page's own, by their sha256
    csp = re.search(r"""<meta http-equiv='Content-Security-Policy' content="([^"]*)">""", html).group(1)
    csp = csp.replace("&#x27;", "'")
    assert "default-src 'none'" in csp and "unsafe-inline" not in csp.split("style-src")[0]
    runnable = re.findall(r"<script>(.*?)</script>", html, re.S)
    assert runnable and all(
        "'sha256-" + base64.b64encode(hashlib.sha256(s.encode()).digest()).decode() + "'" in csp for s in runnable)


def test_notes_beside_a_capture_travel_and_stale_ones_are_flagged(tmp_path):
    cap = tmp_path / "cap"
    shutil.copytree(SAMPLE, cap)
    trace = json.loads((cap / "trace.json").read_text())
    ids = trace[2]["prompt_token_ids"]
    (cap / "notes.json").write_text(json.dumps({"version": 1, "notes": [
        {"id": "ok", "turn": 2, "tok": [3, 5], "text": "fine", "anchor": ids[3:6]},
        {"id": "moved", "turn": 2, "tok": [3, 5], "text": "changed", "anchor": [1, 2, 3]},
        {"id": "far", "turn": 2, "tok": [99999, 99999], "text": "past the end"}]}))
    html = _export(tmp_path, cap)
    notes = _json_tag(html, "ri-x-doc")["rollouts"]["r0"]["notes"]
    assert [(n["id"], bool(n["problem"])) for n in notes] == [("ok", False), ("moved", True), ("far", True)]
    assert "changed since the note was written" in notes[1]["problem"] and "past the turn" in notes[2]["problem"]


def test_a_bad_notes_file_is_one_error_line(tmp_path, capsys):
    cap = tmp_path / "cap"
    shutil.copytree(SAMPLE, cap)
    (cap / "notes.json").write_text('{"version": 1, "notes": [{"id": "a b", "turn": 1, "tok": [1, 2], "text": "x"}]}')
    assert main(["export", str(cap), "-o", str(tmp_path / "o.html")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "notes.json.notes[0].id" in err and not (tmp_path / "o.html").exists()


def test_a_rescore_adds_the_delta_mode_with_its_values(tmp_path):
    """A hand-made rescore of turn 1 (three trained tokens, trainer values written here): the file's
    turn 1 opens in Δ mode with Δ = trainer − sampler at those positions, null elsewhere."""
    from viewer.config import Settings
    from viewer.render.export import export_html
    from viewer.rescore.values import RescoreResult, TurnDelta
    from viewer.talk import export as ex

    trace = json.loads((SAMPLE / "trace.json").read_text())
    s = trace[1]["per_token_logps"]
    p = len(trace[1]["prompt_token_ids"])
    settings = Settings()
    ld = ex.load(str(SAMPLE), settings)
    ld.rescore = RescoreResult("hand", "cpu", "float32", 1.0, 0.5, {"mode": "trl-message"}, [
        TurnDelta(1, 0, "FIRST", "same", None, [0, 1, 4], [s[0], s[1], s[4]], [s[0] + 0.25, s[1] - 1.0, s[4]])])
    html = export_html(ex.rollout_doc(ld, settings, turns=[1, 2], mode="delta"))
    d = _json_tag(html, "p-r0-1")
    assert d["mode"] == "delta" and "delta" in d["modes"] and d["delta"]["model"] == "hand"
    dl = d["delta"]["dl"]
    assert (dl[p], dl[p + 1], dl[p + 4]) == (0.25, -1.0, 0.0) and dl[p + 2] is None and dl[:p] == [None] * p
    assert _json_tag(html, "p-r0-2")["delta"]["dl"] == [None] * len(expand(_json_tag(html, "p-r0-2"))["ids"])
    with pytest.raises(ValueError, match="--mode delta: this rollout has no rescore"):
        ex.rollout_doc(ex.load(str(SAMPLE), settings), settings, mode="delta")


def test_a_whole_rollout_opens_where_the_app_does_with_the_range_there(tmp_path):
    """No --turns: the file opens on the first trained agent turn (turn 1 of the sample: turn 0 is its
    title call), and --tok selects there, not in the bookkeeping call."""
    html = _export(tmp_path, SAMPLE, "--tok", "6120-6121")
    doc = _json_tag(html, "ri-x-doc")
    assert doc["start"] == 1 and doc["steps"][1]["turn"] == 1
    assert [s["focus"] for s in doc["steps"]] == [None, [6120, 6121], None, None]
