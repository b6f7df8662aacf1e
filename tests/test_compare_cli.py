"""``python -m viewer compare A B [--json]``: the documented JSON, dataset rows, exit codes."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from test_comparison import raw_sequences

from viewer import cli

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_data"
KEYS = {"a_turn", "b_turn", "common_prefix", "first_divergence"}
DIV_KEYS = {"position", "part", "a_id", "b_id", "a_text", "b_text"}
TEXT_KEYS = {"common_bytes", "a_bytes", "b_bytes", "divergence_byte", "a_common_tokens", "b_common_tokens",
             "a_token", "b_token", "a_run", "b_run"}


@pytest.mark.slow  # a fresh Python process running the whole CLI
def test_self_compare_in_a_subprocess_finds_no_divergence():
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-m", "viewer", "compare", "sample_data/qwen3-tiny", "sample_data/qwen3-tiny",
                          "--json"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["identical"] is True
    raw = raw_sequences(SAMPLES / "qwen3-tiny")
    assert len(doc["turns"]) == len(raw)
    for t, (_, ids, _) in zip(doc["turns"], raw):
        assert KEYS <= set(t) and t["first_divergence"] is None and t["common_prefix"] == len(ids)
        assert t["alignment"] == "ids" and t["text"] is None


def test_two_tokenizers_json_aligns_by_text(capsys):
    """qwen3-tiny vs smollm2: different vocabularies, so each pair is aligned by text; the first
    differing byte is the one of the two records' texts (decoded by each model's own tokenizer)."""
    from viewer.tokenizer import load_local, load_qwen3

    assert cli.main(["compare", str(SAMPLES / "qwen3-tiny"), str(SAMPLES / "smollm2"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    toks = load_qwen3(), load_local(str(SAMPLES / "smollm2" / "tokenizer"))
    ra, rb = raw_sequences(SAMPLES / "qwen3-tiny"), raw_sequences(SAMPLES / "smollm2")
    assert doc["identical"] is False and len(doc["turns"]) == len(ra) == len(rb)
    for t, (_, a, _), (_, b, _) in zip(doc["turns"], ra, rb):
        ta, tb = (tok.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False).encode()
                  for tok, ids in zip(toks, (a, b)))
        k = len(os.path.commonprefix([ta, tb]))
        d, text = t["first_divergence"], t["text"]
        assert t["alignment"] == "text" and set(text) == TEXT_KEYS and text["common_bytes"] == k
        if ta == tb:
            assert d is None and text["divergence_byte"] is None
            continue
        assert set(d) == DIV_KEYS and text["divergence_byte"] == k and d["position"] > 0
        assert d["position"] == t["common_prefix"] == text["a_common_tokens"] == text["a_token"]["position"]
        assert (d["a_id"], d["b_id"]) == (a[d["position"]], b[text["b_token"]["position"]])
        assert text["a_token"]["start"] <= k < text["a_token"]["end"] and text["b_token"]["start"] <= k < text["b_token"]["end"]
    assert doc["alignment"] == "text"


def test_plain_output_says_it_aligned_by_text(capsys):
    assert cli.main(["compare", str(SAMPLES / "qwen3-tiny"), str(SAMPLES / "smollm2")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[2].startswith("aligned by text (tokenizers differ: ") and "smollm2" in out[2]
    assert not any("diverges at 0 " in line for line in out) and any("diverges at byte " in line for line in out)


def test_plain_output_lists_every_pair(capsys):
    assert cli.main(["compare", str(SAMPLES / "qwen3-tiny"), str(SAMPLES / "qwen3-tiny")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("A: ") and out[1].startswith("B: ") and out[-1] == "identical"
    assert sum("identical (" in line for line in out) == len(raw_sequences(SAMPLES / "qwen3-tiny"))


def test_two_rows_of_a_dataset(capsys, realdata, tmp_path):
    """Two episodes of one Harbor task (rows of one traces file): the same row is identical; the
    two rows' first agent turns share a prefix and the JSON says where they part."""
    src = realdata / "harbor-golden-traces" / "openhands__hello-world.traces.json"
    f = tmp_path / "rows.traces.json"
    shutil.copy(src, f)
    assert cli.main(["compare", str(f), str(f), "--a-row", "1", "--b-row", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["identical"] is True
    assert cli.main(["compare", str(f), str(f), "--a-row", "0", "--b-row", "1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["a"].endswith("row 0") and doc["b"].endswith("row 1") and not doc["identical"]
    rows = json.loads(src.read_text())
    # one derived turn per assistant message (FORMATS); the k-th turns agree exactly when the two
    # conversations agree up to and including the k-th assistant message
    convs = [r["conversations"] for r in rows[:2]]
    ends = [[i for i, m in enumerate(c) if m["role"] == "assistant"] for c in convs]
    assert len(doc["turns"]) == max(len(e) for e in ends)
    for k, t in enumerate(doc["turns"]):
        if k < len(ends[0]) and k < len(ends[1]):
            same = convs[0][: ends[0][k] + 1] == convs[1][: ends[1][k] + 1]
            assert (t["first_divergence"] is None) == same
        else:
            d = t["first_divergence"]
            assert d["position"] == 0 and (d["a_id"] is None) == (k >= len(ends[0]))


def test_errors_exit_codes(tmp_path, capsys):
    assert cli.main(["compare", str(tmp_path / "missing"), str(SAMPLES / "qwen3-tiny")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:")
    bad = tmp_path / "trace.json"
    bad.write_text("{not json")
    assert cli.main(["compare", str(SAMPLES / "qwen3-tiny"), str(bad)]) == 2
    assert capsys.readouterr().err.startswith("error:")
    assert cli.main(["compare", str(SAMPLES / "qwen3-tiny"), str(SAMPLES / "qwen3-tiny"), "--b-row", "2"]) == 2
