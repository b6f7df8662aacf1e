"""`python -m viewer drift`: the issue's JSON shape, the readable table, folders, bad input.

Expectations come from construction (captures written here with the real Qwen3 tokenizer)
or from independent recomputation (decode → encode of the sample's ids done in the test).
"""
from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from captures import write_capture
from viewer.cli import main
from viewer.config import SAMPLE_DIR
from viewer.drift.corpus import ScanInputError, discover, scan_source
from viewer.drift.results import scan_table
from viewer.sources import load_source

SAMPLE = SAMPLE_DIR / "qwen3-tiny"
TOOL_CALL = 151657


def run(capsys, *argv):
    rc = main(["drift", *map(str, argv)])
    out, err = capsys.readouterr()
    return rc, out, err


def _noncanonical_capture(folder: Path, tok) -> tuple[Path, int]:
    """A clean capture, then one sampled token replaced by two pieces spelling the same text.

    Returns the folder and the output position of the split. The pieces re-encode to the
    original single token, so the round trip must report one ``retokenized`` span there.
    """
    write_capture(folder, "Say hello.", "Hello there, friend.", tool_command=None)
    trace = json.loads((folder / "trace.json").read_text())
    rec = trace[0]
    out = rec["completion_token_ids"]
    for j, tid in enumerate(out):
        word = tok.decode([tid])
        for cut in range(1, len(word)):
            a = tok.encode(word[:cut], add_special_tokens=False)
            b = tok.encode(word[cut:], add_special_tokens=False)
            if len(a) == 1 and len(b) == 1:
                new = out[:j] + a + b + out[j + 1:]
                break
        else:
            continue
        break
    else:
        raise AssertionError("no splittable token")
    lps = [-0.5] * len(new)
    rec["completion_token_ids"] = new
    rec["completion_tokens"] = [f"token_id:{i}" for i in new]
    rec["per_token_logps"] = lps
    rec["logprobs"] = [{"token": f"token_id:{i}", "logprob": -0.5, "bytes": None, "top_logprobs": []} for i in new]
    (folder / "trace.json").write_text(json.dumps(trace))
    return folder, j


# --------------------------------------------------------------------------------------
# the real sample
# --------------------------------------------------------------------------------------

def test_sample_json_shape_and_facts(capsys, qwen3):
    rc, out, err = run(capsys, SAMPLE, "--json")
    assert rc == 0
    doc = json.loads(out)  # exactly one JSON document
    assert set(doc) >= {"turns", "totals"}
    tot = doc["totals"]
    assert set(tot) >= {"turns", "drifted_turns", "by_cause", "forked_rows"}
    ro = load_source(SAMPLE)
    agent = ro.agent_turns
    assert tot["turns"] == len(agent) == len(doc["turns"])
    assert [r["turn"] for r in doc["turns"]] == [t.index for t in agent]
    for rec, t in zip(doc["turns"], agent):
        assert set(rec["retokenize"]) >= {"equal", "first_mismatch", "changed_spans"}
        assert set(rec["template"]) >= {"equal", "first_mismatch", "cause"}
        assert set(rec["prefix"]) >= {"status", "cause", "tokens_rerendered"}
        assert rec["prefix"]["status"] in ("first", "clean", "broken")
        # independent: decode then encode with the tokenizer itself
        again = qwen3.encode(qwen3.decode(t.output_ids, skip_special_tokens=False), add_special_tokens=False)
        assert rec["retokenize"]["equal"] == (again == list(t.output_ids))
    # the tool-call turn: <tool_call> was sampled as pieces, re-encoding makes it one special token
    tool_turn = next(t for t in agent if t.tool_names)
    rec = next(r for r in doc["turns"] if r["turn"] == tool_turn.index)
    assert TOOL_CALL not in tool_turn.output_ids
    assert TOOL_CALL in qwen3.encode(qwen3.decode(tool_turn.output_ids), add_special_tokens=False)
    assert rec["retokenize"]["equal"] is False and rec["retokenize"]["cause"] == "special_token"
    assert rec["retokenize"]["first_mismatch"] == 0
    assert tot["by_cause"]["special_token"] >= 1
    # the next turn's prompt re-renders the call: it breaks at the first output token of the tool turn
    nxt = agent[agent.index(tool_turn) + 1]
    prec = next(r for r in doc["turns"] if r["turn"] == nxt.index)
    assert nxt.prompt_ids[len(tool_turn.prompt_ids)] != tool_turn.output_ids[0]
    assert prec["prefix"]["status"] == "broken"
    assert prec["prefix"]["tokens_rerendered"] == len(tool_turn.output_ids)
    assert prec["prefix"]["cause"] == "special_token"
    assert tot["drifted_turns"] == sum(1 for r in doc["turns"] if r["retokenize"]["equal"] is False
                                       or r["template"]["equal"] is False or r["prefix"]["status"] == "broken")


def test_sample_readable_table(capsys):
    rc, out, err = run(capsys, SAMPLE)
    assert rc == 0
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["rollout", "turn", "round"]
    assert "turns checked:" in out and "by cause:" in out and "special_token" in out
    assert "tokens losing gradient:" in out
    # the sample has engine prompt ids: the capture contract is picked, and the table says so and why
    # (fork threshold 0: TRL 1.16's loop-owning lossless_capture default, so both drifts fork)
    assert "trainer:                trl-contract (TRL 1.16.0, per-token loss masks, fork threshold 0)" in out
    assert "auto: every agent turn has the engine's prompt ids" in out
    assert "trainer rows:           2 (2 forks; tally: clean 0, realign 0, fork 2" in out
    assert err.strip() == ""  # one rollout: no progress line


def test_module_entry_point_subprocess():
    proc = subprocess.run([sys.executable, "-m", "viewer", "drift", str(SAMPLE), "--json", "--quiet"],
                          capture_output=True, text=True, timeout=120, cwd=Path(__file__).parent.parent)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["totals"]["turns"] >= 1


# --------------------------------------------------------------------------------------
# folders built here
# --------------------------------------------------------------------------------------

@pytest.fixture
def folder(tmp_path, qwen3):
    root = tmp_path / "data"
    write_capture(root / "a-clean", "List the files.", "I will list them.")
    write_capture(root / "nested" / "b-clean", "Show main.py.", "Here it is.", tool_command="cat main.py")
    _, split_at = _noncanonical_capture(root / "c-split", qwen3)
    bad = root / "d-broken"
    bad.mkdir()
    (bad / "trace.json").write_text("{not json at all")
    return root, split_at


def test_folder_of_captures(capsys, folder):
    root, split_at = folder
    rc, out, err = run(capsys, root, "--json")
    assert rc == 0
    doc = json.loads(out)
    by = {Path(r["rollout"]).name: r for r in doc["turns"]}
    assert set(by) == {"a-clean", "b-clean", "c-split"}  # nested found; the broken one skipped
    for name in ("a-clean", "b-clean"):  # canonical captures are never reported as drifted
        r = by[name]
        assert r["retokenize"]["equal"] is True and r["template"]["equal"] is True
        assert r["prefix"]["status"] == "first"
    c = by["c-split"]["retokenize"]
    assert c == {"equal": False, "first_mismatch": split_at, "changed_spans": 1, "cause": "retokenized"}
    tot = doc["totals"]
    assert tot["turns"] == 3 and tot["drifted_turns"] == 1 and tot["by_cause"] == {"retokenized": 1}
    assert tot["unreadable"] == 1 and doc["errors"][0]["source"].endswith("d-broken")
    assert "scanned" in err  # progress on stderr for a multi-rollout scan


def test_limit_and_discover(capsys, folder):
    root, _ = folder
    found = discover(root)
    assert [Path(p).name for p in found] == ["a-clean", "c-split", "d-broken", "b-clean"]
    rc, out, _ = run(capsys, root, "--json", "--limit", 2)
    assert rc == 0 and json.loads(out)["totals"]["rollouts"] == 2


def test_single_trace_file(capsys, folder):
    root, _ = folder
    rc, out, _ = run(capsys, root / "a-clean" / "trace.json", "--json")
    assert rc == 0 and json.loads(out)["totals"]["turns"] == 1


def test_no_tokenizer_counts_unchecked(capsys, tmp_path):
    f = write_capture(tmp_path / "x", "hi", "hello")
    trace = json.loads((f / "trace.json").read_text())
    trace[0]["request"]["model"] = trace[0]["response"]["model"] = "mystery-model-without-tokenizer"
    (f / "trace.json").write_text(json.dumps(trace))
    rc, out, _ = run(capsys, f, "--json")
    assert rc == 0
    doc = json.loads(out)
    assert doc["tokenizer"] is None
    assert doc["totals"]["unchecked"] == doc["totals"]["turns"] == 1 and doc["totals"]["drifted_turns"] == 0
    assert doc["turns"][0]["retokenize"]["unchecked"] == "no tokenizer for this rollout"
    # the explicit override makes it checkable
    rc, out, _ = run(capsys, f, "--json", "--tokenizer", "qwen3")
    assert rc == 0 and json.loads(out)["totals"]["unchecked"] == 0


@pytest.mark.parametrize("argv, code, needle", [
    (["/no/such/folder"], 2, "no such file or folder"),
    (["--limit", "0", "."], 2, "--limit"),
])
def test_errors_one_line(capsys, argv, code, needle):
    rc, out, err = run(capsys, *argv)
    assert rc == code and out == ""
    assert len(err.strip().splitlines()) == 1 and needle in err and err.startswith("error:")


def test_empty_folder_and_bad_tokenizer(capsys, tmp_path):
    (tmp_path / "empty").mkdir()
    rc, out, err = run(capsys, tmp_path / "empty")
    assert rc == 2 and out == "" and "no capture folders" in err and len(err.strip().splitlines()) == 1
    rc, out, err = run(capsys, SAMPLE, "--tokenizer", tmp_path / "empty")
    assert rc == 2 and out == "" and "could not be loaded" in err and len(err.strip().splitlines()) == 1


def test_scan_source_cancel_and_table(folder):
    root, _ = folder
    ev = threading.Event()
    ev.set()
    res = scan_source(root, cancel=ev)
    assert res["totals"]["cancelled"] is True and res["turns"] == []
    res = scan_source(root)
    rows = scan_table(res, cause="retokenized")
    assert [Path(r["rollout"]).name for r in rows] == ["c-split"]
    assert len(scan_table(res, drifted_only=True)) == 1 and len(scan_table(res)) == 3
    with pytest.raises(ScanInputError):
        scan_source(root / "d-broken")


@pytest.mark.parametrize("name", ["trace.jsonl", "proxy_trace.jsonl"])
def test_drift_finds_folders_that_summary_opens(tmp_path, capsys, name):
    """A folder holding only a JSONL trace (a raw proxy log) is a capture for `drift` as for `summary`
    (before: "no capture folders" — drift looked for trace.json / turns.json only)."""
    from viewer.cli import main

    recs = json.loads((SAMPLE / "trace.json").read_text())
    cap = tmp_path / "runs" / "one"
    cap.mkdir(parents=True)
    (cap / name).write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert main(["summary", str(cap), "--json"]) == 0
    capsys.readouterr()
    assert main(["drift", str(tmp_path / "runs"), "--json", "--quiet"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["totals"]["rollouts"] == 1 and doc["totals"]["turns"] == 3


def test_progress_total_of_a_dataset_without_limit_is_unknown_not_one(tmp_path, qwen3):
    """A data file scanned row by row without --limit: progress says "N of ?" (None), never a
    total smaller than what was done (before: the total was 1, so "scanned 4/1")."""
    from _row_fixtures import contract_rows, write_jsonl

    rows = contract_rows(qwen3) * 4  # four rows, one rollout each
    p = write_jsonl(rows, tmp_path / "rows.jsonl")
    seen = []
    res = scan_source(str(p), progress=lambda d, t: seen.append((d, t)), chunk_rollouts=1)
    assert res["totals"]["rollouts"] == len(rows) > 1
    assert seen and all(t is None for _, t in seen) and seen[-1][0] == len(rows)
    seen.clear()
    scan_source(str(p), limit=2, progress=lambda d, t: seen.append((d, t)), chunk_rollouts=1)
    assert seen[-1] == (2, 2)
